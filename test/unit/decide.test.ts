/**
 * Spec: "Selection, claims and attempts", "Result admission and decision", "Cancellation and
 * sibling settlement" and "State-store protocol and atomic time guards" — the pure deciders
 * (src/domain/decide.ts) on records taken from a running deployment: which transition each
 * command yields at which instant, under which guard, and which it refuses. The command names
 * of transitions are what the operation timeline (inspection) shows.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, namespace, type Scenario } from '../support/scenario.js';
import { acceptedResult } from '../conformance/store.js';
import type { JsonObject } from '../../src/contract/json.js';
import type { CompiledInteraction } from '../../src/contract/bundle.js';
import { limits } from '../../src/contract/limits.js';
import type { DomainEvent, Transition } from '../../src/events/types.js';
import type { CancelResult, ClaimMessage, ResultMessage } from '../../src/events/wire.js';
import { applyEvents, type OperationRecord } from '../../src/projections/record.js';
import {
  decideCancelDispatched,
  decideCancelOperation,
  decideCancelResult,
  decideCancelWithdrawn,
  decideClaim,
  decideDeadline,
  decideDispatchRecorded,
  decideDue,
  decideDurabilityLost,
  decideLogBudgetExhausted,
  decideResult,
  decideRevocations,
  decideTogether,
  renewalFloorMs,
  retryInstant,
  type PeerCommand,
} from '../../src/domain/decide.js';

const types = (t: Transition | undefined | 'disjoint') => (t === undefined || t === 'disjoint' ? t : t.events.map((e) => e.type));
const allowAll = () => ({ allowed: true, expiresAtMs: Number.MAX_SAFE_INTEGER });

async function admitted(review: JsonObject = {}, peers = 3): Promise<{ s: Scenario; op: string; record: OperationRecord; interaction: CompiledInteraction }> {
  const s = await scenario({ peers, review });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  return { s, op, record: (await s.coordinator.record(op))!, interaction: s.bundle.interactions.get('review')! };
}

function peerCommand<M extends { peerId: string }>(
  record: OperationRecord,
  kind: string,
  message: M,
  nowMs: number,
  extra: Partial<PeerCommand<M>> = {},
): PeerCommand<M> {
  return {
    subject: `${namespace}.review.${record.operationId}.${kind}.${message.peerId}`,
    subjectPeerId: message.peerId,
    message,
    publisherProblem: undefined,
    authorizationProblem: undefined,
    authorizedUntilMs: nowMs + 60_000,
    nowMs,
    ...extra,
  };
}
const resultOf = (record: OperationRecord, peer: string, result: JsonObject, extra: Partial<ResultMessage> = {}): ResultMessage => ({
  kind: 'result',
  operationId: record.operationId,
  branchId: peer,
  peerId: peer,
  attempt: 1,
  fence: 1,
  result,
  ...extra,
});
const claimOf = (record: OperationRecord, peer: string, action: 'renew' | 'release', extra: Partial<ClaimMessage> = {}): ClaimMessage => ({
  kind: 'claim',
  action,
  operationId: record.operationId,
  branchId: peer,
  peerId: peer,
  attempt: 1,
  fence: 1,
  ...extra,
});
const cancelReply = (record: OperationRecord, peer: string, outcome: CancelResult['outcome']): CancelResult => ({
  kind: 'cancel-result',
  operationId: record.operationId,
  branchId: peer,
  peerId: peer,
  attempt: 1,
  fence: 1,
  outcome,
});
/** A recording-only event (no lifecycle move), for commands decided together. */
const noted = (record: OperationRecord, n: number): DomainEvent => ({
  type: 'result-rejected',
  v: 1,
  reason: 'stale-fence',
  subject: `${namespace}.review.${record.operationId}.result.alfa`,
  branchId: 'alfa',
  peerId: 'alfa',
  attempt: 1,
  fence: n,
  detail: `note ${n}`,
});

// ── commands decided together ──────────────────────────────────────────────

