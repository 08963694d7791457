/**
 * A paged index: the rows of an index view (index-view.ts, workflow-index-view.ts) cut into pages
 * in list order, each with a summary that lets a filtered page skip it, and a page of a query
 * answered from those pages plus an overlay of the rows changed since they were cut — without
 * holding every row (docs/decisions/jetstream-paged-index.md). The JetStream store keeps such
 * pages in its snapshot stream (jetstream-index-pages.ts) so that a one-shot reader (`convoke
 * list`) reads the directory, the rows stored after it and only the pages a page needs.
 *
 * Pages are cut oldest first and keep their boundaries from one generation to the next
 * (`paginate`): a new admission lands in the newest page, an update in the page of its position,
 * so a generation rewrites the pages whose rows changed and names the others again.
 *
 * Pure: no I/O, no clock (the instant comes with the query); pages are fetched through the
 * function given.
 */
import type { PagedQuery, RowShape } from './row-view.js';

/** A row's place in list order: its instant and its id (newest first, ties by id descending). */
export type PageKey = [atMs: number, id: string];

/** What a filtered page may skip a page by. */
export interface PageSummary {
  /** Rows in the page. */
  rows: number;
  /** The newest row's place (the page's first in list order) and the oldest's. */
  first: PageKey;
  last: PageKey;
  /** Rows per key (the view's keyed lists, RowShape.keysOf), for the key kinds with few values in the page. */
  keys: Record<string, number>;
  /** Key kinds (a key's text before its first NUL) with more than keyValuesMax values in the page: any value may be there. */
  many: string[];
  /** Per stuck instant (PagedKind.instants), the earliest among the page's rows; absent when no row has one. */
  earliest: Record<string, number>;
}

/** One kind of row as pages keep it: the view's shape, and what a stuck query needs of a page. */
export interface PagedKind<Row, Query extends PagedQuery<Position>, Position> {
  shape: RowShape<Row, Query, Position>;
  keyOfPosition(position: Position): PageKey;
  /** The instants whose earliest a page's summary keeps (a row without one answers null). */
  instants: Record<string, (row: Row) => number | null>;
  /** Whether a page of this summary may hold a row the query's stuck filter takes (the query has one). */
  stuckMayHold(summary: PageSummary, query: Query): boolean;
}

/** Distinct values of one key kind a summary lists; more are "many". */
export const keyValuesMax = 16;

const kindOf = (key: string): string => {
  const at = key.indexOf('\u0000');
  return at < 0 ? key : key.slice(0, at);
};

/** Whether `a` comes strictly after `b` in list order. */
export function keyAfter(a: PageKey, b: PageKey): boolean {
  return a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
}

/** List order over keys: newest first, ties by id descending. */
export function compareKeys(a: PageKey, b: PageKey): number {
  if (a[0] !== b[0]) return b[0] - a[0];
  return a[1] < b[1] ? 1 : a[1] > b[1] ? -1 : 0;
}

export function rowKey<Row>(shape: RowShape<Row, never, unknown>, row: Row): PageKey {
  return [shape.atMsOf(row), shape.idOf(row)];
}

/** The summary of a page's rows (any order; at least one). */
export function summarize<Row, Query extends PagedQuery<Position>, Position>(
  kind: PagedKind<Row, Query, Position>,
  rows: readonly Row[],
  valuesMax = keyValuesMax,
): PageSummary {
  const shape = kind.shape as unknown as RowShape<Row, never, unknown>;
  let first = rowKey(shape, rows[0] as Row);
  let last = first;
  const keys: Record<string, number> = {};
  const values = new Map<string, number>();
  const earliest: Record<string, number> = {};
  const instantNames = Object.keys(kind.instants);
  for (const row of rows) {
    const key = rowKey(shape, row);
    if (keyAfter(first, key)) first = key;
    if (keyAfter(key, last)) last = key;
    for (const k of kind.shape.keysOf(row)) {
      if (keys[k] === undefined) values.set(kindOf(k), (values.get(kindOf(k)) ?? 0) + 1);
      keys[k] = (keys[k] ?? 0) + 1;
    }
    for (const name of instantNames) {
      const at = (kind.instants[name] as (row: Row) => number | null)(row);
      if (at !== null && (earliest[name] === undefined || at < earliest[name])) earliest[name] = at;
    }
  }
  const many = [...values].filter(([, n]) => n > valuesMax).map(([k]) => k);
  if (many.length > 0) for (const k of Object.keys(keys)) if (many.includes(kindOf(k))) delete keys[k];
  return { rows: rows.length, first, last, keys, many, earliest };
}

/** Whether a page of `summary` may hold a row `query` takes (its cursor aside): false only when none can. */
export function mayHold<Row, Query extends PagedQuery<Position>, Position>(kind: PagedKind<Row, Query, Position>, summary: PageSummary, query: Query): boolean {
  if (query.sinceMs !== undefined && summary.first[0] < query.sinceMs) return false;
  if (query.untilMs !== undefined && summary.last[0] >= query.untilMs) return false;
  // Every row the query takes is in each of these keyed lists, so it has each key.
  for (const key of kind.shape.candidateKeys(query)) if (!summary.many.includes(kindOf(key)) && !(summary.keys[key] ?? 0)) return false;
  if ((query as { stuck?: unknown }).stuck !== undefined && !kind.stuckMayHold(summary, query)) return false;
  return true;
}

/** What a page walk read, for tests and benches. */
export interface PagesWalked {
  /** Pages fetched. */
  read: number;
  /** Pages passed by their summary without being fetched. */
  skipped: number;
}

