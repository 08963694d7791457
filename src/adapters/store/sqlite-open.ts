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
 *
 * Opening creates the file's tables in whatever file is there, so the store's URL opener and the
 * effect sink first look at it without writing (lookAtSqliteFile): nothing, a file that holds
 * nothing, or their own kind of file (SqliteFileKind) opens; anything else they refuse.
 */
import { statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { AdapterError, invalidInput } from '../../contract/errors.js';

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
      if (waitedMs >= busyTimeoutMs) throw sqliteLockedTooLong(options.what, options.path, busyTimeoutMs, error);
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

/** `unavailable`: another connection kept `path` locked past the busy timeout (the SQLite error is the cause, for callers that wait longer). */
export function sqliteLockedTooLong(what: string, path: string, busyTimeoutMs: number, error: unknown): AdapterError {
  const code = (error as { code?: unknown }).code;
  const detail = error instanceof Error ? error.message : String(error);
  return new AdapterError(
    'unavailable',
    `${what}: could not open ${path} within its busy timeout of ${busyTimeoutMs} ms: another connection kept it locked (${String(code)}: ${detail})`,
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
export function readSqliteFile(path: string, columnsOf: readonly string[] = [], busyTimeoutMs = sqliteBusyTimeoutMsDefault): SqliteFileContents {
  const db = new Database(path, { readonly: true, fileMustExist: true, timeout: busyTimeoutMs });
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

/**
 * What marks a SQLite file as one kind of convoke file, and another program's database (or the other
 * kind) not: these tables, these columns in some of them, and a schema version in user_version (set
 * in the transaction that creates the tables). Extra tables are allowed, and a file of an older
 * schema has what the marker names too: opening it adds the newer tables.
 *
 * Both kinds are here, not beside their schemas, so that each opener can tell the other's file
 * (the peer SDK imports nothing of the store but this module).
 */
export interface SqliteFileKind {
  /** In messages: "convoke event store", "convoke effect sink". */
  name: string;
  tables: readonly string[];
  columns: Readonly<Record<string, readonly string[]>>;
}

/** The event store (sqlite.ts): true of every schema since 1. */
export const sqliteStoreFile: SqliteFileKind = {
  name: 'convoke event store',
  tables: ['meta', 'operations', 'transitions'],
  columns: { meta: ['last_committed_at_ms', 'last_rowid', 'operations_count'] },
};

/** The peer SDK's effect sink (src/peer/sqlite-effect-sink.ts): true of every schema since 1. */
export const sqliteEffectSinkFile: SqliteFileKind = {
  name: 'convoke effect sink',
  tables: ['effect_keys', 'effects'],
  columns: {
    effect_keys: ['operation_id', 'branch_id', 'fence', 'attempt', 'value'],
    effects: ['seq', 'operation_id', 'branch_id', 'fence', 'attempt', 'value', 'writer'],
  },
};

/** What is at a path a convoke SQLite file of one kind is to be opened from. */
export type SqliteFileFound =
  /** No file: opening creates one (the directory is there, when `create`). */
  | { found: 'nothing' }
  /** A zero-length file, or a SQLite database with no tables and user_version 0: opening makes it the kind asked for. */
  | { found: 'empty'; contents: SqliteFileContents }
  /** The kind asked for (of this schema, an older one, or a newer one the opener refuses). */
  | { found: 'ours'; contents: SqliteFileContents }
  /** Anything else SQLite reads: what the kind asked for misses, and `kind` when it is another kind of convoke file. */
  | { found: 'other'; contents: SqliteFileContents; missingTables: string[]; missingColumns: Record<string, string[]>; kind?: SqliteFileKind };

export interface SqliteFileLook {
  /** The kind of file about to be opened. */
  kind: SqliteFileKind;
  /** Other kinds of convoke file told apart from another program's. */
  others?: readonly SqliteFileKind[];
  /** Nothing at the path becomes a new file: its directory must be there. */
  create: boolean;
  /** In messages: "a sqlite store", "an effect sink"; and what names the path: "a sqlite store URL". */
  noun: string;
  namedBy: string;
  busyTimeoutMs?: number;
}

/**
 * Looks at `path` before it is opened as `look.kind`, which would create that kind's tables in
 * whatever file is there: nothing is created or written here (readSqliteFile), so a caller that
 * refuses what was found leaves the file as it was. Throws `invalid-input` when the path is a
 * directory or, with `create`, when the directory it names does not exist; whatever else looking
 * throws (stat's errno, SQLITE_NOTADB for a file that is not SQLite, SQLITE_BUSY past the busy
 * timeout) as it is, for the caller to tell (sqliteOpenFault).
 */
export function lookAtSqliteFile(path: string, look: SqliteFileLook): SqliteFileFound {
  if (!fileExists(path, look)) {
    if (look.create) checkDirectory(path, look);
    return { found: 'nothing' };
  }
  const others = look.others ?? [];
  const contents = readSqliteFile(
    path,
    [look.kind, ...others].flatMap((kind) => Object.keys(kind.columns)),
    look.busyTimeoutMs,
  );
  const misses = sqliteFileMisses(contents, look.kind);
  if (fits(contents, misses)) return { found: 'ours', contents };
  if (contents.tables.length === 0 && contents.userVersion === 0) return { found: 'empty', contents };
  const kind = others.find((other) => fits(contents, sqliteFileMisses(contents, other)));
  return { found: 'other', contents, ...misses, ...(kind ? { kind } : {}) };
}

/** Whether a file missing `misses` of a kind is of that kind: nothing its marker names missing, and a schema version set. */
function fits(contents: SqliteFileContents, misses: ReturnType<typeof sqliteFileMisses>): boolean {
  return misses.missingTables.length === 0 && Object.keys(misses.missingColumns).length === 0 && contents.userVersion > 0;
}

/** The tables of `kind` a file lacks, and the columns lacking from those of its tables it has. */
function sqliteFileMisses(contents: SqliteFileContents, kind: SqliteFileKind): { missingTables: string[]; missingColumns: Record<string, string[]> } {
  const missingTables = kind.tables.filter((table) => !contents.tables.includes(table));
  const missingColumns: Record<string, string[]> = {};
  for (const [table, columns] of Object.entries(kind.columns)) {
    if (!contents.tables.includes(table)) continue;
    const missing = columns.filter((column) => !contents.columns[table]?.includes(column));
    if (missing.length > 0) missingColumns[table] = missing;
  }
  return { missingTables, missingColumns };
}

/** "it has table customers", "it has tables a, b, … and 3 more": a file's tables, for a message. */
export function describeSqliteTables(tables: readonly string[]): string {
  const shown = tables.length > 10 ? `${tables.slice(0, 10).join(', ')} and ${tables.length - 10} more` : tables.join(', ');
  return `it has ${tables.length === 1 ? 'table' : 'tables'} ${shown}`;
}

/** Whether something is at `path`; a directory is not a file to open. */
function fileExists(path: string, look: SqliteFileLook): boolean {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    throw error;
  }
  if (isDirectory) throw invalidInput(`${path} is a directory: ${look.namedBy} names a file`);
  return true;
}

/** A new file's directory must exist: SQLite creates the file, never the directories above it. */
function checkDirectory(path: string, look: SqliteFileLook): void {
  const directory = dirname(path);
  let isDirectory: boolean;
  try {
    isDirectory = statSync(directory).isDirectory();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw invalidInput(`cannot create ${look.noun} at ${path}: the directory ${directory} does not exist`);
    throw error;
  }
  if (!isDirectory) throw invalidInput(`cannot create ${look.noun} at ${path}: ${directory} is not a directory`);
}

/**
 * SQLite result codes (and errnos) that say the file named cannot be opened however often it is
 * tried: not a database, damaged, a directory, not readable or writable by this process, a path the
 * system cannot resolve. SQLITE_CANTOPEN is almost always that (a directory, permissions); it also
 * covers running out of file descriptors, which is rare enough to be told as the path's problem.
 */
const pathFaultCodes = /^(SQLITE_(NOTADB|CORRUPT|CANTOPEN|READONLY|PERM|AUTH)(_|$)|E(ACCES|PERM|ISDIR|NAMETOOLONG|LOOP)$)/;

/**
 * Whether a failure to look at or open a SQLite file is the file's fault, so that trying again
 * cannot help (`invalid-input` for the caller): `not-a-database` (SQLITE_NOTADB), `path` (any
 * other such code). Undefined for what may pass: another connection's lock (isSqliteBusy), an I/O
 * error, a full disk, anything not known to be the file's fault (`unavailable`).
 */
export function sqliteOpenFault(error: unknown): 'not-a-database' | 'path' | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'SQLITE_NOTADB') return 'not-a-database';
  if (typeof code === 'string' && pathFaultCodes.test(code)) return 'path';
  return undefined;
}
