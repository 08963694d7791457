/**
 * The in-memory operations index (src/adapters/store/index-view.ts) answers exactly what the
 * reference answers over every row — pageOf and countStuck of src/events/operation-index.ts —
 * through any sequence of row updates and removals, for any query; and a page of one filter walks
 * only the rows it returns. The paged index a one-shot reader reads (index-pages.ts: the rows cut
 * into pages with summaries, and an overlay of the rows changed since) answers the same.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { assertEveryPage } from '../support/assertions.js';
import { IndexView, operationPages, operationShape } from '../../src/adapters/store/index-view.js';
import { pageOfPages, paginate, summarize, type PagesWalked } from '../../src/adapters/store/index-pages.js';
import type { RowShape } from '../../src/adapters/store/row-view.js';
import { countStuck, pageOf, stuckReasons, type IndexQuery, type OperationIndexRow, type StuckBounds } from '../../src/events/operation-index.js';

const ids = Array.from({ length: 24 }, (_, i) => `op${i.toString(16).padStart(2, '0').repeat(32)}`);
const instant = fc.integer({ min: 1_000, max: 1_040 });
const maybeInstant = fc.option(instant, { nil: null });

const rowArb: fc.Arbitrary<OperationIndexRow> = fc
  .record({
    operationId: fc.constantFrom(...ids),
    principalId: fc.constantFrom('alice', 'bob', 'carol'),
    contractId: fc.constant('example.review'),
    contractVersion: fc.constant('1.0.0'),
    interaction: fc.constantFrom('review', 'quick'),
    phase: fc.constantFrom('admitted', 'active', 'closed', 'settled'),
    outcome: fc.constantFrom(null, 'success', 'partial', 'failed', 'indeterminate'),
    settlement: fc.constantFrom('pending', 'complete', 'indeterminate'),
    // Few instants: ties in the order are common.
    admittedAtMs: fc.integer({ min: 1_000, max: 1_010 }),
    decidedAtMs: maybeInstant,
    settledAtMs: maybeInstant,
    deadlineMs: instant,
    nextDueMs: maybeInstant,
    openBranches: fc.integer({ min: 0, max: 3 }),
    // A plain object, as JSON.parse and the projection make (fast-check's records have no prototype).
    lastRejection: fc.option(
      instant.map((atMs) => ({ reason: 'stale-fence' as const, atMs })),
      { nil: null },
    ),
    leaseExpiresAtMs: maybeInstant,
    outboxPendingSinceMs: maybeInstant,
    revision: fc.integer({ min: 1, max: 99 }).map(String),
  })
  .map((row) => ({ ...row }));

type Change = { kind: 'row'; row: OperationIndexRow } | { kind: 'remove'; operationId: string };
const changeArb: fc.Arbitrary<Change> = fc.oneof(
  { weight: 5, arbitrary: rowArb.map((row) => ({ kind: 'row' as const, row })) },
  { weight: 1, arbitrary: fc.constantFrom(...ids).map((operationId) => ({ kind: 'remove' as const, operationId })) },
);

const bounds: StuckBounds = { deadlineGraceMs: 5, leaseGraceMs: 3, outboxPendingMs: 7 };

const queryArb: fc.Arbitrary<Omit<IndexQuery, 'after'>> = fc
  .record(
    {
      principalId: fc.constantFrom('alice', 'bob', 'carol', 'dave'),
      phase: fc.constantFrom('admitted', 'active', 'closed', 'settled'),
      outcome: fc.constantFrom('open', 'success', 'partial', 'failed', 'indeterminate'),
      settlement: fc.constantFrom('pending', 'complete', 'indeterminate'),
      interaction: fc.constantFrom('review', 'quick', 'other'),
      sinceMs: fc.integer({ min: 999, max: 1_011 }),
      untilMs: fc.integer({ min: 999, max: 1_011 }),
      stuck: fc
        .record({ nowMs: fc.integer({ min: 990, max: 1_060 }), bounds: fc.constant(bounds) }, { requiredKeys: ['nowMs', 'bounds'] })
        .chain((s) => fc.option(fc.constantFrom(...stuckReasons), { nil: undefined }).map((reason) => (reason === undefined ? s : { ...s, reason }))),
    },
    { requiredKeys: [] },
  )
  .chain((filters) => fc.integer({ min: 1, max: 4 }).map((limit) => ({ ...filters, limit }) as Omit<IndexQuery, 'after'>));

/** Every page of `query` the view answers, following the cursor: each must be the reference's page over `rows` at that cursor. */
function assertViewPages(view: IndexView, rows: ReadonlyMap<string, OperationIndexRow>, query: Omit<IndexQuery, 'after'>): void {
  assertEveryPage<IndexQuery, ReturnType<IndexView['page']>>(
    (q) => view.page(q),
    (q) => pageOf(rows.values(), q),
    query,
  );
}

