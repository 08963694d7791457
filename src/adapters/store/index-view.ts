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
  isAfter,
  matchesQuery,
  type IndexPage,
  type IndexQuery,
  type OperationIndexRow,
  type StuckBounds,
  type StuckCounts,
} from '../../events/operation-index.js';

/**
 * An operation's place in the lists. The lists hold entries, not rows: an update whose row keeps
 * its lists (the common case: most appends change neither phase, outcome nor settlement) swaps
 * the entry's row and moves nothing, where lists of rows would each be searched for the old row.
 * `keys` are the keyed lists the entry is in (keysOf its row).
 */
interface Entry {
  row: OperationIndexRow;
  keys: readonly string[];
}

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

export class IndexView {
  /** Rows handed to `apply` are kept as they are (in their entries); an update swaps the entry's row. */
  private readonly entries = new Map<string, Entry>();
  private readonly all = new SortedList<Entry>(oldestFirst);
  private readonly keyed = new Map<string, SortedList<Entry>>();
  private readonly stuckInstants: Record<InstantKind, SortedList<Entry>> = {
    deadline: new SortedList(byDeadline),
    lease: new SortedList(byLease),
    outbox: new SortedList(byOutbox),
  };
  /** Rows a page has looked at since the view was made (the cost of pages, for tests and benches). */
  rowsWalked = 0;

  get size(): number {
    return this.entries.size;
  }

  get(operationId: string): OperationIndexRow | undefined {
    const entry = this.entries.get(operationId);
    return entry && copyOf(entry.row);
  }

  /** Every row held, oldest admission first, as held (not copies: a snapshot's body, jetstream-index-snapshot.ts). */
  heldRows(): OperationIndexRow[] {
    return Array.from(this.all, (entry) => entry.row);
  }

  /**
   * Fills an empty view with `rows` (one per operation) at once, each list sorted in one pass:
   * what applying each row answers, at a fraction of the cost for a view started from a snapshot.
   */
  load(rows: readonly OperationIndexRow[]): void {
    if (this.entries.size > 0) throw new Error('an IndexView is loaded only while empty');
    const all: Entry[] = [];
    // Rows of one principal, interaction, phase, outcome, settlement and stuckability share their
    // keys (one array) and the keyed lists they go to: one lookup per row, not one per key.
    const groups = new Map<string, { keys: readonly string[]; lists: Entry[][] }>();
    const keyed = new Map<string, Entry[]>();
    const timed: Record<InstantKind, Entry[]> = { deadline: [], lease: [], outbox: [] };
    for (const row of rows) {
      const same = `${row.principalId}\u0000${row.interaction}\u0000${row.phase}\u0000${row.outcome}\u0000${row.settlement}\u0000${isStuckable(row)}`;
      let group = groups.get(same);
      if (group === undefined) {
        const keys = keysOf(row);
        const lists = keys.map((key) => keyed.get(key) ?? (keyed.set(key, []).get(key) as Entry[]));
        groups.set(same, (group = { keys, lists }));
      }
      const entry: Entry = { row, keys: group.keys };
      if (this.entries.has(row.operationId)) throw new Error(`two rows of ${row.operationId}`);
      this.entries.set(row.operationId, entry);
      all.push(entry);
      // In the order given (a snapshot's is the lists' own): each keyed list is then sorted already.
      for (const list of group.lists) list.push(entry);
      if (row.outcome === null) timed.deadline.push(entry);
      if (row.leaseExpiresAtMs !== null) timed.lease.push(entry);
      if (row.outboxPendingSinceMs !== null) timed.outbox.push(entry);
    }
    this.all.load(all);
    for (const [key, entries] of keyed) this.listed(key).load(entries);
    for (const kind of instantKinds) this.stuckInstants[kind].load(timed[kind]);
  }

