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

export function indexRow(record: OperationRecord): OperationIndexRow {
  const branches = branchList(record);
  const undecided = record.decision === null;
  const leases: number[] = [];
  const pending: number[] = [];
  for (const b of branches) {
    if (undecided && isClaimed(b.state)) {
      leases.push(b.leaseUntilMs);
      if (b.outbox.receipt === 'pending') pending.push(b.attemptStartedAtMs);
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
    lastRejection: record.lastRejection,
    leaseExpiresAtMs: minOf(leases),
    outboxPendingSinceMs: minOf(pending),
    revision: record.revision,
  };
}
