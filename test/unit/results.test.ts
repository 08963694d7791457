/**
 * Spec: "Result admission and decision" (and result identity from "Identity, context and
 * authorization") — one test per rule, each named after it, each with the replay-equality check.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { limits } from '../../src/contract/limits.js';
import { scenario, answers, silent, types, type Scenario } from '../support/scenario.js';
import { SubjectNamespaceVerifier } from '../../src/adapters/verification/subject.js';
import type { DomainEvent, ResultRejected } from '../../src/events/types.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import type { JsonObject } from '../../src/contract/json.js';
import { VirtualClock, flushMicrotasks } from '../../src/contract/clock.js';
import { createEmbedded, peerBusPermissions } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';

const rejections = (events: DomainEvent[]) => events.filter((e): e is ResultRejected => e.type === 'result-rejected').map((e) => e.reason);
const accepted = (events: DomainEvent[]) => events.filter((e) => e.type === 'result-accepted').length;
const counted = async (s: Scenario, reason: string) =>
  (await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

async function opened(review: JsonObject = {}, peers = 5): Promise<{ s: Scenario; op: string }> {
  const s = await scenario({ review, peers });
  const { result } = await s.invoke('k');
  await s.settle();
  return { s, op: result.operationId };
}

const approve = { verdict: 'approve' };
const reject = { verdict: 'reject' };

test('a result whose publisher does not verify is rejected without asking the policy about it', async () => {
  const { s, op } = await opened({}, 3);
  const policy = s.policy;
  const real = policy.authorize.bind(policy);
  const asked: string[] = [];
  policy.authorize = async (input) => (asked.push(`${input.action}:${input.peerId ?? '-'}`), real(input));
  await s.send('alfa', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: approve });
  await s.send('delta', { operationId: op, branchId: 'zulu', peerId: 'delta', result: approve });
  assert.deepEqual(rejections(await s.events(op)), ['wrong-peer']);
  assert.deepEqual(asked, [], 'no policy call for forged or foreign traffic');
  // A verified result is authorized as always.
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  assert.deepEqual(asked, ['admit-result:alfa']);
  assert.equal(accepted(await s.events(op)), 1);
});

test('verification requires the received subject peer, the expected peer and the payload peer to agree', async () => {
  const { s, op } = await opened();
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'bravo', result: approve });
  await s.send('alfa', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: approve });
  const events = await s.events(op);
  assert.equal(accepted(events), 0);
  assert.deepEqual(rejections(events), ['wrong-peer', 'wrong-peer']);
  await s.assertReplayEquals(op);
});

test('a publisher bound to peer alfa can publish its own result subject while another peer cannot', async () => {
  const { s, op } = await opened();
  const forged = await s.send('bravo', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve }, 'alfa');
  assert.equal(forged.receipt, 'rejected');
  assert.match(forged.detail ?? '', /permission/);
  const own = await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  assert.equal(own.receipt, 'sent');
  assert.equal(accepted(await s.events(op)), 1);
  await s.assertReplayEquals(op);
});

test('an unattested namespace exception invalidates the publisher proof', async () => {
  const { s, op } = await opened();
  s.coordinator.deps.verifier = new SubjectNamespaceVerifier([
    { namespace: 'demo.v1.lab', exclusivePeerPublishers: true, exceptions: [{ principal: 'ops-admin', attested: false, note: 'wildcard publisher' }] },
  ]);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  const events = await s.events(op);
  assert.equal(accepted(events), 0);
  assert.deepEqual(rejections(events), ['unverified-publisher']);
  await s.assertReplayEquals(op);
});

test('results for the wrong operation are rejected', async () => {
  const { s, op } = await opened();
  const other = (await s.invoke('k2')).result.operationId;
  await s.settle();
  const body = { kind: 'result', operationId: other, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, result: approve };
  const connection = s.bus.connect('raw', { publish: ['demo.v1.lab.*.*.result.alfa'] });
  await connection.publish(`demo.v1.lab.review.${op}.result.alfa`, new TextEncoder().encode(JSON.stringify(body)));
  await s.settle();
  assert.equal(accepted(await s.events(op)), 0);
  assert.equal(accepted(await s.events(other)), 0);
});

test("a peer message is evidence only for its operation's own subject: the operation named on another interaction's subject is wrong-subject, counted and not recorded", async () => {
  const clock = new VirtualClock();
  const base = reviewBundle({ completion: { mode: 'first-success' } });
  const review = (base.interactions as Record<string, JsonObject>).review!;
  const bundle = { ...base, interactions: { review, audit: review } };
  const e = await createEmbedded({ clock, bundle, groups: { reviewers: peerIds(3) }, resultBatchMs: 0 });
  const invoke = (interaction: string, key: string) =>
    e.coordinator.invoke({ principalId: 'svc-a', senderPeerId: null }, { contract: e.bundle.ref, interaction, invocationKey: key, input: { document: 'd' } });
  const op = (await invoke('review', 'k-review')).result.operationId;
  await invoke('audit', 'k-audit'); // the audit interaction's result and claim paths are subscribed now
  await flushMicrotasks();
  const alfa = e.bus.connect('raw:alfa', peerBusPermissions('demo.v1.lab', 'alfa'));
  const send = async (interaction: string, kind: 'result' | 'claim', extra: JsonObject) => {
    const body = { kind, operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, ...extra };
    assert.equal(
      (await alfa.publish(subjectFor('demo.v1.lab', interaction, op, kind, 'alfa'), new TextEncoder().encode(JSON.stringify(body)))).receipt,
      'sent',
    );
    await flushMicrotasks();
  };
  await send('audit', 'result', { result: approve });
  await send('audit', 'claim', { action: 'release' });
  const wrongSubject = (await e.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === 'wrong-subject');
  assert.equal(wrongSubject?.value, 2);
  const read = await e.store.read(op);
  assert.ok(read.kind === 'ok');
  assert.deepEqual(
    types(read.transitions.flatMap((t) => t.transition.events)).filter((t) => t !== 'dispatch-recorded'),
    ['operation-admitted'],
  );
  // The same message on the operation's own subject is admitted.
  await send('review', 'result', { result: approve });
  assert.equal((await e.coordinator.get('svc-a', op)).decision?.outcome, 'success');
});

test('publisher verification consults the attestation of the namespace the subject arrived on', () => {
  const verifier = new SubjectNamespaceVerifier([{ namespace: 'demo.v1.lab', exclusivePeerPublishers: true }]);
  const input = { subjectPeerId: 'alfa', expectedPeerId: 'alfa', payloadPeerId: 'alfa', namespace: 'demo.v1.lab' };
  assert.deepEqual(verifier.verify({ ...input, subject: `demo.v1.lab.review.op1.result.alfa` }), { accepted: true });
  for (const subject of ['other.ns.review.op1.result.alfa', 'demo.v1.lab.extra.review.op1.result.alfa', 'demo.v1.labx.review.op1.result.alfa']) {
    const outcome = verifier.verify({ ...input, subject });
    assert.equal(outcome.accepted, false, subject);
  }
});

test('results for a branch outside the frozen manifest are rejected', async () => {
  const { s, op } = await opened({}, 3);
  await s.send('alfa', { operationId: op, branchId: 'delta', peerId: 'alfa', result: approve });
  assert.deepEqual(rejections(await s.events(op)), ['unknown-branch']);
  // From a peer that is no party to the operation, the same rejection is counted, not recorded.
  await s.send('delta', { operationId: op, branchId: 'delta', peerId: 'delta', result: approve });
  assert.deepEqual(rejections(await s.events(op)), ['unknown-branch']);
  assert.equal(await counted(s, 'unknown-branch'), 2);
});

test('a branch ID that names an Object.prototype member is unknown like any other', async () => {
  const { s, op } = await opened({}, 3);
  for (const id of ['constructor', '__proto__', 'toString']) await s.send(id, { operationId: op, branchId: id, peerId: id, result: approve });
  for (const id of ['constructor', '__proto__', 'toString']) await s.send('alfa', { operationId: op, branchId: id, peerId: 'alfa', result: approve });
  assert.deepEqual(
    rejections(await s.events(op)),
    ['unknown-branch', 'unknown-branch', 'unknown-branch'],
    "the party's three are recorded; the non-parties' are counted",
  );
  assert.equal(await counted(s, 'unknown-branch'), 6);
  await s.assertReplayEquals(op);
});

test("only the operation's own peers can grow its recorded rejections: another peer of the namespace cannot use up the bound", async () => {
  const { s, op } = await opened({}, 3);
  // delta may publish on the namespace's result subjects, but is no party to this operation.
  for (let i = 0; i < limits.rejectionsRecordedMax + 4; i++) await s.send('delta', { operationId: op, branchId: `b${i}`, peerId: 'delta', result: approve });
  assert.deepEqual(rejections(await s.events(op)), [], 'nothing of the flood is recorded');
  assert.equal(await counted(s, 'unknown-branch'), limits.rejectionsRecordedMax + 4, 'it is counted');
  // A party's rejection is still recorded.
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 2, fence: 2, result: approve });
  assert.deepEqual(rejections(await s.events(op)), ['unknown-attempt']);
  await s.assertReplayEquals(op);
});

test('results for an unknown attempt are rejected', async () => {
  const { s, op } = await opened();
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 2, fence: 2, result: approve });
  assert.deepEqual(rejections(await s.events(op)), ['unknown-attempt']);
  await s.assertReplayEquals(op);
});

test('results with a stale fence are rejected', async () => {
  const { s, op } = await opened();
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 7, result: approve });
  assert.deepEqual(rejections(await s.events(op)), ['stale-fence']);
});

test('results that fail the result schema are rejected', async () => {
  const { s, op } = await opened();
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'maybe' } });
  assert.deepEqual(rejections(await s.events(op)), ['invalid-schema']);
});

test('malformed result messages are dropped without a vote', async () => {
  const { s, op } = await opened();
  const connection = s.bus.connect('raw', { publish: ['demo.v1.lab.*.*.result.alfa'] });
  for (const text of ['{', '{"kind":"result","kind":"result"}', JSON.stringify({ kind: 'result', operationId: op })]) {
    await connection.publish(`demo.v1.lab.review.${op}.result.alfa`, new TextEncoder().encode(text));
  }
  await s.settle();
  assert.equal(accepted(await s.events(op)), 0);
});

test('a result received at or after the deadline is late and rejected', async () => {
  const { s, op } = await opened();
  const record = await s.coordinator.record(op);
  s.clock.set(record!.deadlineMs);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  const events = await s.events(op);
  assert.equal(accepted(events), 0);
  assert.deepEqual(rejections(events), ['late']);
  await s.assertReplayEquals(op);
});

test('a result arriving on the socket before the deadline but serialized after it is late', async () => {
  const { s, op } = await opened();
  const record = await s.coordinator.record(op);
  const store = s.store;
  let delayed = false;
  const slowStore: EventStore = Object.assign(Object.create(store) as EventStore, {
    append: async (id: string, rev: string, t: Parameters<EventStore['append']>[2]) => {
      if (!delayed && t.events.some((e) => e.type === 'result-accepted')) {
        delayed = true;
        s.clock.set(record!.deadlineMs + 1); // the serialization point is after the deadline
      }
      return store.append(id, rev, t);
    },
  });
  s.coordinator.deps.store = slowStore;
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  const events = await s.events(op);
  assert.equal(accepted(events), 0);
  assert.deepEqual(rejections(events), ['late']);
  await s.assertReplayEquals(op);
});

test('a result after the lease of its attempt expired is rejected', async () => {
  const { s, op } = await opened({ leaseMs: 1000, renewIntervalMs: 500 });
  s.clock.set(s.clock.nowMs() + 1000);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  assert.deepEqual(rejections(await s.events(op)), ['expired-lease']);
});

test('a valid duplicate of an accepted terminal result returns the prior decision without another vote', async () => {
  const { s, op } = await opened({ completion: { mode: 'first-success' } });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  const before = await s.get(op);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  const after = await s.get(op);
  assert.deepEqual(after.decision, before.decision);
  const events = await s.events(op);
  assert.equal(accepted(events), 1);
  assert.deepEqual(rejections(events), []);
  await s.assertReplayEquals(op);
});

test('conflicting terminal results are rejected and recorded as a protocol conflict', async () => {
  const { s, op } = await opened();
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: reject });
  const events = await s.events(op);
  assert.equal(accepted(events), 1);
  assert.equal(events.filter((e) => e.type === 'protocol-conflict-recorded').length, 1);
  const view = await s.get(op);
  assert.deepEqual(view.branches.find((b) => b.branchId === 'alfa')?.result, approve);
  await s.assertReplayEquals(op);
});

test('protocol conflicts are recorded up to a bound, then only counted: a flood cannot grow the log', async () => {
  const { s, op } = await opened();
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  const flood = limits.protocolConflictsRecordedMax + 5;
  for (let i = 0; i < flood; i++) await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'reject', note: `n${i}` } });
  const events = await s.events(op);
  assert.equal(events.filter((e) => e.type === 'protocol-conflict-recorded').length, limits.protocolConflictsRecordedMax);
  const counted = (await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === 'protocol-conflict');
  assert.equal(counted?.value, flood);
  assert.deepEqual((await s.get(op)).branches.find((b) => b.branchId === 'alfa')?.result, approve);
  await s.assertReplayEquals(op);
});

test('success is determined by the declared typed equality predicate; false means failure', async () => {
  const { s, op } = await opened();
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: reject });
  const view = await s.get(op);
  assert.deepEqual(
    view.branches.slice(0, 2).map((b) => b.status),
    ['success', 'failure'],
  );
});

test('a retryable result cannot override the attempt budget: with one attempt it is a failure', async () => {
  const { s, op } = await opened({ attempts: 1 });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'retry' } });
  const view = await s.get(op);
  assert.equal(view.branches[0]?.status, 'failure');
  assert.equal(view.branches[0]?.attempt, 1);
});

test('distinct-branches: every branch supplies at most one success vote', async () => {
  const { s, op } = await opened({ completion: { mode: 'quorum', count: 2 } });
  for (let i = 0; i < 3; i++) await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  assert.equal((await s.get(op)).decision, null);
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: approve });
  assert.equal((await s.get(op)).decision?.successVotes, 2);
  await s.assertReplayEquals(op);
});

const explicitPairs = {
  delivery: 'explicit',
  branches: [
    { branchId: 'a1', peerId: 'alfa' },
    { branchId: 'a2', peerId: 'alfa' },
    { branchId: 'b1', peerId: 'bravo' },
  ],
  votes: 'distinct-peers',
};

test('distinct-peers: any successful branch supplies its peer’s single vote', async () => {
  const { s, op } = await opened({ ...explicitPairs, completion: { mode: 'quorum', count: 2 } });
  await s.send('alfa', { operationId: op, branchId: 'a1', peerId: 'alfa', result: approve });
  await s.send('alfa', { operationId: op, branchId: 'a2', peerId: 'alfa', result: approve });
  let view = await s.get(op);
  assert.equal(view.decision, null, 'two branches of one peer are one vote');
  await s.send('bravo', { operationId: op, branchId: 'b1', peerId: 'bravo', result: approve });
  view = await s.get(op);
  assert.equal(view.decision?.outcome, 'success');
  assert.equal(view.decision?.units, 2);
  await s.assertReplayEquals(op);
});

test('distinct-peers: a peer is terminal only after all its branches are terminal', async () => {
  const { s, op } = await opened({ ...explicitPairs, completion: { mode: 'all-terminal' } });
  await s.send('alfa', { operationId: op, branchId: 'a1', peerId: 'alfa', result: approve });
  await s.send('bravo', { operationId: op, branchId: 'b1', peerId: 'bravo', result: reject });
  assert.equal((await s.get(op)).decision, null, 'alfa still has an open branch');
  await s.send('alfa', { operationId: op, branchId: 'a2', peerId: 'alfa', result: reject });
  assert.equal((await s.get(op)).decision?.outcome, 'success');
});

test('first-success closes on a successful unit', async () => {
  const { s, op } = await opened({ completion: { mode: 'first-success' } });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: reject });
  assert.equal((await s.get(op)).decision, null);
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: approve });
  const view = await s.get(op);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['success', 'threshold']);
  await s.assertReplayEquals(op);
});

test('quorum closes at its count threshold', async () => {
  const { s, op } = await opened({ completion: { mode: 'quorum', count: 3 } });
  for (const p of ['alfa', 'bravo']) await s.send(p, { operationId: op, branchId: p, peerId: p, result: approve });
  assert.equal((await s.get(op)).decision, null);
  await s.send('charlie', { operationId: op, branchId: 'charlie', peerId: 'charlie', result: approve });
  assert.equal((await s.get(op)).decision?.outcome, 'success');
});

test('quorum fractions use exact integer arithmetic: 2/3 of 5 needs 4', async () => {
  const { s, op } = await opened({ completion: { mode: 'quorum', fraction: { num: 2, den: 3 } } });
  assert.equal((await s.get(op)).decision, null);
  const record = await s.coordinator.record(op);
  assert.equal(record?.manifest.threshold, 4);
  for (const p of ['alfa', 'bravo', 'charlie']) await s.send(p, { operationId: op, branchId: p, peerId: p, result: approve });
  assert.equal((await s.get(op)).decision, null);
  await s.send('delta', { operationId: op, branchId: 'delta', peerId: 'delta', result: approve });
  assert.equal((await s.get(op)).decision?.successVotes, 4);
});

test('quorum fraction 1/3 of 3 needs exactly 1 (no floating-point rounding)', async () => {
  const { s, op } = await opened({ completion: { mode: 'quorum', fraction: { num: 1, den: 3 } } }, 3);
  assert.equal((await s.coordinator.record(op))?.manifest.threshold, 1);
});

test('all-successful closes when every unit has success', async () => {
  const { s, op } = await opened({ completion: { mode: 'all-successful' } }, 3);
  for (const p of ['alfa', 'bravo', 'charlie']) await s.send(p, { operationId: op, branchId: p, peerId: p, result: approve });
  assert.equal((await s.get(op)).decision?.outcome, 'success');
});

test('all-successful fails as soon as success becomes impossible', async () => {
  const { s, op } = await opened({ completion: { mode: 'all-successful' } }, 3);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: reject });
  const view = await s.get(op);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['failed', 'impossible']);
  await s.assertReplayEquals(op);
});

test('on impossibility success-requiring modes fail before timeout', async () => {
  const { s, op } = await opened({ completion: { mode: 'quorum', count: 3 } });
  for (const p of ['alfa', 'bravo', 'charlie']) await s.send(p, { operationId: op, branchId: p, peerId: p, result: reject });
  const view = await s.get(op);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['failed', 'impossible']);
  assert.ok(view.decision!.closedAtMs < view.deadlineMs);
});

test('all-terminal waits for every unit and is success when collection is complete even with failures', async () => {
  const { s, op } = await opened({ completion: { mode: 'all-terminal' }, aggregate: { kind: 'collect' }, output: { type: 'object' } }, 3);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: reject });
  assert.equal((await s.get(op)).decision, null);
  await s.send('charlie', { operationId: op, branchId: 'charlie', peerId: 'charlie', result: reject });
  const view = await s.get(op);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['success', 'complete']);
  const outcomes = (view.output as { outcomes: { status: string }[] }).outcomes.map((o) => o.status);
  assert.deepEqual(outcomes, ['success', 'failure', 'failure'], 'aggregation preserves the failures');
});

test('on timeout the recorded outcome is partial as declared', async () => {
  const { s, op } = await opened({ onTimeout: 'partial' });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  await s.clock.advance(5000);
  const view = await s.get(op);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['partial', 'timeout']);
  assert.equal(view.decision?.closedAtMs, view.deadlineMs);
  assert.equal(view.settlement.status, 'complete');
  await s.assertReplayEquals(op);
});

test('on timeout the recorded outcome is failed as declared', async () => {
  const { s, op } = await opened({ onTimeout: 'failed' });
  await s.clock.advance(5000);
  assert.equal((await s.get(op)).decision?.outcome, 'failed');
});

test('a deadline transition requires time at or after the deadline', async () => {
  const { s, op } = await opened();
  await s.clock.advance(4999);
  assert.equal((await s.get(op)).decision, null);
  await s.clock.advance(1);
  assert.equal((await s.get(op)).decision?.reason, 'timeout');
});

test('once closed a decision never changes because of later membership or results', async () => {
  const { s, op } = await opened({ completion: { mode: 'first-success' } });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  const closed = await s.get(op);
  s.directory.setGroup('reviewers', []);
  for (const p of ['bravo', 'charlie']) await s.send(p, { operationId: op, branchId: p, peerId: p, result: reject });
  await s.clock.advance(10_000);
  const later = await s.get(op);
  assert.deepEqual(later.decision, closed.decision);
  // Settled at the decision (detached siblings): later results are rejected and counted, not recorded.
  assert.deepEqual(rejections(await s.events(op)), []);
  const counted = (await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === 'closed');
  assert.equal(counted?.value, 2);
  await s.assertReplayEquals(op);
});

test('results for a settled operation are answered against the final record without a policy call; a protocol conflict is still recorded', async () => {
  const { s, op } = await opened({ completion: { mode: 'first-success' } });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  assert.equal((await s.get(op)).phase, 'settled');
  let policyCalls = 0;
  const authorize = s.policy.authorize.bind(s.policy);
  s.policy.authorize = (input) => ((policyCalls += 1), authorize(input));
  const closedBefore = (await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === 'closed')?.value ?? 0;
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: approve });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve }); // a duplicate
  const closedAfter = (await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === 'closed')?.value ?? 0;
  assert.equal(closedAfter - closedBefore, 1);
  assert.equal(policyCalls, 0);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: reject });
  const events = await s.events(op);
  assert.equal(events.filter((e) => e.type === 'protocol-conflict-recorded').length, 1);
  assert.deepEqual(rejections(events), []);
  await s.assertReplayEquals(op);
});

test('a rejection is recorded while the operation still waits for something (closed, not settled)', async () => {
  const { s, op } = await opened({ completion: { mode: 'first-success' }, siblings: 'cancel', cancelTimeoutMs: 2_000 });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  assert.equal((await s.get(op)).decision?.outcome, 'success');
  // bravo answers with a stale fence while its cancel is pending: a fact worth keeping.
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', fence: 9, result: reject });
  assert.deepEqual(rejections(await s.events(op)), ['stale-fence']);
  await s.assertReplayEquals(op);
});

test('early closure records the decision and the disposition of unfinished siblings in one transition (detach)', async () => {
  const { s, op } = await opened({ completion: { mode: 'first-success' }, siblings: 'detach' });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  const read = await s.store.read(op);
  assert.equal(read.kind, 'ok');
  if (read.kind !== 'ok') return;
  const closing = read.transitions.find((t) => t.transition.events.some((e) => e.type === 'decision-closed'))!;
  assert.deepEqual(types(closing.transition.events), ['result-accepted', 'decision-closed', 'settlement-completed']);
  const closed = closing.transition.events[1] as Extract<DomainEvent, { type: 'decision-closed' }>;
  assert.deepEqual(
    closed.siblings.map((x) => x.disposition),
    ['detached', 'detached', 'detached', 'detached'],
  );
  const view = await s.get(op);
  assert.equal(view.phase, 'settled');
  assert.equal(view.settlement.status, 'complete');
});

test('aggregation is a typed projection validated against the output schema', async () => {
  const s = await scenario();
  for (const p of ['alfa', 'bravo', 'charlie']) await s.addPeer(p, { review: answers('approve') });
  for (const p of ['delta', 'echo']) await s.addPeer(p, { review: silent });
  const { result } = await s.invoke('k');
  await s.settle();
  assert.deepEqual((await s.get(result.operationId)).output, { counts: { approve: 3 }, total: 3 });
});

test('a tally counts values that name Object.prototype members like any other value', async () => {
  const { s, op } = await opened({ aggregate: { kind: 'tally', pointer: '/note' }, output: { type: 'object' } });
  const notes = ['__proto__', 'constructor', '__proto__'];
  for (const [i, peer] of ['alfa', 'bravo', 'charlie'].entries())
    await s.send(peer, { operationId: op, branchId: peer, peerId: peer, result: { verdict: 'approve', note: notes[i]! } });
  const output = (await s.get(op)).output as { counts: Record<string, number>; total: number };
  assert.equal(output.total, 3);
  assert.deepEqual(Object.entries(output.counts), [
    ['__proto__', 2],
    ['constructor', 1],
  ]);
  assert.equal(Object.getPrototypeOf(output.counts), Object.prototype);
});

test('peer and branch IDs that name Object.prototype members ("__proto__", "constructor") are ordinary branches', async () => {
  const peers = ['__proto__', 'constructor', 'toString'];
  const s = await scenario({ groups: { reviewers: peers }, review: { completion: { mode: 'all-successful' } } });
  const op = (await s.invoke('k')).result.operationId;
  await s.settle();
  assert.deepEqual(
    (await s.get(op)).branches.map((b) => b.branchId),
    peers,
  );
  for (const p of peers) await s.send(p, { operationId: op, branchId: p, peerId: p, result: approve });
  const view = await s.get(op);
  assert.equal(view.decision?.outcome, 'success');
  assert.deepEqual(
    view.branches.map((b) => `${b.branchId}:${b.status}`),
    peers.map((p) => `${p}:success`),
  );
  await s.assertReplayEquals(op);
});

test('a projection failure is reported separately and cannot erase votes', async () => {
  const { s, op } = await opened({
    completion: { mode: 'first-success' },
    aggregate: { kind: 'tally', pointer: '/verdict' },
    output: { type: 'object', required: ['impossible'] },
  });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  const view = await s.get(op);
  assert.equal(view.decision?.outcome, 'success');
  assert.equal(view.output, null);
  assert.equal(view.outputError?.kind, 'invalid-input');
  assert.equal(view.branches[0]?.status, 'success');
});

test('rejections recorded in the stream are bounded; beyond the bound they are only counted', async () => {
  const { s, op } = await opened();
  for (let i = 0; i < 70; i++) await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 9, result: approve });
  const events = await s.events(op);
  assert.equal(rejections(events).length, 64);
  await s.assertReplayEquals(op);
});

test('every InvocationResult the coordinator returns is valid against the published InvocationResult schema', async () => {
  const { invocationResultSchema } = await import('../../src/contract/schemas.js');
  const { ajv } = await import('../../src/contract/validation.js');
  const validate = ajv.compile(invocationResultSchema);
  const { s, op } = await opened({ completion: { mode: 'first-success' }, siblings: 'cancel' });
  assert.ok(validate(await s.get(op)), JSON.stringify(validate.errors));
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: approve });
  assert.ok(validate(await s.get(op)), JSON.stringify(validate.errors));
  await s.clock.advance(60_000);
  assert.ok(validate(await s.get(op)), JSON.stringify(validate.errors));
});

test('a result carrying -0 on the wire is recorded so that live and replayed state are identical', async () => {
  const { s, op } = await opened({ result: { type: 'object' }, completion: { mode: 'first-success' } });
  const connection = s.bus.connect('raw-alfa', { publish: ['demo.v1.lab.*.*.result.alfa'] });
  const text = `{"kind":"result","operationId":"${op}","branchId":"alfa","peerId":"alfa","attempt":1,"fence":1,"result":{"verdict":"approve","score":-0,"ratio":-0.0e3}}`;
  await connection.publish(`demo.v1.lab.review.${op}.result.alfa`, new TextEncoder().encode(text));
  await s.settle();
  assert.equal((await s.get(op)).decision?.outcome, 'success');
  await s.assertReplayEquals(op);
});
