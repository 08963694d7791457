/**
 * The bound on one principal's running workflow instances (running-bound.ts), over the executor
 * on the memory and SQLite stores: a start past it is refused (unavailable, naming the bound and
 * what the principal holds) before anything is recorded, another principal is not affected, a
 * start of an instance that exists is answered with it at the bound, a worker that has resumed
 * nothing counts the instances another started, a burst of concurrent starts on one worker never
 * passes it, one instance ending lets one more start, and a child workflow refused by it faults
 * its parent's task with a runtime error. Over HTTP and NATS: instances-http.test.ts and
 * instances-nats.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { SystemClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { seededRandom } from '../../src/runtime/random.js';
import { isWorkflowNamed } from '../../src/workflow/exec/document.js';
import { WorkflowExecutor } from '../../src/workflow/exec/executor.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { RunningBoundReached } from '../../src/workflow/exec/running-bound.js';
import type { WorkflowInstance } from '../../src/runtime/workflow-service.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import { serveWorkflowFixture, writeWorkflowFixture } from './instances-fixture.js';
import { namingProblems } from '../../src/runtime/metrics.js';
import { workflowStartsRefusedName } from '../../src/runtime/workflow-start-metrics.js';
import { assertReplayEqual, harness, yaml } from './support.js';

const waits = yaml(`
document: { dsl: '1.0.3', namespace: t, name: waits, version: '1.0.0' }
do:
  - hold:
      wait: { minutes: 10 }
`);

/** Whether the error is the bound's refusal, naming the bound and how many the principal holds. */
const refusedAt =
  (most: number, held = most) =>
  (error: unknown) =>
    error instanceof RunningBoundReached &&
    isAdapterError(error) &&
    error.kind === 'unavailable' &&
    (error.description ?? '').includes(`holds ${held} running workflow instances, its bound (${most}`);

/** The instances the store holds (running or not), for "nothing was recorded". */
async function storedInstances(store: EventStore): Promise<number> {
  let n = 0;
  for await (const _id of store.workflowInstanceIds()) n++;
  return n;
}

const stores: [string, () => Promise<{ store: EventStore; dispose(): Promise<void> }>][] = [
  ['memory', async () => ({ store: new MemoryEventStore({ clock: new SystemClock() }), dispose: async () => undefined })],
  [
    'SQLite',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'convoke-bound-'));
      const store = new SqliteEventStore({ path: join(dir, 'wf.db'), clock: new SystemClock() });
      return {
        store,
        dispose: async () => {
          await store.close();
          await rm(dir, { recursive: true, force: true });
        },
      };
    },
  ],
];

for (const [name, open] of stores) {
  test(`${name}: past its bound a principal's start is refused before anything is recorded; another principal, the same start again, a fresh worker and an ended instance behave`, async () => {
    const { store, dispose } = await open();
    const a = harness({ store, runningPerPrincipal: 3, worker: 'a' });
    const b = harness({ store, runningPerPrincipal: 3, worker: 'b' });
    try {
      const start = (h: typeof a, principalId: string, key: string, input: JsonValue = { key }) =>
        h.executor.start({ principalId, invocationKey: key, document: waits, input });
      const ids: string[] = [];
      for (const key of ['k0', 'k1', 'k2']) {
        const started = await start(a, 'alice', key);
        assert.equal(started.created, true);
        ids.push(started.instanceId);
      }
      await assert.rejects(start(a, 'alice', 'k3'), refusedAt(3));
      assert.equal(await storedInstances(store), 3, 'the refused start recorded nothing');

      // Another principal is not affected.
      assert.equal((await start(a, 'bob', 'k3')).created, true);
      // The same start again at the bound answers its instance (it creates nothing); a different input under its key is a conflict.
      assert.deepEqual(await start(a, 'alice', 'k1'), { instanceId: ids[1], created: false });
      await assert.rejects(start(a, 'alice', 'k1', { other: true }), (error: unknown) => isAdapterError(error) && error.kind === 'conflict');
      // A worker that has resumed nothing counts the instances another started (the store's index).
      assert.equal(b.executor.kernel.held().length, 0);
      await assert.rejects(start(b, 'alice', 'k3'), refusedAt(3));

      // One ends: one more may start (on either worker), and then the bound holds again.
      await a.executor.cancel(ids[0]!, 'make room');
      const admitted = await start(b, 'alice', 'k3');
      assert.equal(admitted.created, true);
      await assert.rejects(start(a, 'alice', 'k4'), refusedAt(3));
      assert.equal(await storedInstances(store), 5);
      const running = await store.workflowIndex.list({ principalId: 'alice', status: 'running', limit: 10 });
      assert.deepEqual(running.rows.map((row) => row.instanceId).sort(), [ids[1], ids[2], admitted.instanceId].sort());
    } finally {
      await a.close();
      await b.close();
      await dispose();
    }
  });
}