test('commands decided together make one transition: their events in order, the intersection of their guards, their command names and message ids', async () => {
  const { record } = await admitted();
  const at = record.admittedAtMs + 10;
  const part = (n: number, command: string, guard: [number, number], messageId?: string) => (): Transition => ({
    events: [noted(record, n)],
    timeGuard: { notBeforeMs: guard[0], notAfterMs: guard[1] },
    causation: messageId === undefined ? { command } : { command, messageId },
  });
  const together = decideTogether(
    record,
    [
      part(2, 'admit-result', [at - 5, at + 100], 'alfa/1/2'),
      () => undefined,
      part(3, 'renew', [at - 1, at + 50]),
      part(4, 'admit-result', [at - 9, at + 70], 'bravo/1/4'),
    ],
    at,
  );
  assert.ok(together !== undefined && together !== 'disjoint');
  assert.deepEqual(
    together.events.map((e) => (e.type === 'result-rejected' ? e.fence : null)),
    [2, 3, 4],
  );
  assert.deepEqual(together.timeGuard, { notBeforeMs: at - 1, notAfterMs: at + 50 });
  assert.deepEqual(together.causation, { command: 'admit-result+renew', messageId: 'alfa/1/2 bravo/1/4' });
  // Without message ids, the causation has none.
  const plain = decideTogether(record, [part(2, 'renew', [at, at + 9]), part(3, 'release', [at, at + 9])], at);
  assert.ok(plain !== undefined && plain !== 'disjoint');
  assert.deepEqual(plain.causation, { command: 'renew+release' });
  // Guards that do not meet cannot be one commit.
  assert.equal(decideTogether(record, [part(2, 'renew', [at, at + 5]), part(3, 'renew', [at + 5, at + 9])], at), 'disjoint');
  // Nothing decided, nothing to append; one command is its own transition.
  assert.equal(decideTogether(record, [() => undefined], at), undefined);
  const alone = part(5, 'renew', [at, at + 9])();
  assert.equal(decideTogether(record, [() => alone], at), alone);
});

test('a batch names its commands and message ids only within their bounds: past 64 characters of names it is a batch, past 512 of ids it names none', async () => {
  const { record } = await admitted();
  const at = record.admittedAtMs + 10;
  const part = (n: number, command: string, messageId: string) => (): Transition => ({
    events: [noted(record, n)],
    timeGuard: { notBeforeMs: at, notAfterMs: at + 9 },
    causation: { command, messageId },
  });
  const named = (commands: string[], ids: string[]) => {
    const t = decideTogether(
      record,
      commands.map((c, i) => part(i + 2, c, ids[i]!)),
      at,
    );
    assert.ok(t !== undefined && t !== 'disjoint');
    return t.causation;
  };
  // 'c'.repeat(31) + '+' + 'd'.repeat(32): exactly 64 characters.
  assert.equal(named(['c'.repeat(31), 'd'.repeat(32)], ['a', 'b']).command, `${'c'.repeat(31)}+${'d'.repeat(32)}`);
  assert.equal(named(['c'.repeat(31), 'd'.repeat(33)], ['a', 'b']).command, 'batch');
  assert.equal(named(['x', 'y'], ['i'.repeat(255), 'j'.repeat(256)]).messageId, `${'i'.repeat(255)} ${'j'.repeat(256)}`);
  assert.equal(named(['x', 'y'], ['i'.repeat(256), 'j'.repeat(256)]).messageId, undefined);
});

// ── dispatch receipts and revocations ──────────────────────────────────────

test('a rejected or exhausted delivery ends the attempt as delivery-exhausted (a retry within the budget, never a new branch); receipts of another attempt or a branch no longer claimed are ignored', async () => {
  const { record } = await admitted({ completion: { mode: 'all-successful' } });
  const at = record.admittedAtMs + 10;
  const durable: OperationRecord = { ...record, manifest: { ...record.manifest, attemptsMax: 3 } };
  const exhausted = decideDispatchRecorded(durable, [{ branchId: 'alfa', attempt: 1, fence: 1, receipt: 'exhausted' }], at);
  assert.deepEqual(exhausted?.events, [
    { type: 'claim-ended', v: 1, branchId: 'alfa', attempt: 1, fence: 1, cause: 'delivery-exhausted', retryAtMs: at + record.manifest.retryBackoffMs },
  ]);
  assert.equal(exhausted?.causation.command, 'record-dispatch');
  // With one attempt the failure is final, and all-successful can no longer succeed: closed in the same transition.
  const final = decideDispatchRecorded(
    record,
    [
      { branchId: 'alfa', attempt: 1, fence: 1, receipt: 'rejected' },
      { branchId: 'bravo', attempt: 1, fence: 1, receipt: 'stored' },
    ],
    at,
  );
  assert.deepEqual(types(final), ['claim-ended', 'dispatch-recorded', 'decision-closed', 'settlement-completed']);
  // A stored receipt is recorded with its detail, bounded.
  const stored = decideDispatchRecorded(record, [{ branchId: 'alfa', attempt: 1, fence: 1, receipt: 'stored', detail: 'd'.repeat(2000) }], at);
  const event = stored?.events[0];
  assert.ok(event?.type === 'dispatch-recorded');
  assert.equal(event.detail, 'd'.repeat(1024));
  assert.deepEqual(types(stored), ['dispatch-recorded']);
  // Another attempt's receipt, an unknown branch's, or one for a branch that already answered: nothing.
  assert.equal(decideDispatchRecorded(record, [{ branchId: 'alfa', attempt: 2, fence: 2, receipt: 'exhausted' }], at), undefined);
  assert.equal(decideDispatchRecorded(record, [{ branchId: 'zulu', attempt: 1, fence: 1, receipt: 'stored' }], at), undefined);
  const answered = applyEvents(record, [acceptedResult('alfa')], at);
  assert.equal(decideDispatchRecorded(answered, [{ branchId: 'alfa', attempt: 1, fence: 1, receipt: 'exhausted' }], at), undefined);
});

