/**
 * Coordinators that share one store (several `convoke serve` processes over one JetStream, SQLite
 * or EventStoreDB store) each hold some operations in memory. What one commits must reach the
 * other's waiters, reads and timers: each follows the store's revision notices (EventStore.watch)
 * and reads again an operation it holds when another client appended to it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { fold } from '../../src/projections/record.js';
import { logSizeOf } from '../../src/runtime/log-budget.js';
import { onPeerMessage } from '../../src/runtime/intake.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { encodeWire, type ResultMessage } from '../../src/events/wire.js';
import type { InboundMessage } from '../../src/adapters/transport/types.js';

const review = { completion: { mode: 'quorum', count: 2 }, cancellation: 'caller', siblings: 'detach', timeoutMs: 60_000 };
const caller = { principalId: 'p', senderPeerId: null };

async function coordinatorOn(clock: VirtualClock, store: MemoryEventStore) {
  return createEmbedded({ clock, store, bundle: reviewBundle(review), groups: { reviewers: peerIds(3) }, resultBatchMs: 0 });
}

/** The promise's value, or 'pending' if it has not settled within `ms` of real time. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'pending'> {
  return Promise.race([promise, new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms))]);
}

test('a decision committed by one coordinator answers the waiters and reads of another that holds the operation', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const a = await coordinatorOn(clock, store);
  const b = await coordinatorOn(clock, store);
  try {
    // Admitted through a; no peer answers, so the operation stays open in a's memory.
    const { result } = await a.coordinator.invoke(caller, { contract: a.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } });
    const waiting = a.coordinator.wait('p', result.operationId, 'decision', 50_000);
    // b closes it (a caller's cancellation that reached the other coordinator).
    const closed = await b.coordinator.cancel('p', result.operationId);
    assert.deepEqual([closed.decision?.outcome, closed.decision?.reason], ['failed', 'cancelled']);

    const answered = await within(waiting, 2_000);
    assert.notEqual(answered, 'pending', "a's waiter is answered by b's decision, not by its own timeout");
    if (answered === 'pending') return;
    assert.equal(answered.reached, true);
    assert.deepEqual(answered.result.decision, closed.decision);
    assert.deepEqual((await a.coordinator.get('p', result.operationId)).decision, closed.decision, "a's reads show b's decision");

    // Both coordinators' timers now follow the closed record: past the deadline and every grace,
    // nothing more is decided and the log holds one decision.
    await clock.advance(120_000);
    const read = await store.read(result.operationId);
    assert.equal(read.kind, 'ok');
    if (read.kind !== 'ok') return;
    const decisions = read.transitions.flatMap((t) => t.transition.events).filter((e) => e.type === 'decision-closed');
    assert.equal(decisions.length, 1, 'one decision in the log');
    assert.deepEqual(fold(read.transitions)?.decision?.reason, 'cancelled');
    assert.deepEqual((await a.coordinator.get('p', result.operationId)).settlement, (await b.coordinator.get('p', result.operationId)).settlement);
  } finally {
    await a.close();
    await b.close();
  }
});

test("a coordinator following another's appends to an operation it holds reads only what they added, and counts its log's size exactly", async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  // a reads the store through a view that counts the transitions each kind of read returned.
  const counted = { read: 0, readAfter: 0 };
  const view = Object.create(store) as MemoryEventStore;
  view.read = async (operationId) => {
    const read = await store.read(operationId);
    if (read.kind === 'ok') counted.read += read.transitions.length;
    return read;
  };
  view.readAfter = async (operationId, revision) => {
    const read = await store.readAfter(operationId, revision);
    if (read.kind === 'ok') counted.readAfter += read.transitions.length;
    return read;
  };
  const a = await coordinatorOn(clock, view);
  const b = await coordinatorOn(clock, store);
  let own = 0;
  a.coordinator.kernel.onCommitted(() => own++);
  try {
    const { result } = await a.coordinator.invoke(caller, { contract: a.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } });
    const op = result.operationId;
    const waiting = a.coordinator.wait('p', op, 'decision', 50_000);
    await b.coordinator.cancel('p', op);
    assert.notEqual(await within(waiting, 2_000), 'pending', "a follows b's appends");
    const read = await store.read(op);
    assert.ok(read.kind === 'ok');
    const entry = a.coordinator.kernel.cached(op);
    assert.ok(entry);
    assert.deepEqual(entry.record, fold(read.transitions), 'the fold of the whole log');
    assert.deepEqual(entry.log, logSizeOf(read.transitions), "its log's size: what it held and what the tails added");
    assert.equal(counted.read, 0, 'no whole log read');
    assert.ok(own < read.transitions.length);
    assert.equal(counted.readAfter, read.transitions.length - own, "b's appends, each read once");
  } finally {
    await a.close();
    await b.close();
  }
});

test('a coordinator alone on its store reads nothing back for its own appends', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  let reads = 0;
  const read = store.read.bind(store);
  store.read = (operationId) => {
    reads++;
    return read(operationId);
  };
  const a = await coordinatorOn(clock, store);
  try {
    for (const p of peerIds(3)) await a.addPeer(p, { review: () => ({ verdict: 'approve' }) });
    for (let i = 0; i < 5; i++) {
      const { result } = await a.coordinator.invoke(caller, {
        contract: a.bundle.ref,
        interaction: 'review',
        invocationKey: `k${i}`,
        input: { document: 'd' },
      });
      const waited = await a.coordinator.wait('p', result.operationId, 'decision', 1_000);
      assert.equal(waited.result.decision?.outcome, 'success');
    }
    await clock.advance(120_000);
    assert.equal(reads, 0, 'its own revisions are known: no read');
  } finally {
    await a.close();
  }
});

test('a result for an operation the store cannot read now is left for redelivery, never acknowledged and lost', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const a = await coordinatorOn(clock, store);
  // b shares the store but reads it through a link that is down for a while (a broker restart).
  let down = true;
  const flaky = Object.create(store) as MemoryEventStore;
  flaky.read = async (operationId) => (down ? { kind: 'unavailable', description: 'the store is restarting' } : store.read(operationId));
  const b = await coordinatorOn(clock, flaky);
  try {
    const { result } = await a.coordinator.invoke(caller, { contract: a.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } });
    const message: ResultMessage = {
      kind: 'result',
      operationId: result.operationId,
      branchId: 'alfa',
      peerId: 'alfa',
      attempt: 1,
      fence: 1,
      result: { verdict: 'approve' },
    };
    const delivery = () => {
      const answered: string[] = [];
      const inbound: InboundMessage = {
        subject: subjectFor('demo.v1.lab', 'review', result.operationId, 'result', 'alfa'),
        data: encodeWire(message),
        headers: {},
        redelivered: answered.length > 0,
        ack: async () => void answered.push('ack'),
        nak: async () => void answered.push('nak'),
      };
      return { inbound, answered };
    };
    const first = delivery();
    await onPeerMessage(b.coordinator, 'demo.v1.lab', 'review', 'result', first.inbound);
    assert.deepEqual(first.answered, ['nak'], 'the store could not say whether the operation exists: handed back');
    const untouched = await store.read(result.operationId);
    assert.equal(untouched.kind === 'ok' && untouched.transitions.length, 1, 'nothing recorded');

    down = false;
    const again = delivery(); // the broker's redelivery
    await onPeerMessage(b.coordinator, 'demo.v1.lab', 'review', 'result', again.inbound);
    assert.deepEqual(again.answered, ['ack']);
    const read = await store.read(result.operationId);
    assert.equal(read.kind, 'ok');
    if (read.kind !== 'ok') return;
    const accepted = read.transitions.flatMap((t) => t.transition.events).filter((e) => e.type === 'result-accepted');
    assert.equal(accepted.length, 1, 'the redelivered result is counted');
  } finally {
    await a.close();
    await b.close();
  }
});
