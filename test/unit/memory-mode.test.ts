/**
 * Spec: "Memory mode keeps the same identities/completion rules but has one attempt and no offline
 * promise." Memory mode is a memory store, or a transport that is neither durable nor in-process
 * (core NATS); the budget is frozen in the manifest at admission (src/runtime/mode.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, types, type Scenario } from '../support/scenario.js';
import { isMemoryMode } from '../../src/runtime/mode.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { MemoryBus } from '../../src/adapters/transport/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import type { DomainEvent } from '../../src/events/types.js';

// One peer that takes the request and never answers or renews: its lease ends at +1000 ms.
const stalling = { completion: { mode: 'first-success' }, leaseMs: 1000, renewIntervalMs: 400, retryBackoffMs: 100, attempts: 3, timeoutMs: 10_000 };

async function stalledOwner(store: 'memory' | 'sqlite'): Promise<{ s: Scenario; op: string; events: DomainEvent[] }> {
  const s = await scenario({ store, peers: 1, review: stalling });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1100); // the lease expires at +1000; a retry would be due at +1100
  await s.clock.advance(100);
  return { s, op: result.operationId, events: await s.events(result.operationId) };
}

test('memory mode has one attempt: on an embedded memory store an expired lease ends the branch, and no attempt 2 starts', async () => {
  const { s, op, events } = await stalledOwner('memory');
  const admitted = events.find((e) => e.type === 'operation-admitted');
  assert.equal(admitted?.type === 'operation-admitted' && admitted.manifest.attemptsMax, 1, 'the contract asks for 3; memory mode admits 1');
  const ended = events.filter((e) => e.type === 'claim-ended');
  assert.deepEqual(
    ended.map((e) => e.type === 'claim-ended' && [e.cause, e.retryAtMs]),
    [['expired', null]],
  );
  assert.ok(!types(events).includes('branch-reassigned'), types(events).join(' '));
  assert.equal(s.bus.stats.published, 1, 'one request: no attempt 2 is sent');
  const view = await s.get(op);
  assert.deepEqual(
    view.branches.map((b) => [b.attempt, b.fence, b.status]),
    [[1, 1, 'failure']],
  );
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['failed', 'impossible']);
  await s.assertReplayEquals(op);
});

test('the same stalled owner on an embedded SQLite store (durable) retries: attempt 2, fence 2 after the backoff', async () => {
  const { s, op, events } = await stalledOwner('sqlite');
  const admitted = events.find((e) => e.type === 'operation-admitted');
  assert.equal(admitted?.type === 'operation-admitted' && admitted.manifest.attemptsMax, 3);
  assert.equal(s.bus.stats.published, 2, 'attempt 2 was sent');
  const view = await s.get(op);
  assert.deepEqual(
    view.branches.map((b) => [b.attempt, b.fence]),
    [[2, 2]],
  );
  assert.equal(view.decision, null, 'attempt 2 is still open');
  await s.assertReplayEquals(op);
});

test('memory mode is a store that dies with the process, or a transport that is neither durable nor in-process (core NATS)', () => {
  const clock = new VirtualClock();
  const bus = new MemoryBus().connect('c');
  const memoryStore = new MemoryEventStore({ clock });
  const sqliteInMemory = new SqliteEventStore({ path: ':memory:', clock });
  const durableStore = { capabilities: { durable: true, guard: 'on-fold' as const } };
  const coreNats = { capabilities: { durable: false, resultFencing: true } };
  const jetStream = { capabilities: { durable: true, resultFencing: true } };
  try {
    assert.equal(isMemoryMode(memoryStore, bus), true, 'memory store, in-process bus');
    assert.equal(isMemoryMode(sqliteInMemory, bus), true, "a SQLite ':memory:' database is not durable either");
    assert.equal(isMemoryMode(durableStore, bus), false, 'a durable store with the in-process bus (embedded SQLite)');
    assert.equal(isMemoryMode(durableStore, coreNats), true, 'core NATS loses what is in flight and serves no offline peer');
    assert.equal(isMemoryMode(memoryStore, jetStream), true, 'durable delivery does not make a memory store durable');
    assert.equal(isMemoryMode(durableStore, jetStream), false);
  } finally {
    void sqliteInMemory.close();
  }
});
