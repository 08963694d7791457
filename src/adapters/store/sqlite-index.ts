/**
 * The SQLite store's operations index: a real table, written inside each append's transaction
 * (sqlite.ts), with one B-tree per way a list narrows — all, by principal, phase, outcome,
 * settlement, interaction — each ending in (admitted_at_ms, operation_id), the list order. A page
 * is an index seek to the cursor and a walk of `limit` entries, so its cost does not grow with
 * the number of stored operations (bench/list.ts measures it). Stuck rows have partial indexes
 * of their instants, so counting them costs the number of stuck rows; a stuck page walks the rows
 * that can be stuck in list order (`stuckable`), so it costs its own rows and the in-flight ones
 * it passes.
 *
 * A file written by a build before the index (schema 1) is indexed once when it is opened.
 */
import type Database from 'better-sqlite3';
import { unavailable } from '../../contract/errors.js';
import {
  stuckReasons,
  type IndexPage,
  type IndexQuery,
  type OperationIndexRow,
  type StuckBounds,
  type StuckCounts,
  type StuckReason,
} from '../../events/operation-index.js';
import type { DecisionOutcome, OperationPhase, RejectionReason, SettlementStatus, StoredTransition } from '../../events/types.js';
import type { IndexStates } from './index-states.js';
import { operationSets } from '../../machines/index.js';
import { limits as contractLimits } from '../../contract/limits.js';
import type { OperationIndexStore } from './types.js';
import { indexRowFieldsOf } from './index-row.js';
import { isOperationId } from '../../contract/ids.js';

/**
 * The rows that can be stuck at some instant: undecided (past its deadline, a lease ended — a
 * row holds a lease end only while undecided), a publication waiting for its receipt, or an
 * indeterminate settlement. Stuck pages walk a partial index of these rows in list order, so a
 * page costs the stuck rows it returns plus the in-flight rows not yet stuck that it passes —
 * neither the settled history nor the number of stuck rows beyond the page.
 */
const stuckable = "(outcome IS NULL OR outbox_pending_since_ms IS NOT NULL OR settlement = 'indeterminate')";

/** Rows of operations not settled (recovery reads only these): the phases the operation machine does not call settled. */
const notSettled = `phase NOT IN (${[...operationSets.settled].map((phase) => `'${phase}'`).join(', ')})`;

export const indexSchema = `
CREATE TABLE IF NOT EXISTS operation_index (
  operation_id TEXT PRIMARY KEY,
  principal_id TEXT NOT NULL,
  contract_id TEXT NOT NULL,
  contract_version TEXT NOT NULL,
  interaction TEXT NOT NULL,
  phase TEXT NOT NULL,
  outcome TEXT,
  settlement TEXT NOT NULL,
  admitted_at_ms INTEGER NOT NULL,
  decided_at_ms INTEGER,
  settled_at_ms INTEGER,
  deadline_ms INTEGER NOT NULL,
  next_due_ms INTEGER,
  open_branches INTEGER NOT NULL,
  last_rejection_reason TEXT,
  last_rejection_at_ms INTEGER,
  lease_expires_at_ms INTEGER,
  outbox_pending_since_ms INTEGER,
  revision TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS operation_index_all ON operation_index (admitted_at_ms, operation_id);
CREATE INDEX IF NOT EXISTS operation_index_principal ON operation_index (principal_id, admitted_at_ms, operation_id);
CREATE INDEX IF NOT EXISTS operation_index_phase ON operation_index (phase, admitted_at_ms, operation_id);
CREATE INDEX IF NOT EXISTS operation_index_outcome ON operation_index (outcome, admitted_at_ms, operation_id);
CREATE INDEX IF NOT EXISTS operation_index_settlement ON operation_index (settlement, admitted_at_ms, operation_id);
CREATE INDEX IF NOT EXISTS operation_index_interaction ON operation_index (interaction, admitted_at_ms, operation_id);
CREATE INDEX IF NOT EXISTS operation_index_principal_phase ON operation_index (principal_id, phase, admitted_at_ms, operation_id);
DROP INDEX IF EXISTS operation_index_open_deadline;
CREATE INDEX IF NOT EXISTS operation_index_open_deadline_outcome ON operation_index (deadline_ms, outcome) WHERE outcome IS NULL;
CREATE INDEX IF NOT EXISTS operation_index_not_settled ON operation_index (operation_id) WHERE ${notSettled};
CREATE INDEX IF NOT EXISTS operation_index_stuckable ON operation_index (admitted_at_ms, operation_id) WHERE ${stuckable};
CREATE INDEX IF NOT EXISTS operation_index_principal_stuckable ON operation_index (principal_id, admitted_at_ms, operation_id) WHERE ${stuckable};
CREATE INDEX IF NOT EXISTS operation_index_lease ON operation_index (lease_expires_at_ms) WHERE lease_expires_at_ms IS NOT NULL;
CREATE INDEX IF NOT EXISTS operation_index_outbox ON operation_index (outbox_pending_since_ms) WHERE outbox_pending_since_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS index_meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  built INTEGER NOT NULL
);
INSERT OR IGNORE INTO index_meta (id, built) VALUES (1, 0);
`;