test('an uncertain delivery is recorded unknown once per attempt: a repeat of it is not recorded, a receipt that says more is', async () => {
  const { record } = await admitted({ completion: { mode: 'all-successful' } });
  const at = record.admittedAtMs + 10;
  const durable: OperationRecord = { ...record, manifest: { ...record.manifest, attemptsMax: 3 } };
  const unknown = { branchId: 'alfa', attempt: 1, fence: 1, receipt: 'unknown' as const, detail: 'ack timed out' };
  const first = decideDispatchRecorded(durable, [unknown], at);
  assert.deepEqual(first?.events, [{ type: 'dispatch-recorded', v: 1, branchId: 'alfa', attempt: 1, fence: 1, receipt: 'unknown', detail: 'ack timed out' }]);
  const uncertain = applyEvents(durable, first?.events ?? [], at);
  assert.equal(uncertain.branches.alfa?.outbox.receipt, 'unknown');
  // Published again and still uncertain: nothing new to record.
  assert.equal(decideDispatchRecorded(uncertain, [{ ...unknown, detail: 'no responders' }], at + 1000), undefined);
  // Beside another branch's first receipt, only that one is recorded.
  assert.deepEqual(
    decideDispatchRecorded(uncertain, [unknown, { branchId: 'bravo', attempt: 1, fence: 1, receipt: 'unknown' }], at + 1000)?.events.map((e) => [
      e.type,
      'branchId' in e ? e.branchId : null,
    ]),
    [['dispatch-recorded', 'bravo']],
  );
  // Stored at last, or rejected (the attempt ends): recorded.
  for (const receipt of ['stored', 'already-stored'] as const) {
    assert.deepEqual(types(decideDispatchRecorded(uncertain, [{ ...unknown, receipt }], at + 1000)), ['dispatch-recorded']);
  }
  assert.deepEqual(types(decideDispatchRecorded(uncertain, [{ ...unknown, receipt: 'rejected' }], at + 1000)), ['claim-ended']);
  assert.deepEqual(types(decideDispatchRecorded(uncertain, [{ ...unknown, receipt: 'exhausted' }], at + 1000)), ['claim-ended']);
});

test('a delivery the transport refused for good (past max_payload, malformed) fails its branch at once, recorded with why; within the budget, not retried', async () => {
  const { record } = await admitted({ completion: { mode: 'all-successful' } });
  const at = record.admittedAtMs + 10;
  const durable: OperationRecord = { ...record, manifest: { ...record.manifest, attemptsMax: 3 } };
  const detail = 'the message is 9000 bytes (payload and headers); the NATS server takes at most 4096 (max_payload)';
  const refused = decideDispatchRecorded(durable, [{ branchId: 'alfa', attempt: 1, fence: 1, receipt: 'rejected', detail, refusedForGood: true }], at);
  assert.deepEqual(types(refused), ['dispatch-recorded', 'decision-closed', 'settlement-completed']);
  assert.deepEqual(refused?.events[0], { type: 'dispatch-recorded', v: 1, branchId: 'alfa', attempt: 1, fence: 1, receipt: 'rejected', detail });
  const failed = applyEvents(durable, refused?.events ?? [], at);
  assert.deepEqual([failed.branches.alfa?.state, failed.branches.alfa?.retryAtMs], ['failure', null]);
  // The same rejection not known to last (the connection closing) stays a retry within the budget.
  const passing = decideDispatchRecorded(durable, [{ branchId: 'alfa', attempt: 1, fence: 1, receipt: 'rejected', detail: 'connection is closed' }], at);
  assert.deepEqual(types(passing), ['claim-ended']);
});

