/**
 * Spec: "Outbox, durable delivery and recovery" — recovery from the log, in memory over a store
 * shared by two coordinator incarnations (the durable adapters run the same code path).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { answerWithin, HeldReadsStore } from '../support/held-reads.js';
import type { JsonObject } from '../../src/contract/json.js';
import { fold } from '../../src/projections/record.js';
import { AdapterError } from '../../src/contract/errors.js';
import { limits } from '../../src/contract/limits.js';

async function incarnation(clock: VirtualClock, store: MemoryEventStore, review: JsonObject = {}) {
  return createEmbedded({ clock, store, bundle: reviewBundle(review), groups: { reviewers: peerIds(3) } });
}

test('a restarted coordinator rebuilds open operations from the log and re-arms deadlines from recorded instants', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const first = await incarnation(clock, store, { completion: { mode: 'quorum', count: 2 }, onTimeout: 'partial' });
  const { result } = await first.coordinator.invoke(
    { principalId: 'p', senderPeerId: null },
    { contract: first.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } },
  );
  await clock.advance(10);
  await first.coordinator.close(); // the coordinator dies; its store survives
  const second = await incarnation(clock, store, { completion: { mode: 'quorum', count: 2 }, onTimeout: 'partial' });
  const recovered = await second.coordinator.recover();
  assert.deepEqual(recovered, { scanned: 1, resumed: 1, failed: 0 });
  await clock.advance(5000);
  const view = await second.coordinator.get('p', result.operationId);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason, view.decision?.closedAtMs], ['partial', 'timeout', view.deadlineMs]);
});

test('recovery replays a pending outbox idempotently with the same publication identities', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const first = await incarnation(clock, store);
  // The first incarnation dies between admission and publication: nothing was sent.
  const transport = first.coordinator.deps.transport;
  transport.publish = async () => new Promise(() => {});
  const { result } = await first.coordinator.invoke(
    { principalId: 'p', senderPeerId: null },
    { contract: first.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } },
  );
  await clock.advance(1);
  const admitted = await store.read(result.operationId);
  const intended = admitted.kind === 'ok' ? fold(admitted.transitions)! : undefined;
  const second = await incarnation(clock, store);
  const ids: string[] = [];
  const spy = second.bus.connect('spy');
  await spy.subscribe('demo.v1.lab.review.*.request.*', (m) => void ids.push(JSON.parse(new TextDecoder().decode(m.data)).publicationId));
  for (const p of peerIds(3)) await second.addPeer(p, { review: () => ({ verdict: 'approve' }) });
  await second.coordinator.recover();
  await clock.advance(1);
  assert.deepEqual(
    ids.sort(),
    Object.values(intended!.branches)
      .map((b) => b.outbox.publicationId)
      .sort(),
  );
  assert.equal((await second.coordinator.get('p', result.operationId)).decision?.outcome, 'success');
});

test('a restarted process cannot reconstruct success from absence of data: an unknown operation stays unknown', async () => {
  const clock = new VirtualClock();
  const first = await incarnation(clock, new MemoryEventStore({ clock }));
  const { result } = await first.coordinator.invoke(
    { principalId: 'p', senderPeerId: null },
    { contract: first.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } },
  );
  const second = await incarnation(clock, new MemoryEventStore({ clock })); // memory mode: state lost
  assert.deepEqual(await second.coordinator.recover(), { scanned: 0, resumed: 0, failed: 0 });
  await assert.rejects(second.coordinator.get('p', result.operationId), (e) => e instanceof AdapterError && /no operation/.test(e.message));
});

test('settled operations are not kept in memory by recovery; they are read from the store on demand', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const first = await incarnation(clock, store, { completion: { mode: 'first-success' } });
  for (const p of peerIds(3)) await first.addPeer(p, { review: () => ({ verdict: 'approve' }) });
  const { result } = await first.coordinator.invoke(
    { principalId: 'p', senderPeerId: null },
    { contract: first.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } },
  );
  await clock.advance(1);
  const second = await incarnation(clock, store, { completion: { mode: 'first-success' } });
  assert.deepEqual(await second.coordinator.recover(), { scanned: 0, resumed: 0, failed: 0 }, 'its index row says settled: not even read');
  assert.equal((await second.coordinator.get('p', result.operationId)).phase, 'settled');
});

test('recovery publishes again the requests recorded unknown, with their publication identities, backing off while still uncertain', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const review = { completion: { mode: 'first-success' }, timeoutMs: 600_000, leaseMs: 600_000 };
  const first = await incarnation(clock, store, review);
  // The first incarnation's broker never acknowledges: every request is recorded unknown, then it dies.
  first.coordinator.deps.transport.publish = async () => ({ receipt: 'unknown', detail: 'ack timed out' });
  const { result } = await first.coordinator.invoke(
    { principalId: 'p', senderPeerId: null },
    { contract: first.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } },
  );
  await clock.advance(1);
  await first.coordinator.close();
  const read = await store.read(result.operationId);
  const recorded = read.kind === 'ok' ? fold(read.transitions)! : undefined;
  assert.deepEqual(
    Object.values(recorded!.branches).map((b) => b.outbox.receipt),
    ['unknown', 'unknown', 'unknown'],
  );
  const second = await incarnation(clock, store, review);
  const transport = second.coordinator.deps.transport;
  const publish = transport.publish.bind(transport);
  const startMs = clock.nowMs();
  const sent: [number, string][] = [];
  // Still uncertain for ten seconds after the restart, then carried.
  transport.publish = async (subject, data, options) => {
    if (!subject.includes('.request.')) return publish(subject, data, options);
    sent.push([clock.nowMs() - startMs, options?.msgId ?? '']);
    return clock.nowMs() < startMs + 10_000 ? { receipt: 'unknown', detail: 'ack timed out' } : publish(subject, data, options);
  };
  for (const p of peerIds(3)) await second.addPeer(p, { review: () => ({ verdict: 'approve' }) });
  await second.coordinator.recover();
  await clock.advance(20_000);
  const ids = Object.values(recorded!.branches).map((b) => b.outbox.publicationId);
  assert.deepEqual(
    sent.map(([atMs]) => atMs),
    [0, 1000, 3000, 7000, 15_000].flatMap((atMs) => [atMs, atMs, atMs]),
  );
  assert.deepEqual(
    sent.map(([, id]) => id),
    [...ids, ...ids, ...ids, ...ids, ...ids],
  );
  assert.equal((await second.coordinator.get('p', result.operationId)).decision?.outcome, 'success');
  const after = await store.read(result.operationId);
  const unknowns =
    after.kind === 'ok' ? after.transitions.flatMap((t) => t.transition.events).filter((e) => e.type === 'dispatch-recorded' && e.receipt === 'unknown') : [];
  assert.equal(unknowns.length, 3, 'one unknown per branch, recorded by the first incarnation');
});

test('recovery publishes again the cancels the transport rejected for a reason that may pass, with their attempt and fence', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const review = { completion: { mode: 'first-success' }, siblings: 'cancel', cancelTimeoutMs: 10_000 };
  const first = await incarnation(clock, store, review);
  const transport = first.coordinator.deps.transport;
  const publish = transport.publish.bind(transport);
  // The first incarnation's connection closes as the decision does: its cancels are rejected, then it dies.
  transport.publish = async (subject, data, options) =>
    subject.includes('.cancel.') ? { receipt: 'rejected', detail: 'connection is closed' } : publish(subject, data, options);
  await first.addPeer('alfa', { review: () => ({ verdict: 'approve' }) });
  const { result } = await first.coordinator.invoke(
    { principalId: 'p', senderPeerId: null },
    { contract: first.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } },
  );
  await clock.advance(1);
  await first.coordinator.close();
  const second = await incarnation(clock, store, review);
  const cancels: [string, number, number][] = [];
  const spy = second.bus.connect('spy');
  await spy.subscribe('demo.v1.lab.review.*.cancel.*', (m) => {
    const cancel = JSON.parse(new TextDecoder().decode(m.data)) as { branchId: string; attempt: number; fence: number };
    cancels.push([cancel.branchId, cancel.attempt, cancel.fence]);
  });
  await second.coordinator.recover();
  await clock.advance(1);
  assert.deepEqual(cancels.sort(), [
    ['bravo', 1, 1],
    ['charlie', 1, 1],
  ]);
  assert.equal((await second.coordinator.get('p', result.operationId)).settlement.status, 'pending');
});

/** A memory store whose reads take a while and report how many ran at once (a store's round trips). */
class SlowReads extends MemoryEventStore {
  inFlight = 0;
  inFlightMax = 0;
  reads = 0;
  override async read(operationId: string) {
    this.reads++;
    this.inFlightMax = Math.max(this.inFlightMax, ++this.inFlight);
    try {
      await new Promise((resolve) => setTimeout(resolve, 5));
      return await super.read(operationId);
    } finally {
      this.inFlight--;
    }
  }
}

