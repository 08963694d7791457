/**
 * The in-memory workflow instances index (src/adapters/store/workflow-index-view.ts) answers
 * exactly what the reference answers over every row — workflowPageOf of
 * src/events/workflow-index.ts — through any sequence of row updates and removals, for any query:
 * an update that keeps the instance's lists swaps its row in place, one whose status (or
 * principal, or name) changes moves it between lists, one whose start instant changes places it
 * afresh; and a view loaded at once from held rows answers the same, as do the pages a one-shot
 * reader reads (index-pages.ts) with an overlay of the changes after them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { assertEveryPage } from '../support/assertions.js';
import { WorkflowIndexView, instancePages, instanceShape } from '../../src/adapters/store/workflow-index-view.js';
import { pageOfPages, paginate, summarize } from '../../src/adapters/store/index-pages.js';
import type { RowShape } from '../../src/adapters/store/row-view.js';
import {
  workflowPageOf,
  workflowStatuses,
  workflowStuckReasons,
  type WorkflowIndexQuery,
  type WorkflowIndexRow,
  type WorkflowStuckBounds,
} from '../../src/events/workflow-index.js';

const ids = Array.from({ length: 5 }, (_, i) => `wf${i.toString(16).padStart(2, '0').repeat(32)}`);
const instant = fc.integer({ min: 1_000, max: 1_030 });
const maybeInstant = fc.option(instant, { nil: null });

const rowArb: fc.Arbitrary<WorkflowIndexRow> = fc
  .record({
    instanceId: fc.constantFrom(...ids),
    principalId: fc.constantFrom('alice', 'bob', 'carol'),
    workflowName: fc.constantFrom('a', 'b'),
    bundleDigest: fc.constant('sha256:' + '0'.repeat(64)),
    invocationKey: fc.constantFrom('k1', 'k2'),
    status: fc.constantFrom(...workflowStatuses),
    // Few instances and instants: most changes update an instance held, most keep its place, some move it.
    startedAtMs: fc.integer({ min: 1_000, max: 1_002 }),
    endedAtMs: maybeInstant,
    deadlineMs: maybeInstant,
    currentTask: fc.constant(null),
    nextDueMs: maybeInstant,
    lease: fc.option(
      instant.map((untilMs) => ({ worker: 'w', epoch: 1, untilMs })),
      { nil: null },
    ),
    lastError: fc.constant(null),
    childOperationIds: fc.constant<string[]>([]),
    parent: fc.constant(null),
    childOperations: fc.integer({ min: 0, max: 3 }),
    revision: fc.integer({ min: 1, max: 99 }).map(String),
  })
  // Plain objects, as the view's copies are.
  .map((row) => ({ ...row, lease: row.lease && { ...row.lease } }));

type Change = { kind: 'row'; row: WorkflowIndexRow } | { kind: 'remove'; instanceId: string };
const changeArb: fc.Arbitrary<Change> = fc.oneof(
  { weight: 6, arbitrary: rowArb.map((row) => ({ kind: 'row' as const, row })) },
  { weight: 1, arbitrary: fc.constantFrom(...ids).map((instanceId) => ({ kind: 'remove' as const, instanceId })) },
);

const bounds: WorkflowStuckBounds = { timeoutGraceMs: 3, timerGraceMs: 2, leaseGraceMs: 1 };

const queryArb: fc.Arbitrary<Omit<WorkflowIndexQuery, 'after'>> = fc
  .record(
    {
      principalId: fc.constantFrom('alice', 'bob', 'carol', 'dave'),
      status: fc.constantFrom(...workflowStatuses),
      workflowName: fc.constantFrom('a', 'b', 'c'),
      sinceMs: fc.integer({ min: 999, max: 1_004 }),
      untilMs: fc.integer({ min: 999, max: 1_004 }),
      stuck: fc
        .record({ nowMs: fc.integer({ min: 990, max: 1_040 }), bounds: fc.constant(bounds) }, { requiredKeys: ['nowMs', 'bounds'] })
        .chain((s) => fc.option(fc.constantFrom(...workflowStuckReasons), { nil: undefined }).map((reason) => (reason === undefined ? s : { ...s, reason }))),
    },
    { requiredKeys: [] },
  )
  .chain((filters) => fc.integer({ min: 1, max: 4 }).map((limit) => ({ ...filters, limit }) as Omit<WorkflowIndexQuery, 'after'>));

function assertPages(view: WorkflowIndexView, rows: Map<string, WorkflowIndexRow>, queries: readonly Omit<WorkflowIndexQuery, 'after'>[]): void {
  assert.equal(view.size, rows.size);
  for (const [id, row] of rows) assert.deepEqual(view.get(id), row);
  for (const query of queries)
    assertEveryPage<WorkflowIndexQuery, ReturnType<WorkflowIndexView['page']>>(
      (q) => view.page(q),
      (q) => workflowPageOf(rows.values(), q),
      query,
    );
}

test('every page of the workflow view equals the reference over all rows, through any updates and removals (fast-check)', () => {
  fc.assert(
    fc.property(fc.array(changeArb, { minLength: 1, maxLength: 80 }), fc.array(queryArb, { minLength: 1, maxLength: 6 }), (changes, queries) => {
      const view = new WorkflowIndexView();
      const rows = new Map<string, WorkflowIndexRow>();
      for (const change of changes) {
        if (change.kind === 'row') {
          view.apply(change.row);
          rows.set(change.row.instanceId, change.row);
        } else {
          view.remove(change.instanceId);
          rows.delete(change.instanceId);
        }
      }
      assertPages(view, rows, queries);
    }),
    { numRuns: 300 },
  );
});

test('a workflow view loaded at once, then updated, answers as the reference, and its held rows load the same view (fast-check)', () => {
  fc.assert(
    fc.property(fc.array(changeArb, { minLength: 1, maxLength: 80 }), fc.nat(), fc.array(queryArb, { minLength: 1, maxLength: 6 }), (changes, cut, queries) => {
      const at = cut % (changes.length + 1);
      const rows = new Map<string, WorkflowIndexRow>();
      const change = (view: WorkflowIndexView | undefined, c: Change) => {
        if (c.kind === 'row') rows.set(c.row.instanceId, c.row);
        else rows.delete(c.instanceId);
        if (view && c.kind === 'row') view.apply(c.row);
        else if (view && c.kind === 'remove') view.remove(c.instanceId);
      };
      for (const c of changes.slice(0, at)) change(undefined, c);
      const view = new WorkflowIndexView();
      view.load([...rows.values()].reverse());
      for (const c of changes.slice(at)) change(view, c);
      const again = new WorkflowIndexView();
      again.load(view.heldRows());
      assertPages(view, rows, queries);
      assertPages(again, rows, queries);
    }),
    { numRuns: 200 },
  );
});

test('workflow pages at a snapshot plus an overlay of the changes after it answer every page as the reference over the rows now (fast-check)', async () => {
  const shape = instanceShape as unknown as RowShape<WorkflowIndexRow, never, unknown>;
  await fc.assert(
    fc.asyncProperty(
      fc.array(changeArb, { minLength: 1, maxLength: 60 }),
      fc.nat(),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 3 }),
      fc.array(queryArb, { minLength: 1, maxLength: 6 }),
      async (changes, cut, pageRows, valuesMax, queries) => {
        const at = cut % (changes.length + 1);
        const view = new WorkflowIndexView();
        const rows = new Map<string, WorkflowIndexRow>();
        const overlay = new Map<string, WorkflowIndexRow | null>();
        let pages: { summary: ReturnType<typeof summarize>; rows: WorkflowIndexRow[] }[] = [];
        changes.forEach((c, n) => {
          if (n === at)
            pages = paginate(shape, view.heldRows(), [], pageRows)
              .reverse()
              .map((page) => ({ summary: summarize(instancePages, page.rows, valuesMax), rows: page.rows }));
          if (c.kind === 'row') {
            rows.set(c.row.instanceId, c.row);
            view.apply(c.row);
          } else {
            rows.delete(c.instanceId);
            view.remove(c.instanceId);
          }
          if (n >= at) overlay.set(c.kind === 'row' ? c.row.instanceId : c.instanceId, c.kind === 'row' ? c.row : null);
        });
        if (at === changes.length)
          pages = paginate(shape, view.heldRows(), [], pageRows)
            .reverse()
            .map((page) => ({ summary: summarize(instancePages, page.rows, valuesMax), rows: page.rows }));
        // The query, without its filters, and with each alone: a drawn query has most filters and usually matches nothing.
        const parts = (query: Omit<WorkflowIndexQuery, 'after'>) => [
          query,
          { limit: query.limit },
          ...Object.entries(query)
            .filter(([key]) => key !== 'limit')
            .map(([key, value]) => ({ limit: query.limit, [key]: value })),
        ];
        for (const query of queries.flatMap(parts)) {
          let after: WorkflowIndexQuery['after'];
          for (let page = 0; page < 30; page++) {
            const q: WorkflowIndexQuery = { ...query, ...(after ? { after } : {}) };
            const got = await pageOfPages(
              instancePages,
              pages.map((p) => p.summary),
              overlay,
              q,
              async (k) => pages[k]!.rows,
            );
            assert.deepEqual(got, workflowPageOf(rows.values(), q), `page ${page} of ${JSON.stringify(q)}`);
            if (!got.next) break;
            after = got.next;
          }
        }
      },
    ),
    { numRuns: 300 },
  );
});
