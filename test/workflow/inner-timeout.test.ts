/**
 * Tasks inside a timed-out task: when a task's `timeout` fires and an enclosing `try` catches it
 * (the instance goes on), every task execution still running inside the timed-out one is recorded
 * cancelled in the transition that faults it (one whose start the run still held then is recorded
 * cancelled with it, never running after it), and each contract call those tasks bound is released
 * (child-disposed) after it — the fault waits for nothing; a release the runtime refuses is asked
 * again (executor.ts settle), after the instance's own end too.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import { operationId } from '../../src/contract/ids.js';
import type { DecisionView, InvocationResult } from '../../src/projections/views.js';
import type { ContractCalls } from '../../src/workflow/exec/http-contracts.js';
import { pruneWorkflowInstances } from '../../src/workflow/exec/retention.js';
import { assertReplayEqual, eventually, harness, yaml } from './support.js';
import { stubCall, stubDigest } from './stub-runtime.js';

const timeoutMs = 3000;
const hour = 3_600_000;

/** A `try` catching the timeout of a fork whose branches stay open: a pending contract call, and a ten-minute wait in a nested `do`. */
const document = yaml(`
document: { dsl: '1.0.3', namespace: t, name: inner-timeout, version: '1.0.0' }
do:
  - guarded:
      try:
        - slow:
            timeout: { after: { milliseconds: ${timeoutMs} } }
            fork:
              branches:
                - review:
${stubCall('                    ')}
                - nap:
                    do:
                      - sleep: { wait: { minutes: 10 } }
      catch:
        errors: { with: { type: https://serverlessworkflow.io/spec/1.0.0/errors/timeout } }
        as: timedOut
  - after: { set: { done: true } }
`);

const slowAt = '/do/0/guarded/try/0/slow';
const reviewAt = `${slowAt}/fork/branches/0/review{0}`;

/**
 * A contract runtime on the test's clock whose operations stay pending until cancelled; the first
 * `refusedCancels` cancels are answered unavailable, and every cancel while `refusing` holds. The
 * instants of every cancel asked.
 */
function pendingRuntime(clock: VirtualClock, refusedCancels: number, refusing: () => boolean = () => false): { service: ContractCalls; cancels: number[] } {
  const cancels: number[] = [];
  const decided = new Map<string, DecisionView>();
  const result = (id: string): InvocationResult => ({
    operationId: id,
    contract: { id: 'lab.review', version: '1.0.0', digest: stubDigest },
    interaction: 'review',
    invocationKey: 'k',
    phase: decided.has(id) ? 'settled' : 'active',
    admittedAtMs: 0,
    deadlineMs: 3_600_000,
    decision: decided.get(id) ?? null,
    settlement: { status: 'pending', siblings: [] },
    branches: [],
    output: null,
    outputError: null,
  });
  const service: ContractCalls = {
    invoke: async (caller, request) => ({
      result: result(operationId(caller.principalId, request.contract.digest, request.invocationKey)),
      created: true,
      boundary: request.waitFor ?? 'decision',
    }),
    wait: (_principalId, id, _boundary, waitMs, signal) =>
      new Promise((resolve) => {
        const answer = () => resolve({ result: result(id), reached: decided.has(id) });
        const timer = clock.at(clock.nowMs() + waitMs, answer);
        signal?.addEventListener('abort', () => (timer.cancel(), answer()), { once: true });
      }),
    get: async (_principalId, id) => result(id),
    cancel: async (_principalId, id) => {
      cancels.push(clock.nowMs());
      if (cancels.length <= refusedCancels || refusing()) throw new AdapterError('unavailable', 'the runtime is down for the test');
      decided.set(id, { outcome: 'failed', reason: 'cancelled', closedAtMs: clock.nowMs(), successVotes: 0, failedUnits: 0, units: 1, threshold: 1 });
      return result(id);
    },
  };
  return { service, cancels };
}

for (const refusedCancels of [0, 2])
  test(`a caught task timeout cancels every task still running inside the timed-out task, and then releases the contract calls they bound${refusedCancels > 0 ? ' (asked again after the instance ended)' : ''}`, async () => {
    const clock = new VirtualClock();
    const runtime = pendingRuntime(clock, refusedCancels);
    const h = harness({ clock, invocations: runtime.service });
    try {
      const startedAtMs = clock.nowMs();
      const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: `inner-${refusedCancels}`, document, input: {} });
      while (clock.nowMs() < startedAtMs + timeoutMs) await clock.advance(100);
      await eventually(async () => (await h.executor.get(instanceId))?.status !== 'running', 'the caught timeout to let the instance complete');
      const ended = (await h.executor.get(instanceId))!;
      assert.equal(ended.status, 'completed', JSON.stringify(ended.error));
      assert.deepEqual(ended.output, { done: true });
      // The timeout acted at once: the fault, and the instance's end, did not wait for the release.
      assert.equal(ended.tasks[slowAt]?.state, 'faulted');
      assert.equal(ended.endedAtMs, startedAtMs + timeoutMs, 'the instance went on when the timeout fired');
      const running = Object.entries(ended.tasks).filter(([, task]) => task.state === 'running');
      assert.deepEqual(running, [], 'no task is left running inside the timed-out task');
      const inside = Object.entries(ended.tasks).filter(([at]) => at.startsWith(`${slowAt}/`));
      assert.deepEqual(
        inside.map(([at]) => at),
        [reviewAt, `${slowAt}/fork/branches/1/nap{1}`, `${slowAt}/fork/branches/1/nap/do/0/sleep{1}`],
      );
      for (const [at, task] of inside) assert.equal(task.state, 'cancelled', `${at} is ${task.state}`);
      // Cancelled in the very transition that faulted the timed-out task.
      const faultedSeq = ended.tasks[slowAt]?.endedSeq ?? -1;
      for (const [at, task] of inside)
        assert.ok((task.endedSeq ?? 0) > faultedSeq && (task.endedSeq ?? 0) <= faultedSeq + inside.length, `${at} ended with the fault`);

      for (let waitedMs = 0; waitedMs < 10_000; waitedMs += 500) await clock.advance(500);
      const record = (await h.executor.get(instanceId))!;
      const child = record.children[reviewAt];
      assert.ok(child, 'the branch bound its contract call');
      assert.equal(child.disposition?.disposition, 'cancelled', JSON.stringify(child.disposition));
      assert.equal(child.disposition?.fork, slowAt, 'released by the timed-out task');
      assert.equal(runtime.cancels.length, refusedCancels + 1, `the cancel asked at ${runtime.cancels.map((at) => at - startedAtMs).join(', ')}`);
      assert.ok(runtime.cancels.every((at) => at >= startedAtMs + timeoutMs));
      await assertReplayEqual(h, instanceId);
    } finally {
      await h.close();
    }
  });

