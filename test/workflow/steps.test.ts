/**
 * What an instance's log holds and when (interpreter.ts, "What is recorded, and when"): a step's
 * facts are carried by the next transition that must commit, the start by the first of them
 * (executor.ts create) — so a three-stage contract pipeline is four transitions — yet everything a
 * call depends on is in the log before the call is made;
 * what only the log knows ($task.startedAt) is read after it committed; facts too large to travel
 * together are appended one by one; and logs written one event per transition (before) still
 * fold, replay and resume.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { canonicalJson, sha256Hex } from '../../src/contract/canonical.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonValue } from '../../src/contract/json.js';
import { createEmbedded, type Embedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import type { WorkflowEvent, WorkflowTransition } from '../../src/workflow/exec/events.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';
import { foldWorkflow, type WorkflowRecord } from '../../src/workflow/exec/record.js';
import { replayWorkflowLog } from '../../src/workflow/exec/replay.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { assertReplayEqual, harness, runToEnd, yaml } from './support.js';

async function deployment(clock: SystemClock, store: MemoryEventStore): Promise<Embedded> {
  const peers = peerIds(3);
  const embedded = await createEmbedded({
    clock,
    store,
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 2 }, timeoutMs: 4000 }),
    groups: { reviewers: peers },
  });
  for (const peerId of peers) await embedded.addPeer(peerId, { review: async () => ({ verdict: 'approve' }) });
  return embedded;
}

const threeStages = (digest: string) => {
  const stage = (name: string, document: string) => `  - ${name}:
      call: invoke-contract
      with:
        contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
        interaction: review
        input: { document: '${document}' }`;
  return yaml(`document: { dsl: '1.0.3', namespace: test, name: three-stages, version: '1.0.0' }
do:
${stage('review', '${ .doc }')}
${stage('publish', '${ .operationId }')}
${stage('notify', '${ .operationId }')}
`);
};

type Stored = { revision: string; committedAtMs: number; transition: WorkflowTransition };

async function logOf(store: MemoryEventStore, instanceId: string): Promise<Stored[]> {
  const read = await workflowStreams(store).read(instanceId);
  assert.equal(read.kind, 'ok');
  return read.kind === 'ok' ? (read.transitions as Stored[]) : [];
}

const described = (event: WorkflowEvent): string => ('at' in event ? `${event.type} ${event.at}` : event.type);

/**
 * A new memory store holding the first `upTo` transitions of `log` for `instanceId`, as a worker
 * that stopped there left them: its lease already ended, so another worker takes the instance
 * over at once.
 */
async function storeStoppedAt(log: { transition: WorkflowTransition }[], upTo: number, instanceId: string, clock: SystemClock): Promise<MemoryEventStore> {
  const store = new MemoryEventStore({ clock });
  const stopped = log.slice(0, upTo).map((stored) => {
    if (!stored.transition.events.some((event) => event.type === 'lease-acquired')) return stored;
    const events = stored.transition.events.map((event) => (event.type === 'lease-acquired' ? { ...event, untilMs: clock.nowMs() - 1 } : event));
    return { ...stored, transition: { ...stored.transition, events } };
  });
  const streams = workflowStreams(store);
  const [first, ...rest] = stopped;
  assert.ok(first);
  assert.equal((await streams.create(instanceId, first.transition)).kind, 'ok');
  for (const [index, stored] of rest.entries()) assert.equal((await streams.append(instanceId, String(index + 1), stored.transition)).kind, 'ok');
  return store;
}

