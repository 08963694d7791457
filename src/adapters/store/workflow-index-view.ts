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

/**
 * An instance's place in the lists. The lists hold entries, not rows (as index-view.ts does for
 * operations): an update whose row keeps its lists (every append but the start and the end: the
 * status is what moves a row between lists) swaps the entry's row and moves nothing. `keys` are
 * the keyed lists the entry is in (keysOf its row).
 */
interface Entry {
  row: WorkflowIndexRow;
  keys: readonly string[];
}

/** Oldest start first: the reverse of list order, so that a new instance is appended, never inserted. */
const oldestFirst = (a: Entry, b: Entry): number => (a === b ? 0 : compareWorkflowOrder(b.row, a.row));

/** The keyed lists a row belongs to. A separator no principal or name holds keeps pairs apart. */
function keysOf(row: WorkflowIndexRow): string[] {
  const keys = [`p\u0000${row.principalId}`, `s\u0000${row.status}`, `w\u0000${row.workflowName}`, `ps\u0000${row.principalId}\u0000${row.status}`];
  if (row.status === 'running') keys.push('run', `prun\u0000${row.principalId}`);
  return keys;
}

/** Whether two rows of one instance belong to the same keyed lists (keysOf answers the same). */
const sameKeys = (a: WorkflowIndexRow, b: WorkflowIndexRow): boolean =>
  a.principalId === b.principalId && a.status === b.status && a.workflowName === b.workflowName;

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
  /** Rows handed to `apply` are kept as they are (in their entries); an update swaps the entry's row. */
  private readonly entries = new Map<string, Entry>();
  private readonly all = new SortedList<Entry>(oldestFirst);
  private readonly keyed = new Map<string, SortedList<Entry>>();
  /** Rows pages have looked at since the view was made (the cost of pages, for tests and benches). */
  rowsWalked = 0;

  get size(): number {
    return this.entries.size;
  }

  get(instanceId: string): WorkflowIndexRow | undefined {
    const entry = this.entries.get(instanceId);
    return entry && copyOfRow(entry.row);
  }

  /** Every row held, oldest start first, as held (not copies: a snapshot's body, jetstream-index-snapshot.ts). */
  heldRows(): WorkflowIndexRow[] {
    return Array.from(this.all, (entry) => entry.row);
  }

  /** Fills an empty view with `rows` (one per instance) at once: what applying each answers (index-view.ts `load`). */
  load(rows: readonly WorkflowIndexRow[]): void {
    if (this.entries.size > 0) throw new Error('a WorkflowIndexView is loaded only while empty');
    const all: Entry[] = [];
    const keyed = new Map<string, Entry[]>();
    for (const row of rows) {
      if (this.entries.has(row.instanceId)) throw new Error(`two rows of ${row.instanceId}`);
      const entry: Entry = { row, keys: keysOf(row) };
      this.entries.set(row.instanceId, entry);
      all.push(entry);
      for (const key of entry.keys) {
        const list = keyed.get(key);
        if (list) list.push(entry);
        else keyed.set(key, [entry]);
      }
    }
    this.all.load(all);
    for (const [key, list] of keyed) this.listed(key).load(list);
  }

  /** Sets the instance's row (it replaces what the view holds). */
  apply(row: WorkflowIndexRow): void {
    const entry = this.entries.get(row.instanceId);
    if (entry === undefined || entry.row.startedAtMs !== row.startedAtMs) {
      // New, or a row whose place in the order differs (a damaged row replaced): placed afresh.
      if (entry) this.remove(row.instanceId);
      this.add(row);
      return;
    }
    const was = entry.keys;
    if (sameKeys(entry.row, row)) {
      entry.row = row;
      return;
    }
    const keys = keysOf(row);
    // Out of the lists it leaves, into those it joins: its place in each (start, id) is the same.
    for (const key of was) if (!keys.includes(key)) this.unlist(key, entry);
    entry.row = row;
    for (const key of keys) if (!was.includes(key)) this.listed(key).insert(entry);
    entry.keys = keys;
  }

  private add(row: WorkflowIndexRow): void {
    const entry: Entry = { row, keys: keysOf(row) };
    this.entries.set(row.instanceId, entry);
    this.all.insert(entry);
    for (const key of entry.keys) this.listed(key).insert(entry);
  }

  remove(instanceId: string): void {
    const entry = this.entries.get(instanceId);
    if (!entry) return;
    this.entries.delete(instanceId);
    this.all.delete(entry);
    for (const key of entry.keys) this.unlist(key, entry);
  }

  /** One page for `query`: what workflowPageOf answers over every row, walking only the rows it needs. */
  page(query: WorkflowIndexQuery): WorkflowIndexPage {
    let list: SortedList<Entry> | undefined = this.all;
    for (const key of candidateKeys(query)) {
      const candidate = this.keyed.get(key);
      if (candidate === undefined || candidate.size < (list?.size ?? 0)) list = candidate;
      if (list === undefined) return { rows: [] }; // no row holds that value
    }
    const { after, untilMs, sinceMs } = query;
    const newer = ({ row }: Entry): boolean => (after !== undefined && !isAfterPosition(row, after)) || (untilMs !== undefined && row.startedAtMs >= untilMs);
    const matching: WorkflowIndexRow[] = [];
    for (const { row } of list.backFrom(newer)) {
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

  private listed(key: string): SortedList<Entry> {
    let list = this.keyed.get(key);
    if (!list) this.keyed.set(key, (list = new SortedList(oldestFirst)));
    return list;
  }

  private unlist(key: string, entry: Entry): void {
    const list = this.keyed.get(key);
    if (!list) return;
    list.delete(entry);
    if (list.size === 0) this.keyed.delete(key);
  }
}
