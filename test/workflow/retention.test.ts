/**
 * Payload expiry of workflow instances (src/workflow/exec/retention.ts) on the memory and SQLite
 * stores: an instance that ended before the cutoff goes (its key answers expired: a start under it
 * is refused, never a new instance), unless its parent or a child it started still runs; running
 * and recently ended instances stay; a dry run changes nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import type { JsonValue } from '../../src/contract/json.js';
import { pruneWorkflowInstances } from '../../src/workflow/exec/retention.js';
import { WorkflowInstances } from '../../src/workflow/exec/instances.js';
import { WorkflowInstanceNotFound } from '../../src/runtime/errors.js';
import { faultsDocument, harness, quickDocument, slowDocument, staysDocument, workflowsAmong, yaml } from './support.js';
import { storeWith } from '../support/scenario.js';

const hour = 3_600_000;

const quick = quickDocument;
const slow = slowDocument;
/** Starts a slow child and ends at once, the child still running. */
const leaves = yaml(`
document: { dsl: '1.0.3', namespace: t, name: leaves, version: '1.0.0' }
do:
  - start:
      run:
        workflow: { namespace: t, name: slow, version: '1.0.0' }
        await: false
`);
/** Runs a quick child to its end, then waits: a running parent of an ended child. */
const stays = staysDocument(10);

/** Ends 10 ms after its start. */
const brief = yaml(`
document: { dsl: '1.0.3', namespace: t, name: brief, version: '1.0.0' }
do:
  - pause:
      wait: { milliseconds: 10 }
`);

for (const kind of ['memory', 'sqlite'] as const) {
  test(`workflow instances (${kind}): ended ones go unless a parent or child still runs; running and recent ones stay`, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-retention-'));
    const clock = new VirtualClock();
    const store: EventStore = kind === 'memory' ? new MemoryEventStore({ clock }) : new SqliteEventStore({ path: join(dir, 'wf.db'), clock });
    const h = harness({ store, clock, workflows: workflowsAmong([quick, slow]) });
    const startMs = clock.nowMs();
    const start = async (document: JsonValue, key: string) => {
      const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: key, document, input: {} });
      await clock.advance(0);
      return (await h.executor.get(instanceId))!;
    };
    try {
      const ended = await start(quick, 'ended');
      const running = await start(slow, 'running');
      const leaver = await start(leaves, 'leaves');
      const orphanChild = Object.values(leaver.subworkflows)[0]!.instanceId;
      const parent = await start(stays, 'stays');
      const endedChild = Object.values(parent.subworkflows)[0]!.instanceId;
      const recent = await start(brief, 'recent');
      await clock.advance(10);
      const statuses = async (ids: string[]) => Promise.all(ids.map(async (id) => (await h.executor.get(id))?.status));
      assert.deepEqual(
        await statuses([ended.instanceId, running.instanceId, leaver.instanceId, orphanChild, parent.instanceId, endedChild, recent.instanceId]),
        ['completed', 'running', 'completed', 'running', 'running', 'completed', 'completed'],
      );
      assert.equal((await h.executor.get(recent.instanceId))?.endedAtMs, startMs + 10);

      // The cutoff falls after every start and before the brief instance's end.
      const nowMs = startMs + 5 + hour;
      const dry = await pruneWorkflowInstances({ store, nowMs, keepMs: hour, dryRun: true });
      assert.deepEqual([dry.examined, dry.pruned, dry.running, dry.needed, dry.recent, dry.failures.length], [7, 1, 3, 2, 1, 0], JSON.stringify(dry));
      assert.equal((await store.read(ended.instanceId)).kind, 'ok', 'a dry run changes nothing');

      const tally = await pruneWorkflowInstances({ store, nowMs, keepMs: hour });
      assert.deepEqual([tally.pruned, tally.running, tally.needed, tally.recent, tally.failures.length], [1, 3, 2, 1, 0], JSON.stringify(tally));
      assert.equal((await store.read(ended.instanceId)).kind, 'expired');
      assert.equal(await store.workflowIndex.get(ended.instanceId), undefined, 'its index row goes');
      for (const kept of [running.instanceId, leaver.instanceId, orphanChild, parent.instanceId, endedChild, recent.instanceId])
        assert.equal((await store.read(kept)).kind, 'ok', kept);

      // The key is never started again: from another executor (one that never held the instance), the start is expired.
      const other = harness({ store, clock });
      try {
        // Looked up there, it is not found, as a pruned operation is (404), to its own principal too.
        const instances = new WorkflowInstances({ executor: other.executor, bundleOf: () => undefined, definition: () => undefined });
        await assert.rejects(instances.get('alice', ended.instanceId), (error) => error instanceof WorkflowInstanceNotFound);
        await assert.rejects(
          other.executor.start({ principalId: 'alice', invocationKey: 'ended', document: quick, input: {} }),
          (error) => isAdapterError(error) && error.kind === 'expired',
        );
      } finally {
        await other.close();
      }
    } finally {
      await h.close();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
}

