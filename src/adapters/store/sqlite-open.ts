/** Opening a better-sqlite3 database the way every convoke SQLite file is opened (store and effect sink). */
import Database from 'better-sqlite3';

export interface SqliteOpenOptions {
  path: string;
  busyTimeoutMs?: number;
  /** FULL (default) fsyncs every commit; NORMAL may lose the last commits on power loss in WAL mode. */
  synchronous?: 'full' | 'normal';
  /** DDL run inside the schema transaction; must be idempotent (CREATE … IF NOT EXISTS). */
  schema: string;
  schemaVersion: number;
  /** What the file is, for the error message about a newer schema. */
  what: string;
}

export function openSqliteDatabase(options: SqliteOpenOptions): Database.Database {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  const db = new Database(options.path, { timeout: busyTimeoutMs });
  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
    // IMMEDIATE so processes opening a fresh file at once serialize on the schema too.
    db.transaction(() => {
      const version = db.pragma('user_version', { simple: true }) as number;
      if (version > options.schemaVersion) throw new Error(`${options.what} schema ${version} is newer than this build (${options.schemaVersion})`);
      db.exec(options.schema);
      db.pragma(`user_version = ${options.schemaVersion}`);
    }).immediate();
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/**
 * The tables of an existing SQLite file, read through a read-only connection: nothing is created
 * or written (a file that is not a database throws SQLITE_NOTADB, as opening it would).
 */
export function sqliteTables(path: string): string[] {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
      .all()
      .map((row) => row.name);
  } finally {
    db.close();
  }
}
