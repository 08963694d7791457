/**
 * The SQLite store's workflow instances index: a real table, written inside each append's
 * transaction (sqlite.ts) from the committing side's row, with one B-tree per way a list narrows
 * — all, by principal, status, workflow name, principal and status — each ending in
 * (started_at_ms, instance_id), the list order. A page is an index seek to the cursor and a walk
 * of `limit` entries, so its cost does not grow with the number of stored instances. A stuck page
 * walks a partial index of the running rows in list order (only a running instance can be stuck),
 * with each reason's instant a column of its own.
 *
 * The row itself is kept whole as JSON beside the columns a query filters on, and read back
 * through the same check as every other store's (workflow-rows.ts).
 */
import type Database from 'better-sqlite3';
import {
  workflowStuckReasons,
  type WorkflowIndexPage,
  type WorkflowIndexQuery,
  type WorkflowIndexRow,
  type WorkflowStuckBounds,
  type WorkflowStuckReason,
} from '../../events/workflow-index.js';
import type { WorkflowIndexStore } from './types.js';
import { PageConditions, PreparedStatements, readIndex } from './sqlite-index.js';
import { isWorkflowStream, parseWorkflowIndexRow } from './workflow-rows.js';

const running = "status = 'running'";

export const workflowIndexSchema = `
CREATE TABLE IF NOT EXISTS workflow_index (
  instance_id TEXT PRIMARY KEY,
  principal_id TEXT NOT NULL,
  workflow_name TEXT NOT NULL,
  status TEXT NOT NULL,
  started_at_ms INTEGER NOT NULL,
  deadline_ms INTEGER,
  next_due_ms INTEGER,
  lease_until_ms INTEGER,
  row TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS workflow_index_all ON workflow_index (started_at_ms, instance_id);
CREATE INDEX IF NOT EXISTS workflow_index_principal ON workflow_index (principal_id, started_at_ms, instance_id);
CREATE INDEX IF NOT EXISTS workflow_index_status ON workflow_index (status, started_at_ms, instance_id);
CREATE INDEX IF NOT EXISTS workflow_index_workflow ON workflow_index (workflow_name, started_at_ms, instance_id);
CREATE INDEX IF NOT EXISTS workflow_index_principal_status ON workflow_index (principal_id, status, started_at_ms, instance_id);
CREATE INDEX IF NOT EXISTS workflow_index_running ON workflow_index (started_at_ms, instance_id) WHERE ${running};
CREATE INDEX IF NOT EXISTS workflow_index_principal_running ON workflow_index (principal_id, started_at_ms, instance_id) WHERE ${running};
`;

/** The SQL condition of one stuck reason (each on a running row), with the instants it compares against. */
function stuckCondition(reason: WorkflowStuckReason, nowMs: number, bounds: WorkflowStuckBounds): { sql: string; params: number[] } {
  switch (reason) {
    case 'past-timeout':
      return { sql: 'deadline_ms IS NOT NULL AND deadline_ms < ?', params: [nowMs - bounds.timeoutGraceMs] };
    case 'timer-overdue':
      return {
        sql: 'next_due_ms IS NOT NULL AND next_due_ms < ? AND (lease_until_ms IS NULL OR lease_until_ms < ?)',
        params: [nowMs - bounds.timerGraceMs, nowMs],
      };
    case 'lease-expired':
      return { sql: 'lease_until_ms IS NOT NULL AND lease_until_ms < ?', params: [nowMs - bounds.leaseGraceMs] };
    default: {
      const unreachable: never = reason;
      return unreachable;
    }
  }
}

/** A listed row: the stored row and its position in the list. */
interface ListedRow {
  row: string;
  started_at_ms: number;
  instance_id: string;
}

