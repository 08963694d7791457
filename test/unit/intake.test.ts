/**
 * Spec: "Result admission and decision" (parse the address and payload, resolve correlation,
 * reject wrong operation, late and expired-lease results), "Identity, context and authorization"
 * (AuthorizationInput, attempts in 1..16) and "Adapter behavior and errors" — peer message intake
 * (src/runtime/intake.ts): how each result, claim and cancel result is answered (acknowledged, or
 * handed back for redelivery), the reason it is counted and logged under, and what is stored.
 * Messages go straight to intake with their acknowledgement recorded; memory store, virtual clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deliverToIntake, fillerTransition, scenario, namespace, type Scenario, type ScenarioOptions } from '../support/scenario.js';
import type { DomainEvent, Transition } from '../../src/events/types.js';
import type { JsonObject } from '../../src/contract/json.js';
import { encodeWire, type WireMessage } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { VirtualClock, flushMicrotasks } from '../../src/contract/clock.js';
import { limits } from '../../src/contract/limits.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import type { AuthorizationInput } from '../../src/adapters/policy/types.js';
import type { Logger } from '../../src/runtime/operation-log.js';
import { onPeerMessage } from '../../src/runtime/intake.js';

const of = <T extends DomainEvent['type']>(events: DomainEvent[], type: T) => events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);
const counted = async (s: Scenario, reason: string) =>
  (await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
const storeErrorsAt = async (s: Scenario, stage: string) =>
  (await s.coordinator.metrics.storeErrors.get()).values.find((v) => v.labels.stage === stage)?.value ?? 0;
const transitionsOf = async (s: Scenario, op: string): Promise<Transition[]> => {
  const read = await s.store.read(op);
  assert.equal(read.kind, 'ok');
  return read.kind === 'ok' ? read.transitions.map((t) => t.transition) : [];
};

const approve = { verdict: 'approve' };
const result = (op: string, peer: string, extra: object = {}) => ({
  kind: 'result',
  operationId: op,
  branchId: peer,
  peerId: peer,
  attempt: 1,
  fence: 1,
  result: approve,
  ...extra,
});
const claim = (op: string, peer: string, action: 'renew' | 'release', extra: object = {}) => ({
  kind: 'claim',
  action,
  operationId: op,
  branchId: peer,
  peerId: peer,
  attempt: 1,
  fence: 1,
  ...extra,
});

/**
 * One message straight to intake, as the coordinator's subscription hands it over: on the peer's
 * own subject unless `subject` is given. Answers how it was acknowledged (`ack`, `nak`), once
 * intake is done with it.
 */
const deliver = deliverToIntake;

/** A logger that keeps every line's fields. */
function capturingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const keep = (fields: object) => void lines.push(fields as Record<string, unknown>);
  return { logger: { debug: keep, info: keep, warn: keep, error: keep }, lines };
}

async function opened(options: ScenarioOptions = {}): Promise<{ s: Scenario; op: string }> {
  const s = await scenario({ peers: 3, ...options });
  const { result: invoked } = await s.invoke('k');
  await s.settle();
  return { s, op: invoked.operationId };
}

/** A second coordinator over the first one's store and clock: it holds nothing in memory and loads each operation from the store. */
const restarted = (first: Scenario, options: ScenarioOptions = {}) =>
  scenario({ peers: 3, ...options, embedded: { ...options.embedded, store: first.store, clock: first.clock } });

/** The store with some of its methods answering otherwise (the rest are the store's own). */
function storeWith(store: EventStore, overrides: Partial<EventStore>): EventStore {
  return Object.assign(Object.create(store) as EventStore, overrides);
}

// ── parse, correlation to an operation ─────────────────────────────────────

test('a message whose subject is not a peer subject of its kind is malformed: counted, logged with its kind, acknowledged, nothing stored', async () => {
  const { logger, lines } = capturingLogger();
  const { s, op } = await opened({ embedded: { logger } });
  const before = (await transitionsOf(s, op)).length;
  // A result handed to the result path on the operation's claim subject.
  const answered = await deliver(s, 'result', op, 'alfa', result(op, 'alfa'), subjectFor(namespace, 'review', op, 'claim', 'alfa'));
  assert.deepEqual(answered, ['ack']);
  assert.equal(await counted(s, 'malformed'), 1);
  assert.equal((await transitionsOf(s, op)).length, before);
  const line = lines.find((l) => l.event === 'message-rejected');
  assert.equal(line?.reason, 'malformed');
  assert.equal(line?.messageKind, 'result');
});

test('a payload that does not parse is malformed, logged with the operation and peer its subject names', async () => {
  const { logger, lines } = capturingLogger();
  const { s, op } = await opened({ embedded: { logger } });
  const before = (await transitionsOf(s, op)).length;
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', new TextEncoder().encode('{"kind":"result",')), ['ack']);
  assert.equal(await counted(s, 'malformed'), 1);
  assert.equal((await transitionsOf(s, op)).length, before, 'nothing of it is recorded');
  const line = lines.find((l) => l.event === 'message-rejected');
  assert.deepEqual(
    { reason: line?.reason, messageKind: line?.messageKind, peer: line?.peer, operationId: line?.operationId },
    { reason: 'malformed', messageKind: 'result', peer: 'alfa', operationId: op },
  );
});

test('a result for another operation than its subject names is rejected as wrong-operation: counted, acknowledged, recorded in neither', async () => {
  const { s, op } = await opened();
  const other = (await s.invoke('k2')).result.operationId;
  await s.settle();
  const before = [(await transitionsOf(s, op)).length, (await transitionsOf(s, other)).length];
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(other, 'alfa')), ['ack']);
  assert.equal(await counted(s, 'wrong-operation'), 1);
  assert.deepEqual([(await transitionsOf(s, op)).length, (await transitionsOf(s, other)).length], before);
});

