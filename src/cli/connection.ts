/**
 * What a connecting command runs with: its flags over the context in effect (contexts.ts). A flag
 * on the command line wins; a context fills what the flags leave out; the NATS password comes from
 * `--password-env`, else the context's passwordEnv or passwordFile, else $CONVOKE_NATS_PASSWORD.
 */
import { invalidInput } from '../contract/errors.js';
import { chooseContext, type CliContext } from './contexts.js';
import type { PasswordSource } from './secrets.js';

export const passwordEnvDefault = 'CONVOKE_NATS_PASSWORD';

/** The flags every connecting command may have (each command declares those it takes). */
export interface ConnectionFlags {
  context?: string;
  contexts?: string;
  store?: string;
  nats?: string;
  user?: string;
  passwordEnv?: string;
  principal?: string;
}

/** The store's user and where its password is (a context's), for jetstream: and esdb: stores. */
export interface StoreAuth {
  user: string;
  password: PasswordSource;
}

export interface Connection {
  /** The context in effect, if any (for messages). */
  contextName?: string;
  store?: string;
  storeAuth?: StoreAuth;
  nats?: string;
  user?: string;
  principal?: string;
  password: PasswordSource;
}

export async function resolveConnection(flags: ConnectionFlags, env: NodeJS.ProcessEnv = process.env): Promise<Connection> {
  const { name, context } = await chooseContext(flags, env);
  const ctx: CliContext = context ?? {};
  const contextPassword = passwordOfContext(ctx);
  const password: PasswordSource =
    flags.passwordEnv !== undefined ? { kind: 'env', name: flags.passwordEnv } : (contextPassword ?? { kind: 'env', name: passwordEnvDefault });
  const connection: Connection = { password };
  if (name !== undefined) connection.contextName = name;
  const store = flags.store ?? ctx.store;
  if (store !== undefined) connection.store = store;
  if (ctx.user !== undefined && contextPassword !== undefined) connection.storeAuth = { user: ctx.user, password: contextPassword };
  const nats = flags.nats ?? ctx.nats;
  if (nats !== undefined) connection.nats = nats;
  const user = flags.user ?? ctx.user;
  if (user !== undefined) connection.user = user;
  const principal = flags.principal ?? ctx.principal;
  if (principal !== undefined) connection.principal = principal;
  return connection;
}

function passwordOfContext(ctx: CliContext): PasswordSource | undefined {
  if (ctx.passwordEnv !== undefined) return { kind: 'env', name: ctx.passwordEnv };
  if (ctx.passwordFile !== undefined) return { kind: 'file', path: ctx.passwordFile };
  return undefined;
}

/** The store URL a store command needs: from --store or the context. */
export function requireStore(connection: Connection, command: string): string {
  if (connection.store !== undefined) return connection.store;
  throw invalidInput(`${command} needs a store: give --store URL, or a context with one (${contextHint(connection)})`);
}

/** The NATS servers and user a command over NATS needs: from the flags or the context. */
export function requireNats(connection: Connection, command: string): { nats: string; user: string } {
  if (connection.nats !== undefined && connection.user !== undefined) return { nats: connection.nats, user: connection.user };
  const missing = [connection.nats === undefined ? '--nats' : undefined, connection.user === undefined ? '--user' : undefined].filter(Boolean).join(' and ');
  throw invalidInput(`${command} needs ${missing}, or a context with nats and user (${contextHint(connection)})`);
}

function contextHint(connection: Connection): string {
  return connection.contextName === undefined
    ? 'no context is in effect: --context NAME, or convoke context add/select'
    : `context "${connection.contextName}" has none`;
}
