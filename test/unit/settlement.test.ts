/**
 * Spec: "Cancellation and sibling settlement" — one test per rule, over the virtual clock, each
 * with the replay-equality check.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, answers, namespace, storeWith, type Scenario } from '../support/scenario.js';
import type { DomainEvent } from '../../src/events/types.js';
import type { JsonObject } from '../../src/contract/json.js';
import { encodeWire, type CancelOutcome, type CancelRequest } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { peerBusPermissions } from '../../src/deployment/embedded.js';
import { flushMicrotasks } from '../../src/contract/clock.js';
import type { PublishReceipt } from '../../src/adapters/transport/types.js';
import { AdapterError } from '../../src/contract/errors.js';
import type { Handler } from '../../src/peer/peer.js';
import { fold } from '../../src/projections/record.js';
import { invocationResult } from '../../src/projections/views.js';

const of = <T extends DomainEvent['type']>(events: DomainEvent[], type: T) => events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);
const cancelling: JsonObject = {
  completion: { mode: 'first-success' },
  siblings: 'cancel',
  cancelTimeoutMs: 1000,
  settlementGraceMs: 3000,
  timeoutMs: 10_000,
  leaseMs: 10_000,
};

/** A handler that runs until cancelled (cooperative) — or, with ignore, until released by the test. */
function worker(options: { ignoresCancel?: boolean } = {}): { handler: Handler; finish: () => void } {
  let finish = () => {};
  const handler: Handler = (_input, context) =>
    new Promise((resolve, reject) => {
      finish = () => resolve({ verdict: 'reject' });
      if (!options.ignoresCancel) context.signal.addEventListener('abort', () => reject(new Error('stopped')));
    });
  return { handler, finish: () => finish() };
}

async function cancelReply(s: Scenario, peer: string, op: string, branchId: string, attempt: number, fence: number, outcome: CancelOutcome) {
  const c = s.bus.connect(`cr:${peer}`, peerBusPermissions(namespace, peer));
  const body = { kind: 'cancel-result', operationId: op, branchId, peerId: peer, attempt, fence, outcome };
  await c.publish(subjectFor(namespace, 'review', op, 'cancel-result', peer), new TextEncoder().encode(JSON.stringify(body)));
  await flushMicrotasks();
}

