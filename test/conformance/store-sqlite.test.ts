import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createHash } from 'node:crypto';
import type { Transition } from '../../src/events/types.js';
import Database from 'better-sqlite3';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { ForkedSqliteClient } from '../support/forked-sqlite.js';
import { expectOk, makeTransition, newOperationId, storeConformance, type StoreFactory } from './store.js';
import { workflowConformance } from './workflow.js';
import { admission, indexConformance, lifecycle } from './index.js';
import { indexRowOfLog } from '../../src/projections/operation-index.js';
import { listStatement, stuckCountQuery } from '../../src/adapters/store/sqlite-index.js';
import { stuckBoundsDefault, stuckReasons, type IndexQuery } from '../../src/events/operation-index.js';
import { indexRowOf } from '../../src/adapters/store/index-row.js';
import { listOperations } from '../../src/runtime/operation-list.js';
import type { WorkflowIndexQuery, WorkflowIndexRow } from '../../src/events/workflow-index.js';
import { workflowRowOf } from '../support/workflow-row.js';

const sqliteFactory: StoreFactory = async (options = {}) => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-sqlite-'));
  const path = join(dir, 'store.db');
  const clock = new VirtualClock();
  const store = new SqliteEventStore({ path, clock, limits: options.limits, followIntervalMs: 10 });
  return {
    store,
    clock: 'injected',
    setTimeMs: (ms) => clock.set(ms),
    nowMs: () => clock.nowMs(),
    openSecondClient: () => ForkedSqliteClient.open(path, clock, options.limits),
    dispose: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
};

storeConformance('sqlite', sqliteFactory);
indexConformance('sqlite', sqliteFactory);
workflowConformance('sqlite', sqliteFactory);

