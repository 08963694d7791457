/**
 * The coordinator's transition-count budget and the store's count limit (runtime/log-budget.ts
 * resolveBudgets; docs/decisions/log-budgets.md "The store's transition count"): every store
 * reports how many transitions one operation's log may hold (EventStore.limits.transitionsMax),
 * and the coordinator never budgets past it, its closing reserve included. A log the coordinator
 * still had ordinary room in could otherwise be full at the store: the decision, the deadline and
 * the settlement refused, and the operation left undecided for ever. Memory and SQLite stores
 * with a lowered count, virtual clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deliverToIntake, scenario, type Scenario } from '../support/scenario.js';
import type { Transition } from '../../src/events/types.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { limits } from '../../src/contract/limits.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';

/** The fewest transitions a store must hold: an admission and the closing reserve of an operation of limits.branchesMax branches. */
const leastTransitions = 1 + limits.closingTransitionsPerBranch * limits.branchesMax + limits.closingTransitionsBase;

/** One result straight to intake, as the coordinator's subscription hands it over; answers its acknowledgements. */
const deliver = (s: Scenario, op: string, peer: string, result: object): Promise<string[]> =>
  deliverToIntake(s, 'result', op, peer, { kind: 'result', operationId: op, branchId: peer, peerId: peer, attempt: 1, fence: 1, result });

/**
 * Appends, as another writer would, receipts of an attempt the branch does not have (the fold
 * ignores them) until the operation's log holds `count` transitions: ordinary traffic that
 * changes nothing of the record, standing in for renewals, receipts and rejections.
 */
async function fillTo(store: EventStore, op: string, count: number): Promise<void> {
  const read = await store.read(op);
  assert.ok(read.kind === 'ok');
  let revision = read.revision;
  for (let n = read.transitions.length; n < count; n++) {
    const filler: Transition = {
      events: [{ type: 'dispatch-recorded', v: 1, branchId: 'alfa', attempt: 1, fence: 2, receipt: 'stored', detail: `filler ${n}` }],
      timeGuard: { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER },
      causation: { command: 'record-dispatch' },
    };
    const outcome = await store.append(op, revision, filler);
    assert.equal(outcome.kind, 'ok', JSON.stringify(outcome));
    if (outcome.kind === 'ok') revision = outcome.revision;
  }
}

const stores: Record<string, (clock: VirtualClock, transitionsMax: number) => { store: EventStore; remove(): void }> = {
  memory: (clock, transitionsMax) => ({ store: new MemoryEventStore({ clock, limits: { transitionsMax } }), remove: () => undefined }),
  sqlite: (clock, transitionsMax) => {
    const dir = mkdtempSync(join(tmpdir(), 'convoke-count-'));
    const store = new SqliteEventStore({ path: join(dir, 'ops.db'), clock, synchronous: 'normal', limits: { transitionsMax } });
    return { store, remove: () => rmSync(dir, { recursive: true, force: true }) };
  },
};

for (const [name, open] of Object.entries(stores)) {
  test(`${name}: a log the store holds fewer transitions of than the coordinator's budget still closes and settles within the store's count`, async () => {
    const clock = new VirtualClock();
    const transitionsMax = leastTransitions + 67;
    const { store, remove } = open(clock, transitionsMax);
    const s = await scenario({ peers: 3, embedded: { clock, store } });
    try {
      const { result: invoked } = await s.invoke('k');
      await s.settle();
      const op = invoked.operationId;
      // The ordinary room of a three-branch operation under the store's count: one transition left.
      const ordinaryMax = transitionsMax - 3 * limits.closingTransitionsPerBranch - limits.closingTransitionsBase;
      await fillTo(store, op, ordinaryMax - 1);
      await s.settle();

      // Oversized results are recorded rejections, ordinary transitions: more of them than the log has room for.
      const oversized = { verdict: 'approve', note: 'n'.repeat(limits.resultBytesMax) };
      for (let k = 0; k < 30; k++) assert.deepEqual(await deliver(s, op, 'alfa', oversized), ['ack']);
      for (const peer of ['alfa', 'bravo', 'charlie']) assert.deepEqual(await deliver(s, op, peer, { verdict: 'approve' }), ['ack']);
      await clock.advance(60_000);
      await s.settle();

      const record = await s.coordinator.record(op);
      assert.equal(record?.decision?.reason, 'log-budget-exhausted', 'closed when its ordinary room ran out, not left open');
      assert.notEqual(record?.settlement.status, 'pending', 'and settled');
      const read = await store.read(op);
      assert.ok(read.kind === 'ok' && read.transitions.length <= transitionsMax);
      await s.assertReplayEquals(op);
      assert.equal(s.coordinator.budgets.transitionsPerOperationMax, transitionsMax, 'the lower of the coordinator’s budget and the store’s count');
    } finally {
      await s.close();
      remove();
    }
  });
}

test('a coordinator over a store that cannot hold an admission and the closing reserve of the most branches refuses to start, naming both numbers', async () => {
  for (const transitionsMax of [2, leastTransitions - 1]) {
    const clock = new VirtualClock();
    const store = new MemoryEventStore({ clock, limits: { transitionsMax } });
    await assert.rejects(
      scenario({ peers: 3, embedded: { clock, store } }),
      (error: unknown) =>
        isAdapterError(error) &&
        error.kind === 'invalid-input' &&
        error.message.includes(`at most ${transitionsMax} transitions`) &&
        error.message.includes(`${leastTransitions}`),
    );
  }
  // The least it may hold starts.
  const clock = new VirtualClock();
  const s = await scenario({ peers: 3, embedded: { clock, store: new MemoryEventStore({ clock, limits: { transitionsMax: leastTransitions } }) } });
  assert.equal(s.coordinator.budgets.transitionsPerOperationMax, leastTransitions);
  await s.close();
});

test("a log at the store's count is closed by nothing: the store refuses the deadline's transition and nothing is written, however often it is tried", async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock, limits: { transitionsMax: leastTransitions } });
  const s = await scenario({ peers: 3, review: { leaseMs: 5000, timeoutMs: 5000 }, embedded: { clock, store } });
  try {
    const { result: invoked } = await s.invoke('k');
    await s.settle();
    const op = invoked.operationId;
    // Another writer filled the log to what the store holds: the budget lets closings through, the store does not.
    await fillTo(store, op, leastTransitions);
    await s.coordinator.record(op);
    await clock.advance(10_000);
    await s.settle();
    const read = await store.read(op);
    assert.ok(read.kind === 'ok' && read.transitions.length === leastTransitions, 'nothing past the store count');
    assert.equal((await s.coordinator.record(op))?.decision, null, 'the store refused the closing');
    const refused = (await s.coordinator.metrics.storeErrors.get()).values.reduce((sum, v) => sum + v.value, 0);
    assert.ok(refused > 0, 'told as a store failure');
  } finally {
    await s.close();
  }
});
