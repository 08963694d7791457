/**
 * Spec: "Selection, claims and attempts" — one test per rule, over the virtual clock, each with
 * the replay-equality check.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, answers, silent, storeWith, types, namespace, type Scenario } from '../support/scenario.js';
import type { DomainEvent } from '../../src/events/types.js';
import type { JsonObject } from '../../src/contract/json.js';
import { encodeWire, type ClaimMessage } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { peerBusPermissions } from '../../src/deployment/embedded.js';
import { MemoryEffectSink } from '../../src/peer/effect-sink.js';
import { AdapterError } from '../../src/contract/errors.js';
import { flushMicrotasks } from '../../src/contract/clock.js';

const counted = async (s: Scenario, reason: string) =>
  (await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
const of = <T extends DomainEvent['type']>(events: DomainEvent[], type: T) => events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);

async function claim(s: Scenario, peer: string, op: string, branchId: string, attempt: number, fence: number, action: 'renew' | 'release' = 'renew') {
  const message: ClaimMessage = { kind: 'claim', action, operationId: op, branchId, peerId: peer, attempt, fence };
  const connection = s.bus.connect(`claim:${peer}`, peerBusPermissions(namespace, peer));
  await connection.publish(subjectFor(namespace, 'review', op, 'claim', peer), encodeWire(message));
  await flushMicrotasks();
}

const oneEligible = (extra: JsonObject = {}): JsonObject => ({
  delivery: 'one-eligible',
  completion: { mode: 'first-success' },
  leaseMs: 1000,
  renewIntervalMs: 400,
  retryBackoffMs: 100,
  attempts: 3,
  timeoutMs: 10_000,
  ...extra,
});

test('selection sorts eligible authorized peer IDs by unsigned ASCII byte order and chooses the first', async () => {
  const s = await scenario({ groups: { reviewers: ['bravo', 'alfa', 'Zulu', 'charlie'] }, review: oneEligible() });
  const { result } = await s.invoke('k');
  assert.deepEqual(
    result.branches.map((b) => [b.branchId, b.peerId]),
    [['Zulu', 'Zulu']],
  );
  const record = await s.coordinator.record(result.operationId);
  assert.deepEqual(record?.manifest.eligible, ['Zulu', 'alfa', 'bravo', 'charlie']);
  await s.assertReplayEquals(result.operationId);
});

test('one-eligible derives its branch ID from the initially selected peer and keeps it when the assignee changes', async () => {
  const s = await scenario({ store: 'sqlite', peers: 3, review: oneEligible() });
  await s.addPeer('bravo', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1100); // alfa never answers: its lease expires, then the backoff passes
  const view = await s.get(result.operationId);
  assert.deepEqual(
    view.branches.map((b) => [b.branchId, b.peerId, b.attempt, b.fence, b.status]),
    [['alfa', 'bravo', 2, 2, 'success']],
  );
  assert.equal(view.decision?.outcome, 'success');
  await s.assertReplayEquals(result.operationId);
});

test('initial selection and reassignment are persisted before sending', async () => {
  const s = await scenario({ store: 'sqlite', peers: 2, review: oneEligible() });
  const order: string[] = [];
  const store = s.store;
  const append = store.append.bind(store);
  store.append = async (id, rev, t) => (order.push(...t.events.map((e) => `append:${e.type}`)), append(id, rev, t));
  const transport = s.coordinator.deps.transport;
  const publish = transport.publish.bind(transport);
  transport.publish = async (subject, data, o) => (order.push(`publish:${subject.split('.').pop()}`), publish(subject, data, o));
  await s.invoke('k');
  await s.settle();
  await s.clock.advance(1100);
  const reassigned = order.indexOf('append:branch-reassigned');
  assert.ok(reassigned >= 0);
  assert.ok(order.indexOf('publish:bravo') > reassigned, order.join(' '));
});

test('fence 0 is invalid on the wire: such a message is never admitted', async () => {
  const s = await scenario();
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  const before = (await s.events(op)).length;
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 0, result: { verdict: 'approve' } });
  // Refused by the wire schema as malformed, before any decision: not a stale fence, not recorded.
  assert.equal(await counted(s, 'malformed'), 1);
  assert.equal(await counted(s, 'stale-fence'), 0, 'it never reached the fence comparison');
  assert.equal((await s.events(op)).length, before, 'nothing of it is recorded');
  const view = await s.get(op);
  assert.equal(view.branches[0]?.status, 'pending');
  // The same message with fence 1 is this attempt's result: only the fence made it invalid.
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, result: { verdict: 'approve' } });
  assert.equal((await s.get(op)).branches[0]?.status, 'success');
  await s.assertReplayEquals(op);
});

test('when no eligible peer remains the branch becomes failed and is never silently broadcast', async () => {
  const s = await scenario({ store: 'sqlite', peers: 2, review: oneEligible({ attempts: 5 }) });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1100); // alfa expires → bravo
  await s.clock.advance(1100); // bravo expires → nobody left
  const events = await s.events(result.operationId);
  assert.deepEqual(
    of(events, 'branch-failed').map((e) => e.reason),
    ['no-eligible-peer'],
  );
  assert.equal(s.bus.stats.published, 2, 'one request per attempt, never a broadcast');
  const view = await s.get(result.operationId);
  assert.deepEqual([view.branches[0]?.status, view.decision?.outcome, view.decision?.reason], ['failure', 'failed', 'impossible']);
  await s.assertReplayEquals(result.operationId);
});

test('renewal before expiry, under the declared interval and with the current fence extends the lease', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' }, leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 } });
  let release!: () => void;
  await s.addPeer('alfa', { review: () => new Promise((resolve) => (release = () => resolve({ verdict: 'approve' }))) });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(2500); // well past the first lease; the peer SDK renews every 400 ms
  const record = await s.coordinator.record(result.operationId);
  assert.ok(record!.branches['alfa']!.leaseUntilMs > s.clock.nowMs(), 'the lease was extended');
  release();
  await s.settle();
  assert.equal((await s.get(result.operationId)).decision?.outcome, 'success');
  const renewals = of(await s.events(result.operationId), 'lease-renewed');
  assert.ok(renewals.length >= 3 && renewals.length <= 7, `renewals are rate-bound (${renewals.length})`);
  await s.assertReplayEquals(result.operationId);
});

test('renewal with a stale fence or after expiry changes nothing', async () => {
  const s = await scenario({
    peers: 1,
    review: { leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000, completion: { mode: 'first-success' }, attempts: 1 },
  });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(500);
  await claim(s, 'alfa', result.operationId, 'alfa', 1, 2);
  let record = await s.coordinator.record(result.operationId);
  assert.equal(record!.branches['alfa']!.leaseUntilMs, record!.admittedAtMs + 1000);
  s.clock.set(record!.admittedAtMs + 1000);
  await claim(s, 'alfa', result.operationId, 'alfa', 1, 1);
  record = await s.coordinator.record(result.operationId);
  assert.equal(of(await s.events(result.operationId), 'lease-renewed').length, 0);
});

test('an expired owner can neither renew nor admit results', async () => {
  const s = await scenario({
    peers: 1,
    review: { leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000, completion: { mode: 'first-success' }, attempts: 1 },
  });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1000);
  await claim(s, 'alfa', result.operationId, 'alfa', 1, 1);
  await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  const events = await s.events(result.operationId);
  assert.equal(of(events, 'lease-renewed').length, 0);
  assert.equal(of(events, 'result-accepted').length, 0);
  assert.deepEqual(
    of(events, 'claim-ended').map((e) => [e.cause, e.retryAtMs]),
    [['expired', null]],
  );
  await s.assertReplayEquals(result.operationId);
});

test('a revoked owner cannot renew: revocation terminates its still-open branch', async () => {
  const s = await scenario({ peers: 2, review: { leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000, completion: { mode: 'all-terminal' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  s.policy.revoke({ peerId: 'alfa' });
  await s.clock.advance(300);
  await claim(s, 'alfa', result.operationId, 'alfa', 1, 1);
  const view = await s.get(result.operationId);
  assert.equal(view.branches.find((b) => b.branchId === 'alfa')?.status, 'revoked');
  assert.equal(of(await s.events(result.operationId), 'branch-revoked')[0]?.policyRevision, s.policy.revision);
});

test('a released claim allows a logical retry after the fixed backoff, as a new attempt and fence of the same branch', async () => {
  const s = await scenario({
    store: 'sqlite',
    peers: 1,
    review: { leaseMs: 1000, renewIntervalMs: 400, retryBackoffMs: 250, attempts: 2, timeoutMs: 10_000, completion: { mode: 'first-success' } },
  });
  const { result } = await s.invoke('k');
  await s.settle();
  await claim(s, 'alfa', result.operationId, 'alfa', 1, 1, 'release');
  let view = await s.get(result.operationId);
  assert.deepEqual([view.branches[0]?.attempt, view.branches[0]?.status], [1, 'pending']);
  await s.clock.advance(249);
  assert.equal((await s.get(result.operationId)).branches[0]?.attempt, 1, 'not before the backoff');
  await s.clock.advance(1);
  view = await s.get(result.operationId);
  assert.deepEqual([view.branches[0]?.branchId, view.branches[0]?.attempt, view.branches[0]?.fence], ['alfa', 2, 2]);
  await s.assertReplayEquals(result.operationId);
});

test('attempt counts are finite: a branch fails when its attempt budget is spent', async () => {
  const s = await scenario({
    store: 'sqlite',
    peers: 1,
    review: { leaseMs: 1000, renewIntervalMs: 400, retryBackoffMs: 100, attempts: 2, timeoutMs: 20_000, completion: { mode: 'first-success' } },
  });
  const { result } = await s.invoke('k');
  await s.settle();
  for (let i = 0; i < 6; i++) await s.clock.advance(1000);
  const view = await s.get(result.operationId);
  assert.deepEqual([view.branches[0]?.attempt, view.branches[0]?.status], [2, 'failure']);
  assert.equal(s.bus.stats.published, 2);
});

test('a transport retry after an uncertain send is not an application retry: same attempt, same publication ID', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' } } });
  const transport = s.coordinator.deps.transport;
  const publish = transport.publish.bind(transport);
  const ids: (string | undefined)[] = [];
  transport.publish = async (subject, data, o) => {
    if (subject.includes('.request.')) ids.push(o?.msgId);
    if (ids.length === 1) return { receipt: 'unknown', detail: 'ack timed out' };
    return publish(subject, data, o);
  };
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1000);
  assert.equal(ids.length, 2);
  assert.equal(ids[0], ids[1]);
  const events = await s.events(result.operationId);
  assert.deepEqual(
    of(events, 'dispatch-recorded').map((e) => [e.attempt, e.receipt]),
    [
      [1, 'unknown'],
      [1, 'sent'],
    ],
  );
  assert.equal((await s.get(result.operationId)).branches[0]?.attempt, 1);
});

/**
 * Requests the coordinator publishes, at their instants, each answered `unknown` (an ack that
 * timed out) while `uncertain` says so, and otherwise by the real publish, its `sent` told as
 * `stored` (a stream's acknowledgement).
 */
