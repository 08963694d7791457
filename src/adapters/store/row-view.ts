/**
 * An index held in memory, sorted every way a list narrows: what the operations view
 * (index-view.ts) and the workflow instances view (workflow-index-view.ts) share. One list in
 * list order (newest first by the row's instant, ties by id descending) of every row, and one list
 * per key a row has (a filter's value: a principal, a phase, a status, …). A page takes the
 * shortest list the query's filters name, seeks to the cursor (or `until`) and walks until it has
 * `limit + 1` matching rows or passes `since`; for one filter every row walked is a row of the
 * page, so a page's cost does not grow with the number of rows stored.
 *
 * The lists hold entries, not rows: an update whose row keeps its keys (most appends) swaps the
 * entry's row and moves nothing, where lists of rows would each be searched for the old row. A
 * row kind says what its keys are (RowShape); a view that keeps more lists (the operations view's
 * stuck instants) keeps them through the hooks `added`, `removed`, `moving` and `moved`.
 *
 * Pure: no I/O, no clock (the instant comes with the query). Rows handed to `apply` and `load` are
 * kept as they are and must not be changed afterwards; rows handed out are copies.
 */
import { SortedList } from '../../contract/sorted-list.js';

/** A row's place in the lists; `keys` are the keyed lists it is in (keysOf its row). */
export interface ViewEntry<Row> {
  row: Row;
  keys: readonly string[];
}

/** What every query of a view has: a page size, a cursor and an instant window. */
export interface PagedQuery<Position> {
  limit: number;
  after?: Position;
  sinceMs?: number;
  untilMs?: number;
}

/** What a view needs to know of one kind of row. */
export interface RowShape<Row, Query extends PagedQuery<Position>, Position> {
  /** Names the kind in errors. */
  name: string;
  idOf(row: Row): string;
  /** The instant the list order sorts by (admission, start); it never changes for a row. */
  atMsOf(row: Row): number;
  /** Oldest first, ties by id: the reverse of list order, so a new row is appended, never inserted. Every list's comparison on every write. */
  oldestFirst(a: ViewEntry<Row>, b: ViewEntry<Row>): number;
  /** The keyed lists a row belongs to. Each position holds one kind of key, so two rows' keys differ exactly where their positions differ. */
  keysOf(row: Row): string[];
  /** Whether two rows of one id belong to the same keyed lists (keysOf answers the same). */
  sameKeys(a: Row, b: Row): boolean;
  /** A text equal for rows with equal keys (a load groups rows by it: one lookup per row). */
  groupOf(row: Row): string;
  /** The keyed lists a query may walk instead of every row: each holds every row the query can match. */
  candidateKeys(query: Query): string[];
  /** Whether a row comes after the cursor's position in list order. */
  isAfter(row: Row, position: Position): boolean;
  matches(row: Row, query: Query): boolean;
  copy(row: Row): Row;
  positionOf(row: Row): Position;
}

export class RowView<Row, Query extends PagedQuery<Position>, Position> {
  /** Rows handed to `apply` are kept as they are (in their entries); an update swaps the entry's row. */
  protected readonly entries = new Map<string, ViewEntry<Row>>();
  private readonly all: SortedList<ViewEntry<Row>>;
  protected readonly keyed = new Map<string, SortedList<ViewEntry<Row>>>();
  /** Rows pages have looked at since the view was made (the cost of pages, for tests and benches). */
  rowsWalked = 0;

  constructor(private readonly shape: RowShape<Row, Query, Position>) {
    this.all = new SortedList(shape.oldestFirst);
  }

  get size(): number {
    return this.entries.size;
  }

  get(id: string): Row | undefined {
    const entry = this.entries.get(id);
    return entry && this.shape.copy(entry.row);
  }

  /** Every row held, oldest first, as held (not copies: a snapshot's body, jetstream-index-snapshot.ts). */
  heldRows(): Row[] {
    return Array.from(this.all, (entry) => entry.row);
  }

  /**
   * Fills an empty view with `rows` (one per id) at once, each list sorted in one pass: what
   * applying each row answers, at a fraction of the cost for a view started from a snapshot.
   */
  load(rows: readonly Row[]): void {
    if (this.entries.size > 0) throw new Error(`a ${this.shape.name} view is loaded only while empty`);
    const { shape } = this;
    const all: ViewEntry<Row>[] = [];
    // Rows of equal keys share their keys (one array) and the keyed lists they go to: one lookup per row, not one per key.
    const groups = new Map<string, { keys: readonly string[]; lists: ViewEntry<Row>[][] }>();
    const keyed = new Map<string, ViewEntry<Row>[]>();
    for (const row of rows) {
      const same = shape.groupOf(row);
      let group = groups.get(same);
      if (group === undefined) {
        const keys = shape.keysOf(row);
        const lists = keys.map((key) => keyed.get(key) ?? (keyed.set(key, []).get(key) as ViewEntry<Row>[]));
        groups.set(same, (group = { keys, lists }));
      }
      const id = shape.idOf(row);
      if (this.entries.has(id)) throw new Error(`two rows of ${id}`);
      const entry: ViewEntry<Row> = { row, keys: group.keys };
      this.entries.set(id, entry);
      all.push(entry);
      // In the order given (a snapshot's is the lists' own): each keyed list is then sorted already.
      for (const list of group.lists) list.push(entry);
    }
    this.all.load(all);
    for (const [key, entries] of keyed) this.listed(key).load(entries);
  }