test('early closure records the decision and the cancel disposition of unfinished siblings in one transition, with the cancellation outbox', async () => {
  const s = await scenario({ peers: 3, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const read = await s.store.read(result.operationId);
  assert.equal(read.kind, 'ok');
  if (read.kind !== 'ok') return;
  const closing = read.transitions.find((t) => t.transition.events.some((e) => e.type === 'decision-closed'))!;
  const closed = of(closing.transition.events, 'decision-closed')[0]!;
  assert.deepEqual(closed.siblings, [
    { branchId: 'bravo', disposition: 'cancel-requested' },
    { branchId: 'charlie', disposition: 'cancel-requested' },
  ]);
  const record = await s.coordinator.record(result.operationId);
  assert.deepEqual(
    Object.values(record!.branches)
      .filter((b) => b.cancel)
      .map((b) => [b.branchId, b.cancel!.attempt, b.cancel!.fence]),
    [
      ['bravo', 1, 1],
      ['charlie', 1, 1],
    ],
  );
  await s.assertReplayEquals(result.operationId);
});

test('cancel requests carry the operation, branch, attempt, fence and a reason', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  const seen: CancelRequest[] = [];
  const spy = s.bus.connect('spy');
  await spy.subscribe(`${namespace}.review.*.cancel.*`, (m) => void seen.push(JSON.parse(new TextDecoder().decode(m.data)) as CancelRequest));
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  assert.deepEqual(seen, [
    { kind: 'cancel', operationId: result.operationId, branchId: 'bravo', peerId: 'bravo', attempt: 1, fence: 1, reason: 'decision-closed' },
  ]);
});

test('cooperative cancellation: a peer that stops answers stopped and settlement completes', async () => {
  const s = await scenario({ peers: 3, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  await s.addPeer('bravo', { review: worker().handler });
  await s.addPeer('charlie', { review: worker().handler });
  const { result } = await s.invoke('k');
  await s.settle();
  const view = await s.get(result.operationId);
  assert.equal(view.decision?.outcome, 'success');
  assert.equal(view.settlement.status, 'complete');
  assert.deepEqual(view.settlement.siblings, [
    { branchId: 'bravo', disposition: 'cancel-requested', outcome: 'stopped' },
    { branchId: 'charlie', disposition: 'cancel-requested', outcome: 'stopped' },
  ]);
  assert.deepEqual(
    view.branches.map((b) => b.status),
    ['success', 'cancelled', 'cancelled'],
  );
  assert.equal(view.phase, 'settled');
  await s.assertReplayEquals(result.operationId);
});

test('the cancel command is reauthorized: a denied cancel is not sent and settlement becomes indeterminate', async () => {
  const s = await scenario({ peers: 2, review: cancelling, embedded: { rules: [{ effect: 'allow' }, { effect: 'deny', actions: ['cancel'] }] } });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const events = await s.events(result.operationId);
  assert.deepEqual(
    of(events, 'cancel-dispatched').map((e) => e.receipt),
    ['rejected'],
  );
  await s.clock.advance(1000);
  const view = await s.get(result.operationId);
  assert.deepEqual([view.decision?.outcome, view.settlement.status], ['success', 'indeterminate']);
});

/** Cancels the coordinator publishes, at their instants after the decision, each answered by `answer` (the real publish when it returns undefined). */
function cancelPublications(s: Scenario, answer: (n: number) => PublishReceipt | Error | undefined) {
  const transport = s.coordinator.deps.transport;
  const publish = transport.publish.bind(transport);
  const sent: { atMs: number; msgId: string | undefined; message: CancelRequest }[] = [];
  transport.publish = async (subject, data, options) => {
    if (!subject.includes('.cancel.')) return publish(subject, data, options);
    sent.push({ atMs: s.clock.nowMs(), msgId: options?.msgId, message: JSON.parse(new TextDecoder().decode(data)) as CancelRequest });
    const answered = answer(sent.length);
    if (answered instanceof Error) throw answered;
    return answered ?? publish(subject, data, options);
  };
  return sent;
}

test('a cancel the transport rejects for a reason that may pass is published again, same attempt, fence and message id, until it is carried', async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling, cancelTimeoutMs: 10_000 } });
  const sent = cancelPublications(s, (n) => (n === 1 ? { receipt: 'rejected', detail: 'connection is closed' } : undefined));
  await s.addPeer('alfa', { review: answers('approve') });
  await s.addPeer('bravo', { review: worker().handler });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  assert.equal((await s.get(op)).settlement.status, 'pending');
  await s.clock.advance(1000);
  const view = await s.get(op);
  assert.deepEqual([view.settlement.status, view.settlement.siblings[0]?.outcome], ['complete', 'stopped']);
  assert.equal(sent.length, 2);
  assert.equal(sent[0]!.msgId, sent[1]!.msgId);
  assert.deepEqual(sent[0]!.message, sent[1]!.message);
  assert.deepEqual(
    of(await s.events(op), 'cancel-dispatched').map((e) => [e.attempt, e.fence, e.receipt, e.detail ?? null, e.transient ?? null]),
    [
      [1, 1, 'rejected', 'connection is closed', true],
      [1, 1, 'sent', null, null],
    ],
  );
  // Its cancel has ended: nothing is sent again.
  await s.clock.advance(20_000);
  assert.equal(sent.length, 2);
  await s.assertReplayEquals(op);
});

