/**
 * A listen's timeout against an event arriving at the same moment, on an injected clock: the log
 * decides which came first, and the publisher is answered by it. An event taken before the timeout
 * (answered accepted) ends the wait, and the instance goes on with it however late its task's
 * completion is recorded; an event at the timeout's instant, or one whose append comes after the
 * timeout's, is not taken and is answered as any event no instance takes (nothing stored).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import type { JsonValue } from '../../src/contract/json.js';
import type { Transition } from '../../src/events/types.js';
import type { ExpressionEvaluator } from '../../src/workflow/exec/jq.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { storeWith } from '../support/scenario.js';
import { assertReplayEqual, harness, yaml, type Harness, type HarnessOptions } from './support.js';

const timeoutMs = 1_000;
const at = '/do/0/wait';

let sequence = 0;
const event = (type: string, data: JsonValue): CloudEvent => ({ specversion: '1.0', id: `race-${++sequence}`, source: 'https://convoke.dev/test', type, data });

/** `wait` listens for one event of `type` (matched by `filter`, a YAML value) under a 1 s timeout, then `after` sets its output aside. */
const document = (name: string, filter = 'com.example.ready', extra = '') =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          one: { with: { type: ${filter} } }
${extra}      timeout: { after: { milliseconds: ${timeoutMs} } }
  - after:
      set: { took: '\${ . }' }
