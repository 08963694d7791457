/**
 * An executor's failures (errors that stopped driving an instance: the store unavailable, a
 * refused append) are kept to the latest limits.workflowFailuresKeptMax and each is told to
 * onFailure; `convoke serve` turns them into notices, the first at once and then at most one per
 * interval, each counting the failures it stands for.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock, VirtualClock } from '../../src/contract/clock.js';
import { limits } from '../../src/contract/limits.js';
import { failureNotices } from '../../src/cli/workflow-host.js';
import { AssertionFailure } from '../../src/contract/errors.js';
import { workflowAggregate } from '../../src/workflow/exec/aggregate.js';
import type { WorkflowTransition } from '../../src/workflow/exec/events.js';
import { assertReplayEqual, harness, runToEnd, yaml } from './support.js';

test('a store that stays unavailable: every failure is told, the latest workflowFailuresKeptMax are kept', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  let told = 0;
  const h = harness({ clock, store, onFailure: () => void told++ });
  try {
    await store.close();
    h.executor.resumeEvery(1000);
    const rounds = limits.workflowFailuresKeptMax + 44;
    await clock.advance(rounds * 1000);
    assert.equal(told, rounds, 'each rescan that failed was told');
    assert.equal(h.executor.failures.length, limits.workflowFailuresKeptMax, 'only the latest are kept');
    assert.match(String(h.executor.failures.at(-1)), /closed/);
  } finally {
    await h.close();
  }
});

test('a listener that throws changes nothing: the failure is kept and the rescans go on', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const h = harness({
    clock,
    store,
    onFailure: () => {
      throw new Error('listener broke');
    },
  });
  try {
    await store.close();
    h.executor.resumeEvery(1000);
    await clock.advance(3000);
    assert.equal(h.executor.failures.length, 3);
  } finally {
    await h.close();
  }
});

test('failure notices: the first at once, then at most one per interval, each counting the failures since the last', () => {
  const clock = new VirtualClock();
  const written: { failures: number; error: string }[] = [];
  const notice = failureNotices((n) => written.push(n), clock, 10_000);
  notice(new Error('store unavailable'));
  assert.deepEqual(written, [{ failures: 1, error: 'store unavailable' }]);
  for (let i = 0; i < 5; i++) {
    clock.set(clock.nowMs() + 1000);
    notice(new Error(`again ${i}`));
  }
  assert.equal(written.length, 1, 'nothing more within the interval');
  clock.set(clock.nowMs() + 5000);
  notice('a refused append');
  assert.deepEqual(written.at(-1), { failures: 6, error: 'a refused append' });
  notice(new Error('right after'));
  assert.equal(written.length, 2);
});

test("an instance whose next step fails the runtime's own check at every drive is faulted with a runtime error after workflowDefectiveDrivesMax drives, not retried for ever", async () => {
  // A defect stands in for any: the check refuses the transition that starts the task `broken`.
  const check = workflowAggregate.check;
  assert.ok(check);
  const starting = (transition: WorkflowTransition, name: string) => transition.events.some((event) => event.type === 'task-started' && event.name === name);
  let refusals = 0;
  workflowAggregate.check = (record, transition, atMs) => {
    if (starting(transition, 'broken')) {
      refusals++;
      throw new AssertionFailure('decided an invalid workflow transition (steps): /events/1/name stands in for a defect');
    }
    return check(record, transition, atMs);
  };
  const failures: unknown[] = [];
  const h = harness({ onFailure: (error) => failures.push(error) });
  try {
    const document = yaml(`
document: { dsl: '1.0.3', namespace: t, name: defective, version: '1.0.0' }
do:
  - pause: { wait: { milliseconds: 5 } }
  - broken: { set: { b: 2 } }
`);
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'k1', document, input: {} });
    const record = await h.executor.wait(instanceId, 20_000);
    assert.equal(record.status, 'faulted');
    assert.deepEqual(record.error, {
      type: 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime',
      status: 500,
      title: 'Internal error',
      detail: "the runtime could not record this instance's next step (it failed an internal check, a defect the runtime's log names) and stopped it",
      instance: '/',
    });
    // Each drive decided the same refused transition; the operator's log has each, the instance's error none of them.
    assert.equal(refusals, limits.workflowDefectiveDrivesMax);
    assert.equal(failures.filter((error) => error instanceof AssertionFailure).length, limits.workflowDefectiveDrivesMax);
    // The refused step was never recorded: its task never started.
    assert.equal(record.tasks['/do/1/broken'], undefined);
    await assertReplayEqual(h, instanceId);
  } finally {
    workflowAggregate.check = check;
    await h.close();
  }
});

test('a failed internal check that a later drive gets past is retried: the instance runs on', async () => {
  const check = workflowAggregate.check;
  assert.ok(check);
  let refusals = 0;
  workflowAggregate.check = (record, transition, atMs) => {
    const broken = transition.events.some((event) => event.type === 'task-started' && event.name === 'flaky');
    if (broken && refusals < limits.workflowDefectiveDrivesMax - 1) {
      refusals++;
      throw new AssertionFailure('a check that fails twice, then passes');
    }
    return check(record, transition, atMs);
  };
  const h = harness();
  try {
    const record = await runToEnd(
      h,
      yaml(`
document: { dsl: '1.0.3', namespace: t, name: flaky, version: '1.0.0' }
do:
  - pause: { wait: { milliseconds: 5 } }
  - flaky: { set: { b: 2 } }
`),
    );
    assert.equal(record.status, 'completed');
    assert.equal(refusals, limits.workflowDefectiveDrivesMax - 1);
  } finally {
    workflowAggregate.check = check;
    await h.close();
  }
});

test("a timer's due commit the store refuses is kept and told as a failure, and tried again until the wait ends", async () => {
  const store = new MemoryEventStore({ clock: new SystemClock() });
  const append = store.append.bind(store);
  let refused = 0;
  // The first append recording the timer's firing meets an unavailable store.
  store.append = async (id, expected, transition, after) => {
    // The store's events are operations' by type; a workflow's travel the same way.
    if (refused === 0 && transition.events.some((event) => (event.type as string) === 'timer-fired')) {
      refused++;
      return { kind: 'unavailable', description: 'the store is restarting' };
    }
    return append(id, expected, transition, after);
  };
  const told: unknown[] = [];
  const h = harness({ store, onFailure: (error) => void told.push(error) });
  try {
    const record = await runToEnd(
      h,
      yaml(`
document: { dsl: '1.0.3', namespace: t, name: timer-refused, version: '1.0.0' }
do:
  - pause: { wait: { milliseconds: 20 } }
  - after: { set: { done: true } }
`),
    );
    assert.equal(record.status, 'completed');
    assert.equal(refused, 1, 'the firing met the refusal once');
    assert.ok(
      told.some((error) => /the store is restarting/.test(String(error))),
      `the refusal was told: ${told.map(String).join('; ')}`,
    );
    await assertReplayEqual(h, record.instanceId);
  } finally {
    await h.close();
  }
});
