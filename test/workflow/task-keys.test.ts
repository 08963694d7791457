/**
 * Task execution keys (src/workflow/exec/keys.ts): two executions of the same task never share a
 * key, whatever flow directives revisit it or its enclosing tasks, and whatever tries retry it or
 * its enclosing tasks; logs written under the earlier key schemes still fold, replay and resume
 * under theirs; documents without revisits or retries keep the keys they always had. Every
 * finished instance is checked against its replay. The property over generated nestings is in
 * task-keys-property.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock } from '../../src/contract/clock.js';
import { canonicalJson, sha256Hex } from '../../src/contract/canonical.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { workflowTransitionProblem, type WorkflowEvent, type WorkflowTransition } from '../../src/workflow/exec/events.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { pointerOfKey, ranInside, splitKey } from '../../src/workflow/exec/keys.js';
import { uncertainCall } from '../../src/workflow/exec/interpreter.js';
import { foldWorkflow } from '../../src/workflow/exec/record.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';
import { assertReplayEqual, harness, headerEchoServer, runToEnd, yaml } from './support.js';

const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;

/** A fetch that counts its requests and answers each with its number. */
function countingFetch(): { fetcher: typeof fetch; calls: string[] } {
  const calls: string[] = [];
  const fetcher = (async (input: string | URL | Request) => {
    calls.push(String(input));
    return new Response(JSON.stringify({ n: calls.length }), { status: 200, headers: { 'content-type': 'application/json' } });
  }) as typeof fetch;
  return { fetcher, calls };
}

/** Runs `document` to its end in a harness of its own whose fetch counts its requests (countingFetch). */
async function runCounting(document: JsonValue, input: JsonValue, key: string): Promise<{ record: WorkflowRecord; calls: string[] }> {
  const counting = countingFetch();
  const h = harness({ fetch: counting.fetcher });
  try {
    return { record: await runToEnd(h, document, input, key), calls: counting.calls };
  } finally {
    await h.close();
  }
}

/**
 * `outer` runs twice (a switch at the top sends the flow back to it); inside each of its
 * executions `ping` runs twice (a switch inside sends the flow back to it). Four executions of
 * `ping`, four requests: none may find another's recorded answer.
 */
export const revisitedTwiceDeep = yaml(`${head('revisits')}do:
  - outer:
      do:
        - ping:
            call: http
            with: { method: get, endpoint: 'http://counter.test/ping' }
            output:
              as: '\${ $input + { calls: ($input.calls + [.n]) } }'
        - bump:
            set:
              calls: '\${ .calls }'
              inner: '\${ .inner + 1 }'
        - innerAgain:
            switch:
              - again: { when: '\${ .inner == 1 }', then: ping }
  - reset:
      set:
        calls: '\${ .calls }'
        inner: 0
      export:
        as: '\${ { rounds: (($context.rounds // 0) + 1) } }'
  - outerAgain:
      switch:
        - again: { when: '\${ $context.rounds == 1 }', then: outer }
`);

test('a task revisited inside each execution of a revisited task: every execution runs, its call made (no key shared with another execution)', async () => {
  const { record, calls } = await runCounting(revisitedTwiceDeep, { calls: [], inner: 0 }, 'revisits');
  assert.equal(record.status, 'completed', JSON.stringify(record.error));
  assert.equal(calls.length, 4, 'ping made its request in each of its four executions');
  assert.deepEqual(record.output, { calls: [1, 2, 3, 4], inner: 0 });
  const named = (name: string) => Object.values(record.tasks).filter((task) => task.name === name).length;
  assert.equal(named('outer'), 2, 'outer ran twice');
  assert.equal(named('ping'), 4, 'four executions of ping recorded, under four keys');
});

/**
 * Starts an instance as an earlier executor did: its start carries no `keys` (scheme 1, before
 * key schemes were recorded) or `keys: 2`. The start's lease has already ended, so the next
 * worker to resume takes it.
 */