test('what the subject and the payload alone can refuse is refused before the store is read: another namespace or interaction, another kind, a payload that does not parse, another operation', async () => {
  const { s, op } = await opened();
  // Not held in memory: any load of it would read the store.
  s.coordinator.kernel.forget(op);
  const store = s.coordinator.deps.store;
  const read = store.read.bind(store);
  let reads = 0;
  store.read = async (id) => (reads++, read(id));
  try {
    const cases: [string, object | Uint8Array, string?][] = [
      ['malformed', result(op, 'alfa'), subjectFor('other.ns', 'review', op, 'result', 'alfa')],
      ['malformed', result(op, 'alfa'), subjectFor(namespace, 'sealed', op, 'result', 'alfa')],
      ['malformed', result(op, 'alfa'), subjectFor(namespace, 'review', op, 'claim', 'alfa')],
      ['malformed', new TextEncoder().encode('{"kind":"result",')],
      ['malformed', { ...result(op, 'alfa'), extra: true }],
      ['wrong-operation', result(`op${'cd'.repeat(32)}`, 'alfa')],
    ];
    for (const [reason, body, subject] of cases) {
      const before = await counted(s, reason);
      assert.deepEqual(await deliver(s, 'result', op, 'alfa', body, subject), ['ack']);
      assert.equal(await counted(s, reason), before + 1, reason);
    }
    assert.equal(reads, 0, 'no store read for any of them');
    // Whether a well-formed message's subject is the operation's own needs the operation: one read.
    assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
    assert.equal(reads, 1);
  } finally {
    store.read = read;
  }
});

test('a well-formed message naming an operation on another subject than its own leaves no trace but its count: the operation is not taken into memory, its timers are not armed, nothing is published for it', async () => {
  const { s: first, op } = await opened();
  // A coordinator that holds nothing in memory, sharing the store and clock, and also subscribed
  // to another namespace's result subjects: a peer publishing there names an operation of demo.v1.lab.
  const s = await restarted(first);
  const timersBefore = s.clock.pendingTimers();
  const publishedBefore = s.bus.stats.published;
  const answered: string[] = [];
  const other = 'other.v1.lab';
  await onPeerMessage(s.coordinator, other, 'review', 'result', {
    subject: subjectFor(other, 'review', op, 'result', 'alfa'),
    data: encodeWire(result(op, 'alfa') as WireMessage),
    headers: {},
    redelivered: false,
    ack: async () => void answered.push('ack'),
    nak: async () => void answered.push('nak'),
  });
  await s.settle();
  assert.deepEqual(answered, ['ack']);
  assert.equal(await counted(s, 'wrong-subject'), 1);
  assert.equal(s.coordinator.kernel.cached(op), undefined, 'the operation is not held');
  assert.deepEqual(s.coordinator.kernel.held(), []);
  assert.equal(s.clock.pendingTimers(), timersBefore, 'no timer of it is armed');
  assert.equal(s.bus.stats.published, publishedBefore, 'nothing of it is reconciled or published');
  // The same message on the operation's own subject loads it, as before.
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.notEqual(s.coordinator.kernel.cached(op), undefined);
});

test('a message for an operation the store does not hold is unknown-operation: counted and acknowledged', async () => {
  const { s } = await opened();
  const unknown = `op${'ab'.repeat(32)}`;
  assert.deepEqual(await deliver(s, 'result', unknown, 'alfa', result(unknown, 'alfa')), ['ack']);
  assert.equal(await counted(s, 'unknown-operation'), 1);
  assert.equal((await s.store.read(unknown)).kind, 'not-found', 'nothing is created for it');
});

test('a message for an operation whose key expired (tombstoned) is unknown-operation: acknowledged, since waiting changes nothing', async () => {
  const { s: first, op } = await opened();
  assert.equal((await first.store.tombstone(op)).kind, 'ok');
  const s = await restarted(first);
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.equal(await counted(s, 'unknown-operation'), 1);
  assert.equal(await storeErrorsAt(s, 'load-result'), 0, 'not a store failure');
});

test('a message for an operation whose contract is not deployed on this coordinator is unknown-operation and acknowledged', async () => {
  const { s: first, op } = await opened();
  // This coordinator serves another version of the interaction (another bundle digest).
  const s = await restarted(first, { review: { timeoutMs: 7000 } });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.equal(await counted(s, 'unknown-operation'), 1);
  assert.equal(await storeErrorsAt(s, 'load-result'), 0);
});