  /** Sets the row of its id (it replaces what the view holds). */
  apply(row: Row): void {
    const { shape } = this;
    const entry = this.entries.get(shape.idOf(row));
    if (entry === undefined || shape.atMsOf(entry.row) !== shape.atMsOf(row)) {
      // New, or a row whose place in the order differs (a damaged row replaced): placed afresh.
      if (entry) this.remove(shape.idOf(row));
      this.add(row);
      return;
    }
    const old = entry.row;
    const was = entry.keys;
    const keys = shape.sameKeys(old, row) ? was : shape.keysOf(row);
    // Out of the lists it leaves while the entry still sorts as the old row does.
    if (keys !== was) for (let k = 0; k < was.length; k++) if (keys[k] !== was[k]) this.unlist(was[k] as string, entry);
    this.moving(entry, row);
    entry.row = row;
    if (keys !== was) {
      for (let k = 0; k < keys.length; k++) if (keys[k] !== was[k]) this.listed(keys[k] as string).insert(entry);
      entry.keys = keys;
    }
    this.moved(entry, old);
  }

  remove(id: string): void {
    const entry = this.entries.get(id);
    if (!entry) return;
    this.entries.delete(id);
    this.all.delete(entry);
    for (const key of entry.keys) this.unlist(key, entry);
    this.removed(entry);
  }

  /** One page for `query`: what the row kind's page over every row answers, walking only the rows it needs. */
  page(query: Query): { rows: Row[]; next?: Position } {
    const { shape } = this;
    let list: SortedList<ViewEntry<Row>> | undefined = this.all;
    for (const key of shape.candidateKeys(query)) {
      const candidate = this.keyed.get(key);
      if (candidate === undefined || candidate.size < (list?.size ?? 0)) list = candidate;
      if (list === undefined) return { rows: [] }; // no row holds that value
    }
    const { after, untilMs, sinceMs } = query;
    // Newer than where the page starts: the cursor's row and those before it in list order, and those at or after `until`.
    const newer = ({ row }: ViewEntry<Row>): boolean =>
      (after !== undefined && !shape.isAfter(row, after)) || (untilMs !== undefined && shape.atMsOf(row) >= untilMs);
    const matching: Row[] = [];
    for (const { row } of list.backFrom(newer)) {
      if (sinceMs !== undefined && shape.atMsOf(row) < sinceMs) break;
      this.rowsWalked++;
      if (!shape.matches(row, query)) continue;
      matching.push(row);
      if (matching.length > query.limit) break;
    }
    const rows = matching.slice(0, query.limit).map((row) => shape.copy(row));
    const last = rows.at(-1);
    return matching.length > query.limit && last ? { rows, next: shape.positionOf(last) } : { rows };
  }

  /** A new entry is in the view's lists. */
  protected added(_entry: ViewEntry<Row>): void {}
  /** An entry left the view's lists. */
  protected removed(_entry: ViewEntry<Row>): void {}
  /** An entry is about to take `row` (it still holds the old one). */
  protected moving(_entry: ViewEntry<Row>, _row: Row): void {}
  /** An entry took its new row; `old` is the one it held. */
  protected moved(_entry: ViewEntry<Row>, _old: Row): void {}

  private add(row: Row): void {
    const entry: ViewEntry<Row> = { row, keys: this.shape.keysOf(row) };
    this.entries.set(this.shape.idOf(row), entry);
    this.all.insert(entry);
    for (const key of entry.keys) this.listed(key).insert(entry);
    this.added(entry);
  }

  private listed(key: string): SortedList<ViewEntry<Row>> {
    let list = this.keyed.get(key);
    if (!list) this.keyed.set(key, (list = new SortedList(this.shape.oldestFirst)));
    return list;
  }

  /** Takes `entry` out of the keyed list `key`, and drops the list when it empties. */
  private unlist(key: string, entry: ViewEntry<Row>): void {
    const list = this.keyed.get(key);
    if (!list) return;
    list.delete(entry);
    if (list.size === 0) this.keyed.delete(key);
  }
}