test('a cancel not known to have been carried is published again less and less often, never at or after the cancel timeout', async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling, cancelTimeoutMs: 10_000 } });
  const sent = cancelPublications(s, (n) => (n % 2 === 1 ? new Error('connection is closed') : { receipt: 'rejected', detail: 'connection is closed' }));
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  const closedAtMs = (await s.get(op)).decision!.closedAtMs;
  await s.clock.advance(30_000);
  assert.deepEqual(
    sent.map((p) => p.atMs - closedAtMs),
    [0, 1000, 3000, 7000],
  );
  assert.equal(new Set(sent.map((p) => p.msgId)).size, 1);
  assert.deepEqual(
    sent.map((p) => [p.message.attempt, p.message.fence]),
    [
      [1, 1],
      [1, 1],
      [1, 1],
      [1, 1],
    ],
  );
  const view = await s.get(op);
  assert.deepEqual([view.settlement.status, view.settlement.siblings[0]?.outcome], ['indeterminate', 'unknown']);
  // Recorded once: the publications after it say no more than that it is not known to have been carried.
  assert.deepEqual(
    of(await s.events(op), 'cancel-dispatched').map((e) => [e.receipt, e.detail]),
    [['unknown', 'connection is closed']],
  );
  await s.assertReplayEquals(op);
});

test('a coordinator that closes publishes no cancel again: the republication armed for an uncertain cancel is cancelled', async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling, cancelTimeoutMs: 60_000 } });
  const sent = cancelPublications(s, () => new Error('connection is closed'));
  await s.addPeer('alfa', { review: answers('approve') });
  await s.invoke('k');
  await s.settle();
  assert.equal(sent.length, 1);
  await s.coordinator.close();
  await s.clock.advance(60_000);
  assert.equal(sent.length, 1, 'nothing published after close');
  assert.deepEqual(
    (await s.coordinator.metrics.transportErrors.get()).values.map((v) => v.labels.stage),
    [],
  );
});

test('an operation that settles while its uncertain cancel waits to be published again keeps no republication armed', async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling, cancelTimeoutMs: 60_000 } });
  const sent = cancelPublications(s, () => ({ receipt: 'unknown', detail: 'ack timed out' }));
  const timersBefore = s.clock.pendingTimers();
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  assert.equal(sent.length, 1);
  // The peer got the first publication after all, and answers it.
  await cancelReply(s, 'bravo', op, 'bravo', 1, 1, 'stopped');
  const view = await s.get(op);
  assert.deepEqual([view.phase, view.settlement.status], ['settled', 'complete']);
  assert.equal(s.clock.pendingTimers(), timersBefore, 'nothing of the operation is left armed');
  await s.clock.advance(60_000);
  assert.equal(sent.length, 1);
  await s.assertReplayEquals(op);
});

test("a cancel the transport refuses for good is reported and recorded rejected at once, with the refusal: it is not published again and its settlement ends as a denied cancel's", async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling, cancelTimeoutMs: 10_000 } });
  const refusal = new AdapterError('invalid-input', 'publishing: the message is larger than the max_payload of the server (1024 bytes)');
  const sent = cancelPublications(s, () => ({ receipt: 'rejected', detail: 'MAX_PAYLOAD_EXCEEDED', refusal }));
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  assert.deepEqual(
    of(await s.events(op), 'cancel-dispatched').map((e) => [e.receipt, e.detail, e.transient ?? null]),
    [['rejected', refusal.message, null]],
  );
  const transportErrors = (await s.coordinator.metrics.transportErrors.get()).values.map((v) => [v.labels.stage, v.value]);
  assert.deepEqual(transportErrors, [['cancel', 1]]);
  await s.clock.advance(9999);
  assert.equal(sent.length, 1, 'never published again');
  assert.equal((await s.get(op)).settlement.status, 'pending', 'a late result may still settle it until the cancel timeout');
  await s.clock.advance(1);
  const view = await s.get(op);
  assert.deepEqual([view.settlement.status, view.settlement.siblings[0]?.outcome], ['indeterminate', 'unknown']);
  await s.assertReplayEquals(op);
});

