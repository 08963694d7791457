/**
 * The jq evaluator's bounds beside its deadline (jq.ts, jq-bounded.ts): jq's WebAssembly memory
 * (memoryMb), each worker's V8 heap (heapMb), the JSON of one result (resultBytesMax) and the
 * description of a jq error. A program that runs into one fails with ExpressionLimitExceeded
 * naming it, its worker is replaced where it is spent, and the evaluator answers the next
 * program. The bounds are small here so each is reached in well under a second.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { limits } from '../../src/contract/limits.js';
import {
  ExpressionFailure,
  ExpressionLimitExceeded,
  JqWorkerEvaluator,
  jqWallCapFactor,
  type JqLimit,
  type JqWorkerOptions,
} from '../../src/workflow/exec/jq.js';
import { harness, runToEnd, yaml } from './support.js';

/** Runs `fn` on a fresh evaluator, closed after whatever `fn` does. */
async function withEvaluator(options: JqWorkerOptions, fn: (jq: JqWorkerEvaluator) => Promise<void>): Promise<void> {
  const jq = new JqWorkerEvaluator(options);
  try {
    await fn(jq);
  } finally {
    await jq.close();
  }
}

/** Whether `error` is the limit error naming `limit`, its value as the message says it (`said`). */
const exceeded = (limit: JqLimit, said: RegExp) => (error: unknown) =>
  error instanceof ExpressionLimitExceeded && error.limit === limit && said.test(error.message);

test("a memory bomb fails on jq's memory bound long before the deadline; the evaluator answers the next program", () =>
  withEvaluator({ workers: 1, deadlineMs: 30_000, memoryMb: 16 }, async (jq) => {
    assert.equal(await jq.evaluate('. + 1', 1, {}, 'alice'), 2);
    for (const bomb of ['[range(1e8)]', 'reduce range(40) as $i ("x"; . + .)', '[limit(100000000; repeat("xxxxxxxxxx"))] | add']) {
      const startedMs = Date.now();
      await assert.rejects(jq.evaluate(bomb, null, {}, 'mallory'), exceeded('memoryMb', /needed more than jq's 16 MiB of memory \(memoryMb\)/), bomb);
      const tookMs = Date.now() - startedMs;
      assert.ok(tookMs < 10_000, `${bomb} failed after ${tookMs} ms: by its memory, not by the 30 s deadline`);
      assert.equal(await jq.evaluate('[.[] | . * 2] | add', [1, 2, 3], {}, 'bob'), 12, `the next program after ${bomb}, on a fresh worker`);
    }
    // Within the bound, a program that needs memory still runs.
    assert.equal(await jq.evaluate('[range(100000)] | length', null, {}, 'bob'), 100000);
  }));

test('a memory bomb on one worker fails alone: an evaluation running on another worker answers', () =>
  withEvaluator({ workers: 2, deadlineMs: 30_000, memoryMb: 16 }, async (jq) => {
    await Promise.all([jq.evaluate('. + 1', 1, {}, 'warm-1'), jq.evaluate('. + 1', 2, {}, 'warm-2')]);
    const [bomb, other] = await Promise.allSettled([
      jq.evaluate('[range(1e8)]', null, {}, 'mallory'),
      jq.evaluate('[range(200000)] | length', null, {}, 'alice'),
    ]);
    assert.ok(bomb.status === 'rejected' && exceeded('memoryMb', /memoryMb/)(bomb.reason), 'the bomb fails on the memory bound');
    assert.deepEqual(other, { status: 'fulfilled', value: 200000 });
  }));

test('a worker out of its V8 heap dies alone: its evaluation fails naming heapMb, the runtime stays up and the next program runs', () =>
  withEvaluator({ workers: 1, deadlineMs: 30_000, heapMb: 16 }, async (jq) => {
    assert.equal(await jq.evaluate('. + 1', 1, {}, 'alice'), 2);
    // No jq program fills the heap (its values live in jq's own memory); variables larger than it do.
    const vars = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`v${i}`, 'x'.repeat(1_000_000) + i]));
    await assert.rejects(jq.evaluate('$v0 | length', null, vars, 'mallory'), exceeded('heapMb', /its worker's 16 MiB heap \(heapMb\)/));
    assert.equal(await jq.evaluate('. + 1', 2, {}, 'alice'), 3, 'a fresh worker answers');
  }));

test('a result larger than resultBytesMax is refused; only the first output is bounded, later ones are dropped unread', () =>
  withEvaluator({ workers: 1, deadlineMs: 30_000, resultBytesMax: 100 }, async (jq) => {
    const oversized = exceeded('resultBytesMax', /larger than 100 bytes of JSON \(resultBytesMax\)/);
    await assert.rejects(jq.evaluate('"x" * 1000', null, {}, 'mallory'), oversized);
    await assert.rejects(jq.evaluate('[range(1000)]', null, {}, 'mallory'), oversized);
    await assert.rejects(jq.evaluate('("x" * 1000), 1', null, {}, 'mallory'), oversized);
    // 98 characters and its quotes: exactly the bound.
    assert.equal(await jq.evaluate('"x" * 98', null, {}, 'alice'), 'x'.repeat(98));
    await assert.rejects(jq.evaluate('"x" * 99', null, {}, 'mallory'), oversized);
    assert.equal(await jq.evaluate('1, ("x" * 1000), [range(100000)]', null, {}, 'alice'), 1);
    assert.equal(await jq.evaluate('empty', null, {}, 'alice'), null);
    // jq's error after the first output still fails the evaluation, as before.
    await assert.rejects(jq.evaluate('1, error("late")', null, {}, 'alice'), /late/);
  }));

test("resultBytesMax bounds the result as it is recorded, not jq's longer text of it", () =>
  withEvaluator({ workers: 1, deadlineMs: 30_000, resultBytesMax: 100 }, async (jq) => {
    const oversized = exceeded('resultBytesMax', /larger than 100 bytes of JSON \(resultBytesMax\)/);
    // 98 DEL characters: 100 bytes recorded, 590 as jq prints them (each as \u007f).
    assert.equal(await jq.evaluate('[range(98) | 127] | implode', null, {}, 'alice'), '\x7f'.repeat(98));
    await assert.rejects(jq.evaluate('[range(99) | 127] | implode', null, {}, 'mallory'), oversized);
    // A number jq prints as its literal (150 bytes) is recorded as its value (1 byte).
    assert.equal(await jq.evaluate(`1.${'0'.repeat(148)}`, null, {}, 'alice'), 1);
    assert.deepEqual(await jq.evaluate('.', { text: '\x7f'.repeat(90) }, {}, 'alice'), { text: '\x7f'.repeat(90) });
  }));

test("a jq error's description is kept to expressionErrorBytesMax, however long the message jq prints", () =>
  withEvaluator({ workers: 1, deadlineMs: 30_000 }, async (jq) => {
    const failure = await jq.evaluate('error("x" * 1000000)', null, {}, 'mallory').then(
      () => assert.fail('error() answered'),
      (error: unknown) => error,
    );
    assert.ok(failure instanceof ExpressionFailure && !(failure instanceof ExpressionLimitExceeded), 'a jq error, not a bound');
    assert.ok(failure.message.length <= limits.expressionErrorBytesMax + 16, `a ${failure.message.length}-character description`);
    assert.match(failure.message, /^jq: error \(at [^)]*\): x{100}/);
    // `debug` prints a message per output: none is kept, and the result is answered.
    assert.equal(await jq.evaluate('[range(100000) | debug] | length', null, {}, 'alice'), 100000);
  }));

