/**
 * `convoke context add|ls|show|rm|select`: the named connection settings of contexts.ts. Nothing
 * here prints a secret: a context names where its password is (an environment variable, a password
 * file), and `show` says only whether it is there.
 */
import { stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { conflict, invalidInput } from '../../contract/errors.js';
import { redactStoreUrl } from '../../adapters/store/open.js';
import {
  checkContext,
  contextFields,
  contextNamePattern,
  contextsFilePath,
  namesOf,
  octal,
  readContextsFile,
  writeContextsFile,
  type CliContext,
  type ContextsFile,
} from '../contexts.js';
import type { CliIo } from '../io.js';
import { checkSecretFile, describeSource, readCredsFile, readPassword } from '../secrets.js';
import { renderTable, widthOf } from '../table.js';
import { limits } from '../../contract/limits.js';

export interface ContextAddOptions extends CliContext {
  contexts?: string;
  select?: boolean;
  force?: boolean;
}

/** Adds (or with --force replaces) a context; the first one added is selected, and so is any with --select. */
export async function contextAddCommand(name: string, options: ContextAddOptions, io: CliIo): Promise<number> {
  if (!new RegExp(contextNamePattern).test(name)) throw invalidInput(`context name ${JSON.stringify(name)} must match ${contextNamePattern}`);
  const context = contextOf(options);
  checkContext(context, `context ${name}`);
  // Checked now, not at first use: a secret file that is missing, readable by others or not what it says is an error.
  if (context.passwordFile !== undefined) await readPassword({ kind: 'file', path: context.passwordFile });
  if (context.creds !== undefined) await readCredsFile(context.creds);
  if (context.tokenFile !== undefined) await checkSecretFile(context.tokenFile, 'token file', limits.tokenFileBytesMax);
  const { path } = contextsFilePath(options.contexts);
  const file: ContextsFile = (await readContextsFile(path)) ?? { contexts: {} };
  if (file.contexts[name] !== undefined && options.force !== true) throw conflict(`context "${name}" exists in ${path}: give --force to replace it`);
  if (file.contexts[name] === undefined && Object.keys(file.contexts).length >= limits.cliContextsMax)
    throw invalidInput(`${path} holds ${limits.cliContextsMax} contexts already`);
  file.contexts[name] = context;
  if (options.select === true || file.selected === undefined) file.selected = name;
  await writeContextsFile(path, file);
  io.stdout.write(`context "${name}" saved in ${path}${file.selected === name ? ' (selected)' : ''}\n`);
  return 0;
}

function contextOf(options: ContextAddOptions): CliContext {
  const logins = [options.passwordEnv, options.passwordFile, options.creds].filter((v) => v !== undefined);
  if (logins.length > 1) throw invalidInput('give one of --password-env, --password-file and --creds');
  if (options.tokenEnv !== undefined && options.tokenFile !== undefined) throw invalidInput('give --token-env or --token-file, not both');
  const context: CliContext = {};
  for (const field of contextFields) {
    const value = options[field];
    if (value !== undefined) context[field] = value;
  }
  return context;
}

/** The file a command other than add works on: it must exist when named; the default may be absent. */
async function existingFile(flag: string | undefined): Promise<{ path: string; file: ContextsFile | undefined }> {
  const { path, named } = contextsFilePath(flag);
  const file = await readContextsFile(path);
  if (file === undefined && named) throw invalidInput(`no contexts file at ${path}`);
  return { path, file };
}

async function requireFile(flag: string | undefined): Promise<{ path: string; file: ContextsFile }> {
  const { path, file } = await existingFile(flag);
  if (file === undefined) throw invalidInput(`no contexts file at ${path} (add one with convoke context add)`);
  return { path, file };
}

function requireContext(file: ContextsFile, path: string, name: string): CliContext {
  const context = file.contexts[name];
  if (context === undefined) throw invalidInput(`no context "${name}" in ${path}; it has ${namesOf(file)}`);
  return context;
}

export async function contextListCommand(options: { contexts?: string; json: boolean }, io: CliIo): Promise<number> {
  const { path, file } = await existingFile(options.contexts);
  const entries = Object.entries(file?.contexts ?? {});
  if (options.json) {
    const contexts = entries.map(([name, c]) => ({ name, selected: name === file?.selected, ...c }));
    io.stdout.write(JSON.stringify({ file: path, selected: file?.selected ?? null, contexts }, null, 2) + '\n');
    return 0;
  }
  if (entries.length === 0) {
    io.stdout.write(`no contexts in ${path}${file === undefined ? ' (the file does not exist)' : ''}\n`);
    return 0;
  }
  const rows = entries.map(([name, c]) => [
    `${name === file?.selected ? '*' : ' '} ${name}`,
    c.store === undefined ? null : redactStoreUrl(c.store),
    c.nats === undefined ? null : redactStoreUrl(c.nats),
    c.user,
    passwordCell(c),
    c.description,
  ]);
  io.stdout.write(renderTable(['name', 'store', 'nats', 'user', 'password', 'description'], rows, widthOf(io)));
  return 0;
}

const passwordCell = (c: CliContext) =>
  c.passwordEnv !== undefined
    ? `env ${c.passwordEnv}`
    : c.passwordFile !== undefined
      ? `file ${c.passwordFile}`
      : c.creds !== undefined
        ? `creds ${c.creds}`
        : null;

export async function contextShowCommand(
  name: string | undefined,
  options: { contexts?: string; json: boolean },
  io: CliIo,
  env = process.env,
): Promise<number> {
  const { path, file } = await requireFile(options.contexts);
  const shown = name ?? file.selected;
  if (shown === undefined) throw invalidInput(`no context is selected in ${path}: name one (it has ${namesOf(file)})`);
  const context = requireContext(file, path, shown);
  const password = await passwordState(context, env);
  const token = await tokenState(context, env);
  if (options.json) {
    io.stdout.write(JSON.stringify({ file: path, name: shown, selected: shown === file.selected, ...context, password, token }, null, 2) + '\n');
    return 0;
  }
  const rows: [string, string | undefined][] = [
    ['name', `${shown}${shown === file.selected ? ' (selected)' : ''}`],
    ['file', path],
    ['description', context.description],
    ['store', context.store === undefined ? undefined : redactStoreUrl(context.store)],
    ['nats', context.nats === undefined ? undefined : redactStoreUrl(context.nats)],
    ['user', context.user],
    ['principal', context.principal ?? (context.user === undefined ? undefined : `${context.user} (the user)`)],
    ['password', password === null ? undefined : `${password.source}: ${password.state}`],
    ['endpoint', context.endpoint === undefined ? undefined : redactStoreUrl(context.endpoint)],
    ['token', token === null ? undefined : `${token.source}: ${token.state}`],
  ];
  io.stdout.write(renderTable(['field', 'value'], rows, widthOf(io)));
  return 0;
}

/** Where the password (or the credentials file) is and whether it is there: never the value. */
async function passwordState(context: CliContext, env: NodeJS.ProcessEnv): Promise<{ source: string; state: string } | null> {
  if (context.passwordEnv !== undefined) return variableState(describeSource({ kind: 'env', name: context.passwordEnv }), context.passwordEnv, env);
  if (context.passwordFile !== undefined) return fileState(describeSource({ kind: 'file', path: context.passwordFile }), context.passwordFile);
  if (context.creds !== undefined) return fileState(describeSource({ kind: 'creds', path: context.creds }), context.creds);
  return null;
}

/** Where the endpoint's bearer token is and whether it is there: never the value. */
async function tokenState(context: CliContext, env: NodeJS.ProcessEnv): Promise<{ source: string; state: string } | null> {
  if (context.tokenEnv !== undefined) return variableState(`environment variable ${context.tokenEnv}`, context.tokenEnv, env);
  if (context.tokenFile !== undefined) return fileState(`token file ${context.tokenFile}`, context.tokenFile);
  return null;
}

const variableState = (source: string, name: string, env: NodeJS.ProcessEnv) => ({ source, state: env[name] ? 'set (value not shown)' : 'not set' });

async function fileState(source: string, path: string): Promise<{ source: string; state: string }> {
  try {
    const info = await stat(path);
    const open = (info.mode & 0o077) !== 0;
    return { source, state: `mode ${octal(info.mode)}${open ? ', readable by others: refused until chmod 600' : ''} (value not shown)` };
  } catch (error) {
    return { source, state: `missing (${(error as { code?: string }).code ?? 'unreadable'})` };
  }
}

export async function contextRemoveCommand(name: string, options: { contexts?: string }, io: CliIo): Promise<number> {
  const { path, file } = await requireFile(options.contexts);
  requireContext(file, path, name);
  delete file.contexts[name];
  if (file.selected === name) delete file.selected;
  await writeContextsFile(path, file);
  io.stdout.write(`context "${name}" removed from ${path}${file.selected === undefined ? '; no context is selected' : ''}\n`);
  return 0;
}

export async function contextSelectCommand(name: string, options: { contexts?: string }, io: CliIo): Promise<number> {
  const { path, file } = await requireFile(options.contexts);
  requireContext(file, path, name);
  file.selected = name;
  await writeContextsFile(path, file);
  io.stdout.write(`context "${name}" selected in ${path}\n`);
  return 0;
}

/** Registers `convoke context …`. */
export function addContextCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  const context = program
    .command('context')
    .description(
      'named connection settings (store, NATS servers, user, where the password or credentials are; an HTTP endpoint and its token), like nats context',
    );
  const fileOption = '--contexts <file>';
  const fileHelp = 'contexts file (default $CONVOKE_CONTEXTS, else contexts.json in $XDG_CONFIG_HOME/convoke)';
  context
    .command('add')
    .argument('<name>', 'context name')
    .description('add a context (the first one added is selected); --force replaces one')
    .option('--store <url>', 'store URL, without a password (sqlite:PATH, jetstream:nats://HOST:PORT, esdb://…)')
    .option('--nats <url>', 'NATS server URL(s), comma-separated, without a password')
    .option('--user <user>', 'NATS user (also the store user on jetstream:/esdb: when the URL names none)')
    .option('--principal <id>', 'command principal; defaults to the user')
    .option('--password-env <name>', 'the environment variable that holds the password (its name is stored, not its value)')
    .option('--password-file <path>', 'a file holding the password (mode 0600)')
    .option('--creds <path>', 'a NATS credentials file (user JWT and nkey seed, mode 0600), instead of a password')
    .option('--endpoint <url>', "a convoke HTTP facade for workflow run's contract calls, without a credential")
    .option('--token-env <name>', 'the environment variable that holds the bearer token for the endpoint')
    .option('--token-file <path>', 'a file holding the bearer token for the endpoint (mode 0600)')
    .option('--description <text>', 'a note for ls and show')
    .option('--select', 'select it', false)
    .option('--force', 'replace a context of the same name', false)
    .option(fileOption, fileHelp)
    .action(async (name: string, o) => setExit(await contextAddCommand(name, o, io)));
  context
    .command('ls')
    .description('list the contexts (* marks the selected one)')
    .option('--json', 'machine-readable output', false)
    .option(fileOption, fileHelp)
    .action(async (o) => setExit(await contextListCommand(o, io)));
  context
    .command('show')
    .argument('[name]', 'context name (the selected one when absent)')
    .description('show a context; a password is never shown, only where it is and whether it is there')
    .option('--json', 'machine-readable output', false)
    .option(fileOption, fileHelp)
    .action(async (name: string | undefined, o) => setExit(await contextShowCommand(name, o, io)));
  context
    .command('rm')
    .argument('<name>', 'context name')
    .description('remove a context')
    .option(fileOption, fileHelp)
    .action(async (name: string, o) => setExit(await contextRemoveCommand(name, o, io)));
  context
    .command('select')
    .argument('<name>', 'context name')
    .description('make a context the default of every connecting command')
    .option(fileOption, fileHelp)
    .action(async (name: string, o) => setExit(await contextSelectCommand(name, o, io)));
}