function uncertainRequests(s: Scenario, uncertain: (atMs: number) => boolean) {
  const transport = s.coordinator.deps.transport;
  const publish = transport.publish.bind(transport);
  const sent: { atMs: number; msgId: string | undefined; attempt: number }[] = [];
  transport.publish = async (subject, data, options) => {
    if (!subject.includes('.request.')) return publish(subject, data, options);
    const { attempt } = JSON.parse(new TextDecoder().decode(data)) as { attempt: number };
    sent.push({ atMs: s.clock.nowMs(), msgId: options?.msgId, attempt });
    if (uncertain(s.clock.nowMs())) return { receipt: 'unknown', detail: 'ack timed out' };
    const receipt = await publish(subject, data, options);
    return receipt.receipt === 'sent' ? { receipt: 'stored' } : receipt;
  };
  return sent;
}

test('an uncertain request is published again less and less often, same attempt and publication ID, recorded unknown once until it is stored', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' }, timeoutMs: 600_000, leaseMs: 600_000 } });
  const startMs = s.clock.nowMs();
  const sent = uncertainRequests(s, (atMs) => atMs < startMs + 100_000);
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  await s.clock.advance(100_000);
  assert.deepEqual(
    sent.map((p) => p.atMs - startMs),
    [0, 1000, 3000, 7000, 15_000, 31_000, 61_000, 91_000],
  );
  // Recorded once: the publications after it say no more than that it is not known to have been stored.
  assert.deepEqual(
    of(await s.events(op), 'dispatch-recorded').map((e) => [e.attempt, e.receipt]),
    [[1, 'unknown']],
  );
  assert.equal((await s.get(op)).decision, null);
  // The broker is back: the next publication is stored, recorded, and the peer's result decides.
  await s.clock.advance(30_000);
  assert.equal(sent.length, 9);
  assert.equal(sent[8]!.atMs - startMs, 121_000);
  assert.equal(new Set(sent.map((p) => p.msgId)).size, 1);
  assert.deepEqual(new Set(sent.map((p) => p.attempt)), new Set([1]));
  assert.deepEqual(
    of(await s.events(op), 'dispatch-recorded').map((e) => [e.attempt, e.receipt]),
    [
      [1, 'unknown'],
      [1, 'stored'],
    ],
  );
  const view = await s.get(op);
  assert.deepEqual([view.decision?.outcome, view.branches[0]?.attempt, view.branches[0]?.status], ['success', 1, 'success']);
  await s.clock.advance(120_000);
  assert.equal(sent.length, 9, 'stored: never published again');
  await s.assertReplayEquals(op);
});