test('peers reject stale fences: a cancel for an older fence gets no reply', async () => {
  const s = await scenario({ peers: 1, review: { ...cancelling, completion: { mode: 'all-terminal' } } });
  const w = worker();
  await s.addPeer('alfa', { review: w.handler });
  const { result } = await s.invoke('k');
  await s.settle();
  const replies: unknown[] = [];
  const spy = s.bus.connect('spy');
  await spy.subscribe(`${namespace}.review.*.cancel-result.*`, (m) => void replies.push(m.subject));
  const admin = s.bus.connect('admin');
  const stale: CancelRequest = {
    kind: 'cancel',
    operationId: result.operationId,
    branchId: 'alfa',
    peerId: 'alfa',
    attempt: 1,
    fence: 1,
    reason: 'decision-closed',
  };
  // The peer has seen fence 1; pretend a newer owner exists by sending fence 1 after a fence-2 request.
  const newer = {
    kind: 'request',
    operationId: result.operationId,
    contract: s.bundle.ref,
    interaction: 'review',
    branchId: 'alfa',
    peerId: 'alfa',
    attempt: 2,
    fence: 2,
    deadlineMs: 0,
    leaseUntilMs: 0,
    renewIntervalMs: 1000,
    publicationId: 'a'.repeat(64),
    input: { document: 'x' },
  };
  await admin.publish(subjectFor(namespace, 'review', result.operationId, 'request', 'alfa'), new TextEncoder().encode(JSON.stringify(newer)));
  await flushMicrotasks();
  await admin.publish(subjectFor(namespace, 'review', result.operationId, 'cancel', 'alfa'), encodeWire(stale));
  await flushMicrotasks();
  assert.deepEqual(replies, []);
  // The same peer does answer a cancel for the fence it runs.
  await admin.publish(subjectFor(namespace, 'review', result.operationId, 'cancel', 'alfa'), encodeWire({ ...stale, attempt: 2, fence: 2 }));
  await s.clock.advance(10);
  assert.equal(replies.length, 1);
});

test('already-completed preserves that fact even when its result arrived after decision', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  // bravo finished just as the decision closed: its result arrives within the settlement grace.
  await s.send('bravo', { operationId: result.operationId, branchId: 'bravo', peerId: 'bravo', result: { verdict: 'reject' } });
  const view = await s.get(result.operationId);
  assert.equal(view.decision?.outcome, 'success');
  assert.equal(view.decision?.successVotes, 1, 'the late fact does not reopen or recount the decision');
  assert.deepEqual(
    view.branches.map((b) => b.status),
    ['success', 'failure'],
  );
  assert.deepEqual(view.settlement, { status: 'complete', siblings: [{ branchId: 'bravo', disposition: 'cancel-requested', outcome: 'already-completed' }] });
  await s.assertReplayEquals(result.operationId);
});

test("the output returned with a decision is the aggregation at closure: a sibling's already-completed result after the decision is reported beside it, not folded into it", async () => {
  const s = await scenario({ peers: 3, review: { ...cancelling, completion: { mode: 'quorum', count: 2 } } });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  for (const p of ['alfa', 'bravo']) await s.send(p, { operationId: op, branchId: p, peerId: p, result: { verdict: 'approve' } });
  const atDecision = await s.get(op);
  assert.deepEqual([atDecision.decision?.outcome, atDecision.phase, atDecision.settlement.status], ['success', 'closed', 'pending']);
  assert.deepEqual(atDecision.output, { counts: { approve: 2 }, total: 2 });
  // charlie had finished as the quorum closed: its result arrives while its cancel is outstanding.
  await s.send('charlie', { operationId: op, branchId: 'charlie', peerId: 'charlie', result: { verdict: 'reject' } });
  const settled = await s.get(op);
  assert.deepEqual([settled.phase, settled.settlement.status], ['settled', 'complete']);
  assert.deepEqual(settled.settlement.siblings, [{ branchId: 'charlie', disposition: 'cancel-requested', outcome: 'already-completed' }]);
  assert.deepEqual(
    settled.branches.map((b) => [b.branchId, b.status, b.result]),
    [
      ['alfa', 'success', { verdict: 'approve' }],
      ['bravo', 'success', { verdict: 'approve' }],
      ['charlie', 'failure', { verdict: 'reject' }],
    ],
  );
  assert.deepEqual(settled.output, atDecision.output);
  assert.deepEqual(settled.decision, atDecision.decision);
  // The fold of the log gives the same view.
  const read = await s.store.read(op);
  assert.ok(read.kind === 'ok');
  assert.deepEqual(invocationResult(fold(read.transitions)!, s.bundle.interactions.get('review')).output, atDecision.output);
  await s.assertReplayEquals(op);
});