`);

/** A gate: `reached` once something waits at it, which then waits until `release`. */
function gate() {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let reach!: () => void;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  return {
    reached,
    release,
    pass: async () => {
      reach();
      await released;
    },
  };
}

/** An evaluator whose answers to programs including `marker` wait at `held` while `holding()`. */
const holdingAt =
  (held: ReturnType<typeof gate>, marker: string, holding: () => boolean) =>
  (jq: ExpressionEvaluator): ExpressionEvaluator => ({
    evaluate: async (query, input, vars, principal) => {
      const answer = await jq.evaluate(query, input, vars, principal);
      if (holding() && query.includes(marker)) await held.pass();
      return answer;
    },
    close: () => jq.close(),
  });

type Setup = { clock: VirtualClock; memory: MemoryEventStore };

async function withClock(fn: (h: Harness, setup: Setup) => Promise<void>, options: (setup: Setup) => HarnessOptions = () => ({})): Promise<void> {
  const clock = new VirtualClock();
  const memory = new MemoryEventStore({ clock });
  const setup = { clock, memory };
  const h = harness({ clock, store: memory, ...options(setup) });
  try {
    await fn(h, setup);
  } finally {
    await h.close();
  }
}

/** Starts the instance and waits until its listen is recorded; answers its id and its timeout's instant. */
async function listening(h: Harness, doc: JsonValue, key: string): Promise<{ id: string; dueAtMs: number }> {
  const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: key, document: doc, input: {} });
  for (;;) {
    const record = await h.executor.get(instanceId);
    const timer = record?.timers[`${at}@timeout`];
    if (record?.listens[at] && timer) return { id: instanceId, dueAtMs: timer.dueAtMs };
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Waits (in real time: the virtual clock stands still) for the instance to end. */
async function ended(h: Harness, id: string) {
  const record = await h.executor.wait(id, 5_000);
  assert.notEqual(record.status, 'running', 'the instance ended');
  await assertReplayEqual(h, id);
  return record;
}

/** The instance faulted with its listen's timeout, at the listen. */
function assertTimedOut(record: WorkflowRecord): void {
  assert.equal(record.status, 'faulted');
  assert.equal(record.error?.status, 408, JSON.stringify(record.error));
  assert.equal(record.error?.instance, at);
}

test('an event at the timeout’s instant is not taken: answered no-match, nothing stored, the task faults with the timeout', () =>
  withClock(async (h, { clock }) => {
    const { id, dueAtMs } = await listening(h, document('race-same-instant'), 'same-instant');
    clock.set(dueAtMs); // The due timer has not fired yet: the event's append meets the instant first.
    const ready = event('com.example.ready', { n: 1 });
    assert.deepEqual(await h.executor.deliver(ready, null), { matched: [] }, 'the guard’s upper bound (the timeout) is exclusive');
    assert.equal((await h.executor.get(id))!.listens[at]!.events.length, 0, 'nothing stored');
    await clock.advance(0);
    const record = await ended(h, id);
    assertTimedOut(record);
    assert.deepEqual(await h.executor.deliver(ready, null), { matched: [] }, 'sent again, still taken by none');
  }));

test('the timeout committed between the event’s receipt and its append: the event is not taken and answered no-match', async () => {
  // The filter is an expression, so the intake evaluates it before its append: held there while the timeout commits.
  const matching = gate();
  let holding = true;
  await withClock(
    async (h, { clock }) => {
      const { id, dueAtMs } = await listening(h, document('race-timeout-first', '\'${ . == "com.example.ready" }\''), 'timeout-first');
      clock.set(dueAtMs - 1);
      const delivery = h.executor.deliver(event('com.example.ready', { n: 1 }), null);
      await matching.reached; // Received and being matched, before the event's append.
      await clock.advance(1); // The timeout fires and commits.
      assert.equal((await h.executor.get(id))!.tasks[at]!.state, 'faulted', 'the timeout’s append won');
      holding = false;
      matching.release();
      assert.deepEqual(await delivery, { matched: [] }, 'the event is answered as one no instance takes');
      const record = await ended(h, id);
      assertTimedOut(record);
      assert.equal(record.listens[at]!.events.length, 0, 'nothing stored');
    },
    () => ({ evaluator: holdingAt(matching, 'com.example.ready', () => holding) }),
  );
});

test('an event taken just before the timeout (answered accepted) ends the wait: the instance goes on with it, though its completion is recorded after the timeout’s instant', async () => {
  // The listen task's completion is held at the store while the clock passes the timeout and its due timer fires.
  const completing = gate();
  const holds = (transition: Transition) =>
    transition.events.some((e) => (e as { type: string; at?: string }).type === 'task-completed' && (e as { at?: string }).at === at);
  await withClock(
    async (h, { clock }) => {
      const { id, dueAtMs } = await listening(h, document('race-event-first'), 'event-first');
      clock.set(dueAtMs - 1);
      const ready = event('com.example.ready', { n: 1 });
      assert.deepEqual(await h.executor.deliver(ready, null), { matched: [id] }, 'taken before the timeout: accepted');
      await completing.reached;
      await clock.advance(1); // The timeout's instant: its timer is due while the completion is in flight.
      completing.release();
      const record = await ended(h, id);
      assert.equal(record.status, 'completed', `an accepted event was answered, then the instance faulted: ${JSON.stringify(record.error)}`);
      assert.deepEqual(record.tasks[at]!.output, [{ n: 1 }]);
      assert.deepEqual(record.output, { took: [{ n: 1 }] });
    },
    ({ memory }) => ({
      store: storeWith(memory, (real) => ({
        append: async (id: string, expected: string, transition: Transition, after?: Parameters<MemoryEventStore['append']>[3]) => {
          if (holds(transition)) await completing.pass();
          return real.append(id, expected, transition, after);
        },
      })),
    }),
  );
});

test('an event taken just before the timeout while the timer fires first: the due timer does not fault a listen whose wait its event ended', async () => {
  // The interpreter is held after the event's append (before it proposes the completion); the due timer commits first.
  const completing = gate();
  let holding = true;
  await withClock(
    async (h, { clock }) => {
      const { id, dueAtMs } = await listening(h, document('race-timer-between', 'com.example.ready', "      output: { as: '${ map(.) }' }\n"), 'timer-between');
      clock.set(dueAtMs - 1);
      const ready = event('com.example.ready', { n: 2 });
      assert.deepEqual(await h.executor.deliver(ready, null), { matched: [id] }, 'taken before the timeout: accepted');
      await completing.reached; // The interpreter evaluates the task's output.as (jq: map is no plain path).
      await clock.advance(1); // The timer fires now, before the completion is proposed.
      const between = (await h.executor.get(id))!;
      holding = false;
      completing.release(); // Before asserting: a held evaluation would keep the executor from closing.
      assert.equal(between.timers[`${at}@timeout`]!.state, 'fired', 'the timer fired');
      assert.equal(between.tasks[at]!.state, 'running', 'the timer did not fault the listen its event ended');
      const record = await ended(h, id);
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      assert.deepEqual(record.output, { took: [{ n: 2 }] });
    },
    () => ({ evaluator: holdingAt(completing, 'map(', () => holding) }),
  );
});

/** `wait` listens `to` (a YAML flow value) under a 1 s timeout, each event it takes iterated by `first` (held by the test) and `second`. */
const foreachDocument = (name: string, to: string) =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }
do:
  - wait:
      listen:
        to: ${to}
      foreach:
        do:
          - first:
              set: { n: '\${ .n + 100 }' }
          - second:
              set: { n: '\${ .n }', second: true }
      timeout: { after: { milliseconds: ${timeoutMs} } }
  - after:
      set: { took: '\${ . }' }
`);