test('a message whose operation the store cannot read now is handed back for redelivery, counted as a store error (load-result), not rejected', async () => {
  const { s: first, op } = await opened();
  const s = await restarted(first);
  const store = s.coordinator.deps.store;
  s.coordinator.deps.store = storeWith(store, { read: async () => ({ kind: 'unavailable', description: 'disk gone' }) });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['nak']);
  assert.equal(await storeErrorsAt(s, 'load-result'), 1);
  assert.equal((await s.coordinator.metrics.rejections.get()).values.length, 0, 'no rejection counted');
  // The redelivery, once the store answers again, is admitted.
  s.coordinator.deps.store = store;
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.equal(of(await s.events(op), 'result-accepted').length, 1);
});

test('a result whose append the store cannot take is handed back for redelivery, counted as a store error (admit-result), not as an expired authorization', async () => {
  const { s, op } = await opened();
  const store = s.coordinator.deps.store;
  s.coordinator.deps.store = storeWith(store, { append: async () => ({ kind: 'unavailable', description: 'disk gone' }) });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['nak']);
  assert.equal(await storeErrorsAt(s, 'admit-result'), 1);
  assert.equal(await counted(s, 'authorization-expired'), 0);
  assert.equal(of(await s.events(op), 'result-accepted').length, 0);
  s.coordinator.deps.store = store;
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.equal(of(await s.events(op), 'result-accepted').length, 1);
});

// ── oversized results ──────────────────────────────────────────────────────

const smallResults = { budgets: { resultBytesMax: 1024 } };
const big = { verdict: 'approve', note: 'x'.repeat(2000) };

test('a result over the result budget is a recorded rejection with its size and the limit: counted, logged, nothing of it stored, the branch still open', async () => {
  const { logger, lines } = capturingLogger();
  const { s, op } = await opened({ embedded: { ...smallResults, logger } });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa', { result: big })), ['ack']);
  const events = await s.events(op);
  const rejected = of(events, 'result-rejected');
  assert.deepEqual(
    rejected.map((e) => [e.reason, e.branchId, e.peerId, e.attempt, e.fence]),
    [['oversized', 'alfa', 'alfa', 1, 1]],
  );
  const bytes = Buffer.byteLength(JSON.stringify(big));
  assert.equal(rejected[0]?.detail, `result is ${bytes} bytes; the limit is 1024`);
  assert.equal(of(events, 'result-accepted').length, 0);
  assert.ok(!JSON.stringify(await transitionsOf(s, op)).includes('xxxxxxxx'), 'no byte of the result is stored');
  assert.equal((await s.get(op)).branches.find((b) => b.branchId === 'alfa')?.status, 'pending');
  assert.equal(await counted(s, 'oversized'), 1);
  const line = lines.find((l) => l.event === 'message-rejected' && l.reason === 'oversized');
  assert.deepEqual(
    { messageKind: line?.messageKind, peer: line?.peer, operationId: line?.operationId, principal: line?.principal },
    { messageKind: 'result', peer: 'alfa', operationId: op, principal: 'svc-a' },
  );
  await s.assertReplayEquals(op);
});

test('an oversized result from a publisher that does not verify is rejected for that (wrong-peer), not recorded as oversized', async () => {
  const { s, op } = await opened({ embedded: smallResults });
  // alfa publishes, on its own subject, a result that names bravo's branch and peer.
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'bravo', { result: big })), ['ack']);
  assert.deepEqual(
    of(await s.events(op), 'result-rejected').map((e) => e.reason),
    ['wrong-peer'],
  );
  assert.equal(await counted(s, 'oversized'), 0);
});

test('an oversized result from a peer the policy no longer allows revokes its branch like any result of that peer', async () => {
  const { s, op } = await opened({ embedded: smallResults });
  s.policy.revoke({ peerId: 'alfa' });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa', { result: big })), ['ack']);
  const events = await s.events(op);
  assert.deepEqual(
    of(events, 'branch-revoked').map((e) => e.branchId),
    ['alfa'],
  );
  assert.deepEqual(of(events, 'result-rejected'), []);
  assert.equal(await counted(s, 'oversized'), 0);
});

test('an oversized result for a settled operation is counted as oversized without a policy call, and nothing is appended', async () => {
  const { s, op } = await opened({ review: { completion: { mode: 'first-success' } }, embedded: smallResults });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.equal((await s.get(op)).phase, 'settled');
  const before = (await transitionsOf(s, op)).length;
  const asked: string[] = [];
  const authorize = s.policy.authorize.bind(s.policy);
  s.policy.authorize = (input) => (asked.push(input.action), authorize(input));
  assert.deepEqual(await deliver(s, 'result', op, 'bravo', result(op, 'bravo', { result: big })), ['ack']);
  assert.equal(await counted(s, 'oversized'), 1);
  assert.deepEqual(asked, [], 'a settled record answers without asking the policy');
  assert.equal((await transitionsOf(s, op)).length, before);
});

// ── budgets: the log, and the store's own limits ───────────────────────────

/** Filler transitions appended straight to the store, as an earlier writer would have, until `roomBytes` of the ordinary byte budget is left. */
async function fillTo(s: Scenario, op: string, ordinaryBytes: number, roomBytes: number): Promise<void> {
  const read = await s.store.read(op);
  assert.ok(read.kind === 'ok');
  let revision = read.revision;
  let used = read.transitions.reduce((n, t) => n + Buffer.byteLength(JSON.stringify(t.transition)), 0);
  for (let k = 0; used < ordinaryBytes - roomBytes; k++) {
    const emptyBytes = Buffer.byteLength(JSON.stringify(fillerTransition(op, '')));
    const detail = `filler ${k} `.padEnd(Math.min(1000, ordinaryBytes - roomBytes - used - emptyBytes), '.');
    const transition = fillerTransition(op, detail);
    const outcome = await s.store.append(op, revision, transition);
    assert.equal(outcome.kind, 'ok', JSON.stringify(outcome));
    if (outcome.kind === 'ok') revision = outcome.revision;
    used += Buffer.byteLength(JSON.stringify(transition));
  }
}