const columns =
  'operation_id, principal_id, contract_id, contract_version, interaction, phase, outcome, settlement, admitted_at_ms, decided_at_ms, settled_at_ms, deadline_ms, next_due_ms, open_branches, last_rejection_reason, last_rejection_at_ms, lease_expires_at_ms, outbox_pending_since_ms, revision';

interface IndexRowData {
  operation_id: string;
  principal_id: string;
  contract_id: string;
  contract_version: string;
  interaction: string;
  phase: string;
  outcome: string | null;
  settlement: string;
  admitted_at_ms: number;
  decided_at_ms: number | null;
  settled_at_ms: number | null;
  deadline_ms: number;
  next_due_ms: number | null;
  open_branches: number;
  last_rejection_reason: string | null;
  last_rejection_at_ms: number | null;
  lease_expires_at_ms: number | null;
  outbox_pending_since_ms: number | null;
  revision: string;
}

function toData(row: OperationIndexRow): IndexRowData {
  return {
    operation_id: row.operationId,
    principal_id: row.principalId,
    contract_id: row.contractId,
    contract_version: row.contractVersion,
    interaction: row.interaction,
    phase: row.phase,
    outcome: row.outcome,
    settlement: row.settlement,
    admitted_at_ms: row.admittedAtMs,
    decided_at_ms: row.decidedAtMs,
    settled_at_ms: row.settledAtMs,
    deadline_ms: row.deadlineMs,
    next_due_ms: row.nextDueMs,
    open_branches: row.openBranches,
    last_rejection_reason: row.lastRejection?.reason ?? null,
    last_rejection_at_ms: row.lastRejection?.atMs ?? null,
    lease_expires_at_ms: row.leaseExpiresAtMs,
    outbox_pending_since_ms: row.outboxPendingSinceMs,
    revision: row.revision,
  };
}

function fromData(data: IndexRowData): OperationIndexRow {
  return {
    operationId: data.operation_id,
    principalId: data.principal_id,
    contractId: data.contract_id,
    contractVersion: data.contract_version,
    interaction: data.interaction,
    phase: data.phase as OperationPhase,
    outcome: data.outcome as DecisionOutcome | null,
    settlement: data.settlement as SettlementStatus,
    admittedAtMs: data.admitted_at_ms,
    decidedAtMs: data.decided_at_ms,
    settledAtMs: data.settled_at_ms,
    deadlineMs: data.deadline_ms,
    nextDueMs: data.next_due_ms,
    openBranches: data.open_branches,
    lastRejection:
      data.last_rejection_reason === null || data.last_rejection_at_ms === null
        ? null
        : { reason: data.last_rejection_reason as RejectionReason, atMs: data.last_rejection_at_ms },
    leaseExpiresAtMs: data.lease_expires_at_ms,
    outboxPendingSinceMs: data.outbox_pending_since_ms,
    revision: data.revision,
  };
}

/** The row stored, or undefined when the columns do not hold a whole one (indexRowFieldsOf: every field with its type and values). */
function rowOf(data: IndexRowData): OperationIndexRow | undefined {
  return indexRowFieldsOf(fromData(data) as unknown as Record<string, unknown>);
}