test('a cancelled peer that finishes anyway answers already-completed', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  const w = worker({ ignoresCancel: true });
  await s.addPeer('alfa', { review: answers('approve') });
  await s.addPeer('bravo', { review: w.handler }, { stopWaitMs: 500 });
  const { result } = await s.invoke('k');
  await s.settle();
  w.finish();
  await s.settle();
  const view = await s.get(result.operationId);
  assert.equal(view.settlement.siblings[0]?.outcome, 'already-completed');
  assert.equal(view.settlement.status, 'complete');
});

test('unknown or missing replies remain indeterminate', async () => {
  const s = await scenario({ peers: 3, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  await cancelReply(s, 'bravo', result.operationId, 'bravo', 1, 1, 'unknown');
  assert.equal((await s.get(result.operationId)).settlement.status, 'pending', 'charlie has not answered yet');
  await s.clock.advance(1000);
  const view = await s.get(result.operationId);
  assert.equal(view.settlement.status, 'indeterminate');
  assert.deepEqual(
    view.settlement.siblings.map((x) => x.outcome),
    ['unknown', 'unknown'],
  );
  assert.deepEqual(
    view.branches.map((b) => b.status),
    ['success', 'indeterminate', 'indeterminate'],
  );
  await s.assertReplayEquals(result.operationId);
});

test('cancellation timeout and settlement grace are bounded and independent of the decision deadline', async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling, timeoutMs: 60_000, leaseMs: 60_000 } });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const closedAtMs = (await s.get(result.operationId)).decision!.closedAtMs;
  await s.clock.advance(999);
  assert.equal((await s.get(result.operationId)).settlement.status, 'pending');
  await s.clock.advance(1);
  const view = await s.get(result.operationId);
  assert.equal(view.settlement.status, 'indeterminate');
  const settled = of(await s.events(result.operationId), 'cancel-timed-out');
  assert.equal(settled.length, 1);
  assert.ok(s.clock.nowMs() - closedAtMs === 1000 && s.clock.nowMs() < view.deadlineMs);
});

test('cancels do not gain permission to target a newer attempt: a cancel reply for another attempt is rejected', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  await cancelReply(s, 'bravo', result.operationId, 'bravo', 2, 2, 'stopped');
  await cancelReply(s, 'bravo', result.operationId, 'bravo', 1, 3, 'stopped');
  assert.equal((await s.get(result.operationId)).settlement.status, 'pending');
  await cancelReply(s, 'bravo', result.operationId, 'bravo', 1, 1, 'stopped');
  assert.equal((await s.get(result.operationId)).settlement.status, 'complete');
});

test('the operation phases are admitted, active, closed and settled', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  const phases: string[] = [];
  s.coordinator.onCommitted((r) => phases[phases.length - 1] !== r.phase && phases.push(r.phase));
  await s.addPeer('alfa', { review: answers('approve') });
  await s.addPeer('bravo', { review: worker().handler });
  await s.invoke('k');
  await s.settle();
  assert.deepEqual(phases, ['admitted', 'active', 'closed', 'settled']);
});

test('a closed successful decision can coexist with indeterminate sibling settlement', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1000);
  const view = await s.get(result.operationId);
  assert.deepEqual([view.decision?.outcome, view.phase, view.settlement.status], ['success', 'settled', 'indeterminate']);
});