test('revocation terminates only still-open branches of an undecided operation, with the policy revision and a bounded reason', async () => {
  const { record } = await admitted({ completion: { mode: 'all-terminal' } });
  const at = record.admittedAtMs + 10;
  const revoked = decideRevocations(record, [{ branchId: 'alfa', policyRevision: 'r7', reason: 'x'.repeat(2000) }], at);
  assert.deepEqual(revoked?.events, [{ type: 'branch-revoked', v: 1, branchId: 'alfa', attempt: 1, fence: 1, policyRevision: 'r7', reason: 'x'.repeat(1024) }]);
  assert.deepEqual(revoked?.timeGuard, { notBeforeMs: record.admittedAtMs, notAfterMs: record.deadlineMs });
  assert.equal(revoked?.causation.command, 'revoke');
  assert.equal(decideRevocations(record, [{ branchId: 'zulu', policyRevision: 'r7', reason: 'gone' }], at), undefined);
  const terminal = applyEvents(record, revoked!.events, at);
  assert.equal(decideRevocations(terminal, [{ branchId: 'alfa', policyRevision: 'r8', reason: 'again' }], at), undefined);
  const decided = decideDurabilityLost(record)!;
  assert.equal(decideRevocations(applyEvents(record, decided.events, at), [{ branchId: 'bravo', policyRevision: 'r7', reason: 'late' }], at), undefined);
});

// ── attempts, leases, retries, deadline ────────────────────────────────────

test('a retry must be able to start strictly before the deadline, within the attempt budget', async () => {
  const { record } = await admitted();
  const durable: OperationRecord = { ...record, manifest: { ...record.manifest, attemptsMax: 3 } };
  const branch = durable.branches['alfa']!;
  const backoff = durable.manifest.retryBackoffMs;
  assert.equal(retryInstant(durable, branch, durable.deadlineMs - backoff - 1), durable.deadlineMs - 1);
  assert.equal(retryInstant(durable, branch, durable.deadlineMs - backoff), null);
  assert.equal(retryInstant(durable, { ...branch, attempt: 3 }, durable.admittedAtMs), null);
  assert.equal(retryInstant(record, branch, record.admittedAtMs), null, 'one attempt in memory mode');
});

test('an expired claim ends at its lease end and a retry starts at its retry instant: the guards begin there, and nothing is retried before it', async () => {
  const { record } = await admitted({ leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 });
  const durable: OperationRecord = { ...record, manifest: { ...record.manifest, attemptsMax: 3 } };
  const leaseUntilMs = durable.branches['alfa']!.leaseUntilMs;
  assert.equal(decideDue(durable, leaseUntilMs - 1, allowAll), undefined);
  const expired = decideDue(durable, leaseUntilMs + 5, allowAll)!;
  assert.deepEqual(types(expired), ['claim-ended', 'claim-ended', 'claim-ended']);
  assert.equal(expired.timeGuard.notBeforeMs, leaseUntilMs);
  assert.equal(expired.causation.command, 'lease-or-retry-due');
  const retrying = applyEvents(durable, expired.events, leaseUntilMs + 5);
  const retryAtMs = retrying.branches['alfa']!.retryAtMs!;
  assert.equal(retryAtMs, leaseUntilMs + durable.manifest.retryBackoffMs);
  assert.equal(decideDue(retrying, retryAtMs - 1, allowAll), undefined, 'not before the retry instant');
  const retried = decideDue(retrying, retryAtMs + 3, allowAll)!;
  assert.deepEqual(types(retried), ['branch-reassigned', 'branch-reassigned', 'branch-reassigned']);
  assert.equal(retried.timeGuard.notBeforeMs, retryAtMs);
  // The new attempts hold new claims: their next due instant is their lease end, not another retry.
  const reassigned = applyEvents(retrying, retried.events, retryAtMs + 3);
  assert.equal(decideDue(reassigned, retryAtMs + 4, allowAll), undefined);
});

test('a closed decision is final: the deadline and lost durability change nothing, and lost durability detaches only the open branches', async () => {
  const { record } = await admitted({ completion: { mode: 'all-terminal' } });
  const at = record.admittedAtMs + 10;
  const withResult = applyEvents(record, [acceptedResult('alfa')], at);
  const lost = decideDurabilityLost(withResult)!;
  const closed = lost.events[0];
  assert.ok(closed?.type === 'decision-closed');
  assert.deepEqual(
    closed.siblings.map((b) => b.branchId),
    ['bravo', 'charlie'],
  );
  assert.equal(lost.causation.command, 'durability-lost');
  const decided = applyEvents(withResult, lost.events, at);
  assert.equal(decideDurabilityLost(decided), undefined);
  assert.equal(decideDeadline(decided, decided.deadlineMs), undefined);
  assert.equal(decideDeadline(withResult, withResult.deadlineMs)?.causation.command, 'deadline-reached');
  assert.equal(decideCancelOperation(withResult, at, at + 100)?.causation.command, 'cancel-operation');
});