test('a three-stage contract pipeline is four transitions: the start with its lease and the first call, one per later call carrying what came before it, the end', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment(clock, store);
  const h = harness({ store, clock, invocations: embedded.coordinator, worker: 'worker-a' });
  try {
    const record = await runToEnd(h, threeStages(embedded.bundle.ref.digest), { doc: 'RFC 1' }, 'four');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const log = await logOf(store, record.instanceId);
    const stage = (name: string) => [
      `task-started /do/${name}`,
      `expression-evaluated /do/${name}>with`,
      `child-bound /do/${name}`,
      `call-started /do/${name}>invoke`,
    ];
    const answered = (name: string) => [`call-answered /do/${name}>invoke`, `task-completed /do/${name}`];
    assert.deepEqual(
      log.map((stored) => stored.transition.events.map(described)),
      [
        ['workflow-started', 'lease-acquired', ...stage('0/review')],
        [...answered('0/review'), ...stage('1/publish')],
        [...answered('1/publish'), ...stage('2/notify')],
        [...answered('2/notify'), 'workflow-completed'],
      ],
    );
    const lease = log[0]?.transition.events[1];
    assert.deepEqual(lease && { type: lease.type, worker: (lease as { worker: string }).worker, epoch: (lease as { epoch: number }).epoch }, {
      type: 'lease-acquired',
      worker: 'worker-a',
      epoch: 1,
    });
    assert.deepEqual(record.lease && { worker: record.lease.worker, epoch: record.lease.epoch }, { worker: 'worker-a', epoch: 1 });
    // Each task started when the transition carrying its start committed.
    for (const stored of log)
      for (const event of stored.transition.events) if (event.type === 'task-started') assert.equal(record.tasks[event.at]?.startedAtMs, stored.committedAtMs);
  } finally {
    await h.close();
    await embedded.close();
  }
});

/** A fetch that answers JSON and notes, at each request, what the instance's log held when it was made. */
function recordingFetch(store: MemoryEventStore, body: (url: string) => JsonValue) {
  const seen: { url: string; logged: string[] }[] = [];
  let instanceId = '';
  const fetcher = (async (input: string | URL | Request) => {
    const url = String(input);
    const log = await logOf(store, instanceId);
    seen.push({ url, logged: log.flatMap((stored) => stored.transition.events.map(described)) });
    return new Response(JSON.stringify(body(url)), { status: 200, headers: { 'content-type': 'application/json' } });
  }) as typeof fetch;
  return { fetcher, seen, watch: (id: string) => (instanceId = id) };
}