test('waitFor decision permits progress at decision; waitFor settled additionally requires settlement', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const atDecision = await s.coordinator.wait('svc-a', result.operationId, 'decision', 0);
  assert.equal(atDecision.reached, true);
  const notYet = await s.coordinator.wait('svc-a', result.operationId, 'settled', 0);
  assert.equal(notYet.reached, false);
  const settling = s.coordinator.wait('svc-a', result.operationId, 'settled', 5000);
  await s.clock.advance(1000);
  const settled = await settling;
  assert.deepEqual([settled.reached, settled.result.settlement.status], [true, 'indeterminate']);
});

test('a wait answers reached from the state it answers: a decision committed as its wait ends is reached, not a 202 with a decided body', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  const { result } = await s.invoke('k');
  await s.settle();
  // The decision commits after the kernel's wait has answered (not reached) and before the coordinator answers.
  const kernel = s.coordinator.kernel;
  const original = kernel.wait.bind(kernel);
  kernel.wait = async (...args: Parameters<typeof original>) => {
    const at = await original(...args);
    await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
    await s.settle();
    return at;
  };
  const answer = await s.coordinator.wait('svc-a', result.operationId, 'decision', 0);
  assert.notEqual(answer.result.decision, null, 'the decision committed while the wait ended');
  assert.equal(answer.reached, true, 'and the answer says its boundary is reached');
});

test('grace expiry never reopens a decision or invents successful cancellation', async () => {
  const s = await scenario({ peers: 2, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const decision = (await s.get(result.operationId)).decision;
  await s.clock.advance(5000);
  await s.send('bravo', { operationId: result.operationId, branchId: 'bravo', peerId: 'bravo', result: { verdict: 'approve' } });
  await cancelReply(s, 'bravo', result.operationId, 'bravo', 1, 1, 'stopped');
  const view = await s.get(result.operationId);
  assert.deepEqual(view.decision, decision);
  assert.equal(view.settlement.status, 'indeterminate');
  assert.equal(view.settlement.siblings[0]?.outcome, 'unknown');
  await s.assertReplayEquals(result.operationId);
});

test('detach stops waiting for sibling results but sends no cancel and does not claim stopped work', async () => {
  const s = await scenario({ peers: 3, review: { ...cancelling, siblings: 'detach' } });
  const cancels: string[] = [];
  const spy = s.bus.connect('spy');
  await spy.subscribe(`${namespace}.review.*.cancel.*`, (m) => void cancels.push(m.subject));
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  const view = await s.get(result.operationId);
  assert.deepEqual(cancels, []);
  assert.deepEqual(
    view.settlement.siblings.map((x) => x.disposition),
    ['detached', 'detached'],
  );
  assert.deepEqual(
    view.branches.slice(1).map((b) => b.status),
    ['indeterminate', 'indeterminate'],
  );
});

test('a branch only waiting to retry is cancelled without a message: nothing of it is running', async () => {
  const s = await scenario({ store: 'sqlite', peers: 2, review: { ...cancelling, attempts: 2, retryBackoffMs: 500 } });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.send('bravo', { operationId: result.operationId, branchId: 'bravo', peerId: 'bravo', result: { verdict: 'retry' } });
  await s.send('alfa', { operationId: result.operationId, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  const view = await s.get(result.operationId);
  assert.deepEqual([view.branches[1]?.status, view.settlement.status], ['cancelled', 'complete']);
  assert.equal(of(await s.events(result.operationId), 'cancel-dispatched').length, 0);
});

test('an explicit cancellation is only available where the interaction declares it', async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling } });
  const { result } = await s.invoke('k');
  await assert.rejects(s.coordinator.cancel('svc-a', result.operationId), (e) => e instanceof Error && /does not declare caller cancellation/.test(e.message));
  assert.equal((await s.get(result.operationId)).decision, null);
});

