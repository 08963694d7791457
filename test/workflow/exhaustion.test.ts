/**
 * What a caller's input can make one workflow instance spend is bounded, and each bound ends the
 * instance with a DSL error recorded in its log: task executions (limits.workflowTaskExecutionsMax,
 * whatever loops — `then`, `for`, `retry`), the transitions it appends while it runs
 * (limits.workflowTransitionsMax: the rest of what a store reads back is kept for its end), the
 * bytes its log holds while it runs (limits.workflowLogBytesMax, counted across workers), and the
 * size of a jq result (limits.expressionResultBytesMax, refused in the jq worker). The harness
 * sets the first three low, to reach them quickly.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SystemClock, type Clock } from '../../src/contract/clock.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { limits } from '../../src/contract/limits.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { durationMs } from '../../src/workflow/exec/duration.js';
import type { WorkflowEvent } from '../../src/workflow/exec/events.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { assertReplayEqual, harness, runToEnd, yaml, type Harness } from './support.js';

const runtimeError = 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime';
const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;

/** A task `spin` whose one task raises an error (500), in a try whose catch retries it by `retry` (a YAML flow value), never counting. */
const spinning = (retry: string) =>
  yaml(`${head('spin')}do:
  - spin:
      try:
        - boom:
            raise: { error: { type: 'https://example.com/boom', status: 500 } }
      catch:
        retry: ${retry}
`);

/** The instance faulted on its task budget, with the runtime error saying so. */
function assertTaskBudgetFault(record: WorkflowRecord, what: string): void {
  assert.equal(record.status, 'faulted', what);
  assert.equal(record.error?.type, runtimeError, what);
  assert.equal(record.error?.title, 'Task budget exhausted', what);
}

/** A retry loop with no delay and no count, run on a store holding 60 transitions of a log (and `transitionsMax` to the executor, when given). */
async function spin(key: string, transitionsMax?: number): Promise<{ h: Harness; store: MemoryEventStore; record: WorkflowRecord }> {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock, limits: { transitionsMax: 60 } });
  const h = harness({ clock, store, transitionsMax });
  const record = await runToEnd(h, spinning('{ delay: { milliseconds: 0 } }'), {}, key, 20_000).catch(async (error: unknown) => {
    await h.close();
    throw error;
  });
  return { h, store, record };
}

test('a retry loop with no delay and no count faults on its log budget, its fault recorded within what the store accepts', async () => {
  // The store accepts 60 transitions; the instance may append 24 while it runs.
  const { h, store, record } = await spin('spin', 24);
  try {
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, runtimeError);
    assert.equal(record.error?.title, 'Log budget exhausted');
    const read = await store.read(record.instanceId);
    assert.ok(read.kind === 'ok' && read.transitions.length <= 24 + 4, `the log holds ${read.kind === 'ok' ? read.transitions.length : read.kind} transitions`);
    assert.deepEqual(h.executor.failures, [], 'no append was refused');
    // The log refused the retrying task's own end: it is cancelled with the fault, not left running in an ended instance.
    assert.deepEqual(
      Object.entries(record.tasks).flatMap(([at, task]) => (task.state === 'running' ? [at] : [])),
      [],
      'no task is running in the faulted instance',
    );
    const last = read.kind === 'ok' ? (read.transitions.at(-1)?.transition.events as readonly WorkflowEvent[] | undefined) : undefined;
    assert.deepEqual(
      last?.map((event) => (event.type === 'task-cancelled' ? `${event.type} ${event.at} (${event.reason})` : event.type)),
      ['task-cancelled /do/0/spin (the instance faulted)', 'workflow-faulted'],
    );
    await assertReplayEqual(h, record.instanceId);
  } finally {
    await h.close();
  }
});

