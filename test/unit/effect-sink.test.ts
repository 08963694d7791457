/** The in-process fenced effect sink: per-key serialization, fences and repeats under concurrency. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEffectSink } from '../../src/peer/effect-sink.js';
import { AdapterError } from '../../src/contract/errors.js';

const key = { operationId: 'op1', branchId: 'alfa' };
const deferred = <T>() => {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
};

test('concurrent commits of one key at one fence apply the effect once; the later one gets the stored value', async () => {
  const sink = new MemoryEffectSink();
  const gate = deferred<string>();
  let applied = 0;
  const first = sink.commit(key, 1, 1, async () => (applied++, gate.promise));
  const second = sink.commit(key, 1, 1, () => (applied++, 'second'));
  gate.resolve('first');
  assert.deepEqual(await first, { value: 'first', repeated: false });
  assert.deepEqual(await second, { value: 'first', repeated: true });
  assert.equal(applied, 1);
  assert.equal(sink.applied().length, 1);
});

test('a newer fence waiting behind an older in-flight commit applies after it; an older fence then conflicts', async () => {
  const sink = new MemoryEffectSink();
  const gate = deferred<string>();
  const older = sink.commit(key, 1, 1, () => gate.promise);
  const newer = sink.commit(key, 2, 2, () => 'newer');
  const stale = sink.commit(key, 1, 1, () => 'stale');
  gate.resolve('older');
  assert.deepEqual(await older, { value: 'older', repeated: false });
  assert.deepEqual(await newer, { value: 'newer', repeated: false });
  await assert.rejects(stale, (e: unknown) => e instanceof AdapterError && e.kind === 'conflict');
  assert.deepEqual(sink.applied().map((r) => [r.fence, r.value]), [[1, 'older'], [2, 'newer']]);
});

test('an effect that throws commits nothing and does not block the next commit of its key', async () => {
  const sink = new MemoryEffectSink();
  const failing = sink.commit(key, 1, 1, async () => {
    throw new Error('effect failed');
  });
  const next = sink.commit(key, 1, 1, () => 'retried');
  await assert.rejects(failing, /effect failed/);
  assert.deepEqual(await next, { value: 'retried', repeated: false });
  assert.deepEqual(await sink.commit(key, 1, 1, () => 'again'), { value: 'retried', repeated: true });
});

test('different keys do not wait for each other', async () => {
  const sink = new MemoryEffectSink();
  const gate = deferred<string>();
  const slow = sink.commit(key, 1, 1, () => gate.promise);
  assert.deepEqual(await sink.commit({ operationId: 'op1', branchId: 'bravo' }, 1, 1, () => 'fast'), { value: 'fast', repeated: false });
  gate.resolve('slow');
  assert.deepEqual(await slow, { value: 'slow', repeated: false });
});