test('an uncertain request is never published again at or after the deadline', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' }, timeoutMs: 20_000, leaseMs: 20_000, onTimeout: 'failed' } });
  const startMs = s.clock.nowMs();
  const sent = uncertainRequests(s, () => true);
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  await s.clock.advance(60_000);
  // 15 s + 16 s would be past the deadline (20 s): nothing is sent after 15 s.
  assert.deepEqual(
    sent.map((p) => p.atMs - startMs),
    [0, 1000, 3000, 7000, 15_000],
  );
  const view = await s.get(op);
  assert.deepEqual([view.decision?.reason, view.decision?.closedAtMs], ['timeout', view.deadlineMs]);
  assert.deepEqual(
    of(await s.events(op), 'dispatch-recorded').map((e) => [e.attempt, e.receipt]),
    [[1, 'unknown']],
  );
  await s.assertReplayEquals(op);
});

/** Unhandled rejections while `during` runs. */
async function unhandledDuring(during: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const listener = (reason: unknown) => void seen.push(reason);
  process.on('unhandledRejection', listener);
  try {
    await during();
    await flushMicrotasks();
  } finally {
    process.off('unhandledRejection', listener);
  }
  return seen;
}

test('a coordinator that closes publishes nothing again: the republication armed for an uncertain request is cancelled', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' }, timeoutMs: 600_000, leaseMs: 600_000 } });
  const sent = uncertainRequests(s, () => true);
  await s.invoke('k');
  await s.settle();
  assert.equal(sent.length, 1);
  const errorsBefore = JSON.stringify([await s.coordinator.metrics.transportErrors.get(), await s.coordinator.metrics.storeErrors.get()]);
  const timersBefore = s.clock.pendingTimers();
  await s.coordinator.close();
  assert.equal(s.clock.pendingTimers(), timersBefore - 2, 'its due timer and its republication are cancelled');
  const unhandled = await unhandledDuring(() => s.clock.advance(120_000));
  assert.equal(sent.length, 1, 'nothing published after close');
  assert.deepEqual(unhandled, []);
  assert.equal(JSON.stringify([await s.coordinator.metrics.transportErrors.get(), await s.coordinator.metrics.storeErrors.get()]), errorsBefore);
});

