/**
 * The jq evaluator shares its workers between principals (jq.ts): evaluations are queued per
 * principal and served in rotation, so one principal's long queue of slow programs delays
 * another's evaluation by what already runs and one turn per other principal with work, not by
 * the queue; a program past its deadline fails alone, whoever else has work queued or running;
 * and the executor queues an instance's evaluations under the instance's principal. Every
 * assertion is on the order in which evaluations answer, never on how long they take.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { isAdapterError } from '../../src/contract/errors.js';
import type { JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { defaultJqWorkers, ExpressionFailure, JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import { harness, yaml } from './support.js';

/** Slow and deterministic: builds an array of 300 000 numbers (far longer than `fast`, far shorter than the deadline). */
const slow = '[range(300000)] | length';
const fast = '. + 1';

/** Runs `fn` on a fresh evaluator, closed after (close waits for what is queued). */
async function withEvaluator(options: { workers: number; deadlineMs: number }, fn: (jq: JqWorkerEvaluator) => Promise<void>): Promise<void> {
  const jq = new JqWorkerEvaluator(options);
  try {
    // The workers' start-up (jq-wasm) is not what the order below is about: each worker is loaded first
    // (an evaluation holds its worker while it starts, so the next goes to the next worker).
    await Promise.all(Array.from({ length: options.workers }, (_, i) => jq.evaluate(fast, i, {}, `warm-${i}`)));
    await fn(jq);
  } finally {
    await jq.close();
  }
}

/** Queues `query` for `principal`; its label is pushed to `order` when it answers (either way). */
function queue(jq: JqWorkerEvaluator, order: string[], label: string, principal: string, query: string, input: JsonValue = 1): Promise<JsonValue> {
  const answer = jq.evaluate(query, input, {}, principal);
  void answer.then(
    () => order.push(label),
    () => order.push(`${label}!`),
  );
  return answer;
}

for (const workers of [1, 2]) {
  test(`${workers} worker(s): a principal's queue of slow programs delays another principal's evaluation by at most ${workers} of them`, () =>
    withEvaluator({ workers, deadlineMs: 60_000 }, async (jq) => {
      const order: string[] = [];
      const a = Array.from({ length: 6 }, (_, i) => queue(jq, order, `a${i + 1}`, 'alice', slow));
      const b = queue(jq, order, 'b', 'bob', fast);
      assert.equal(await b, 2);
      assert.deepEqual(await Promise.all(a), Array(6).fill(300000));
      await new Promise((resolve) => setImmediate(resolve));
      const before = order.indexOf('b');
      assert.ok(before <= workers, `bob's evaluation answered after ${before} of alice's (order ${order.join(' ')}); at most ${workers} ran before it`);
      // One worker answers in the order it is given work: alice's in her order of arrival, bob's at her first's end.
      if (workers === 1) assert.deepEqual(order, ['a1', 'b', 'a2', 'a3', 'a4', 'a5', 'a6']);
    }));
}

test('one worker, three principals: each principal with work takes one evaluation per turn, in arrival order within each', () =>
  withEvaluator({ workers: 1, deadlineMs: 60_000 }, async (jq) => {
    const order: string[] = [];
    const all = [
      ...Array.from({ length: 4 }, (_, i) => queue(jq, order, `a${i + 1}`, 'alice', slow)),
      ...Array.from({ length: 4 }, (_, i) => queue(jq, order, `c${i + 1}`, 'carol', slow)),
      ...Array.from({ length: 2 }, (_, i) => queue(jq, order, `b${i + 1}`, 'bob', fast)),
    ];
    await Promise.all(all);
    await new Promise((resolve) => setImmediate(resolve));
    // alice's first ran at once; then the rotation: carol, bob, alice, carol, bob, …
    assert.deepEqual(order, ['a1', 'c1', 'b1', 'a2', 'c2', 'b2', 'a3', 'c3', 'a4', 'c4']);
  }));

