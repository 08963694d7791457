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
 * The lists, the in-place update and the page are row-view.ts's, shared with the workflow
 * instances view; this view adds the stuck instants' lists through its hooks.
 *
 * Pure: no I/O, no clock (the instant comes with the query). Callers own the rows they get back
 * (copies); rows handed to `apply` are kept as they are and must not be changed afterwards.
 */
import { SortedList } from '../../contract/sorted-list.js';
import {
  isAfter,
  matchesQuery,
  type IndexPosition,
  type IndexQuery,
  type OperationIndexRow,
  type StuckBounds,
  type StuckCounts,
} from '../../events/operation-index.js';
import { RowView, type RowShape, type ViewEntry } from './row-view.js';
import type { PagedKind } from './index-pages.js';

/** An operation's place in the lists (row-view.ts). */
type Entry = ViewEntry<OperationIndexRow>;

const byId = (a: Entry, b: Entry): number => (a.row.operationId < b.row.operationId ? -1 : a.row.operationId > b.row.operationId ? 1 : 0);

/**
 * Oldest admission first: the reverse of list order (compareListOrder), so that a new admission
 * is appended, never inserted. Spelled out: it is every list's comparison on every write.
 */
const oldestFirst = (a: Entry, b: Entry): number => {
  if (a === b) return 0;
  const x = a.row;
  const y = b.row;
  if (x.admittedAtMs !== y.admittedAtMs) return x.admittedAtMs - y.admittedAtMs;
  return x.operationId < y.operationId ? -1 : x.operationId > y.operationId ? 1 : 0;
};

/** Each stuck reason's instant, for the rows that have one (null: not in that reason's list). */
const instants = {
  deadline: (row: OperationIndexRow): number | null => (row.outcome === null ? row.deadlineMs : null),
  lease: (row: OperationIndexRow): number | null => row.leaseExpiresAtMs,
  outbox: (row: OperationIndexRow): number | null => row.outboxPendingSinceMs,
} as const;
type InstantKind = keyof typeof instants;
const instantKinds = Object.keys(instants) as InstantKind[];

/**
 * Entries by one instant, then operation id (only rows that have that instant are in its list, so
 * the comparators read the instant directly): one comparator per list, no lookup by kind.
 */
const byDeadline = (a: Entry, b: Entry): number => a.row.deadlineMs - b.row.deadlineMs || byId(a, b);
const byLease = (a: Entry, b: Entry): number => (a.row.leaseExpiresAtMs as number) - (b.row.leaseExpiresAtMs as number) || byId(a, b);
const byOutbox = (a: Entry, b: Entry): number => (a.row.outboxPendingSinceMs as number) - (b.row.outboxPendingSinceMs as number) || byId(a, b);

/**
 * The rows that can be stuck at some instant: undecided, a lease held, a publication waiting for
 * its receipt, or an indeterminate settlement (stuckReasonsOf needs one of these).
 */
export function isStuckable(row: OperationIndexRow): boolean {
  return row.outcome === null || row.leaseExpiresAtMs !== null || row.outboxPendingSinceMs !== null || row.settlement === 'indeterminate';
}

/**
 * The keyed lists a row belongs to. A separator no principal or interaction holds keeps pairs
 * apart. Each position holds one kind of key (its own prefix), so two rows' keys differ exactly
 * where their positions differ.
 */
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

