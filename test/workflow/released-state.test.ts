/**
 * What a workflow executor keeps in memory for an instance (executor.ts: its armed redrive, its
 * disposal retries, its counts of failed drives) is let go once the instance has ended: a
 * `convoke serve` that runs instances for months holds nothing of the ones that are over.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import type { WorkflowExecutor } from '../../src/workflow/exec/executor.js';
import { faultsDocument, harness, slowDocument, workflowsAmong, yaml } from './support.js';
import { storeWith } from '../support/scenario.js';

/** The executor's per-instance state, reached past `private` (what this test is about). */
function held(
  executor: WorkflowExecutor,
): Record<'retries' | 'disposeRetries' | 'defectiveDrives' | 'refusedDrives' | 'running' | 'settling' | 'disposing', Map<string, unknown> | Set<string>> {
  return executor as unknown as ReturnType<typeof held>;
}

const waits = yaml(`
document: { dsl: '1.0.3', namespace: t, name: waits, version: '1.0.0' }
do:
  - first: { set: { a: 1 } }
  - pause: { wait: { hours: 2 } }
`);

test('an instance ended while its redrive was armed (the store refused its drive) leaves no redrive behind once that fires', async () => {
  const clock = new VirtualClock();
  const memory = new MemoryEventStore({ clock });
  // Every append is refused but a cancellation's: each instance's drive fails and is armed again.
  let refusing = false;
  const store = storeWith(memory, (real) => ({
    append: async (...args: Parameters<typeof real.append>) =>
      refusing && !args[2].events.some((event) => (event.type as string) === 'workflow-cancelled')
        ? { kind: 'unavailable', description: 'the store is down' }
        : real.append(...args),
  }));
  const h = harness({ store, clock });
  try {
    const instances = 20;
    const ids: string[] = [];
    for (let i = 0; i < instances; i++) {
      refusing = false;
      ids.push((await h.executor.start({ principalId: 'alice', invocationKey: `k${i}`, document: waits, input: {} })).instanceId);
      refusing = true;
      await clock.advance(0);
    }
    assert.equal(held(h.executor).retries.size, instances, 'each instance has its redrive armed');
    for (const id of ids) assert.equal((await h.executor.cancel(id, 'over')).status, 'cancelled');
    await clock.advance(120_000);
    const state = held(h.executor);
    assert.equal(state.retries.size, 0, 'no redrive is kept for an instance that has ended');
    assert.equal(state.refusedDrives.size, 0);
    assert.equal(state.defectiveDrives.size, 0);
    assert.equal(state.running.size, 0);
  } finally {
    await h.close();
    await memory.close();
  }
});

test('a parent whose disposals were recorded while their retry was armed keeps no retry once it fires', async () => {
  const clock = new VirtualClock();
  const memory = new MemoryEventStore({ clock });
  let refuse = true;
  const store = storeWith(memory, (real) => ({
    append: async (...args: Parameters<typeof real.append>) =>
      refuse && args[2].events.some((event) => (event.type as string) === 'subworkflow-disposed')
        ? { kind: 'invalid-input', description: 'the log takes no more' }
        : real.append(...args),
  }));
  const h = harness({ store, clock, workflows: workflowsAmong([slowDocument]) });
  try {
    const parents = 10;
    const ids: string[] = [];
    for (let i = 0; i < parents; i++)
      ids.push((await h.executor.start({ principalId: 'alice', invocationKey: `p${i}`, document: faultsDocument, input: {} })).instanceId);
    await clock.advance(0);
    for (const id of ids) assert.equal((await h.executor.get(id))?.status, 'faulted');
    assert.equal(held(h.executor).disposeRetries.size, parents, 'each parent has its disposal retry armed');
    // The store takes the disposals again, and a cancel of each parent records them (as another worker might).
    refuse = false;
    for (const id of ids) {
      const record = await h.executor.cancel(id, 'over');
      assert.equal(Object.values(record.subworkflows)[0]?.disposition?.disposition, 'cancelled');
    }
    await clock.advance(120_000);
    const state = held(h.executor);
    assert.equal(state.disposeRetries.size, 0, 'no disposal retry is kept for a parent that owes nothing');
    assert.equal(state.settling.size, 0);
    assert.equal(state.disposing.size, 0);
  } finally {
    await h.close();
    await memory.close();
  }
});
