/**
 * Spec: "An unavailable, expired or denied decision fails closed" and "current revocation is
 * rechecked before subsequent protected transitions" — an allow whose validity has ended is no
 * allow at any protected boundary: invoke, dispatch, result admission, renewal, cancel requests,
 * cancel results, caller cancellation and reassignment. An expired decision is not a revocation:
 * nothing is admitted or sent on it, and the branch is not terminated for it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deliverToIntake, scenario, answers, namespace, type Scenario } from '../support/scenario.js';
import type { DomainEvent } from '../../src/events/types.js';
import { encodeWire, type ClaimMessage } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { peerBusPermissions } from '../../src/deployment/embedded.js';
import { flushMicrotasks } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import { decisionAt } from '../../src/contract/authorization.js';
import type { AuthorizationInput } from '../../src/adapters/policy/types.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import type { Transition } from '../../src/events/types.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { minimalServeConfig } from '../support/config-fixtures.js';

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

test('an expired candidate authorization fails closed without being taken for a denial: admission is refused as expired and nothing is created; asked again, charlie is admitted', async () => {
  const s = await scenario();
  let expiring = true;
  const { calls } = expireWhen(s, (input) => expiring && input.action === 'deliver' && input.peerId === 'charlie');
  await assert.rejects(s.invoke('k'), rejects('expired'));
  assert.equal(calls.length, 1);
  const ids = [];
  for await (const id of s.store.operationIds()) ids.push(id);
  assert.deepEqual(ids, [], 'no manifest is frozen without charlie');
  expiring = false;
  const { result } = await s.invoke('k');
  assert.deepEqual(
    result.branches.map((b) => b.peerId),
    ['alfa', 'bravo', 'charlie', 'delta', 'echo'],
  );
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
  assert.deepEqual(
    (await s.get(result.operationId)).branches.map((b) => b.status),
    ['pending', 'pending'],
  );
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

const cancelling = {
  completion: { mode: 'first-success' },
  siblings: 'cancel',
  cancelTimeoutMs: 1000,
  settlementGraceMs: 3000,
  timeoutMs: 10_000,
  leaseMs: 10_000,
};

test('an expired authorization fails closed for a cancel request: it is not sent', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { calls } = expireWhen(s, (input) => input.action === 'cancel' && input.peerId === 'bravo');
  const { result } = await s.invoke('k');
  await s.settle();
  assert.equal(calls.length, 1);
  const events = await s.events(result.operationId);
  assert.deepEqual(
    of(events, 'cancel-dispatched').map((e) => e.receipt),
    ['rejected'],
  );
});

test('an expired authorization fails closed for a cancel result: it is not recorded', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  assert.deepEqual(
    of(await s.events(result.operationId), 'cancel-dispatched').map((e) => e.receipt),
    ['sent'],
  );
  const { calls } = expireWhen(s, (input) => input.action === 'cancel');
  await publishAs(s, 'bravo', result.operationId, 'cancel-result', {
    kind: 'cancel-result',
    operationId: result.operationId,
    branchId: 'bravo',
    peerId: 'bravo',
    attempt: 1,
    fence: 1,
    outcome: 'stopped',
  });
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

const reassigning = {
  delivery: 'one-eligible',
  completion: { mode: 'first-success' },
  leaseMs: 1000,
  renewIntervalMs: 400,
  retryBackoffMs: 100,
  attempts: 3,
  timeoutMs: 10_000,
};

test('an expired authorization fails closed at reassignment: the candidate is neither selected nor passed over; the reassignment waits and asks it again', async () => {
  const s = await scenario({ store: 'sqlite', peers: 3, review: reassigning });
  // bravo's first two answers for the retry arrive already expired; the third is a valid allow.
  let asked = 0;
  const { calls } = expireWhen(s, (input) => input.action === 'deliver' && input.attempt === 2 && input.peerId === 'bravo' && asked++ < 2);
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1100); // alfa's lease expires; the retry is due after the backoff
  assert.equal(calls.length, 1);
  let events = await s.events(result.operationId);
  assert.equal(of(events, 'branch-reassigned').length, 0, 'nothing is assigned on an expired allow, and charlie is not asked instead');
  await s.clock.advance(1000);
  await s.settle();
  assert.equal(calls.length, 2, 'bravo is asked again');
  events = await s.events(result.operationId);
  assert.deepEqual(
    of(events, 'branch-reassigned').map((e) => [e.peerId, e.attempt]),
    [['bravo', 2]],
    'still the first peer in selection order, on its fresh allow',
  );
  assert.equal(of(events, 'branch-failed').length, 0);
  await s.assertReplayEquals(result.operationId);
});

test('an allow that keeps arriving expired at reassignment never fails the branch as having no eligible peer: the deadline closes the operation as declared', async () => {
  const s = await scenario({ store: 'sqlite', peers: 2, review: { ...reassigning, timeoutMs: 3000 } });
  const { calls } = expireWhen(s, (input) => input.action === 'deliver' && input.attempt === 2 && input.peerId === 'bravo');
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1100);
  await s.clock.advance(2000);
  await s.settle();
  assert.ok(calls.length >= 2, `asked again while waiting: ${calls.length}`);
  const events = await s.events(result.operationId);
  assert.equal(of(events, 'branch-failed').length, 0, 'an expiry is not a denial');
  assert.equal(of(events, 'branch-reassigned').length, 0);
  const view = await s.get(result.operationId);
  assert.equal(view.decision?.reason, 'timeout');
  await s.assertReplayEquals(result.operationId);
});

// ── authorization validity must cover the guarded transition ────────────────

/** A raw delivery of a peer message straight to intake, recording how it is answered (ack or nak). */
const deliver = deliverToIntake;