const tightLog = {
  resultBytesMax: 1024,
  transitionBytesMax: limits.transitionOverheadBytesMax + 1024,
  recordBytesMax: 4 * (limits.transitionOverheadBytesMax + 1024),
};
/** What ordinary transitions of a three-branch operation may add up to under tightLog (log-budget.ts logLimits). */
const ordinaryBytes = tightLog.recordBytesMax - 3 * limits.closingBytesPerBranch - tightLog.transitionBytesMax;

test('a result the log has no room for is refused as log-budget: counted and acknowledged (never redelivered forever), nothing of it stored', async () => {
  const { s: first, op } = await opened({ embedded: { budgets: tightLog } });
  await fillTo(first, op, ordinaryBytes, 100);
  const s = await restarted(first, { embedded: { budgets: tightLog } });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.equal(await counted(s, 'log-budget'), 1);
  assert.equal(of(await s.events(op), 'result-accepted').length, 0);
  assert.equal((await s.get(op)).decision?.reason, 'log-budget-exhausted');
});

test("results committed together that the log's room takes only in part are each answered for themselves: the one that fits is accepted, the one after it refused", async () => {
  const { s: first, op } = await opened({ embedded: { budgets: tightLog } });
  // Room for one result's transition (about 430 bytes) and not for two together (about 740).
  await fillTo(first, op, ordinaryBytes, 2000);
  const read = await first.store.read(op);
  assert.ok(read.kind === 'ok');
  const used = read.transitions.reduce((n, t) => n + Buffer.byteLength(JSON.stringify(t.transition)), 0);
  const last = fillerTransition(op, '');
  const lastEvent = last.events[0];
  assert.ok(lastEvent?.type === 'result-rejected');
  lastEvent.detail = 'x'.repeat(ordinaryBytes - 600 - used - Buffer.byteLength(JSON.stringify(last)));
  assert.equal((await first.store.append(op, read.revision, last)).kind, 'ok');
  const s = await restarted(first, { embedded: { budgets: tightLog } });
  const answered = await Promise.all(['alfa', 'bravo'].map((peer) => deliver(s, 'result', op, peer, result(op, peer))));
  assert.deepEqual(answered, [['ack'], ['ack']]);
  const events = await s.events(op);
  assert.deepEqual(
    of(events, 'result-accepted').map((e) => e.branchId),
    ['alfa'],
    'the first result fits on its own and is taken',
  );
  assert.equal(await counted(s, 'log-budget'), 1, 'only the result after it is refused');
  assert.equal((await s.get(op)).decision?.reason, 'log-budget-exhausted');
  await s.assertReplayEquals(op);
});

test('a claim the log has no room for is refused as claim-log-budget and acknowledged', async () => {
  // Two of three: releasing one claim leaves the rule open, so the release is an ordinary transition.
  const options = { review: { completion: { mode: 'quorum', count: 2 } }, embedded: { budgets: tightLog } };
  const { s: first, op } = await opened(options);
  await fillTo(first, op, ordinaryBytes, 100);
  const s = await restarted(first, options);
  assert.deepEqual(await deliver(s, 'claim', op, 'alfa', claim(op, 'alfa', 'release')), ['ack']);
  assert.equal(await counted(s, 'claim-log-budget'), 1);
  assert.equal(of(await s.events(op), 'claim-ended').length, 0);
});

test('a result in budget is never refused by the store for its size: over a store taking less than a result of the budget needs, the coordinator refuses to start', async () => {
  // Before, intake let such a result through and the store refused it: acknowledged, counted as
  // oversized, recorded nowhere, its branch left waiting (test/unit/store-transition-limit.test.ts).
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock, limits: { transitionBytesMax: 16 * 1024 } });
  await assert.rejects(
    opened({ embedded: { clock, store } }),
    (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input' && error.message.includes('16384 bytes'),
  );
});

test('a claim in budget is never refused by the store for its log full: over a store holding fewer transitions than an admission and its closing reserve, the coordinator refuses to start', async () => {
  // Before, the coordinator started over such a store and its claims, results and closing transitions
  // were refused by the store once the log held its count (test/unit/store-transition-count.test.ts).
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock, limits: { transitionsMax: 2 } });
  await assert.rejects(
    opened({ embedded: { clock, store } }),
    (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input' && error.message.includes('at most 2 transitions'),
  );
});

/**
 * The store refusing, as a JetStream server whose max_payload was lowered under a running store
 * does, every transition that takes a result (or ends a claim) of `peer`: a refusal no budget of
 * the coordinator's could foresee.
 */