test('an operation that decides while its uncertain request waits to be published again keeps no republication armed', async () => {
  const s = await scenario({ peers: 2, review: { completion: { mode: 'first-success' }, timeoutMs: 600_000, leaseMs: 600_000 } });
  const transport = s.coordinator.deps.transport;
  const publish = transport.publish.bind(transport);
  const sent: string[] = [];
  transport.publish = async (subject, data, options) => {
    if (subject.includes('.request.alfa')) return (sent.push(subject), { receipt: 'unknown', detail: 'ack timed out' });
    return publish(subject, data, options);
  };
  const timersBefore = s.clock.pendingTimers();
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: { verdict: 'approve' } });
  const view = await s.get(op);
  assert.deepEqual([view.decision?.outcome, view.phase], ['success', 'settled']);
  assert.equal(s.clock.pendingTimers(), timersBefore, 'nothing of the operation is left armed');
  await s.clock.advance(60_000);
  assert.equal(sent.length, 1);
  await s.assertReplayEquals(op);
});

test('a broker down for longer than an operation has ordinary log room for does not close it: its request is recorded unknown once, and decides once stored', async () => {
  // Ninety minutes: a transition a second would be past the ordinary log budget (4096 transitions).
  const outageMs = 90 * 60_000;
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' }, timeoutMs: 2 * outageMs, leaseMs: 2 * outageMs } });
  const startMs = s.clock.nowMs();
  const sent = uncertainRequests(s, (atMs) => atMs < startMs + outageMs);
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  for (let i = 0; i < 100; i++) await s.clock.advance(outageMs / 90);
  const view = await s.get(op);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['success', 'threshold']);
  assert.ok(sent.length < 200, `published ${sent.length} times: at most every 30 s`);
  const read = await s.store.read(op);
  assert.ok(read.kind === 'ok' && read.transitions.length < 10, 'a handful of transitions');
  await s.assertReplayEquals(op);
});

