/**
 * A workflow instance read by another principal is 404 (WorkflowInstances.visible), and a worker
 * that did not hold it holds nothing after that read: a stranger neither fills the worker's cache
 * nor resumes the instance there. Its own principal's read holds and resumes it, as before. With
 * the index row at hand, the stranger's 404 does not wait for the log, and it waits for the row
 * whether the instance is held here, elsewhere, or is none at all.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { answerWithin, HeldReadsStore } from '../support/held-reads.js';
import { SystemClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { WorkflowInstances } from '../../src/workflow/exec/instances.js';
import { harness, yaml, type Harness } from './support.js';

/**
 * Alice's instance, started by worker a and parked in a long wait, read through worker b (which
 * does not hold it), with the index row (`listing`) or without.
 */
async function startedElsewhere(
  store: MemoryEventStore,
  clock: SystemClock,
  listed: boolean,
): Promise<{ instanceId: string; instances: WorkflowInstances; a: Harness; b: Harness }> {
  const a = harness({ store, clock, worker: 'a' });
  const b = harness({ store, clock, worker: 'b' });
  const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: strangers, version: '1.0.0' }\ndo:\n  - pause:\n      wait: { minutes: 10 }\n`);
  const { instanceId } = await a.executor.start({ principalId: 'alice', invocationKey: 'k', document, input: {} });
  const ref = { id: 'test.bundle', version: '1.0.0', digest: 'sha256:' + '0'.repeat(64) };
  const listing = listed ? { listing: { store, clock, operators: new Set(['ops']) } } : {};
  const instances = new WorkflowInstances({ executor: b.executor, bundleOf: () => ref, definition: () => undefined, ...listing });
  return { instanceId, instances, a, b };
}

test("another principal's read of an instance this worker does not hold is 404 and holds nothing; its own principal's read resumes it", async () => {
  const clock = new SystemClock();
  const { instanceId, instances, a, b } = await startedElsewhere(new MemoryEventStore({ clock }), clock, false);
  try {
    assert.deepEqual(b.executor.kernel.held(), []);
    const notFound = (error: unknown) =>
      isAdapterError(error) && /workflow instance/.test(error.message) && (error as { notFound?: boolean }).notFound === true;
    await assert.rejects(instances.get('mallory', instanceId), notFound);
    await assert.rejects(instances.wait('mallory', instanceId, 0), notFound);
    assert.deepEqual(
      b.executor.kernel.held().map((held) => held.id),
      [],
      "the other principal's reads held nothing",
    );
    assert.equal((await instances.get('alice', instanceId)).instanceId, instanceId);
    assert.deepEqual(
      b.executor.kernel.held().map((held) => held.id),
      [instanceId],
    );
  } finally {
    await a.close();
    await b.close();
  }
});

test("a stranger's read of an instance not held here is answered 404 by its index row, without waiting for its log", async () => {
  const clock = new SystemClock();
  const store = new HeldReadsStore({ clock });
  const { instanceId, instances, a, b } = await startedElsewhere(store, clock, true);
  try {
    store.hold(instanceId);
    assert.equal(await answerWithin(instances.get('mallory', instanceId), 5_000), 'not found');
    assert.equal(await answerWithin(instances.wait('mallory', instanceId, 0), 5_000), 'not found');
    assert.equal(await answerWithin(instances.inspect('mallory', instanceId), 5_000), 'not found', 'the inspection, which reads the whole log, too');
    assert.ok(store.readsHeld >= 1, 'the log reads were begun');
    const owner = instances.get('alice', instanceId);
    const operatorInspects = instances.inspect('ops', instanceId);
    store.release();
    assert.equal((await owner).instanceId, instanceId);
    assert.equal((await operatorInspects).instance.instanceId, instanceId, 'an operator may inspect any instance');
  } finally {
    store.release();
    await a.close();
    await b.close();
  }
});

test("a stranger's 404 waits for the index row whether the id names an instance held here, one held elsewhere, or nothing: its time tells nothing of what a worker holds", async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const { instanceId: elsewhere, instances, a, b } = await startedElsewhere(store, clock, true);
  const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: strangers, version: '1.0.0' }\ndo:\n  - pause:\n      wait: { minutes: 10 }\n`);
  const { instanceId: here } = await b.executor.start({ principalId: 'alice', invocationKey: 'here', document, input: {} });
  const absent = `wf${'0'.repeat(64)}`;
  // Every index row read waits until released.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const rowOf = store.workflowIndex.get;
  store.workflowIndex.get = async (id) => {
    await gate;
    return rowOf(id);
  };
  try {
    assert.ok(b.executor.holds(here), 'the worker reading holds one of them');
    assert.ok(!b.executor.holds(elsewhere));
    const reads = [here, elsewhere, absent]
      .map((id) => [instances.get('mallory', id), instances.wait('mallory', id, 0), instances.cancel('mallory', id)])
      .flat();
    for (const read of reads) assert.equal(await answerWithin(read, 100), 'still waiting', 'each read waits for the row');
    release();
    for (const read of reads) assert.equal(await answerWithin(read, 5_000), 'not found');
    assert.equal((await instances.get('alice', here)).instanceId, here, 'its own principal reads it');
  } finally {
    release();
    await a.close();
    await b.close();
  }
});
