/**
 * The operations index held in memory, sorted every way a list narrows (docs/design.md §11): the
 * rows of a store whose own storage has no sorted secondary index (JetStream, EventStoreDB, the
 * memory store), answering a page and the stuck counts without reading every row.
 *
 * One list in list order (newest admission first, ties by operation id descending) of every row,
 * and one per value of each filter: principal, interaction, phase, outcome (`open` for undecided),
 * settlement, principal and phase, and the rows that can be stuck (all and per principal) — the
 * B-trees of the SQLite index (sqlite-index.ts), as SortedLists. A page takes the shortest list
 * the query's filters name, seeks to the cursor (or `until`) and walks until it has `limit + 1`
 * matching rows or passes `since`; for one filter every row walked is a row of the page. Each
 * stuck reason's instant (undecided deadline, lease end, publication pending since) has its own
 * list in instant order, so counting stuck rows is a seek per reason, not a pass over the rows.
 *
 * Pure: no I/O, no clock (the instant comes with the query). Callers own the rows they get back
 * (copies); rows handed to `apply` are kept as they are and must not be changed afterwards.
 */
import { SortedList } from '../../contract/sorted-list.js';
import {
  compareListOrder,
  isAfter,
  matchesQuery,
  type IndexPage,
  type IndexQuery,
  type OperationIndexRow,
  type StuckBounds,
  type StuckCounts,
} from '../../events/operation-index.js';

const byId = (a: OperationIndexRow, b: OperationIndexRow): number => (a.operationId < b.operationId ? -1 : a.operationId > b.operationId ? 1 : 0);

/** Oldest admission first: the reverse of list order, so that a new admission is appended, never inserted. */
const oldestFirst = (a: OperationIndexRow, b: OperationIndexRow): number => compareListOrder(b, a);

/** Each stuck reason's instant, for the rows that have one (null: not in that reason's list). */
const instants = {
  deadline: (row: OperationIndexRow): number | null => (row.outcome === null ? row.deadlineMs : null),
  lease: (row: OperationIndexRow): number | null => row.leaseExpiresAtMs,
  outbox: (row: OperationIndexRow): number | null => row.outboxPendingSinceMs,
} as const;
type InstantKind = keyof typeof instants;
const instantKinds = Object.keys(instants) as InstantKind[];

/** Rows by one instant, then operation id (only rows that have that instant are in its list). */
const byInstant =
  (kind: InstantKind) =>
  (a: OperationIndexRow, b: OperationIndexRow): number =>
    (instants[kind](a) as number) - (instants[kind](b) as number) || byId(a, b);

/**
 * The rows that can be stuck at some instant: undecided, a lease held, a publication waiting for
 * its receipt, or an indeterminate settlement (stuckReasonsOf needs one of these).
 */
export function isStuckable(row: OperationIndexRow): boolean {
  return row.outcome === null || row.leaseExpiresAtMs !== null || row.outboxPendingSinceMs !== null || row.settlement === 'indeterminate';
}

/** The keyed lists a row belongs to. A separator no principal or interaction holds keeps pairs apart. */
function keysOf(row: OperationIndexRow): string[] {
  const keys = [
    `p\u0000${row.principalId}`,
    `i\u0000${row.interaction}`,
    `ph\u0000${row.phase}`,
    `o\u0000${row.outcome ?? 'open'}`,
    `s\u0000${row.settlement}`,
    `pp\u0000${row.principalId}\u0000${row.phase}`,
  ];
  if (isStuckable(row)) keys.push('st', `pst\u0000${row.principalId}`);
  return keys;
}

/** The keyed lists a query may walk instead of every row: each holds every row the query can match. */
function candidateKeys(query: IndexQuery): string[] {
  const keys: string[] = [];
  const p = query.principalId;
  if (p !== undefined) keys.push(`p\u0000${p}`);
  if (query.interaction !== undefined) keys.push(`i\u0000${query.interaction}`);
  if (query.phase !== undefined) keys.push(`ph\u0000${query.phase}`, ...(p === undefined ? [] : [`pp\u0000${p}\u0000${query.phase}`]));
  if (query.outcome !== undefined) keys.push(`o\u0000${query.outcome}`);
  if (query.settlement !== undefined) keys.push(`s\u0000${query.settlement}`);
  if (query.stuck) {
    keys.push(p === undefined ? 'st' : `pst\u0000${p}`);
    if (query.stuck.reason === 'settlement-indeterminate') keys.push('s\u0000indeterminate');
    if (query.stuck.reason === 'open-past-deadline') keys.push('o\u0000open');
  }
  return keys;
}