test('recovery reads only the operations the index says may be open, overlapping a bounded number of reads: the settled history is not read', async () => {
  const clock = new VirtualClock();
  const store = new SlowReads({ clock });
  const first = await incarnation(clock, store, { completion: { mode: 'first-success' } });
  for (const p of peerIds(3)) await first.addPeer(p, { review: () => ({ verdict: 'approve' }) });
  const caller = { principalId: 'p', senderPeerId: null };
  const settled = 40;
  for (let i = 0; i < settled; i++)
    await first.coordinator.invoke(caller, { contract: first.bundle.ref, interaction: 'review', invocationKey: `settled-${i}`, input: { document: 'd' } });
  await clock.advance(1);
  // Operations left open: no peer answers them.
  const open = await incarnation(clock, store, { completion: { mode: 'first-success' } });
  const opened = limits.recoveryReadsMax * 2 + 1;
  for (let i = 0; i < opened; i++)
    await open.coordinator.invoke(caller, { contract: open.bundle.ref, interaction: 'review', invocationKey: `open-${i}`, input: { document: 'd' } });
  store.inFlightMax = 0;
  store.reads = 0;
  const second = await incarnation(clock, store, { completion: { mode: 'first-success' } });
  assert.deepEqual(await second.coordinator.recover(), { scanned: opened, resumed: opened, failed: 0 });
  assert.equal(store.reads, opened, 'each open operation read once, no settled one');
  assert.equal(store.inFlightMax, limits.recoveryReadsMax, `at most ${limits.recoveryReadsMax} reads at once, and that many`);
});

