/**
 * CLI contexts, like `nats context`: named connection settings in one JSON file, so a command
 * names a context instead of repeating servers, users and store URLs — and no password ever rides
 * in a URL, a process list or a log. A context holds no secret: only where the password is (an
 * environment variable's name, or a file of its own, mode 0600).
 *
 *   { "selected": "ops",
 *     "contexts": { "ops": { "store": "jetstream:nats://127.0.0.1:14222", "nats": "nats://127.0.0.1:14222",
 *                            "user": "operator", "passwordFile": "/home/me/.config/convoke/operator.password" } } }
 *
 * The file: `--contexts FILE`, else $CONVOKE_CONTEXTS, else $XDG_CONFIG_HOME/convoke/contexts.json
 * (~/.config/convoke/contexts.json). The context: `--context NAME`, else $CONVOKE_CONTEXT, else the
 * file's `selected`. A flag given on the command line wins over the context's value.
 *
 * Trust: the file decides which secret is read and where it is sent, so a contexts file writable
 * by group or others, or in a directory anyone may write (without the sticky bit), is refused; a
 * password, credentials or token file readable by group or others is refused (like ssh's keys).
 * The file itself may be world-readable: it holds no secret.
 *
 * Which command may use which field is connection.ts's `contextFieldsOf`: a context naming a
 * field the command cannot use is an error naming it.
 */
import { chmod, mkdir, rename, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { invalidInput } from '../contract/errors.js';
import { compileChecker } from '../contract/validation.js';
import { readJsonFile } from '../deployment/files.js';
import type { FromSchema } from 'json-schema-to-ts';
import { limits } from '../contract/limits.js';

export const contextNamePattern = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$';
const textMax = limits.cliContextTextCharsMax;

/** Every field of a context, in the order `show` prints them. */
export const contextFields = [
  'description',
  'store',
  'nats',
  'user',
  'principal',
  'passwordEnv',
  'passwordFile',
  'creds',
  'endpoint',
  'tokenEnv',
  'tokenFile',
] as const;
export type ContextField = (typeof contextFields)[number];

const variablePattern = '^[A-Za-z_][A-Za-z0-9_]{0,127}$';

/** One context: every field optional; a command takes what it needs and says what is missing. */
const contextSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    description: { type: 'string', maxLength: 200 },
    /** Store URL for the operator commands (inspect, list, tail, replay, get/cancel ids); no password in it. */
    store: { type: 'string', minLength: 1, maxLength: textMax },
    /** NATS server URL(s), comma-separated, for invoke, get and cancel; no password in them. */
    nats: { type: 'string', minLength: 1, maxLength: textMax },
    /** NATS user: the command principal (unless `principal`), and the store's user on jetstream:/esdb: when its URL names none. */
    user: { type: 'string', minLength: 1, maxLength: 256 },
    principal: { type: 'string', minLength: 1, maxLength: 256 },
    /** The environment variable holding the password (its name, never its value). */
    passwordEnv: { type: 'string', pattern: variablePattern },
    /** A file holding the password (one line), readable by its owner only. */
    passwordFile: { type: 'string', minLength: 1, maxLength: textMax },
    /** A NATS credentials file (user JWT and nkey seed, as nsc writes it), readable by its owner only: instead of a password. */
    creds: { type: 'string', minLength: 1, maxLength: textMax },
    /** A convoke HTTP facade for `workflow run`'s contract calls; no credential in it. */
    endpoint: { type: 'string', pattern: '^https?://', maxLength: textMax },
    /** The environment variable holding the bearer token for `endpoint` (its name). */
    tokenEnv: { type: 'string', pattern: variablePattern },
    /** A file holding the bearer token for `endpoint`, readable by its owner only. */
    tokenFile: { type: 'string', minLength: 1, maxLength: textMax },
  },
  // Two places for one secret would leave which one wins to be guessed.
  not: {
    anyOf: [
      { required: ['passwordEnv', 'passwordFile'] },
      { required: ['passwordEnv', 'creds'] },
      { required: ['passwordFile', 'creds'] },
      { required: ['tokenEnv', 'tokenFile'] },
    ],
  },
} as const;

export const contextsFileSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['contexts'],
  properties: {
    selected: { type: 'string', pattern: contextNamePattern },
    contexts: {
      type: 'object',
      maxProperties: limits.cliContextsMax,
      propertyNames: { pattern: contextNamePattern },
      additionalProperties: contextSchema,
    },
  },
} as const;

/** The types are derived from the schemas: a field added to a schema is a field of the type (`not` is checked by the schema only). */
export type CliContext = FromSchema<typeof contextSchema>;
export type ContextsFile = FromSchema<typeof contextsFileSchema>;

const checkShape = compileChecker<ContextsFile>(contextsFileSchema, 'contexts file');

/** The file's content checked: the schema (every error at once), then what a schema cannot say. */
export function checkContextsFile(value: unknown, file: string): ContextsFile {
  let parsed: ContextsFile;
  try {
    parsed = checkShape(value);
  } catch (error) {
    throw invalidInput(`${file}: ${(error as Error).message}`, error);
  }
  for (const [name, context] of Object.entries(parsed.contexts)) checkContext(context, `${file}: /contexts/${name}`);
  if (parsed.selected !== undefined && parsed.contexts[parsed.selected] === undefined)
    throw invalidInput(`${file}: /selected names "${parsed.selected}", which is not in /contexts`);
  return parsed;
}

