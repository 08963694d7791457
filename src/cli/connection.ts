/**
 * What a connecting command runs with: its flags over the context in effect (contexts.ts). A flag
 * on the command line wins; a context fills what the flags leave out. The NATS login is `--creds`,
 * else `--password-env`, else the context's creds, passwordEnv or passwordFile, else the password
 * in $CONVOKE_NATS_PASSWORD.
 *
 * Which context: the client commands (invoke, get, cancel, list, inspect, tail, replay, workflow
 * start|get|inspect) take `--context`, else $CONVOKE_CONTEXT, else the selected one. The commands
 * that start something (serve, peer, demo, workflow run) take a context only from `--context`: a
 * server or a demo started under whatever the shell had selected would connect as, or write into,
 * a deployment nobody named.
 *
 * What a context may hold for a command (`contextFieldsOf`): a field the command cannot use is an
 * error naming it, never silently ignored. The client commands share one set — one context serves
 * a principal's invoke, get and cancel (with a store to resolve short ids) and an operator's list.
 */
import { invalidInput } from '../contract/errors.js';
import { chooseContext, contextFields, type CliContext, type ContextField } from './contexts.js';
import type { NatsLogin } from '../adapters/transport/nats-creds.js';
import { readLogin, type LoginSource } from './secrets.js';

export const passwordEnvDefault = 'CONVOKE_NATS_PASSWORD';

/** The flags every connecting command may have (each command declares those it takes). */
export interface ConnectionFlags {
  context?: string;
  contexts?: string;
  store?: string;
  nats?: string;
  user?: string;
  passwordEnv?: string;
  creds?: string;
  principal?: string;
}

/** Who is asking: the client commands share a context's fields; each command that starts something has its own. */
export type ContextUser = 'client' | 'serve' | 'peer' | 'demo' | 'workflow-run';

const login: ContextField[] = ['user', 'passwordEnv', 'passwordFile', 'creds'];

/**
 * The context fields each kind of command can use (description is for everyone). The login
 * fields are a store's login for demo and workflow run (a jetstream: or esdb: store), the
 * coordinator's NATS login for serve, the peer's for peer.
 */
export const contextFieldsOf: Record<ContextUser, readonly ContextField[]> = {
  client: ['store', 'nats', 'principal', ...login],
  serve: ['store', 'nats', ...login],
  peer: ['nats', ...login],
  demo: ['store', ...login],
  'workflow-run': ['store', 'principal', 'endpoint', 'tokenEnv', 'tokenFile', ...login],
};

/** The store's login (a context's, or --creds), for jetstream: and esdb: stores whose URL names no user. */
export interface StoreAuth {
  user?: string;
  login: LoginSource;
}

export interface Connection {
  /** The context in effect, if any (for messages). */
  contextName?: string;
  store?: string;
  storeAuth?: StoreAuth;
  nats?: string;
  user?: string;
  principal?: string;
  /** How the NATS connection logs in: a password's source (with the user), or a credentials file. */
  login: LoginSource;
  /** Whether the login came from a flag or a context, not the $CONVOKE_NATS_PASSWORD default. */
  loginNamed: boolean;
  endpoint?: string;
  token?: { env: string } | { file: string };
}

export async function resolveConnection(
  flags: ConnectionFlags,
  env: NodeJS.ProcessEnv = process.env,
  who: { command: string; user: ContextUser } = { command: 'this command', user: 'client' },
): Promise<Connection> {
  const { name, context } = await contextFor(flags, env, who);
  const ctx: CliContext = context ?? {};
  if (name !== undefined) refuseUnusable(ctx, name, who);
  if (flags.creds !== undefined && flags.passwordEnv !== undefined) throw invalidInput('give --creds or --password-env, not both');
  const contextLogin = loginOfContext(ctx);
  const flagLogin: LoginSource | undefined =
    flags.creds !== undefined ? { kind: 'creds', path: flags.creds } : flags.passwordEnv !== undefined ? { kind: 'env', name: flags.passwordEnv } : undefined;
  const chosen = flagLogin ?? contextLogin;
  const connection: Connection = { login: chosen ?? { kind: 'env', name: passwordEnvDefault }, loginNamed: chosen !== undefined };
  if (name !== undefined) connection.contextName = name;
  const store = flags.store ?? ctx.store;
  if (store !== undefined) connection.store = store;
  const storeAuth = storeAuthOf(flags, ctx, contextLogin);
  if (storeAuth !== undefined) connection.storeAuth = storeAuth;
  const nats = flags.nats ?? ctx.nats;
  if (nats !== undefined) connection.nats = nats;
  const user = flags.user ?? ctx.user;
  if (user !== undefined) connection.user = user;
  const principal = flags.principal ?? ctx.principal;
  if (principal !== undefined) connection.principal = principal;
  if (ctx.endpoint !== undefined) connection.endpoint = ctx.endpoint;
  if (ctx.tokenEnv !== undefined) connection.token = { env: ctx.tokenEnv };
  if (ctx.tokenFile !== undefined) connection.token = { file: ctx.tokenFile };
  return connection;
}