async function startUnder(scheme: 1 | 2, store: MemoryEventStore, document: JsonValue, input: JsonValue, key: string): Promise<string> {
  const bundleDigest = `sha256:${sha256Hex(canonicalJson(document))}`;
  const workflowName = String(((document as JsonObject).document as JsonObject).name);
  const instanceId = workflowInstanceId('alice', bundleDigest, workflowName, key);
  const transition: WorkflowTransition = {
    events: [
      {
        type: 'workflow-started',
        v: 1,
        instanceId,
        principalId: 'alice',
        invocationKey: key,
        workflowName,
        bundleDigest,
        document,
        input,
        timeoutMs: null,
        ...(scheme === 2 ? { keys: 2 as const } : {}),
      },
      { type: 'lease-acquired', v: 1, worker: 'an-older-executor', epoch: 1, untilMs: Date.now() - 1000 },
    ],
    timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER },
    causation: { command: 'start' },
  };
  assert.equal(workflowTransitionProblem(transition), undefined);
  const created = await workflowStreams(store).create(instanceId, transition);
  assert.equal(created.kind, 'ok');
  return instanceId;
}

async function startOf(store: MemoryEventStore, instanceId: string): Promise<WorkflowTransition> {
  const read = await workflowStreams(store).read(instanceId);
  assert.ok(read.kind === 'ok');
  const first = read.transitions[0];
  assert.ok(first);
  return first.transition as WorkflowTransition;
}

/** The keys an instance recorded: its task executions, steps and timers. */
function keysOf(record: WorkflowRecord): string[] {
  return [...Object.keys(record.tasks), ...Object.keys(record.steps), ...Object.keys(record.timers)].sort();
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let tries = 0; tries < 2000; tries++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.fail(`timed out waiting for ${what}`);
}

/**
 * A log an earlier executor started (startUnder), run by two workers in turn: the first runs it
 * until the step `stopAt` is recorded and stops; the log then replays as running, with the start
 * saying what it said of its scheme; the second resumes it to the end, finding every answer the
 * first recorded (two requests in all), and the finished log replays equal. Answers the record for
 * the test's own checks of its keys.
 */
async function resumedOldLog(scheme: 1 | 2, document: JsonValue, input: JsonValue, key: string, stopAt: string): Promise<WorkflowRecord> {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const counting = countingFetch();
  const instanceId = await startUnder(scheme, store, document, input, key);
  const a = harness({ store, clock, fetch: counting.fetcher });
  try {
    await a.executor.resume();
    // The worker stops where it waits, the step before the wait answered (under its old key).
    await until('the second ping answered', async () => (await a.executor.get(instanceId))?.steps[stopAt] !== undefined);
  } finally {
    await a.close();
  }
  const stopped = await a.executor.replay(instanceId);
  assert.ok(stopped);
  if (scheme === 1) assert.equal(stopped.started.keys, undefined, 'the log says nothing of its scheme');
  else assert.equal(stopped.started.keys, scheme);
  assert.equal(stopped.status, 'running');

  const b = harness({ store, clock, fetch: counting.fetcher });
  try {
    await b.executor.resume();
    const record = await b.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(counting.calls.length, 2, 'the resumed worker found the second answer recorded: no request made again');
    await assertReplayEqual(b, instanceId);
    return record;
  } finally {
    await b.close();
  }
}

test('new instances record key scheme 3 in their start; the start event schema accepts it, 2 and none, and no other value', async () => {
  const h = harness();
  try {
    const record = await runToEnd(h, yaml(`${head('scheme')}do:\n  - one:\n      set: { a: 1 }\n`), {}, 'scheme');
    assert.equal(record.started.keys, 3);
    const start = await startOf(h.store as MemoryEventStore, record.instanceId);
    assert.equal(workflowTransitionProblem(start), undefined);
    const { keys: _keys, ...old } = start.events[0] as unknown as JsonObject;
    assert.equal(
      workflowTransitionProblem({ ...start, events: [old as unknown as WorkflowEvent, ...start.events.slice(1)] }),
      undefined,
      'a start without keys (scheme 1)',
    );
    assert.equal(
      workflowTransitionProblem({ ...start, events: [{ ...old, keys: 2 } as unknown as WorkflowEvent, ...start.events.slice(1)] }),
      undefined,
      'a start with keys 2 (scheme 2)',
    );
    for (const keys of [1, 4, '3'])
      assert.match(
        workflowTransitionProblem({ ...start, events: [{ ...old, keys } as unknown as WorkflowEvent, ...start.events.slice(1)] }) ?? '',
        /keys/,
        `an unknown scheme (${JSON.stringify(keys)}) is refused`,
      );
  } finally {
    await h.close();
  }
});