test('every page and every stuck count of the view equals the reference over all rows, through any updates (fast-check)', () => {
  fc.assert(
    fc.property(fc.array(changeArb, { minLength: 1, maxLength: 80 }), fc.array(queryArb, { minLength: 1, maxLength: 6 }), (changes, queries) => {
      const view = new IndexView();
      const rows = new Map<string, OperationIndexRow>();
      for (const change of changes) {
        if (change.kind === 'row') {
          view.apply(change.row);
          rows.set(change.row.operationId, change.row);
        } else {
          view.remove(change.operationId);
          rows.delete(change.operationId);
        }
      }
      assert.equal(view.size, rows.size);
      for (const query of queries) {
        assertViewPages(view, rows, query);
        if (query.stuck) assert.deepEqual(view.countStuck(query.stuck.nowMs, bounds), countStuck(rows.values(), query.stuck.nowMs, bounds));
      }
    }),
    { numRuns: 300 },
  );
});

test('a view loaded at once (a snapshot), then updated, answers every page and stuck count as the reference, and its held rows load the same view (fast-check)', () => {
  fc.assert(
    fc.property(fc.array(changeArb, { minLength: 1, maxLength: 80 }), fc.nat(), fc.array(queryArb, { minLength: 1, maxLength: 6 }), (changes, cut, queries) => {
      const at = cut % (changes.length + 1);
      const rows = new Map<string, OperationIndexRow>();
      const change = (view: IndexView | undefined, c: Change) => {
        if (c.kind === 'row') rows.set(c.row.operationId, c.row);
        else rows.delete(c.operationId);
        if (view && c.kind === 'row') view.apply(c.row);
        else if (view && c.kind === 'remove') view.remove(c.operationId);
      };
      for (const c of changes.slice(0, at)) change(undefined, c);
      const view = new IndexView();
      // Any order: load sorts every list.
      view.load([...rows.values()].reverse());
      for (const c of changes.slice(at)) change(view, c);
      const again = new IndexView();
      again.load(view.heldRows());
      for (const v of [view, again]) {
        assert.equal(v.size, rows.size);
        for (const query of queries) {
          assertViewPages(v, rows, query);
          if (query.stuck) assert.deepEqual(v.countStuck(query.stuck.nowMs, bounds), countStuck(rows.values(), query.stuck.nowMs, bounds));
        }
      }
    }),
    { numRuns: 300 },
  );
});

test('updates that keep an operation in its place (its admission instant) answer as the reference, whichever fields change (fast-check)', () => {
  // Each operation has one admission instant, so every row after its first is an update in place:
  // some keep every list the operation is in, some change one key (phase, outcome, settlement,
  // stuck-ability) or one instant, as appends do.
  const admittedOf = (operationId: string): number => 1_000 + (ids.indexOf(operationId) % 4);
  const updateArb = rowArb.map((row) => ({ ...row, admittedAtMs: admittedOf(row.operationId), operationId: ids[ids.indexOf(row.operationId) % 6]! }));
  fc.assert(
    fc.property(
      fc.array(
        fc.tuple(updateArb, fc.subarray(['phase', 'outcome', 'settlement', 'deadlineMs', 'leaseExpiresAtMs', 'outboxPendingSinceMs', 'revision'] as const)),
        { minLength: 1, maxLength: 60 },
      ),
      fc.array(queryArb, { minLength: 1, maxLength: 6 }),
      (updates, queries) => {
        const view = new IndexView();
        const rows = new Map<string, OperationIndexRow>();
        for (const [drawn, changed] of updates) {
          // Only the drawn fields change from the operation's current row; the rest are kept.
          const current = rows.get(drawn.operationId);
          const row: OperationIndexRow = current ? { ...current } : drawn;
          if (current) for (const field of changed) Object.assign(row, { [field]: drawn[field] });
          view.apply(row);
          rows.set(row.operationId, row);
        }
        for (const query of queries) assertViewPages(view, rows, query);
        for (const nowMs of [990, 1_010, 1_030, 1_060]) assert.deepEqual(view.countStuck(nowMs, bounds), countStuck(rows.values(), nowMs, bounds));
      },
    ),
    { numRuns: 500 },
  );
});

