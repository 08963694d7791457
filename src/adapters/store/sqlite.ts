/**
 * The SQLite event store: the embedded durable default (better-sqlite3, WAL).
 *
 * Every write runs in one `BEGIN IMMEDIATE` transaction, which takes SQLite's single write lock
 * before anything is read: the expected-revision check, the capacity check, the size check, the
 * clock-rollback check and the time guard all run against state no other connection (or
 * process) can change until COMMIT. The clock is read once, inside that transaction, and that
 * same reading is the committedAtMs checked, stored and returned (spec: "the store checks that
 * interval at its authoritative serialized transition point and returns that same timestamp").
 *
 * The meta row carries the store-wide last committedAtMs, so a process whose clock lags another's
 * (or a clock set back) stops protected transitions instead of writing time backwards.
 *
 * Streams are keyed by id: workflow instances (`wf…`) are rows beside operations (`op…`), under
 * the same lock, guard and clock rules; operationIds() lists operations only.
 */
import Database from 'better-sqlite3';
import type { StoredTransition, Transition } from '../../events/types.js';
import type { Clock } from '../../contract/clock.js';
import { AssertionFailure, unavailable } from '../../contract/errors.js';
import { checkGuardShape, guardAdmits, guardFailure, rollbackFailure } from '../../events/guard.js';
import {
  bodyBytes,
  checkTransitionShape,
  decodeStored,
  encodeTransition,
  isStoreFailure,
  logFullFailure,
  notifyAll,
  parseRevision,
  sizeFailure,
} from './codec.js';
import { capacityReached, resolveStoreLimits } from './limits.js';
import type { AppendListener, AppendOutcome, EventStore, IndexAfter, ReadOutcome, RevisionListener, StoreFailure, StoreLimits, TailOutcome } from './types.js';
import { openSqliteDatabase } from './sqlite-open.js';
import { limits as contractLimits } from '../../contract/limits.js';
import { IndexStates } from './index-states.js';
import { SqliteOperationIndex, indexSchema } from './sqlite-index.js';
import { SqliteWorkflowIndex, workflowIndexSchema } from './sqlite-workflow-index.js';
import { committedWorkflowRow, isWorkflowStream } from './workflow-rows.js';
import { isOperationId } from '../../contract/ids.js';
import { endsWorkflow, runningOfLog, startsWorkflow, streamFamily } from './workflow-running.js';

export interface SqliteStoreOptions {
  /** A file path (or ':memory:' for a throwaway store in tests). */
  path: string;
  clock: Clock;
  limits?: Partial<StoreLimits>;
  /** How long opening, and each write, waits for another connection's lock before answering `unavailable`. */
  busyTimeoutMs?: number;
  /** 'full' fsyncs every commit (acknowledged appends survive power loss); 'normal' survives a process crash only. */
  synchronous?: 'full' | 'normal';
  /** How often `follow` polls for rows appended by any connection. */
  followIntervalMs?: number;
}

/**
 * 2: the operations index (operation_index, index_meta). A file of schema 1 gets the tables and is indexed once at open.
 * 3: the running workflow instances (workflow_running, workflow_meta). A file of schema 2 or less gets the tables, filled
 * once at open from its instances' logs.
 * 4: the tombstones' positions (tombstones), which watchers poll beside the transitions. A file of schema 3 or less gets
 * the table empty: the tombstones written before it are told to no watcher (none was watching them then).
 */
const schemaVersion = 4;

// Every schema since 1 has operations, transitions and meta (with its three columns) and sets
// user_version: that tells a store file apart (sqliteStoreFile in sqlite-open.ts). A new schema keeps them.