/** The SQL condition of one stuck reason, with the instant it compares against. */
function stuckCondition(reason: StuckReason, nowMs: number, bounds: StuckBounds): { sql: string; params: (string | number)[] } {
  switch (reason) {
    case 'open-past-deadline':
      return { sql: 'outcome IS NULL AND deadline_ms < ?', params: [nowMs - bounds.deadlineGraceMs] };
    case 'lease-expired':
      return { sql: 'lease_expires_at_ms IS NOT NULL AND lease_expires_at_ms < ?', params: [nowMs - bounds.leaseGraceMs] };
    case 'outbox-pending':
      return { sql: 'outbox_pending_since_ms IS NOT NULL AND outbox_pending_since_ms < ?', params: [nowMs - bounds.outboxPendingMs] };
    case 'settlement-indeterminate':
      return { sql: "settlement = 'indeterminate'", params: [] };
    default: {
      const unreachable: never = reason;
      return unreachable;
    }
  }
}

/** The index each stuck count reads (a covering range in each). */
const stuckCountIndex: Record<StuckReason, string> = {
  'open-past-deadline': 'operation_index_open_deadline_outcome',
  'lease-expired': 'operation_index_lease',
  'outbox-pending': 'operation_index_outbox',
  'settlement-indeterminate': 'operation_index_settlement',
};

/**
 * The count of one stuck reason. The index is named: without statistics SQLite takes the outcome
 * index for `outcome IS NULL` and reads every open row from the table (0.7 s at 100 000 open
 * rows), where each of these indexes covers its condition (the deadline index carries `outcome`
 * for that) and the count is a range of the index alone.
 */
export function stuckCountQuery(reason: StuckReason, nowMs: number, bounds: StuckBounds): { sql: string; params: (string | number)[] } {
  const c = stuckCondition(reason, nowMs, bounds);
  return { sql: `SELECT count(*) AS n FROM operation_index INDEXED BY ${stuckCountIndex[reason]} WHERE ${c.sql}`, params: c.params };
}

/**
 * The conditions of a list page, both indexes' (operations and workflow instances): equalities,
 * the instant's window, the cursor (rows before it in the list's newest-first order), and stuck
 * reasons behind the partial index's own condition.
 */
export class PageConditions {
  readonly parts: string[] = [];
  readonly params: (string | number)[] = [];

  equal(column: string, value: string | undefined): void {
    if (value === undefined) return;
    this.parts.push(`${column} = ?`);
    this.params.push(value);
  }

  /**
   * `instantColumn` in [sinceMs, untilMs), and (instant, id) before the cursor. Without an upper
   * bound, the last instant a row can hold is one: SQLite orders text after every number, so a
   * row whose instant was edited into text would come first in every page, with no position a
   * cursor can name.
   */
  window(instantColumn: string, idColumn: string, query: { sinceMs?: number; untilMs?: number }, after: readonly [number, string] | undefined): void {
    if (query.sinceMs !== undefined) {
      this.parts.push(`${instantColumn} >= ?`);
      this.params.push(query.sinceMs);
    }
    this.parts.push(`${instantColumn} ${query.untilMs === undefined ? '<=' : '<'} ?`);
    this.params.push(query.untilMs ?? Number.MAX_SAFE_INTEGER);
    if (after !== undefined) {
      this.parts.push(`(${instantColumn}, ${idColumn}) < (?, ?)`);
      this.params.push(...after);
    }
  }

  /**
   * Any of the stuck conditions, beside the partial index's own WHERE stated literally (SQLite
   * matches a partial index's WHERE by its terms).
   */
  anyOf(partialWhere: string, conditions: { sql: string; params: (string | number)[] }[]): void {
    this.parts.push(partialWhere, `(${conditions.map((c) => `(${c.sql})`).join(' OR ')})`);
    for (const c of conditions) this.params.push(...c.params);
  }

  where(): string {
    return this.parts.length === 0 ? '' : `WHERE ${this.parts.join(' AND ')}`;
  }
}

