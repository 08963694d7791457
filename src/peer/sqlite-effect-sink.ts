/**
 * A durable fenced effect sink on SQLite (better-sqlite3, WAL): the spec's "effect sink [that
 * rejects] older fences and respect[s] the operation/branch idempotency key atomically at its own
 * effect commit boundary", safe across processes sharing one file.
 *
 * The effect's durable write IS the commit. `effect()` only computes the value (it runs before
 * the transaction, outside any lock, and may be async); the business effect happens when that
 * value is written, inside one `BEGIN IMMEDIATE` transaction that first takes SQLite's single
 * write lock and then, against state no other connection or process can change until COMMIT:
 *
 *   - rejects a fence older than the one committed for (operation, branch)  → AdapterError('conflict')
 *   - answers a fence equal to the committed one with the stored value      → repeated: true, nothing written
 *   - otherwise records the new fence/attempt/value and appends to `effects` → repeated: false
 *
 * So an effect function that writes somewhere else is NOT protected: only what it returns, and
 * only through this commit, is the effect. A computed value that loses the race is discarded.
 * A process killed before COMMIT leaves nothing behind (SQLite rolls the transaction back).
 *
 * `effects` is append-only and deliberately has no unique index: it records what was applied,
 * and tests count duplicates in it. The guarantee comes from the keyed `effect_keys` row read and
 * written in the same transaction, not from a constraint turning a duplicate into an error.
 *
 * The sink opens a file only if it is an effect sink or holds nothing yet (no file, a zero-length
 * file, a SQLite database with no tables and user_version 0); anything else (another program's
 * database, a convoke event store, a file that is not SQLite) is refused with `invalid-input`
 * before anything is written to it, and so is a path whose directory does not exist.
 */
import Database from 'better-sqlite3';
import { AdapterError, AssertionFailure, invalidInput } from '../contract/errors.js';
import { canonicalJson } from '../contract/canonical.js';
import { parseStrict } from '../contract/ijson.js';
import type { JsonValue } from '../contract/json.js';
import { checkEffectIdentity, type EffectKey, type EffectRecord, type EffectSink, type EffectSinkCapabilities } from './effect-sink.js';
import {
  describeSqliteTables,
  isSqliteBusy,
  lookAtSqliteFile,
  openSqliteDatabase,
  sqliteBusyTimeoutMsDefault,
  sqliteEffectSinkFile,
  sqliteLockedTooLong,
  sqliteOpenFault,
  sqliteStoreFile,
  type SqliteFileFound,
} from '../adapters/store/sqlite-open.js';

export interface SqliteEffectSinkOptions {
  /** A file path shared by every process that commits effects for the same keys. */
  path: string;
  /**
   * How long opening and each commit wait for another connection's lock before answering
   * `unavailable` (default 5000). Opening retries even where SQLite answers SQLITE_BUSY without
   * waiting (src/adapters/store/sqlite-open.ts).
   */
  busyTimeoutMs?: number;
  /** 'full' fsyncs every commit; 'normal' (WAL) survives a process crash but not power loss. */
  synchronous?: 'full' | 'normal';
  /** Recorded with each applied effect (diagnostics: which process applied it). Default `pid:<pid>`. */
  writer?: string;
}

export interface AppliedEffect extends EffectKey, EffectRecord {
  /** Position in the append-only log (commit order across every process). */
  seq: number;
  writer: string;
}

/** Every schema keeps effect_keys and effects with their columns and sets user_version: that tells a sink file apart (sqliteEffectSinkFile). */
const schemaVersion = 1;

const schema = `
CREATE TABLE IF NOT EXISTS effect_keys (
  operation_id TEXT NOT NULL,
  branch_id TEXT NOT NULL,
  fence INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (operation_id, branch_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS effects (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  operation_id TEXT NOT NULL,
  branch_id TEXT NOT NULL,
  fence INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  value TEXT NOT NULL,
  writer TEXT NOT NULL
);
`;

interface KeyRow {
  fence: number;
  attempt: number;
  value: string;
}

interface EffectRow {
  seq: number;
  operation_id: string;
  branch_id: string;
  fence: number;
  attempt: number;
  value: string;
  writer: string;
}

interface CommitRequest {
  key: EffectKey;
  fence: number;
  attempt: number;
  /** The canonical JSON of the computed value. */
  value: string;
}

