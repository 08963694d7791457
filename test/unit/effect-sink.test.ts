/** The in-process fenced effect sink: per-key serialization, fences and repeats under concurrency. */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openEffectSink, readPeerConfig } from '../../src/cli/commands/peer.js';
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
  assert.deepEqual(
    sink.applied().map((r) => [r.fence, r.value]),
    [
      [1, 'older'],
      [2, 'newer'],
    ],
  );
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

test('a peer config bounds the memory sink with effectSinkKeys: the oldest key is forgotten beyond it', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-peer-config-'));
  try {
    const write = async (extra: Record<string, unknown>) => {
      const file = join(dir, `peer-${Object.keys(extra).join('-') || 'plain'}.json`);
      const config = {
        peerId: 'alfa',
        namespace: 'demo.v1.lab',
        nats: { servers: 'nats://127.0.0.1:4222', passwordEnv: 'PW' },
        durable: true,
        interactions: { review: { result: { verdict: 'approve' } } },
        ...extra,
      };
      await writeFile(file, JSON.stringify(config));
      return file;
    };
    const sink = openEffectSink(await readPeerConfig(await write({ effectSink: 'memory:', effectSinkKeys: 2 })));
    let applied = 0;
    const commit = (operationId: string) => sink.commit({ operationId, branchId: 'alfa' }, 1, 1, () => ++applied);
    await commit('op1');
    await commit('op2');
    assert.deepEqual(await commit('op1'), { value: 1, repeated: true }, 'within the bound the key is remembered');
    await commit('op3'); // three keys over a bound of two: op1, committed first, is forgotten
    assert.deepEqual(await commit('op1'), { value: 4, repeated: false });
    await assert.rejects(
      readPeerConfig(await write({ effectSink: 'sqlite:x.db', effectSinkKeys: 2 })),
      (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input' && /effectSinkKeys/.test(e.message),
    );
    await assert.rejects(readPeerConfig(await write({ effectSinkKeys: 0 })), (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input');
    await assert.rejects(
      readPeerConfig(await write({ effectSink: 'memory:', effectSinkWaitMs: 1000 })),
      (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input' && /effectSinkWaitMs/.test(e.message),
    );
    assert.equal((await readPeerConfig(await write({ effectSink: 'sqlite:x.db', effectSinkWaitMs: 1000 }))).effectSinkWaitMs, 1000);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
