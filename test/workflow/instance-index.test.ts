/**
 * The workflow instances index: every store keeps, with each append, the row the projection
 * (workflow/exec/index-row.ts) derives from the instance's log; lists filter, page by a cursor
 * stable under concurrent starts, and name stuck instances; the in-memory view answers exactly
 * what the reference page does, walking only the rows of its page.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { WorkflowIndexView } from '../../src/adapters/store/workflow-index-view.js';
import { SystemClock } from '../../src/contract/clock.js';
import {
  workflowPageOf,
  workflowStuckBoundsDefault,
  workflowStuckReasonsOf,
  type WorkflowIndexQuery,
  type WorkflowIndexRow,
} from '../../src/events/workflow-index.js';
import { workflowIndexRowOfLog } from '../../src/workflow/exec/index-row.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { harness, yaml } from './support.js';

const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;
const quick = yaml(`${head('quick')}do:\n  - double:\n      set:\n        n: \${ .n * 2 }\n`);
const failing = yaml(`${head('failing')}do:\n  - boom:\n      raise:\n        error: { type: https://example.com/boom, status: 418, title: boom }\n`);
const waiting = yaml(`${head('waiting')}timeout: { after: { hours: 2 } }\ndo:\n  - pause:\n      wait: { hours: 1 }\n`);

async function allPages(store: EventStore, query: Omit<WorkflowIndexQuery, 'after'>): Promise<WorkflowIndexRow[]> {
  const rows: WorkflowIndexRow[] = [];
  let after: WorkflowIndexQuery['after'];
  // Bounded: a cursor that does not move must fail the test, not hang it.
  for (let pages = 0; pages < 50; pages++) {
    const page = await store.workflowIndex.list({ ...query, ...(after ? { after } : {}) });
    rows.push(...page.rows);
    if (!page.next) return rows;
    after = page.next;
  }
  return assert.fail('more than 50 pages');
}

for (const kind of ['memory', 'sqlite'] as const) {
  test(`${kind}: each instance's row is the projection of its log; lists filter by status, workflow and principal and name stuck instances`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'convoke-wfindex-'));
    const clock = new SystemClock();
    const store = kind === 'memory' ? new MemoryEventStore({ clock }) : new SqliteEventStore({ path: join(dir, 'wf.db'), clock });
    const h = harness({ store, clock });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: `q${i}`, document: quick, input: { n: i } });
        assert.equal((await h.executor.wait(instanceId, 10_000)).status, 'completed');
        ids.push(instanceId);
      }
      const failed = await h.executor.start({ principalId: 'bob', invocationKey: 'f', document: failing, input: {} });
      assert.equal((await h.executor.wait(failed.instanceId, 10_000)).status, 'faulted');
      const paused = await h.executor.start({ principalId: 'bob', invocationKey: 'w', document: waiting, input: {} });
      const pausedRecord = await h.executor.wait(paused.instanceId, 300);
      assert.equal(pausedRecord.status, 'running');
      ids.push(failed.instanceId, paused.instanceId);

      for (const id of ids) {
        const read = await workflowStreams(store).read(id);
        assert.equal(read.kind, 'ok');
        const expected = workflowIndexRowOfLog(read.kind === 'ok' ? read.transitions : []);
        assert.deepEqual(await store.workflowIndex.get(id), expected, `the stored row of ${id} is its log's projection`);
      }
      const faultedRow = await store.workflowIndex.get(failed.instanceId);
      assert.equal(faultedRow?.status, 'faulted');
      assert.equal(faultedRow?.lastError?.status, 418);
      const pausedRow = await store.workflowIndex.get(paused.instanceId);
      assert.equal(pausedRow?.currentTask?.name, 'pause');
      assert.ok(pausedRow?.nextDueMs !== null && pausedRow?.lease !== null, 'a waiting instance shows its timer and its lease');

      assert.deepEqual(
        (await allPages(store, { limit: 2 })).map((r) => r.instanceId),
        [...ids].reverse(),
        'newest start first, across pages of 2',
      );
      assert.deepEqual(
        (await store.workflowIndex.list({ limit: 10, status: 'completed' })).rows.map((r) => r.instanceId),
        ids.slice(0, 3).reverse(),
      );
      assert.deepEqual(
        (await store.workflowIndex.list({ limit: 10, principalId: 'bob', workflowName: 'failing' })).rows.map((r) => r.instanceId),
        [failed.instanceId],
      );

      // Two hours on: the paused instance's timer is long overdue, its lease long ended, its timeout long past.
      const later = clock.nowMs() + 2 * 3_600_000 + 120_000;
      const stuck = await store.workflowIndex.list({ limit: 10, stuck: { nowMs: later, bounds: workflowStuckBoundsDefault } });
      assert.deepEqual(
        stuck.rows.map((r) => r.instanceId),
        [paused.instanceId],
      );
      assert.deepEqual(workflowStuckReasonsOf(stuck.rows[0] as WorkflowIndexRow, later, workflowStuckBoundsDefault), [
        'past-timeout',
        'timer-overdue',
        'lease-expired',
      ]);
      const now = await store.workflowIndex.list({ limit: 10, stuck: { nowMs: clock.nowMs(), bounds: workflowStuckBoundsDefault } });
      assert.deepEqual(now.rows, [], 'nothing is stuck now');
    } finally {
      await h.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(`${kind}: a cursor is stable while instances start between pages`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'convoke-wfindex-'));
    const clock = new SystemClock();
    const store = kind === 'memory' ? new MemoryEventStore({ clock }) : new SqliteEventStore({ path: join(dir, 'wf.db'), clock });
    const h = harness({ store, clock });
    try {
      const start = async (key: string) => {
        const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: key, document: quick, input: { n: 1 } });
        await h.executor.wait(instanceId, 10_000);
        return instanceId;
      };
      const first: string[] = [];
      for (let i = 0; i < 5; i++) first.push(await start(`a${i}`));
      const page1 = await store.workflowIndex.list({ limit: 2 });
      for (let i = 0; i < 3; i++) await start(`b${i}`);
      const seen = [...page1.rows.map((r) => r.instanceId)];
      let after = page1.next;
      for (let pages = 0; after && pages < 10; pages++) {
        const page = await store.workflowIndex.list({ limit: 2, after });
        seen.push(...page.rows.map((r) => r.instanceId));
        after = page.next;
      }
      assert.deepEqual(seen, [...first].reverse(), 'every instance before the first page once, in order; none started later');
    } finally {
      await h.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('the in-memory view answers every query as the reference page does, and a filtered page walks only its own rows', () => {
  const view = new WorkflowIndexView();
  const rows: WorkflowIndexRow[] = [];
  const statuses = ['running', 'completed', 'faulted', 'cancelled'] as const;
  // mulberry32: a seeded source whose low bits are as random as its high ones.
  let seed = 11;
  const next = (n: number) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  for (let i = 0; i < 2000; i++) {
    const status = statuses[next(4)] ?? 'running';
    const running = status === 'running';
    const row: WorkflowIndexRow = {
      instanceId: `wf${i.toString(16).padStart(64, '0')}`,
      principalId: `p${next(3)}`,
      workflowName: `w${next(4)}`,
      bundleDigest: 'sha256:' + '0'.repeat(64),
      invocationKey: `k${i}`,
      status,
      startedAtMs: 1000 + next(500),
      endedAtMs: running ? null : 2000,
      deadlineMs: next(2) === 0 ? null : 1500 + next(1000),
      currentTask: null,
      nextDueMs: running && next(2) === 0 ? 1200 + next(1000) : null,
      lease: running && next(2) === 0 ? { worker: 'w', epoch: 1, untilMs: 1300 + next(1000) } : null,
      lastError: null,
      childOperationIds: [],
      childOperations: 0,
      parent: null,
      revision: '1',
    };
    rows.push(row);
    view.apply(row);
  }
  // A row replaced by a later one of the same instance moves between lists.
  const moved = { ...(rows[5] as WorkflowIndexRow), status: 'cancelled' as const, lease: null, nextDueMs: null, revision: '2' };
  rows[5] = moved;
  view.apply(moved);
  const queries: WorkflowIndexQuery[] = [
    { limit: 7 },
    { limit: 7, status: 'running' },
    { limit: 7, principalId: 'p1', status: 'faulted' },
    { limit: 3, workflowName: 'w2', sinceMs: 1200, untilMs: 1400 },
    { limit: 5, stuck: { nowMs: 2500, bounds: { timeoutGraceMs: 10, timerGraceMs: 10, leaseGraceMs: 10 } } },
    { limit: 5, principalId: 'p2', stuck: { nowMs: 2500, bounds: { timeoutGraceMs: 10, timerGraceMs: 10, leaseGraceMs: 10 }, reason: 'lease-expired' } },
  ];
  for (const query of queries) {
    let after: WorkflowIndexQuery['after'];
    for (let pages = 0; pages < 4; pages++) {
      const q = { ...query, ...(after ? { after } : {}) };
      assert.deepEqual(view.page(q), workflowPageOf(rows, q), JSON.stringify(q));
      after = view.page(q).next;
      if (!after) break;
    }
  }
  const walked = view.rowsWalked;
  view.page({ limit: 10, principalId: 'p1', status: 'completed' });
  assert.equal(view.rowsWalked - walked, 11, 'a page of one principal and status walks limit + 1 rows, whatever the number stored');
});