  /** Sets the operation's row (a newer one replaces what the view holds). */
  apply(row: OperationIndexRow): void {
    const entry = this.entries.get(row.operationId);
    if (entry === undefined || entry.row.admittedAtMs !== row.admittedAtMs) {
      // New, or a row whose place in the order differs (a damaged row replaced): placed afresh.
      if (entry) this.remove(row.operationId);
      this.add(row);
      return;
    }
    const old = entry.row;
    const keys = sameKeys(old, row) ? entry.keys : keysOf(row);
    // Out of the lists it leaves while the entry still sorts as the old row does.
    const was = entry.keys;
    if (keys !== was) for (let k = 0; k < was.length; k++) if (keys[k] !== was[k]) this.unlist(was[k] as string, entry);
    // Each instant list spelled out (the hot path of every append): out while the entry sorts as the old row.
    const { deadline, lease, outbox } = this.stuckInstants;
    const deadlineWas = instants.deadline(old);
    const deadlineIs = instants.deadline(row);
    if (deadlineWas !== null && deadlineWas !== deadlineIs) deadline.delete(entry);
    if (old.leaseExpiresAtMs !== null && old.leaseExpiresAtMs !== row.leaseExpiresAtMs) lease.delete(entry);
    if (old.outboxPendingSinceMs !== null && old.outboxPendingSinceMs !== row.outboxPendingSinceMs) outbox.delete(entry);
    entry.row = row;
    if (keys !== was) {
      for (let k = 0; k < keys.length; k++) if (keys[k] !== was[k]) this.listed(keys[k] as string).insert(entry);
      entry.keys = keys;
    }
    if (deadlineIs !== null && deadlineIs !== deadlineWas) deadline.insert(entry);
    if (row.leaseExpiresAtMs !== null && row.leaseExpiresAtMs !== old.leaseExpiresAtMs) lease.insert(entry);
    if (row.outboxPendingSinceMs !== null && row.outboxPendingSinceMs !== old.outboxPendingSinceMs) outbox.insert(entry);
  }

  remove(operationId: string): void {
    const entry = this.entries.get(operationId);
    if (!entry) return;
    this.entries.delete(operationId);
    this.all.delete(entry);
    for (const key of entry.keys) this.unlist(key, entry);
    for (const kind of instantKinds) if (instants[kind](entry.row) !== null) this.stuckInstants[kind].delete(entry);
  }

  /** One page for `query`: what pageOf answers over every row, walking only the rows it needs. */
  page(query: IndexQuery): IndexPage {
    let list: SortedList<Entry> | undefined = this.all;
    for (const key of candidateKeys(query)) {
      const candidate = this.keyed.get(key);
      if (candidate === undefined || candidate.size < (list?.size ?? 0)) list = candidate;
      if (list === undefined) return { rows: [] }; // no row holds that value
    }
    const { after, untilMs, sinceMs } = query;
    // Newer than where the page starts: the cursor's row and those before it in list order, and those admitted at or after `until`.
    const newer = ({ row }: Entry): boolean => (after !== undefined && !isAfter(row, after)) || (untilMs !== undefined && row.admittedAtMs >= untilMs);
    const matching: OperationIndexRow[] = [];
    for (const { row } of list.backFrom(newer)) {
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
      'open-past-deadline': deadline.countBefore(({ row }) => row.deadlineMs + bounds.deadlineGraceMs < nowMs),
      'lease-expired': lease.countBefore(({ row }) => (row.leaseExpiresAtMs as number) + bounds.leaseGraceMs < nowMs),
      'outbox-pending': outbox.countBefore(({ row }) => (row.outboxPendingSinceMs as number) + bounds.outboxPendingMs < nowMs),
      'settlement-indeterminate': this.keyed.get('s\u0000indeterminate')?.size ?? 0,
    };
  }

  private add(row: OperationIndexRow): void {
    const entry: Entry = { row, keys: keysOf(row) };
    this.entries.set(row.operationId, entry);
    this.all.insert(entry);
    for (const key of entry.keys) this.listed(key).insert(entry);
    const { deadline, lease, outbox } = this.stuckInstants;
    if (instants.deadline(row) !== null) deadline.insert(entry);
    if (row.leaseExpiresAtMs !== null) lease.insert(entry);
    if (row.outboxPendingSinceMs !== null) outbox.insert(entry);
  }

  private listed(key: string): SortedList<Entry> {
    let list = this.keyed.get(key);
    if (!list) this.keyed.set(key, (list = new SortedList(oldestFirst)));
    return list;
  }

  /** Takes `entry` out of the keyed list `key`, and drops the list when it empties. */
  private unlist(key: string, entry: Entry): void {
    const list = this.keyed.get(key);
    if (!list) return;
    list.delete(entry);
    if (list.size === 0) this.keyed.delete(key);
  }
}

function copyOf(row: OperationIndexRow): OperationIndexRow {
  return { ...row, lastRejection: row.lastRejection && { ...row.lastRejection } };
}