// ── claims ─────────────────────────────────────────────────────────────────

test('a renewal is taken from half the renew interval on, extends the lease by leaseMs (never past the deadline), and is unchanged while the lease still has leaseMs left', async () => {
  const { record } = await admitted({ leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 });
  const start = record.branches['alfa']!.claimedAtMs;
  assert.equal(renewalFloorMs(record), Math.ceil((10_000 * 3) / limits.renewalTransitionsPerOperationMax));
  const renew = (r: OperationRecord, atMs: number) => decideClaim(r, peerCommand(r, 'claim', claimOf(r, 'alfa', 'renew'), atMs));
  assert.deepEqual(renew(record, start + 199), { kind: 'unchanged' }, 'before half the renew interval');
  const renewed = renew(record, start + 200);
  assert.equal(renewed.kind, 'renewed');
  assert.ok(renewed.kind === 'renewed');
  assert.deepEqual(renewed.transition.events, [{ type: 'lease-renewed', v: 1, branchId: 'alfa', attempt: 1, fence: 1, leaseUntilMs: start + 1200 }]);
  assert.equal(renewed.transition.causation.command, 'renew');
  // A lease that still has leaseMs left is not renewed.
  const long = { ...record, branches: { ...record.branches, alfa: { ...record.branches['alfa']!, leaseUntilMs: start + 1300 } } };
  assert.deepEqual(renew(long, start + 300), { kind: 'unchanged' });
  // Near the deadline the grant stops there; a grant that would not extend the lease is unchanged.
  const nearEnd = { ...record, deadlineMs: start + 1000 };
  assert.deepEqual(renew(nearEnd, start + 300), { kind: 'unchanged' });
  const capped = renew({ ...record, deadlineMs: start + 1100 }, start + 300);
  assert.ok(capped.kind === 'renewed');
  assert.equal((capped.transition.events[0] as { leaseUntilMs: number }).leaseUntilMs, start + 1100);
  // At its lease end the claim is expired.
  assert.equal(renew(record, start + 1000).kind, 'reject');
  assert.deepEqual((({ kind, reason }) => ({ kind, reason }))(renew(record, start + 1000) as { kind: string; reason: string }), {
    kind: 'reject',
    reason: 'expired-lease',
  });
});

test('over a long timeout a renewal grants leaseMs plus the renewal floor, so the operation commits a bounded number of renewals', async () => {
  const { record } = await admitted({ leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 });
  const week = 7 * 24 * 3600 * 1000;
  const long: OperationRecord = { ...record, deadlineMs: record.admittedAtMs + week };
  const floorMs = Math.ceil((week * 3) / limits.renewalTransitionsPerOperationMax);
  assert.equal(renewalFloorMs(long), floorMs);
  const start = long.branches['alfa']!.claimedAtMs;
  const renewed = decideClaim(long, peerCommand(long, 'claim', claimOf(long, 'alfa', 'renew'), start + 200));
  assert.ok(renewed.kind === 'renewed');
  assert.equal((renewed.transition.events[0] as { leaseUntilMs: number }).leaseUntilMs, start + 200 + 1000 + floorMs);
  // A floor of at most half the renew interval adds nothing.
  const short: OperationRecord = { ...record, deadlineMs: record.admittedAtMs + Math.floor((200 * limits.renewalTransitionsPerOperationMax) / 3) };
  assert.ok(renewalFloorMs(short) <= 200);
  const plain = decideClaim(short, peerCommand(short, 'claim', claimOf(short, 'alfa', 'renew'), start + 200));
  assert.ok(plain.kind === 'renewed');
  assert.equal((plain.transition.events[0] as { leaseUntilMs: number }).leaseUntilMs, start + 1200);
});

test('a claim is refused on correlation, on a closed decision and after its lease; a release ends the claim', async () => {
  const { record } = await admitted({ leaseMs: 1000, renewIntervalMs: 400, timeoutMs: 10_000 });
  const at = record.admittedAtMs + 300;
  const reasonOf = (d: ReturnType<typeof decideClaim>) => (d.kind === 'reject' ? d.reason : d.kind);
  assert.equal(reasonOf(decideClaim(record, peerCommand(record, 'claim', claimOf(record, 'alfa', 'renew', { fence: 2 }), at))), 'stale-fence');
  const closed = applyEvents(record, decideDurabilityLost(record)!.events, at);
  assert.equal(reasonOf(decideClaim(closed, peerCommand(closed, 'claim', claimOf(closed, 'alfa', 'renew'), at))), 'branch-terminal');
  const released = decideClaim(record, peerCommand(record, 'claim', claimOf(record, 'alfa', 'release'), at));
  assert.equal(released.kind, 'released');
  assert.ok(released.kind === 'released');
  assert.equal(released.transition.causation.command, 'release');
  assert.equal(released.transition.events[0]?.type, 'claim-ended');
});

