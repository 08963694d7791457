/**
 * The workflow instance aggregate as the kernel sees it (src/kernel): its projection (record.ts),
 * its timers (the earliest armed one), when it is finished, and the checks a decided transition
 * passes before it is appended — its schema, and the machines' legality by applying it.
 */
import { AdapterError, AssertionFailure } from '../../contract/errors.js';
import type { Aggregate, Stored } from '../../kernel/types.js';
import type { WorkflowTransition } from './events.js';
import { workflowTransitionProblem } from './events.js';
import { applyWorkflow, foldWorkflow, isWorkflowFinished, nextWorkflowDueMs, type WorkflowRecord } from './record.js';

export const workflowAggregate: Aggregate<WorkflowRecord, WorkflowTransition> = {
  name: 'workflow instance',
  apply: (record, stored) => applyWorkflow(record, stored),
  fold: (log) => foldWorkflow(log),
  revision: (record) => record.revision,
  nextDueMs: nextWorkflowDueMs,
  finished: isWorkflowFinished,
  commandOf: (transition) => transition.causation.command,
  check: (record, transition) => {
    const problem = workflowTransitionProblem(transition);
    if (problem !== undefined) throw new AssertionFailure(`decided an invalid workflow transition (${transition.causation.command}): ${problem}`);
    // The machines are the authority: applying it to the current record asserts every step.
    applyWorkflow(record, {
      revision: record.revision,
      committedAtMs: record.lastAppliedAtMs,
      transition: { ...transition, timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER } },
    });
  },
  checkLog: (instanceId, log) => checkedWorkflowLog(log, instanceId),
};

/** A log read back from a store: a transition that fails its schema is corruption, never folded. */
export function checkedWorkflowLog(log: readonly Stored<WorkflowTransition>[], instanceId: string): void {
  for (const stored of log) {
    const problem = workflowTransitionProblem(stored.transition);
    if (problem !== undefined)
      throw new AdapterError('unavailable', `workflow instance ${instanceId} revision ${stored.revision} fails its schema: ${problem}`);
  }
}