test('a burst of concurrent starts on one worker admits exactly up to the bound; the rest are refused and record nothing', async () => {
  const h = harness({ runningPerPrincipal: 3 });
  try {
    const outcomes = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) => h.executor.start({ principalId: 'alice', invocationKey: `burst-${i}`, document: waits, input: { i } })),
    );
    const created = outcomes.filter((outcome) => outcome.status === 'fulfilled' && outcome.value.created);
    const refused = outcomes.filter((outcome) => outcome.status === 'rejected' && outcome.reason instanceof RunningBoundReached);
    assert.equal(created.length, 3, JSON.stringify(outcomes.map((outcome) => outcome.status)));
    assert.equal(refused.length, 9);
    assert.equal(await storedInstances(h.store), 3);
    assert.equal(await h.store.workflowIndex.countRunning('alice', 100), 3);
  } finally {
    await h.close();
  }
});

test('a start whose count began while another of the principal’s was under way (admitted, not stored) counts it: it waits for it, counts again and is refused', async () => {
  const computes = yaml(`
document: { dsl: '1.0.3', namespace: t, name: computes, version: '1.0.0' }
do:
  - compute:
      set: { n: '\${ [.n] | length }' }
  - hold:
      wait: { minutes: 10 }
`);
  // The first evaluation is held: the first start is admitted and under way (its create waits for its first step).
  let entered!: () => void;
  const evaluating = new Promise<void>((resolve) => (entered = resolve));
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let calls = 0;
  const h = harness({
    runningPerPrincipal: 1,
    evaluator: (jq) => ({
      evaluate: async (query, input, vars, principal) => {
        if (calls++ === 0) {
          entered();
          await gate;
        }
        return jq.evaluate(query, input, vars, principal);
      },
      close: () => jq.close(),
    }),
  });
  try {
    const first = h.executor.start({ principalId: 'alice', invocationKey: 'first', document: computes, input: { n: 1 } });
    await evaluating;
    assert.equal(await h.store.workflowIndex.countRunning('alice', 10), 0, 'the first is not stored yet');
    const second = h.executor.start({ principalId: 'alice', invocationKey: 'second', document: computes, input: { n: 2 } });
    // Let the second's count run while the first is still held.
    await new Promise((resolve) => setTimeout(resolve, 50));
    open();
    assert.equal((await first).created, true);
    await assert.rejects(second, refusedAt(1));
    assert.equal(await storedInstances(h.store), 1);
  } finally {
    await h.close();
  }
});

const parent = (awaited: boolean) =>
  yaml(`
document: { dsl: '1.0.3', namespace: t, name: parent, version: '1.0.0' }
do:
  - delegate:
      run:
        workflow: { namespace: t, name: child, version: '1.0.0' }
        await: ${awaited}
`);
const child = yaml(`
document: { dsl: '1.0.3', namespace: t, name: child, version: '1.0.0' }
do:
  - pause:
      wait: { milliseconds: 50 }
  - done:
      set: { done: true }
`);

test("a child workflow counts against its parent's principal: refused at the bound, it faults the parent's task with a runtime error", async () => {
  const workflows = (_digest: string, ref: Parameters<typeof isWorkflowNamed>[1]) => (isWorkflowNamed(child, ref) ? child : undefined);
  // Room for the parent and its child: both run, the parent completes.
  const roomy = harness({ runningPerPrincipal: 2, workflows });
  try {
    const { instanceId } = await roomy.executor.start({ principalId: 'alice', invocationKey: 'p', document: parent(true), input: {} });
    const record = await roomy.executor.wait(instanceId, 20_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
  } finally {
    await roomy.close();
  }
  for (const awaited of [true, false]) {
    // The parent is the principal's one running instance: its child would be the second.
    const h = harness({ runningPerPrincipal: 1, workflows });
    try {
      const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'p', document: parent(awaited), input: {} });
      const record = await h.executor.wait(instanceId, 20_000);
      assert.equal(record.status, 'faulted', `await: ${awaited}`);
      assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime');
      assert.equal(record.error?.status, 503);
      assert.equal(record.error?.title, 'Workflow instances bound reached');
      assert.equal(record.error?.instance, '/do/0/delegate');
      assert.match(record.error?.detail ?? '', /holds 1 running workflow instances, its bound \(1,/);
      assert.equal(record.tasks['/do/0/delegate']?.state, 'faulted');
      // No child was started: the one bound is not running (an unawaited one is then cancelled before its start, in the background).
      const bound = record.subworkflows['/do/0/delegate'];
      assert.ok(bound);
      assert.notEqual((await h.executor.get(bound.instanceId))?.status, 'running');
      if (awaited) assert.equal(await storedInstances(h.store), 1);
      assert.equal(await h.store.workflowIndex.countRunning('alice', 10), 0);
      await assertReplayEqual(h, instanceId);
    } finally {
      await h.close();
    }
  }
});

