/**
 * Spec: "An unavailable, expired or denied decision fails closed" and "current revocation is
 * rechecked before subsequent protected transitions" — an allow whose validity has ended is no
 * allow at any protected boundary: invoke, dispatch, result admission, renewal, cancel requests,
 * cancel results, caller cancellation and reassignment. An expired decision is not a revocation:
 * nothing is admitted or sent on it, and the branch is not terminated for it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, answers, namespace, type Scenario } from '../support/scenario.js';
import type { DomainEvent } from '../../src/events/types.js';
import { encodeWire, type ClaimMessage } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { peerBusPermissions } from '../../src/runtime/embedded.js';
import { flushMicrotasks } from '../../src/runtime/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import { decisionAt } from '../../src/contract/authorization.js';
import type { AuthorizationInput } from '../../src/adapters/policy/types.js';

const of = <T extends DomainEvent['type']>(events: DomainEvent[], type: T) => events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);
const rejects = (kind: AdapterError['kind']) => (error: unknown) => error instanceof AdapterError && error.kind === kind;

/**
 * The policy answers as before, except that decisions matching `when` come back already expired:
 * allowed, but valid only until the instant they were asked at.
 */
function expireWhen(s: Scenario, when: (input: AuthorizationInput) => boolean): { calls: AuthorizationInput[] } {
  const policy = s.policy;
  const real = policy.authorize.bind(policy);
  const calls: AuthorizationInput[] = [];
  policy.authorize = async (input) => {
    const decision = await real(input);
    if (!when(input)) return decision;
    calls.push(input);
    return { ...decision, expiresAtMs: s.clock.nowMs() };
  };
  return { calls };
}

async function publishAs(s: Scenario, peer: string, op: string, kind: 'claim' | 'cancel-result', body: object): Promise<void> {
  const connection = s.bus.connect(`${kind}:${peer}:${Math.random()}`, peerBusPermissions(namespace, peer));
  await connection.publish(subjectFor(namespace, 'review', op, kind, peer), encodeWire(body as ClaimMessage));
  await flushMicrotasks();
}

test('a decision is valid strictly before its expiry: at the expiry instant an allow is refused as expired', () => {
  assert.equal(decisionAt({ allowed: true, revision: 'r', expiresAtMs: 1001 }, 1000).allowed, true);
  const atExpiry = decisionAt({ allowed: true, revision: 'r', expiresAtMs: 1000 }, 1000);
  assert.deepEqual([atExpiry.allowed, atExpiry.refusal], [false, 'expired']);
  assert.match(atExpiry.reason ?? '', /expired at 1000/);
  const denied = decisionAt({ allowed: false, revision: 'r', expiresAtMs: 5000, reason: 'no' }, 1000);
  assert.deepEqual([denied.allowed, denied.refusal, denied.reason], [false, 'denied', 'no']);
});

test('an expired invoke authorization fails closed: admission is refused as expired and nothing is created', async () => {
  const s = await scenario();
  const { calls } = expireWhen(s, (input) => input.action === 'invoke');
  await assert.rejects(s.invoke('k'), rejects('expired'));
  assert.equal(calls.length, 1);
  const ids = [];
  for await (const id of s.store.operationIds()) ids.push(id);
  assert.deepEqual(ids, []);
  assert.equal(s.bus.stats.published, 0);
});

test('an expired candidate authorization fails closed: that peer is not admitted', async () => {
  const s = await scenario();
  expireWhen(s, (input) => input.action === 'deliver' && input.peerId === 'charlie');
  const { result } = await s.invoke('k');
  assert.deepEqual(result.branches.map((b) => b.peerId), ['alfa', 'bravo', 'delta', 'echo']);
  await s.assertReplayEquals(result.operationId);
});

test('an expired authorization fails closed at dispatch: nothing is sent, and the branch is not revoked for it', async () => {
  const s = await scenario({ peers: 2, review: { completion: { mode: 'first-success' } } });
  // Admission asks without a branch; the recheck just before dispatch names the branch.
  const { calls } = expireWhen(s, (input) => input.action === 'deliver' && input.branchId !== null);
  const { result } = await s.invoke('k');
  await s.settle();
  assert.ok(calls.length >= 2);
  assert.equal(s.bus.stats.published, 0, 'no request goes out on an expired decision');
  const events = await s.events(result.operationId);
  assert.equal(of(events, 'branch-revoked').length, 0);
  assert.deepEqual((await s.get(result.operationId)).branches.map((b) => b.status), ['pending', 'pending']);
});