test('the deadline is a named bound as well: CPU time', () =>
  // The deadline is the worker's CPU time (jq-deadline.test.ts: not the wall time of a loaded machine).
  withEvaluator({ workers: 1, deadlineMs: 2000 }, async (jq) => {
    assert.equal(await jq.evaluate('. + 1', 1, {}, 'alice'), 2);
    await assert.rejects(
      jq.evaluate('last(range(1e15))', null, {}, 'mallory'),
      exceeded('deadlineMs', /ran past its 2000 ms CPU-time deadline \(deadlineMs\)/),
    );
  }));

test('the bounds are checked when the evaluator is made', () => {
  const bad: JqWorkerOptions[] = [
    { heapMb: limits.jqHeapMbMin - 1 },
    { heapMb: limits.jqHeapMbMax + 1 },
    { heapMb: 32.5 },
    { memoryMb: limits.jqMemoryMbMin - 1 },
    { memoryMb: limits.jqMemoryMbMax + 1 },
    { resultBytesMax: 0 },
    { resultBytesMax: limits.expressionResultBytesMax + 1 },
    // A deadline timers cannot keep: none, negative, fractional, or past what setTimeout takes as its wall cap (it fires at once past 2^31 - 1 ms).
    { deadlineMs: 0 },
    { deadlineMs: -1 },
    { deadlineMs: 2.5 },
    { deadlineMs: Number.NaN },
    { deadlineMs: Math.ceil((2 ** 31 - 1) / jqWallCapFactor) + 1 },
  ];
  for (const options of bad) {
    const [name] = Object.keys(options);
    assert.throws(
      () => new JqWorkerEvaluator(options),
      (error: Error) => error.name === 'AdapterError' && new RegExp(`jq ${name}: .* is not a whole number from`).test(error.message),
      JSON.stringify(options),
    );
  }
});

test('in a workflow, a memory bomb is an expression error (400) naming the bound; the next instance runs', async () => {
  const h = harness({ jq: { workers: 1, memoryMb: 16 } });
  try {
    const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;
    const bomb = await runToEnd(h, yaml(`${head('bomb')}do:\n  - grow:\n      set: '\${ [range(1e8)] | length }'\n`), {}, 'bomb');
    assert.equal(bomb.status, 'faulted');
    assert.equal(bomb.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/expression');
    assert.equal(bomb.error?.status, 400);
    assert.equal(bomb.error?.instance, '/do/0/grow');
    assert.match(bomb.error?.detail ?? '', /needed more than jq's 16 MiB of memory \(memoryMb\)/);
    const next = await runToEnd(h, yaml(`${head('next')}do:\n  - add:\n      set: '\${ .a + 1 }'\n`), { a: 1 }, 'next');
    assert.equal(next.status, 'completed');
    assert.equal(next.output, 2);
  } finally {
    await h.close();
  }
});