test('a parent kept by retention stays readable after the child it ran is pruned: the child shows as pruned', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const h = harness({ store, clock, workflows: workflowsAmong([quick]) });
  const startMs = clock.nowMs();
  const { instanceId: parent } = await h.executor.start({ principalId: 'alice', invocationKey: 'p', document: stays, input: {} });
  await clock.advance(0);
  const child = Object.values((await h.executor.get(parent))!.subworkflows)[0]!.instanceId;
  // The child ends at once; the parent ten minutes later. A prune between the two cutoffs takes the child alone.
  await clock.advance(10 * 60_000);
  assert.deepEqual([(await h.executor.get(parent))?.status, (await h.executor.get(child))?.status], ['completed', 'completed']);
  await h.close();
  const tally = await pruneWorkflowInstances({ store, nowMs: startMs + hour + 5 * 60_000, keepMs: hour });
  assert.deepEqual([tally.pruned, tally.recent], [1, 1], JSON.stringify(tally));
  assert.deepEqual([(await store.read(child)).kind, (await store.read(parent)).kind], ['expired', 'ok']);

  // Read by a process that never held either (its cache cannot answer for the pruned child).
  const other = harness({ store, clock, workflows: workflowsAmong([quick]) });
  try {
    const instances = new WorkflowInstances({
      executor: other.executor,
      bundleOf: () => undefined,
      definition: () => undefined,
      listing: { store, clock, operators: new Set() },
    });
    const view = await instances.get('alice', parent);
    assert.equal(view.status, 'completed');
    assert.deepEqual(
      view.childInstances.map((c) => [c.instanceId, c.status]),
      [[child, 'pruned']],
    );
    assert.equal((await instances.inspect('alice', parent)).instance.childInstances[0]?.status, 'pruned');
  } finally {
    await other.close();
    await store.close();
  }
});

test('an ended parent that still owes the record of what became of its child is kept until it is recorded', async () => {
  const clock = new VirtualClock();
  const memory = new MemoryEventStore({ clock });
  // The parent's disposal record cannot be appended (its worker would try again): only that append fails.
  let refuseDisposals = true;
  const store = storeWith(memory, (real) => ({
    append: async (...args: Parameters<typeof real.append>) =>
      refuseDisposals && args[2].events.some((event) => (event.type as string) === 'subworkflow-disposed')
        ? { kind: 'unavailable', description: 'the store is away' }
        : real.append(...args),
  }));
  const h = harness({ store, clock, workflows: workflowsAmong([slow]) });
  const startMs = clock.nowMs();
  try {
    // Starts a slow child without awaiting it, then faults: the child is cancelled with its parent, which records it.
    const faults = faultsDocument;
    const { instanceId: parent } = await h.executor.start({ principalId: 'alice', invocationKey: 'p', document: faults, input: {} });
    await clock.advance(0);
    const record = (await h.executor.get(parent))!;
    const child = Object.values(record.subworkflows)[0]!.instanceId;
    assert.deepEqual([record.status, (await h.executor.get(child))?.status], ['faulted', 'cancelled']);
    assert.equal(Object.values(record.subworkflows)[0]!.disposition, undefined, 'the disposal is owed');

    const tally = await pruneWorkflowInstances({ store: memory, nowMs: startMs + 2 * hour, keepMs: hour });
    assert.deepEqual([tally.pruned, tally.needed], [1, 1], JSON.stringify(tally));
    assert.deepEqual([(await memory.read(child)).kind, (await memory.read(parent)).kind], ['expired', 'ok'], 'the child goes, the parent stays');

    // Once its worker records it, the parent goes with the next prune.
    refuseDisposals = false;
    await clock.advance(60_000);
    assert.equal(Object.values((await h.executor.get(parent))!.subworkflows)[0]!.disposition?.disposition, 'cancelled');
    const later = await pruneWorkflowInstances({ store: memory, nowMs: clock.nowMs() + 2 * hour, keepMs: hour });
    assert.equal(later.pruned, 1, JSON.stringify(later));
    assert.equal((await memory.read(parent)).kind, 'expired');
  } finally {
    await h.close();
    await memory.close();
  }
});