/** Whether two rows of one operation belong to the same keyed lists (keysOf answers the same). */
function sameKeys(a: OperationIndexRow, b: OperationIndexRow): boolean {
  return (
    a.principalId === b.principalId &&
    a.interaction === b.interaction &&
    a.phase === b.phase &&
    a.outcome === b.outcome &&
    a.settlement === b.settlement &&
    isStuckable(a) === isStuckable(b)
  );
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

/** The operations index's rows as row-view.ts keeps them. */
export const operationShape: RowShape<OperationIndexRow, IndexQuery, IndexPosition> = {
  name: 'operations index',
  idOf: (row) => row.operationId,
  atMsOf: (row) => row.admittedAtMs,
  oldestFirst,
  keysOf,
  sameKeys,
  groupOf: (row) => `${row.principalId}\u0000${row.interaction}\u0000${row.phase}\u0000${row.outcome}\u0000${row.settlement}\u0000${isStuckable(row)}`,
  candidateKeys,
  isAfter,
  matches: matchesQuery,
  copy: copyOf,
  positionOf: (row) => ({ admittedAtMs: row.admittedAtMs, operationId: row.operationId }),
};

/** The operations index as pages keep it (index-pages.ts): each stuck reason's instant summarised by its earliest. */
export const operationPages: PagedKind<OperationIndexRow, IndexQuery, IndexPosition> = {
  shape: operationShape,
  keyOfPosition: (position) => [position.admittedAtMs, position.operationId],
  instants,
  stuckMayHold: ({ earliest, keys, many }, query) => {
    const { nowMs, bounds, reason } = query.stuck as NonNullable<IndexQuery['stuck']>;
    const before = (at: number | undefined, graceMs: number) => at !== undefined && at + graceMs < nowMs;
    const may = {
      'open-past-deadline': () => before(earliest.deadline, bounds.deadlineGraceMs),
      'lease-expired': () => before(earliest.lease, bounds.leaseGraceMs),
      'outbox-pending': () => before(earliest.outbox, bounds.outboxPendingMs),
      'settlement-indeterminate': () => many.includes('s') || (keys['s\u0000indeterminate'] ?? 0) > 0,
    };
    return reason === undefined ? Object.values(may).some((m) => m()) : may[reason]();
  },
};

export class IndexView extends RowView<OperationIndexRow, IndexQuery, IndexPosition> {
  private readonly stuckInstants: Record<InstantKind, SortedList<Entry>> = {
    deadline: new SortedList(byDeadline),
    lease: new SortedList(byLease),
    outbox: new SortedList(byOutbox),
  };

  constructor() {
    super(operationShape);
  }

  override load(rows: readonly OperationIndexRow[]): void {
    super.load(rows);
    const timed: Record<InstantKind, Entry[]> = { deadline: [], lease: [], outbox: [] };
    for (const entry of this.entries.values()) for (const kind of instantKinds) if (instants[kind](entry.row) !== null) timed[kind].push(entry);
    for (const kind of instantKinds) this.stuckInstants[kind].load(timed[kind]);
  }

  /** Rows stuck at `nowMs` per reason (what countStuck answers over every row): a seek per reason. */
  countStuck(nowMs: number, bounds: StuckBounds): StuckCounts {
    const { deadline, lease, outbox } = this.stuckInstants;
    return {
      'open-past-deadline': deadline.countBefore(({ row }) => row.deadlineMs + bounds.deadlineGraceMs < nowMs),
      'lease-expired': lease.countBefore(({ row }) => (row.leaseExpiresAtMs as number) + bounds.leaseGraceMs < nowMs),
      'outbox-pending': outbox.countBefore(({ row }) => (row.outboxPendingSinceMs as number) + bounds.outboxPendingMs < nowMs),
      'settlement-indeterminate': this.keyed.get('s\u0000indeterminate')?.size ?? 0,
    };
  }

  protected override added(entry: Entry): void {
    const { row } = entry;
    const { deadline, lease, outbox } = this.stuckInstants;
    if (instants.deadline(row) !== null) deadline.insert(entry);
    if (row.leaseExpiresAtMs !== null) lease.insert(entry);
    if (row.outboxPendingSinceMs !== null) outbox.insert(entry);
  }

  protected override removed(entry: Entry): void {
    for (const kind of instantKinds) if (instants[kind](entry.row) !== null) this.stuckInstants[kind].delete(entry);
  }

  /** Each instant list spelled out (the hot path of every append): out while the entry sorts as the old row. */
  protected override moving(entry: Entry, row: OperationIndexRow): void {
    const old = entry.row;
    const { deadline, lease, outbox } = this.stuckInstants;
    const deadlineWas = instants.deadline(old);
    if (deadlineWas !== null && deadlineWas !== instants.deadline(row)) deadline.delete(entry);
    if (old.leaseExpiresAtMs !== null && old.leaseExpiresAtMs !== row.leaseExpiresAtMs) lease.delete(entry);
    if (old.outboxPendingSinceMs !== null && old.outboxPendingSinceMs !== row.outboxPendingSinceMs) outbox.delete(entry);
  }

  /** In again where the instant moved, now that the entry sorts as its new row. */
  protected override moved(entry: Entry, old: OperationIndexRow): void {
    const { row } = entry;
    const { deadline, lease, outbox } = this.stuckInstants;
    const deadlineIs = instants.deadline(row);
    if (deadlineIs !== null && deadlineIs !== instants.deadline(old)) deadline.insert(entry);
    if (row.leaseExpiresAtMs !== null && row.leaseExpiresAtMs !== old.leaseExpiresAtMs) lease.insert(entry);
    if (row.outboxPendingSinceMs !== null && row.outboxPendingSinceMs !== old.outboxPendingSinceMs) outbox.insert(entry);
  }
}

function copyOf(row: OperationIndexRow): OperationIndexRow {
  return { ...row, lastRejection: row.lastRejection && { ...row.lastRejection } };
}