/** A context's URLs carry no password: it belongs in passwordEnv or passwordFile. */
export function checkContext(context: CliContext, where: string): void {
  for (const field of ['store', 'nats', 'endpoint'] as const) {
    const value = context[field];
    if (value !== undefined && carriesPassword(value))
      throw invalidInput(
        `${where}/${field} carries a ${field === 'endpoint' ? 'credential' : 'password'}: remove it from the URL and name it with ${field === 'endpoint' ? 'tokenEnv or tokenFile' : 'passwordEnv, passwordFile or creds'}`,
      );
  }
}

/**
 * `pass=`/`password=`/`token=` in a query, or `user:password@` in any of the comma-separated URLs,
 * whose scheme may be nested (`jetstream:nats://user:password@host`).
 */
export function carriesPassword(url: string): boolean {
  return /[?&](pass(word)?|(access_)?token)=/i.test(url) || url.split(',').some((part) => /^([a-z][a-z0-9+.-]*:)+\/\/[^/@]*:[^/@]*@/i.test(part.trim()));
}

/** Where the contexts file is: the flag, $CONVOKE_CONTEXTS, else the XDG config directory. `named`: not the default. */
export function contextsFilePath(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): { path: string; named: boolean } {
  if (flag !== undefined) return { path: flag, named: true };
  if (env.CONVOKE_CONTEXTS) return { path: env.CONVOKE_CONTEXTS, named: true };
  const config = env.XDG_CONFIG_HOME ? env.XDG_CONFIG_HOME : join(env.HOME ?? homedir(), '.config');
  return { path: join(config, 'convoke', 'contexts.json'), named: false };
}

/** The contexts file, or undefined when it does not exist. A group- or world-writable file is refused. */
export async function readContextsFile(path: string): Promise<ContextsFile | undefined> {
  let mode: number;
  try {
    mode = (await stat(path)).mode;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
    throw invalidInput(`cannot read contexts file ${path}: ${(error as Error).message}`, error);
  }
  await refuseWritableByOthers(path, mode, 'contexts file');
  return checkContextsFile(await readJsonFile(path, `contexts file ${path}`), path);
}

async function refuseWritableByOthers(path: string, mode: number, what: string): Promise<void> {
  if (process.platform === 'win32') return;
  if ((mode & 0o022) !== 0)
    throw invalidInput(`${what} ${path} is writable by group or others (mode ${octal(mode)}): it decides which password is sent where; chmod go-w it`);
  const parent = dirname(path);
  const parentMode = (await stat(parent)).mode;
  // A sticky directory (/tmp) lets others create files but not replace this one. A group-writable
  // directory is allowed: with umask 002 (a group per user) every directory a user makes is one.
  if ((parentMode & 0o002) !== 0 && (parentMode & 0o1000) === 0)
    throw invalidInput(`${what} ${path} is in ${parent}, writable by anyone (mode ${octal(parentMode)}): anyone could replace it`);
}

export const octal = (mode: number) => `0${(mode & 0o7777).toString(8)}`;

/** Writes the file whole (a temporary file renamed over it), owner-only, creating its directory owner-only. */
export async function writeContextsFile(path: string, file: ContextsFile): Promise<void> {
  checkContextsFile(file, path);
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  const ordered = { ...(file.selected === undefined ? {} : { selected: file.selected }), contexts: file.contexts };
  await writeFile(temporary, JSON.stringify(ordered, null, 2) + '\n', { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, path);
}

export interface ContextChoice {
  /** The contexts file's path (whether or not it exists). */
  path: string;
  file: ContextsFile | undefined;
  /** The context in effect, if any. */
  name?: string;
  context?: CliContext;
}

/**
 * The context a command runs with: `--context`, else $CONVOKE_CONTEXT, else the file's selected
 * one; none when nothing names one and the default file does not exist. A file named by flag or
 * environment that does not exist is an error, and so is a context name the file lacks.
 */
export async function chooseContext(flags: { context?: string; contexts?: string }, env: NodeJS.ProcessEnv = process.env): Promise<ContextChoice> {
  const { path, named } = contextsFilePath(flags.contexts, env);
  const file = await readContextsFile(path);
  const wanted = flags.context ?? (env.CONVOKE_CONTEXT ? env.CONVOKE_CONTEXT : undefined);
  if (file === undefined) {
    if (named || wanted !== undefined) throw invalidInput(`no contexts file at ${path}${named ? '' : ' (add one with convoke context add)'}`);
    return { path, file };
  }
  const name = wanted ?? file.selected;
  if (name === undefined) return { path, file };
  const context = file.contexts[name];
  if (context === undefined) throw invalidInput(`no context "${name}" in ${path}; it has ${namesOf(file)}`);
  return { path, file, name, context };
}

export function namesOf(file: ContextsFile): string {
  const names = Object.keys(file.contexts);
  return names.length === 0 ? 'none' : names.map((n) => `"${n}"`).join(', ');
}
