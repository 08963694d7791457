/**
 * The jq evaluator's deadline bounds the CPU time its worker thread spends on an evaluation, not
 * the wall time since it was sent (jq.ts): an evaluation's result is recorded in the instance's
 * log, so a fast program must not fail only because a loaded machine did not schedule its worker.
 * A worker is held here without using CPU (stallForTests: it waits on a SharedArrayBuffer before
 * evaluating), as the system holds one it does not schedule. The wall-time cap still stops a
 * worker held past it; a program that keeps its worker busy is stopped at its deadline
 * (jq-limits.test.ts, jq-fairness.test.ts).
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { deadlineCheck, ExpressionLimitExceeded, JqWorkerEvaluator, jqWallCapFactor, stallForTests } from '../../src/workflow/exec/jq.js';

/** A gate the evaluator's workers wait on before each evaluation while it is held. */
function gate() {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  return {
    cell,
    hold: () => Atomics.store(cell, 0, 1),
    release: () => (Atomics.store(cell, 0, 0), Atomics.notify(cell, 0)),
  };
}

/** Runs `fn` on a fresh one-worker evaluator whose worker has loaded jq, the gate released and the evaluator closed after. */
async function withHeldWorker(deadlineMs: number, fn: (jq: JqWorkerEvaluator, stall: ReturnType<typeof gate>) => Promise<void>): Promise<void> {
  const stall = gate();
  const jq = new JqWorkerEvaluator({ workers: 1, deadlineMs, [stallForTests]: stall.cell });
  try {
    // Start-up is not what is measured: the worker loads jq (and answers once) first.
    assert.equal(await jq.evaluate('. + 1', 1, {}, 'alice'), 2);
    await fn(jq, stall);
  } finally {
    stall.release();
    await jq.close();
  }
}

test('a worker held without using CPU for longer than the deadline still answers: the deadline is CPU time', () =>
  withHeldWorker(400, async (jq, stall) => {
    stall.hold();
    const startedMs = Date.now();
    // Settled as it answers, so a failure during the hold is this test's, not an unhandled rejection.
    const answer = jq.evaluate('. + 1', 41, {}, 'alice').then(
      (value) => ({ value }),
      (error: unknown) => ({ error: String(error) }),
    );
    // Three deadlines of wall time, well within the wall cap (ten).
    await sleep(1200);
    stall.release();
    assert.deepEqual(await answer, { value: 42 });
    const tookMs = Date.now() - startedMs;
    assert.ok(tookMs >= 1200, `answered after ${tookMs} ms: the worker was held`);
    assert.equal(await jq.evaluate('[range(1000)] | add', null, {}, 'alice'), 499500, 'the same worker answers the next program');
  }));

test('a worker held past the wall-time cap is stopped, its evaluation fails naming the deadline; the next program runs on a fresh worker', () =>
  withHeldWorker(200, async (jq, stall) => {
    stall.hold();
    const startedMs = Date.now();
    const capMs = jqWallCapFactor * 200;
    const failure = await jq.evaluate('. + 1', 1, {}, 'mallory').then(
      () => assert.fail('a held worker answered'),
      (error: unknown) => error,
    );
    const tookMs = Date.now() - startedMs;
    assert.ok(failure instanceof ExpressionLimitExceeded && failure.limit === 'deadlineMs', String(failure));
    assert.match(failure.message, new RegExp(`not answered within ${capMs} ms of wall time \\(${jqWallCapFactor} × its 200 ms CPU-time deadline\\)`));
    assert.ok(tookMs >= capMs, `failed after ${tookMs} ms: not before the wall-time cap of ${capMs} ms`);
    stall.release();
    assert.equal(await jq.evaluate('. + 1', 2, {}, 'alice'), 3);
  }));

test("the deadline's timer stops an evaluation at its CPU time or the wall cap, else looks again when either could be reached", () => {
  const capMs = jqWallCapFactor * 1000;
  assert.deepEqual(deadlineCheck(1000, 1000, 1000), { stop: 'cpu' });
  assert.deepEqual(deadlineCheck(1000, 1010, 5000), { stop: 'cpu' });
  assert.deepEqual(deadlineCheck(1000, 0, 1000), { waitMs: 1000 }, 'held without CPU: a whole deadline more');
  assert.deepEqual(deadlineCheck(1000, 600, 1000), { waitMs: 400 }, 'the CPU time left');
  assert.deepEqual(deadlineCheck(1000, 100, capMs - 300), { waitMs: 300 }, 'the wall time left, when less');
  assert.deepEqual(deadlineCheck(1000, 999, 1000), { waitMs: 10 }, 'never sooner than a clock tick');
  assert.deepEqual(deadlineCheck(1000, 0, capMs), { stop: 'wall-cap' });
  // Where the worker's CPU time cannot be read (not Linux), the deadline is wall time: the first timer stops it.
  assert.deepEqual(deadlineCheck(1000, undefined, 1000), { stop: 'wall' });
});