// ── cancel results, withdrawals, cancel receipts ───────────────────────────

async function cancelling(): Promise<{ record: OperationRecord }> {
  const { s, op } = await admitted({
    completion: { mode: 'first-success' },
    siblings: 'cancel',
    cancelTimeoutMs: 1000,
    settlementGraceMs: 3000,
    timeoutMs: 10_000,
  });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  const record = (await s.coordinator.record(op))!;
  assert.ok(record.decision !== null && record.branches['bravo']!.cancel !== null);
  return { record };
}

test('a cancel reply is taken strictly before the cancel deadline; a repeat of the outcome already taken is a duplicate, any other reply for a branch not cancelling is refused', async () => {
  const { record } = await cancelling();
  const deadlineMs = record.decision!.cancelDeadlineMs;
  const reply = (r: OperationRecord, outcome: CancelResult['outcome'], atMs: number, extra: Partial<CancelResult> = {}) =>
    decideCancelResult(r, peerCommand(r, 'cancel-result', { ...cancelReply(r, 'bravo', outcome), ...extra }, atMs));
  const taken = reply(record, 'stopped', deadlineMs - 1);
  assert.equal(taken.kind, 'accept');
  assert.ok(taken.kind === 'accept');
  assert.equal(taken.transition.causation.command, 'cancel-result');
  assert.deepEqual(taken.transition.timeGuard, { notBeforeMs: record.admittedAtMs, notAfterMs: deadlineMs });
  assert.deepEqual(reply(record, 'stopped', deadlineMs), { kind: 'reject', reason: 'cancel-timeout', detail: `cancel replies closed at ${deadlineMs}` });
  assert.equal((reply(record, 'stopped', deadlineMs - 1, { fence: 3 }) as { reason?: string }).reason, 'stale-fence');
  const after = applyEvents(record, taken.transition.events, deadlineMs - 1);
  assert.deepEqual(reply(after, 'stopped', deadlineMs - 1), { kind: 'duplicate' });
  assert.equal((reply(after, 'unknown', deadlineMs - 1) as { reason?: string }).reason, 'not-cancelling');
  // alfa's branch was never cancelled.
  const alfa = decideCancelResult(record, peerCommand(record, 'cancel-result', cancelReply(record, 'alfa', 'stopped'), deadlineMs - 1));
  assert.equal((alfa as { reason?: string }).reason, 'not-cancelling');
});

test('the cancel timeout ends every branch still waiting for a reply at the cancel deadline, not before, and only then', async () => {
  const { record } = await cancelling();
  const deadlineMs = record.decision!.cancelDeadlineMs;
  assert.equal(decideDue(record, deadlineMs - 1, allowAll), undefined);
  const timedOut = decideDue(record, deadlineMs, allowAll)!;
  assert.deepEqual(timedOut.events[0], { type: 'cancel-timed-out', v: 1, branchIds: ['bravo', 'charlie'] });
  assert.deepEqual(timedOut.timeGuard.notBeforeMs, deadlineMs);
  assert.equal(timedOut.causation.command, 'cancel-timeout');
  const settled = applyEvents(record, timedOut.events, deadlineMs);
  assert.equal(decideDue(settled, deadlineMs + 10_000, allowAll), undefined, 'nothing is waiting any more');
});

test('a cancel is withdrawn only for a branch still waiting for its reply whose request is recorded; receipts are recorded only for cancelling branches, their detail bounded', async () => {
  const { record } = await cancelling();
  const at = record.decision!.closedAtMs + 1;
  const withdrawn = decideCancelWithdrawn(record, ['bravo', 'zulu', 'alfa'], at)!;
  assert.deepEqual(
    withdrawn.events.filter((e) => e.type === 'cancel-withdrawn').map((e) => (e as { branchId: string }).branchId),
    ['bravo'],
  );
  assert.equal(withdrawn.causation.command, 'withdraw-cancel');
  assert.equal(decideCancelWithdrawn(record, ['alfa', 'zulu'], at), undefined);
  const noRequest = { ...record, branches: { ...record.branches, bravo: { ...record.branches['bravo']!, cancel: null } } };
  assert.equal(decideCancelWithdrawn(noRequest, ['bravo'], at), undefined);
  const dispatched = decideCancelDispatched(record, [
    { branchId: 'bravo', attempt: 1, fence: 1, receipt: 'stored', detail: 'd'.repeat(2000) },
    { branchId: 'alfa', attempt: 1, fence: 1, receipt: 'stored' },
    { branchId: 'zulu', attempt: 1, fence: 1, receipt: 'stored' },
    { branchId: 'charlie', attempt: 1, fence: 1, receipt: 'sent' },
  ])!;
  assert.deepEqual(
    dispatched.events.map((e) => [(e as { branchId: string }).branchId, (e as { detail?: string }).detail?.length]),
    [
      ['bravo', 1024],
      ['charlie', undefined],
    ],
  );
  assert.equal(dispatched.causation.command, 'record-cancel-dispatch');
  assert.equal(decideCancelDispatched(record, [{ branchId: 'alfa', attempt: 1, fence: 1, receipt: 'stored' }]), undefined);
});