/**
 * outer runs twice; inside it, ping calls, then waits (10 ms in the first round, long in the
 * second). Under scheme 1 ping's second execution is `/do/0/outer/do/0/ping~1`, under scheme 2
 * `/do/0/outer~1/do/0/ping`.
 */
const waitsInRevisit = yaml(`${head('old-log')}do:
  - outer:
      do:
        - ping:
            call: http
            with: { method: get, endpoint: 'http://counter.test/ping' }
            output:
              as: '\${ $input + { calls: ($input.calls + [.n]) } }'
        - pause:
            wait: '\${ if (.calls | length) == 1 then { milliseconds: 10 } else { milliseconds: 400 } end }'
  - outerAgain:
      switch:
        - again: { when: '\${ (.calls | length) == 1 }', then: outer }
`);

const oldKeys = [
  '/do/0/outer',
  '/do/0/outer/do/0/ping',
  '/do/0/outer/do/0/ping~1',
  '/do/0/outer/do/1/pause',
  '/do/0/outer/do/1/pause~1',
  '/do/0/outer~1',
  '/do/1/outerAgain',
  '/do/1/outerAgain~1',
];

test('a log written before key schemes (scheme 1): it folds, replays equal, and a worker resuming it finds its facts under the old keys', async () => {
  // The first worker stops in outer's second execution, waiting, its ping answered (under its scheme 1 key).
  const record = await resumedOldLog(1, waitsInRevisit, { calls: [] }, 'old-log', '/do/0/outer/do/0/ping~1>http');
  assert.deepEqual(record.output, { calls: [1, 2] });
  assert.deepEqual(Object.keys(record.tasks).sort(), oldKeys, 'every execution under its scheme 1 key');
});

test('the same document started now (scheme 3, as under scheme 2): the revisit marker on the segment of the task revisited', async () => {
  const { record, calls } = await runCounting(waitsInRevisit, { calls: [] }, 'new-log');
  assert.equal(calls.length, 2);
  assert.deepEqual(Object.keys(record.tasks).sort(), [
    '/do/0/outer',
    '/do/0/outer/do/0/ping',
    '/do/0/outer/do/1/pause',
    '/do/0/outer~1',
    '/do/0/outer~1/do/0/ping',
    '/do/0/outer~1/do/1/pause',
    '/do/1/outerAgain',
    '/do/1/outerAgain~1',
  ]);
});

/** Documents that revisit nothing: loops, listen-free forks, retries, nested lists, switches, timeouts. */
const withoutRevisits = [
  `do:
  - loop:
      for: { in: '\${ .items }', each: item }
      do:
        - inner:
            do:
              - double:
                  set: { v: '\${ $item * 2 }' }
  - pick:
      switch:
        - big: { when: '\${ .v > 4 }', then: continue }
  - done:
      set: { v: '\${ .v }' }
`,
  `do:
  - both:
      fork:
        branches:
          - left:
              set: { side: left }
          - right:
              do:
                - deep:
                    set: { side: right }
  - after:
      set: { sides: '\${ [.[] | .side] }' }
`,
  `do:
  - attempt:
      try:
        - flaky:
            call: http
            with: { method: get, endpoint: 'http://counter.test/flaky' }
        - check:
            switch:
              - low: { when: '\${ .n < 3 }', then: fail }
              - high: { then: exit }
        - fail:
            raise:
              error: { type: 'https://example.test/low', status: 503 }
      catch:
        errors: { with: { status: 503 } }
        retry:
          delay: { milliseconds: 1 }
          limit: { attempt: { count: 5 } }
  - timed:
      timeout: { after: { seconds: 30 } }
      set: { n: '\${ .n }' }
`,
];

/**
 * The third document's retries under scheme 3: each `(n)` on the try's segment, not after the
 * key of the task the attempt ran (its retry timers, `${at}(n)>retry`, as under every scheme).
 */
