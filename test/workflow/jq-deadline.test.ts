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
import { readdirSync, readlinkSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { deadlineCheck, ExpressionLimitExceeded, JqWorkerEvaluator, jqWallCapFactor, stallForTests } from '../../src/workflow/exec/jq.js';
import { ownThreadId, threadCpu } from '../../src/workflow/exec/thread-cpu.js';

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

/** The descriptors this process holds open on a thread's stat file (/proc/self/fd). */
function statDescriptors(): number {
  let open = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (/\/task\/\d+\/stat$/.test(readlinkSync(`/proc/self/fd/${fd}`))) open++;
    } catch {
      // Closed while listed (the listing's own descriptor).
    }
  }
  return open;
}

test("a thread's CPU time is read through one descriptor: it grows as the thread works, and answers nothing once closed", (t) => {
  const tid = ownThreadId();
  const cpu = tid === undefined ? undefined : threadCpu(tid);
  if (cpu === undefined) return t.skip('no /proc here: the deadline is wall time');
  const before = statDescriptors();
  const startMs = cpu.readMs();
  assert.ok(startMs !== undefined);
  // Work until it reads 50 ms more (a loaded machine gives this thread less than the wall time): at most 10 s.
  const process0 = process.cpuUsage();
  const untilMs = performance.now() + 10_000;
  let spentMs = 0;
  while (spentMs < 50 && performance.now() < untilMs) spentMs = cpu.readMs()! - startMs;
  const processMs = (({ user, system }) => (user + system) / 1000)(process.cpuUsage(process0));
  assert.ok(spentMs >= 50, `read ${spentMs} ms of CPU time`);
  // Each is rounded to the tick (10 ms) its clock counts in.
  assert.ok(spentMs <= processMs + 20, `the thread's ${spentMs} ms are within the process's ${processMs} ms`);
  cpu.close();
  assert.equal(cpu.readMs(), undefined);
  assert.equal(statDescriptors(), before - 1, 'its descriptor closed');
});

test('the evaluator holds one descriptor per worker while it runs: a worker stopped at its deadline closes its own, and close closes the last', async (t) => {
  if (ownThreadId() === undefined) return t.skip('no /proc here: the deadline is wall time');
  const before = statDescriptors();
  await withHeldWorker(200, async (jq, stall) => {
    assert.equal(statDescriptors(), before + 1, 'one for the worker');
    stall.hold();
    await assert.rejects(jq.evaluate('. + 1', 1, {}, 'mallory'), (error: unknown) => error instanceof ExpressionLimitExceeded);
    stall.release();
    assert.equal(await jq.evaluate('. + 1', 2, {}, 'alice'), 3);
    assert.equal(statDescriptors(), before + 1, "the stopped worker's closed, its successor's open");
  });
  assert.equal(statDescriptors(), before, 'none once the evaluator closed');
});
