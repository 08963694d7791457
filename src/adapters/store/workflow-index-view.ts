/**
 * The workflow instances index held in memory, sorted every way a list narrows: the rows of a
 * store whose own storage has no sorted secondary index (the memory store, JetStream,
 * EventStoreDB), answering a page without reading every row — as index-view.ts does for
 * operations.
 *
 * One list in list order (newest start first, ties by instance id descending) of every row, and
 * one per value of each filter: principal, status, workflow name, principal and status, and the
 * running rows (the only ones that can be stuck; all and per principal). A page takes the
 * shortest list the query's filters name, seeks to the cursor (or `until`) and walks until it has
 * `limit + 1` matching rows or passes `since`; for one filter every row walked is a row of the
 * page, so a page's cost does not grow with the number of rows stored.
 *
 * Pure: no I/O, no clock (the instant comes with the query). Rows handed to `apply` are kept as
 * they are and must not be changed afterwards; rows handed out are copies.
 */
import { SortedList } from '../../contract/sorted-list.js';
import {
  compareWorkflowOrder,
  isAfterPosition,
  matchesWorkflowQuery,
  type WorkflowIndexPage,
  type WorkflowIndexQuery,
  type WorkflowIndexRow,
} from '../../events/workflow-index.js';
import { copyOfRow } from './workflow-rows.js';

/** Oldest start first: the reverse of list order, so that a new instance is appended, never inserted. */
const oldestFirst = (a: WorkflowIndexRow, b: WorkflowIndexRow): number => compareWorkflowOrder(b, a);

/** The keyed lists a row belongs to. A separator no principal or name holds keeps pairs apart. */
function keysOf(row: WorkflowIndexRow): string[] {
  const keys = [`p\u0000${row.principalId}`, `s\u0000${row.status}`, `w\u0000${row.workflowName}`, `ps\u0000${row.principalId}\u0000${row.status}`];
  if (row.status === 'running') keys.push('run', `prun\u0000${row.principalId}`);
  return keys;
}

/** The keyed lists a query may walk instead of every row: each holds every row the query can match. */
function candidateKeys(query: WorkflowIndexQuery): string[] {
  const keys: string[] = [];
  const p = query.principalId;
  if (p !== undefined) keys.push(`p\u0000${p}`);
  if (query.status !== undefined) keys.push(`s\u0000${query.status}`, ...(p === undefined ? [] : [`ps\u0000${p}\u0000${query.status}`]));
  if (query.workflowName !== undefined) keys.push(`w\u0000${query.workflowName}`);
  if (query.stuck) keys.push(p === undefined ? 'run' : `prun\u0000${p}`);
  return keys;
}

export class WorkflowIndexView {
  private readonly rows = new Map<string, WorkflowIndexRow>();
  private readonly all = new SortedList<WorkflowIndexRow>(oldestFirst);
  private readonly keyed = new Map<string, SortedList<WorkflowIndexRow>>();
  /** Rows pages have looked at since the view was made (the cost of pages, for tests and benches). */
  rowsWalked = 0;

  get size(): number {
    return this.rows.size;
  }

  get(instanceId: string): WorkflowIndexRow | undefined {
    const row = this.rows.get(instanceId);
    return row && copyOfRow(row);
  }

  /** Every row held, oldest start first, as held (not copies: a snapshot's body, jetstream-index-snapshot.ts). */
  heldRows(): WorkflowIndexRow[] {
    return Array.from(this.all);
  }

  /** Fills an empty view with `rows` (one per instance) at once: what applying each answers (index-view.ts `load`). */
  load(rows: readonly WorkflowIndexRow[]): void {
    if (this.rows.size > 0) throw new Error('a WorkflowIndexView is loaded only while empty');
    const keyed = new Map<string, WorkflowIndexRow[]>();
    for (const row of rows) {
      if (this.rows.has(row.instanceId)) throw new Error(`two rows of ${row.instanceId}`);
      this.rows.set(row.instanceId, row);
      for (const key of keysOf(row)) {
        const list = keyed.get(key);
        if (list) list.push(row);
        else keyed.set(key, [row]);
      }
    }
    this.all.load(rows);
    for (const [key, list] of keyed) this.listed(key).load(list);
  }

  /** Sets the instance's row (it replaces what the view holds). */
  apply(row: WorkflowIndexRow): void {
    let old = this.rows.get(row.instanceId);
    if (old && old.startedAtMs !== row.startedAtMs) {
      // A row whose place in the order differs (a damaged row replaced): placed afresh.
      this.remove(row.instanceId);
      old = undefined;
    }
    this.rows.set(row.instanceId, row);
    this.all.insert(row);
    const keys = keysOf(row);
    if (old) for (const key of keysOf(old)) if (!keys.includes(key)) this.unlist(key, old);
    for (const key of keys) this.listed(key).insert(row);
  }

  remove(instanceId: string): void {
    const row = this.rows.get(instanceId);
    if (!row) return;
    this.rows.delete(instanceId);
    this.all.delete(row);
    for (const key of keysOf(row)) this.unlist(key, row);
  }

  /** One page for `query`: what workflowPageOf answers over every row, walking only the rows it needs. */
  page(query: WorkflowIndexQuery): WorkflowIndexPage {
    let list: SortedList<WorkflowIndexRow> | undefined = this.all;
    for (const key of candidateKeys(query)) {
      const candidate = this.keyed.get(key);
      if (candidate === undefined || candidate.size < (list?.size ?? 0)) list = candidate;
      if (list === undefined) return { rows: [] }; // no row holds that value
    }
    const { after, untilMs, sinceMs } = query;
    const newer = (row: WorkflowIndexRow): boolean =>
      (after !== undefined && !isAfterPosition(row, after)) || (untilMs !== undefined && row.startedAtMs >= untilMs);
    const matching: WorkflowIndexRow[] = [];
    for (const row of list.backFrom(newer)) {
      if (sinceMs !== undefined && row.startedAtMs < sinceMs) break;
      this.rowsWalked++;
      if (!matchesWorkflowQuery(row, query)) continue;
      matching.push(row);
      if (matching.length > query.limit) break;
    }
    const rows = matching.slice(0, query.limit).map(copyOfRow);
    const last = rows.at(-1);
    return matching.length > query.limit && last ? { rows, next: { startedAtMs: last.startedAtMs, instanceId: last.instanceId } } : { rows };
  }

  private listed(key: string): SortedList<WorkflowIndexRow> {
    let list = this.keyed.get(key);
    if (!list) this.keyed.set(key, (list = new SortedList(oldestFirst)));
    return list;
  }

  private unlist(key: string, row: WorkflowIndexRow): void {
    const list = this.keyed.get(key);
    if (!list) return;
    list.delete(row);
    if (list.size === 0) this.keyed.delete(key);
  }
}