/**
 * One page for `query` from `pages` (in list order; their rows as `fetch(n)` answers) and
 * `overlay` (per id, the row that replaces the pages' row of that id, or null when it is gone):
 * what the view's page answers over the pages' rows with the overlay applied. Walks the pages
 * from the cursor, fetching only those whose summary may hold a match, until `limit + 1` rows
 * at or before the last page read are known.
 */
export async function pageOfPages<Row, Query extends PagedQuery<Position>, Position>(
  kind: PagedKind<Row, Query, Position>,
  pages: readonly PageSummary[],
  overlay: ReadonlyMap<string, Row | null>,
  query: Query,
  fetch: (n: number) => Promise<readonly Row[]>,
  walked: PagesWalked = { read: 0, skipped: 0 },
): Promise<{ rows: Row[]; next?: Position }> {
  const { shape } = kind;
  const after = query.after === undefined ? undefined : kind.keyOfPosition(query.after);
  const keyOf = (row: Row): PageKey => rowKey(shape as unknown as RowShape<Row, never, unknown>, row);
  const takes = (row: Row): boolean => shape.matches(row, query) && (after === undefined || keyAfter(keyOf(row), after));
  const changed: Row[] = [];
  for (const row of overlay.values()) if (row !== null && takes(row)) changed.push(row);
  changed.sort((a, b) => compareKeys(keyOf(a), keyOf(b)));
  const found: Row[] = [];
  for (let n = 0; n < pages.length; n++) {
    const page = pages[n] as PageSummary;
    // Wholly at or before the cursor: nothing of it is on this page.
    if (after !== undefined && !keyAfter(page.last, after)) continue;
    // Wholly older than `since`, and so is every page after it.
    if (query.sinceMs !== undefined && page.first[0] < query.sinceMs) break;
    // The rows newer than this page are all known (the pages before it and the overlay): enough of them, and it is not read.
    if (found.length + countWhile(changed, (row) => keyAfter(page.first, keyOf(row))) > query.limit) break;
    if (!mayHold(kind, page, query)) walked.skipped++;
    else {
      walked.read++;
      for (const row of await fetch(n)) if (!overlay.has(shape.idOf(row)) && takes(row)) found.push(row);
    }
    // Every row taken at or before this page's last place is known: the pages' and the overlay's.
    if (found.length + countWhile(changed, (row) => !keyAfter(keyOf(row), page.last)) > query.limit) break;
  }
  const matching = [...found, ...changed].sort((a, b) => compareKeys(keyOf(a), keyOf(b))).slice(0, query.limit + 1);
  const rows = matching.slice(0, query.limit).map((row) => shape.copy(row));
  const last = rows.at(-1);
  return matching.length > query.limit && last ? { rows, next: shape.positionOf(last) } : { rows };
}

/** How many of `sorted`'s first items pass `test` (it holds for a prefix of them). */
function countWhile<T>(sorted: readonly T[], test: (item: T) => boolean): number {
  let n = 0;
  while (n < sorted.length && test(sorted[n] as T)) n++;
  return n;
}

/** A page a generation writes: its rows (oldest first), and the id of an earlier page it repeats exactly, if any. */
export interface CutPage<Row> {
  rows: Row[];
  same?: string;
}

/**
 * `rows` (oldest first, as a view holds them) cut into pages, oldest first, keeping the
 * boundaries of `previous` (the last generation's pages, oldest first, with their rows): the rows
 * up to each earlier page's newest place make that page again — the same page (`same`) when they
 * are the very rows it held (the view swaps a row's object on every change) — except the newest
 * page when it was not full, which takes every newer row. A changed page of more than twice
 * `pageRows` rows, and the newest rows, are cut every `pageRows` rows; an empty page goes.
 */
export function paginate<Row>(
  shape: RowShape<Row, never, unknown>,
  rows: readonly Row[],
  previous: readonly { id: string; rows: readonly Row[] }[],
  pageRows: number,
): CutPage<Row>[] {
  const bounds: PageKey[] = [];
  for (const [n, page] of previous.entries()) {
    const newest = page.rows.at(-1);
    if (newest === undefined || (n === previous.length - 1 && page.rows.length < pageRows)) continue;
    bounds.push(rowKey(shape, newest));
  }
  const groups: Row[][] = bounds.map(() => []);
  const open: Row[] = [];
  let g = 0;
  for (const row of rows) {
    const key = rowKey(shape, row);
    while (g < bounds.length && keyAfter(bounds[g] as PageKey, key)) g++;
    (g < bounds.length ? (groups[g] as Row[]) : open).push(row);
  }
  const byNewest = new Map(previous.map((page) => [page.rows.at(-1), page]));
  /** The earlier page whose rows are exactly `group`'s (the same objects, in order), if any. */
  const sameAs = (group: Row[]) => {
    const earlier = byNewest.get(group.at(-1));
    return earlier && earlier.rows.length === group.length && group.every((row, i) => row === earlier.rows[i]) ? earlier : undefined;
  };
  const cut: CutPage<Row>[] = [];
  const split = (group: Row[]) => {
    for (let at = 0; at < group.length; at += pageRows) cut.push({ rows: group.slice(at, at + pageRows) });
  };
  for (const group of groups) {
    if (group.length === 0) continue;
    const earlier = sameAs(group);
    if (earlier) cut.push({ rows: group, same: earlier.id });
    else if (group.length > 2 * pageRows) split(group);
    else cut.push({ rows: group });
  }
  if (open.length > 0) {
    const earlier = open.length <= pageRows ? sameAs(open) : undefined;
    if (earlier) cut.push({ rows: open, same: earlier.id });
    else split(open);
  }
  return cut;
}