const schema = `
CREATE TABLE IF NOT EXISTS operations (
  id TEXT PRIMARY KEY,
  tombstoned INTEGER NOT NULL DEFAULT 0,
  last_revision INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS transitions (
  operation_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  committed_at_ms INTEGER NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (operation_id, revision)
);
CREATE TABLE IF NOT EXISTS meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  last_committed_at_ms INTEGER NOT NULL,
  last_rowid INTEGER NOT NULL,
  operations_count INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (id, last_committed_at_ms, last_rowid, operations_count) VALUES (1, ${Number.MIN_SAFE_INTEGER}, 0, 0);
${indexSchema}
CREATE TABLE IF NOT EXISTS workflow_running (id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS workflow_meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  built INTEGER NOT NULL
);
INSERT OR IGNORE INTO workflow_meta (id, built) VALUES (1, 0);
${workflowIndexSchema}
CREATE TABLE IF NOT EXISTS tombstones (
  position INTEGER PRIMARY KEY,
  operation_id TEXT NOT NULL,
  revision INTEGER NOT NULL
);`;

interface OperationRow {
  tombstoned: number;
  last_revision: number;
}

interface MetaRow {
  last_committed_at_ms: number;
  last_rowid: number;
  operations_count: number;
}

interface TransitionRow {
  rowid: number;
  operation_id: string;
  revision: number;
  committed_at_ms: number;
  body: string;
}

type ReadRows = OperationRow & { transitions?: TransitionRow[] };

interface WriteRequest {
  operationId: string;
  /** undefined for create. */
  expectedRevision: string | undefined;
  transition: Transition;
  /** The encoded transition: the bytes stored and the bytes the size budget counts. */
  body: string;
  /** The committing side's record (or instance row) after the transition: the index row's source (index-states.ts, workflow-rows.ts). */
  after: IndexAfter | undefined;
}