function refusing(store: EventStore, peer: string): EventStore {
  const refused = (t: Transition) => t.events.some((e) => (e.type === 'result-accepted' || e.type === 'claim-ended') && e.branchId === peer);
  return storeWith(store, {
    append: (operationId, revision, transition, after) =>
      refused(transition)
        ? Promise.resolve({ kind: 'invalid-input', description: 'jetstream: message size exceeds maximum allowed' })
        : store.append(operationId, revision, transition, after),
  });
}

test("a result whose transition the store refuses for a reason of its own is a recorded rejection (store-refused, with the store's description), counted and logged as such, and acknowledged", async () => {
  const { logger, lines } = capturingLogger();
  const { s, op } = await opened({ embedded: { logger } });
  s.coordinator.deps.store = refusing(s.coordinator.deps.store, 'alfa');
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.equal(await counted(s, 'store-refused'), 1);
  assert.equal(await counted(s, 'oversized'), 0, 'it is not over the result budget');
  const [rejected] = of(await s.events(op), 'result-rejected');
  assert.deepEqual([rejected?.reason, rejected?.branchId, rejected?.peerId, rejected?.attempt], ['store-refused', 'alfa', 'alfa', 1]);
  assert.match(rejected?.detail ?? '', /message size exceeds maximum allowed/);
  assert.match(
    rejected?.detail ?? '',
    /^its transition cannot be stored: (?!invalid-input: )/,
    "the store's description, not its error's kind-prefixed message",
  );
  assert.equal((await s.coordinator.record(op))?.lastRejection?.reason, 'store-refused');
  const line = lines.find((l) => l.event === 'message-rejected' && l.reason === 'store-refused');
  assert.equal(line?.peer, 'alfa');
  assert.match(String(line?.detail), /message size exceeds maximum allowed/);
  await s.assertReplayEquals(op);
});

test('a refused result whose rejection the store cannot record now is handed back for redelivery, counted as a store error: uncertainty is never taken for a refusal', async () => {
  const { s, op } = await opened();
  const store = s.coordinator.deps.store;
  const refusingResults = refusing(store, 'alfa');
  s.coordinator.deps.store = storeWith(refusingResults, {
    append: (operationId, revision, transition, after) =>
      transition.events.some((e) => e.type === 'result-rejected')
        ? Promise.resolve({ kind: 'unavailable', description: 'disk gone' })
        : refusingResults.append(operationId, revision, transition, after),
  });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['nak']);
  assert.equal(await storeErrorsAt(s, 'record-store-refused'), 1);
  assert.equal(of(await s.events(op), 'result-rejected').length, 0);
  // The redelivery, once the store answers, is recorded as refused.
  s.coordinator.deps.store = refusingResults;
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.deepEqual(
    of(await s.events(op), 'result-rejected').map((e) => e.reason),
    ['store-refused'],
  );
});

test('results committed together whose transition the store refuses are each answered for themselves: one refused result costs the others nothing', async () => {
  const { s, op } = await opened();
  s.coordinator.deps.store = refusing(s.coordinator.deps.store, 'alfa');
  const answered = await Promise.all(['alfa', 'bravo', 'charlie'].map((peer) => deliver(s, 'result', op, peer, result(op, peer))));
  assert.deepEqual(answered, [['ack'], ['ack'], ['ack']]);
  const events = await s.events(op);
  assert.deepEqual(
    of(events, 'result-accepted').map((e) => e.branchId),
    ['bravo', 'charlie'],
  );
  assert.deepEqual(
    of(events, 'result-rejected').map((e) => [e.reason, e.branchId]),
    [['store-refused', 'alfa']],
  );
  assert.equal(await counted(s, 'store-refused'), 1);
  await s.assertReplayEquals(op);
});

test('a claim whose transition the store refuses for a reason of its own is counted and logged as claim-store-refused and acknowledged', async () => {
  const { s, op } = await opened({ review: { completion: { mode: 'quorum', count: 2 } } });
  s.coordinator.deps.store = refusing(s.coordinator.deps.store, 'alfa');
  assert.deepEqual(await deliver(s, 'claim', op, 'alfa', claim(op, 'alfa', 'release')), ['ack']);
  assert.equal(await counted(s, 'claim-store-refused'), 1);
  assert.equal(await counted(s, 'claim-oversized'), 0);
  assert.equal(of(await s.events(op), 'claim-ended').length, 0);
});

// ── deciding: rejection reasons of each kind, settled records ─────────────

test('claim and cancel-result rejections are counted with their kind: claim-<reason>, cancel-<reason>', async () => {
  const { s, op } = await opened();
  assert.deepEqual(await deliver(s, 'claim', op, 'alfa', claim(op, 'alfa', 'renew', { fence: 2 })), ['ack']);
  const cancelResult = { kind: 'cancel-result', operationId: op, branchId: 'bravo', peerId: 'bravo', attempt: 1, fence: 1, outcome: 'stopped' };
  assert.deepEqual(await deliver(s, 'cancel-result', op, 'bravo', cancelResult), ['ack']);
  assert.equal(await counted(s, 'claim-stale-fence'), 1);
  assert.equal(await counted(s, 'cancel-not-cancelling'), 1);
  assert.equal(await counted(s, 'stale-fence'), 0);
  assert.equal(await counted(s, 'not-cancelling'), 0);
});