const attemptOnSegment = (key: string): string => key.replace(/^(\/do\/0\/attempt)(\/try\/[^(>]*)(\([0-9]+\))/, '$1$3$2');

test('documents that revisit nothing: the same keys under the three schemes, byte for byte, but for retried attempts under scheme 3', async () => {
  for (const [index, text] of withoutRevisits.entries()) {
    const document = yaml(`${head(`plain-${index}`)}${text}`);
    const input = { items: [1, 2, 3] };
    const runs: string[][] = [];
    for (const scheme of [1, 2, 3] as const) {
      const h = harness({ fetch: countingFetch().fetcher });
      try {
        let record: WorkflowRecord;
        if (scheme !== 3) {
          const instanceId = await startUnder(scheme, h.store as MemoryEventStore, document, input, `plain-${index}`);
          await h.executor.resume();
          record = await h.executor.wait(instanceId, 10_000);
          await assertReplayEqual(h, instanceId);
        } else record = await runToEnd(h, document, input, `plain-${index}`);
        assert.equal(record.status, 'completed', JSON.stringify(record.error));
        assert.equal(record.started.keys, scheme === 1 ? undefined : scheme);
        runs.push(keysOf(record));
      } finally {
        await h.close();
      }
    }
    const [one, two, three] = runs as [string[], string[], string[]];
    assert.deepEqual(two, one, `document ${index}: the same keys under schemes 1 and 2`);
    assert.deepEqual(three, two.map(attemptOnSegment).sort(), `document ${index}: scheme 3 moves only the attempt markers`);
    if (index === 2) {
      assert.notDeepEqual(three, two, 'the retried attempts are keyed differently');
      assert.ok(three.includes('/do/0/attempt(3)/try/0/flaky') && two.includes('/do/0/attempt/try/0/flaky(3)'));
    } else assert.deepEqual(three, two);
  }
});

/**
 * A try whose first attempt fails (the first request answers n = 1) and whose second waits long
 * after its request, so a worker can be stopped there: under scheme 2 the second attempt's
 * request is `/do/0/attempt/try/0/ping(2)`, under scheme 3 `/do/0/attempt(2)/try/0/ping`.
 */
const retriesThenWaits = yaml(`${head('scheme-2-log')}do:
  - attempt:
      try:
        - ping:
            call: http
            with: { method: get, endpoint: 'http://counter.test/ping' }
        - check:
            switch:
              - first: { when: '\${ .n == 1 }', then: fail }
              - later: { then: pause }
        - fail:
            raise:
              error: { type: 'https://example.test/first', status: 503 }
        - pause:
            wait: { milliseconds: 400 }
      catch:
        errors: { with: { status: 503 } }
        retry:
          delay: { milliseconds: 1 }
          limit: { attempt: { count: 2 } }
`);

test('a log written under scheme 2: it folds, replays equal, and a worker resuming it finds its facts under the scheme 2 keys', async () => {
  // The first worker stops in the try's second attempt, waiting, its ping answered (under its scheme 2 key).
  const record = await resumedOldLog(2, retriesThenWaits, {}, 'scheme-2-log', '/do/0/attempt/try/0/ping(2)>http');
  assert.deepEqual(record.output, { n: 2 });
  assert.deepEqual(Object.keys(record.tasks).sort(), [
    '/do/0/attempt',
    '/do/0/attempt/try/0/ping',
    '/do/0/attempt/try/0/ping(2)',
    '/do/0/attempt/try/1/check',
    '/do/0/attempt/try/1/check(2)',
    '/do/0/attempt/try/2/fail',
    '/do/0/attempt/try/3/pause(2)',
  ]);
  assert.deepEqual(Object.keys(record.timers).sort(), ['/do/0/attempt(1)>retry', '/do/0/attempt/try/3/pause(2)>wait']);
});

test('which executions ran inside which: scheme 2 tells the revisits of an enclosing task apart, scheme 1 could not', () => {
  const first = { pointer: '/do/0/P', at: '/do/0/P' };
  const second = { pointer: '/do/0/P', at: '/do/0/P~1' };
  const ref = '/do/0/P/do/0/x';
  // Scheme 2: x's second visit in P's first execution, and x's first visit in P's second.
  assert.equal(ranInside(2, first, ref, '/do/0/P/do/0/x~1'), true);
  assert.equal(ranInside(2, second, ref, '/do/0/P/do/0/x~1'), false);
  assert.equal(ranInside(2, first, ref, '/do/0/P~1/do/0/x'), false);
  assert.equal(ranInside(2, second, ref, '/do/0/P~1/do/0/x'), true);
  assert.equal(ranInside(2, second, '/do/0/P', '/do/0/P~1'), true, 'an execution is inside itself');
  assert.equal(ranInside(2, { pointer: '/do/0/P', at: '/do/0/P[1]' }, ref, '/do/0/P/do/0/x[1]{0}'), true);
  assert.equal(ranInside(2, { pointer: '/do/0/P', at: '/do/0/P[1]' }, ref, '/do/0/P/do/0/x[2]{0}'), false);
  // Scheme 1: the one key /do/0/P/do/0/x~1 reads as inside both.
  assert.equal(ranInside(1, first, ref, '/do/0/P/do/0/x~1'), true);
  assert.equal(ranInside(1, second, ref, '/do/0/P/do/0/x~1'), true);
  // A `~1` inside a segment is the pointer's escape of `/` (a task named "a/b"); a `~v` after it is a revisit.
  assert.deepEqual(splitKey(2, '/do/0/a~1b/do/1/x', '/do/0/a~1b~2/do/1/x~1[3](2)'), { marked: '/do/0/a~1b~2/do/1/x~1', suffix: '[3](2)' });
  assert.deepEqual(splitKey(1, '/do/0/a~1b/do/1/x', '/do/0/a~1b/do/1/x~2~1[3]'), { marked: '/do/0/a~1b/do/1/x', suffix: '~2~1[3]' });
  assert.throws(() => splitKey(2, '/do/0/a/do/1/x', '/do/0/b/do/1/x'), /not a key of task/);
});

test('which executions ran inside which under scheme 3: a try execution holds every one of its attempts; the attempt marker sits on its segment', () => {
  const outer = { pointer: '/do/0/T', at: '/do/0/T' };
  const outerAgain = { pointer: '/do/0/T', at: '/do/0/T~1' };
  const inner = '/do/0/T/try/0/I';
  const ref = '/do/0/T/try/0/I/try/0/x';
  for (const at of ['/do/0/T/try/0/I/try/0/x', '/do/0/T(2)/try/0/I/try/0/x', '/do/0/T/try/0/I(3)/try/0/x', '/do/0/T(2)/try/0/I(2)/try/0/x'])
    assert.equal(ranInside(3, outer, ref, at), true, at);
  assert.equal(ranInside(3, outerAgain, ref, '/do/0/T(2)/try/0/I/try/0/x'), false, "outer's first execution's attempt 2 is not in its second execution");
  assert.equal(ranInside(3, outerAgain, ref, '/do/0/T~1(2)/try/0/I/try/0/x'), true);
  assert.equal(ranInside(3, { pointer: inner, at: '/do/0/T(2)/try/0/I' }, ref, '/do/0/T(2)/try/0/I(2)/try/0/x'), true);
  assert.equal(
    ranInside(3, { pointer: inner, at: '/do/0/T(2)/try/0/I' }, ref, '/do/0/T/try/0/I(2)/try/0/x'),
    false,
    "the inner try in the outer's first attempt",
  );
  assert.equal(
    ranInside(3, { pointer: inner, at: '/do/0/T/try/0/I' }, ref, '/do/0/T(2)/try/0/I/try/0/x'),
    false,
    "the inner try in the outer's second attempt",
  );
  assert.equal(ranInside(3, outer, '/do/0/T', '/do/0/T'), true, 'an execution is inside itself');
  // A task named "a(2)" is its segment, escaped or not: the marker is what follows the known segment.
  assert.deepEqual(splitKey(3, '/do/0/a(2)/try/1/x', '/do/0/a(2)~1(3)/try/1/x~2[0]{1}'), { marked: '/do/0/a(2)~1(3)/try/1/x~2', suffix: '[0]{1}' });
  assert.deepEqual(splitKey(3, '/do/0/a~1b/try/1/x', '/do/0/a~1b(2)/try/1/x'), { marked: '/do/0/a~1b(2)/try/1/x', suffix: '' });
  assert.equal(ranInside(3, { pointer: '/do/0/a(2)', at: '/do/0/a(2)' }, '/do/0/a(2)/try/1/x', '/do/0/a(2)(2)/try/1/x'), true);
});

/**
 * A `try` directly in another `try`'s list. The loopback service answers each request with its
 * number n. The inner try fails its first attempt (n = 1) and succeeds in its second (n = 2);
 * the outer then fails once (n = 2) and retries once. So `ping` runs in the inner's second attempt
 * within the outer's first, and in the inner's first attempt within the outer's second: two
 * executions that scheme 2 both keyed `…/ping(2)`, the second finding the first's answer (n = 2,
 * the outer failing again, no retry left).
 */
const nestedTries = (url: string) =>
  yaml(`${head('nested-tries')}do:
  - outer:
      try:
        - inner:
            try:
              - ping:
                  call: http
                  with: { method: get, endpoint: '${url}/ping' }
              - innerCheck:
                  switch:
                    - first: { when: '\${ .n == 1 }', then: innerFail }
                    - later: { then: exit }
              - innerFail:
                  raise:
                    error: { type: 'https://example.test/inner', status: 503 }
            catch:
              errors: { with: { status: 503 } }
              retry:
                delay: { milliseconds: 1 }
                limit: { attempt: { count: 1 } }
        - outerCheck:
            switch:
              - second: { when: '\${ .n == 2 }', then: outerFail }
              - later: { then: exit }
        - outerFail:
            raise:
              error: { type: 'https://example.test/outer', status: 500 }
      catch:
        errors: { with: { status: 500 } }
        retry:
          delay: { milliseconds: 1 }
          limit: { attempt: { count: 1 } }
`);

test('a try directly in a try: the inner attempt 2 within the outer attempt 1 and the inner attempt 1 within the outer attempt 2 both run, their calls made (scheme 3)', async () => {
  const service = await headerEchoServer(() => ({ n: service.seen.length }));
  const h = harness();
  try {
    const record = await runToEnd(h, nestedTries(service.url), {}, 'nested-tries');
    assert.equal(service.seen.length, 3, 'ping made its request in each of its three executions');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { n: 3 });
    assert.equal(record.started.keys, 3);
    const pings = Object.entries(record.tasks)
      .filter(([, task]) => task.name === 'ping')
      .map(([at]) => at)
      .sort();
    assert.deepEqual(pings, ['/do/0/outer(2)/try/0/inner/try/0/ping', '/do/0/outer/try/0/inner(2)/try/0/ping', '/do/0/outer/try/0/inner/try/0/ping']);
  } finally {
    await h.close();
    await service.close();
  }
});