test('requests held back because their result path could not be made are dispatched again when it can: the reconcile is armed, not left to the deadline', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' }, timeoutMs: 600_000, leaseMs: 600_000 } });
  // The broker refuses the coordinator's first result subscription (a moment's outage), then takes it.
  const transport = s.coordinator.deps.transport;
  let refusals = 1;
  s.coordinator.deps.transport = storeWith(transport, (real) => ({
    subscribe: (pattern: string, handler: Parameters<typeof real.subscribe>[1]) =>
      pattern.endsWith('.result.*') && refusals-- > 0
        ? Promise.reject(new AdapterError('unavailable', 'connection is closed'))
        : real.subscribe(pattern, handler),
  }));
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  assert.equal((await s.get(result.operationId)).branches[0]?.status, 'pending', 'nothing was sent without its result path');
  await s.clock.advance(1000);
  await s.settle();
  const view = await s.get(result.operationId);
  assert.equal(view.decision?.outcome, 'success', 'sent once the path was made, and decided');
  await s.assertReplayEquals(result.operationId);
});

test('a committed retryable failure allows a logical retry within the budget', async () => {
  const s = await scenario({ store: 'sqlite', peers: 1, review: { attempts: 2, retryBackoffMs: 100, completion: { mode: 'first-success' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'retry' } });
  await s.clock.advance(100);
  await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', attempt: 2, fence: 2, result: { verdict: 'approve' } });
  const view = await s.get(result.operationId);
  assert.deepEqual([view.branches[0]?.attempt, view.branches[0]?.status, view.decision?.outcome], [2, 'success', 'success']);
  await s.assertReplayEquals(result.operationId);
});

test('retryability cannot override the deadline: a retry that could not start before it is a failure', async () => {
  const s = await scenario({ peers: 1, review: { attempts: 3, retryBackoffMs: 6000, completion: { mode: 'first-success' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'retry' } });
  assert.equal((await s.get(result.operationId)).branches[0]?.status, 'failure');
});

test('stale or duplicate result traffic never creates another attempt', async () => {
  const s = await scenario({ store: 'sqlite', peers: 1, review: { attempts: 3, retryBackoffMs: 100, completion: { mode: 'first-success' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  for (let i = 0; i < 4; i++) await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'retry' } });
  await s.clock.advance(100);
  for (let i = 0; i < 3; i++)
    await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, result: { verdict: 'retry' } });
  await s.clock.advance(1000);
  assert.equal((await s.get(result.operationId)).branches[0]?.attempt, 2);
  assert.equal(of(await s.events(result.operationId), 'branch-reassigned').length, 1);
});

test('result admission always checks the current assignment and fence: the previous attempt is stale', async () => {
  const s = await scenario({ store: 'sqlite', peers: 2, review: oneEligible() });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1100);
  await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, result: { verdict: 'approve' } });
  const events = await s.events(result.operationId);
  assert.equal(of(events, 'result-accepted').length, 0);
  assert.deepEqual(
    of(events, 'result-rejected').map((e) => e.reason),
    ['wrong-peer'],
  );
  await s.send('bravo', { operationId: result.operationId, branchId: 'alfa', peerId: 'bravo', attempt: 1, fence: 1, result: { verdict: 'approve' } });
  assert.deepEqual(
    of(await s.events(result.operationId), 'result-rejected').map((e) => e.reason),
    ['wrong-peer', 'stale-fence'],
  );
});