export class IndexView {
  /**
   * The rows themselves are the lists' items: an update takes the old row out of the lists it
   * leaves (its fields still say where it is) and puts the new one in, where a tie replaces it.
   */
  private readonly rows = new Map<string, OperationIndexRow>();
  private readonly all = new SortedList<OperationIndexRow>(oldestFirst);
  private readonly keyed = new Map<string, SortedList<OperationIndexRow>>();
  private readonly stuckInstants: Record<InstantKind, SortedList<OperationIndexRow>> = {
    deadline: new SortedList(byInstant('deadline')),
    lease: new SortedList(byInstant('lease')),
    outbox: new SortedList(byInstant('outbox')),
  };
  /** Rows a page has looked at since the view was made (the cost of pages, for tests and benches). */
  rowsWalked = 0;

  get size(): number {
    return this.rows.size;
  }

  get(operationId: string): OperationIndexRow | undefined {
    const row = this.rows.get(operationId);
    return row && copyOf(row);
  }

  /** Sets the operation's row (a newer one replaces what the view holds). */
  apply(row: OperationIndexRow): void {
    let old = this.rows.get(row.operationId);
    if (old && old.admittedAtMs !== row.admittedAtMs) {
      // A row whose place in the order differs (a damaged row replaced): placed afresh.
      this.remove(row.operationId);
      old = undefined;
    }
    this.rows.set(row.operationId, row);
    this.all.insert(row);
    const keys = keysOf(row);
    if (old) for (const key of keysOf(old)) if (!keys.includes(key)) this.unlist(key, old);
    for (const key of keys) this.listed(key).insert(row);
    for (const kind of instantKinds) {
      const [was, is] = [old ? instants[kind](old) : null, instants[kind](row)];
      if (was !== null && was !== is) this.stuckInstants[kind].delete(old as OperationIndexRow);
      if (is !== null) this.stuckInstants[kind].insert(row);
    }
  }

  remove(operationId: string): void {
    const row = this.rows.get(operationId);
    if (!row) return;
    this.rows.delete(operationId);
    this.all.delete(row);
    for (const key of keysOf(row)) this.unlist(key, row);
    for (const kind of instantKinds) if (instants[kind](row) !== null) this.stuckInstants[kind].delete(row);
  }

  /** One page for `query`: what pageOf answers over every row, walking only the rows it needs. */
  page(query: IndexQuery): IndexPage {
    let list: SortedList<OperationIndexRow> | undefined = this.all;
    for (const key of candidateKeys(query)) {
      const candidate = this.keyed.get(key);
      if (candidate === undefined || candidate.size < (list?.size ?? 0)) list = candidate;
      if (list === undefined) return { rows: [] }; // no row holds that value
    }
    const { after, untilMs, sinceMs } = query;
    // Newer than where the page starts: the cursor's row and those before it in list order, and those admitted at or after `until`.
    const newer = (row: OperationIndexRow): boolean => (after !== undefined && !isAfter(row, after)) || (untilMs !== undefined && row.admittedAtMs >= untilMs);
    const matching: OperationIndexRow[] = [];
    for (const row of list.backFrom(newer)) {
      if (sinceMs !== undefined && row.admittedAtMs < sinceMs) break;
      this.rowsWalked++;
      if (!matchesQuery(row, query)) continue;
      matching.push(row);
      if (matching.length > query.limit) break;
    }
    const rows = matching.slice(0, query.limit).map(copyOf);
    const last = rows.at(-1);
    return matching.length > query.limit && last ? { rows, next: { admittedAtMs: last.admittedAtMs, operationId: last.operationId } } : { rows };
  }

  /** Rows stuck at `nowMs` per reason (what countStuck answers over every row): a seek per reason. */
  countStuck(nowMs: number, bounds: StuckBounds): StuckCounts {
    const { deadline, lease, outbox } = this.stuckInstants;
    return {
      'open-past-deadline': deadline.countBefore((r) => r.deadlineMs + bounds.deadlineGraceMs < nowMs),
      'lease-expired': lease.countBefore((r) => (r.leaseExpiresAtMs as number) + bounds.leaseGraceMs < nowMs),
      'outbox-pending': outbox.countBefore((r) => (r.outboxPendingSinceMs as number) + bounds.outboxPendingMs < nowMs),
      'settlement-indeterminate': this.keyed.get('s\u0000indeterminate')?.size ?? 0,
    };
  }

  private listed(key: string): SortedList<OperationIndexRow> {
    let list = this.keyed.get(key);
    if (!list) this.keyed.set(key, (list = new SortedList(oldestFirst)));
    return list;
  }

  /** Takes `row` out of the keyed list `key`, and drops the list when it empties. */
  private unlist(key: string, row: OperationIndexRow): void {
    const list = this.keyed.get(key);
    if (!list) return;
    list.delete(row);
    if (list.size === 0) this.keyed.delete(key);
  }
}

function copyOf(row: OperationIndexRow): OperationIndexRow {
  return { ...row, lastRejection: row.lastRejection && { ...row.lastRejection } };
}