/**
 * A try whose `catch.when` is evaluated after each attempt and answers differently: true for the
 * first attempt's error (503, retried), false for the second's (500, not caught). Each evaluation
 * is a step of the try's handling of that attempt (`${at}(n)>catch.when` under scheme 3): the
 * second may not find the first's result.
 */
const catchWhenPerAttempt = yaml(`${head('catch-when')}do:
  - attempt:
      try:
        - ping:
            call: http
            with: { method: get, endpoint: 'http://counter.test/ping' }
        - fail:
            raise:
              error:
                type: 'https://example.test/fail'
                status: '\${ if .n == 1 then 503 else 500 end }'
      catch:
        when: '\${ $error.status == 503 }'
        retry:
          delay: { milliseconds: 1 }
          limit: { attempt: { count: 3 } }
`);

test("a try's catch.when is evaluated for each attempt's error under its own key (scheme 3): the second attempt's 500 is not caught", async () => {
  const { record, calls } = await runCounting(catchWhenPerAttempt, {}, 'catch-when');
  assert.equal(record.status, 'faulted');
  assert.equal(record.error?.status, 500);
  assert.equal(calls.length, 2);
  assert.deepEqual(
    Object.keys(record.steps)
      .filter((key) => key.includes('catch.when'))
      .sort(),
    ['/do/0/attempt(1)>catch.when', '/do/0/attempt(2)>catch.when'],
  );
});