function prepareStatements(db: Database.Database) {
  return {
    operation: db.prepare<[string], OperationRow>('SELECT tombstoned, last_revision FROM operations WHERE id = ?'),
    meta: db.prepare<[], MetaRow>('SELECT last_committed_at_ms, last_rowid, operations_count FROM meta WHERE id = 1'),
    insertTransition: db.prepare('INSERT INTO transitions (rowid, operation_id, revision, committed_at_ms, body) VALUES (?, ?, ?, ?, ?)'),
    insertOperation: db.prepare('INSERT INTO operations (id, tombstoned, last_revision) VALUES (?, 0, ?)'),
    updateOperation: db.prepare('UPDATE operations SET last_revision = ? WHERE id = ?'),
    updateMeta: db.prepare('UPDATE meta SET last_committed_at_ms = ?, last_rowid = ?, operations_count = ? WHERE id = 1'),
    transitionsOf: db.prepare<[string], TransitionRow>(
      'SELECT rowid, operation_id, revision, committed_at_ms, body FROM transitions WHERE operation_id = ? ORDER BY revision',
    ),
    transitionsFrom: db.prepare<[string, number], TransitionRow>(
      'SELECT rowid, operation_id, revision, committed_at_ms, body FROM transitions WHERE operation_id = ? AND revision >= ? ORDER BY revision',
    ),
    transitionsAfter: db.prepare<[number, number], TransitionRow>(
      'SELECT rowid, operation_id, revision, committed_at_ms, body FROM transitions WHERE rowid > ? ORDER BY rowid LIMIT ?',
    ),
    // A tombstone takes its position from the same counter as the transitions' rowids: one cursor follows both, in order.
    revisionsAfter: db.prepare<[{ cursor: number; limit: number }], Pick<TransitionRow, 'rowid' | 'operation_id' | 'revision'>>(
      `SELECT rowid, operation_id, revision FROM transitions WHERE rowid > @cursor
       UNION ALL SELECT position AS rowid, operation_id, revision FROM tombstones WHERE position > @cursor
       ORDER BY rowid LIMIT @limit`,
    ),
    tombstone: db.prepare('UPDATE operations SET tombstoned = 1, last_revision = ? WHERE id = ?'),
    insertTombstone: db.prepare('INSERT INTO tombstones (position, operation_id, revision) VALUES (?, ?, ?)'),
    updateLastRowid: db.prepare('UPDATE meta SET last_rowid = ? WHERE id = 1'),
    deleteTransitions: db.prepare('DELETE FROM transitions WHERE operation_id = ?'),
    runningWorkflowsAfter: db.prepare<[string, number], { id: string }>('SELECT id FROM workflow_running WHERE id > ? ORDER BY id LIMIT ?'),
    addRunningWorkflow: db.prepare('INSERT OR IGNORE INTO workflow_running (id) VALUES (?)'),
    removeRunningWorkflow: db.prepare('DELETE FROM workflow_running WHERE id = ?'),
    liveIdsAfter: db.prepare<[string, number], { id: string }>('SELECT id FROM operations WHERE tombstoned = 0 AND id > ? ORDER BY id LIMIT ?'),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

/** Any error SQLite throws (busy beyond the timeout, I/O, a closed handle) is `unavailable`. */
function sqliteFailure(error: unknown): StoreFailure {
  if (error instanceof AssertionFailure) throw error;
  const code = (error as { code?: unknown }).code;
  const detail = error instanceof Error ? error.message : String(error);
  return { kind: 'unavailable', description: `sqlite: ${typeof code === 'string' ? `${code}: ` : ''}${detail}` };
}

function openDatabase(options: SqliteStoreOptions): Database.Database {
  return openSqliteDatabase({ ...options, schema, schemaVersion, what: 'sqlite store' });
}

export class SqliteEventStore implements EventStore {
  readonly name = 'sqlite';
  /** A ':memory:' database dies with the process, like the memory store: not durable (memory mode, src/runtime/mode.ts). */
  readonly capabilities: { durable: boolean; guard: 'in-write' };
  private readonly db: Database.Database;
  private readonly statements: Statements;
  private readonly clock: Clock;
  readonly limits: Readonly<StoreLimits>;
  private readonly followIntervalMs: number;
  private readonly followers = new Set<() => void>();
  private readonly writeTransaction: Database.Transaction<(request: WriteRequest) => AppendOutcome>;
  private readonly readTransaction: Database.Transaction<(operationId: string) => ReadRows | undefined>;
  private readonly tailTransaction: Database.Transaction<(operationId: string, from: number) => ReadRows | undefined>;
  private readonly tombstoneTransaction: Database.Transaction<(operationId: string) => AppendOutcome | StoreFailure>;
  private closed = false;
  private readonly indexStates = new IndexStates();
  /** The operations index, written in each append's transaction. */
  readonly index: SqliteOperationIndex;
  readonly workflowIndex: SqliteWorkflowIndex;

  constructor(options: SqliteStoreOptions) {
    this.capabilities = { durable: options.path !== ':memory:', guard: 'in-write' };
    this.clock = options.clock;
    this.limits = resolveStoreLimits(options.limits);
    this.followIntervalMs = options.followIntervalMs ?? 50;
    this.db = openDatabase(options);
    this.statements = prepareStatements(this.db);
    this.index = new SqliteOperationIndex(this.db, {
      closed: () => this.closed,
      logOf: (operationId) => this.logInTransaction(operationId),
      states: this.indexStates,
    });
    this.workflowIndex = new SqliteWorkflowIndex(this.db, () => this.closed);
    this.writeTransaction = this.db.transaction((request: WriteRequest) => this.writeLocked(request));
    this.listRunningWorkflowsOnce();
    // One read transaction: the operation row and its transitions come from the same snapshot.
    this.readTransaction = this.db.transaction((operationId: string): ReadRows | undefined => {
      const operation = this.statements.operation.get(operationId);
      if (!operation || operation.tombstoned) return operation;
      return { ...operation, transitions: this.statements.transitionsOf.all(operationId) };
    });
    // The same snapshot for a tail: the row at `from` (which the tail follows) and every row after it.
    this.tailTransaction = this.db.transaction((operationId: string, from: number): ReadRows | undefined => {
      const operation = this.statements.operation.get(operationId);
      if (!operation || operation.tombstoned || operation.last_revision < from) return operation;
      return { ...operation, transitions: this.statements.transitionsFrom.all(operationId, from) };
    });
    this.tombstoneTransaction = this.db.transaction((operationId: string): AppendOutcome | StoreFailure => {
      const operation = this.statements.operation.get(operationId);
      if (!operation) return { kind: 'not-found', description: `operation ${operationId} does not exist` };
      // The operations row stays (tombstoned = 1): the key is never recreated; the payload goes.
      const revision = operation.tombstoned ? operation.last_revision : this.markTombstoned(operationId, operation.last_revision + 1);
      this.statements.deleteTransitions.run(operationId);
      this.index.remove(operationId);
      this.workflowIndex.write(operationId, undefined);
      return { kind: 'ok', revision: String(revision), committedAtMs: this.clock.nowMs() };
    });
  }

  async create(operationId: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome> {
    return this.write(operationId, undefined, transition, after);
  }

  async append(operationId: string, expectedRevision: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome> {
    return this.write(operationId, expectedRevision, transition, after);
  }

  async read(operationId: string): Promise<ReadOutcome> {
    if (this.closed) return closedFailure;
    try {
      const rows = this.readTransaction(operationId);
      if (!rows) return { kind: 'not-found', description: `operation ${operationId} does not exist` };
      if (rows.tombstoned || !rows.transitions) return { kind: 'expired', description: `operation ${operationId} is tombstoned` };
      return decodeRows(operationId, rows.last_revision, rows.transitions);
    } catch (error) {
      return sqliteFailure(error) as { kind: 'unavailable'; description: string };
    }
  }

  async readAfter(operationId: string, revision: string): Promise<TailOutcome> {
    if (this.closed) return closedFailure;
    // Revisions are positions from 1; anything else was never stored here.
    const from = parseRevision(revision);
    try {
      const rows: ReadRows | undefined = from === undefined ? this.statements.operation.get(operationId) : this.tailTransaction(operationId, from);
      if (!rows) return { kind: 'not-found', description: `operation ${operationId} does not exist` };
      if (rows.tombstoned) return { kind: 'expired', description: `operation ${operationId} is tombstoned` };
      if (!rows.transitions) return { kind: 'diverged', description: `operation ${operationId} is at revision ${rows.last_revision}, not past ${revision}` };
      return decodeTail(operationId, from ?? 0, rows.last_revision, rows.transitions);
    } catch (error) {
      return sqliteFailure(error) as { kind: 'unavailable'; description: string };
    }
  }

  operationIds(): AsyncIterable<string> {
    // Workflow instance streams (`wf…`) share the tables; only operations are listed here.
    return this.pagedIds(this.statements.liveIdsAfter, '', isOperationId);
  }

  runningWorkflowIds(): AsyncIterable<string> {
    return this.pagedIds(this.statements.runningWorkflowsAfter, '', () => true);
  }

  workflowInstanceIds(): AsyncIterable<string> {
    // Ids sort by family: the pages start at the first `wf…` and stop past the last.
    return this.pagedIds(
      this.statements.liveIdsAfter,
      'wf',
      (id) => streamFamily(id) === 'wf',
      (lastId) => !lastId.startsWith('wf'),
    );
  }

  /**
   * Ids from `statement` (`id > ? ORDER BY id LIMIT ?`) after `afterId`, those `keep` accepts.
   * Paged, never an open cursor: the caller may write between yields on this same connection.
   */
  private async *pagedIds(
    statement: Database.Statement<[string, number], { id: string }>,
    afterId: string,
    keep: (id: string) => boolean,
    pastEnd: (lastId: string) => boolean = () => false,
  ): AsyncIterable<string> {
    for (let after = afterId; ;) {
      if (this.closed) throw unavailable('store is closed');
      let page: { id: string }[];
      try {
        page = statement.all(after, contractLimits.sqliteOperationIdsPageMax);
      } catch (error) {
        throw unavailable(sqliteFailure(error).description, error);
      }
      for (const row of page) if (keep(row.id)) yield row.id;
      const last = page.at(-1);
      if (page.length < contractLimits.sqliteOperationIdsPageMax || last === undefined || pastEnd(last.id)) return;
      after = last.id;
    }
  }

  /** The table is written with each transition: nothing is left to remove. */
  async workflowEnded(_instanceId: string): Promise<void> {}

  async tombstone(operationId: string): Promise<AppendOutcome | StoreFailure> {
    if (this.closed) return closedFailure;
    try {
      return this.tombstoneTransaction.immediate(operationId);
    } catch (error) {
      return sqliteFailure(error);
    }
  }

  follow(listener: AppendListener): Promise<{ close(): Promise<void> }> {
    return this.poll((cursor) => this.deliverAfter(cursor, listener));
  }

  /** Like follow, without reading or decoding the transitions' bodies; tombstones too (markTombstoned). */
  watch(listener: RevisionListener): Promise<{ close(): Promise<void> }> {
    return this.poll((cursor) => this.revisionsAfter(cursor, listener));
  }

  /** Runs `step` from the current end of the table every followIntervalMs; `step` answers the new cursor. */
  private async poll(step: (cursor: number) => number): Promise<{ close(): Promise<void> }> {
    if (this.closed) throw unavailable('store is closed');
    let cursor: number;
    try {
      cursor = this.statements.meta.get()?.last_rowid ?? 0;
    } catch (error) {
      throw unavailable(sqliteFailure(error).description, error);
    }
    // Polling the table (not an in-process hook) so appends from other processes are seen too.
    const timer = setInterval(() => {
      cursor = step(cursor);
    }, this.followIntervalMs);
    const stop = () => clearInterval(timer);
    this.followers.add(stop);
    return {
      close: async () => {
        stop();
        this.followers.delete(stop);
      },
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const stop of this.followers) stop();
    this.followers.clear();
    this.db.close();
  }

  /** Delivers rows after `cursor` to one follower; returns the new cursor. */
  private deliverAfter(cursor: number, listener: AppendListener): number {
    if (this.closed) return cursor;
    let rows: TransitionRow[];
    try {
      rows = this.statements.transitionsAfter.all(cursor, contractLimits.sqliteFollowBatchMax);
    } catch {
      return cursor; // Busy or I/O: try again on the next tick; nothing is skipped.
    }
    for (const row of rows) {
      const stored = decodeStored(String(row.revision), row.committed_at_ms, row.body);
      if (!isStoreFailure(stored)) notifyAll([listener], row.operation_id, stored);
      cursor = row.rowid;
    }
    return cursor;
  }

  /** Tells one watcher the revisions appended, and those tombstones took, after `cursor`; returns the new cursor. */
  private revisionsAfter(cursor: number, listener: RevisionListener): number {
    if (this.closed) return cursor;
    let rows: Pick<TransitionRow, 'rowid' | 'operation_id' | 'revision'>[];
    try {
      rows = this.statements.revisionsAfter.all({ cursor, limit: contractLimits.sqliteFollowBatchMax });
    } catch {
      return cursor; // Busy or I/O: try again on the next tick; nothing is skipped.
    }
    for (const row of rows) {
      notifyAll([listener], row.operation_id, String(row.revision));
      cursor = row.rowid;
    }
    return cursor;
  }

  private write(operationId: string, expectedRevision: string | undefined, transition: Transition, after: IndexAfter | undefined): AppendOutcome {
    if (this.closed) return closedFailure;
    const shape = checkTransitionShape(transition) ?? checkGuardShape(transition.timeGuard);
    if (shape) return shape;
    const body = encodeTransition(transition);
    try {
      return this.writeTransaction.immediate({ operationId, expectedRevision, transition, body, after });
    } catch (error) {
      return sqliteFailure(error);
    }
  }

  /** Runs under SQLite's write lock (BEGIN IMMEDIATE): every check and the commit see one state. */
  private writeLocked(request: WriteRequest): AppendOutcome {
    const { operationId, expectedRevision, transition, body, after } = request;
    const operation = this.statements.operation.get(operationId);
    const meta = this.statements.meta.get();
    if (!meta) throw new AssertionFailure('sqlite store meta row is missing');
    // Size before revision, as the memory store orders them: an oversized transition is
    // invalid-input whatever the stream's state.
    const bytes = bodyBytes(body);
    if (bytes > this.limits.transitionBytesMax) return sizeFailure(bytes, this.limits.transitionBytesMax);
    const refused = this.refusal(operationId, operation, expectedRevision, meta);
    if (refused) return refused;
    const nowMs = this.clock.nowMs();
    if (!Number.isSafeInteger(nowMs)) return { kind: 'unavailable', description: `store clock reading ${nowMs} is not a safe integer` };
    if (nowMs < meta.last_committed_at_ms) return rollbackFailure(nowMs, meta.last_committed_at_ms);
    if (!guardAdmits(transition.timeGuard, nowMs)) return guardFailure(transition.timeGuard, nowMs);
    const revision = (operation?.last_revision ?? 0) + 1;
    // rowid comes from the meta counter, never max(rowid)+1: a tombstone deleting the newest rows
    // must not let later rows reuse rowids a follower has already passed.
    const rowid = meta.last_rowid + 1;
    // The index row, from the committing side's record after this transition (or the log before
    // it, index-states.ts); written in the same transaction, so it commits with the transition or
    // not at all.
    // The caller's transition itself, not a decoded copy: transitions are never changed once
    // decided (the coordinator folds the same objects), and a parse would cost as much as the fold.
    const stored: StoredTransition = { revision: String(revision), committedAtMs: nowMs, transition };
    // A workflow instance's stream (wf… id) has its row in the workflow index, from the committing side.
    const indexed = isOperationId(operationId);
    const instanceRow = isWorkflowStream(operationId) ? committedWorkflowRow(operationId, stored, after) : undefined;
    const row = indexed
      ? this.indexStates.rowAfter(operationId, operation ? String(operation.last_revision) : undefined, stored, () => this.logInTransaction(operationId), after)
      : undefined;
    this.statements.insertTransition.run(rowid, operationId, revision, nowMs, body);
    if (indexed) this.index.write(operationId, row);
    else if (streamFamily(operationId) === 'wf') this.noteWorkflow(operationId, transition);
    if (instanceRow) this.workflowIndex.write(operationId, instanceRow);
    if (operation) this.statements.updateOperation.run(revision, operationId);
    else this.statements.insertOperation.run(operationId, revision);
    this.statements.updateMeta.run(nowMs, rowid, meta.operations_count + (operation ? 0 : 1));
    return { kind: 'ok', revision: String(revision), committedAtMs: nowMs };
  }

  /**
   * The tombstone takes the stream's next revision and a position after every rowid so far, where
   * the watchers of every connection find it (revisionsAfter), as they find an append.
   */
  private markTombstoned(operationId: string, revision: number): number {
    const meta = this.statements.meta.get();
    if (!meta) throw new AssertionFailure('sqlite store meta row is missing');
    this.statements.tombstone.run(revision, operationId);
    this.statements.insertTombstone.run(meta.last_rowid + 1, operationId, revision);
    this.statements.updateLastRowid.run(meta.last_rowid + 1);
    return revision;
  }

  /** Keeps workflow_running in the write's transaction: an instance is listed exactly while it runs. */
  private noteWorkflow(instanceId: string, transition: Transition): void {
    if (endsWorkflow(transition)) this.statements.removeRunningWorkflow.run(instanceId);
    else if (startsWorkflow(transition)) this.statements.addRunningWorkflow.run(instanceId);
  }

  /** A file from before workflow_running (schema 2 or less): every instance still running, once, in one transaction. */
  private listRunningWorkflowsOnce(): void {
    const built = this.db.prepare<[], { built: number }>('SELECT built FROM workflow_meta WHERE id = 1');
    if (built.get()?.built === 1) return;
    this.db
      .transaction(() => {
        if (built.get()?.built === 1) return; // another process listed them while this one waited for the lock
        const ids = this.db.prepare<[], { id: string }>("SELECT id FROM operations WHERE tombstoned = 0 AND id LIKE 'wf%'").all();
        for (const { id } of ids) if (streamFamily(id) === 'wf' && runningOfLog(this.logInTransaction(id))) this.statements.addRunningWorkflow.run(id);
        this.db.prepare('UPDATE workflow_meta SET built = 1 WHERE id = 1').run();
      })
      .immediate();
  }

  /** The operation's transitions as the current transaction sees them (corruption throws: the write rolls back). */
  private logInTransaction(operationId: string): StoredTransition[] {
    return this.statements.transitionsOf.all(operationId).map((row) => {
      const stored = decodeStored(String(row.revision), row.committed_at_ms, row.body);
      if (isStoreFailure(stored)) throw unavailable(stored.description);
      return stored;
    });
  }

  /** The create/append preconditions on the locked state; undefined when the write may proceed. */
  private refusal(operationId: string, operation: OperationRow | undefined, expectedRevision: string | undefined, meta: MetaRow): StoreFailure | undefined {
    if (expectedRevision === undefined) {
      if (operation?.tombstoned) return { kind: 'expired', description: `operation ${operationId} is tombstoned; its key is never recreated` };
      if (operation) return { kind: 'conflict', description: `operation ${operationId} already exists` };
      if (meta.operations_count >= this.limits.operationsMax) return capacityReached(this.limits.operationsMax, operationId);
      return undefined;
    }
    if (!operation) return { kind: 'not-found', description: `operation ${operationId} does not exist` };
    if (operation.tombstoned) return { kind: 'expired', description: `operation ${operationId} is tombstoned` };
    const currentRevision = String(operation.last_revision);
    if (expectedRevision !== currentRevision) {
      return { kind: 'conflict', description: `expected revision ${expectedRevision}, stream is at ${currentRevision}` };
    }
    if (operation.last_revision >= this.limits.transitionsMax) return logFullFailure(operationId, operation.last_revision, this.limits.transitionsMax);
    return undefined;
  }
}

const closedFailure: { kind: 'unavailable'; description: string } = { kind: 'unavailable', description: 'store is closed' };

/** Rows must be exactly revisions 1..lastRevision; anything else is corruption, not a result. */
function decodeRows(operationId: string, lastRevision: number, rows: TransitionRow[]): ReadOutcome {
  return decodeFrom(operationId, 1, lastRevision, rows);
}

/** Rows must be exactly revisions from..lastRevision (the one the tail follows, then the tail); the tail is after the first. */
function decodeTail(operationId: string, from: number, lastRevision: number, rows: TransitionRow[]): TailOutcome {
  if (rows[0]?.revision !== from) return { kind: 'unavailable', description: `operation ${operationId} has a gap at revision ${from}` };
  return decodeFrom(operationId, from + 1, lastRevision, rows.slice(1));
}

/** Rows must be exactly revisions from..lastRevision; anything else is corruption, not a result. */
function decodeFrom(operationId: string, from: number, lastRevision: number, rows: TransitionRow[]): ReadOutcome {
  const transitions: StoredTransition[] = [];
  for (const [index, row] of rows.entries()) {
    if (row.revision !== from + index) {
      return { kind: 'unavailable', description: `operation ${operationId} has a gap at revision ${from + index}` };
    }
    const stored = decodeStored(String(row.revision), row.committed_at_ms, row.body);
    if (isStoreFailure(stored)) return { kind: 'unavailable', description: stored.description };
    transitions.push(stored);
  }
  if (transitions.length !== lastRevision - from + 1) {
    return {
      kind: 'unavailable',
      description: `operation ${operationId} records revision ${lastRevision} but holds ${transitions.length + from - 1} transitions`,
    };
  }
  return { kind: 'ok', revision: String(lastRevision), transitions };
}