test('recovery reads every operation when the index cannot list the open ones', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const first = await incarnation(clock, store, { completion: { mode: 'first-success' } });
  for (const p of peerIds(3)) await first.addPeer(p, { review: () => ({ verdict: 'approve' }) });
  const caller = { principalId: 'p', senderPeerId: null };
  await first.coordinator.invoke(caller, { contract: first.bundle.ref, interaction: 'review', invocationKey: 'settled', input: { document: 'd' } });
  await clock.advance(1);
  const open = await incarnation(clock, store, { completion: { mode: 'first-success' } });
  await open.coordinator.invoke(caller, { contract: open.bundle.ref, interaction: 'review', invocationKey: 'open', input: { document: 'd' } });
  store.index.openOperationIds = async function* () {
    yield* [];
    throw new AdapterError('unavailable', 'index down');
  };
  const second = await incarnation(clock, store, { completion: { mode: 'first-success' } });
  assert.deepEqual(await second.coordinator.recover(), { scanned: 2, resumed: 1, failed: 0 });
});

/**
 * Principal p's operation, opened by a coordinator that then closed, and another coordinator on the
 * same store that has not recovered: it holds nothing yet.
 */
async function openedElsewhere(clock: VirtualClock, store: MemoryEventStore) {
  const first = await incarnation(clock, store, { completion: { mode: 'quorum', count: 2 } });
  const { result } = await first.coordinator.invoke(
    { principalId: 'p', senderPeerId: null },
    { contract: first.bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } },
  );
  await clock.advance(10);
  await first.coordinator.close();
  return { result, second: await incarnation(clock, store, { completion: { mode: 'quorum', count: 2 } }) };
}