// ── results ────────────────────────────────────────────────────────────────

test('results for a terminal branch, for a branch waiting to retry, and after the grace are refused for that; a sibling result inside the grace is taken until the grace or the authorization ends', async () => {
  const { record, interaction } = await admitted({ completion: { mode: 'all-terminal' } });
  const at = record.admittedAtMs + 10;
  const reasonOf = (r: OperationRecord, peer: string, atMs: number) => {
    const d = decideResult(r, interaction, peerCommand(r, 'result', resultOf(r, peer, { verdict: 'approve' }), atMs));
    return d.kind === 'reject' ? d.reason : d.kind;
  };
  const revoked = applyEvents(record, decideRevocations(record, [{ branchId: 'alfa', policyRevision: 'r', reason: 'x' }], at)!.events, at);
  assert.equal(reasonOf(revoked, 'alfa', at), 'branch-terminal');
  const durable: OperationRecord = { ...record, manifest: { ...record.manifest, attemptsMax: 3 } };
  const ended = decideClaim(durable, peerCommand(durable, 'claim', claimOf(durable, 'bravo', 'release'), at));
  assert.ok(ended.kind === 'released');
  assert.equal(reasonOf(applyEvents(durable, ended.transition.events, at), 'bravo', at), 'stale-fence');
  // A result taken: its causation names the branch, attempt and fence.
  const taken = decideResult(record, interaction, peerCommand(record, 'result', resultOf(record, 'charlie', { verdict: 'approve' }), at));
  assert.equal(taken.kind, 'accept');
  assert.ok(taken.kind === 'accept');
  assert.deepEqual(taken.transition.causation, { command: 'admit-result', messageId: 'charlie/1/1' });
  const { record: closed } = await cancelling();
  const graceEndMs = closed.decision!.graceEndMs;
  assert.equal(reasonOf(closed, 'bravo', graceEndMs), 'late');
  const late = decideResult(closed, interaction, peerCommand(closed, 'result', resultOf(closed, 'bravo', { verdict: 'approve' }), graceEndMs - 1));
  assert.ok(late.kind === 'accept');
  assert.deepEqual(late.transition.timeGuard, { notBeforeMs: closed.admittedAtMs, notAfterMs: graceEndMs });
  const shortAllow = decideResult(
    closed,
    interaction,
    peerCommand(closed, 'result', resultOf(closed, 'bravo', { verdict: 'approve' }), graceEndMs - 10, { authorizedUntilMs: graceEndMs - 5 }),
  );
  assert.ok(shortAllow.kind === 'accept');
  assert.equal(shortAllow.transition.timeGuard.notAfterMs, graceEndMs - 5);
});

test('a retryable result asks for a retry only when it is not a success, the interaction declares retryability and the decision is still open', async () => {
  const { record, interaction } = await admitted({ completion: { mode: 'all-terminal' } });
  const durable: OperationRecord = { ...record, manifest: { ...record.manifest, attemptsMax: 3 } };
  const at = record.admittedAtMs + 10;
  const accepted = (r: OperationRecord, verdict: string, i: CompiledInteraction = interaction) => {
    const d = decideResult(r, i, peerCommand(r, 'result', resultOf(r, 'alfa', { verdict }), at));
    assert.ok(d.kind === 'accept', d.kind);
    const event = d.transition.events[0];
    assert.ok(event?.type === 'result-accepted');
    return [event.status, event.retryable, event.retryAtMs];
  };
  assert.deepEqual(accepted(durable, 'retry'), ['failure', true, at + record.manifest.retryBackoffMs]);
  assert.deepEqual(accepted(durable, 'approve'), ['success', false, null]);
  assert.deepEqual(accepted(durable, 'reject'), ['failure', false, null]);
  const undeclared = { ...interaction, spec: { ...interaction.spec, retryable: undefined } } as CompiledInteraction;
  assert.deepEqual(accepted(durable, 'retry', undeclared), ['failure', false, null]);
  // A retry that would succeed says success, never retry.
  const retryIsSuccess = { ...interaction, spec: { ...interaction.spec, success: { pointer: '/verdict', equals: 'retry' } } } as CompiledInteraction;
  assert.deepEqual(accepted(durable, 'retry', retryIsSuccess), ['success', false, null]);
});