/**
 * The store reaches its serialization point for the first transition `matches` accepts only at
 * `atMs()` (a slow append); the guards of the transitions it was asked to append are kept.
 */
function slowAppendWhen(s: Scenario, matches: (t: Transition) => boolean, atMs: () => number): { guards: Transition['timeGuard'][] } {
  const store = s.store;
  const guards: Transition['timeGuard'][] = [];
  let slowed = false;
  const slow: EventStore = Object.assign(Object.create(store) as EventStore, {
    append: async (id: string, revision: string, t: Transition) => {
      if (matches(t)) {
        guards.push(t.timeGuard);
        if (!slowed) {
          slowed = true;
          s.clock.set(Math.max(s.clock.nowMs(), atMs()));
        }
      }
      return store.append(id, revision, t);
    },
  });
  s.coordinator.deps.store = slow;
  return { guards };
}

const counted = async (s: Scenario, reason: string) =>
  (await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
const storeErrors = async (s: Scenario) => (await s.coordinator.metrics.storeErrors.get()).values.reduce((n, v) => n + v.value, 0);
const has = (type: DomainEvent['type']) => (t: Transition) => t.events.some((e) => e.type === type);

test('authorization validity must cover the guarded result admission: a result whose authorization expires between decision and commit is not admitted on it, and is decided again on redelivery', async () => {
  const ttlMs = 100;
  const s = await scenario({ peers: 2, review: { completion: { mode: 'first-success' } }, embedded: { policyTtlMs: ttlMs } });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  const decidedAtMs = s.clock.nowMs();
  // The commit reaches the store exactly when the admit-result decision stops being valid.
  const { guards } = slowAppendWhen(s, has('result-accepted'), () => decidedAtMs + ttlMs);
  const message = { kind: 'result', operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, result: { verdict: 'approve' } };
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', message), ['nak'], 'handed back for redelivery');
  assert.equal(guards[0]?.notAfterMs, decidedAtMs + ttlMs, "the admission's guard ends where the decision's validity does");
  let events = await s.events(op);
  assert.equal(of(events, 'result-accepted').length, 0, 'not admitted on the expired decision');
  assert.equal(of(events, 'result-rejected').length, 0, 'nor rejected: the result itself is fine');
  assert.equal(of(events, 'branch-revoked').length, 0, 'an expiry is not a revocation');
  assert.equal(await counted(s, 'authorization-expired'), 1);
  assert.equal(await storeErrors(s), 0);
  // The redelivery is decided with a fresh decision, and admitted within its validity.
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', message), ['ack']);
  events = await s.events(op);
  assert.equal(of(events, 'result-accepted').length, 1);
  assert.equal((await s.get(op)).decision?.outcome, 'success');
  await s.assertReplayEquals(op);
});

test('authorization validity must cover the guarded renewal: a renewal whose authorization expires between decision and commit does not extend the lease', async () => {
  const ttlMs = 100;
  const s = await scenario({
    peers: 1,
    embedded: { policyTtlMs: ttlMs },
    review: { leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000, completion: { mode: 'first-success' } },
  });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  await s.clock.advance(400);
  const leaseBefore = (await s.coordinator.record(op))!.branches['alfa']!.leaseUntilMs;
  const decidedAtMs = s.clock.nowMs();
  const { guards } = slowAppendWhen(s, has('lease-renewed'), () => decidedAtMs + ttlMs);
  const claim: ClaimMessage = { kind: 'claim', action: 'renew', operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1 };
  assert.deepEqual(await deliver(s, 'claim', op, 'alfa', claim), ['nak']);
  assert.equal(guards[0]?.notAfterMs, decidedAtMs + ttlMs);
  assert.equal(of(await s.events(op), 'lease-renewed').length, 0, 'the lease is not extended on the expired decision');
  assert.equal((await s.coordinator.record(op))!.branches['alfa']!.leaseUntilMs, leaseBefore);
  assert.equal(await counted(s, 'claim-authorization-expired'), 1);
  assert.equal(await storeErrors(s), 0);
  // Redelivered, it is decided with a fresh decision.
  assert.deepEqual(await deliver(s, 'claim', op, 'alfa', claim), ['ack']);
  assert.equal(of(await s.events(op), 'lease-renewed').length, 1);
  await s.assertReplayEquals(op);
});

test('authorization validity must cover the guarded cancel result: one whose authorization expires between decision and commit is not recorded on it', async () => {
  const ttlMs = 100;
  const s = await scenario({ peers: 2, review: cancelling, embedded: { policyTtlMs: ttlMs } });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  const decidedAtMs = s.clock.nowMs();
  const { guards } = slowAppendWhen(s, has('cancel-result-accepted'), () => decidedAtMs + ttlMs);
  const reply = { kind: 'cancel-result', operationId: op, branchId: 'bravo', peerId: 'bravo', attempt: 1, fence: 1, outcome: 'stopped' };
  assert.deepEqual(await deliver(s, 'cancel-result', op, 'bravo', reply), ['nak']);
  assert.equal(guards[0]?.notAfterMs, decidedAtMs + ttlMs);
  assert.equal(of(await s.events(op), 'cancel-result-accepted').length, 0);
  assert.equal(await counted(s, 'cancel-result-authorization-expired'), 1);
  assert.deepEqual(await deliver(s, 'cancel-result', op, 'bravo', reply), ['ack']);
  assert.equal((await s.get(op)).settlement.status, 'complete');
  await s.assertReplayEquals(op);
});

test('authorization validity must cover the guarded caller cancellation: one whose authorization expires before the commit is refused as expired', async () => {
  const ttlMs = 100;
  const s = await scenario({ peers: 2, embedded: { policyTtlMs: ttlMs }, review: { cancellation: 'caller', completion: { mode: 'all-successful' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  const decidedAtMs = s.clock.nowMs();
  const { guards } = slowAppendWhen(s, has('decision-closed'), () => decidedAtMs + ttlMs);
  await assert.rejects(s.coordinator.cancel('svc-a', result.operationId), rejects('expired'));
  assert.equal(guards[0]?.notAfterMs, decidedAtMs + ttlMs);
  assert.equal((await s.get(result.operationId)).decision, null, 'the decision stays open');
  await s.assertReplayEquals(result.operationId);
});

test('authorization validity must cover the guarded reassignment: a new assignment whose allow expires before the commit is made again on a fresh decision', async () => {
  const ttlMs = 50;
  const s = await scenario({
    store: 'sqlite',
    peers: 3,
    embedded: { policyTtlMs: ttlMs },
    review: {
      delivery: 'one-eligible',
      completion: { mode: 'first-success' },
      leaseMs: 1000,
      renewIntervalMs: 400,
      retryBackoffMs: 100,
      attempts: 3,
      timeoutMs: 10_000,
    },
  });
  const policy = s.policy;
  const real = policy.authorize.bind(policy);
  const retries: number[] = [];
  policy.authorize = async (input) => {
    const decision = await real(input);
    if (input.action === 'deliver' && input.attempt === 2 && input.branchId !== null && retries.length < 8) retries.push(decision.expiresAtMs);
    return decision;
  };
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  const { guards } = slowAppendWhen(s, has('branch-reassigned'), () => retries[0] ?? 0);
  await s.clock.advance(1100); // alfa's lease ends at 1000; the retry is due at 1100
  await s.clock.advance(1);
  await s.settle();
  assert.ok(retries.length >= 2, `asked again for a fresh decision: ${retries.join(', ')}`);
  assert.equal(guards[0]?.notAfterMs, retries[0], "the reassignment's guard ends where the allow it relied on does");
  const stored = await s.store.read(op);
  assert.equal(stored.kind, 'ok');
  if (stored.kind !== 'ok') return;
  const reassigned = stored.transitions.filter((t) => has('branch-reassigned')(t.transition));
  assert.equal(reassigned.length, 1);
  assert.ok(reassigned[0]!.committedAtMs < reassigned[0]!.transition.timeGuard.notAfterMs);
  assert.ok(reassigned[0]!.transition.timeGuard.notAfterMs > retries[0]!, 'committed on the fresh allow, not the expired one');
  const events = stored.transitions.flatMap((t) => t.transition.events);
  assert.deepEqual(
    of(events, 'branch-reassigned').map((e) => [e.peerId, e.attempt]),
    [['bravo', 2]],
    'still the first peer in selection order',
  );
  assert.equal(of(events, 'branch-failed').length, 0);
  await s.assertReplayEquals(op);
});

test('an authorization decision that has expired at the recheck is counted as authorization-expired, not as a store error, and the message is handed back', async () => {
  const s = await scenario({ peers: 2, review: { completion: { mode: 'first-success' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  expireWhen(s, (input) => input.action === 'admit-result');
  const message = { kind: 'result', operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, result: { verdict: 'approve' } };
  assert.deepEqual(await deliver(s, 'result', result.operationId, 'alfa', message), ['nak']);
  assert.equal(await counted(s, 'authorization-expired'), 1);
  assert.equal(await storeErrors(s), 0, 'no store error was counted');
});

test('a policy rule names only actions a policy decides: the five protected actions load, a read is refused when the config is read', () => {
  const parse = (actions: string[]) => () =>
    parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(minimalServeConfig({ policy: { rules: [{ effect: 'allow', actions }] } }))), '/tmp');
  assert.deepEqual(parse(['invoke', 'deliver', 'admit-result', 'renew', 'cancel'])().policy?.rules[0]?.actions, [
    'invoke',
    'deliver',
    'admit-result',
    'renew',
    'cancel',
  ]);
  // No read is ever authorized (an operation is answered to its own principal only): a rule naming one would allow or deny nothing.
  assert.throws(
    parse(['read']),
    (error: unknown) => error instanceof AdapterError && error.kind === 'invalid-input' && /\/policy\/rules\/0\/actions\/0/.test(error.message),
  );
});

// ── a policy that cannot answer is neither an allow nor a denial ───────────

/** The policy throws for reassignment decisions (deliver, attempt 2) while `down.now` holds; the calls made meanwhile are counted. */
function downForReassignment(s: Scenario): { now: boolean; calls: number } {
  const down = { now: true, calls: 0 };
  const policy = s.policy;
  const real = policy.authorize.bind(policy);
  policy.authorize = async (input) => {
    if (down.now && input.action === 'deliver' && input.attempt === 2) {
      down.calls++;
      throw new Error('policy service unreachable');
    }
    return real(input);
  };
  return down;
}

test('a policy that cannot answer at reassignment fails nothing: the branch waits, then goes to the first candidate in selection order', async () => {
  const s = await scenario({ store: 'sqlite', peers: 3, review: reassigning });
  const { result } = await s.invoke('k');
  await s.settle();
  const down = downForReassignment(s);
  await s.clock.advance(1100); // alfa's lease ends at 1000; the retry is due at 1100, and the policy is down
  await s.clock.advance(1000);
  const waiting = await s.events(result.operationId);
  assert.equal(of(waiting, 'branch-failed').length, 0, 'an outage is not "no eligible peer"');
  assert.equal(of(waiting, 'branch-reassigned').length, 0, 'nor a reason to pass over bravo');
  assert.equal((await s.get(result.operationId)).decision, null);
  assert.ok(down.calls >= 2 && down.calls <= 20, `asked again, after a delay each time (${down.calls} calls in 1 s)`);
  down.now = false;
  // The retries back off (100, 200, 400 ms after each failure…): the next one, 800 ms after the last at 1800, finds the policy back.
  await s.clock.advance(600);
  const events = await s.events(result.operationId);
  assert.deepEqual(
    of(events, 'branch-reassigned').map((e) => [e.peerId, e.attempt]),
    [['bravo', 2]],
  );
  assert.equal(of(events, 'branch-failed').length, 0);
  await s.assertReplayEquals(result.operationId);
});

test('a policy that cannot answer at reassignment does not hold back the deadline: the operation times out as declared', async () => {
  const s = await scenario({ store: 'sqlite', peers: 3, review: { ...reassigning, onTimeout: 'failed' } });
  const { result } = await s.invoke('k');
  await s.settle();
  downForReassignment(s);
  await s.clock.advance(10_000);
  await s.settle();
  const decision = (await s.get(result.operationId)).decision;
  assert.deepEqual([decision?.outcome, decision?.reason], ['failed', 'timeout']);
  assert.equal(of(await s.events(result.operationId), 'branch-failed').length, 0);
  await s.assertReplayEquals(result.operationId);
});

test('a policy that cannot answer for a cancel request refuses nothing: the cancel is sent once it answers, and a stopped reply settles the operation', async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling, cancelTimeoutMs: 5000 } });
  await s.addPeer('alfa', { review: answers('approve') });
  const policy = s.policy;
  const real = policy.authorize.bind(policy);
  let down = true;
  policy.authorize = async (input) => {
    if (down && input.action === 'cancel') throw new Error('policy service unreachable');
    return real(input);
  };
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  assert.equal((await s.get(op)).decision?.outcome, 'success');
  assert.deepEqual(of(await s.events(op), 'cancel-dispatched'), [], 'not recorded as rejected while the policy is down');
  down = false;
  await s.clock.advance(1000); // the reconcile, within the cancel timeout
  assert.deepEqual(
    of(await s.events(op), 'cancel-dispatched').map((e) => [e.branchId, e.receipt]),
    [['bravo', 'sent']],
  );
  await publishAs(s, 'bravo', op, 'cancel-result', {
    kind: 'cancel-result',
    operationId: op,
    branchId: 'bravo',
    peerId: 'bravo',
    attempt: 1,
    fence: 1,
    outcome: 'stopped',
  });
  assert.equal((await s.get(op)).settlement.status, 'complete');
  await s.assertReplayEquals(op);
});

test('a policy that cannot answer at result admission is counted as a policy error, not as a store error, and the result waits for redelivery', async () => {
  const s = await scenario({ peers: 2, review: { completion: { mode: 'first-success' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  const policy = s.policy;
  const real = policy.authorize.bind(policy);
  let down = true;
  policy.authorize = async (input) => {
    if (down && input.action === 'admit-result') throw new Error('policy service unreachable');
    return real(input);
  };
  const message = { kind: 'result', operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, result: { verdict: 'approve' } };
  assert.deepEqual(await deliver(s, 'result', result.operationId, 'alfa', message), ['nak'], 'handed back, not admitted and not dropped');
  assert.equal(await storeErrors(s), 0, 'no store error was counted: the store did not fail');
  const policyErrors = (await s.coordinator.metrics.policyErrors.get()).values.map((v) => [v.labels.action, v.value]);
  assert.deepEqual(policyErrors, [['admit-result', 1]]);
  down = false;
  assert.deepEqual(await deliver(s, 'result', result.operationId, 'alfa', message), ['ack'], 'admitted once the policy answers');
  assert.equal((await s.get(result.operationId)).decision?.outcome, 'success');
});
