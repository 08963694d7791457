/**
 * A running instance whose drives the store keeps refusing (executor.ts driveFailed) is driven
 * again with a wait that doubles from a second to a minute, not every second for ever; a drive
 * that gets through forgets the count, so the next refusal is tried again a second later.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { disposeRetryMaxMs } from '../../src/workflow/exec/executor.js';
import { harness, yaml } from './support.js';
import { storeWith } from '../support/scenario.js';

const waits = yaml(`
document: { dsl: '1.0.3', namespace: t, name: waits, version: '1.0.0' }
do:
  - first: { set: { a: 1 } }
  - pause: { wait: { hours: 2 } }
  - second: { set: { b: 2 } }
`);

const gapsOf = (tries: readonly number[]): number[] => tries.slice(1).map((at, i) => at - tries[i]!);

test('a running instance whose drives the store keeps refusing is driven again less and less often; a drive that gets through forgets the count', async () => {
  const clock = new VirtualClock();
  const memory = new MemoryEventStore({ clock });
  // Which appends the store refuses (by the types of their events), and when it refused them.
  let refuses: (types: readonly string[]) => boolean = () => false;
  let tries: number[] = [];
  const store = storeWith(memory, (real) => ({
    append: async (...args: Parameters<typeof real.append>) => {
      if (!refuses(args[2].events.map((event) => event.type))) return real.append(...args);
      tries.push(clock.nowMs());
      return { kind: 'unavailable', description: 'the store is down' };
    },
  }));
  const h = harness({ store, clock });
  try {
    // The start is recorded (up to the wait's start); every append after it is refused for an hour.
    const startedAtMs = clock.nowMs();
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'k', document: waits, input: {} });
    refuses = () => true;
    const hour = 3_600_000;
    for (let elapsed = 0; elapsed < hour; elapsed += 1000) await clock.advance(1000);
    let gaps = gapsOf(tries);
    assert.ok(tries.length >= 10 && tries.length < 100, `${tries.length} refused drives in an hour (first gaps ${gaps.slice(0, 12).join(', ')})`);
    assert.deepEqual(gaps.slice(0, 5), [1000, 2000, 4000, 8000, 16_000], 'the wait doubles from a second');
    assert.ok(Math.max(...gaps) <= disposeRetryMaxMs, `no wait past ${disposeRetryMaxMs} ms: ${gaps.join(', ')}`);
    assert.equal(gaps.at(-1), disposeRetryMaxMs, 'it ends at the cap');

    // The store takes appends again: within the minute the instance records its wait and parks its lease.
    refuses = () => false;
    await clock.advance(disposeRetryMaxMs);
    let record = await h.executor.get(instanceId);
    assert.equal(record?.status, 'running');
    assert.equal(record?.lease, null, 'the drive got through: the instance waits with its lease parked');
    assert.ok(Object.values(record!.timers).length > 0, 'its timer is recorded');

    // Its timer fires (two hours after its start); the drive that follows cannot take the lease: tried again a second later, not a minute.
    tries = [];
    refuses = (types) => types.includes('lease-acquired');
    while (clock.nowMs() < startedAtMs + 2 * hour + 2 * 60_000) await clock.advance(1000);
    gaps = gapsOf(tries);
    assert.ok(tries.length >= 5, `${tries.length} refused drives after the timer`);
    assert.deepEqual(gaps.slice(0, 4), [1000, 2000, 4000, 8000], 'the count started again from a second');

    refuses = () => false;
    await clock.advance(disposeRetryMaxMs);
    record = await h.executor.get(instanceId);
    assert.equal(record?.status, 'completed');
  } finally {
    await h.close();
    await memory.close();
  }
});
