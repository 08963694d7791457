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

interface Slot {
  readonly operationId: string;
  readonly admittedAtMs: number;
  row: OperationIndexRow;
  /** The keyed lists the slot is in (see keysOf). */
  keys: readonly string[];
  deadline: Instant | undefined;
  lease: Instant | undefined;
  outbox: Instant | undefined;
}

/** A slot's place in one stuck reason's list: the instant, then the operation id. */
interface Instant {
  readonly atMs: number;
  readonly operationId: string;
}

const byInstant = (a: Instant, b: Instant): number =>
  a.atMs !== b.atMs ? a.atMs - b.atMs : a.operationId < b.operationId ? -1 : a.operationId > b.operationId ? 1 : 0;

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
  private readonly slots = new Map<string, Slot>();
  private readonly all = new SortedList<Slot>(compareListOrder);
  private readonly keyed = new Map<string, SortedList<Slot>>();
  private readonly deadlines = new SortedList<Instant>(byInstant);
  private readonly leases = new SortedList<Instant>(byInstant);
  private readonly outboxes = new SortedList<Instant>(byInstant);
  /** Rows a page has looked at since the view was made (the cost of pages, for tests and benches). */
  rowsWalked = 0;

  get size(): number {
    return this.slots.size;
  }

  get(operationId: string): OperationIndexRow | undefined {
    const row = this.slots.get(operationId)?.row;
    return row && copyOf(row);
  }

  /** Sets the operation's row (a newer one replaces what the view holds). */
  apply(row: OperationIndexRow): void {
    const slot = this.slots.get(row.operationId);
    if (slot && slot.admittedAtMs === row.admittedAtMs) {
      slot.row = row;
      this.rekey(slot, keysOf(row));
      this.reinstant(slot);
      return;
    }
    // New, or a row whose place in the order differs (a damaged row replaced): placed afresh.
    if (slot) this.remove(row.operationId);
    const fresh: Slot = {
      operationId: row.operationId,
      admittedAtMs: row.admittedAtMs,
      row,
      keys: [],
      deadline: undefined,
      lease: undefined,
      outbox: undefined,
    };
    this.slots.set(row.operationId, fresh);
    this.all.insert(fresh);
    this.rekey(fresh, keysOf(row));
    this.reinstant(fresh);
  }

  remove(operationId: string): void {
    const slot = this.slots.get(operationId);
    if (!slot) return;
    this.slots.delete(operationId);
    this.all.delete(slot);
    this.rekey(slot, []);
    // Each list on its own: a deadline and a lease end may be the same instant of the same operation.
    if (slot.deadline) this.deadlines.delete(slot.deadline);
    if (slot.lease) this.leases.delete(slot.lease);
    if (slot.outbox) this.outboxes.delete(slot.outbox);
  }

  /** One page for `query`: what pageOf answers over every row, walking only the rows it needs. */
  page(query: IndexQuery): IndexPage {
    let list: SortedList<Slot> | undefined = this.all;
    for (const key of candidateKeys(query)) {
      const candidate = this.keyed.get(key);
      if (candidate === undefined || candidate.size < (list?.size ?? 0)) list = candidate;
      if (list === undefined) return { rows: [] }; // no row holds that value
    }
    const { after, untilMs, sinceMs } = query;
    const beforeStart = (slot: Slot): boolean => (after !== undefined && !isAfter(slot, after)) || (untilMs !== undefined && slot.admittedAtMs >= untilMs);
    const matching: OperationIndexRow[] = [];
    for (const slot of list.from(beforeStart)) {
      if (sinceMs !== undefined && slot.admittedAtMs < sinceMs) break;
      this.rowsWalked++;
      if (!matchesQuery(slot.row, query)) continue;
      matching.push(slot.row);
      if (matching.length > query.limit) break;
    }
    const rows = matching.slice(0, query.limit).map(copyOf);
    const last = rows.at(-1);
    return matching.length > query.limit && last ? { rows, next: { admittedAtMs: last.admittedAtMs, operationId: last.operationId } } : { rows };
  }

  /** Rows stuck at `nowMs` per reason (what countStuck answers over every row): a seek per reason. */
  countStuck(nowMs: number, bounds: StuckBounds): StuckCounts {
    return {
      'open-past-deadline': this.deadlines.countBefore((i) => i.atMs + bounds.deadlineGraceMs < nowMs),
      'lease-expired': this.leases.countBefore((i) => i.atMs + bounds.leaseGraceMs < nowMs),
      'outbox-pending': this.outboxes.countBefore((i) => i.atMs + bounds.outboxPendingMs < nowMs),
      'settlement-indeterminate': this.keyed.get('s\u0000indeterminate')?.size ?? 0,
    };
  }

  /** Moves the slot between keyed lists: out of those it left, into those it joined. */
  private rekey(slot: Slot, keys: readonly string[]): void {
    for (const key of slot.keys) {
      if (keys.includes(key)) continue;
      const list = this.keyed.get(key);
      list?.delete(slot);
      if (list?.size === 0) this.keyed.delete(key);
    }
    for (const key of keys) {
      if (slot.keys.includes(key)) continue;
      let list = this.keyed.get(key);
      if (!list) this.keyed.set(key, (list = new SortedList<Slot>(compareListOrder)));
      list.insert(slot);
    }
    slot.keys = keys;
  }

  /** Places the slot's stuck instants (undecided deadline, lease end, pending since) where they now are. */
  private reinstant(slot: Slot): void {
    const { row } = slot;
    slot.deadline = this.replace(this.deadlines, slot.deadline, row.outcome === null ? row.deadlineMs : null, slot.operationId);
    slot.lease = this.replace(this.leases, slot.lease, row.leaseExpiresAtMs, slot.operationId);
    slot.outbox = this.replace(this.outboxes, slot.outbox, row.outboxPendingSinceMs, slot.operationId);
  }

  private replace(list: SortedList<Instant>, held: Instant | undefined, atMs: number | null, operationId: string): Instant | undefined {
    if (held?.atMs === atMs) return held;
    if (held) list.delete(held);
    if (atMs === null) return undefined;
    const instant = { atMs, operationId };
    list.insert(instant);
    return instant;
  }
}

function copyOf(row: OperationIndexRow): OperationIndexRow {
  return { ...row, lastRejection: row.lastRejection && { ...row.lastRejection } };
}