type CommitAnswer = { kind: 'applied' } | { kind: 'repeated'; value: string } | { kind: 'older'; committedFence: number };

function openDatabase(options: SqliteEffectSinkOptions): Database.Database {
  try {
    checkSinkFile(options);
    return openSqliteDatabase({ ...options, schema, schemaVersion, what: 'effect sink' });
  } catch (error) {
    throw openFailure(options, error);
  }
}

const ownFileHint = 'give the effect sink a file of its own (an effect sink, or a path where no file is yet)';

/**
 * Before the file is opened (which creates the sink's tables in it), what is there decides, and a
 * file that is refused is left as it was: an effect sink opens; nothing, or a file that holds
 * nothing, becomes a new sink; anything else is invalid-input. `:memory:` is a throwaway database.
 */
function checkSinkFile(options: SqliteEffectSinkOptions): void {
  const { path } = options;
  if (path === ':memory:') return;
  const found = lookAtSqliteFile(path, {
    kind: sqliteEffectSinkFile,
    others: [sqliteStoreFile],
    create: true,
    noun: 'an effect sink',
    namedBy: 'an effect sink path',
    busyTimeoutMs: options.busyTimeoutMs,
  });
  if (found.found !== 'other') return;
  if (found.kind) throw invalidInput(`effect sink: ${path} is a ${found.kind.name}, not an effect sink: ${ownFileHint}`);
  throw invalidInput(`effect sink: ${path} is a SQLite database but not an effect sink: ${notASink(found)}; ${ownFileHint}`);
}

/** Why a SQLite file's contents are not an effect sink's. */
function notASink({ contents: { tables, userVersion }, missingTables, missingColumns }: Extract<SqliteFileFound, { found: 'other' }>): string {
  if (tables.length === 0) return `it has no tables, and user_version ${userVersion} (another program's)`;
  const has = describeSqliteTables(tables);
  if (missingTables.length === sqliteEffectSinkFile.tables.length) return `${has} and no ${missingTables.join(' or ')} table`;
  if (missingTables.length > 0) return `${has} but no ${missingTables.join(', ')}`;
  const [table, columns] = Object.entries(missingColumns)[0] ?? [];
  if (table !== undefined && columns !== undefined) return `${has}, and a ${table} table that is not an effect sink's (no ${columns.join(', ')})`;
  return `${has} but no effect sink schema version (user_version 0)`;
}

/**
 * A file that cannot be a sink is the path's fault (invalid-input: trying again cannot help);
 * another connection's lock past the busy timeout is unavailable with the SQLite error as its cause
 * (convoke peer waits for it); anything else is unavailable too (sqliteFailure).
 */
function openFailure(options: SqliteEffectSinkOptions, error: unknown): Error {
  if (error instanceof AdapterError) return error;
  const { path } = options;
  if (isSqliteBusy(error)) return sqliteLockedTooLong('effect sink', path, options.busyTimeoutMs ?? sqliteBusyTimeoutMsDefault, error);
  const code = (error as { code?: unknown } | null)?.code;
  const detail = error instanceof Error ? error.message : String(error);
  switch (sqliteOpenFault(error)) {
    case 'not-a-database':
      return invalidInput(`effect sink: ${path} is not a SQLite database (${detail}): ${ownFileHint}`, error);
    case 'path':
      return invalidInput(`effect sink: cannot open ${path} (${String(code)}: ${detail}): check the path and its permissions`, error);
    default:
      return sqliteFailure(error);
  }
}

/** Busy beyond the timeout, I/O errors and a closed handle are `unavailable`: the commit (or open) may be retried. */
function sqliteFailure(error: unknown): Error {
  if (error instanceof AdapterError || error instanceof AssertionFailure) return error;
  const code = (error as { code?: unknown }).code;
  const detail = error instanceof Error ? error.message : String(error);
  return new AdapterError('unavailable', `effect sink: ${typeof code === 'string' ? `${code}: ` : ''}${detail}`, { cause: error });
}

export class SqliteEffectSink implements EffectSink {
  readonly capabilities: EffectSinkCapabilities = { effectFencing: true };
  private readonly db: Database.Database;
  private readonly writer: string;
  private readonly statements: ReturnType<typeof prepare>;
  private readonly commitTransaction: Database.Transaction<(request: CommitRequest) => CommitAnswer>;
  private closed = false;