test('a declared, authorized caller cancellation closes the open decision as failed and cancels every unfinished branch', async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling, cancellation: 'caller', siblings: 'detach' } });
  await s.addPeer('alfa', { review: worker().handler });
  await s.addPeer('bravo', { review: worker().handler });
  const { result } = await s.invoke('k');
  await s.settle();
  await assert.rejects(s.coordinator.cancel('svc-b', result.operationId), /no operation/);
  const view = await s.coordinator.cancel('svc-a', result.operationId);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['failed', 'cancelled']);
  await s.settle();
  const after = await s.get(result.operationId);
  assert.deepEqual([after.settlement.status, after.settlement.siblings.map((x) => x.outcome)], ['complete', ['stopped', 'stopped']]);
  // Cancelling again changes nothing: a closed decision never changes.
  assert.deepEqual((await s.coordinator.cancel('svc-a', result.operationId)).decision, after.decision);
  await s.assertReplayEquals(result.operationId);
});

test('caller cancellation is refused when the policy denies the cancel action', async () => {
  const s = await scenario({
    peers: 1,
    review: { ...cancelling, cancellation: 'caller' },
    embedded: { rules: [{ effect: 'allow' }, { effect: 'deny', actions: ['cancel'], principals: ['svc-a'] }] },
  });
  const { result } = await s.invoke('k');
  await assert.rejects(s.coordinator.cancel('svc-a', result.operationId), (e) => e instanceof Error && /denied/.test(e.message));
});

/**
 * alfa asks for a retry; while its reassignment (attempt 2) commits, bravo's success arrives and
 * queues ahead of the new dispatch, so the decision overtakes attempt 2 before this process sends
 * it. `shared`: the transport reports a broker other processes share (NATS), not the in-process bus.
 * Answers the operation and the cancel and request subjects published after the reassignment.
 */
async function overtakenRetry(s: Scenario, shared: boolean): Promise<{ op: string; cancels: string[]; requests: string[] }> {
  if (shared)
    s.coordinator.deps.transport = storeWith(s.coordinator.deps.transport, (real) => ({
      capabilities: { ...real.capabilities, durable: true, inProcess: false },
    }));
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'retry' } });
  const store = s.store;
  const append = store.append.bind(store);
  store.append = async (id, rev, t) => {
    if (t.events.some((e) => e.type === 'branch-reassigned'))
      await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: { verdict: 'approve' } });
    return append(id, rev, t);
  };
  const cancels: string[] = [];
  const requests: string[] = [];
  const spy = s.bus.connect('spy');
  await spy.subscribe(`${namespace}.review.*.cancel.*`, (m) => void cancels.push(m.subject));
  await spy.subscribe(`${namespace}.review.*.request.alfa`, (m) => void requests.push(m.subject));
  await s.clock.advance(100);
  await s.settle();
  return { op, cancels, requests };
}

const retrying = { ...cancelling, attempts: 2, retryBackoffMs: 100 };

test('a request the decision overtook before it was sent is withdrawn, not cancelled: settlement stays complete', async () => {
  const s = await scenario({ store: 'sqlite', peers: 2, review: retrying });
  const { op, cancels, requests } = await overtakenRetry(s, false);
  const view = await s.get(op);
  assert.equal(view.decision?.outcome, 'success');
  assert.deepEqual(requests, [], 'attempt 2 was never published');
  assert.deepEqual(cancels, [], 'so no cancel is sent for it');
  assert.deepEqual(view.settlement, { status: 'complete', siblings: [{ branchId: 'alfa', disposition: 'cancel-requested', outcome: 'withdrawn' }] });
  await s.assertReplayEquals(op);
});

