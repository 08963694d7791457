/**
 * Opens an EventStore from a store URL (config files and `--store` flags):
 *
 *   memory:                                      process-local, not durable
 *   sqlite:PATH  (sqlite:///abs/path also)       the embedded durable default
 *   jetstream:nats://host:port[?user=&pass=&stream=&prefix=&acceptRecreated=]
 *   esdb://host:2113?tls=false  |  eventstoredb://…   (EventStoreDB connection string)
 *
 * Anything else is invalid-input. A backend that cannot be reached at open is unavailable. A
 * sqlite: file is opened only if it is a convoke store or holds nothing yet (checkStoreFile).
 */
import { AdapterError, AssertionFailure, invalidInput, unavailable } from '../../contract/errors.js';
import type { Clock } from '../../contract/clock.js';
import { JetStreamEventStore } from './jetstream.js';
import { MemoryEventStore } from './memory.js';
import { SqliteEventStore } from './sqlite.js';
import { describeSqliteTables, lookAtSqliteFile, sqliteEffectSinkFile, sqliteOpenFault, sqliteStoreFile, type SqliteFileFound } from './sqlite-open.js';
import type { NatsLogin } from '../transport/nats-creds.js';
import type { StartupWait } from '../transport/nats-startup.js';
import type { EventStore, StoreLimits } from './types.js';

export interface OpenStoreDeps {
  clock: Clock;
  limits?: Partial<StoreLimits>;
  /** Open only a store that exists (operator tools): a missing SQLite file is an error, never created. */
  mustExist?: boolean;
  /**
   * A user and password for jetstream: and esdb: when the URL names no user (a CLI context's, read
   * from an environment variable or a password file): the password never has to be in the URL. Or,
   * for jetstream: only, a NATS credentials file's contents (user JWT and nkey seed).
   */
  credentials?: StoreCredentials;
  /** jetstream: only: wait out a server still starting within this start-up wait (JetStreamStoreOptions.startup). */
  startup?: StartupWait;
  /** jetstream: only: what the store tells once that does not stop it (JetStreamStoreOptions.onNotice). */
  notice?: (line: string) => void;
}

export type StoreCredentials = NatsLogin;

export async function openStore(url: string, deps: OpenStoreDeps): Promise<EventStore> {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  switch (scheme) {
    case 'memory':
      return new MemoryEventStore({ clock: deps.clock, limits: deps.limits });
    case 'sqlite':
      return openSqlite(url.slice('sqlite:'.length), deps);
    case 'jetstream':
      return openJetStream(url.slice('jetstream:'.length), deps);
    case 'esdb':
    case 'eventstoredb':
    case 'esdb+discover': {
      // Loaded only when used: the gRPC client is a third of every process's start-up otherwise.
      const { EventStoreDbStore } = await import('./eventstoredb.js');
      // The client parses `esdb://` (and `esdb+discover://`); eventstoredb:// is our alias.
      return new EventStoreDbStore({ connectionString: withEsdbCredentials(url.replace(/^eventstoredb:/i, 'esdb:'), deps.credentials), limits: deps.limits });
    }
    default:
      throw invalidInput(`unknown store URL ${JSON.stringify(redactStoreUrl(url))}: use memory:, sqlite:PATH, jetstream:nats://host:port or esdb://host:port`);
  }
}

function openSqlite(rest: string, deps: OpenStoreDeps): EventStore {
  const path = rest.startsWith('//') ? rest.slice(2) : rest;
  if (path.length === 0) throw invalidInput('sqlite: store URL needs a path (sqlite:PATH)');
  // sqlite::memory: is a throwaway database, no file; the read commands (mustExist) refuse it.
  if (path !== ':memory:' || deps.mustExist) checkStoreFile(path, deps.mustExist === true);
  try {
    return new SqliteEventStore({ path, clock: deps.clock, limits: deps.limits });
  } catch (error) {
    throw sqliteOpenError(path, error);
  }
}

/**
 * Before a file is opened as a store (which creates convoke's tables in it), what is there decides,
 * and a file that is refused is left as it was. A convoke store (of this schema or an older one)
 * opens. A path where nothing is yet becomes a new store, unless `mustExist`; so does a file that
 * holds nothing, zero-length or a SQLite database with no tables and no user_version (what a tool
 * creating the file ahead leaves, or another process creating this store right now). Anything else
 * is not a convoke store: a file that is not SQLite, another program's database, a peer's effect
 * sink.
 */
function checkStoreFile(path: string, mustExist: boolean): void {
  let found: SqliteFileFound;
  try {
    found = lookAtSqliteFile(path, {
      kind: sqliteStoreFile,
      others: [sqliteEffectSinkFile],
      create: !mustExist,
      noun: 'a sqlite store',
      namedBy: 'a sqlite store URL',
    });
  } catch (error) {
    throw sqliteOpenError(path, error);
  }
  const hint = mustExist
    ? 'point --store at the file a deployment writes'
    : 'point the store URL at a convoke store, or at a path where no file is to create one';
  switch (found.found) {
    case 'ours':
      return;
    case 'nothing':
      if (mustExist) throw invalidInput(`no sqlite store at ${path}: the file does not exist`);
      return;
    case 'empty':
      if (mustExist) throw invalidInput(`${path} is not a convoke store (it holds no tables): ${hint}`);
      return;
    case 'other':
      if (found.kind) throw invalidInput(`${path} is a ${found.kind.name}, not a convoke store: ${hint}`);
      throw invalidInput(`${path} is a SQLite database but not a convoke store: ${notAStore(found)}; ${hint}`);
    default: {
      const unreachable: never = found;
      throw new AssertionFailure(`unknown sqlite file look ${JSON.stringify(unreachable)}`);
    }
  }
}

