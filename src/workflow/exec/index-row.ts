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
import { foldWorkflow, nextWorkflowDueMs, type ChildRecord, type TaskRecord, type WorkflowRecord } from './record.js';

/** The row of a whole log; undefined when nothing was applied. */
export function workflowIndexRowOfLog(log: readonly Stored<WorkflowTransition>[]): WorkflowIndexRow | undefined {
  const record = foldWorkflow(log);
  return record && workflowIndexRow(record);
}

export function workflowIndexRow(record: WorkflowRecord): WorkflowIndexRow {
  const { started } = record;
  const children = childrenInStartOrder(record);
  const { current, fault } = taskSummary(record);
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
    currentTask: current,
    nextDueMs: nextWorkflowDueMs(record) ?? null,
    lease: record.status === 'running' && record.lease ? { worker: record.lease.worker, epoch: record.lease.epoch, untilMs: record.lease.untilMs } : null,
    lastError: errorOf(record.error ?? fault),
    childOperationIds: children.slice(0, workflowRowChildrenMax).map((child) => child.operationId),
    childOperations: children.length,
    parent: started.parent ? { instanceId: started.parent.instanceId, at: started.parent.at } : null,
    revision: record.revision,
  };
}

const startOrder = (record: WorkflowRecord, at: string): number => record.tasks[at]?.startedSeq ?? Number.MAX_SAFE_INTEGER;

/**
 * The child operations in the order their tasks started (a stable sort of the bound order). The
 * record binds them as their tasks run, so the bound order is nearly always that order already:
 * it is checked in one pass, and sorted only when it is not.
 */
function childrenInStartOrder(record: WorkflowRecord): ChildRecord[] {
  const ats: string[] = [];
  const children: ChildRecord[] = [];
  let sorted = true;
  let last = Number.MIN_SAFE_INTEGER;
  for (const at in record.children) {
    const child = record.children[at] as ChildRecord;
    const order = startOrder(record, at);
    if (order < last) sorted = false;
    last = order;
    ats.push(at);
    children.push(child);
  }
  if (sorted) return children;
  const indexes = ats.map((_, index) => index).sort((a, b) => startOrder(record, ats[a] as string) - startOrder(record, ats[b] as string));
  return indexes.map((index) => children[index] as ChildRecord);
}

/**
 * In one pass over the tasks: the innermost task running now (the one started last among the
 * running; null once the instance ended) and the error of the task execution that faulted last
 * (a caught fault included).
 */
function taskSummary(record: WorkflowRecord): { current: { at: string; name: string } | null; fault: WorkflowError | null } {
  const running = record.status === 'running';
  let current: { at: string; name: string; seq: number } | undefined;
  let fault: { error: WorkflowError; seq: number } | undefined;
  for (const at in record.tasks) {
    const task = record.tasks[at] as TaskRecord;
    if (running && task.state === 'running' && (current === undefined || task.startedSeq > current.seq))
      current = { at, name: task.name, seq: task.startedSeq };
    else if (task.state === 'faulted' && task.error && task.endedSeq !== null && (fault === undefined || task.endedSeq > fault.seq))
      fault = { error: task.error, seq: task.endedSeq };
  }
  return { current: current ? { at: current.at, name: current.name } : null, fault: fault?.error ?? null };
}

/** The innermost task running now (the one started last among the running); null once the instance ended. */
export function currentTask(record: WorkflowRecord): { at: string; name: string } | null {
  return taskSummary(record).current;
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
