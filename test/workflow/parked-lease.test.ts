/**
 * Parked leases (lease.ts decidePark): an instance that only waits gives its lease up with one
 * transition instead of renewing it every third of its length, and takes it again when its timer
 * is due or an event arrives. On an injected clock a 7-day wait costs a handful of transitions,
 * not the ~180 000 renewals of a 10 s lease.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { harness, yaml } from './support.js';

const dayMs = 24 * 3600 * 1000;
const leaseMs = 10_000;

async function until(predicate: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let tries = 0; tries < 2000; tries++) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.fail(`timed out waiting for ${what}`);
}

/** The event types of the instance's log, in order. */
async function eventTypes(store: MemoryEventStore, id: string): Promise<string[]> {
  const read = await store.read(id);
  assert.equal(read.kind, 'ok');
  return read.kind === 'ok' ? read.transitions.flatMap((s) => s.transition.events.map((event) => event.type as string)) : [];
}

async function commands(store: MemoryEventStore, id: string): Promise<string[]> {
  const read = await store.read(id);
  assert.equal(read.kind, 'ok');
  return read.kind === 'ok' ? read.transitions.map((s) => s.transition.causation.command) : [];
}

test('a 7-day wait parks the lease: a bounded handful of transitions, and the timer still fires at its instant', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const h = harness({ store, clock, leaseMs, worker: 'w1' });
  try {
    const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: week, version: '1.0.0' }
do:
  - pause:
      wait: { days: 7 }
  - done:
      set: { done: true }
`);
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'week', document, input: {} });
    await until(async () => (await commands(store, instanceId)).includes('timer-set') || (await commands(store, instanceId)).length > 3, 'the wait');
    const startedMs = clock.nowMs();
    // Seven days and a minute, an hour at a time: every renewal tick of the lease would fire on the way.
    for (let elapsed = 0; elapsed < 7 * dayMs + 60_000; elapsed += 3600_000) await clock.advance(3600_000);
    await until(async () => (await h.executor.get(instanceId))?.status !== 'running', 'the end of the wait');
    const record = await h.executor.get(instanceId);
    assert.equal(record?.status, 'completed');
    assert.deepEqual(record?.output, { done: true });
    const log = await commands(store, instanceId);
    assert.ok(log.length <= 16, `the 7-day wait cost ${log.length} transitions: ${log.join(', ')}`);
    assert.equal(log.filter((c) => c === 'lease-park').length, 1, 'parked once');
    assert.ok(!log.includes('lease-renew'), 'never renewed while parked');
    const read = await store.read(instanceId);
    const fired = read.kind === 'ok' ? read.transitions.find((s) => s.transition.events.some((e) => (e.type as string) === 'timer-fired')) : undefined;
    assert.ok(fired && fired.committedAtMs >= startedMs + 7 * dayMs - leaseMs, 'the timer fired at its instant, not before');
    assert.deepEqual(await h.executor.replay(instanceId), record, 'the instance rebuilt from its log equals the live one');
  } finally {
    await h.close();
  }
});

test('a parked listen takes its lease again when an event arrives, and completes', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const h = harness({ store, clock, leaseMs, worker: 'w1' });
  try {
    const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: paid, version: '1.0.0' }
do:
  - payment:
      listen:
        to:
          one:
            with: { type: com.example.order.paid }
`);
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'paid', document, input: {} });
    // The listen's start may go with the instance's (one transition): look for the event.
    await until(async () => (await eventTypes(store, instanceId)).includes('listen-started'), 'the listen');
    for (let i = 0; i < 24; i++) await clock.advance(3600_000);
    const parked = await commands(store, instanceId);
    assert.equal(parked.filter((c) => c === 'lease-park').length, 1, `parked once in a day of waiting: ${parked.join(', ')}`);
    assert.ok(!parked.includes('lease-renew'));
    const delivery = await h.executor.deliver(
      { specversion: '1.0', id: 'e1', source: 'https://pay.example', type: 'com.example.order.paid', data: { orderId: 'o-1' } },
      null,
    );
    assert.deepEqual(delivery.matched, [instanceId]);
    await until(async () => (await h.executor.get(instanceId))?.status !== 'running', 'the end of the listen');
    const record = await h.executor.get(instanceId);
    assert.equal(record?.status, 'completed');
    assert.deepEqual(record?.output, [{ orderId: 'o-1' }]);
    const log = await commands(store, instanceId);
    assert.ok(log.indexOf('lease-acquire') > log.indexOf('lease-park'), `the lease was taken again after the event: ${log.join(', ')}`);
  } finally {
    await h.close();
  }
});
