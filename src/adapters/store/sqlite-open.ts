/**
 * Opening a better-sqlite3 database the way every convoke SQLite file is opened (store and effect
 * sink), bounded by the file's busy timeout however the lock is held.
 *
 * SQLite waits for a lock held by another connection through its busy handler (`busy_timeout`),
 * except where waiting could deadlock: there it answers SQLITE_BUSY at once (sqlite3_busy_handler:
 * "If SQLite determines that invoking the busy handler could result in a deadlock, it will go ahead
 * and return SQLITE_BUSY"). Opening meets one such place. `journal_mode = WAL` on a file that is not
 * in WAL mode yet (a new file, or one another process is creating right now) reads the header under
 * a shared lock and then upgrades to a write lock to set the WAL bit; when another connection holds
 * the write lock (the process converting it first, or any rollback-mode writer), the upgrade fails
 * at once, whatever the busy timeout. Processes started together on one new file (peers sharing an
 * effect sink) hit it: one converts the file, another exits with "database is locked" after a few
 * milliseconds. The answer SQLite asks for is to let go of the read lock and try again, so an open
 * that meets SQLITE_BUSY closes its connection and retries, with SQLite's own backoff, until the busy
 * timeout has passed since it started; then it fails with `unavailable`.
 */
import Database from 'better-sqlite3';
import { AdapterError } from '../../contract/errors.js';

export interface SqliteOpenOptions {
  path: string;
  /** How long opening, and later each transaction, waits for another connection's lock. */
  busyTimeoutMs?: number;
  /** FULL (default) fsyncs every commit; NORMAL may lose the last commits on power loss in WAL mode. */
  synchronous?: 'full' | 'normal';
  /** DDL run inside the schema transaction; must be idempotent (CREATE … IF NOT EXISTS). */
  schema: string;
  schemaVersion: number;
  /** What the file is, for error messages ("effect sink", "sqlite store"). */
  what: string;
}

export const sqliteBusyTimeoutMsDefault = 5000;

/** SQLite's own busy-handler pauses (sqliteDefaultBusyCallback), then 100 ms each. */
const openRetryPausesMs = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100] as const;

/** SQLITE_BUSY and SQLITE_LOCKED with their extended codes (SQLITE_BUSY_RECOVERY, …): another connection holds a lock. */
export function isSqliteBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)(_|$)/.test(code);
}

/**
 * Opens `path` in WAL mode with the schema in place. Throws AdapterError `unavailable` when another
 * connection kept it locked for the whole busy timeout, `unsupported` when the file's schema is
 * newer than this build; any other SQLite error as it is.
 */
export function openSqliteDatabase(options: SqliteOpenOptions): Database.Database {
  const busyTimeoutMs = options.busyTimeoutMs ?? sqliteBusyTimeoutMsDefault;
  // A blocking wait on a file lock is bounded by elapsed time, like SQLite's own busy handler:
  // the monotonic clock, not an injected one (nothing else runs while this thread waits).
  const startedMs = performance.now();
  for (let attempt = 0; ; attempt++) {
    const leftMs = busyTimeoutMs - (performance.now() - startedMs);
    try {
      return openOnce(options, Math.max(1, Math.ceil(leftMs)), busyTimeoutMs);
    } catch (error) {
      if (!isSqliteBusy(error)) throw error;
      const waitedMs = performance.now() - startedMs;
      if (waitedMs >= busyTimeoutMs) throw lockedTooLong(options, busyTimeoutMs, error);
      sleepBlocking(Math.min(openRetryPausesMs[attempt] ?? 100, busyTimeoutMs - waitedMs));
    }
  }
}

/** One attempt: every statement waits at most `waitMs`; the open connection then keeps `busyTimeoutMs`. */
function openOnce(options: SqliteOpenOptions, waitMs: number, busyTimeoutMs: number): Database.Database {
  const db = new Database(options.path, { timeout: waitMs });
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
    // IMMEDIATE so processes opening a fresh file at once serialize on the schema too.
    db.transaction(() => {
      const version = db.pragma('user_version', { simple: true }) as number;
      if (version > options.schemaVersion)
        throw new AdapterError('unsupported', `${options.what} ${options.path}: schema ${version} is newer than this build (${options.schemaVersion})`);
      db.exec(options.schema);
      db.pragma(`user_version = ${options.schemaVersion}`);
    }).immediate();
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

function lockedTooLong(options: SqliteOpenOptions, busyTimeoutMs: number, error: unknown): AdapterError {
  const code = (error as { code?: unknown }).code;
  const detail = error instanceof Error ? error.message : String(error);
  return new AdapterError(
    'unavailable',
    `${options.what}: could not open ${options.path} within its busy timeout of ${busyTimeoutMs} ms: another connection kept it locked (${String(code)}: ${detail})`,
    { cause: error },
  );
}

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** Blocks this thread, as SQLite's busy handler does while it waits inside a statement. */
function sleepBlocking(ms: number): void {
  if (ms > 0) Atomics.wait(sleepCell, 0, 0, ms);
}

/** What an existing SQLite file holds, as far as telling whose file it is goes. */
export interface SqliteFileContents {
  /** Its tables' names (sqlite_master), sorted. */
  tables: string[];
  /** PRAGMA user_version: 0 until a program sets it (convoke's files hold their schema version there). */
  userVersion: number;
  /** The columns of each table asked for that the file has. */
  columns: Record<string, string[]>;
}

/**
 * Reads an existing SQLite file through a read-only connection: nothing is created or written (a
 * file that is not a database throws SQLITE_NOTADB, as opening it would; a zero-length file reads
 * as a database with no tables). One read transaction: a process creating a store in the file
 * right now is seen before its schema transaction or after it, never half-way (tables from before,
 * user_version from after).
 */
export function readSqliteFile(path: string, columnsOf: readonly string[] = []): SqliteFileContents {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return db.transaction(() => {
      const tables = db
        .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .all()
        .map((row) => row.name);
      const columns: Record<string, string[]> = {};
      for (const table of columnsOf.filter((name) => tables.includes(name)))
        columns[table] = db
          .prepare<[string], { name: string }>('SELECT name FROM pragma_table_info(?)')
          .all(table)
          .map((row) => row.name);
      return { tables, userVersion: db.pragma('user_version', { simple: true }) as number, columns };
    })();
  } finally {
    db.close();
  }
}
