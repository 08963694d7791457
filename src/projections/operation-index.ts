/**
 * The operations index projection: an operation's index row (src/events/operation-index.ts) as a
 * pure function of its log. Its state is the OperationRecord (the same applyStored every view
 * folds with) plus the two facts the record does not keep: the last rejection and when each
 * branch's current attempt began. Stores maintain the row at append with `indexStep` on the state
 * they hold (or fold from the log when they hold none); `convoke replay` folds the log again with
 * `indexRowOfLog` and compares.
 */
import type { OperationIndexRow } from '../events/operation-index.js';
import type { RejectionReason, StoredTransition } from '../events/types.js';
import { branchStatusOf, isCancelling, isClaimed, isRetrying } from '../machines/index.js';
import { applyStored, branchList, type OperationRecord } from './record.js';

export interface OperationIndexState {
  record: OperationRecord;
  lastRejection: { reason: RejectionReason; atMs: number } | null;
  /** Per branch: the store instant its current attempt began (admission, or its reassignment). */
  attemptStartedAtMs: Readonly<Record<string, number>>;
}

/** The state after one stored transition; undefined while nothing was applied (as applyStored). */
export function indexStep(state: OperationIndexState | undefined, stored: StoredTransition): OperationIndexState | undefined {
  const record = applyStored(state?.record, stored);
  if (record === undefined) return undefined;
  const applied = state === undefined || record.transitionsApplied > state.record.transitionsApplied;
  if (!applied && state) return { ...state, record };
  let lastRejection = state?.lastRejection ?? null;
  let attemptStartedAtMs = state?.attemptStartedAtMs ?? {};
  for (const event of stored.transition.events) {
    if (event.type === 'result-rejected') lastRejection = { reason: event.reason, atMs: stored.committedAtMs };
    if (event.type === 'operation-admitted') attemptStartedAtMs = Object.fromEntries(event.outbox.map((o) => [o.branchId, stored.committedAtMs]));
    if (event.type === 'branch-reassigned') attemptStartedAtMs = { ...attemptStartedAtMs, [event.branchId]: stored.committedAtMs };
  }
  return { record, lastRejection, attemptStartedAtMs };
}

/** The state of a whole log. */
export function indexStateOfLog(transitions: readonly StoredTransition[]): OperationIndexState | undefined {
  let state: OperationIndexState | undefined;
  for (const stored of transitions) state = indexStep(state, stored);
  return state;
}

/** The row of a whole log; undefined when no admission was applied. */
export function indexRowOfLog(transitions: readonly StoredTransition[]): OperationIndexRow | undefined {
  const state = indexStateOfLog(transitions);
  return state && indexRow(state);
}

/**
 * The next instant a timer of the operation falls due: undecided, the deadline, each claimed
 * attempt's lease end and each retry instant; decided with branches cancelling, the cancel
 * deadline. Undefined when nothing is due.
 */
export function nextDueMs(record: OperationRecord): number | undefined {
  const instants: number[] = [];
  if (record.decision === null) {
    instants.push(record.deadlineMs);
    for (const b of branchList(record)) {
      if (isClaimed(b.state)) instants.push(b.leaseUntilMs);
      if (isRetrying(b.state) && b.retryAtMs !== null) instants.push(b.retryAtMs);
    }
  } else if (branchList(record).some((b) => isCancelling(b.state))) {
    instants.push(record.decision.cancelDeadlineMs);
  }
  return instants.length === 0 ? undefined : Math.min(...instants);
}

const minOf = (values: number[]): number | null => (values.length === 0 ? null : Math.min(...values));

export function indexRow(state: OperationIndexState): OperationIndexRow {
  const { record } = state;
  const branches = branchList(record);
  const undecided = record.decision === null;
  const leases: number[] = [];
  const pending: number[] = [];
  for (const b of branches) {
    if (undecided && isClaimed(b.state)) {
      leases.push(b.leaseUntilMs);
      if (b.outbox.receipt === 'pending') pending.push(state.attemptStartedAtMs[b.branchId] ?? record.admittedAtMs);
    }
    if (record.decision !== null && isCancelling(b.state) && b.cancel?.receipt === 'pending') pending.push(record.decision.closedAtMs);
  }
  return {
    operationId: record.operationId,
    principalId: record.principalId,
    contractId: record.contract.id,
    contractVersion: record.contract.version,
    interaction: record.interaction,
    phase: record.phase,
    outcome: record.decision?.outcome ?? null,
    settlement: record.settlement.status,
    admittedAtMs: record.admittedAtMs,
    decidedAtMs: record.decision?.closedAtMs ?? null,
    settledAtMs: record.settlement.completedAtMs,
    deadlineMs: record.deadlineMs,
    nextDueMs: nextDueMs(record) ?? null,
    openBranches: branches.filter((b) => branchStatusOf(b.state) === 'pending').length,
    lastRejection: state.lastRejection,
    leaseExpiresAtMs: minOf(leases),
    outboxPendingSinceMs: minOf(pending),
    revision: record.revision,
  };
}