test('sqlite: a write lock held past busy_timeout answers unavailable, then the store recovers', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-sqlite-'));
  const path = join(dir, 'store.db');
  const clock = new VirtualClock();
  const store = new SqliteEventStore({ path, clock, busyTimeoutMs: 50 });
  const locker = new Database(path);
  try {
    const id = newOperationId('busy');
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    locker.exec('BEGIN IMMEDIATE');
    const busy = await store.create(id, makeTransition(guard, 'busy'));
    assert.equal(busy.kind, 'unavailable', JSON.stringify(busy));
    assert.match(busy.kind === 'unavailable' ? busy.description : '', /SQLITE_BUSY/);
    locker.exec('ROLLBACK');
    expectOk(await store.create(id, makeTransition(guard, 'after')), 'create once the lock is released');
  } finally {
    locker.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('sqlite: acknowledged transitions survive reopening the file', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-sqlite-'));
  const path = join(dir, 'store.db');
  const clock = new VirtualClock();
  try {
    const id = newOperationId('reopen');
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const first = new SqliteEventStore({ path, clock });
    const created = await first.create(id, makeTransition(guard, 'one'));
    expectOk(created, 'create');
    await first.close();
    clock.set(clock.nowMs() - 10);
    const second = new SqliteEventStore({ path, clock });
    const read = await second.read(id);
    assert.equal(read.kind, 'ok');
    // The store-wide last committedAtMs is durable too: a clock behind it still stops writes.
    const rolledBack = await second.append(id, created.revision, makeTransition(guard, 'two'));
    assert.equal(rolledBack.kind, 'unavailable', JSON.stringify(rolledBack));
    await second.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('sqlite: a file written before the operations index (schema 1) is indexed once when opened', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-sqlite-'));
  const path = join(dir, 'store.db');
  const clock = new VirtualClock();
  try {
    const id = newOperationId('schema-1');
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const first = new SqliteEventStore({ path, clock });
    let outcome = await first.create(id, admission(id, guard));
    expectOk(outcome, 'create');
    outcome = await first.append(id, outcome.revision, lifecycle(guard)[0]!);
    expectOk(outcome, 'append');
    await first.close();
    // What a schema-1 file looks like: no index tables.
    const db = new Database(path);
    db.exec('DROP TABLE operation_index; DROP TABLE index_meta; PRAGMA user_version = 1;');
    db.close();
    const reopened = new SqliteEventStore({ path, clock });
    const read = await reopened.read(id);
    assert.equal(read.kind, 'ok');
    assert.deepEqual(await reopened.index.get(id), read.kind === 'ok' ? indexRowOfLog(read.transitions) : undefined);
    assert.equal((await reopened.index.get(id))?.phase, 'active');
    await reopened.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('sqlite: a file written before the running-instances table (schema 2) lists its running workflow instances once opened', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-sqlite-'));
  const path = join(dir, 'store.db');
  const clock = new VirtualClock();
  const wf = (label: string) => `wf${createHash('sha256').update(label).digest('hex')}`;
  const step = (type: string) =>
    ({ events: [{ type, v: 1 }], timeGuard: { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER }, causation: { command: type } }) as unknown as Transition;
  try {
    const first = new SqliteEventStore({ path, clock });
    const [running, ended] = [wf('running'), wf('ended')];
    for (const id of [running, ended]) expectOk(await first.create(id, step('workflow-started')), `start ${id}`);
    expectOk(await first.append(ended, '1', step('workflow-faulted')), 'end');
    await first.close();
    // What a schema-2 file looks like: no running-instances tables.
    const db = new Database(path);
    db.exec('DROP TABLE workflow_running; DROP TABLE workflow_meta; PRAGMA user_version = 2;');
    db.close();
    const reopened = new SqliteEventStore({ path, clock });
    const listed: string[] = [];
    for await (const id of reopened.runningWorkflowIds()) listed.push(id);
    assert.deepEqual(listed, [running]);
    await reopened.close();
    const check = new Database(path, { readonly: true });
    assert.equal(check.pragma('user_version', { simple: true }), 4);
    check.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('sqlite: a stuck page walks the rows that can be stuck in list order and stops at the page: no gathering and sorting of every stuck row', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-sqlite-'));
  const path = join(dir, 'store.db');
  const store = new SqliteEventStore({ path, clock: new VirtualClock() });
  const db = new Database(path, { readonly: true });
  try {
    const bounds = stuckBoundsDefault;
    const queries: IndexQuery[] = [
      { limit: 50, stuck: { nowMs: 1_000_000, bounds } },
      { limit: 50, stuck: { nowMs: 1_000_000, bounds, reason: 'lease-expired' } },
      { limit: 50, stuck: { nowMs: 1_000_000, bounds }, after: { admittedAtMs: 500, operationId: 'op1' } },
      { limit: 50, principalId: 'alice', stuck: { nowMs: 1_000_000, bounds, reason: 'settlement-indeterminate' } },
    ];
    for (const query of queries) {
      const { sql, params } = listStatement(query);
      const plan = db
        .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
        .all(...params)
        .map((step) => step.detail);
      const what = JSON.stringify(query);
      assert.ok(
        plan.some((d) => /USING INDEX operation_index(_principal)?_stuckable/.test(d)),
        `${what}: walks a stuckable index (${plan.join('; ')})`,
      );
      assert.ok(!plan.some((d) => /TEMP B-TREE|MULTI-INDEX OR/.test(d)), `${what}: no sort and no union of every stuck row (${plan.join('; ')})`);
    }
  } finally {
    db.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('sqlite: each stuck count is a range of one covering index, never a read of every open row from the table', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-sqlite-'));
  const path = join(dir, 'store.db');
  const store = new SqliteEventStore({ path, clock: new VirtualClock() });
  const db = new Database(path, { readonly: true });
  try {
    for (const reason of stuckReasons) {
      const { sql, params } = stuckCountQuery(reason, 1_000_000, stuckBoundsDefault);
      const plan = db
        .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
        .all(...params)
        .map((step) => step.detail);
      assert.ok(plan.length > 0 && plan.every((d) => /USING COVERING INDEX/.test(d)), `${reason}: ${plan.join('; ')}`);
    }
  } finally {
    db.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

function instanceRow(instanceId: string, startedAtMs: number): WorkflowIndexRow {
  return workflowRowOf(0, { instanceId, workflowName: 'edited', invocationKey: instanceId.slice(2, 12), startedAtMs });
}

test('sqlite: index rows edited by hand into no row are left out of pages and gets, the pages still move past them, and a rebuild writes them again', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-sqlite-'));
  const path = join(dir, 'store.db');
  const clock = new VirtualClock();
  const store = new SqliteEventStore({ path, clock });
  try {
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const id = newOperationId(`edited-${i}`);
      expectOk(await store.create(id, admission(id, guard)), `create ${i}`);
      ids.push(id);
      clock.set(clock.nowMs() + 1);
    }
    const edits = [
      "admitted_at_ms = 'yesterday'",
      "phase = 'bogus'",
      "open_branches = 'two', last_rejection_reason = 7, last_rejection_at_ms = 1",
      "revision = '01'",
    ];
    const edited = ids.slice(0, edits.length);
    const db = new Database(path);
    for (const [k, edit] of edits.entries()) db.prepare(`UPDATE operation_index SET ${edit} WHERE operation_id = ?`).run(edited[k]);
    db.close();
    const kept = ids.slice(edits.length);
    for (const id of edited) assert.equal(await store.index.get(id), undefined, `the edited row of ${id} is no row`);
    for (const limit of [1, 2, 50]) {
      const listed: string[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages <= ids.length; pages++) {
        const page = await listOperations(
          { index: store.index, nowMs: clock.nowMs(), bounds: stuckBoundsDefault, principalId: undefined },
          { limit, ...(cursor === null ? {} : { cursor }) },
        );
        for (const row of page.operations) {
          const { stuck: _stuck, ...stored } = row;
          assert.deepEqual(indexRowOf(stored), stored, 'every listed row is a whole row');
          listed.push(row.operationId);
        }
        cursor = page.nextCursor;
        if (cursor === null) break;
      }
      assert.deepEqual(listed.sort(), [...kept].sort(), `pages of ${limit} list every row but the edited ones`);
    }
    for (const id of edited) assert.equal((await store.index.rebuild(id))?.operationId, id, 'a rebuild writes the row from the log');
    assert.equal((await store.index.list({ limit: 50 })).rows.length, ids.length);
    // The workflow instances index the same way: its rows are JSON beside the columns a page walks.
    const instances = Array.from({ length: 4 }, (_, i) => `wf${createHash('sha256').update(`edited-${i}`).digest('hex')}`);
    for (const [i, instanceId] of instances.entries()) await store.workflowIndex.put(instanceId, instanceRow(instanceId, 1_000 + i));
    const wdb = new Database(path);
    wdb.prepare("UPDATE workflow_index SET row = '{}' WHERE instance_id = ?").run(instances[1]);
    wdb.prepare("UPDATE workflow_index SET started_at_ms = 'later' WHERE instance_id = ?").run(instances[3]);
    wdb.close();
    for (const limit of [1, 2, 50]) {
      const listed: string[] = [];
      let after: WorkflowIndexQuery['after'];
      for (let pages = 0; pages <= instances.length; pages++) {
        const page = await store.workflowIndex.list({ limit, ...(after ? { after } : {}) });
        listed.push(...page.rows.map((row) => row.instanceId));
        after = page.next;
        if (!after) break;
      }
      assert.deepEqual(listed.sort(), [instances[0], instances[2]].sort(), `instance pages of ${limit} list every row but the edited ones`);
    }
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
});