test('a row that becomes stuck-able with nothing else of its lists changed is found by stuck pages', () => {
  const view = new IndexView();
  const row: OperationIndexRow = {
    operationId: ids[1]!,
    principalId: 'alice',
    contractId: 'example.review',
    contractVersion: '1.0.0',
    interaction: 'review',
    phase: 'closed',
    outcome: 'success',
    settlement: 'complete',
    admittedAtMs: 1_000,
    decidedAtMs: 1_005,
    settledAtMs: null,
    deadlineMs: 2_000,
    nextDueMs: null,
    openBranches: 0,
    lastRejection: null,
    leaseExpiresAtMs: null,
    outboxPendingSinceMs: null,
    revision: '3',
  };
  view.apply(row);
  // The same lists but one: a lease now held makes it stuck-able (the 'st' lists).
  view.apply({ ...row, leaseExpiresAtMs: 1_010, revision: '4' });
  const stuck = { nowMs: 1_100, bounds };
  for (const query of [{ stuck }, { stuck, principalId: 'alice' }, { stuck: { ...stuck, reason: 'lease-expired' as const } }]) {
    assert.deepEqual(
      view.page({ ...query, limit: 5 }).rows.map((r) => r.revision),
      ['4'],
      JSON.stringify(query),
    );
  }
  assert.equal(view.countStuck(1_100, bounds)['lease-expired'], 1);
});

test('rows a caller gets are copies: changing them changes nothing the view holds', () => {
  const view = new IndexView();
  const row: OperationIndexRow = {
    operationId: ids[0]!,
    principalId: 'alice',
    contractId: 'example.review',
    contractVersion: '1.0.0',
    interaction: 'review',
    phase: 'admitted',
    outcome: null,
    settlement: 'pending',
    admittedAtMs: 1_000,
    decidedAtMs: null,
    settledAtMs: null,
    deadlineMs: 2_000,
    nextDueMs: 2_000,
    openBranches: 1,
    lastRejection: { reason: 'stale-fence', atMs: 1_001 },
    leaseExpiresAtMs: null,
    outboxPendingSinceMs: null,
    revision: '1',
  };
  view.apply({ ...row, lastRejection: { reason: 'stale-fence', atMs: 1_001 } });
  const listed = view.page({ limit: 1 }).rows[0]!;
  listed.phase = 'settled';
  listed.lastRejection!.atMs = 0;
  assert.deepEqual(view.get(row.operationId), row);
});

/** Rows of many principals, interactions and phases; a tenth stuck-able. */
function manyRows(count: number): OperationIndexRow[] {
  const phases = ['admitted', 'active', 'closed', 'settled'] as const;
  return Array.from({ length: count }, (_, i) => {
    const phase = phases[i % 10 === 0 ? i % 3 : 3]!;
    const settled = phase === 'settled';
    const decided = phase === 'closed' || settled;
    return {
      operationId: `op${i.toString(16).padStart(64, '0')}`,
      principalId: `svc-${i % 16}`,
      contractId: 'example.review',
      contractVersion: '1.0.0',
      interaction: i % 2 === 0 ? 'review' : 'quick',
      phase,
      outcome: decided ? (i % 7 === 0 ? 'failed' : 'success') : null,
      settlement: settled ? (i % 50 === 0 ? 'indeterminate' : 'complete') : 'pending',
      admittedAtMs: 1_000_000 + Math.floor(i / 3),
      decidedAtMs: decided ? 1_000_000 + i : null,
      settledAtMs: settled ? 1_000_000 + i : null,
      deadlineMs: 1_060_000 + i,
      nextDueMs: decided ? null : 1_060_000 + i,
      openBranches: decided ? 0 : 2,
      lastRejection: null,
      leaseExpiresAtMs: decided ? null : 1_030_000 + i,
      outboxPendingSinceMs: decided ? null : 1_000_000 + i,
      revision: '3',
    };
  });
}

