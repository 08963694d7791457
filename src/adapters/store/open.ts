/**
 * Opens an EventStore from a store URL (config files and `--store` flags):
 *
 *   memory:                                      process-local, not durable
 *   sqlite:PATH  (sqlite:///abs/path also)       the embedded durable default
 *   jetstream:nats://host:port[?user=&pass=&stream=&prefix=]
 *   esdb://host:2113?tls=false  |  eventstoredb://…   (EventStoreDB connection string)
 *
 * Anything else is invalid-input. A backend that cannot be reached at open is unavailable.
 */
import { existsSync } from 'node:fs';
import { AdapterError, invalidInput, unavailable } from '../../contract/errors.js';
import type { Clock } from '../../contract/clock.js';
import { JetStreamEventStore } from './jetstream.js';
import { MemoryEventStore } from './memory.js';
import { SqliteEventStore } from './sqlite.js';
import { sqliteTables } from './sqlite-open.js';
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
  if (deps.mustExist) {
    if (!existsSync(path)) throw invalidInput(`no sqlite store at ${path}: the file does not exist`);
    checkIsConvokeStore(path);
  }
  try {
    return new SqliteEventStore({ path, clock: deps.clock, limits: deps.limits });
  } catch (error) {
    throw sqliteOpenError(path, error);
  }
}

/**
 * A file the URL names that is not a SQLite database is the argument's fault (invalid-input, like
 * a missing file); only a database that cannot be opened now (locked, an I/O error) is unavailable.
 */
function sqliteOpenError(path: string, error: unknown): AdapterError {
  const detail = error instanceof Error ? error.message : String(error);
  if ((error as { code?: unknown }).code === 'SQLITE_NOTADB')
    return invalidInput(`${path} is not a SQLite database (${detail}): point the store URL at a convoke store`, error);
  return unavailable(`cannot open sqlite store at ${path}: ${detail}`, error);
}

/**
 * Before an operator tool opens a file as a store (which would create convoke's tables in it):
 * a SQLite database without them, or an empty file, is not a store, and is left as it was.
 */
function checkIsConvokeStore(path: string): void {
  let tables: string[];
  try {
    tables = sqliteTables(path);
  } catch (error) {
    throw sqliteOpenError(path, error);
  }
  if (!tables.includes('operations'))
    throw invalidInput(
      `${path} is not a convoke store (${tables.length === 0 ? 'it holds no tables' : 'it has no operations table'}): point --store at the file a deployment writes`,
    );
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