/** The statement one page runs: `limit + 1` rows from the position on, in list order. */
export function workflowListStatement(query: WorkflowIndexQuery): { sql: string; params: (string | number)[] } {
  const c = new PageConditions();
  c.equal('principal_id', query.principalId);
  c.equal('status', query.status);
  c.equal('workflow_name', query.workflowName);
  c.window('started_at_ms', 'instance_id', query, query.after && [query.after.startedAtMs, query.after.instanceId]);
  let indexed = '';
  if (query.stuck) {
    const { nowMs, bounds, reason } = query.stuck;
    // The running partial indexes: the running condition is stated beside the reasons.
    c.anyOf(
      running,
      (reason === undefined ? workflowStuckReasons : [reason]).map((r) => stuckCondition(r, nowMs, bounds)),
    );
    indexed = query.principalId === undefined ? 'INDEXED BY workflow_index_running' : 'INDEXED BY workflow_index_principal_running';
  }
  const sql = `SELECT row, started_at_ms, instance_id FROM workflow_index ${indexed} ${c.where()} ORDER BY started_at_ms DESC, instance_id DESC LIMIT ?`;
  return { sql, params: [...c.params, query.limit + 1] };
}

export class SqliteWorkflowIndex implements WorkflowIndexStore {
  private readonly upsert: Database.Statement;
  private readonly remover: Database.Statement;
  private readonly one: Database.Statement<[string], { row: string }>;
  private readonly running: Database.Statement<[string, number], { n: number }>;
  private readonly prepared: PreparedStatements<ListedRow>;

  constructor(
    db: Database.Database,
    private readonly closed: () => boolean,
  ) {
    this.upsert = db.prepare(
      'INSERT OR REPLACE INTO workflow_index (instance_id, principal_id, workflow_name, status, started_at_ms, deadline_ms, next_due_ms, lease_until_ms, row) ' +
        'VALUES (@instance_id, @principal_id, @workflow_name, @status, @started_at_ms, @deadline_ms, @next_due_ms, @lease_until_ms, @row)',
    );
    this.remover = db.prepare('DELETE FROM workflow_index WHERE instance_id = ?');
    this.prepared = new PreparedStatements(db);
    this.one = db.prepare<[string], { row: string }>('SELECT row FROM workflow_index WHERE instance_id = ?');
    // The principal's running partial index, walked no further than the bound: no row is read.
    this.running = db.prepare<[string, number], { n: number }>(
      `SELECT COUNT(*) AS n FROM (SELECT 1 FROM workflow_index INDEXED BY workflow_index_principal_running WHERE principal_id = ? AND ${running} LIMIT ?)`,
    );
  }

  /** Writes the row, or removes it; runs inside the caller's transaction. */
  write(instanceId: string, row: WorkflowIndexRow | undefined): void {
    if (row === undefined) {
      this.remover.run(instanceId);
      return;
    }
    this.upsert.run({
      instance_id: row.instanceId,
      principal_id: row.principalId,
      workflow_name: row.workflowName,
      status: row.status,
      started_at_ms: row.startedAtMs,
      deadline_ms: row.deadlineMs,
      next_due_ms: row.nextDueMs,
      lease_until_ms: row.lease?.untilMs ?? null,
      row: JSON.stringify(row),
    });
  }

  /** A row that is not one (workflow-rows.ts) is left out; the page still moves past it, to the last position it walked. */
  async list(query: WorkflowIndexQuery): Promise<WorkflowIndexPage> {
    const { sql, params } = workflowListStatement(query);
    const walked = this.read(() => this.prepared.of(sql).all(...params));
    const page = walked.slice(0, query.limit);
    const rows = page.flatMap((data) => parseWorkflowIndexRow(data.row) ?? []);
    const last = page.findLast((data) => Number.isSafeInteger(data.started_at_ms) && isWorkflowStream(String(data.instance_id)));
    return walked.length > query.limit && last ? { rows, next: { startedAtMs: last.started_at_ms, instanceId: last.instance_id } } : { rows };
  }

  async get(instanceId: string): Promise<WorkflowIndexRow | undefined> {
    const data = this.read(() => this.one.get(instanceId));
    return data && parseWorkflowIndexRow(data.row);
  }

  async countRunning(principalId: string, atMost: number): Promise<number> {
    return this.read(() => this.running.get(principalId, Math.max(0, atMost)))?.n ?? 0;
  }

  async put(instanceId: string, row: WorkflowIndexRow | undefined): Promise<void> {
    this.read(() => this.write(instanceId, row?.instanceId === instanceId ? row : undefined));
  }

  private read<T>(work: () => T): T {
    return readIndex(this.closed(), 'sqlite workflow index', work);
  }
}