test('on a durable store and a transport other processes share, a request this process has not sent is cancelled, never withdrawn: another coordinator holding the operation may have sent it', async () => {
  // Every coordinator that loads or follows the operation publishes its pending requests, so this process not having sent one proves nothing.
  const s = await scenario({ store: 'sqlite', peers: 2, review: retrying });
  const { op, cancels, requests } = await overtakenRetry(s, true);
  const view = await s.get(op);
  assert.equal(view.decision?.outcome, 'success');
  assert.deepEqual(requests, [], 'attempt 2 was not published by this process');
  const events = await s.events(op);
  assert.deepEqual(of(events, 'cancel-withdrawn'), [], 'nothing says the request was never sent');
  assert.deepEqual(cancels, [`${namespace}.review.${op}.cancel.alfa`], 'its cancel is sent');
  assert.equal(of(events, 'cancel-dispatched')[0]?.attempt, 2, 'for attempt 2');
  assert.equal(view.settlement.status, 'pending', 'and settlement waits for its reply');
  await s.assertReplayEquals(op);
});

test('cancels held back because their reply path could not be made are sent when it can, within the cancel timeout', async () => {
  const s = await scenario({ peers: 2, review: { ...cancelling, cancelTimeoutMs: 5000 } });
  // The broker refuses the coordinator's first cancel-result subscription (a moment's outage), then takes it.
  const transport = s.coordinator.deps.transport;
  let refusals = 1;
  s.coordinator.deps.transport = storeWith(transport, (real) => ({
    subscribe: (pattern: string, handler: Parameters<typeof real.subscribe>[1]) =>
      pattern.endsWith('.cancel-result.*') && refusals-- > 0
        ? Promise.reject(new AdapterError('unavailable', 'connection is closed'))
        : real.subscribe(pattern, handler),
  }));
  const bravo = worker();
  await s.addPeer('alfa', { review: answers('approve') });
  await s.addPeer('bravo', { review: bravo.handler });
  const cancels: string[] = [];
  const spy = s.bus.connect('spy');
  await spy.subscribe(`${namespace}.review.*.cancel.*`, (m) => void cancels.push(m.subject));
  const { result } = await s.invoke('k');
  await s.settle();
  assert.equal((await s.get(result.operationId)).decision?.outcome, 'success');
  assert.deepEqual(cancels, [], 'no cancel without its reply path');
  await s.clock.advance(1000);
  await s.settle();
  assert.deepEqual(cancels, [`${namespace}.review.${result.operationId}.cancel.bravo`], 'sent once the path was made');
  const view = await s.get(result.operationId);
  assert.deepEqual(view.settlement, { status: 'complete', siblings: [{ branchId: 'bravo', disposition: 'cancel-requested', outcome: 'stopped' }] });
  await s.assertReplayEquals(result.operationId);
});

test('a broken durability guarantee closes open operations as indeterminate (durability-lost) and leaves decided ones alone', async () => {
  const s = await scenario({ peers: 3 });
  const open = (await s.invoke('open')).result.operationId;
  const decided = (await s.invoke('decided')).result.operationId;
  await s.settle();
  for (const p of ['alfa', 'bravo', 'charlie']) await s.send(p, { operationId: decided, branchId: p, peerId: p, result: { verdict: 'approve' } });
  const before = await s.get(decided);
  assert.ok(before.decision !== null);
  assert.equal(await s.coordinator.closeDurabilityLost(new Set(['some.other.ns'])), 0, 'another namespace is not affected');
  assert.equal(await s.coordinator.closeDurabilityLost(new Set([namespace])), 1);
  const lost = await s.get(open);
  assert.deepEqual(
    [lost.decision?.outcome, lost.decision?.reason, lost.settlement.status, lost.phase],
    ['indeterminate', 'durability-lost', 'indeterminate', 'settled'],
  );
  assert.deepEqual(
    lost.settlement.siblings.map((b) => b.disposition),
    ['detached', 'detached', 'detached'],
  );
  assert.deepEqual((await s.get(decided)).decision, before.decision);
  assert.equal(await s.coordinator.closeDurabilityLost(new Set([namespace])), 0, 'closing again changes nothing');
  // A peer's answer afterwards never reopens it.
  await s.send('alfa', { operationId: open, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  assert.deepEqual((await s.get(open)).decision, lost.decision);
  await s.assertReplayEquals(open);
});