/** The WHERE clause and parameters of a list query (principal first: it picks the narrowest index). */
function whereOf(query: IndexQuery): { sql: string; params: (string | number)[] } {
  const c = new PageConditions();
  c.equal('principal_id', query.principalId);
  c.equal('phase', query.phase);
  if (query.outcome === 'open') c.parts.push('outcome IS NULL');
  else c.equal('outcome', query.outcome);
  c.equal('settlement', query.settlement);
  c.equal('interaction', query.interaction);
  c.window('admitted_at_ms', 'operation_id', query, query.after && [query.after.admittedAtMs, query.after.operationId]);
  if (query.stuck) {
    const { nowMs, bounds, reason } = query.stuck;
    c.anyOf(
      stuckable,
      (reason === undefined ? stuckReasons : [reason]).map((r) => stuckCondition(r, nowMs, bounds)),
    );
  }
  return { sql: c.where(), params: c.params };
}

/**
 * A stuck page walks the stuckable rows in list order (by principal when one is named) and stops
 * after `limit` matches. Left to itself SQLite answers the OR of the stuck reasons by gathering
 * every stuck row from the instants' partial indexes and sorting them: a page then cost the
 * number of stuck rows (over 1.7 s at 100 000, docs/performance.md).
 */
function indexedBy(query: IndexQuery): string {
  if (!query.stuck) return '';
  return query.principalId === undefined ? 'INDEXED BY operation_index_stuckable' : 'INDEXED BY operation_index_principal_stuckable';
}

/** The statement one page runs: `limit + 1` rows from the position on, in list order. */
export function listStatement(query: IndexQuery): { sql: string; params: (string | number)[] } {
  const where = whereOf(query);
  const sql = `SELECT ${columns} FROM operation_index ${indexedBy(query)} ${where.sql} ORDER BY admitted_at_ms DESC, operation_id DESC LIMIT ?`;
  return { sql, params: [...where.params, query.limit + 1] };
}

/**
 * List statements by their SQL text, both indexes' (operations and workflow instances): a query
 * shape is prepared once, on first use.
 */
export class PreparedStatements<Row> {
  private readonly bySql = new Map<string, Database.Statement<(string | number)[], Row>>();

  constructor(private readonly db: Database.Database) {}

  of(sql: string): Database.Statement<(string | number)[], Row> {
    let statement = this.bySql.get(sql);
    if (!statement) {
      statement = this.db.prepare<(string | number)[], Row>(sql);
      this.bySql.set(sql, statement);
    }
    return statement;
  }
}

/**
 * An index read, both indexes': refused once the store is closed, and any SQLite error thrown by
 * `work` is `unavailable`, named by `what` ("sqlite index").
 */
export function readIndex<T>(closed: boolean, what: string, work: () => T): T {
  if (closed) throw unavailable('store is closed');
  try {
    return work();
  } catch (error) {
    throw unavailable(`${what}: ${error instanceof Error ? error.message : String(error)}`, error);
  }
}

export interface SqliteIndexHost {
  closed(): boolean;
  /** The operation's log, read inside the current transaction. */
  logOf(operationId: string): StoredTransition[];
  states: IndexStates;
}

export class SqliteOperationIndex implements OperationIndexStore {
  private readonly upsert: Database.Statement;
  private readonly remover: Database.Statement;
  private readonly one: Database.Statement<[string], IndexRowData>;
  private readonly prepared: PreparedStatements<IndexRowData>;
  private readonly rebuildTransaction: Database.Transaction<(operationId: string) => OperationIndexRow | undefined>;

  constructor(
    private readonly db: Database.Database,
    private readonly host: SqliteIndexHost,
  ) {
    this.upsert = db.prepare(
      `INSERT OR REPLACE INTO operation_index (${columns}) VALUES (${columns
        .split(', ')
        .map((c) => `@${c}`)
        .join(', ')})`,
    );
    this.remover = db.prepare('DELETE FROM operation_index WHERE operation_id = ?');
    this.prepared = new PreparedStatements(db);
    this.one = db.prepare<[string], IndexRowData>(`SELECT ${columns} FROM operation_index WHERE operation_id = ?`);
    this.rebuildTransaction = db.transaction((operationId: string) => {
      const live = db.prepare<[string], { tombstoned: number }>('SELECT tombstoned FROM operations WHERE id = ?').get(operationId);
      const row = live && !live.tombstoned ? host.states.rowOfLog(operationId, host.logOf(operationId)) : undefined;
      this.write(operationId, row);
      return row;
    });
    this.buildOnce();
  }