test('the bound is configured in workflows.runningInstancesPerPrincipal: 1 to the most; a value past it, below 1 or not an integer is refused', () => {
  const parse = (workflows: object) => parseDeploymentConfig(Buffer.from(JSON.stringify(minimalServeConfig({ workflows }))), '/tmp');
  assert.equal(parse({ runningInstancesPerPrincipal: 25 }).workflows?.runningInstancesPerPrincipal, 25);
  assert.equal(
    parse({ runningInstancesPerPrincipal: limits.workflowRunningPerPrincipalMax }).workflows?.runningInstancesPerPrincipal,
    limits.workflowRunningPerPrincipalMax,
  );
  for (const bad of [0, -1, 2.5, '10', limits.workflowRunningPerPrincipalMax + 1])
    assert.throws(
      () => parse({ runningInstancesPerPrincipal: bad }),
      (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input' && /workflows\/runningInstancesPerPrincipal/.test(error.message),
      JSON.stringify(bad),
    );
  // The executor takes the same range (the default when absent).
  assert.throws(
    () => harness({ runningPerPrincipal: limits.workflowRunningPerPrincipalMax + 1 }),
    (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input',
  );
  assert.throws(
    () => harness({ runningPerPrincipal: 0 }),
    (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input',
  );
});

test('by default a principal may hold limits.workflowRunningPerPrincipalDefault running instances; the count asks for no more', async () => {
  const clock = new SystemClock();
  const streams = workflowStreams(new MemoryEventStore({ clock }));
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  let asked = 0;
  // `full` holds as many as the count is asked for (or more: the count stops there).
  const runningOf = async (principalId: string, atMost: number) => ((asked = atMost), principalId === 'full' ? atMost : streams.runningOf(principalId, atMost));
  const executor = new WorkflowExecutor({ store: { ...streams, runningOf }, clock, random: seededRandom(1), evaluator });
  try {
    await assert.rejects(
      executor.start({ principalId: 'full', invocationKey: 'k', document: waits, input: {} }),
      refusedAt(limits.workflowRunningPerPrincipalDefault),
    );
    assert.equal(asked, limits.workflowRunningPerPrincipalDefault);
    assert.equal((await executor.start({ principalId: 'alice', invocationKey: 'k', document: waits, input: {} })).created, true);
  } finally {
    await executor.close();
    await evaluator.close();
  }
});

test('over HTTP: a start past the bound is 503 unavailable naming it; another principal, the same start again and a start after a cancel are served; a refused child faults its parent', async () => {
  const fixture = await writeWorkflowFixture({ workflows: { runningInstancesPerPrincipal: 2 } });
  const hosted = await serveWorkflowFixture(fixture);
  try {
    const call = async (path: string, token: string, body?: JsonObject) => {
      const response = await fetch(`${hosted.server.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: response.status, body: (await response.json()) as JsonObject };
    };
    const start = (token: string, workflow: string, invocationKey: string, waitMs = 0) =>
      call('/workflow-instances', token, { bundle: { ...fixture.bundle }, workflow, invocationKey, input: {}, waitMs });
    const { alice, bob } = fixture.tokens;
    const first = await start(alice, 'slow', 'q1');
    const second = await start(alice, 'slow', 'q2');
    assert.deepEqual([first.status, second.status], [202, 202]);
    const refused = await start(alice, 'slow', 'q3');
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.kind, 'unavailable');
    assert.match(String(refused.body.description), /"alice" holds 2 running workflow instances, its bound \(2, workflows\.runningInstancesPerPrincipal\)/);
    assert.equal((await start(bob, 'slow', 'q3')).status, 202, 'another principal is not affected');
    const again = await start(alice, 'slow', 'q1');
    assert.equal(again.status, 202);
    assert.equal(again.body.instanceId, first.body.instanceId, 'the same start again answers its instance at the bound');

    assert.equal((await call(`/workflow-instances/${String(first.body.instanceId)}/cancel`, alice)).body.status, 'cancelled');
    const third = await start(alice, 'slow', 'q3');
    assert.equal(third.status, 202, 'one ended: one more starts');
    assert.equal((await start(alice, 'slow', 'q4')).status, 503);

    // With one slot left, `delegating` starts and its child (`slow`) would be the third: the parent's task faults.
    assert.equal((await call(`/workflow-instances/${String(second.body.instanceId)}/cancel`, alice)).body.status, 'cancelled');
    const parent = await start(alice, 'delegating', 'd1', 10_000);
    assert.equal(parent.status, 200, JSON.stringify(parent.body));
    const instance = parent.body as unknown as WorkflowInstance;
    assert.equal(instance.status, 'faulted');
    assert.equal(instance.error?.status, 503);
    assert.equal(instance.error?.title, 'Workflow instances bound reached');
    assert.equal(instance.error?.instance, '/do/0/delegate');
    assert.equal(instance.childInstances[0]?.status, null, 'the child was never started');

    // Counted for the operator: the two callers' starts refused (q3, q4) and the child's.
    const text = await hosted.deployment.coordinator.metrics.registry.metrics();
    const refusedBy = (starter: string) =>
      new RegExp(`^${workflowStartsRefusedName}\\{reason="running-bound",starter="${starter}"\\} (\\d+)$`, 'm').exec(text)?.[1];
    assert.deepEqual([refusedBy('caller'), refusedBy('workflow')], ['2', '1'], text);
    assert.deepEqual(await namingProblems(hosted.deployment.coordinator.metrics.registry), []);
  } finally {
    await hosted.close();
    await fixture.dispose();
  }
});