test('everything a call depends on is in the log before the call is made: the task start, its arguments, the previous answer', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const recording = recordingFetch(store, (url) => ({ seen: url }));
  const h = harness({ store, clock, fetch: recording.fetcher });
  try {
    const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: two-gets, version: '1.0.0' }
do:
  - first:
      call: http
      with: { method: get, endpoint: 'http://stub.test/{key}/first', headers: { x-key: '\${ .key }' } }
  - second:
      call: http
      with: { method: get, endpoint: 'http://stub.test/second', query: { previous: '\${ .seen }' } }
`);
    // The first call may be made before start answers (its start goes with the call's): watch the instance from before.
    const bundleDigest = `sha256:${sha256Hex(canonicalJson(document))}`;
    recording.watch(workflowInstanceId('alice', bundleDigest, 'two-gets', 'ordered'));
    const { instanceId } = await h.executor.start({ principalId: 'alice', bundleDigest, invocationKey: 'ordered', document, input: { key: 'k1' } });
    const record = await h.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(recording.seen.length, 2);
    const [first, second] = recording.seen;
    assert.ok(first && second);
    for (const needed of ['task-started /do/0/first', 'expression-evaluated /do/0/first>with', 'call-started /do/0/first>http'])
      assert.ok(first.logged.includes(needed), `before the first call: ${needed} (log: ${first.logged.join(', ')})`);
    for (const needed of [
      'call-answered /do/0/first>http',
      'task-completed /do/0/first',
      'task-started /do/1/second',
      'expression-evaluated /do/1/second>with',
      'call-started /do/1/second>http',
    ])
      assert.ok(second.logged.includes(needed), `before the second call: ${needed} (log: ${second.logged.join(', ')})`);
    await assertReplayEqual(h, instanceId);
  } finally {
    await h.close();
  }
});

test('$task.startedAt is the instant the store committed the task start', async () => {
  const h = harness();
  try {
    const record = await runToEnd(
      h,
      yaml(`document: { dsl: '1.0.3', namespace: test, name: started-at, version: '1.0.0' }
do:
  - first:
      set: { a: 1 }
  - stamp:
      set: { b: 2 }
      output:
        as: '\${ { startedAt: $task.startedAt.epoch.milliseconds, b } }'
`),
      {},
      'stamped',
    );
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const startedAtMs = record.tasks['/do/1/stamp']?.startedAtMs;
    assert.equal(typeof startedAtMs, 'number');
    assert.deepEqual(record.output, { startedAt: startedAtMs, b: 2 } as JsonValue);
  } finally {
    await h.close();
  }
});

test('$task is bound in the task definition (set, switch, for): the task itself, its start as committed, a nested task its own; output.as sees its raw output', async () => {
  const h = harness();
  try {
    const record = await runToEnd(
      h,
      yaml(`document: { dsl: '1.0.3', namespace: test, name: task-argument, version: '1.0.0' }
do:
  - first:
      set: { a: 1 }
  - named:
      set:
        name: \${ $task.name }
        reference: \${ $task.reference }
        input: \${ $task.input }
        startedAt: \${ $task.startedAt.epoch.milliseconds }
        kind: \${ $task.definition | keys }
  - choose:
      switch:
        - mine:
            when: \${ $task.name == "choose" }
            then: loop
        - other:
            then: end
  - loop:
      for: { each: item, in: '\${ [$task.name] }' }
      do:
        - inner:
            set: { seen: '\${ [$task.name, $item] }' }
  - shaped:
      set: { s: 1 }
      output:
        as: '\${ { raw: $task.output, name: $task.name } }'
`),
      {},
      'task-argument',
    );
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const startedAtMs = record.tasks['/do/1/named']?.startedAtMs;
    assert.equal(typeof startedAtMs, 'number');
    assert.deepEqual(record.tasks['/do/1/named']?.output, {
      name: 'named',
      reference: '/do/1/named',
      input: { a: 1 },
      startedAt: startedAtMs,
      kind: ['set'],
    } as JsonValue);
    // The switch chose by its own name; the loop iterated over its own; its nested task saw itself.
    assert.deepEqual(record.tasks['/do/3/loop']?.output, { seen: ['inner', 'loop'] } as JsonValue);
    // output.as sees the task's raw output as $task.output.
    assert.deepEqual(record.output, { raw: { s: 1 }, name: 'shaped' } as JsonValue);
  } finally {
    await h.close();
  }
});

/** The system clock, a few milliseconds later at each reading: no two instants the executor or the store read are equal. */
class TickingClock extends SystemClock {
  private offsetMs = 0;
  override nowMs(): number {
    this.offsetMs += 3;
    return super.nowMs() + this.offsetMs;
  }
}

test('$workflow.startedAt in the first task is the instant the store committed the start, though the start waits for the first commit', async () => {
  const clock = new TickingClock();
  const store = new MemoryEventStore({ clock });
  const h = harness({ store, clock });
  try {
    // In-process (a path), through jq, and through $ARGS (every variable is a named argument): each an instance of its own.
    const expressions = {
      path: '$workflow.startedAt.epoch.milliseconds',
      jq: '$workflow.startedAt.epoch.milliseconds + 0',
      named: '$ARGS.named.workflow.startedAt.epoch.milliseconds',
    };
    for (const [name, expression] of Object.entries(expressions)) {
      const record = await runToEnd(
        h,
        yaml(`document: { dsl: '1.0.3', namespace: test, name: workflow-started-at, version: '1.0.0' }
do:
  - first:
      set: { at: '\${ ${expression} }' }
`),
        {},
        `workflow-stamped-${name}`,
      );
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      assert.deepEqual(record.output, { at: record.startedAtMs }, name);
      const log = await logOf(store, record.instanceId);
      // $ARGS can name $task too, whose startedAt is the task's start as committed: that start commits with the workflow's.
      assert.deepEqual(
        log[0]?.transition.events.map(described),
        name === 'named' ? ['workflow-started', 'lease-acquired', 'task-started /do/0/first'] : ['workflow-started', 'lease-acquired'],
        `${name}: the start committed before the expression read it`,
      );
    }
  } finally {
    await h.close();
  }
});

test('facts too large to travel in one transition are appended one by one, each as large as it was alone', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock, limits: { transitionBytesMax: 5 * 1024 } });
  const big = 'x'.repeat(3 * 1024);
  const h = harness({
    store,
    clock,
    fetch: (async () => new Response(JSON.stringify({ big }), { headers: { 'content-type': 'application/json' } })) as typeof fetch,
  });
  try {
    // Two large values (the answer, and the copy the set task makes of it): together past the limit.
    const record = await runToEnd(
      h,
      yaml(`document: { dsl: '1.0.3', namespace: test, name: big-answer, version: '1.0.0' }
do:
  - fetch:
      call: http
      with: { method: get, endpoint: 'http://stub.test/big' }
  - copy:
      set: { again: '\${ .big }' }
`),
      {},
      'big',
    );
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { again: big } as JsonValue);
    const log = await logOf(store, record.instanceId);
    assert.deepEqual(
      log.slice(-6).map((stored) => stored.transition.events.map((event) => event.type)),
      [['call-answered'], ['task-completed'], ['task-started'], ['expression-evaluated'], ['task-completed'], ['workflow-completed']],
      'each fact alone',
    );
    assert.deepEqual(await h.executor.replay(record.instanceId), record);
  } finally {
    await h.close();
  }
});

/** The same events, one per transition, as the executor wrote them before steps were carried (the lease in its own transition). */
function oneEventPerTransition(log: Stored[]): { committedAtMs: number; transition: WorkflowTransition }[] {
  return log.flatMap((stored) =>
    stored.transition.events.map((event) => ({
      committedAtMs: stored.committedAtMs,
      transition: { events: [event], timeGuard: stored.transition.timeGuard, causation: { command: event.type } },
    })),
  );
}

const comparable = (record: WorkflowRecord) => ({
  status: record.status,
  output: record.output,
  steps: record.steps,
  children: record.children,
  tasks: Object.fromEntries(Object.entries(record.tasks).map(([at, task]) => [at, { state: task.state, input: task.input, output: task.output }])),
  calls: record.calls,
  lease: record.lease && { worker: record.lease.worker, epoch: record.lease.epoch },
});

test('a log written one event per transition folds and replays to the same instance, and a running one resumes', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment(clock, store);
  const a = harness({ store, clock, invocations: embedded.coordinator, worker: 'worker-a' });
  const document = threeStages(embedded.bundle.ref.digest);
  let b: ReturnType<typeof harness> | undefined;
  try {
    const done = await runToEnd(a, document, { doc: 'RFC 2' }, 'old-layout');
    const current = await logOf(store, done.instanceId);
    const old = oneEventPerTransition(current).map((entry, index) => ({ ...entry, revision: String(index + 1) }));
    assert.ok(old.length > current.length);
    const folded = foldWorkflow(old);
    assert.ok(folded);
    assert.deepEqual(comparable(folded), comparable(done));
    assert.equal(replayWorkflowLog(old).problem, null);

    // The same instance, stopped in the old layout just after its first call started (its worker gone, its lease ended):
    // written to another store, another worker resumes it from there and finishes it.
    const upTo = old.findIndex((entry) => entry.transition.events[0]?.type === 'call-started') + 1;
    const elsewhere = await storeStoppedAt(old, upTo, done.instanceId, clock);
    b = harness({ store: elsewhere, clock, invocations: embedded.coordinator, worker: 'worker-b' });
    const resumed = await b.executor.wait(done.instanceId, 10_000);
    assert.equal(resumed.status, 'completed', JSON.stringify(resumed.error));
    assert.deepEqual(resumed.output, done.output, 'the stages answered as before: the same operations under the same keys');
    assert.deepEqual(resumed.children, done.children);
    assert.equal(resumed.lease?.worker, 'worker-b');
    assert.equal(resumed.lease?.epoch, 2, 'worker-b took the ended lease over');
    await assertReplayEqual(b, done.instanceId);
  } finally {
    await a.close();
    await b?.close();
    await embedded.close();
  }
});

test("a stage's answer is written once: its task's output, the next task's input and the workflow's output name it; the first task's input names the workflow's", async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment(clock, store);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const record = await runToEnd(h, threeStages(embedded.bundle.ref.digest), { doc: 'RFC 3' }, 'once');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const events = (await logOf(store, record.instanceId)).flatMap((stored) => stored.transition.events);
    const carried = events.flatMap((event) => {
      if (event.type === 'task-started') return [{ event: `${event.type} ${event.at}`, value: 'input' in event, from: event.inputFrom }];
      if (event.type === 'task-completed') return [{ event: `${event.type} ${event.at}`, value: 'output' in event, from: event.outputFrom }];
      if (event.type === 'workflow-completed') return [{ event: event.type, value: 'output' in event, from: event.outputFrom }];
      return [];
    });
    const answer = (name: string) => ({ step: `/do/${name}>invoke` });
    assert.deepEqual(carried, [
      { event: 'task-started /do/0/review', value: false, from: { input: true } },
      { event: 'task-completed /do/0/review', value: false, from: answer('0/review') },
      { event: 'task-started /do/1/publish', value: false, from: answer('0/review') },
      { event: 'task-completed /do/1/publish', value: false, from: answer('1/publish') },
      { event: 'task-started /do/2/notify', value: false, from: answer('1/publish') },
      { event: 'task-completed /do/2/notify', value: false, from: answer('2/notify') },
      { event: 'workflow-completed', value: false, from: answer('2/notify') },
    ]);
    // The record holds the values themselves, as the answers and the input were recorded.
    assert.deepEqual(record.tasks['/do/0/review']?.input, { doc: 'RFC 3' });
    const ok = (at: string) => {
      const result = record.steps[at];
      return result && 'ok' in result ? result.ok : undefined;
    };
    assert.deepEqual(record.tasks['/do/1/publish']?.input, ok('/do/0/review>invoke'));
    assert.deepEqual(record.tasks['/do/2/notify']?.output, ok('/do/2/notify>invoke'));
    assert.deepEqual(record.output, ok('/do/2/notify>invoke'));
  } finally {
    await h.close();
    await embedded.close();
  }
});

/** The log with every value written in full, as the executor wrote it before values were referred to. */
function inFull(log: Stored[], record: WorkflowRecord): Stored[] {
  const full = (event: WorkflowEvent): WorkflowEvent => {
    if (event.type === 'task-started' && event.inputFrom) {
      const { inputFrom: _from, ...rest } = event;
      return { ...rest, input: record.tasks[event.at]?.input ?? null };
    }
    if (event.type === 'task-completed' && event.outputFrom) {
      const { outputFrom: _from, ...rest } = event;
      return { ...rest, output: record.tasks[event.at]?.output ?? null };
    }
    if (event.type === 'workflow-completed' && event.outputFrom) {
      const { outputFrom: _from, ...rest } = event;
      return { ...rest, output: record.output };
    }
    return event;
  };
  return log.map((stored) => ({ ...stored, transition: { ...stored.transition, events: stored.transition.events.map(full) } }));
}

test('a log written with every value in full (before values were referred to) folds and replays to the same instance, and a running one resumes', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment(clock, store);
  const a = harness({ store, clock, invocations: embedded.coordinator, worker: 'worker-a' });
  let b: ReturnType<typeof harness> | undefined;
  try {
    const done = await runToEnd(a, threeStages(embedded.bundle.ref.digest), { doc: 'RFC 4' }, 'in-full');
    const current = await logOf(store, done.instanceId);
    const old = inFull(current, done);
    assert.ok(JSON.stringify(old).length > JSON.stringify(current).length, 'the full log writes the answers again');
    assert.ok(!JSON.stringify(old).includes('From'));
    assert.equal(replayWorkflowLog(old).problem, null);
    assert.deepEqual(foldWorkflow(old), foldWorkflow(current));

    // Stopped in the old shape after its second call started (its lease ended): another worker resumes it, and
    // what it writes next refers to values the old part of the log wrote in full.
    const upTo = old.findIndex((stored) => stored.transition.events.some((event) => event.type === 'child-bound' && event.at === '/do/1/publish')) + 1;
    const elsewhere = await storeStoppedAt(old, upTo, done.instanceId, clock);
    b = harness({ store: elsewhere, clock, invocations: embedded.coordinator, worker: 'worker-b' });
    const resumed = await b.executor.wait(done.instanceId, 10_000);
    assert.equal(resumed.status, 'completed', JSON.stringify(resumed.error));
    assert.deepEqual(resumed.output, done.output);
    // The same tasks with the same values, the same children (the call in flight made again under its key, epoch 2).
    const { tasks, steps, children } = comparable(resumed);
    assert.deepEqual({ tasks, steps, children }, { tasks: comparable(done).tasks, steps: done.steps, children: done.children });
    const resumedLog = await logOf(elsewhere, done.instanceId);
    const next = resumedLog.slice(upTo).flatMap((stored) => stored.transition.events);
    assert.deepEqual(
      next.find((event) => event.type === 'task-started' && event.at === '/do/2/notify'),
      { type: 'task-started', v: 1, at: '/do/2/notify', ref: '/do/2/notify', name: 'notify', inputFrom: { step: '/do/1/publish>invoke' } },
      'the resumed worker names the answer it reads from the old part',
    );
    await assertReplayEqual(b, done.instanceId);
  } finally {
    await a.close();
    await b?.close();
    await embedded.close();
  }
});

/** The log as the executor wrote it before its start carried the first call: the start and its lease alone, the first task's facts next. */
function startApart(log: Stored[]): Stored[] {
  const [first, ...rest] = log;
  assert.ok(first);
  const { events, ...transition } = first.transition;
  const split = events.findIndex((event) => event.type !== 'workflow-started' && event.type !== 'lease-acquired');
  assert.ok(split > 0, 'the start carries the first task');
  return [
    { ...first, transition: { ...transition, events: events.slice(0, split) } },
    {
      revision: 'apart',
      committedAtMs: first.committedAtMs,
      transition: { ...transition, events: events.slice(split), causation: { command: 'child-bound' } },
    },
    ...rest,
  ].map((stored, index) => ({ ...stored, revision: String(index + 1) }));
}

test('a log whose start does not carry the first task (before the two were one append) folds and replays to the same instance, and a running one resumes', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment(clock, store);
  const a = harness({ store, clock, invocations: embedded.coordinator, worker: 'worker-a' });
  const resumed: ReturnType<typeof harness>[] = [];
  try {
    const done = await runToEnd(a, threeStages(embedded.bundle.ref.digest), { doc: 'RFC 5' }, 'start-apart');
    const current = await logOf(store, done.instanceId);
    assert.equal(current.length, 4);
    const old = startApart(current);
    assert.deepEqual(
      old.slice(0, 2).map((stored) => stored.transition.events.map(described)),
      [
        ['workflow-started', 'lease-acquired'],
        ['task-started /do/0/review', 'expression-evaluated /do/0/review>with', 'child-bound /do/0/review', 'call-started /do/0/review>invoke'],
      ],
    );
    assert.equal(replayWorkflowLog(old).problem, null);
    assert.deepEqual({ ...foldWorkflow(old), revision: 'last' }, { ...foldWorkflow(current), revision: 'last' });

    // Stopped in the old shape after its start alone, and after its first call's binding (its worker gone, its lease
    // ended): another worker resumes each and finishes it with the same operations under the same keys.
    for (const upTo of [1, 2]) {
      const elsewhere = await storeStoppedAt(old, upTo, done.instanceId, clock);
      const b = harness({ store: elsewhere, clock, invocations: embedded.coordinator, worker: `worker-b${upTo}` });
      resumed.push(b);
      const record = await b.executor.wait(done.instanceId, 10_000);
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      assert.deepEqual(record.output, done.output);
      const { tasks, steps, children } = comparable(record);
      assert.deepEqual({ tasks, steps, children }, { tasks: comparable(done).tasks, steps: done.steps, children: done.children });
      assert.equal(record.lease?.epoch, 2, 'the ended lease taken over');
      await assertReplayEqual(b, done.instanceId);
    }
  } finally {
    await a.close();
    for (const b of resumed) await b.close();
    await embedded.close();
  }
});

/** A stage's arguments as the document writes them, its one expression replaced by `value` (what evaluating them whole gives). */
function stageArgs(document: JsonValue, index: number, value: JsonValue): JsonValue {
  const entry = ((document as { do: Record<string, { with: JsonValue }>[] }).do[index] ?? {}) as Record<string, { with: JsonValue }>;
  const template = Object.values(entry)[0]?.with;
  return JSON.parse(JSON.stringify(template).replace(/"\$\{[^"]*\}"/, JSON.stringify(value))) as JsonValue;
}

/** The log as format 1 wrote it: no format in the start, each call's `with` recorded whole. */
function argsWhole(log: Stored[], document: JsonValue): Stored[] {
  const whole = (event: WorkflowEvent): WorkflowEvent => {
    if (event.type === 'workflow-started') {
      const { format: _format, ...rest } = event;
      return rest;
    }
    if (event.type !== 'expression-evaluated' || !event.at.endsWith('>with') || !('ok' in event.result)) return event;
    const parts = event.result.ok as JsonValue[];
    assert.equal(parts.length, 1);
    const index = Number(/^\/do\/(\d+)\//.exec(event.at)?.[1]);
    return { ...event, result: { ok: stageArgs(document, index, parts[0] ?? null) } };
  };
  return log.map((stored) => ({ ...stored, transition: { ...stored.transition, events: stored.transition.events.map(whole) } }));
}

test("a call's arguments are recorded as their expressions' results (format 2); a log that recorded them whole folds and replays to the same instance, and a running one resumes writing them whole", async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment(clock, store);
  const a = harness({ store, clock, invocations: embedded.coordinator, worker: 'worker-a' });
  const document = threeStages(embedded.bundle.ref.digest);
  let b: ReturnType<typeof harness> | undefined;
  try {
    const done = await runToEnd(a, document, { doc: 'RFC 6' }, 'args-parts');
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.equal(done.started.format, 2);
    const review = done.children['/do/0/review']?.operationId;
    const publish = done.children['/do/1/publish']?.operationId;
    assert.ok(review !== undefined && publish !== undefined);
    assert.deepEqual(done.steps['/do/0/review>with'], { ok: ['RFC 6'] });
    assert.deepEqual(done.steps['/do/1/publish>with'], { ok: [review] });
    assert.deepEqual(done.steps['/do/2/notify>with'], { ok: [publish] });
    const current = await logOf(store, done.instanceId);
    assert.equal(replayWorkflowLog(current).problem, null);
    await assertReplayEqual(a, done.instanceId);

    const old = argsWhole(current, document);
    assert.ok(JSON.stringify(old).length > JSON.stringify(current).length + 3 * 150, 'the whole arguments write the contract reference again');
    assert.equal(replayWorkflowLog(old).problem, null);
    const folded = foldWorkflow(old);
    assert.ok(folded);
    assert.equal(folded.started.format, undefined);
    assert.deepEqual(folded.steps['/do/1/publish>with'], { ok: stageArgs(document, 1, review) });
    assert.deepEqual({ ...comparable(folded), steps: undefined }, { ...comparable(done), steps: undefined });

    // Stopped in format 1 after its second call's binding (its lease ended): another worker makes that call again with
    // the arguments recorded whole, and records the third call's arguments whole too (the start's format, not its own).
    const upTo = old.findIndex((stored) => stored.transition.events.some((event) => event.type === 'child-bound' && event.at === '/do/1/publish')) + 1;
    const elsewhere = await storeStoppedAt(old, upTo, done.instanceId, clock);
    b = harness({ store: elsewhere, clock, invocations: embedded.coordinator, worker: 'worker-b' });
    const resumed = await b.executor.wait(done.instanceId, 10_000);
    assert.equal(resumed.status, 'completed', JSON.stringify(resumed.error));
    assert.deepEqual(resumed.output, done.output);
    assert.deepEqual(resumed.children, done.children, 'the same operations under the same keys');
    assert.deepEqual(resumed.steps['/do/2/notify>with'], { ok: stageArgs(document, 2, publish) });
    await assertReplayEqual(b, done.instanceId);
  } finally {
    await a.close();
    await b?.close();
    await embedded.close();
  }
});