test('a page of one filter walks only the rows it returns (and the one that says there is more), at any size', () => {
  const limit = 50;
  const queries: Array<Omit<IndexQuery, 'limit'>> = [
    {},
    { principalId: 'svc-7' },
    { interaction: 'quick' },
    { phase: 'active' },
    { principalId: 'svc-3', phase: 'settled' },
    { outcome: 'failed' },
    { outcome: 'open' },
    { settlement: 'indeterminate' },
    { sinceMs: 1_000_100, untilMs: 1_000_300 },
    { stuck: { nowMs: 3_000_000, bounds } },
    { stuck: { nowMs: 3_000_000, bounds, reason: 'settlement-indeterminate' } },
  ];
  for (const size of [2_000, 20_000]) {
    const view = new IndexView();
    for (const row of manyRows(size)) view.apply(row);
    for (const query of queries) {
      // The first page and one deep in the list (by cursor).
      let after: IndexQuery['after'];
      for (let page = 0; page < 6; page++) {
        const before = view.rowsWalked;
        const result = view.page({ ...query, limit, ...(after ? { after } : {}) });
        const walked = view.rowsWalked - before;
        assert.ok(walked <= limit + 1, `${size} rows, ${JSON.stringify(query)}, page ${page}: walked ${walked} rows for a page of ${result.rows.length}`);
        if (!result.next) break;
        after = result.next;
      }
    }
  }
});

/**
 * The query, the query without its filters and with each one of them alone: a drawn query has most
 * filters and usually matches nothing, while its parts match rows spread over several pages.
 */
function withParts<Q extends { limit: number }>(query: Q): Q[] {
  const filters = Object.entries(query).filter(([key]) => key !== 'limit');
  return [query, { limit: query.limit } as Q, ...filters.map(([key, value]) => ({ limit: query.limit, [key]: value }) as Q)];
}

/** Every page of `query` following the cursor from pages and an overlay, each checked against the reference over `rows`. */
async function assertPagedPages(
  pages: readonly ReturnType<typeof summarize>[],
  rowsOf: (n: number) => readonly OperationIndexRow[],
  overlay: ReadonlyMap<string, OperationIndexRow | null>,
  rows: ReadonlyMap<string, OperationIndexRow>,
  query: Omit<IndexQuery, 'after'>,
  walked?: PagesWalked,
): Promise<void> {
  let after: IndexQuery['after'];
  for (let page = 0; page < 30; page++) {
    const q: IndexQuery = { ...query, ...(after ? { after } : {}) };
    const got = await pageOfPages(operationPages, pages, overlay, q, async (n) => rowsOf(n), walked);
    assert.deepEqual(got, pageOf(rows.values(), q), `page ${page} of ${JSON.stringify(q)}`);
    if (!got.next) break;
    after = got.next;
  }
}

