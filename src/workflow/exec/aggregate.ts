/**
 * The workflow instance aggregate as the kernel sees it (src/kernel): its projection (record.ts),
 * its timers (the earliest armed one), when it is finished, and the checks a decided transition
 * passes before it is appended — its schema, and the machines' legality by applying it.
 */
import { AdapterError, AssertionFailure } from '../../contract/errors.js';
import { appliesOnFold } from '../../events/guard.js';
import type { Aggregate, Stored } from '../../kernel/types.js';
import type { WorkflowTransition } from './events.js';
import { workflowTransitionProblem } from './events.js';
import { applyWorkflow, foldWorkflow, isWorkflowFinished, nextWorkflowDueAfterMs, nextWorkflowDueMs, type WorkflowRecord } from './record.js';

export const workflowAggregate: Aggregate<WorkflowRecord, WorkflowTransition> = {
  name: 'workflow instance',
  apply: (record, stored) => applyWorkflow(record, stored),
  fold: (log) => foldWorkflow(log),
  revision: (record) => record.revision,
  nextDueMs: nextWorkflowDueMs,
  nextDueAfterMs: nextWorkflowDueAfterMs,
  finished: isWorkflowFinished,
  commandOf: (transition) => transition.causation.command,
  check: (record, transition, atMs) => {
    const problem = workflowTransitionProblem(transition);
    if (problem !== undefined) throw new AssertionFailure(`decided an invalid workflow transition (${transition.causation.command}): ${problem}`);
    // The machines are the authority: applying it to the current record asserts every step. Applied at the instant
    // the store is expected to stamp (never before the last applied one), under an open guard so that it applies.
    const checkedAtMs = Math.max(atMs, record.lastAppliedAtMs);
    const applied = applyWorkflow(record, {
      revision: record.revision,
      committedAtMs: checkedAtMs,
      transition: { ...transition, timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER } },
    });
    // Stored at that instant and applied there (its guard admits it), the record after it is the one checked, at the
    // stored revision: nothing else of a record depends on the stamp. At any other instant, applied afresh. The
    // checked record is nobody else's: it is handed out once, its revision set in place (a spread of a record
    // takes the engine's slow copy).
    let unused = applied;
    return (stored) => {
      if (unused === undefined || stored.committedAtMs !== checkedAtMs || !appliesOnFold(stored, record.lastAppliedAtMs)) return applyWorkflow(record, stored);
      const after = unused;
      unused = undefined;
      after.revision = stored.revision;
      return after;
    };
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