/** Task names holding every character a key uses: `~` (revisits, and `~0`/`~1` in a pointer), `(`, `[`, `{`, `/` and `>`. */
const oddNames = yaml(`${head('odd-names')}do:
  - 'a>b':
      call: http
      with: { method: post, endpoint: 'http://127.0.0.1:1/a' }
  - 'outer~(x)':
      for: { in: '\${ [1, 2] }' }
      do:
        - 'p[0]{1}/q':
            try:
              - 'r~1':
                  call: http
                  with: { method: post, endpoint: 'http://127.0.0.1:1/r' }
            catch: {}
`);

test('the pointer of a key, read with the document: task names holding key markers are read whole, the markers on segments skipped', () => {
  const r = '/do/1/outer~0(x)/do/0/p[0]{1}~1q/try/0/r~01';
  // Scheme 3: outer's second revisit, the try's second attempt, the loop's iteration 1.
  assert.equal(pointerOfKey(3, oddNames, '/do/1/outer~0(x)~2/do/0/p[0]{1}~1q(2)/try/0/r~01[1]>http'), r);
  assert.equal(pointerOfKey(3, oddNames, '/do/1/outer~0(x)/do/0/p[0]{1}~1q/try/0/r~01~3[0]'), r);
  assert.equal(pointerOfKey(3, oddNames, '/do/1/outer~0(x)/do/0/p[0]{1}~1q[0]'), '/do/1/outer~0(x)/do/0/p[0]{1}~1q');
  // Scheme 2: the attempt appended; scheme 1: every marker appended.
  assert.equal(pointerOfKey(2, oddNames, '/do/1/outer~0(x)~1/do/0/p[0]{1}~1q/try/0/r~01[1](2)>http'), r);
  assert.equal(pointerOfKey(1, oddNames, `${r}~1[1](2)>http`), r);
  assert.equal(pointerOfKey(3, oddNames, '/do/0/a>b>http'), '/do/0/a>b');
  assert.equal(pointerOfKey(3, oddNames, '/do/0/a>b'), '/do/0/a>b');
  // A key naming no task of the document.
  assert.equal(pointerOfKey(3, oddNames, '/do/7/a>b>http'), undefined);
  assert.equal(pointerOfKey(3, oddNames, '/do/0/c>http'), undefined);
});

