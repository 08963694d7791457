/**
 * Task execution keys (src/workflow/exec/keys.ts): two executions of the same task never share a
 * key, whatever flow directives revisit it or its enclosing tasks; logs written under the first
 * key scheme still fold, replay and resume under it; documents without revisits keep the keys
 * they always had. Every finished instance is checked against its replay.
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
import { ranInside, splitKey } from '../../src/workflow/exec/keys.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';
import { assertReplayEqual, harness, runToEnd, yaml } from './support.js';

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
  const counting = countingFetch();
  const h = harness({ fetch: counting.fetcher });
  try {
    const record = await runToEnd(h, revisitedTwiceDeep, { calls: [], inner: 0 }, 'revisits');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(counting.calls.length, 4, 'ping made its request in each of its four executions');
    assert.deepEqual(record.output, { calls: [1, 2, 3, 4], inner: 0 });
    const named = (name: string) => Object.values(record.tasks).filter((task) => task.name === name).length;
    assert.equal(named('outer'), 2, 'outer ran twice');
    assert.equal(named('ping'), 4, 'four executions of ping recorded, under four keys');
  } finally {
    await h.close();
  }
});

/**
 * Starts an instance as an executor did before key schemes were recorded: its start carries no
 * `keys` (scheme 1). The start's lease has already ended, so the next worker to resume takes it.
 */
async function startBeforeSchemes(store: MemoryEventStore, document: JsonValue, input: JsonValue, key: string): Promise<string> {
  const bundleDigest = `sha256:${sha256Hex(canonicalJson(document))}`;
  const workflowName = String(((document as JsonObject).document as JsonObject).name);
  const instanceId = workflowInstanceId('alice', bundleDigest, workflowName, key);
  const transition: WorkflowTransition = {
    events: [
      { type: 'workflow-started', v: 1, instanceId, principalId: 'alice', invocationKey: key, workflowName, bundleDigest, document, input, timeoutMs: null },
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

test('new instances record key scheme 2 in their start; the start event schema accepts it, and no other value', async () => {
  const h = harness();
  try {
    const record = await runToEnd(h, yaml(`${head('scheme')}do:\n  - one:\n      set: { a: 1 }\n`), {}, 'scheme');
    assert.equal(record.started.keys, 2);
    const start = await startOf(h.store as MemoryEventStore, record.instanceId);
    assert.equal(workflowTransitionProblem(start), undefined);
    const { keys: _keys, ...old } = start.events[0] as unknown as JsonObject;
    assert.equal(
      workflowTransitionProblem({ ...start, events: [old as unknown as WorkflowEvent, ...start.events.slice(1)] }),
      undefined,
      'a start without keys (scheme 1)',
    );
    assert.match(
      workflowTransitionProblem({ ...start, events: [{ ...old, keys: 3 } as unknown as WorkflowEvent, ...start.events.slice(1)] }) ?? '',
      /keys/,
      'an unknown scheme is refused',
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
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const counting = countingFetch();
  const instanceId = await startBeforeSchemes(store, waitsInRevisit, { calls: [] }, 'old-log');
  const a = harness({ store, clock, fetch: counting.fetcher });
  try {
    await a.executor.resume();
    // The worker stops in outer's second execution, waiting, its ping answered (under its scheme 1 key).
    await until('the second ping answered', async () => (await a.executor.get(instanceId))?.steps['/do/0/outer/do/0/ping~1>http'] !== undefined);
  } finally {
    await a.close();
  }
  const stopped = await a.executor.replay(instanceId);
  assert.ok(stopped);
  assert.equal(stopped.started.keys, undefined, 'the log says nothing of its scheme');
  assert.equal(stopped.status, 'running');

  const b = harness({ store, clock, fetch: counting.fetcher });
  try {
    await b.executor.resume();
    const record = await b.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(counting.calls.length, 2, 'the resumed worker found the second answer recorded: no request made again');
    assert.deepEqual(record.output, { calls: [1, 2] });
    assert.deepEqual(Object.keys(record.tasks).sort(), oldKeys, 'every execution under its scheme 1 key');
    await assertReplayEqual(b, instanceId);
  } finally {
    await b.close();
  }
});

test('the same document started now (scheme 2): the revisit marker on the segment of the task revisited', async () => {
  const counting = countingFetch();
  const h = harness({ fetch: counting.fetcher });
  try {
    const record = await runToEnd(h, waitsInRevisit, { calls: [] }, 'new-log');
    assert.equal(counting.calls.length, 2);
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
  } finally {
    await h.close();
  }
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

test('documents that revisit nothing: the same keys under both schemes, byte for byte', async () => {
  for (const [index, text] of withoutRevisits.entries()) {
    const document = yaml(`${head(`plain-${index}`)}${text}`);
    const input = { items: [1, 2, 3] };
    const runs: string[][] = [];
    for (const old of [true, false]) {
      const h = harness({ fetch: countingFetch().fetcher });
      try {
        let record: WorkflowRecord;
        if (old) {
          const instanceId = await startBeforeSchemes(h.store as MemoryEventStore, document, input, `plain-${index}`);
          await h.executor.resume();
          record = await h.executor.wait(instanceId, 10_000);
          await assertReplayEqual(h, instanceId);
        } else record = await runToEnd(h, document, input, `plain-${index}`);
        assert.equal(record.status, 'completed', JSON.stringify(record.error));
        assert.equal(record.started.keys, old ? undefined : 2);
        runs.push(keysOf(record));
      } finally {
        await h.close();
      }
    }
    assert.deepEqual(runs[1], runs[0], `document ${index}: the same keys`);
  }
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