  constructor(options: SqliteEffectSinkOptions) {
    this.writer = options.writer ?? `pid:${process.pid}`;
    this.db = openDatabase(options);
    this.statements = prepare(this.db);
    this.commitTransaction = this.db.transaction((request: CommitRequest) => this.commitLocked(request));
  }

  async commit(key: EffectKey, fence: number, attempt: number, effect: () => JsonValue | Promise<JsonValue>): Promise<{ value: JsonValue; repeated: boolean }> {
    checkEffectIdentity(key, fence, attempt);
    // Not authoritative (no lock is held): a repeat or an older fence already visible skips computing.
    const seen = this.committedRow(key);
    if (seen && fence <= seen.fence) return this.answer(key, fence, this.decided(seen, fence));
    const value = canonicalJson(await effect(), 'effect value');
    this.assertOpen();
    let answer: CommitAnswer;
    try {
      answer = this.commitTransaction.immediate({ key, fence, attempt, value });
    } catch (error) {
      throw sqliteFailure(error);
    }
    return this.answer(key, fence, answer, value);
  }

  applied(): readonly AppliedEffect[] {
    this.assertOpen();
    return this.statements.log.all().map((row) => ({
      seq: row.seq,
      operationId: row.operation_id,
      branchId: row.branch_id,
      fence: row.fence,
      attempt: row.attempt,
      value: parseStrict(row.value, 'stored effect value'),
      writer: row.writer,
    }));
  }

  /** The committed fence, attempt and value for a key (undefined before the first commit). */
  committed(key: EffectKey): EffectRecord | undefined {
    const row = this.committedRow(key);
    return row && { fence: row.fence, attempt: row.attempt, value: parseStrict(row.value, 'stored effect value') };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }

  /** Runs holding the write lock: read the key's row, decide, write — one atomic step. */
  private commitLocked(request: CommitRequest): CommitAnswer {
    const { key, fence, attempt, value } = request;
    const row = this.statements.key.get(key.operationId, key.branchId);
    if (row && fence <= row.fence) return this.decided(row, fence);
    if (row) this.statements.updateKey.run(fence, attempt, value, key.operationId, key.branchId);
    else this.statements.insertKey.run(key.operationId, key.branchId, fence, attempt, value);
    this.statements.append.run(key.operationId, key.branchId, fence, attempt, value, this.writer);
    return { kind: 'applied' };
  }

  private decided(row: KeyRow, fence: number): CommitAnswer {
    return fence === row.fence ? { kind: 'repeated', value: row.value } : { kind: 'older', committedFence: row.fence };
  }

  private answer(key: EffectKey, fence: number, answer: CommitAnswer, computed?: string): { value: JsonValue; repeated: boolean } {
    switch (answer.kind) {
      case 'applied':
        if (computed === undefined) throw new AssertionFailure('an applied effect has a computed value');
        return { value: parseStrict(computed, 'effect value'), repeated: false };
      case 'repeated':
        return { value: parseStrict(answer.value, 'stored effect value'), repeated: true };
      case 'older':
        throw new AdapterError('conflict', `fence ${fence} is older than committed fence ${answer.committedFence} for ${key.operationId}/${key.branchId}`);
      default: {
        const unreachable: never = answer;
        throw new AssertionFailure(`unknown commit answer ${JSON.stringify(unreachable)}`);
      }
    }
  }

  private committedRow(key: EffectKey): KeyRow | undefined {
    this.assertOpen();
    try {
      return this.statements.key.get(key.operationId, key.branchId);
    } catch (error) {
      throw sqliteFailure(error);
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new AdapterError('unavailable', 'effect sink is closed');
  }
}

function prepare(db: Database.Database) {
  return {
    key: db.prepare<[string, string], KeyRow>('SELECT fence, attempt, value FROM effect_keys WHERE operation_id = ? AND branch_id = ?'),
    insertKey: db.prepare('INSERT INTO effect_keys (operation_id, branch_id, fence, attempt, value) VALUES (?, ?, ?, ?, ?)'),
    updateKey: db.prepare('UPDATE effect_keys SET fence = ?, attempt = ?, value = ? WHERE operation_id = ? AND branch_id = ?'),
    append: db.prepare('INSERT INTO effects (operation_id, branch_id, fence, attempt, value, writer) VALUES (?, ?, ?, ?, ?, ?)'),
    log: db.prepare<[], EffectRow>('SELECT seq, operation_id, branch_id, fence, attempt, value, writer FROM effects ORDER BY seq'),
  };
}