test("an uncertain call's error names its task's pointer whatever the task's name holds", () => {
  const instanceId = workflowInstanceId('alice', 'sha256:' + '0'.repeat(64), 'odd-names', 'k');
  const guard = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
  const events: WorkflowEvent[][] = [
    [
      {
        type: 'workflow-started',
        v: 1,
        instanceId,
        principalId: 'alice',
        invocationKey: 'k',
        workflowName: 'odd-names',
        bundleDigest: 'sha256:' + '0'.repeat(64),
        document: oddNames,
        input: {},
        timeoutMs: null,
        keys: 3,
      },
    ],
    [
      { type: 'task-started', v: 1, at: '/do/0/a>b', ref: '/do/0/a>b', name: 'a>b', input: {} },
      { type: 'call-started', v: 1, at: '/do/0/a>b>http', epoch: 0 },
    ],
    // A call whose task's start the record does not hold: its pointer is read from the key.
    [{ type: 'call-started', v: 1, at: '/do/1/outer~0(x)~1/do/0/p[0]{1}~1q(2)/try/0/r~01[1]>http', epoch: 0 }],
  ];
  const record = foldWorkflow(
    events.map((batch, index) => ({
      revision: String(index + 1),
      committedAtMs: 1000 + index,
      transition: { events: batch, timeGuard: guard, causation: { command: 'test' } },
    })),
  );
  assert.ok(record);
  assert.equal(uncertainCall('/do/0/a>b>http', record).instance, '/do/0/a>b');
  assert.equal(uncertainCall('/do/1/outer~0(x)~1/do/0/p[0]{1}~1q(2)/try/0/r~01[1]>http', record).instance, '/do/1/outer~0(x)/do/0/p[0]{1}~1q/try/0/r~01');
  assert.equal(uncertainCall('/do/9/gone>http', record).instance, undefined);
});
