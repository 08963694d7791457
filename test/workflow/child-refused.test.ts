/**
 * A `run: workflow` child whose start is refused: a definite refusal (invalid-input, unsupported,
 * denied, expired, protocol-conflict, conflict) faults the parent's task with the DSL error of its
 * kind, recorded as the call's answer and catchable; an unavailable store is retried, and the
 * retrying ends at the task's or the workflow's timeout when its timer fires. Every parent is
 * checked against its replay.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock, VirtualClock, type Clock } from '../../src/contract/clock.js';
import { AdapterError, isAdapterError, type AdapterErrorKind } from '../../src/contract/errors.js';
import type { JsonValue } from '../../src/contract/json.js';
import { seededRandom } from '../../src/runtime/random.js';
import { WorkflowExecutor, type StartRequest } from '../../src/workflow/exec/executor.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { assertReplayEqual, delegatingParent, eventually, harness, quickDocument, runToEnd, workflowsAmong, yaml, type Harness } from './support.js';

const spec = 'https://serverlessworkflow.io/spec/1.0.0/errors/';

/** An executor whose child starts are refused with `refusals` in turn (an empty list: started as usual). */
class RefusingChildren extends WorkflowExecutor {
  refusals: (AdapterErrorKind | undefined)[] = [];
  refused = 0;
  override async start(request: StartRequest): Promise<{ instanceId: string; created: boolean }> {
    const kind = request.parent === undefined ? undefined : this.refusals[Math.min(this.refused, this.refusals.length - 1)];
    if (kind !== undefined) {
      this.refused += 1;
      throw new AdapterError(kind, `child start refused (${kind}) for the test`);
    }
    return super.start(request);
  }
}

function refusingHarness(clock: Clock = new SystemClock()): Harness & { executor: RefusingChildren } {
  const store = new MemoryEventStore({ clock });
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const executor = new RefusingChildren({
    store: workflowStreams(store),
    clock,
    random: seededRandom(7),
    evaluator,
    workflows: workflowsAmong([quickDocument]),
  });
  return {
    executor,
    store,
    evaluator,
    close: async () => {
      await executor.close();
      await evaluator.close();
    },
  };
}

/** A parent whose `delegate` runs t/quick inside a try that catches every error as its output. */
const catching = yaml(`
document: { dsl: '1.0.3', namespace: t, name: catching, version: '1.0.0' }
do:
  - guarded:
      try:
        - delegate:
            run:
              workflow: { namespace: t, name: quick, version: '1.0.0' }
      catch:
        as: problem
        do:
          - report:
              set: '\${ { caught: $problem } }'
`);

/** A parent whose task delegating to `quick` times out after 1.2 s. */
const timedDelegate = yaml(`
document: { dsl: '1.0.3', namespace: t, name: timed, version: '1.0.0' }
do:
  - delegate:
      timeout: { after: { milliseconds: 1200 } }
      run:
        workflow: { namespace: t, name: quick, version: '1.0.0' }
`);