test('a claim for a settled operation is decided as a claim: its branch holds no open claim (claim-branch-terminal)', async () => {
  const { s, op } = await opened({ review: { completion: { mode: 'first-success' } } });
  await deliver(s, 'result', op, 'alfa', result(op, 'alfa'));
  assert.equal((await s.get(op)).phase, 'settled');
  const before = (await transitionsOf(s, op)).length;
  // bravo, detached at the decision, still renews its claim.
  assert.deepEqual(await deliver(s, 'claim', op, 'bravo', claim(op, 'bravo', 'renew')), ['ack']);
  assert.equal(await counted(s, 'claim-branch-terminal'), 1);
  assert.equal(await counted(s, 'closed'), 0);
  assert.equal((await transitionsOf(s, op)).length, before);
});

test('a settled operation keeps counting conflicting results as protocol-conflict once their record bound is reached', async () => {
  const { s, op } = await opened({ review: { completion: { mode: 'first-success' } } });
  await deliver(s, 'result', op, 'alfa', result(op, 'alfa'));
  assert.equal((await s.get(op)).phase, 'settled');
  const conflicting = result(op, 'alfa', { result: { verdict: 'reject' } });
  for (let k = 0; k < limits.protocolConflictsRecordedMax + 2; k++) assert.deepEqual(await deliver(s, 'result', op, 'alfa', conflicting), ['ack']);
  assert.equal(of(await s.events(op), 'protocol-conflict-recorded').length, limits.protocolConflictsRecordedMax);
  assert.equal(await counted(s, 'protocol-conflict'), limits.protocolConflictsRecordedMax + 2);
  await s.assertReplayEquals(op);
});

// ── authorization input ────────────────────────────────────────────────────

test('the authorization recheck carries the original invocation context, the action, peer, branch and attempt: a policy scoped to the invoking principal admits the result', async () => {
  const { s, op } = await opened({ embedded: { rules: [{ effect: 'allow', principals: ['svc-a'] }] } });
  const asked: AuthorizationInput[] = [];
  const authorize = s.policy.authorize.bind(s.policy);
  s.policy.authorize = (input) => (asked.push(input), authorize(input));
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.equal(of(await s.events(op), 'result-accepted').length, 1);
  assert.equal(of(await s.events(op), 'branch-revoked').length, 0);
  const input = asked.find((i) => i.action === 'admit-result');
  assert.deepEqual(
    {
      principalId: input?.context.principalId,
      senderPeerId: input?.context.senderPeerId,
      deadlineMs: input?.context.deadlineMs,
      peerId: input?.peerId,
      branchId: input?.branchId,
      attempt: input?.attempt,
    },
    { principalId: 'svc-a', senderPeerId: null, deadlineMs: (await s.get(op)).deadlineMs, peerId: 'alfa', branchId: 'alfa', attempt: 1 },
  );
});

test('an attempt outside 1..16 is never an authorization attempt: the policy is asked with none, and the result is rejected as unknown-attempt', async () => {
  const { s, op } = await opened();
  const asked: (number | null)[] = [];
  const authorize = s.policy.authorize.bind(s.policy);
  s.policy.authorize = (input) => (asked.push(input.attempt), authorize(input));
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa', { attempt: limits.attemptsMax + 1 })), ['ack']);
  assert.deepEqual(asked, [null]);
  assert.deepEqual(
    of(await s.events(op), 'result-rejected').map((e) => [e.reason, e.attempt]),
    [['unknown-attempt', limits.attemptsMax + 1]],
  );
  assert.equal(await counted(s, 'oversized'), 0);
});

// ── batching: results wait for company, claims do not ──────────────────────

test("a quorum's early votes wait for the vote that closes it and are committed with it in one transition; a rejection decided in that batch is counted once", async () => {
  const { s, op } = await opened({ review: { completion: { mode: 'quorum', count: 2 } }, embedded: { resultBatchMs: 50 } });
  const before = (await transitionsOf(s, op)).length;
  const answers = [
    deliver(s, 'result', op, 'alfa', result(op, 'alfa')),
    // alfa publishes a result naming bravo's branch: rejected, recorded with the batch.
    deliver(s, 'result', op, 'alfa', result(op, 'bravo')),
  ];
  await flushMicrotasks();
  assert.equal((await transitionsOf(s, op)).length, before, 'held: together they close nothing');
  answers.push(deliver(s, 'result', op, 'bravo', result(op, 'bravo')));
  assert.deepEqual(await Promise.all(answers), [['ack'], ['ack'], ['ack']]);
  const added = (await transitionsOf(s, op)).slice(before);
  assert.equal(added.length, 1, 'one transition');
  assert.deepEqual(
    added[0]?.events.map((e) => e.type),
    ['result-accepted', 'result-rejected', 'result-accepted', 'decision-closed', 'settlement-completed'],
  );
  assert.equal(await counted(s, 'wrong-peer'), 1);
  await s.assertReplayEquals(op);
});

test('a claim does not wait for company: a renewal is committed at once even where results are batched', async () => {
  const review = { leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 };
  const { s, op } = await opened({ review, embedded: { resultBatchMs: 50 } });
  await s.clock.advance(400);
  const answer = deliver(s, 'claim', op, 'alfa', claim(op, 'alfa', 'renew'));
  await flushMicrotasks();
  assert.equal(of(await s.events(op), 'lease-renewed').length, 1, 'renewed before any batching window ends');
  await s.clock.advance(100);
  assert.deepEqual(await answer, ['ack']);
});