for (const workers of [1, 2]) {
  test(`${workers} worker(s): a program past its deadline fails alone; another principal's evaluations queued or running meanwhile answer`, () =>
    withEvaluator({ workers, deadlineMs: 2500 }, async (jq) => {
      const order: string[] = [];
      // Runs for ever in constant memory: only the deadline ends it.
      const stuck = queue(jq, order, 'a-stuck', 'alice', 'last(range(1e15))');
      const after = queue(jq, order, 'a-after', 'alice', fast, 41);
      let stuckEnded = false;
      void stuck.catch(() => (stuckEnded = true));
      // Two lanes of bob's: whenever the deadline strikes, each has one evaluation queued or running (on the other worker).
      let n = 0;
      const lane = async (): Promise<void> => {
        // Until the stuck program has failed, and once more after.
        for (let last = false; !last;) {
          last = stuckEnded;
          const i = ++n;
          assert.equal(await queue(jq, order, `b${i}`, 'bob', '. as $i | [range(20000)] | length + $i', i), 20000 + i);
        }
      };
      const lanes = Promise.all([lane(), lane()]);
      await assert.rejects(stuck, (error: unknown) => error instanceof ExpressionFailure && /deadline/.test(error.message));
      assert.equal(await after, 42, "alice's next evaluation runs on a fresh worker");
      await lanes;
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(
        order.filter((label) => label.endsWith('!')),
        ['a-stuck!'],
        'only the program past its deadline failed',
      );
      const failedAt = order.indexOf('a-stuck!');
      assert.ok(
        order.slice(failedAt + 1).filter((label) => label.startsWith('b')).length >= 2,
        `bob's evaluations outstanding at the deadline answered after it (order ${order.join(' ')})`,
      );
    }));
}

test('a program that traps jq-wasm (its stack overflowed) fails alone: the next evaluation, whoever it is for, runs on a fresh worker', () =>
  withEvaluator({ workers: 1, deadlineMs: 60_000 }, async (jq) => {
    // Nesting 100 000 arrays deep and printing them overflows jq's stack: a WebAssembly trap, not a jq error.
    const deep = 'reduce range(100000) as $i (null; [.]) | tojson | length';
    await assert.rejects(jq.evaluate(deep, null, {}, 'mallory'), ExpressionFailure);
    assert.equal(await jq.evaluate(fast, 1, {}, 'bob'), 2, "bob's evaluation after the trap");
    assert.equal(await jq.evaluate('[.[] | . * 2] | add', [1, 2, 3], {}, 'carol'), 12);
    await assert.rejects(jq.evaluate('error("mine")', null, {}, 'bob'), /mine/, "jq's own error is an answer, not a trap");
    assert.equal(await jq.evaluate(fast, 2, {}, 'bob'), 3);
  }));

test("the executor queues an instance's evaluations, and its listen's filters, under the instance's principal", async () => {
  const seen: [string, string][] = [];
  const h = harness({
    evaluator: (jq) => ({
      evaluate: (query, input, vars, principal) => (seen.push([principal, query.trim()]), jq.evaluate(query, input, vars, principal)),
      close: () => jq.close(),
    }),
  });
  try {
    const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;
    const computing = yaml(`${head('computing')}do:\n  - add:\n      set: { v: '\${ .a + 1 }' }\n`);
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'k1', document: computing, input: { a: 1 } });
    assert.deepEqual((await h.executor.wait(instanceId, 10_000)).output, { v: 2 });
    const listening = yaml(`${head('listening')}do:
  - wait:
      listen:
        to:
          one:
            with: { type: com.example.ping, data: '\${ .n > 1 }' }
`);
    const started = await h.executor.start({ principalId: 'bob', invocationKey: 'k2', document: listening, input: {} });
    while (!(await h.executor.get(started.instanceId))?.listens['/do/0/wait']) await new Promise((resolve) => setTimeout(resolve, 5));
    const ping: CloudEvent = { specversion: '1.0', id: 'p1', source: 'https://convoke.dev/test', type: 'com.example.ping', data: { n: 2 } };
    assert.deepEqual((await h.executor.deliver(ping, null)).matched, [started.instanceId]);
    assert.equal((await h.executor.wait(started.instanceId, 10_000)).status, 'completed');
    assert.deepEqual(seen, [
      ['alice', '.a + 1'],
      ['bob', '.n > 1'],
    ]);
  } finally {
    await h.close();
  }
});

test('the worker count: workflows.jqWorkers in the serve config is 1 to jqWorkersMax; the evaluator refuses any other', () => {
  const parse = (workflows: object) => parseDeploymentConfig(Buffer.from(JSON.stringify(minimalServeConfig({ workflows }))), '/tmp');
  assert.equal(parse({ jqWorkers: 2 }).workflows?.jqWorkers, 2);
  for (const bad of [0, limits.jqWorkersMax + 1, 1.5, '2'])
    assert.throws(
      () => parse({ jqWorkers: bad }),
      (error: Error) => error.name === 'AdapterError' && /workflows\/jqWorkers/.test(error.message),
      JSON.stringify(bad),
    );
  for (const bad of [0, limits.jqWorkersMax + 1, 1.5])
    assert.throws(
      () => new JqWorkerEvaluator({ workers: bad }),
      (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input',
    );
  assert.ok(defaultJqWorkers() >= 1 && defaultJqWorkers() <= 4);
});