test("another principal's read of an operation this coordinator does not hold is 404 and holds nothing: a stranger neither fills the cache nor resumes the operation here", async () => {
  const clock = new VirtualClock();
  const { result, second } = await openedElsewhere(clock, new MemoryEventStore({ clock }));
  assert.deepEqual(second.coordinator.kernel.held(), []);
  for (const read of [() => second.coordinator.get('q', result.operationId), () => second.coordinator.wait('q', result.operationId, 'decision', 0)])
    await assert.rejects(read(), (e) => e instanceof AdapterError && (e as { notFound?: boolean }).notFound === true);
  assert.deepEqual(
    second.coordinator.kernel.held().map((entry) => entry.id),
    [],
    "the other principal's reads held nothing",
  );
  // Its own principal's read holds it, as before: its timers resume here.
  assert.equal((await second.coordinator.get('p', result.operationId)).operationId, result.operationId);
  assert.deepEqual(
    second.coordinator.kernel.held().map((entry) => entry.id),
    [result.operationId],
  );
});

test("a stranger's read of an operation not held here is answered 404 by its index row, without waiting for its log; its owner's waits for the log", async () => {
  const clock = new VirtualClock();
  const store = new HeldReadsStore({ clock });
  const { result, second } = await openedElsewhere(clock, store);
  store.hold(result.operationId);
  try {
    // The log's read never ends while held: only the row can have answered.
    assert.equal(await answerWithin(second.coordinator.get('q', result.operationId), 5_000), 'not found');
    assert.equal(await answerWithin(second.coordinator.inspect('q', result.operationId), 5_000), 'not found', 'the inspection, which reads the whole log, too');
    assert.equal(store.readsHeld, 2, 'the log reads were begun, as for any id');
    let ownerAnswered = false;
    const owner = second.coordinator.get('p', result.operationId).then((r) => {
      ownerAnswered = true;
      return r;
    });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(ownerAnswered, false, "the owner's read waits for the log");
    const ownerInspects = second.coordinator.inspect('p', result.operationId);
    store.release();
    assert.equal((await owner).operationId, result.operationId);
    assert.equal((await ownerInspects).result.operationId, result.operationId);
  } finally {
    store.release();
    await second.close();
  }
});

test("a stranger's 404 waits for the index row whether the id names an operation held here, one held elsewhere, or nothing: its time tells nothing of what a coordinator holds", async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const { result: elsewhere, second } = await openedElsewhere(clock, store);
  const { result: here } = await second.coordinator.invoke(
    { principalId: 'p', senderPeerId: null },
    { contract: second.bundle.ref, interaction: 'review', invocationKey: 'here', input: { document: 'd' } },
  );
  const absent = `op${'0'.repeat(64)}`;
  // Every index row read waits until released.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const rowOf = store.index.get;
  store.index.get = async (id) => {
    await gate;
    return rowOf(id);
  };
  try {
    assert.ok(second.coordinator.kernel.cached(here.operationId), 'the coordinator reading holds one of them');
    assert.ok(!second.coordinator.kernel.cached(elsewhere.operationId));
    const reads = [here.operationId, elsewhere.operationId, absent].flatMap((id) => [
      second.coordinator.get('q', id),
      second.coordinator.wait('q', id, 'decision', 0),
      second.coordinator.cancel('q', id),
    ]);
    for (const read of reads) assert.equal(await answerWithin(read, 100), 'still waiting', 'each read waits for the row');
    release();
    for (const read of reads) assert.equal(await answerWithin(read, 5_000), 'not found');
    assert.equal((await second.coordinator.get('p', here.operationId)).operationId, here.operationId, 'its own principal reads it');
  } finally {
    release();
    await second.close();
  }
});
