/**
 * The operations index projection: an operation's index row (src/events/operation-index.ts) as a
 * pure function of its record — the OperationRecord every view folds with applyStored, which keeps
 * the two facts only the index reads (the last rejection, when each branch's current attempt
 * began). So the row after an append is `indexRow` of the record after it: the committing side
 * hands the store the record it already folded (adapters/store/index-states.ts) and nothing folds
 * twice; `convoke replay` folds the log again with `indexRowOfLog` and compares.
 */
import type { OperationIndexRow } from '../events/operation-index.js';
import type { StoredTransition } from '../events/types.js';
import { branchStatusOf, isCancelling, isClaimed, isRetrying } from '../machines/index.js';
import { branchList, fold, type OperationRecord } from './record.js';

/** The row of a whole log; undefined when no admission was applied. */
export function indexRowOfLog(transitions: readonly StoredTransition[]): OperationIndexRow | undefined {
  const record = fold(transitions);
  return record && indexRow(record);
}

/**
 * The next instant a timer of the operation falls due: undecided, the deadline, each claimed
 * attempt's lease end and each retry instant; decided with branches cancelling, the cancel
 * deadline. Undefined when nothing is due.
 */
export function nextDueMs(record: OperationRecord): number | undefined {
  return nextDueAfterMs(record, Number.NEGATIVE_INFINITY);
}

/** The first of nextDueMs's instants later than `afterMs` (the deadline, lease ends, retry instants, the cancel deadline); undefined when none. */
export function nextDueAfterMs(record: OperationRecord, afterMs: number): number | undefined {
  const later = (due: number | undefined, atMs: number | null): number | undefined =>
    atMs !== null && atMs > afterMs && (due === undefined || atMs < due) ? atMs : due;
  if (record.decision === null) {
    let due = later(undefined, record.deadlineMs);
    for (const b of branchList(record)) {
      if (isClaimed(b.state)) due = later(due, b.leaseUntilMs);
      if (isRetrying(b.state)) due = later(due, b.retryAtMs);
    }
    return due;
  }
  for (const b of branchList(record)) if (isCancelling(b.state)) return later(undefined, record.decision.cancelDeadlineMs);
  return undefined;
}

/**
 * The next due instant indexRow computed last, for the commit pipeline's timer (takeNextDueMs):
 * a store derives the row of the record it just wrote and the kernel then arms that record's
 * timer, so an append computes it once. Taken once; a record is never changed once folded.
 */
let lastDue: { record: OperationRecord; dueMs: number | undefined } | undefined;

/** nextDueMs of `record`, from indexRow's computation of it when that was the last. */
export function takeNextDueMs(record: OperationRecord): number | undefined {
  const held = lastDue;
  if (held !== undefined && held.record === record) {
    lastDue = undefined;
    return held.dueMs;
  }
  return nextDueMs(record);
}

export function indexRow(record: OperationRecord): OperationIndexRow {
  const undecided = record.decision === null;
  let leaseExpiresAtMs: number | null = null;
  let outboxPendingSinceMs: number | null = null;
  let openBranches = 0;
  for (const b of branchList(record)) {
    if (branchStatusOf(b.state) === 'pending') openBranches++;
    let pendingSinceMs: number | undefined;
    if (undecided && isClaimed(b.state)) {
      if (leaseExpiresAtMs === null || b.leaseUntilMs < leaseExpiresAtMs) leaseExpiresAtMs = b.leaseUntilMs;
      if (b.outbox.receipt === 'pending') pendingSinceMs = b.attemptStartedAtMs;
    }
    if (record.decision !== null && isCancelling(b.state) && b.cancel?.receipt === 'pending') pendingSinceMs = record.decision.closedAtMs;
    if (pendingSinceMs !== undefined && (outboxPendingSinceMs === null || pendingSinceMs < outboxPendingSinceMs)) outboxPendingSinceMs = pendingSinceMs;
  }
  const dueMs = nextDueMs(record);
  lastDue = { record, dueMs };
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
    nextDueMs: dueMs ?? null,
    openBranches,
    lastRejection: record.lastRejection,
    leaseExpiresAtMs,
    outboxPendingSinceMs,
    revision: record.revision,
  };
}