/**
 * Runs `fn` once an instance of foreachDocument(`name`, `to`) has taken an event of `type` (n = 1)
 * just before its timeout and the clock has reached the timeout's instant while that event's
 * iteration is held at `first`; `release` lets the iteration go on (done after `fn` in any case).
 */
async function iterationHeldAtTimeout(
  name: string,
  to: string,
  type: string,
  fn: (h: Harness, id: string, release: () => void) => Promise<void>,
): Promise<void> {
  const iterating = gate();
  let holding = true;
  const release = () => {
    holding = false;
    iterating.release();
  };
  await withClock(
    async (h, { clock }) => {
      const { id, dueAtMs } = await listening(h, foreachDocument(name, to), name);
      clock.set(dueAtMs - 1);
      assert.deepEqual(await h.executor.deliver(event(type, { n: 1 }), null), { matched: [id] }, 'taken before the timeout: accepted');
      await iterating.reached; // Its iteration runs.
      await clock.advance(1); // The timeout's instant: the timer is due while the iteration runs.
      try {
        await fn(h, id, release);
      } finally {
        release();
      }
    },
    () => ({ evaluator: holdingAt(iterating, '.n + 100', () => holding) }),
  );
}

test('foreach: an event taken just before the timeout that ends the wait is iterated, and the listen completes with it however late', () =>
  iterationHeldAtTimeout('race-foreach-ended', '{ one: { with: { type: com.example.ready } } }', 'com.example.ready', async (h, id, release) => {
    release();
    const record = await ended(h, id);
    assert.equal(record.status, 'completed', `an accepted event was answered, then the instance faulted: ${JSON.stringify(record.error)}`);
    assert.equal(record.timers[`${at}@timeout`]!.state, 'fired');
    assert.deepEqual(record.tasks[at]!.output, [{ n: 101, second: true }]);
    assert.deepEqual(record.output, { took: [{ n: 101, second: true }] });
  }));

test('foreach: the timeout ends an open wait, and the task faults with it only once the events taken before it are iterated', () =>
  iterationHeldAtTimeout('race-foreach-open', "{ any: [], until: '${ false }' }", 'com.example.one', async (h, id, release) => {
    // The timeout fires while the iteration runs.
    assert.deepEqual(await h.executor.deliver(event('com.example.two', { n: 2 }), null), { matched: [] }, 'nothing is taken at the timeout');
    release();
    const record = await ended(h, id);
    assertTimedOut(record);
    assert.equal(record.listens[at]!.events.length, 1);
    const second = record.tasks[`${at}/foreach/do/1/second[0]`];
    assert.equal(second?.state, 'completed', 'the accepted event was iterated to its end');
    assert.deepEqual(second.output, { n: 101, second: true });
    assert.ok(second.endedSeq! < record.tasks[at]!.endedSeq!, 'before the listen faulted');
  }));

test('foreach: a wait the timeout ends with no event taken faults at the timeout, as without foreach', () =>
  withClock(async (h, { clock }) => {
    const { id, dueAtMs } = await listening(h, foreachDocument('race-foreach-none', "{ any: [], until: '${ false }' }"), 'foreach-none');
    clock.set(dueAtMs);
    await clock.advance(0);
    const record = await ended(h, id);
    assertTimedOut(record);
  }));

test('foreach: an open wait whose taken events were iterated before the timeout faults at the timeout, and takes nothing after it', () =>
  withClock(async (h, { clock }) => {
    const { id, dueAtMs } = await listening(h, foreachDocument('race-foreach-iterated', "{ any: [], until: '${ false }' }"), 'foreach-iterated');
    assert.deepEqual(await h.executor.deliver(event('com.example.one', { n: 1 }), null), { matched: [id] });
    while ((await h.executor.get(id))!.steps[`${at}>until[0]`] === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
    clock.set(dueAtMs);
    await clock.advance(0);
    const record = await ended(h, id);
    assertTimedOut(record);
    assert.equal(record.tasks[`${at}/foreach/do/1/second[0]`]?.state, 'completed');
    assert.deepEqual(await h.executor.deliver(event('com.example.two', { n: 2 }), null), { matched: [] });
  }));