/** Why a SQLite file's contents are not a convoke store's. */
function notAStore({ contents: { tables, userVersion }, missingTables, missingColumns }: Extract<SqliteFileFound, { found: 'other' }>): string {
  if (tables.length === 0) return `it has no tables, and user_version ${userVersion} (another program's)`;
  const has = describeSqliteTables(tables);
  const missingMeta = missingColumns.meta ?? [];
  if (missingTables.includes('meta')) return `${has} and no convoke meta table`;
  if (missingMeta.length > 0) return `${has}, and a meta table that is not convoke's (no ${missingMeta.join(', ')})`;
  if (missingTables.length > 0) return `${has} but no ${missingTables.join(', ')}`;
  return `${has} but no convoke schema version (user_version 0)`;
}

/**
 * A file the URL names that cannot be a store is the argument's fault: invalid-input, like a
 * missing file, since trying again cannot help. Whatever may pass (another connection's lock past
 * the busy timeout, an I/O error, a full disk, anything not known to be the file's fault) is
 * unavailable. An AdapterError is kept as it is (a schema newer than this build is unsupported).
 */
function sqliteOpenError(path: string, error: unknown): AdapterError {
  if (error instanceof AdapterError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const detail = error instanceof Error ? error.message : String(error);
  switch (sqliteOpenFault(error)) {
    case 'not-a-database':
      return invalidInput(`${path} is not a SQLite database (${detail}): point the store URL at a convoke store`, error);
    case 'path':
      return invalidInput(`cannot open sqlite store at ${path} (${String(code)}: ${detail}): check the path and its permissions`, error);
    default:
      return unavailable(`cannot open sqlite store at ${path}: ${detail}`, error);
  }
}

/** The subject prefix of a `jetstream:` store URL (default `convoke`); undefined for another store. */
export function jetstreamStorePrefix(url: string): string | undefined {
  const rest = /^jetstream:(.*)$/i.exec(url)?.[1];
  if (rest === undefined) return undefined;
  try {
    return new URL(rest).searchParams.get('prefix') ?? 'convoke';
  } catch {
    return 'convoke';
  }
}

async function openJetStream(rest: string, deps: OpenStoreDeps): Promise<EventStore> {
  let parsed: URL;
  try {
    parsed = new URL(rest);
  } catch (error) {
    throw invalidInput(`jetstream: store URL must be jetstream:nats://host:port (got ${JSON.stringify(redactStoreUrl(rest))})`, error);
  }
  if (parsed.protocol !== 'nats:' && parsed.protocol !== 'tls:') throw invalidInput(`jetstream: expected a nats:// server URL, got ${parsed.protocol}`);
  const query = parsed.searchParams;
  const urlUser = query.get('user') ?? (parsed.username ? decodeURIComponent(parsed.username) : undefined);
  const urlPass = query.get('pass') ?? (parsed.password ? decodeURIComponent(parsed.password) : undefined);
  // The URL's own user (and password) wins; separate credentials fill in a URL that names none.
  const login = urlUser === undefined && deps.credentials !== undefined ? deps.credentials : { user: urlUser, pass: urlPass };
  const servers = `${parsed.protocol}//${parsed.host}`;
  try {
    return await JetStreamEventStore.open({
      servers,
      ...login,
      streamName: query.get('stream') ?? undefined,
      subjectPrefix: query.get('prefix') ?? undefined,
      acceptRecreated: query.get('acceptRecreated') ?? undefined,
      limits: deps.limits,
      ...(deps.startup ? { startup: deps.startup } : {}),
      ...(deps.notice ? { onNotice: deps.notice } : {}),
    });
  } catch (error) {
    if (error instanceof AdapterError) throw error;
    throw unavailable(`cannot open jetstream store at ${servers}: ${error instanceof Error ? error.message : String(error)}`, error);
  }
}

/** An EventStoreDB connection string with `user:pass@` added, unless it names a user already. */
function withEsdbCredentials(url: string, credentials: OpenStoreDeps['credentials']): string {
  if (credentials === undefined || /^[a-z+]+:\/\/[^/]*@/i.test(url)) return url;
  if ('creds' in credentials) throw invalidInput('an esdb: store logs in with a user and password; NATS credentials (creds) are for nats and jetstream: only');
  return url.replace(/^([a-z+]+:\/\/)/i, `$1${encodeURIComponent(credentials.user)}:${encodeURIComponent(credentials.pass)}@`);
}

/** Store URLs may carry credentials; never echo them into errors or logs. */
export function redactStoreUrl(url: string): string {
  return url.replace(/(pass(word)?=)[^&]*/gi, '$1***').replace(/\/\/([^/@:]*):([^/@]*)@/, '//$1:***@');
}