test('a result from a peer whose authorization was revoked after the decision (a cancelling sibling) is denied: nothing is left to revoke', async () => {
  const { record } = await cancelling();
  const { interaction } = await admitted();
  const at = record.decision!.closedAtMs + 1;
  const d = decideResult(
    record,
    interaction,
    peerCommand(record, 'result', resultOf(record, 'bravo', { verdict: 'approve' }), at, {
      authorizationProblem: { reason: 'deny rule', policyRevision: 'r2' },
    }),
  );
  assert.deepEqual(
    { kind: d.kind, reason: (d as { reason?: string }).reason, transition: (d as { transition?: unknown }).transition },
    { kind: 'reject', reason: 'denied', transition: undefined },
  );
});

test('a recorded rejection keeps the branch and peer it names and a bounded detail, under the open-ended recording guard', async () => {
  const { record, interaction } = await admitted();
  const at = record.admittedAtMs + 10;
  const d = decideResult(record, interaction, peerCommand(record, 'result', resultOf(record, 'alfa', { verdict: 'approve' }, { fence: 4 }), at));
  assert.ok(d.kind === 'reject' && d.transition !== undefined);
  const event = d.transition.events[0];
  assert.ok(event?.type === 'result-rejected');
  assert.deepEqual([event.reason, event.branchId, event.peerId, event.attempt, event.fence], ['stale-fence', 'alfa', 'alfa', 1, 4]);
  assert.equal(d.transition.causation.command, 'admit-result');
  assert.deepEqual(d.transition.timeGuard, { notBeforeMs: record.admittedAtMs, notAfterMs: Number.MAX_SAFE_INTEGER });
  // An unknown branch named with a very long id: the detail is bounded.
  const long = 'b'.repeat(1100);
  const unknown = decideResult(record, interaction, peerCommand(record, 'result', resultOf(record, 'alfa', { verdict: 'approve' }, { branchId: long }), at));
  assert.ok(unknown.kind === 'reject' && unknown.transition !== undefined);
  const rejected = unknown.transition.events[0];
  assert.ok(rejected?.type === 'result-rejected');
  assert.equal(rejected.detail.length, 1024);
  assert.equal(rejected.branchId, long);
});

test('an operation whose log has no room left closes as indeterminate (log-budget-exhausted) before its deadline; a closed one is left alone', async () => {
  const { record } = await admitted();
  const at = record.admittedAtMs + 10;
  const closing = decideLogBudgetExhausted(record, at)!;
  const closed = closing.events[0];
  assert.ok(closed?.type === 'decision-closed');
  assert.deepEqual([closed.outcome, closed.reason], ['indeterminate', 'log-budget-exhausted']);
  assert.deepEqual(closing.timeGuard, { notBeforeMs: record.admittedAtMs, notAfterMs: record.deadlineMs });
  assert.equal(closing.causation.command, 'log-budget-exhausted');
  assert.equal(decideLogBudgetExhausted(applyEvents(record, closing.events, at), at), undefined);
});

test('after the decision a retryable late result asks for no retry, and a protocol conflict is recorded as part of result admission', async () => {
  const { record: closed } = await cancelling();
  const { interaction } = await admitted();
  const durable: OperationRecord = { ...closed, manifest: { ...closed.manifest, attemptsMax: 3 } };
  const at = closed.decision!.closedAtMs + 1;
  const late = decideResult(durable, interaction, peerCommand(durable, 'result', resultOf(durable, 'bravo', { verdict: 'retry' }), at));
  assert.ok(late.kind === 'accept');
  const event = late.transition.events[0];
  assert.ok(event?.type === 'result-accepted');
  assert.deepEqual([event.status, event.retryable, event.retryAtMs], ['failure', true, null]);
  // alfa's accepted result, answered again differently.
  const conflict = decideResult(closed, interaction, peerCommand(closed, 'result', resultOf(closed, 'alfa', { verdict: 'reject' }), at));
  assert.ok(conflict.kind === 'protocol-conflict' && conflict.transition !== undefined);
  assert.equal(conflict.transition.causation.command, 'admit-result');
});