test("a child whose start is refused as unsupported (its own child not pinned) faults its parent's task with a configuration error, not a retry for ever", async () => {
  const relay = yaml(`
document: { dsl: '1.0.3', namespace: t, name: relay, version: '1.0.0' }
do:
  - onward:
      run:
        workflow: { namespace: t, name: gone, version: '1.0.0' }
`);
  const h = harness({ workflows: workflowsAmong([relay]) });
  try {
    const record = await runToEnd(h, delegatingParent('parent', 'relay'), {}, 'k1', 8000);
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, `${spec}configuration`);
    // The DSL's configuration error carries 400, as a child that resolves to no workflow does.
    assert.equal(record.error?.status, 400);
    assert.equal(record.error?.title, 'Child workflow refused');
    assert.equal(record.error?.instance, '/do/0/delegate');
    assert.match(record.error?.detail ?? '', /unsupported.*\/do\/0\/onward\/run\/workflow: the workflow t\/gone@1\.0\.0 is not pinned/);
    assert.equal(record.tasks['/do/0/delegate']?.state, 'faulted');
    // The refusal is the call's answer in the log, not a drive that failed.
    assert.ok('error' in (record.steps['/do/0/delegate>run'] ?? {}), JSON.stringify(record.steps));
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test('each definite refusal of a child start is the DSL error of its kind at the task, caught by a try', async () => {
  const expected: [AdapterErrorKind, string, number][] = [
    ['invalid-input', `${spec}validation`, 400],
    ['unsupported', `${spec}configuration`, 400],
    ['denied', `${spec}authorization`, 403],
    ['expired', 'https://convoke.dev/errors/workflow/expired', 410],
    ['protocol-conflict', 'https://convoke.dev/errors/workflow/protocol-conflict', 409],
    ['conflict', `${spec}communication`, 409],
  ];
  const h = refusingHarness();
  try {
    for (const [kind, type, status] of expected) {
      h.executor.refusals = [kind];
      h.executor.refused = 0;
      const record = await runToEnd(h, catching, {}, kind, 8000);
      assert.equal(record.status, 'completed', `${kind}: ${JSON.stringify(record.error)}`);
      assert.equal(h.executor.refused, 1, `${kind}: refused once, not retried`);
      const caught = (record.output as { caught: Record<string, JsonValue> }).caught;
      assert.equal(caught.type, type, kind);
      assert.equal(caught.status, status, kind);
      assert.equal(caught.title, 'Child workflow refused', kind);
      assert.equal(caught.instance, '/do/0/guarded/try/0/delegate', kind);
      assert.match(String(caught.detail), new RegExp(`\\(${kind}\\): child start refused \\(${kind}\\) for the test`), kind);
    }
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test('a child start refused as unavailable is retried: the parent completes once the store takes it', async () => {
  const h = refusingHarness();
  try {
    h.executor.refusals = ['unavailable', 'unavailable', undefined];
    const record = await runToEnd(h, catching, {}, 'k', 15_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { done: true });
    assert.equal(h.executor.refused, 2);
    assert.equal(h.executor.failures.filter((error) => isAdapterError(error) && error.kind === 'unavailable').length, 2);
  } finally {
    await h.close();
  }
});

test("a child start unavailable for good is retried until the task's timeout, then until the workflow's", async () => {
  const h = refusingHarness();
  try {
    h.executor.refusals = ['unavailable'];
    const byTask = await runToEnd(h, timedDelegate, {}, 'task', 10_000);
    assert.equal(byTask.status, 'faulted');
    assert.equal(byTask.error?.type, `${spec}timeout`);
    assert.equal(byTask.error?.instance, '/do/0/delegate');
    assert.equal(byTask.subworkflows['/do/0/delegate']?.disposition?.disposition, 'not-started');
    const whole = yaml(`
document: { dsl: '1.0.3', namespace: t, name: whole, version: '1.0.0' }
timeout: { after: { milliseconds: 1200 } }
do:
  - delegate:
      run:
        workflow: { namespace: t, name: quick, version: '1.0.0' }
`);
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'workflow', document: whole, input: {} });
    const byWorkflow = await h.executor.wait(instanceId, 10_000);
    assert.equal(byWorkflow.status, 'faulted');
    assert.equal(byWorkflow.error?.type, `${spec}timeout`);
    assert.equal(byWorkflow.error?.instance, '/');
    await assertReplayEqual(h, instanceId);
    assert.ok(h.executor.failures.every((error) => isAdapterError(error) && error.kind === 'unavailable'));
  } finally {
    await h.close();
  }
});

test("a task's timeout that fires while its child's start is retried as unavailable is acted on when it fires, not at the next retry", async () => {
  const clock = new VirtualClock();
  const h = refusingHarness(clock);
  try {
    h.executor.refusals = ['unavailable'];
    const timeoutMs = 100_000;
    const guarded = yaml(`
document: { dsl: '1.0.3', namespace: t, name: guarded, version: '1.0.0' }
do:
  - guarded:
      try:
        - delegate:
            timeout: { after: { milliseconds: ${timeoutMs} } }
            run:
              workflow: { namespace: t, name: quick, version: '1.0.0' }
      catch:
        as: problem
        do:
          - report:
              set: { caught: true }
`);
    const startedAtMs = clock.nowMs();
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'backoff', document: guarded, input: {} });
    // The child's start is refused at once and then at each redrive, a second, two, four… apart, up to a minute.
    while (clock.nowMs() < startedAtMs + timeoutMs - 1000) await clock.advance(1000);
    const refusedBefore = h.executor.refused;
    assert.ok(refusedBefore >= 5, `the start was tried ${refusedBefore} times`);
    assert.equal((await h.executor.get(instanceId))?.status, 'running');
    // The timeout fires; no retry of the start is due for more than twenty seconds yet. The clock moves no further.
    await clock.advance(1000);
    await eventually(async () => (await h.executor.get(instanceId))?.status !== 'running', 'the timeout to be acted on');
    const record = await h.executor.get(instanceId);
    assert.equal(record?.status, 'completed', JSON.stringify(record?.error));
    assert.deepEqual(record?.output, { caught: true });
    assert.equal(record?.tasks['/do/0/guarded/try/0/delegate']?.error?.type, `${spec}timeout`);
    assert.equal(record?.subworkflows['/do/0/guarded/try/0/delegate']?.disposition?.disposition, 'not-started');
    assert.equal(h.executor.refused, refusedBefore, 'the start is not tried again once its task timed out');
    const read = await h.store.read(instanceId);
    assert.equal(read.kind, 'ok');
    const events = read.kind === 'ok' ? read.transitions.flatMap((stored) => stored.transition.events.map((event) => event.type as string)) : [];
    assert.equal(events.filter((type) => type === 'timer-fired').length, 1, events.join(', '));
    assert.equal(events.filter((type) => type === 'subworkflow-disposed').length, 1, events.join(', '));
    await assertReplayEqual(h, instanceId);
  } finally {
    await h.close();
  }
});

/** Workflows that resolve `documents` for the first `answers` look-ups (the parent's check), then `after`. */
function resolvingFor(answers: number, documents: readonly JsonValue[], after: () => JsonValue | undefined): ReturnType<typeof workflowsAmong> {
  const among = workflowsAmong(documents);
  let asked = 0;
  return (digest, ref) => (asked++ < answers ? among(digest, ref) : after());
}

test('a child that no longer resolves to a workflow faults its task with the configuration error a child refused as unsupported raises: 400', async () => {
  const h = harness({ workflows: resolvingFor(1, [quickDocument], () => undefined) });
  try {
    const record = await runToEnd(h, delegatingParent('parent', 'quick'), {}, 'gone', 8000);
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, `${spec}configuration`);
    assert.equal(record.error?.status, 400);
    assert.equal(record.error?.title, 'Unknown workflow');
    assert.equal(record.error?.instance, '/do/0/delegate');
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

/** A resolver that answers t/quick for the parent's check, then fails as `failures` say in turn (undefined: answers). */
function failingResolver(): { workflows: ReturnType<typeof workflowsAmong>; failures: (Error | undefined)[]; failed: number; arm: () => void } {
  const among = workflowsAmong([quickDocument]);
  const state = {
    failures: [] as (Error | undefined)[],
    failed: 0,
    checking: true,
    arm: () => {
      state.checking = true;
      state.failed = 0;
    },
    workflows: (digest: string, ref: Parameters<ReturnType<typeof workflowsAmong>>[1]) => {
      if (state.checking) {
        state.checking = false;
        return among(digest, ref);
      }
      const failure = state.failures[Math.min(state.failed, state.failures.length - 1)];
      if (failure === undefined) return among(digest, ref);
      state.failed += 1;
      throw failure;
    },
  };
  return state;
}

test('a workflows resolver that throws a definite AdapterError while the task runs faults the task with the DSL error of its kind, caught by a try, not retried', async () => {
  const resolver = failingResolver();
  const h = harness({ workflows: resolver.workflows });
  const expected: [AdapterErrorKind, string, number][] = [
    ['invalid-input', `${spec}validation`, 400],
    ['unsupported', `${spec}configuration`, 400],
    ['denied', `${spec}authorization`, 403],
    ['expired', 'https://convoke.dev/errors/workflow/expired', 410],
    ['protocol-conflict', 'https://convoke.dev/errors/workflow/protocol-conflict', 409],
    ['conflict', `${spec}communication`, 409],
  ];
  try {
    for (const [kind, type, status] of expected) {
      resolver.arm();
      resolver.failures = [new AdapterError(kind, `bundle look-up refused (${kind}) for the test`)];
      const record = await runToEnd(h, structuredClone(catching), {}, `resolve-${kind}`, 8000);
      assert.equal(record.status, 'completed', `${kind}: ${JSON.stringify(record.error)}`);
      assert.equal(resolver.failed, 1, `${kind}: asked once, not retried`);
      const caught = (record.output as { caught: Record<string, JsonValue> }).caught;
      assert.equal(caught.type, type, kind);
      assert.equal(caught.status, status, kind);
      assert.equal(caught.title, 'Child workflow not resolved', kind);
      assert.equal(caught.instance, '/do/0/guarded/try/0/delegate', kind);
      assert.match(String(caught.detail), new RegExp(`t/quick@1\\.0\\.0.*\\(${kind}\\): bundle look-up refused \\(${kind}\\) for the test`), kind);
      // Nothing was bound or started: the look-up failed before the child had an id.
      assert.deepEqual(record.subworkflows, {}, kind);
    }
    // Uncaught, it faults the parent at the task.
    resolver.arm();
    resolver.failures = [new AdapterError('denied', 'no longer yours')];
    const record = await runToEnd(h, delegatingParent('parent', 'quick'), {}, 'resolve-uncaught', 8000);
    assert.equal(record.status, 'faulted');
    assert.deepEqual([record.error?.type, record.error?.status, record.error?.instance], [`${spec}authorization`, 403, '/do/0/delegate']);
    assert.equal(record.tasks['/do/0/delegate']?.state, 'faulted');
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test("a workflows resolver unavailable, or failing with no AdapterError, is retried: the parent completes once it answers, or ends at the task's timeout", async () => {
  const resolver = failingResolver();
  const h = harness({ workflows: resolver.workflows });
  try {
    resolver.failures = [new AdapterError('unavailable', 'bundle store down'), new AdapterError('unavailable', 'still down'), undefined];
    const record = await runToEnd(h, catching, {}, 'unavailable', 15_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { done: true });
    assert.equal(resolver.failed, 2);
    assert.equal(h.executor.failures.filter((error) => isAdapterError(error) && error.kind === 'unavailable').length, 2);
    resolver.arm();
    resolver.failures = [new TypeError('resolver defect')];
    const byTask = await runToEnd(h, timedDelegate, {}, 'defect', 10_000);
    assert.equal(byTask.status, 'faulted');
    assert.equal(byTask.error?.type, `${spec}timeout`);
    assert.equal(byTask.error?.instance, '/do/0/delegate');
    assert.ok(resolver.failed >= 2, `retried: ${resolver.failed}`);
  } finally {
    await h.close();
  }
});