  /** Writes (or, for a log with nothing applied, removes) the row; runs inside the caller's transaction. */
  write(operationId: string, row: OperationIndexRow | undefined): void {
    if (row) this.upsert.run(toData(row));
    else this.remover.run(operationId);
  }

  remove(operationId: string): void {
    this.remover.run(operationId);
    this.host.states.forget(operationId);
  }

  /**
   * Rows that are not whole rows (a file edited by hand, or by another program) are left out, as
   * every store leaves out a row it cannot trust (index-row.ts); the page still moves past them:
   * its position is the last one it walked that is a position.
   */
  async list(query: IndexQuery): Promise<IndexPage> {
    const { sql, params } = listStatement(query);
    const walked = this.read(() => this.prepared.of(sql).all(...params));
    const page = walked.slice(0, query.limit);
    const rows = page.flatMap((data) => rowOf(data) ?? []);
    const last = page.findLast((data) => Number.isSafeInteger(data.admitted_at_ms) && isOperationId(String(data.operation_id)));
    return walked.length > query.limit && last ? { rows, next: { admittedAtMs: last.admitted_at_ms, operationId: last.operation_id } } : { rows };
  }

  async get(operationId: string): Promise<OperationIndexRow | undefined> {
    const data = this.read(() => this.one.get(operationId));
    return data && rowOf(data);
  }

  async rebuild(operationId: string): Promise<OperationIndexRow | undefined> {
    return this.read(() => this.rebuildTransaction.immediate(operationId));
  }

  async countStuck(nowMs: number, bounds: StuckBounds): Promise<StuckCounts> {
    const counts = {} as StuckCounts;
    this.read(() => {
      for (const reason of stuckReasons) {
        const c = stuckCountQuery(reason, nowMs, bounds);
        counts[reason] = this.db.prepare<(string | number)[], { n: number }>(c.sql).get(...c.params)?.n ?? 0;
      }
    });
    return counts;
  }

  /**
   * The rows not settled, paged by operation id over their partial index (never an open cursor:
   * the caller writes between pages on this connection). The row commits in the same
   * transaction as its transition, so an operation has a row from its admission on.
   */
  async *openOperationIds(): AsyncIterable<string> {
    const page = this.db.prepare<[string, number], { operation_id: string }>(
      `SELECT operation_id FROM operation_index WHERE ${notSettled} AND operation_id > ? ORDER BY operation_id LIMIT ?`,
    );
    for (let after = ''; ;) {
      const rows = this.read(() => page.all(after, contractLimits.sqliteOperationIdsPageMax));
      for (const row of rows) yield row.operation_id;
      const last = rows.at(-1);
      if (rows.length < contractLimits.sqliteOperationIdsPageMax || last === undefined) return;
      after = last.operation_id;
    }
  }

  private read<T>(work: () => T): T {
    return readIndex(this.host.closed(), 'sqlite index', work);
  }

  /** A file from before the index (or one never indexed): every live operation's row, once, in one transaction. */
  private buildOnce(): void {
    const built = this.db.prepare<[], { built: number }>('SELECT built FROM index_meta WHERE id = 1');
    if (built.get()?.built === 1) return;
    this.db
      .transaction(() => {
        if (built.get()?.built === 1) return; // another process built it while this one waited for the lock
        const ids = this.db.prepare<[], { id: string }>('SELECT id FROM operations WHERE tombstoned = 0').all();
        for (const { id } of ids) this.write(id, this.host.states.rowOfLog(id, this.host.logOf(id)));
        this.db.prepare('UPDATE index_meta SET built = 1 WHERE id = 1').run();
      })
      .immediate();
  }
}
