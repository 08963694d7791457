/**
 * The operation aggregate as the kernel sees it (src/kernel): its projection (projections/record.ts),
 * its timers (operation-index.ts nextDueMs), when it is finished (settled), and the checks a decided
 * transition passes before it is appended — its schema and the machines' legality (legal.ts).
 */
import { AdapterError, AssertionFailure } from '../contract/errors.js';
import { transitionProblem } from '../events/schemas.js';
import type { StoredTransition, Transition } from '../events/types.js';
import type { Aggregate } from '../kernel/types.js';
import { isSettled } from '../machines/index.js';
import { applyStored, fold, type OperationRecord } from '../projections/record.js';
import { nextDueAfterMs, takeNextDueMs } from '../projections/operation-index.js';
import { assertLegal } from '../domain/legal.js';

export const operationAggregate: Aggregate<OperationRecord, Transition> = {
  name: 'operation',
  apply: (record, stored) => applyStored(record, stored),
  fold: (log) => fold(log),
  revision: (record) => record.revision,
  // The store's index row of the record just committed computed it already (operation-index.ts).
  nextDueMs: takeNextDueMs,
  nextDueAfterMs,
  finished: (record) => isSettled(record.phase),
  commandOf: (transition) => transition.causation.command,
  check: (record, transition) => {
    const problem = transitionProblem(transition);
    if (problem !== undefined) throw new AssertionFailure(`decided an invalid transition (${transition.causation.command}): ${problem}`);
    assertLegal(record, transition.events, transition.causation.command);
  },
  checkLog: (operationId, log) => checkedLog(log as StoredTransition[], operationId),
};

/** Validates a log read back from a store; a transition that fails its schema is corruption, never folded. */
export function checkedLog(transitions: readonly StoredTransition[], operationId: string): void {
  for (const stored of transitions) {
    const problem = transitionProblem(stored.transition);
    if (problem !== undefined) throw new AdapterError('unavailable', `operation ${operationId} revision ${stored.revision} fails its schema: ${problem}`);
  }
}
