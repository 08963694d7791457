/**
 * The workflow instances index projection: an instance's index row (src/events/workflow-index.ts)
 * as a pure function of its record — the WorkflowRecord the executor and every replay fold with
 * applyWorkflow. So the row after an append is `workflowIndexRow` of the record after it: the
 * committing side hands the store that row with the transition (streams.ts), nothing folds twice,
 * and `convoke replay wf…` folds the log again with `workflowIndexRowOfLog` and compares.
 */
import { workflowRowChildrenMax, type WorkflowIndexRow, type WorkflowRowError } from '../../events/workflow-index.js';
import type { Stored } from '../../kernel/types.js';
import type { WorkflowError, WorkflowTransition } from './events.js';
import { foldWorkflow, nextWorkflowDueMs, type WorkflowRecord } from './record.js';

/** The row of a whole log; undefined when nothing was applied. */
export function workflowIndexRowOfLog(log: readonly Stored<WorkflowTransition>[]): WorkflowIndexRow | undefined {
  const record = foldWorkflow(log);
  return record && workflowIndexRow(record);
}

export function workflowIndexRow(record: WorkflowRecord): WorkflowIndexRow {
  const { started } = record;
  const children = Object.entries(record.children).sort(([a], [b]) => startOrder(record, a) - startOrder(record, b));
  return {
    instanceId: record.instanceId,
    principalId: started.principalId,
    workflowName: started.workflowName,
    bundleDigest: started.bundleDigest,
    invocationKey: started.invocationKey,
    status: record.status,
    startedAtMs: record.startedAtMs,
    endedAtMs: record.endedAtMs,
    deadlineMs: started.deadlineMs,
    currentTask: currentTask(record),
    nextDueMs: nextWorkflowDueMs(record) ?? null,
    lease: record.status === 'running' && record.lease ? { worker: record.lease.worker, epoch: record.lease.epoch, untilMs: record.lease.untilMs } : null,
    lastError: errorOf(record.error ?? lastTaskFault(record)),
    childOperationIds: children.slice(0, workflowRowChildrenMax).map(([, child]) => child.operationId),
    childOperations: children.length,
    parent: started.parent ? { instanceId: started.parent.instanceId, at: started.parent.at } : null,
    revision: record.revision,
  };
}

const startOrder = (record: WorkflowRecord, at: string): number => record.tasks[at]?.startedSeq ?? Number.MAX_SAFE_INTEGER;

/** The innermost task running now (the one started last among the running); null once the instance ended. */
export function currentTask(record: WorkflowRecord): { at: string; name: string } | null {
  if (record.status !== 'running') return null;
  let found: { at: string; name: string; seq: number } | undefined;
  for (const [at, task] of Object.entries(record.tasks))
    if (task.state === 'running' && (found === undefined || task.startedSeq > found.seq)) found = { at, name: task.name, seq: task.startedSeq };
  return found ? { at: found.at, name: found.name } : null;
}

/** The error of the task execution that faulted last (a caught fault included). */
function lastTaskFault(record: WorkflowRecord): WorkflowError | null {
  let found: { error: WorkflowError; seq: number } | undefined;
  for (const task of Object.values(record.tasks))
    if (task.state === 'faulted' && task.error && task.endedSeq !== null && (found === undefined || task.endedSeq > found.seq))
      found = { error: task.error, seq: task.endedSeq };
  return found?.error ?? null;
}

/** The error's own fields only, in a fixed order (a row is compared as JSON). */
function errorOf(error: WorkflowError | null): WorkflowRowError | null {
  if (error === null) return null;
  const row: WorkflowRowError = { type: error.type, status: error.status };
  if (error.title !== undefined) row.title = error.title;
  if (error.detail !== undefined) row.detail = error.detail;
  if (error.instance !== undefined) row.instance = error.instance;
  return row;
}