test('a store holding fewer transitions than the running budget lowers it: the instance faults on its budget, its fault within what the store holds, never refused', async () => {
  // The executor's own budget is the default (limits.workflowTransitionsMax); the store holds only 60.
  const { h, store, record } = await spin('spin-small-store');
  try {
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.title, 'Log budget exhausted');
    // Half of what the store holds runs; the rest is kept for the end and what follows it.
    assert.match(record.error?.detail ?? '', /at most 30 transitions/);
    const read = await store.read(record.instanceId);
    assert.ok(read.kind === 'ok' && read.transitions.length <= 60);
    assert.deepEqual(h.executor.failures, [], 'no append was refused');
    await assertReplayEqual(h, record.instanceId);
  } finally {
    await h.close();
  }
});

test('an exponential backoff without a delay retries for as long as its policy lets it, past 2^1024', async () => {
  const h = harness();
  try {
    const document = spinning('{ backoff: { exponential: {} } }');
    const record = await runToEnd(h, document, {}, 'spin', 60_000);
    assert.equal(record.status, 'faulted', 'the error is never swallowed: no retry runs out');
    assert.match(record.error?.title ?? '', /^(Task|Log) budget exhausted$/);
    const retries = Object.values(record.timers).filter((timer) => timer.purpose === 'retry').length;
    assert.ok(retries > 1100, `${retries} retries`);
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

/** A store of `kind`, and `reopen`: the same store as another process opens it once this one is closed (SQLite: the same file). */
function openStore(kind: 'memory' | 'sqlite', clock: Clock): { store: EventStore; reopen(): Promise<EventStore>; dispose(): Promise<void> } {
  if (kind === 'memory') {
    const store = new MemoryEventStore({ clock });
    return { store, reopen: async () => store, dispose: async () => undefined };
  }
  const dir = mkdtempSync(join(tmpdir(), 'convoke-wf-'));
  const path = join(dir, 'wf.db');
  let open = new SqliteEventStore({ path, clock });
  return {
    store: open,
    reopen: async () => {
      await open.close();
      open = new SqliteEventStore({ path, clock });
      return open;
    },
    dispose: async () => {
      await open.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Each stored transition's bytes as the store wrote them (its JSON body: UTF-8, codec.ts), its event types, and the workers taking its lease. */
async function storedLog(store: EventStore, instanceId: string): Promise<{ bytes: number; types: string[]; leasedBy: string[] }[]> {
  const read = await store.read(instanceId);
  assert.equal(read.kind, 'ok', 'the log is read back');
  if (read.kind !== 'ok') return [];
  return read.transitions.map(({ transition }) => ({
    bytes: Buffer.byteLength(JSON.stringify(transition), 'utf8'),
    types: transition.events.map((event) => event.type),
    leasedBy: (transition.events as readonly { type: string; worker?: unknown }[]).flatMap((event) =>
      event.type === 'lease-acquired' ? [String(event.worker)] : [],
    ),
  }));
}

const sumBytes = (log: readonly { bytes: number }[]): number => log.reduce((sum, { bytes }) => sum + bytes, 0);

/** The lowered byte budget, and the value each iteration copies: multi-byte characters (UTF-8 bytes, not string length, are counted). */
const logBytesMax = 400_000;
const blob = '€'.repeat(7_000);
const blobBytes = Buffer.byteLength(blob, 'utf8');
const range = (n: number): number[] => Array.from({ length: n }, (_, index) => index);

const copyLoop = (name: string, items: string) => `  - ${name}:
      for: { in: '\${ ${items} }' }
      do:
        - copy:
            set: { blob: '\${ $workflow.input.blob }' }
`;

/** Two copy loops with a listen for `com.example.go` between them, after `before` (tasks of the same list). */
const pausedCopies = (name: string, before = '') =>
  yaml(`${head(name)}do:
${before}${copyLoop('first', '$workflow.input.first')}  - pause:
      listen:
        to:
          one:
            with: { type: com.example.go }
${copyLoop('second', '$workflow.input.second')}`);

/**
 * Asserts the instance faulted on the byte budget with its fault the last transition of a readable
 * log, the rest within the budget and filling it; answers the running bytes (all but the fault).
 */
async function assertByteBudgetFault(store: EventStore, record: WorkflowRecord): Promise<number> {
  assert.equal(record.status, 'faulted');
  assert.equal(record.error?.type, runtimeError);
  assert.equal(record.error?.status, 500);
  assert.equal(record.error?.title, 'Log budget exhausted');
  assert.match(record.error?.detail ?? '', new RegExp(`log holds at most ${logBytesMax} bytes`));
  const log = await storedLog(store, record.instanceId);
  assert.ok(log.at(-1)?.types.includes('workflow-faulted'), 'the fault is the last transition');
  const running = sumBytes(log.slice(0, -1));
  assert.ok(running <= logBytesMax, `the log held ${running} bytes before its fault, past the budget of ${logBytesMax}`);
  assert.ok(running > logBytesMax - 2 * blobBytes, `the log held ${running} bytes before its fault: the instance stopped short of its budget`);
  // The count the budget was checked against (the fault's detail) is what the store wrote before
  // the refused step; after it, only the faults of the tasks the refusal ended (then the instance's).
  const counted = Number(/it holds (\d+)/.exec(record.error?.detail ?? '')?.[1]);
  let before = 0;
  let at = 0;
  while (at < log.length - 1 && before < counted) before += (log[at++] as { bytes: number }).bytes;
  assert.equal(before, counted, record.error?.detail);
  for (const after of log.slice(at, -1)) assert.deepEqual([...new Set(after.types)], ['task-faulted'], record.error?.detail);
  return running;
}

/** The second worker's end of an instance the first began: the byte budget's fault after the second loop (at `second`) ran, replay equal to live, nothing refused. */
async function assertSecondFaulted(b: Harness, store: EventStore, record: WorkflowRecord, second: string): Promise<void> {
  await assertByteBudgetFault(store, record);
  assert.ok(
    Object.keys(record.tasks).some((at) => at.startsWith(second)),
    'the second loop ran',
  );
  await assertReplayEqual(b, record.instanceId);
  assert.deepEqual(b.executor.failures, []);
}

for (const kind of ['memory', 'sqlite'] as const) {
  test(`a for loop copying a large value faults on the log's byte budget, its fault recorded and its log readable (${kind})`, async () => {
    const clock = new SystemClock();
    const opened = openStore(kind, clock);
    const h = harness({ clock, store: opened.store, logBytesMax });
    try {
      const document = yaml(`${head('copy')}do:\n${copyLoop('each', '.items')}`);
      // Unbounded, the loop writes 100 copies: several times the budget.
      assert.ok(100 * blobBytes > 4 * logBytesMax);
      const record = await runToEnd(h, document, { items: range(100), blob }, 'copy');
      await assertByteBudgetFault(opened.store, record);
      assert.ok(Object.keys(record.tasks).length < 2 * 100, 'the loop did not run to its end');
      assert.deepEqual(h.executor.failures, [], 'no append was refused');
    } finally {
      await h.close();
      await opened.dispose();
    }
  });

  test(`a worker resuming an instance counts the bytes its log already holds: it faults at the same total (${kind})`, async () => {
    const clock = new SystemClock();
    const opened = openStore(kind, clock);
    const document = pausedCopies('resumed');
    const a = harness({ clock, store: opened.store, worker: 'a', logBytesMax });
    let instanceId: string;
    try {
      ({ instanceId } = await a.executor.start({
        principalId: 'alice',
        invocationKey: 'resumed',
        document,
        input: { first: range(12), second: range(100), blob },
      }));
      while (!(await a.executor.get(instanceId))?.listens['/do/1/pause']) await new Promise((resolve) => setTimeout(resolve, 5));
    } finally {
      await a.close();
    }
    // The first worker wrote more than half the budget: counting only its own appends, the second would write a whole budget more.
    const before = sumBytes(await storedLog(opened.store, instanceId));
    assert.ok(before > logBytesMax / 2 && before < logBytesMax, `the first worker wrote ${before} bytes`);
    const store = await opened.reopen();
    const b = harness({ clock, store, worker: 'b', logBytesMax });
    try {
      assert.equal((await b.executor.get(instanceId))?.status, 'running');
      const go: CloudEvent = { specversion: '1.0', id: 'go-1', source: 'https://convoke.dev/test', type: 'com.example.go', data: {} };
      assert.deepEqual(await b.executor.deliver(go, null), { matched: [instanceId] });
      const record = await b.executor.wait(instanceId, 20_000);
      await assertSecondFaulted(b, store, record, '/do/2/second');
      const log = await storedLog(store, instanceId);
      assert.ok(
        log.some((transition) => transition.leasedBy.includes('b')),
        'the second worker ran the rest',
      );
    } finally {
      await b.close();
      await opened.dispose();
    }
  });
}

test('a worker holding an instance while another appends to it counts what each read adds: it faults at the same total', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const document = pausedCopies(
    'followed',
    `  - ready:
      listen:
        to:
          one:
            with: { type: com.example.ready }
`,
  );
  const event = (type: string): CloudEvent => ({ specversion: '1.0', id: `${type}-1`, source: 'https://convoke.dev/test', type, data: {} });
  const sleep = () => new Promise((resolve) => setTimeout(resolve, 5));
  const a = harness({ clock, store, worker: 'a', logBytesMax });
  const b = harness({ clock, store, worker: 'b', logBytesMax });
  try {
    await b.executor.watch();
    const { instanceId } = await a.executor.start({
      principalId: 'alice',
      invocationKey: 'followed',
      document,
      input: { first: range(12), second: range(100), blob },
    });
    try {
      while (!(await a.executor.get(instanceId))?.listens['/do/0/ready']) await sleep();
      // The second worker holds the instance from here on: it counts the short log it reads now, then each read of the first's appends.
      assert.equal((await b.executor.get(instanceId))?.status, 'running');
      assert.ok(
        sumBytes(await storedLog(store, instanceId)) < 2 * blobBytes,
        'the second worker read the log before the copies (the start and its input alone)',
      );
      assert.deepEqual(await a.executor.deliver(event('com.example.ready'), null), { matched: [instanceId] });
      while (!(await a.executor.get(instanceId))?.listens['/do/2/pause']) await sleep();
    } finally {
      await a.close();
    }
    const written = sumBytes(await storedLog(store, instanceId));
    assert.ok(written > logBytesMax / 2 && written < logBytesMax, `the first worker wrote ${written} bytes`);
    // The first worker's release reaches the second, which takes the lease and waits for the event.
    while ((await b.executor.get(instanceId))?.lease?.worker !== 'b') await sleep();
    assert.deepEqual(await b.executor.deliver(event('com.example.go'), null), { matched: [instanceId] });
    await assertSecondFaulted(b, store, await b.executor.wait(instanceId, 20_000), '/do/3/second');
  } finally {
    await b.close();
  }
});

test('a then loop and a for over the input end on the task budget, as a runtime error', async () => {
  const h = harness({ tasksMax: 50 });
  try {
    const looping = await runToEnd(
      h,
      yaml(`${head('loop')}do:
  - again:
      set: { n: 1 }
  - back:
      set: { n: 2 }
      then: again
`),
      {},
      'loop',
    );
    assertTaskBudgetFault(looping, 'the then loop');
    const iterating = await runToEnd(
      h,
      yaml(`${head('each')}do:
  - each:
      for: { in: '\${ .items }' }
      do:
        - one:
            set: { seen: '\${ $item }' }
`),
      { items: Array.from({ length: 100 }, (_, index) => index) },
      'each',
    );
    assertTaskBudgetFault(iterating, 'the for');
  } finally {
    await h.close();
  }
});

test('a for whose do is empty counts each iteration against the task budget: its while cannot run past it', async () => {
  const h = harness({ tasksMax: 50 });
  try {
    const record = await runToEnd(
      h,
      yaml(`${head('idle')}do:
  - spin:
      for: { in: '\${ .items }' }
      while: '\${ $index >= 0 }'
      do: []
`),
      { items: range(100) },
      'idle',
    );
    assertTaskBudgetFault(record, 'the empty for');
    assert.equal(record.error?.instance, '/do/0/spin');
    // The while was evaluated for the iterations the budget let run, not for every item.
    assert.ok(Object.keys(record.steps).filter((at) => at.endsWith('>while')).length < 50);
  } finally {
    await h.close();
  }
});

test('a loop that commits nothing holds at most workflowHeldFactsMax facts outside its log: it commits them as it goes', async () => {
  const h = harness();
  try {
    // Each iteration holds three facts (the task's start, its result, its completion) and commits nothing of its own.
    const iterations = 200;
    assert.ok(3 * iterations > 4 * limits.workflowHeldFactsMax);
    const record = await runToEnd(
      h,
      yaml(`${head('held')}do:
  - each:
      for: { in: '\${ .items }' }
      do:
        - copy:
            set: { seen: '\${ [$item, $index] }' }
`),
      { items: range(iterations) },
      'held',
    );
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const read = await h.store.read(record.instanceId);
    assert.ok(read.kind === 'ok');
    const sizes = read.kind === 'ok' ? read.transitions.map(({ transition }) => transition.events.length) : [];
    // The start's two events (and the end) ride with what is held; nothing more.
    assert.ok(Math.max(...sizes) <= limits.workflowHeldFactsMax + 3, `a transition carried ${Math.max(...sizes)} events`);
    assert.ok(sizes.length >= (3 * iterations) / limits.workflowHeldFactsMax, `the facts were committed in ${sizes.length} transitions`);
  } finally {
    await h.close();
  }
});

test('a jq result larger than a transition carries is an expression error, refused before the runtime holds it', async () => {
  const h = harness();
  try {
    const n = 200_000;
    assert.ok(JSON.stringify(Array.from({ length: n }, (_, index) => index)).length > limits.expressionResultBytesMax);
    const record = await runToEnd(
      h,
      yaml(`${head('big')}do:
  - grow:
      set: '\${ [range(.n)] }'
`),
      { n },
      'big',
    );
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/expression');
    assert.equal(record.error?.status, 400);
    assert.match(record.error?.detail ?? '', new RegExp(`larger than ${limits.expressionResultBytesMax} bytes`));
    // Within the bound, a large result is taken as before.
    const small = await runToEnd(
      h,
      yaml(`${head('ok')}do:
  - grow:
      set: '\${ [range(.n)] | length }'
`),
      { n: 50_000 },
      'ok',
    );
    assert.equal(small.status, 'completed');
    assert.equal(small.output, 50_000);
  } finally {
    await h.close();
  }
});

test('a wait whose duration from the input ends past what a timer records faults with a validation error', async () => {
  const h = harness();
  try {
    const document = yaml(`${head('nap')}do:
  - nap:
      wait: '\${ .d }'
`);
    // 10^12 days: past 2^53 ms as an ISO duration; just under it as milliseconds, then past it from the start's instant.
    for (const [key, d] of [
      ['iso', 'P999999999999D'],
      ['ms', { milliseconds: Number.MAX_SAFE_INTEGER - 1 }],
    ] as const) {
      const record = await runToEnd(h, document, { d }, key, 10_000);
      assert.equal(record.status, 'faulted', key);
      assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/validation', key);
      assert.equal(record.error?.title, 'Invalid duration', key);
    }
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test('a duration longer than a safe integer of milliseconds is no duration, in either form', () => {
  assert.equal(durationMs('P999999999999D'), undefined);
  assert.equal(durationMs({ days: 1e12 }), undefined);
  assert.equal(durationMs('P1D'), 86_400_000);
  assert.equal(durationMs('P99999999D'), 99_999_999 * 86_400_000);
});
