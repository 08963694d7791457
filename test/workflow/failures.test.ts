/**
 * An executor's failures (errors that stopped driving an instance: the store unavailable, a
 * refused append) are kept to the latest limits.workflowFailuresKeptMax and each is told to
 * onFailure; `convoke serve` turns them into notices, the first at once and then at most one per
 * interval, each counting the failures it stands for.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { limits } from '../../src/contract/limits.js';
import { failureNotices } from '../../src/cli/workflow-host.js';
import { harness } from './support.js';

test('a store that stays unavailable: every failure is told, the latest workflowFailuresKeptMax are kept', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  let told = 0;
  const h = harness({ clock, store, onFailure: () => void told++ });
  try {
    await store.close();
    h.executor.resumeEvery(1000);
    const rounds = limits.workflowFailuresKeptMax + 44;
    await clock.advance(rounds * 1000);
    assert.equal(told, rounds, 'each rescan that failed was told');
    assert.equal(h.executor.failures.length, limits.workflowFailuresKeptMax, 'only the latest are kept');
    assert.match(String(h.executor.failures.at(-1)), /closed/);
  } finally {
    await h.close();
  }
});

test('a listener that throws changes nothing: the failure is kept and the rescans go on', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const h = harness({
    clock,
    store,
    onFailure: () => {
      throw new Error('listener broke');
    },
  });
  try {
    await store.close();
    h.executor.resumeEvery(1000);
    await clock.advance(3000);
    assert.equal(h.executor.failures.length, 3);
  } finally {
    await h.close();
  }
});

test('failure notices: the first at once, then at most one per interval, each counting the failures since the last', () => {
  const clock = new VirtualClock();
  const written: { failures: number; error: string }[] = [];
  const notice = failureNotices((n) => written.push(n), clock, 10_000);
  notice(new Error('store unavailable'));
  assert.deepEqual(written, [{ failures: 1, error: 'store unavailable' }]);
  for (let i = 0; i < 5; i++) {
    clock.set(clock.nowMs() + 1000);
    notice(new Error(`again ${i}`));
  }
  assert.equal(written.length, 1, 'nothing more within the interval');
  clock.set(clock.nowMs() + 5000);
  notice('a refused append');
  assert.deepEqual(written.at(-1), { failures: 6, error: 'a refused append' });
  notice(new Error('right after'));
  assert.equal(written.length, 2);
});
