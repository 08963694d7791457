/**
 * The decide side: pure functions from (record, command, time) to the Transition to append, or
 * to a typed answer when nothing is appended. No I/O, no clocks: the runtime gathers directory,
 * policy and verification answers first and passes them in.
 */
import type { CompiledInteraction } from '../contract/bundle.js';
import { valueAt } from '../contract/bundle.js';
import { digestOf } from '../contract/canonical.js';
import { jsonEquals, type JsonValue } from '../contract/json.js';
import type { DomainEvent, Transition, BranchDisposition, RejectionReason, TimeGuard } from '../events/types.js';
import type { ResultMessage } from '../events/wire.js';
import { evaluateCompletion, timeoutClosure, type Closure } from '../projections/decision.js';
import { evolve, type OperationRecord, branchList } from '../projections/record.js';
import { limits } from '../contract/limits.js';
import { branchStatusOf } from './index.js';

export const openEndedMs = Number.MAX_SAFE_INTEGER;

/** Guard for facts that may be recorded at any time after admission (receipts, rejections). */
export function recordingGuard(record: OperationRecord): TimeGuard {
  return { notBeforeMs: record.admittedAtMs, notAfterMs: openEndedMs };
}

/** The decision-closed event (and settlement-completed when nothing is left to settle). */
export function closureEvents(record: OperationRecord, closure: Closure): DomainEvent[] {
  const open = branchList(record).filter((b) => branchStatusOf(b.state) === 'pending');
  const disposition: BranchDisposition['disposition'] = record.manifest.siblings === 'cancel' ? 'cancel-requested' : 'detached';
  const events: DomainEvent[] = [
    {
      type: 'decision-closed',
      v: 1,
      outcome: closure.outcome,
      reason: closure.reason,
      successVotes: closure.tally.successVotes,
      failedUnits: closure.tally.failedUnits,
      siblings: open.map((b) => ({ branchId: b.branchId, disposition })),
    },
  ];
  if (open.length === 0 || disposition === 'detached') events.push({ type: 'settlement-completed', v: 1, status: 'complete' });
  return events;
}

/**
 * Appends closure to `events` when, after applying them, the frozen rule closes. Votes and closure
 * land in the same Transition (the spec's one logical record transition).
 */
export function withClosure(record: OperationRecord, events: DomainEvent[], atMs: number): DomainEvent[] {
  if (record.decision !== null) return events;
  let draft = record;
  for (const event of events) draft = evolve(draft, event, atMs);
  const closure = evaluateCompletion(draft);
  return closure ? [...events, ...closureEvents(draft, closure)] : events;
}

export interface Receipt {
  branchId: string;
  attempt: number;
  fence: number;
  receipt: import('../events/types.js').DeliveryReceipt;
  detail?: string;
}

export function decideDispatchRecorded(record: OperationRecord, receipts: readonly Receipt[], nowMs: number): Transition | undefined {
  const events: DomainEvent[] = receipts.map((r) => {
    const event: DomainEvent = { type: 'dispatch-recorded', v: 1, branchId: r.branchId, attempt: r.attempt, fence: r.fence, receipt: r.receipt };
    if (r.detail !== undefined) event.detail = r.detail.slice(0, 1024);
    return event;
  });
  if (events.length === 0) return undefined;
  // Only a failed delivery can make the rule close (by impossibility); stored/sent receipts cannot.
  const failures = receipts.some((r) => r.receipt === 'rejected' || r.receipt === 'exhausted');
  return { events: failures ? withClosure(record, events, nowMs) : events, timeGuard: recordingGuard(record), causation: { command: 'record-dispatch' } };
}

export function decideDeadline(record: OperationRecord): Transition | undefined {
  if (record.decision !== null) return undefined;
  return {
    events: closureEvents(record, timeoutClosure(record)),
    // A deadline transition requires store time at or after the deadline.
    timeGuard: { notBeforeMs: record.deadlineMs, notAfterMs: openEndedMs },
    causation: { command: 'deadline-reached' },
  };
}

export interface ResultCommand {
  subject: string;
  /** The peer token of the received subject. */
  subjectPeerId: string;
  message: ResultMessage;
  /** Undefined when the publisher namespace is attested for this peer; otherwise why not. */
  publisherProblem: string | undefined;
  /** Undefined when the peer is (still) authorized; otherwise why not. */
  authorizationProblem: string | undefined;
  nowMs: number;
}