test('a task whose start was still held when the enclosing timeout faulted is recorded cancelled with it, not running after it', async () => {
  const clock = new VirtualClock();
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const h = harness({
    clock,
    // The inner expression's answer is held past the timeout: the starts before it are still held when the fault commits.
    evaluator: (jq) => ({
      evaluate: async (query, input, vars, principal) => {
        if (query.includes('.held')) await gate;
        return jq.evaluate(query, input, vars, principal);
      },
      close: () => jq.close(),
    }),
  });
  const held = yaml(`
document: { dsl: '1.0.3', namespace: t, name: held-inside, version: '1.0.0' }
do:
  - guarded:
      try:
        - slow:
            timeout: { after: { milliseconds: ${timeoutMs} } }
            do:
              - inner:
                  do:
                    - compute: { set: { v: '\${ .held + 1 }' } }
                    - rest: { wait: { minutes: 10 } }
      catch:
        errors: { with: { type: https://serverlessworkflow.io/spec/1.0.0/errors/timeout } }
  - after: { set: { done: true } }
`);
  try {
    const startedAtMs = clock.nowMs();
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'held', document: held, input: { held: 1 } });
    while (clock.nowMs() < startedAtMs + timeoutMs) await clock.advance(100);
    await eventually(async () => (await h.executor.get(instanceId))?.tasks[slowAt]?.state === 'faulted', 'the timeout to fault the task');
    assert.equal((await h.executor.get(instanceId))?.tasks[`${slowAt}/do/0/inner`], undefined, 'the inner start is still held');
    open();
    await eventually(async () => (await h.executor.get(instanceId))?.status !== 'running', 'the instance to go on past the caught timeout');
    const record = (await h.executor.get(instanceId))!;
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(record.tasks[`${slowAt}/do/0/inner`]?.state, 'cancelled', 'the inner task is cancelled by the timeout');
    assert.deepEqual(
      Object.entries(record.tasks).filter(([, task]) => task.state === 'running'),
      [],
      'no task is left running',
    );
    await assertReplayEqual(h, instanceId);
  } finally {
    open();
    await h.close();
  }
});

test('an ended instance that still owes the release of a contract call a timeout cancelled is kept by retention until it is recorded', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  let refusing = true;
  const runtime = pendingRuntime(clock, 0, () => refusing);
  const h = harness({ clock, store, invocations: runtime.service });
  try {
    const startedAtMs = clock.nowMs();
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'kept', document, input: {} });
    while (clock.nowMs() < startedAtMs + timeoutMs) await clock.advance(100);
    await eventually(async () => (await h.executor.get(instanceId))?.status === 'completed', 'the caught timeout to let the instance complete');
    assert.ok(runtime.cancels.length > 0, 'the release was asked');
    assert.equal((await h.executor.get(instanceId))?.children[reviewAt]?.disposition, undefined, 'the release is owed');

    // Past the retention period, the release still owed: the instance stays (its worker's append would meet a tombstone).
    const tally = await pruneWorkflowInstances({ store, nowMs: clock.nowMs() + 2 * hour, keepMs: hour });
    assert.deepEqual([tally.pruned, tally.needed], [0, 1], JSON.stringify(tally));
    assert.equal((await store.read(instanceId)).kind, 'ok');

    // Once the runtime takes the cancel and the release is recorded, the next prune takes it.
    refusing = false;
    for (let waitedMs = 0; waitedMs < 120_000; waitedMs += 5_000) await clock.advance(5_000);
    assert.equal((await h.executor.get(instanceId))?.children[reviewAt]?.disposition?.disposition, 'cancelled');
    const later = await pruneWorkflowInstances({ store, nowMs: clock.nowMs() + 2 * hour, keepMs: hour });
    assert.equal(later.pruned, 1, JSON.stringify(later));
    assert.equal((await store.read(instanceId)).kind, 'expired');
  } finally {
    await h.close();
    await store.close();
  }
});
