/**
 * The decide side: pure functions from (record, command, time) to the Transition to append, or
 * to a typed answer when nothing is appended. No I/O, no clocks: the runtime gathers directory,
 * policy and verification answers first and passes them in.
 */
import type { CompiledInteraction } from '../contract/bundle.js';
import { valueAt } from '../contract/bundle.js';
import { digestOf } from '../contract/canonical.js';
import { publicationId } from '../contract/ids.js';
import { AssertionFailure } from '../contract/errors.js';
import { jsonEquals, type JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import type { BranchDisposition, DeliveryReceipt, DomainEvent, RejectionReason, TimeGuard, Transition } from '../events/types.js';
import type { CancelResult, ClaimMessage, ResultMessage } from '../events/wire.js';
import { guardBetween, guardIsEmpty, intersectGuards, openEndedMs } from '../events/guard.js';
import { evaluateCompletion, tally, timeoutClosure, type Closure } from '../projections/decision.js';
import { applyEvents, branchList, branchOf, findBranch, type BranchRecord, type OperationRecord } from '../projections/record.js';
import { branchStatusOf, isCancelling, isClaimed, isOpenBranch, isRetrying, isSettled } from '../machines/index.js';

export { openEndedMs };

/** Guard for facts that may be recorded at any time after admission (receipts, rejections). */
export function recordingGuard(record: OperationRecord): TimeGuard {
  return guardBetween(record.admittedAtMs, openEndedMs);
}

const isOpen = (b: BranchRecord) => isOpenBranch(b.state);
/** A peer frozen into the operation at admission: an initial assignee or an eligible candidate. */
const isParty = (record: OperationRecord, peerId: string) => record.manifest.peers.includes(peerId) || record.manifest.eligible.includes(peerId);
const hasClaim = (b: BranchRecord) => isClaimed(b.state);

// ── commands decided together ──────────────────────────────────────────────

/**
 * Several commands as one transition (spec: per-operation serialization makes votes, outbox
 * state and closure "one logical record transition"). Each is decided against the record as the
 * ones before it leave it — applied provisionally at `nowMs` — so the events are exactly those
 * the commands would append one after another at that instant. The guard is the intersection of
 * theirs: every command's window must hold at the one commit instant. Undefined when no command
 * decides anything; `disjoint` when the windows do not meet (commit them one by one instead).
 */
export function decideTogether(
  record: OperationRecord,
  deciders: readonly ((record: OperationRecord) => Transition | undefined)[],
  nowMs: number,
): Transition | undefined | 'disjoint' {
  const parts: Transition[] = [];
  let draft = record;
  for (const decide of deciders) {
    const part = decide(draft);
    if (!part) continue;
    parts.push(part);
    draft = applyEvents(draft, part.events, nowMs);
  }
  if (parts.length <= 1) return parts[0];
  const timeGuard = intersectGuards(parts.map((part) => part.timeGuard));
  if (guardIsEmpty(timeGuard)) return 'disjoint';
  // Plain loops: this runs for most transitions, and flatMap and spread arguments cost more here.
  const commandNames = new Set<string>();
  const ids: string[] = [];
  const events: DomainEvent[] = [];
  for (const part of parts) {
    commandNames.add(part.causation.command);
    if (part.causation.messageId !== undefined) ids.push(part.causation.messageId);
    for (const event of part.events) events.push(event);
  }
  const commands = [...commandNames].join('+');
  const messageIds = ids.join(' ');
  const causation: Transition['causation'] = { command: commands.length <= 64 ? commands : 'batch' };
  if (messageIds !== '' && messageIds.length <= 512) causation.messageId = messageIds;
  return { events, timeGuard, causation };
}

// ── closure and settlement ─────────────────────────────────────────────────

/** decision-closed with the sibling dispositions, and settlement-completed when nothing is left to settle. */
export function closureEvents(record: OperationRecord, closure: Closure, atMs: number, forceCancel = false): DomainEvent[] {
  const disposition: BranchDisposition['disposition'] = forceCancel || record.manifest.siblings === 'cancel' ? 'cancel-requested' : 'detached';
  const closed: DomainEvent = {
    type: 'decision-closed',
    v: 1,
    outcome: closure.outcome,
    reason: closure.reason,
    successVotes: closure.tally.successVotes,
    failedUnits: closure.tally.failedUnits,
    siblings: branchList(record)
      .filter(isOpen)
      .map((b) => ({ branchId: b.branchId, disposition })),
  };
  return [closed, ...settlementEvents(applyEvents(record, [closed], atMs))];
}

/** settlement-completed once a closed operation has no branch waiting for a cancel reply. */
export function settlementEvents(record: OperationRecord): DomainEvent[] {
  if (record.decision === null || record.settlement.status !== 'pending') return [];
  const branches = branchList(record);
  if (branches.some((b) => isCancelling(b.state))) return [];
  // Stopped and already-completed settle; unknown or missing replies stay indeterminate.
  const settled = (b: BranchRecord) => b.cancelOutcome === 'stopped' || b.cancelOutcome === 'already-completed' || b.cancelOutcome === 'withdrawn';
  const unsettled = branches.some((b) => b.disposition === 'cancel-requested' && b.cancel !== null && !settled(b));
  return [{ type: 'settlement-completed', v: 1, status: unsettled ? 'indeterminate' : 'complete' }];
}

/**
 * Appends to `events` whatever they make follow in the same Transition: closure when the frozen
 * rule closes, settlement when the last cancel reply is in.
 */
export function withConsequences(record: OperationRecord, events: DomainEvent[], atMs: number): DomainEvent[] {
  const draft = applyEvents(record, events, atMs);
  if (draft.decision === null) {
    const closure = evaluateCompletion(draft);
    return closure ? [...events, ...closureEvents(draft, closure, atMs)] : events;
  }
  return [...events, ...settlementEvents(draft)];
}

// ── dispatch receipts ──────────────────────────────────────────────────────

export interface Receipt {
  branchId: string;
  attempt: number;
  fence: number;
  receipt: DeliveryReceipt;
  detail?: string;
  /**
   * A rejection the transport makes of the message itself (larger than it ever carries, or
   * malformed), not of this moment: every attempt sends the same input and would meet it again.
   * For a cancel, the policy's denial of it too (it is not asked again). Without it, a rejection
   * may pass: a request's attempt ends, a cancel is published again.
   */
  refusedForGood?: true;
}

/**
 * Request receipts. One the transport refused for good fails its branch; any other rejection, or
 * exhaustion, ends its attempt (a retry within the budget). An uncertain (`unknown`) one is
 * recorded once per attempt: the request is published again under the same identity, and a
 * repeat that is still uncertain says nothing new, so it is not recorded — a broker down for long
 * costs the log one transition, not one per republication. A receipt that says more (stored,
 * already-stored, rejected, exhausted) is recorded.
 */
export function decideDispatchRecorded(record: OperationRecord, receipts: readonly Receipt[], nowMs: number): Transition | undefined {
  const events: DomainEvent[] = [];
  for (const r of receipts) {
    const branch = findBranch(record, r.branchId);
    if (!branch || branch.attempt !== r.attempt || !hasClaim(branch)) continue; // superseded meanwhile
    if (r.receipt === 'unknown' && branch.outbox.attempt === r.attempt && branch.outbox.receipt === 'unknown') continue;
    if (r.receipt === 'rejected' && r.refusedForGood === true) {
      // No attempt can be sent: the branch fails now, its receipt recorded with why (the machine reads a rejected receipt as exhausted).
      events.push({
        type: 'dispatch-recorded',
        v: 1,
        branchId: r.branchId,
        attempt: r.attempt,
        fence: r.fence,
        receipt: 'rejected',
        detail: (r.detail ?? 'refused').slice(0, 1024),
      });
      continue;
    }
    if (r.receipt === 'exhausted' || r.receipt === 'rejected') {
      // Native exhaustion is an observed failure of this attempt: retryable within the budget, never a new branch.
      events.push({
        type: 'claim-ended',
        v: 1,
        branchId: r.branchId,
        attempt: r.attempt,
        fence: r.fence,
        cause: 'delivery-exhausted',
        retryAtMs: retryInstant(record, branch, nowMs),
      });
      continue;
    }
    const event: DomainEvent = { type: 'dispatch-recorded', v: 1, branchId: r.branchId, attempt: r.attempt, fence: r.fence, receipt: r.receipt };
    if (r.detail !== undefined) event.detail = r.detail.slice(0, 1024);
    events.push(event);
  }
  if (events.length === 0) return undefined;
  const failures = events.some((e) => e.type === 'claim-ended' || (e.type === 'dispatch-recorded' && e.receipt === 'rejected'));
  return { events: failures ? withConsequences(record, events, nowMs) : events, timeGuard: recordingGuard(record), causation: { command: 'record-dispatch' } };
}

export function decideRevocations(
  record: OperationRecord,
  revoked: readonly { branchId: string; policyRevision: string; reason: string }[],
  nowMs: number,
): Transition | undefined {
  const events: DomainEvent[] = [];
  for (const r of revoked) {
    const branch = findBranch(record, r.branchId);
    if (!branch || !isOpen(branch) || record.decision !== null) continue;
    events.push({
      type: 'branch-revoked',
      v: 1,
      branchId: r.branchId,
      attempt: branch.attempt,
      fence: branch.fence,
      policyRevision: r.policyRevision,
      reason: r.reason.slice(0, 1024),
    });
  }
  if (events.length === 0) return undefined;
  return { events: withConsequences(record, events, nowMs), timeGuard: guardBetween(record.admittedAtMs, record.deadlineMs), causation: { command: 'revoke' } };
}

// ── attempts and selection ─────────────────────────────────────────────────

/**
 * The instant of the next attempt, or null when none is allowed: attempts are finite and an
 * attempt must be able to start strictly before the deadline. Retry uses the fixed backoff from
 * the instant the attempt ended — for an expired claim that is its lease end, not the (possibly
 * much later) moment a restarted coordinator notices it, so downtime does not decide the outcome.
 */
export function retryInstant(record: OperationRecord, branch: BranchRecord, endedAtMs: number): number | null {
  if (branch.attempt >= record.manifest.attemptsMax) return null;
  const atMs = endedAtMs + record.manifest.retryBackoffMs;
  return Number.isSafeInteger(atMs) && atMs < record.deadlineMs ? atMs : null;
}

/**
 * Selection: the eligible authorized peers in unsigned byte order; the first not excluded by a
 * terminal assignment outcome. Branches bound to one peer (independent, explicit) keep their peer.
 */
export function selectionCandidates(record: OperationRecord, branch: BranchRecord): string[] {
  if (record.manifest.delivery !== 'one-eligible') return [branch.peerId];
  return record.manifest.eligible.filter((p) => !branch.excluded.includes(p));
}

// ── due-time transitions (deadline, lease expiry, retry, cancel timeout) ───

/** The next instant a timer of the operation falls due (the index row shows it too). */
export { nextDueMs } from '../projections/operation-index.js';

/**
 * Authorization answers for reassignment candidates, gathered by the runtime before deciding: an
 * allow is valid until its expiresAtMs; `unavailable` when the policy could not answer for that
 * candidate, `expired` when its answer was an allow whose validity had already ended when it
 * arrived (each an unknown, which is neither an allow nor a denial).
 */
export type CandidateAuthorization = (
  branchId: string,
  peerId: string,
  attempt: number,
) => { allowed: boolean; expiresAtMs: number } | 'unavailable' | 'expired' | undefined;

export function decideDue(record: OperationRecord, nowMs: number, authorizeCandidate: CandidateAuthorization): Transition | undefined {
  if (record.decision === null && nowMs >= record.deadlineMs) return decideDeadline(record, nowMs);
  if (record.decision === null) return decideLeasesAndRetries(record, nowMs, authorizeCandidate);
  const waiting = branchList(record).filter((b) => isCancelling(b.state));
  if (waiting.length === 0 || nowMs < record.decision.cancelDeadlineMs) return undefined;
  const events: DomainEvent[] = [{ type: 'cancel-timed-out', v: 1, branchIds: waiting.map((b) => b.branchId) }];
  return {
    events: [...events, ...settlementEvents(applyEvents(record, events, nowMs))],
    timeGuard: guardBetween(record.decision.cancelDeadlineMs, openEndedMs),
    causation: { command: 'cancel-timeout' },
  };
}

/**
 * An explicit cancellation by the original invoker, where the interaction declares it: the open
 * decision closes as failed (reason cancelled) and every unfinished branch is sent a cancel.
 * A closed decision never changes: cancelling it is a no-op. The transition is guarded to end
 * where the validity of the cancel authorization it relies on ends (authorizedUntilMs).
 */
export function decideCancelOperation(record: OperationRecord, nowMs: number, authorizedUntilMs: number): Transition | undefined {
  if (record.decision !== null) return undefined;
  const closure: Closure = { outcome: 'failed', reason: 'cancelled', tally: tally(record) };
  return {
    events: closureEvents(record, closure, nowMs, true),
    timeGuard: guardBetween(record.admittedAtMs, Math.min(record.deadlineMs, authorizedUntilMs)),
    causation: { command: 'cancel-operation' },
  };
}

/**
 * The durable transport's guarantee broke (a stream deleted or reconfigured so that stored
 * requests or results may be gone or duplicated): an open operation's evidence can no longer be
 * proven complete, so it closes as indeterminate rather than deciding later on missing data.
 * Unfinished branches are detached and the settlement is indeterminate — whether their work ran
 * is unknown. A closed decision never changes: for it this is a no-op.
 */
export function decideDurabilityLost(record: OperationRecord): Transition | undefined {
  if (record.decision !== null) return undefined;
  const counted = tally(record);
  const closed: DomainEvent = {
    type: 'decision-closed',
    v: 1,
    outcome: 'indeterminate',
    reason: 'durability-lost',
    successVotes: counted.successVotes,
    failedUnits: counted.failedUnits,
    siblings: branchList(record)
      .filter(isOpen)
      .map((b) => ({ branchId: b.branchId, disposition: 'detached' as const })),
  };
  return {
    events: [closed, { type: 'settlement-completed', v: 1, status: 'indeterminate' }],
    timeGuard: guardBetween(record.admittedAtMs, record.deadlineMs),
    causation: { command: 'durability-lost' },
  };
}

/**
 * The operation's log reached its ordinary transition or byte budget (runtime/log-budget.ts): it
 * closes as indeterminate, since evidence arriving later could no longer be recorded, and its
 * unfinished branches are detached or cancelled as the manifest says, within the log's closing
 * reserve. Before the deadline only: at the deadline the declared timeout outcome closes it.
 */
export function decideLogBudgetExhausted(record: OperationRecord, nowMs: number): Transition | undefined {
  if (record.decision !== null) return undefined;
  const closure: Closure = { outcome: 'indeterminate', reason: 'log-budget-exhausted', tally: tally(record) };
  return {
    events: closureEvents(record, closure, nowMs),
    timeGuard: guardBetween(record.admittedAtMs, record.deadlineMs),
    causation: { command: 'log-budget-exhausted' },
  };
}

export function decideDeadline(record: OperationRecord, nowMs: number): Transition | undefined {
  if (record.decision !== null) return undefined;
  return {
    events: closureEvents(record, timeoutClosure(record), nowMs),
    // A deadline transition requires store time at or after the deadline.
    timeGuard: guardBetween(record.deadlineMs, openEndedMs),
    causation: { command: 'deadline-reached' },
  };
}

function decideLeasesAndRetries(record: OperationRecord, nowMs: number, authorizeCandidate: CandidateAuthorization): Transition | undefined {
  const events: DomainEvent[] = [];
  let notBeforeMs = record.admittedAtMs;
  let notAfterMs = record.deadlineMs;
  for (const b of branchList(record)) {
    if (hasClaim(b) && nowMs >= b.leaseUntilMs) {
      // An expired claim: the owner can neither renew nor admit results; a logical retry may follow.
      events.push({
        type: 'claim-ended',
        v: 1,
        branchId: b.branchId,
        attempt: b.attempt,
        fence: b.fence,
        cause: 'expired',
        retryAtMs: retryInstant(record, b, b.leaseUntilMs),
      });
      notBeforeMs = Math.max(notBeforeMs, b.leaseUntilMs);
    } else if (isRetrying(b.state) && b.retryAtMs !== null && nowMs >= b.retryAtMs) {
      const next = reassignment(record, b, authorizeCandidate, nowMs);
      if (next === undefined) continue;
      events.push(next.event);
      notBeforeMs = Math.max(notBeforeMs, b.retryAtMs);
      // Authorization validity must cover the guarded transition: the new assignment's allow too.
      notAfterMs = Math.min(notAfterMs, next.authorizedUntilMs);
    }
  }
  if (events.length === 0) return undefined;
  return { events: withConsequences(record, events, nowMs), timeGuard: guardBetween(notBeforeMs, notAfterMs), causation: { command: 'lease-or-retry-due' } };
}

/**
 * The branch's next assignment, and until when the allow it relies on is valid; undefined when
 * the allow of the peer selection chose has expired by `nowMs` (asked too long ago, arrived
 * already expired, or the commit was late), or when the policy could not answer for a candidate
 * before any allow: the reassignment waits for the next due instant and a fresh answer, and is
 * neither made on the stale allow nor passed on to a later candidate in the selection order.
 * Neither a policy outage nor an expiry is a denial: neither makes a branch fail as having no
 * eligible peer.
 */
function reassignment(
  record: OperationRecord,
  branch: BranchRecord,
  authorizeCandidate: CandidateAuthorization,
  nowMs: number,
): { event: DomainEvent; authorizedUntilMs: number } | undefined {
  const attempt = branch.attempt + 1;
  let chosen: { peerId: string; expiresAtMs: number } | undefined;
  for (const peerId of selectionCandidates(record, branch)) {
    const answer = authorizeCandidate(branch.branchId, peerId, attempt);
    if (answer === 'unavailable' || answer === 'expired') return undefined;
    if (answer?.allowed === true) {
      chosen = { peerId, expiresAtMs: answer.expiresAtMs };
      break;
    }
  }
  if (chosen === undefined) {
    // No eligible peer remains: the branch fails; it is never silently broadcast.
    return {
      event: { type: 'branch-failed', v: 1, branchId: branch.branchId, attempt: branch.attempt, fence: branch.fence, reason: 'no-eligible-peer' },
      authorizedUntilMs: openEndedMs,
    };
  }
  if (nowMs >= chosen.expiresAtMs) return undefined;
  const event: DomainEvent = {
    type: 'branch-reassigned',
    v: 1,
    branchId: branch.branchId,
    peerId: chosen.peerId,
    attempt,
    fence: branch.fence + 1,
    publicationId: publicationId(record.contract.digest, record.operationId, branch.branchId, attempt),
  };
  return { event, authorizedUntilMs: chosen.expiresAtMs };
}

// ── peer messages: results, claims, cancel results ────────────────────────

export interface PeerCommand<M> {
  subject: string;
  /** The peer token of the received subject. */
  subjectPeerId: string;
  message: M;
  /** Undefined when the publisher namespace is attested for this peer; otherwise why not. */
  publisherProblem: string | undefined;
  /** Undefined when the peer is (still) authorized; otherwise why not, with the policy revision. */
  authorizationProblem: { reason: string; policyRevision: string } | undefined;
  /**
   * Where the validity of the authorization decision this command relies on ends (its
   * expiresAtMs). Authorization validity must cover the guarded transition: a transition taken on
   * the decision is guarded to end there too, and one decided at or after it is not taken at all
   * (authorization-expired: the message is decided again with a fresh decision).
   */
  authorizedUntilMs: number;
  nowMs: number;
}

/** The answer to a command whose authorization decision is no longer valid at the decision instant. */
export interface AuthorizationExpiredDecision {
  kind: 'authorization-expired';
  detail: string;
}

function authorizationExpired(command: PeerCommand<unknown>): AuthorizationExpiredDecision | undefined {
  if (command.nowMs < command.authorizedUntilMs) return undefined;
  return {
    kind: 'authorization-expired',
    detail: `the authorization decision relied on expired at ${command.authorizedUntilMs} (decided at ${command.nowMs})`,
  };
}

export type ResultCommand = PeerCommand<ResultMessage>;

export type ResultDecision =
  | { kind: 'accept'; transition: Transition; status: 'success' | 'failure' }
  | { kind: 'duplicate' }
  | { kind: 'protocol-conflict'; transition: Transition | undefined; detail: string }
  | { kind: 'revoked'; transition: Transition; detail: string }
  | { kind: 'reject'; reason: RejectionReason; detail: string; transition: Transition | undefined }
  | AuthorizationExpiredDecision;

type Identity = Pick<ResultMessage, 'branchId' | 'peerId' | 'attempt' | 'fence'>;

/** Correlation checks shared by every peer message: branch, peer agreement, publisher, attempt, fence. */
function correlate(record: OperationRecord, command: PeerCommand<Identity>): { branch: BranchRecord } | { reason: RejectionReason; detail: string } {
  const m = command.message;
  const branch = findBranch(record, m.branchId);
  if (!branch) return { reason: 'unknown-branch', detail: `branch ${m.branchId} is not in the frozen manifest` };
  if (command.subjectPeerId !== m.peerId || m.peerId !== branch.peerId) {
    return { reason: 'wrong-peer', detail: `subject peer ${command.subjectPeerId}, payload peer ${m.peerId}, expected peer ${branch.peerId} must agree` };
  }
  if (command.publisherProblem !== undefined) return { reason: 'unverified-publisher', detail: command.publisherProblem };
  if (!Number.isSafeInteger(m.attempt) || m.attempt < 1 || m.attempt > branch.attempt) {
    return { reason: 'unknown-attempt', detail: `attempt ${m.attempt} was never assigned (current ${branch.attempt})` };
  }
  if (m.attempt !== branch.attempt || m.fence !== branch.fence) {
    return { reason: 'stale-fence', detail: `attempt ${m.attempt} fence ${m.fence} is not the current attempt ${branch.attempt} fence ${branch.fence}` };
  }
  return { branch };
}

/**
 * The earliest instant at which the guard of a result admitted now could end, whichever branch it
 * is for: the deadline, or an open branch's lease if sooner (accept's guard below).
 */
export function resultGuardEndMs(record: OperationRecord): number {
  let endMs = record.deadlineMs;
  for (const branch of branchList(record)) if (isOpen(branch)) endMs = Math.min(endMs, branch.leaseUntilMs);
  return endMs;
}

/** Result admission (spec: "Result admission and decision"), in the order the checks must run. */
export function decideResult(record: OperationRecord, interaction: CompiledInteraction, command: ResultCommand): ResultDecision {
  const { message } = command;
  const reject = (reason: RejectionReason, detail: string): ResultDecision => ({
    kind: 'reject',
    reason,
    detail,
    transition: rejectionTransition(record, command, reason, detail),
  });
  const correlated = correlate(record, command);
  if ('reason' in correlated) return reject(correlated.reason, correlated.detail);
  const { branch } = correlated;
  if (branch.accepted !== null && branch.accepted.attempt === message.attempt) {
    if (jsonEquals(branch.accepted.result, message.result)) return { kind: 'duplicate' };
    return protocolConflict(record, command);
  }
  const decision = record.decision;
  const lateFact = decision !== null && isCancelling(branch.state);
  if (decision !== null && !lateFact) return reject('closed', `operation closed at ${decision.closedAtMs} with ${decision.outcome}`);
  if (!isOpen(branch)) return reject('branch-terminal', `branch ${branch.branchId} is already ${branchStatusOf(branch.state)}`);
  if (isRetrying(branch.state)) return reject('stale-fence', `attempt ${branch.attempt} already ended; branch is waiting to retry`);
  if (!interaction.validateResult(message.result)) return reject('invalid-schema', `result does not match the interaction's result schema`);
  if (command.authorizationProblem !== undefined) return revoke(record, branch, command.authorizationProblem, command.nowMs);
  if (decision !== null) {
    // A late fact: a cancelling sibling's result, recorded beside the closed decision until its grace ends.
    if (command.nowMs >= decision.graceEndMs) return reject('late', `settlement grace ended at ${decision.graceEndMs}`);
    return (
      authorizationExpired(command) ??
      accept(record, interaction, command, guardBetween(record.admittedAtMs, Math.min(decision.graceEndMs, command.authorizedUntilMs)))
    );
  }
  if (command.nowMs >= record.deadlineMs) return reject('late', `received at ${command.nowMs}, deadline ${record.deadlineMs}`);
  if (command.nowMs >= branch.leaseUntilMs) return reject('expired-lease', `lease of attempt ${branch.attempt} ended at ${branch.leaseUntilMs}`);
  // Strictly before the deadline, the lease and the end of the authorization's validity, at the
  // store's serialization point.
  const notAfterMs = Math.min(record.deadlineMs, branch.leaseUntilMs, command.authorizedUntilMs);
  return authorizationExpired(command) ?? accept(record, interaction, command, guardBetween(record.admittedAtMs, notAfterMs));
}

function accept(record: OperationRecord, interaction: CompiledInteraction, command: ResultCommand, timeGuard: TimeGuard): ResultDecision {
  const { message } = command;
  const branch = branchOf(record, message.branchId);
  const spec = interaction.spec;
  const success = predicateHolds(message.result, spec.success);
  const retryable = !success && spec.retryable !== undefined && predicateHolds(message.result, spec.retryable);
  // Retryability cannot override time, ownership or the attempt budget; after closure there is no retry.
  const retryAtMs = retryable && record.decision === null ? retryInstant(record, branch, command.nowMs) : null;
  const status = success ? 'success' : 'failure';
  const event: DomainEvent = {
    type: 'result-accepted',
    v: 1,
    branchId: branch.branchId,
    peerId: branch.peerId,
    attempt: message.attempt,
    fence: message.fence,
    status,
    retryable,
    retryAtMs,
    result: message.result,
    subject: command.subject,
  };
  return {
    kind: 'accept',
    status,
    transition: {
      events: withConsequences(record, [event], command.nowMs),
      timeGuard,
      causation: { command: 'admit-result', messageId: `${message.branchId}/${message.attempt}/${message.fence}` },
    },
  };
}

/** Revocation terminates a still-open branch at the protected boundary where it is observed. */
function revoke(record: OperationRecord, branch: BranchRecord, problem: { reason: string; policyRevision: string }, nowMs: number): ResultDecision {
  const transition = decideRevocations(record, [{ branchId: branch.branchId, policyRevision: problem.policyRevision, reason: problem.reason }], nowMs);
  if (!transition) return { kind: 'reject', reason: 'denied', detail: problem.reason, transition: undefined };
  return { kind: 'revoked', transition, detail: problem.reason };
}

/** Recorded up to a bound per operation, then only counted: a misbehaving peer cannot grow the log without end. */
function protocolConflict(record: OperationRecord, command: ResultCommand): ResultDecision {
  const { message } = command;
  const detail = `a different terminal result for attempt ${message.attempt} of branch ${message.branchId}; the accepted result stands`;
  if (record.protocolConflicts >= limits.protocolConflictsRecordedMax) return { kind: 'protocol-conflict', detail, transition: undefined };
  return {
    kind: 'protocol-conflict',
    detail,
    transition: {
      events: [
        {
          type: 'protocol-conflict-recorded',
          v: 1,
          branchId: message.branchId,
          peerId: message.peerId,
          attempt: message.attempt,
          fence: message.fence,
          subject: command.subject,
          resultDigest: digestOf(message.result),
          detail,
        },
      ],
      timeGuard: recordingGuard(record),
      causation: { command: 'admit-result' },
    },
  };
}

/**
 * Rejections are recorded in the stream up to a bound, then only counted (a flood cannot grow the
 * log). A settled operation records none: its decision and settlement are final, nothing it still
 * waits for can arrive, and what peers send afterwards (typically the results of detached
 * siblings) is rejected and counted only — the durable result stream keeps those messages.
 * Only the operation's own peers (the peer token of the subject, which its publish permission
 * proves) take a share of that bound: another peer of the namespace is no party to the operation,
 * and its messages are counted, never recorded, so it cannot use up the operation's record of
 * rejections before its parties' late or stale results arrive.
 */
function rejectionTransition(record: OperationRecord, command: PeerCommand<Identity>, reason: RejectionReason, detail: string): Transition | undefined {
  if (record.rejectionsRecorded >= limits.rejectionsRecordedMax || isSettled(record.phase)) return undefined;
  if (!isParty(record, command.subjectPeerId)) return undefined;
  const m = command.message;
  return {
    events: [
      {
        type: 'result-rejected',
        v: 1,
        reason,
        subject: command.subject,
        branchId: m.branchId ?? null,
        peerId: m.peerId ?? null,
        attempt: Number.isSafeInteger(m.attempt) ? m.attempt : null,
        fence: Number.isSafeInteger(m.fence) ? m.fence : null,
        detail: detail.slice(0, 1024),
      },
    ],
    timeGuard: recordingGuard(record),
    causation: { command: 'admit-result' },
  };
}

/**
 * A result over the result byte budget, found at intake before it is queued: rejected with its
 * size and recorded like any rejection (within rejectionsRecordedMax); nothing of it is stored.
 */
export function decideOversizedResult(record: OperationRecord, command: PeerCommand<Identity>, resultBytes: number, resultBytesMax: number): ResultDecision {
  const detail = `result is ${resultBytes} bytes; the limit is ${resultBytesMax}`;
  return { kind: 'reject', reason: 'oversized', detail, transition: rejectionTransition(record, command, 'oversized', detail) };
}

/**
 * A result whose transition the store refused as invalid (a JetStream server's max_payload lowered
 * under a running store, an EventStoreDB append size below the store's limit): rejected with the
 * store's description and recorded like any rejection (within rejectionsRecordedMax), so the
 * operation's record says what became of it; nothing of it is stored.
 */
export function decideStoreRefusedResult(
  record: OperationRecord,
  command: PeerCommand<Identity>,
  storeDescription: string,
): Extract<ResultDecision, { kind: 'reject' }> {
  const detail = `its transition cannot be stored: ${storeDescription}`;
  return { kind: 'reject', reason: 'store-refused', detail, transition: rejectionTransition(record, command, 'store-refused', detail) };
}

export type ClaimDecision =
  | { kind: 'renewed' | 'released' | 'revoked'; transition: Transition }
  | { kind: 'unchanged' }
  | { kind: 'reject'; reason: RejectionReason; detail: string }
  | AuthorizationExpiredDecision;

/**
 * The renewal floor of an operation: its timeout spread over renewalTransitionsPerOperationMax
 * renewals shared by its branches. A branch's claims never overlap in time, so renewals spaced at
 * least this far apart cost the whole operation at most that many transitions (plus the first
 * renewal of each claim), however long the timeout (7 days included) and however fast owners renew.
 */
export function renewalFloorMs(record: OperationRecord): number {
  const branches = Object.keys(record.branches).length;
  return Math.ceil(((record.deadlineMs - record.admittedAtMs) * branches) / limits.renewalTransitionsPerOperationMax);
}

/**
 * Ownership: renew (before expiry, current fence, current authorization) or release (a logical
 * retry may follow). Renewals that only extend a lease are coalesced so a chatty owner cannot
 * grow the log: one commits only when half the renew interval has passed since the last and the
 * lease has less than leaseMs left. When the operation's renewal floor (renewalFloorMs) exceeds
 * half the renew interval, a renewal grants leaseMs plus that floor, so commits come at most once
 * per floor while an owner renewing at its declared interval is always seen before its lease ends
 * (the next commit falls within floor + renewIntervalMs < floor + leaseMs). Otherwise the grant is
 * leaseMs, as declared. Every other renewal answers unchanged: accepted, nothing appended.
 */
export function decideClaim(record: OperationRecord, command: PeerCommand<ClaimMessage>): ClaimDecision {
  const correlated = correlate(record, command);
  if ('reason' in correlated) return { kind: 'reject', reason: correlated.reason, detail: correlated.detail };
  const { branch } = correlated;
  if (record.decision !== null || !hasClaim(branch))
    return { kind: 'reject', reason: 'branch-terminal', detail: `branch ${branch.branchId} holds no open claim` };
  if (command.nowMs >= branch.leaseUntilMs) return { kind: 'reject', reason: 'expired-lease', detail: `lease ended at ${branch.leaseUntilMs}` };
  if (command.authorizationProblem !== undefined) {
    const revoked = decideRevocations(record, [{ branchId: branch.branchId, ...command.authorizationProblem }], command.nowMs);
    return revoked ? { kind: 'revoked', transition: revoked } : { kind: 'unchanged' };
  }
  const expired = authorizationExpired(command);
  if (expired) return expired;
  const guard = guardBetween(record.admittedAtMs, Math.min(branch.leaseUntilMs, record.deadlineMs, command.authorizedUntilMs));
  const id = { branchId: branch.branchId, attempt: branch.attempt, fence: branch.fence };
  if (command.message.action === 'release') {
    const events: DomainEvent[] = [{ type: 'claim-ended', v: 1, ...id, cause: 'released', retryAtMs: retryInstant(record, branch, command.nowMs) }];
    return { kind: 'released', transition: { events: withConsequences(record, events, command.nowMs), timeGuard: guard, causation: { command: 'release' } } };
  }
  const { leaseMs, renewIntervalMs } = record.manifest;
  if (command.nowMs - branch.claimedAtMs < renewIntervalMs / 2 || branch.leaseUntilMs - command.nowMs >= leaseMs) return { kind: 'unchanged' };
  const floorMs = renewalFloorMs(record);
  const leaseUntilMs = Math.min(command.nowMs + leaseMs + (floorMs > renewIntervalMs / 2 ? floorMs : 0), record.deadlineMs);
  if (leaseUntilMs <= branch.leaseUntilMs) return { kind: 'unchanged' };
  return { kind: 'renewed', transition: { events: [{ type: 'lease-renewed', v: 1, ...id, leaseUntilMs }], timeGuard: guard, causation: { command: 'renew' } } };
}

export type CancelResultDecision =
  | { kind: 'accept'; transition: Transition }
  | { kind: 'duplicate' }
  | { kind: 'reject'; reason: RejectionReason; detail: string }
  | AuthorizationExpiredDecision;

/** Cancel results: current attempt and fence only (a cancel never targets a newer attempt), before the cancel timeout. */
export function decideCancelResult(record: OperationRecord, command: PeerCommand<CancelResult>): CancelResultDecision {
  const correlated = correlate(record, command);
  if ('reason' in correlated) return { kind: 'reject', reason: correlated.reason, detail: correlated.detail };
  const { branch } = correlated;
  const outcome = command.message.outcome;
  if (!isCancelling(branch.state)) {
    if (branch.cancelOutcome === outcome) return { kind: 'duplicate' };
    return { kind: 'reject', reason: 'not-cancelling', detail: `branch ${branch.branchId} is not waiting for a cancel reply` };
  }
  if (record.decision === null) throw new AssertionFailure('a cancelling branch belongs to a closed decision');
  const cancelDeadlineMs = record.decision.cancelDeadlineMs;
  if (command.nowMs >= cancelDeadlineMs) return { kind: 'reject', reason: 'cancel-timeout', detail: `cancel replies closed at ${cancelDeadlineMs}` };
  const expired = authorizationExpired(command);
  if (expired) return expired;
  const events: DomainEvent[] = [{ type: 'cancel-result-accepted', v: 1, branchId: branch.branchId, attempt: branch.attempt, fence: branch.fence, outcome }];
  return {
    kind: 'accept',
    transition: {
      events: withConsequences(record, events, command.nowMs),
      timeGuard: guardBetween(record.admittedAtMs, Math.min(cancelDeadlineMs, command.authorizedUntilMs)),
      causation: { command: 'cancel-result' },
    },
  };
}

/** Withdraws cancels whose requests this coordinator knows it never sent, settling those branches. */
export function decideCancelWithdrawn(record: OperationRecord, branchIds: readonly string[], nowMs: number): Transition | undefined {
  const events: DomainEvent[] = [];
  for (const branchId of branchIds) {
    const b = findBranch(record, branchId);
    if (!b || !isCancelling(b.state) || b.cancel === null) continue;
    events.push({ type: 'cancel-withdrawn', v: 1, branchId, attempt: b.cancel.attempt, fence: b.cancel.fence, reason: 'request-never-sent' });
  }
  if (events.length === 0) return undefined;
  return { events: withConsequences(record, events, nowMs), timeGuard: recordingGuard(record), causation: { command: 'withdraw-cancel' } };
}

/**
 * A cancel not known to have been carried: its publication was uncertain (`unknown`) or rejected
 * for a reason that may pass. It is published again, same attempt, fence and message id, while
 * its branch waits for the reply.
 */
export function cancelUncarried(cancel: BranchRecord['cancel']): boolean {
  return cancel !== null && (cancel.receipt === 'unknown' || (cancel.receipt === 'rejected' && cancel.transient === true));
}

/** A cancel's publication receipt that leaves it not known to have been carried (cancelUncarried once recorded). */
export function receiptUncarried(r: Receipt): boolean {
  return r.receipt === 'unknown' || (r.receipt === 'rejected' && r.refusedForGood !== true);
}

/**
 * Cancel receipts. A rejection not refused for good is recorded `transient` (it is published
 * again). Once a cancel is recorded as not known to have been carried, a further receipt that
 * says no more (unknown, or rejected for a reason that may pass) is not recorded: a cancel
 * published again and again costs its log one transition until it is carried or refused for good.
 */
export function decideCancelDispatched(record: OperationRecord, receipts: readonly Receipt[]): Transition | undefined {
  const events: DomainEvent[] = [];
  for (const r of receipts) {
    const branch = findBranch(record, r.branchId);
    if (branch === undefined || !isCancelling(branch.state) || branch.cancel === null) continue;
    if (cancelUncarried(branch.cancel) && receiptUncarried(r)) continue;
    const event: DomainEvent = { type: 'cancel-dispatched', v: 1, branchId: r.branchId, attempt: r.attempt, fence: r.fence, receipt: r.receipt };
    if (r.detail !== undefined) event.detail = r.detail.slice(0, 1024);
    if (r.receipt === 'rejected' && receiptUncarried(r)) event.transient = true;
    events.push(event);
  }
  return events.length === 0 ? undefined : { events, timeGuard: recordingGuard(record), causation: { command: 'record-cancel-dispatch' } };
}

export function predicateHolds(result: JsonValue, predicate: { pointer: string; equals: JsonValue }): boolean {
  return jsonEquals(valueAt(result, predicate.pointer), predicate.equals);
}