test('an expired authorization fails closed at result admission: the result supplies no vote and the branch stays open', async () => {
  const s = await scenario({ peers: 2, review: { completion: { mode: 'first-success' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  const { calls } = expireWhen(s, (input) => input.action === 'admit-result');
  await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  assert.equal(calls.length, 1);
  const events = await s.events(result.operationId);
  assert.equal(of(events, 'result-accepted').length, 0);
  assert.equal(of(events, 'branch-revoked').length, 0);
  assert.equal((await s.get(result.operationId)).decision, null);
  await s.assertReplayEquals(result.operationId);
});

test('an expired authorization fails closed at renewal: the lease is not extended', async () => {
  const s = await scenario({ peers: 1, review: { leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000, completion: { mode: 'first-success' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  const { calls } = expireWhen(s, (input) => input.action === 'renew');
  await s.clock.advance(300);
  const claim: ClaimMessage = { kind: 'claim', action: 'renew', operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1 };
  await publishAs(s, 'alfa', result.operationId, 'claim', claim);
  assert.equal(calls.length, 1);
  const events = await s.events(result.operationId);
  assert.equal(of(events, 'lease-renewed').length, 0);
  assert.equal(of(events, 'branch-revoked').length, 0);
});

const cancelling = { completion: { mode: 'first-success' }, siblings: 'cancel', cancelTimeoutMs: 1000, settlementGraceMs: 3000, timeoutMs: 10_000, leaseMs: 10_000 };

test('an expired authorization fails closed for a cancel request: it is not sent', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { calls } = expireWhen(s, (input) => input.action === 'cancel' && input.peerId === 'bravo');
  const { result } = await s.invoke('k');
  await s.settle();
  assert.equal(calls.length, 1);
  const events = await s.events(result.operationId);
  assert.deepEqual(of(events, 'cancel-dispatched').map((e) => e.receipt), ['rejected']);
});

test('an expired authorization fails closed for a cancel result: it is not recorded', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  assert.deepEqual(of(await s.events(result.operationId), 'cancel-dispatched').map((e) => e.receipt), ['sent']);
  const { calls } = expireWhen(s, (input) => input.action === 'cancel');
  await publishAs(s, 'bravo', result.operationId, 'cancel-result', { kind: 'cancel-result', operationId: result.operationId, branchId: 'bravo', peerId: 'bravo', attempt: 1, fence: 1, outcome: 'stopped' });
  assert.equal(calls.length, 1);
  assert.equal(of(await s.events(result.operationId), 'cancel-result-accepted').length, 0);
});

test('an expired authorization fails closed for a caller cancellation: it is refused as expired and the decision stays open', async () => {
  const s = await scenario({ peers: 2, review: { cancellation: 'caller', completion: { mode: 'all-successful' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  expireWhen(s, (input) => input.action === 'cancel' && input.peerId === null);
  await assert.rejects(s.coordinator.cancel('svc-a', result.operationId), rejects('expired'));
  assert.equal((await s.get(result.operationId)).decision, null);
});

test('an expired authorization fails closed at reassignment: that candidate is not selected', async () => {
  const s = await scenario({ store: 'sqlite', peers: 3, review: { delivery: 'one-eligible', completion: { mode: 'first-success' }, leaseMs: 1000, renewIntervalMs: 400, retryBackoffMs: 100, attempts: 3, timeoutMs: 10_000 } });
  const { calls } = expireWhen(s, (input) => input.action === 'deliver' && input.attempt === 2 && input.peerId === 'bravo');
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1100); // alfa's lease expires; the retry is due after the backoff
  assert.ok(calls.length >= 1);
  const events = await s.events(result.operationId);
  assert.deepEqual(of(events, 'branch-reassigned').map((e) => [e.peerId, e.attempt]), [['charlie', 2]]);
  await s.assertReplayEquals(result.operationId);
});