/** The clients' context by the usual rule; a command that starts something only the one --context names. */
async function contextFor(flags: ConnectionFlags, env: NodeJS.ProcessEnv, who: { command: string; user: ContextUser }) {
  if (who.user === 'client') return chooseContext(flags, env);
  if (flags.context === undefined) {
    if (flags.contexts !== undefined) throw invalidInput(`${who.command} takes a context only by name: give --context NAME with --contexts`);
    return { name: undefined, context: undefined };
  }
  // $CONVOKE_CONTEXT and the selected context are the clients' defaults, not a server's or a demo's.
  const { CONVOKE_CONTEXT: _, ...rest } = env;
  return chooseContext(flags, rest);
}

function refuseUnusable(ctx: CliContext, name: string, who: { command: string; user: ContextUser }): void {
  const usable = contextFieldsOf[who.user];
  const unusable = contextFields.filter((field) => ctx[field] !== undefined && field !== 'description' && !usable.includes(field));
  if (unusable.length === 0) return;
  throw invalidInput(
    `context "${name}" has ${unusable.join(', ')}, which ${who.command} cannot use (it uses ${usable.join(', ')}): use a context for ${who.command}, or give flags instead`,
  );
}

/** --creds, else the context's credentials, else the context's user with its password. */
function storeAuthOf(flags: ConnectionFlags, ctx: CliContext, contextLogin: LoginSource | undefined): StoreAuth | undefined {
  if (flags.creds !== undefined) return { login: { kind: 'creds', path: flags.creds } };
  if (contextLogin?.kind === 'creds') return { login: contextLogin };
  if (ctx.user !== undefined && contextLogin !== undefined) return { user: ctx.user, login: contextLogin };
  return undefined;
}

function loginOfContext(ctx: CliContext): LoginSource | undefined {
  if (ctx.creds !== undefined) return { kind: 'creds', path: ctx.creds };
  if (ctx.passwordEnv !== undefined) return { kind: 'env', name: ctx.passwordEnv };
  if (ctx.passwordFile !== undefined) return { kind: 'file', path: ctx.passwordFile };
  return undefined;
}

/**
 * The login a store gets from a context or --creds, read only for a store that logs in
 * (jetstream:, esdb:); a URL that names its own user keeps it (openStore).
 */
export async function storeLogin(url: string, auth: StoreAuth | undefined, env: NodeJS.ProcessEnv = process.env): Promise<NatsLogin | undefined> {
  if (auth === undefined || !/^(jetstream|esdb|esdb\+discover|eventstoredb):/i.test(url)) return undefined;
  return readLogin(auth.login, auth.user, 'the store', env);
}

/** The store URL a store command needs: from --store or the context. */
export function requireStore(connection: Connection, command: string): string {
  if (connection.store !== undefined) return connection.store;
  throw invalidInput(`${command} needs a store: give --store URL, or a context with one (${contextHint(connection)})`);
}

/**
 * The NATS servers and identity a command over NATS needs, from the flags or the context: servers,
 * and a user — with credentials, a principal alone will do (the credentials identify the connection).
 */
export function requireNats(connection: Connection, command: string): { nats: string; user?: string; principal?: string; login: LoginSource } {
  const named = connection.user ?? (connection.login.kind === 'creds' ? connection.principal : undefined);
  if (connection.nats !== undefined && named !== undefined) {
    return {
      nats: connection.nats,
      login: connection.login,
      ...(connection.user === undefined ? {} : { user: connection.user }),
      ...(connection.principal === undefined ? {} : { principal: connection.principal }),
    };
  }
  const who = connection.login.kind === 'creds' ? '--user or --principal' : '--user';
  const missing = [connection.nats === undefined ? '--nats' : undefined, named === undefined ? who : undefined].filter(Boolean).join(' and ');
  throw invalidInput(
    `${command} needs ${missing}, or a context with ${connection.login.kind === 'creds' ? 'nats and a user or principal' : 'nats and user'} (${contextHint(connection)})`,
  );
}

function contextHint(connection: Connection): string {
  return connection.contextName === undefined
    ? 'no context is in effect: --context NAME, or convoke context add/select'
    : `context "${connection.contextName}" has none`;
}