test('authorization revocation terminates still-open branches at the next protected transition', async () => {
  const s = await scenario({ peers: 3, review: { completion: { mode: 'all-terminal' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  s.policy.revoke({ peerId: 'alfa' });
  await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  const view = await s.get(result.operationId);
  assert.equal(view.branches.find((b) => b.branchId === 'alfa')?.status, 'revoked');
  assert.equal(of(await s.events(result.operationId), 'result-accepted').length, 0, 'a revoked peer supplies no vote');
  await s.assertReplayEquals(result.operationId);
});

test('revocation before dispatch terminates the branch instead of sending', async () => {
  const s = await scenario({ peers: 2, review: { completion: { mode: 'first-success' } } });
  const policy = s.policy;
  const realAuthorize = policy.authorize.bind(policy);
  // Admission checks candidates without a branch; the check just before dispatch names the branch.
  policy.authorize = async (input) =>
    input.branchId === 'bravo' ? { allowed: false, revision: 'r9', expiresAtMs: input.context.nowMs + 1000, reason: 'revoked' } : realAuthorize(input);
  const { result } = await s.invoke('k');
  await s.settle();
  const events = await s.events(result.operationId);
  assert.deepEqual(
    of(events, 'branch-revoked').map((e) => e.branchId),
    ['bravo'],
  );
});

test('broker redelivery counters do not enter quorum formulas: a redelivered result is one vote', async () => {
  const s = await scenario({ review: { completion: { mode: 'quorum', count: 2 } } });
  const { result } = await s.invoke('k');
  await s.settle();
  for (let i = 0; i < 5; i++) await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  assert.equal((await s.get(result.operationId)).decision, null);
});

test('fenced business effects: the effect sink rejects older fences and honours the operation/branch idempotency key', async () => {
  const sink = new MemoryEffectSink();
  const key = { operationId: 'op1', branchId: 'b' };
  let runs = 0;
  const effect = () => ({ n: ++runs });
  assert.deepEqual(await sink.commit(key, 2, 2, effect), { value: { n: 1 }, repeated: false });
  assert.deepEqual(await sink.commit(key, 2, 2, effect), { value: { n: 1 }, repeated: true });
  await assert.rejects(sink.commit(key, 1, 1, effect), (e) => e instanceof AdapterError && e.kind === 'conflict');
  assert.deepEqual(await sink.commit(key, 3, 3, effect), { value: { n: 2 }, repeated: false });
  assert.equal(sink.applied().length, 2);
});

test('concurrent commits to the effect sink under one key apply the effect once', async () => {
  const sink = new MemoryEffectSink();
  let runs = 0;
  const results = await Promise.all(Array.from({ length: 10 }, () => sink.commit({ operationId: 'o', branchId: 'b' }, 1, 1, async () => ({ n: ++runs }))));
  assert.equal(runs, 1);
  assert.equal(results.filter((r) => !r.repeated).length, 1);
});

test('the memory effect sink stays bounded: it keeps the newest keys and effects, and forgets idle chains', async () => {
  const sink = new MemoryEffectSink(4);
  for (let i = 0; i < 10; i++) await sink.commit({ operationId: `op${i}`, branchId: 'b' }, 2, 1, () => ({ i }));
  assert.ok(sink.applied().length <= 4, `kept ${sink.applied().length} effects`);
  assert.deepEqual(sink.applied().at(-1)?.value, { i: 9 });
  // The newest key still refuses an older fence; the oldest was forgotten with its fence.
  await assert.rejects(
    sink.commit({ operationId: 'op9', branchId: 'b' }, 1, 1, () => 'old'),
    (e) => e instanceof AdapterError && e.kind === 'conflict',
  );
  assert.deepEqual(await sink.commit({ operationId: 'op0', branchId: 'b' }, 1, 1, () => 'forgotten'), { value: 'forgotten', repeated: false });
  await flushMicrotasks();
  assert.equal((sink as unknown as { inFlight: Map<string, unknown> }).inFlight.size, 0, 'no per-key chain outlives its commit');
});

test('a lease alone cannot stop running code: the old owner’s late effect is refused by its fence', async () => {
  const s = await scenario({ store: 'sqlite', peers: 2, review: oneEligible() });
  const sink = new MemoryEffectSink();
  let finishAlfa!: () => void;
  await s.addPeer(
    'alfa',
    { review: (_i, c) => new Promise((resolve) => (finishAlfa = () => resolve(c.effect(() => ({ by: 'alfa' })).then(() => ({ verdict: 'approve' }))))) },
    { sink, renew: false },
  );
  await s.addPeer('bravo', { review: async (_i, c) => (await c.effect(() => ({ by: 'bravo' })), { verdict: 'approve' }) }, { sink });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1100); // alfa stalls past its lease; bravo takes over with fence 2
  finishAlfa();
  await s.settle();
  assert.deepEqual(
    sink.applied().map((e) => [e.fence, e.value]),
    [[2, { by: 'bravo' }]],
  );
  assert.equal((await s.get(result.operationId)).decision?.outcome, 'success');
});

void silent;
void types;

test('gather manifests come from the deployment’s authenticated manifest source, each peer authorized', async () => {
  const { StaticManifestSource } = await import('../../src/adapters/manifest/static.js');
  const s = await scenario({ peers: 3, review: { delivery: 'gather', completion: { mode: 'all-successful' } } });
  s.coordinator.deps.manifests = new StaticManifestSource(
    {
      'lab.review/review': [
        { branchId: 'doc-1', peerId: 'alfa' },
        { branchId: 'doc-2', peerId: 'alfa' },
        { branchId: 'doc-3', peerId: 'charlie' },
      ],
    },
    'm7',
  );
  const { result } = await s.invoke('k');
  assert.deepEqual(
    result.branches.map((b) => [b.branchId, b.peerId]),
    [
      ['doc-1', 'alfa'],
      ['doc-2', 'alfa'],
      ['doc-3', 'charlie'],
    ],
  );
  const admitted = (await s.events(result.operationId))[0] as Extract<DomainEvent, { type: 'operation-admitted' }>;
  assert.equal(admitted.revisions.manifest, 'm7');
  await s.assertReplayEquals(result.operationId);
});

test('accepting arbitrary caller-supplied expected result sets is prohibited: they are denied', async () => {
  const s = await scenario({ peers: 2, review: { delivery: 'gather' } });
  const request = {
    contract: s.bundle.ref,
    interaction: 'review',
    invocationKey: 'k',
    input: { document: 'x' },
    manifest: [{ branchId: 'b', peerId: 'alfa' }],
  };
  await assert.rejects(s.coordinator.invoke({ principalId: 'p', senderPeerId: null }, request), (e) => e instanceof AdapterError && e.kind === 'denied');
  const ids = [];
  for await (const id of s.store.operationIds()) ids.push(id);
  assert.deepEqual(ids, []);
});

test('gather without a configured manifest source is unsupported, before anything is sent', async () => {
  const s = await scenario({ peers: 2, review: { delivery: 'gather' } });
  await assert.rejects(s.invoke('k'), (e) => e instanceof AdapterError && e.kind === 'unsupported');
  assert.equal(s.bus.stats.published, 0);
});

test('a gathered peer that is not authorized makes the admission denied', async () => {
  const { StaticManifestSource } = await import('../../src/adapters/manifest/static.js');
  const s = await scenario({ peers: 2, review: { delivery: 'gather' }, embedded: { rules: [{ effect: 'allow' }, { effect: 'deny', peers: ['zulu'] }] } });
  s.coordinator.deps.manifests = new StaticManifestSource({
    'lab.review/review': [
      { branchId: 'b1', peerId: 'alfa' },
      { branchId: 'b2', peerId: 'zulu' },
    ],
  });
  await assert.rejects(s.invoke('k'), (e) => e instanceof AdapterError && e.kind === 'denied' && /zulu/.test(e.message));
});

test('an expired claim retries after the backoff from its lease end, even when the expiry is noticed late', async () => {
  const s = await scenario({
    store: 'sqlite',
    peers: 1,
    review: { leaseMs: 1000, renewIntervalMs: 400, retryBackoffMs: 100, attempts: 2, timeoutMs: 3000, completion: { mode: 'first-success' } },
  });
  const { result } = await s.invoke('k');
  await s.settle();
  // The coordinator is stalled (a crash, a pause) until just before the deadline; the lease ended long ago.
  s.clock.set(s.clock.nowMs() + 2950);
  await s.clock.advance(0);
  const record = await s.coordinator.record(result.operationId);
  const ended = (await s.events(result.operationId)).find((e) => e.type === 'claim-ended') as Extract<DomainEvent, { type: 'claim-ended' }>;
  assert.equal(ended.retryAtMs, record!.admittedAtMs + 1000 + 100, 'the retry instant comes from the lease end');
  assert.equal(record!.branches['alfa']!.attempt, 2, 'the retry still fits before the deadline');
});

test('a new request does not take an uncertain one along ahead of its backoff: the uncertain request keeps its own schedule', async () => {
  const s = await scenario({
    store: 'sqlite',
    peers: 2,
    review: { attempts: 2, retryBackoffMs: 100, timeoutMs: 600_000, leaseMs: 600_000, completion: { mode: 'all-successful' } },
  });
  const startMs = s.clock.nowMs();
  const transport = s.coordinator.deps.transport;
  const publish = transport.publish.bind(transport);
  const sent: { peer: string; atMs: number; attempt: number }[] = [];
  transport.publish = async (subject, data, options) => {
    if (!subject.includes('.request.')) return publish(subject, data, options);
    const { attempt, peerId } = JSON.parse(new TextDecoder().decode(data)) as { attempt: number; peerId: string };
    sent.push({ peer: peerId, atMs: s.clock.nowMs() - startMs, attempt });
    // alfa's broker acknowledgements time out for the first 10 s; bravo's are stored.
    if (peerId === 'alfa' && s.clock.nowMs() < startMs + 10_000) return { receipt: 'unknown', detail: 'ack timed out' };
    const receipt = await publish(subject, data, options);
    return receipt.receipt === 'sent' ? { receipt: 'stored' } : receipt;
  };
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  // bravo fails retryably: its branch's attempt 2 is a new request, published after the retry backoff.
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: { verdict: 'retry' } });
  await s.clock.advance(100);
  await s.clock.advance(3_000);
  assert.deepEqual(
    sent.filter((p) => p.peer === 'bravo').map((p) => [p.atMs, p.attempt]),
    [
      [0, 1],
      [100, 2],
    ],
  );
  // alfa's uncertain request goes out at 0, then after 1 s and 2 s more: not again at 100 ms with bravo's.
  assert.deepEqual(
    sent.filter((p) => p.peer === 'alfa').map((p) => [p.atMs, p.attempt]),
    [
      [0, 1],
      [1000, 1],
      [3000, 1],
    ],
  );
  await s.assertReplayEquals(op);
});
