/**
 * The connection options commands share, and how a command resolves them against the context in
 * effect (connection.ts): so that every command that connects takes the same flags, the same way.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { requireNats, requireStore, resolveConnection, type ConnectionFlags, type ContextUser, type StoreAuth } from './connection.js';

/** The `workflow` command: found when another module made it, else made here (its subcommands are added by several modules). */
export function workflowCommand(program: Command): Command {
  return (
    program.commands.find((command) => command.name() === 'workflow') ??
    program.command('workflow').description('workflows: pipelines and Serverless Workflow 1.0.3 documents pinned in a bundle')
  );
}

/** A repeatable option's parser (--with, --http-allow): its values in the order given. */
export function repeatable(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/**
 * A non-negative integer option's parser (--wait-ms, --seed). Its refusal is commander's, which
 * names the option and the value given (exit 2, as any usage error).
 */
export function nonNegativeInteger(value: string): number {
  if (!/^[0-9]+$/.test(value)) throw new InvalidArgumentError('expected a non-negative integer');
  return Number(value);
}

const contextsHelp = 'contexts file (default $CONVOKE_CONTEXTS, else contexts.json in $XDG_CONFIG_HOME/convoke)';

/** --context and --contexts, on every client command (invoke, get, cancel, the store commands, workflow start|get|inspect). */
export function contextOptions(command: Command): Command {
  return command
    .option('--context <name>', 'the named connection settings to use (default $CONVOKE_CONTEXT, else the selected context)')
    .option('--contexts <file>', contextsHelp);
}

/** --context and --contexts on a command that starts something (serve, peer, demo, workflow run): only a context it is given. */
export function startContextOptions(command: Command): Command {
  return command
    .option('--context <name>', 'the named connection settings to use (only when named: the selected context and $CONVOKE_CONTEXT are for client commands)')
    .option('--contexts <file>', contextsHelp);
}

export const credsHelp = "NATS credentials file (user JWT and nkey seed, mode 0600) to log in with instead of a password (default: the context's)";

/** --creds: a store command's login to a jetstream: store. */
export function storeCredsOption(command: Command): Command {
  return command.option('--creds <file>', "NATS credentials file (mode 0600) a jetstream: store logs in with (default: the context's)");
}

/**
 * How a command principal reaches the coordinators over NATS: servers, user, how it logs in and
 * the principal; each from the flag, else the context (connection.ts).
 */
export function natsPrincipalOptions(command: Command): Command {
  return contextOptions(command)
    .option('--nats <url>', "NATS server URL(s), comma-separated (default: the context's)")
    .option('--user <user>', "NATS user, the command principal unless --principal (default: the context's)")
    .option('--password-env <name>', "environment variable holding the NATS password (default: the context's password, else CONVOKE_NATS_PASSWORD)")
    .option('--creds <file>', credsHelp)
    .option('--principal <id>', 'command principal (subject token); defaults to the user');
}

/** A store command's --store, from the flag or the context, with the store's login (the context's, or --creds). */
export async function storeOf(o: ConnectionFlags, command: string): Promise<{ store: string; storeAuth?: StoreAuth }> {
  const connection = await resolveConnection(o, process.env, { command, user: 'client' });
  return { store: requireStore(connection, command), ...(connection.storeAuth ? { storeAuth: connection.storeAuth } : {}) };
}

/** A NATS client command's servers, identity and login (from the flags or the context), and the store that resolves short ids. */
export async function natsClientOf(o: ConnectionFlags, command: string) {
  const c = await resolveConnection(o, process.env, { command, user: 'client' });
  return { ...requireNats(c, command), store: c.store, storeAuth: c.storeAuth };
}

/**
 * get's: over NATS when --nats is given or the context has servers, except that `get --store URL`
 * alone reads that store as an operator, as it did before contexts.
 */
export async function getClientOf(o: ConnectionFlags) {
  const c = await resolveConnection(o, process.env, { command: 'get', user: 'client' });
  const operatorRead = o.nats === undefined && (o.store !== undefined || c.nats === undefined);
  const client = { login: c.login, principal: c.principal, store: c.store, storeAuth: c.storeAuth };
  return operatorRead ? client : { ...client, ...requireNats(c, 'get') };
}

/** The connection of a command that starts something: only the context --context names, and only the fields it can use. */
export async function startConnectionOf(o: ConnectionFlags, command: string, user: Exclude<ContextUser, 'client'>) {
  return resolveConnection(o, process.env, { command, user });
}