test('pages of the rows at a snapshot plus an overlay of the changes after it answer every page as the reference over the rows now; a next generation names unchanged pages again and answers the same (fast-check)', async () => {
  const shape = operationShape as unknown as RowShape<OperationIndexRow, never, unknown>;
  await fc.assert(
    fc.asyncProperty(
      fc.array(changeArb, { minLength: 1, maxLength: 80 }),
      fc.nat(),
      fc.integer({ min: 1, max: 6 }),
      fc.integer({ min: 1, max: 4 }),
      fc.array(queryArb, { minLength: 1, maxLength: 6 }),
      async (changes, cut, pageRows, valuesMax, queries) => {
        const at = cut % (changes.length + 1);
        const view = new IndexView();
        const rows = new Map<string, OperationIndexRow>();
        const apply = (c: Change) => {
          if (c.kind === 'row') {
            rows.set(c.row.operationId, c.row);
            view.apply(c.row);
          } else {
            rows.delete(c.operationId);
            view.remove(c.operationId);
          }
        };
        for (const c of changes.slice(0, at)) apply(c);
        // The snapshot: the view's rows cut into pages, oldest first; the directory lists them newest first.
        const first = paginate(shape, view.heldRows(), [], pageRows).map((page, n) => ({ id: `g1-${n}`, rows: page.rows }));
        const directory = (generation: readonly { rows: readonly OperationIndexRow[] }[]) =>
          [...generation].reverse().map((page) => ({ summary: summarize(operationPages, page.rows, valuesMax), rows: page.rows }));
        const firstPages = directory(first);
        // The tail: each change after the snapshot replaces the row of its id, or removes it.
        const overlay = new Map<string, OperationIndexRow | null>();
        for (const c of changes.slice(at)) {
          apply(c);
          overlay.set(c.kind === 'row' ? c.row.operationId : c.operationId, c.kind === 'row' ? c.row : null);
        }
        for (const query of queries.flatMap(withParts))
          await assertPagedPages(
            firstPages.map((p) => p.summary),
            (n) => firstPages[n]!.rows,
            overlay,
            rows,
            query,
          );
        // The next generation from the view now: a page named again holds the very rows it held.
        const next = paginate(shape, view.heldRows(), first, pageRows);
        assert.deepEqual(
          next.flatMap((page) => page.rows),
          view.heldRows(),
        );
        if (at === changes.length)
          assert.ok(
            next.every((page) => page.same !== undefined),
            'nothing changed: every page is named again',
          );
        // A page named again is read as it was stored (the earlier generation's rows), summary and all.
        const nextPages = directory(next.map((page) => (page.same === undefined ? page : (first.find((p) => p.id === page.same) as (typeof first)[number]))));
        for (const query of queries.flatMap(withParts))
          await assertPagedPages(
            nextPages.map((p) => p.summary),
            (n) => nextPages[n]!.rows,
            new Map(),
            rows,
            query,
          );
      },
    ),
    { numRuns: 400 },
  );
});

test('a filtered page reads only the pages whose summary may hold a match', async () => {
  // 40 operations, pages of 5: one interaction only in the oldest page, a failed outcome only in the newest.
  const rows = new Map<string, OperationIndexRow>();
  for (let i = 0; i < 40; i++) {
    const operationId = `op${i.toString(16).padStart(64, '0')}`;
    rows.set(operationId, {
      operationId,
      principalId: 'alice',
      contractId: 'example.review',
      contractVersion: '1.0.0',
      interaction: i < 5 ? 'rare' : 'review',
      phase: 'settled',
      outcome: i >= 35 ? 'failed' : 'success',
      settlement: 'complete',
      admittedAtMs: 1_000 + i,
      decidedAtMs: 1_000 + i,
      settledAtMs: 1_000 + i,
      deadlineMs: 2_000 + i,
      nextDueMs: null,
      openBranches: 0,
      lastRejection: null,
      leaseExpiresAtMs: null,
      outboxPendingSinceMs: null,
      revision: '5',
    });
  }
  const held = [...rows.values()];
  const pages = paginate(operationShape as unknown as RowShape<OperationIndexRow, never, unknown>, held, [], 5)
    .reverse()
    .map((page) => ({ summary: summarize(operationPages, page.rows), rows: page.rows }));
  assert.equal(pages.length, 8);
  const cases: [Omit<IndexQuery, 'after'>, number][] = [
    [{ limit: 3, interaction: 'rare' }, 1],
    [{ limit: 3, outcome: 'failed' }, 1],
    [{ limit: 50, outcome: 'failed' }, 1],
    [{ limit: 3, interaction: 'other' }, 0],
    [{ limit: 3, stuck: { nowMs: 10_000, bounds } }, 0],
    [{ limit: 3 }, 1],
  ];
  for (const [query, read] of cases) {
    const walked = { read: 0, skipped: 0 };
    const got = await pageOfPages(
      operationPages,
      pages.map((p) => p.summary),
      new Map(),
      { ...query },
      async (n) => pages[n]!.rows,
      walked,
    );
    assert.deepEqual(got, pageOf(rows.values(), query));
    assert.equal(walked.read, read, `${JSON.stringify(query)} read ${walked.read} pages`);
  }
});