// ── late: the store's serialization instant decides ────────────────────────

/** An operation whose store serializes on its own clock, which the test moves ahead of the coordinator's. */
async function storeAhead(review: JsonObject): Promise<{ s: Scenario; op: string; storeClock: VirtualClock }> {
  const storeClock = new VirtualClock();
  const { s, op } = await opened({ review, embedded: { store: new MemoryEventStore({ clock: storeClock }) } });
  assert.equal(storeClock.nowMs(), s.clock.nowMs());
  return { s, op, storeClock };
}

test('a result the store serializes after its lease ended is rejected as expired-lease, though the coordinator decided it before', async () => {
  const { s, op, storeClock } = await storeAhead({ leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 });
  const leaseUntilMs = (await s.coordinator.record(op))!.branches['alfa']!.leaseUntilMs;
  storeClock.set(leaseUntilMs + 500); // past the lease, well before the deadline
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  const events = await s.events(op);
  assert.deepEqual(
    of(events, 'result-rejected').map((e) => e.reason),
    ['expired-lease'],
  );
  assert.equal(of(events, 'result-accepted').length, 0);
  assert.ok(s.clock.nowMs() < leaseUntilMs, "the coordinator's clock is still inside the lease");
});

test('a result the store serializes after the deadline is rejected as late, though the coordinator decided it before', async () => {
  const { s, op, storeClock } = await storeAhead({ leaseMs: 10_000, renewIntervalMs: 1000, timeoutMs: 2000 });
  const deadlineMs = (await s.get(op)).deadlineMs;
  storeClock.set(deadlineMs + 1);
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.deepEqual(
    of(await s.events(op), 'result-rejected').map((e) => e.reason),
    ['late'],
  );
  assert.ok(s.clock.nowMs() < deadlineMs);
});

// The leases end before the grace and the cancel deadline: no bound of the open operation decides what comes after the decision.
const cancellingSiblings = { completion: { mode: 'first-success' }, siblings: 'cancel', timeoutMs: 10_000, leaseMs: 2000, renewIntervalMs: 500 };

test('a late fact the store serializes after the settlement grace is rejected as late, not a store error, though the coordinator decided it inside the grace', async () => {
  // The cancel timeout ends before the grace: only the grace bounds a sibling's late result.
  const { s, op, storeClock } = await storeAhead({ ...cancellingSiblings, cancelTimeoutMs: 1000, settlementGraceMs: 3000 });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  const decision = (await s.coordinator.record(op))!.decision!;
  storeClock.set(decision.graceEndMs + 1);
  assert.deepEqual(await deliver(s, 'result', op, 'bravo', result(op, 'bravo')), ['ack']);
  assert.deepEqual(
    of(await s.events(op), 'result-rejected').map((e) => [e.branchId, e.reason]),
    [['bravo', 'late']],
  );
  assert.equal(await storeErrorsAt(s, 'admit-result'), 0);
  assert.ok(s.clock.nowMs() < decision.graceEndMs);
});

test('a cancel result the store serializes after the cancel deadline is rejected for that, not a store error, though the coordinator decided it in time', async () => {
  // The grace ends before the cancel timeout: only the cancel deadline bounds a cancel reply.
  const { s, op, storeClock } = await storeAhead({ ...cancellingSiblings, cancelTimeoutMs: 3000, settlementGraceMs: 1000 });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  const decision = (await s.coordinator.record(op))!.decision!;
  storeClock.set(decision.cancelDeadlineMs + 1);
  const reply = { kind: 'cancel-result', operationId: op, branchId: 'bravo', peerId: 'bravo', attempt: 1, fence: 1, outcome: 'stopped' };
  assert.deepEqual(await deliver(s, 'cancel-result', op, 'bravo', reply), ['ack']);
  assert.equal(await counted(s, 'cancel-cancel-timeout'), 1);
  assert.equal(of(await s.events(op), 'cancel-result-accepted').length, 0);
  assert.equal(await storeErrorsAt(s, 'admit-cancel-result'), 0);
});

test('a result the store serializes after its authorization expired is handed back for a fresh decision, not rejected as late or expired-lease', async () => {
  const storeClock = new VirtualClock();
  const review = { leaseMs: 5000, renewIntervalMs: 1000, timeoutMs: 10_000 };
  const { s, op } = await opened({ review, embedded: { store: new MemoryEventStore({ clock: storeClock }), policyTtlMs: 100 } });
  storeClock.set(s.clock.nowMs() + 150); // past the admit-result decision's validity, inside lease and deadline
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['nak']);
  assert.equal(await counted(s, 'authorization-expired'), 1);
  assert.deepEqual(of(await s.events(op), 'result-rejected'), [], 'not rejected: only the authorization ran out');
  assert.equal(of(await s.events(op), 'result-accepted').length, 0);
});

// ── the result budget's boundary, rejection counts and log lines ───────────