export type ResultDecision =
  | { kind: 'accept'; transition: Transition; status: 'success' | 'failure' }
  | { kind: 'duplicate' }
  | { kind: 'protocol-conflict'; transition: Transition; detail: string }
  | { kind: 'reject'; reason: RejectionReason; detail: string; transition: Transition | undefined };

/** Result admission (spec: "Result admission and decision"), in the order the checks must run. */
export function decideResult(record: OperationRecord, interaction: CompiledInteraction, command: ResultCommand): ResultDecision {
  const { message } = command;
  const reject = (reason: RejectionReason, detail: string): ResultDecision => ({ kind: 'reject', reason, detail, transition: rejectionTransition(record, command, reason, detail) });
  const branch = record.branches[message.branchId];
  if (!branch) return reject('unknown-branch', `branch ${message.branchId} is not in the frozen manifest`);
  if (command.subjectPeerId !== message.peerId || message.peerId !== branch.peerId) {
    return reject('wrong-peer', `subject peer ${command.subjectPeerId}, payload peer ${message.peerId}, expected peer ${branch.peerId} must agree`);
  }
  if (command.publisherProblem !== undefined) return reject('unverified-publisher', command.publisherProblem);
  if (!Number.isSafeInteger(message.attempt) || message.attempt < 1 || message.attempt > branch.attempt) {
    return reject('unknown-attempt', `attempt ${message.attempt} was never assigned (current ${branch.attempt})`);
  }
  if (message.attempt !== branch.attempt || message.fence !== branch.fence) {
    return reject('stale-fence', `attempt ${message.attempt} fence ${message.fence} is not the current attempt ${branch.attempt} fence ${branch.fence}`);
  }
  if (branch.accepted !== null && branch.accepted.attempt === message.attempt) {
    if (jsonEquals(branch.accepted.result, message.result)) return { kind: 'duplicate' };
    return protocolConflict(record, command);
  }
  if (record.decision !== null) return reject('closed', `operation closed at ${record.decision.closedAtMs} with ${record.decision.outcome}`);
  if (branchStatusOf(branch.state) !== 'pending') return reject('branch-terminal', `branch ${branch.branchId} is already ${branchStatusOf(branch.state)}`);
  if (!interaction.validateResult(message.result)) return reject('invalid-schema', `result does not match the interaction's result schema`);
  if (command.authorizationProblem !== undefined) return reject('denied', command.authorizationProblem);
  if (command.nowMs >= record.deadlineMs) return reject('late', `received at ${command.nowMs}, deadline ${record.deadlineMs}`);
  if (command.nowMs >= branch.leaseUntilMs) return reject('expired-lease', `lease of attempt ${branch.attempt} ended at ${branch.leaseUntilMs}`);
  return accept(record, interaction, command);
}

function accept(record: OperationRecord, interaction: CompiledInteraction, command: ResultCommand): ResultDecision {
  const { message } = command;
  const branch = record.branches[message.branchId]!;
  const spec = interaction.spec;
  const success = predicateHolds(message.result, spec.success);
  const retryable = !success && spec.retryable !== undefined && predicateHolds(message.result, spec.retryable);
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
    result: message.result,
    subject: command.subject,
  };
  return {
    kind: 'accept',
    status,
    transition: {
      events: withClosure(record, [event], command.nowMs),
      // Strictly before the deadline and the lease, at the store's serialization point.
      timeGuard: { notBeforeMs: record.admittedAtMs, notAfterMs: Math.min(record.deadlineMs, branch.leaseUntilMs) },
      causation: { command: 'admit-result', messageId: `${message.branchId}/${message.attempt}/${message.fence}` },
    },
  };
}

function protocolConflict(record: OperationRecord, command: ResultCommand): ResultDecision {
  const { message } = command;
  const detail = `a different terminal result for attempt ${message.attempt} of branch ${message.branchId}; the accepted result stands`;
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

/** Rejections are recorded in the stream up to a bound, then only counted (a flood cannot grow the log). */
function rejectionTransition(record: OperationRecord, command: ResultCommand, reason: RejectionReason, detail: string): Transition | undefined {
  if (record.rejectionsRecorded >= limits.rejectionsRecordedMax) return undefined;
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

export function predicateHolds(result: JsonValue, predicate: { pointer: string; equals: JsonValue }): boolean {
  return jsonEquals(valueAt(result, predicate.pointer), predicate.equals);
}