test('a result of exactly the result budget is admitted; one byte more is oversized', async () => {
  const { s, op } = await opened({ embedded: smallResults });
  const sized = (bytes: number) => {
    const base = { verdict: 'approve', note: '' };
    return { ...base, note: 'z'.repeat(bytes - Buffer.byteLength(JSON.stringify(base))) };
  };
  assert.equal(Buffer.byteLength(JSON.stringify(sized(1024))), 1024);
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa', { result: sized(1024) })), ['ack']);
  assert.deepEqual(await deliver(s, 'result', op, 'bravo', result(op, 'bravo', { result: sized(1025) })), ['ack']);
  const events = await s.events(op);
  assert.deepEqual(
    of(events, 'result-accepted').map((e) => e.branchId),
    ['alfa'],
  );
  assert.deepEqual(
    of(events, 'result-rejected').map((e) => [e.branchId, e.reason]),
    [['bravo', 'oversized']],
  );
});

test('an admitted result counts no rejection; a rejection decided in the queue and one answered from a settled record are logged with the message kind, peer and operation', async () => {
  const { logger, lines } = capturingLogger();
  const { s, op } = await opened({ review: { completion: { mode: 'first-success' } }, embedded: { logger } });
  // A stale fence, decided in the operation's queue.
  assert.deepEqual(await deliver(s, 'result', op, 'bravo', result(op, 'bravo', { fence: 5 })), ['ack']);
  const rejectionsBefore = (await s.coordinator.metrics.rejections.get()).values.reduce((n, v) => n + v.value, 0);
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.equal((await s.get(op)).phase, 'settled');
  const rejectionsAfter = (await s.coordinator.metrics.rejections.get()).values.reduce((n, v) => n + v.value, 0);
  assert.equal(rejectionsAfter, rejectionsBefore, 'the admitted result is no rejection');
  // charlie answers after the decision: answered from the settled record.
  assert.deepEqual(await deliver(s, 'result', op, 'charlie', result(op, 'charlie')), ['ack']);
  const fields = (reason: string) => {
    const line = lines.find((l) => l.event === 'message-rejected' && l.reason === reason);
    return { messageKind: line?.messageKind, peer: line?.peer, operationId: line?.operationId, principal: line?.principal };
  };
  assert.deepEqual(fields('stale-fence'), { messageKind: 'result', peer: 'bravo', operationId: op, principal: 'svc-a' });
  assert.deepEqual(fields('closed'), { messageKind: 'result', peer: 'charlie', operationId: op, principal: 'svc-a' });
});

test('a result from a peer the policy no longer allows revokes its branch and is counted as revoked; a renewal from it revokes the branch and is no rejection', async () => {
  const review = { leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 };
  // Three of five: two revoked branches leave the rule open.
  const { s, op } = await opened({ review, peers: 5 });
  s.policy.revoke({ peerId: 'alfa' });
  s.policy.revoke({ peerId: 'bravo' });
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  await s.clock.advance(400);
  assert.deepEqual(await deliver(s, 'claim', op, 'bravo', claim(op, 'bravo', 'renew')), ['ack']);
  assert.deepEqual(
    of(await s.events(op), 'branch-revoked').map((e) => e.branchId),
    ['alfa', 'bravo'],
  );
  assert.equal(await counted(s, 'revoked'), 1, "only the result's");
  assert.equal(await counted(s, 'claim-revoked'), 0);
});

test('the largest attempt, 16, is an authorization attempt', async () => {
  const { s, op } = await opened();
  const asked: (number | null)[] = [];
  const authorize = s.policy.authorize.bind(s.policy);
  s.policy.authorize = (input) => (asked.push(input.attempt), authorize(input));
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa', { attempt: limits.attemptsMax })), ['ack']);
  assert.deepEqual(asked, [limits.attemptsMax]);
});

test('while the operation is open, a result is decided in its turn after the authorization recheck: a revoked peer loses its branch even when its result is past its lease and no more rejections are recorded', async () => {
  const review = { leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 };
  const { s, op } = await opened({ review });
  for (let k = 0; k < limits.rejectionsRecordedMax; k++) await deliver(s, 'result', op, 'bravo', result(op, 'bravo', { fence: 9 }));
  assert.equal((await s.coordinator.record(op))!.rejectionsRecorded, limits.rejectionsRecordedMax);
  s.policy.revoke({ peerId: 'alfa' });
  const leaseUntilMs = (await s.coordinator.record(op))!.branches['alfa']!.leaseUntilMs;
  s.clock.set(leaseUntilMs + 1); // the lease has ended; its expiry is not processed yet
  assert.deepEqual(await deliver(s, 'result', op, 'alfa', result(op, 'alfa')), ['ack']);
  assert.deepEqual(
    of(await s.events(op), 'branch-revoked').map((e) => e.branchId),
    ['alfa'],
  );
  assert.equal(await counted(s, 'expired-lease'), 0);
});

test('a result is not held for company when a lease it could need ends within the batching window: it is committed at once', async () => {
  const review = { leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 };
  const { s, op } = await opened({ review, peers: 5, embedded: { resultBatchMs: 50 } });
  const leaseUntilMs = (await s.coordinator.record(op))!.branches['alfa']!.leaseUntilMs;
  await s.clock.advance(leaseUntilMs - s.clock.nowMs() - 30);
  const before = (await transitionsOf(s, op)).length;
  const answer = deliver(s, 'result', op, 'alfa', result(op, 'alfa'));
  await flushMicrotasks();
  assert.equal((await transitionsOf(s, op)).length, before + 1, 'committed without waiting');
  assert.deepEqual(await answer, ['ack']);
  assert.equal(of(await s.events(op), 'result-accepted').length, 1);
});
