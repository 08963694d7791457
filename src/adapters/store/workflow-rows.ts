/**
 * Workflow instance index rows at a store's edges: the committing side's row for the transition
 * just written (WorkflowRowAfter), and a row read back from storage that keeps rows as JSON
 * (SQLite, JetStream, EventStoreDB). A row is trusted only in full — every field of
 * WorkflowIndexRow with its type and, for the status, one of its values, and nothing else —
 * never listed as a guess, never able to break the order an in-memory view keeps.
 */
import { isOperationId } from '../../contract/ids.js';
import { workflowRowChildrenMax, workflowStatuses, type WorkflowIndexRow, type WorkflowRowError } from '../../events/workflow-index.js';
import type { StoredTransition } from '../../events/types.js';
import type { IndexAfter } from './types.js';

const decoder = new TextDecoder('utf-8', { fatal: true });
const instanceIdPattern = /^wf[0-9a-f]{64}$/;
const statuses = new Set<string>(workflowStatuses);
/** The row's fields; a row written before `parent` existed has one fewer (and is read with parent null). */
const rowKeys = 17;
const errorKeys = new Set(['type', 'status', 'title', 'detail', 'instance']);

/** Whether the stream is a workflow instance's (`wf…` id) rather than an operation's. */
export const isWorkflowStream = (streamId: string): boolean => instanceIdPattern.test(streamId);

const isInstant = (v: unknown): v is number => Number.isSafeInteger(v);
const isInstantOrNull = (v: unknown): boolean => v === null || Number.isSafeInteger(v);
const isText = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function isTask(v: unknown): boolean {
  return v === null || (isRecord(v) && Object.keys(v).length === 2 && isText(v.at) && typeof v.name === 'string');
}

function isLease(v: unknown): boolean {
  return v === null || (isRecord(v) && Object.keys(v).length === 3 && typeof v.worker === 'string' && isInstant(v.epoch) && isInstant(v.untilMs));
}

function isParent(v: unknown): boolean {
  return v === null || (isRecord(v) && Object.keys(v).length === 2 && typeof v.instanceId === 'string' && instanceIdPattern.test(v.instanceId) && isText(v.at));
}

function isError(v: unknown): boolean {
  if (v === null) return true;
  if (!isRecord(v) || !Object.keys(v).every((k) => errorKeys.has(k))) return false;
  const optionalText = (x: unknown) => x === undefined || typeof x === 'string';
  return typeof v.type === 'string' && Number.isSafeInteger(v.status) && optionalText(v.title) && optionalText(v.detail) && optionalText(v.instance);
}

/** The row `value` is, or undefined when it is not exactly one. A row written before `parent` existed is answered with parent null. */
export function workflowIndexRowOf(value: unknown): WorkflowIndexRow | undefined {
  if (!isRecord(value)) return undefined;
  const keys = Object.keys(value).length;
  const older = keys === rowKeys - 1 && !('parent' in value);
  if (keys !== rowKeys && !older) return undefined;
  const r = older ? { ...value, parent: null } : value;
  const ok =
    typeof r.instanceId === 'string' &&
    instanceIdPattern.test(r.instanceId) &&
    isText(r.principalId) &&
    typeof r.workflowName === 'string' &&
    typeof r.bundleDigest === 'string' &&
    typeof r.invocationKey === 'string' &&
    typeof r.status === 'string' &&
    statuses.has(r.status) &&
    isInstant(r.startedAtMs) &&
    isInstantOrNull(r.endedAtMs) &&
    isInstantOrNull(r.deadlineMs) &&
    isTask(r.currentTask) &&
    isInstantOrNull(r.nextDueMs) &&
    isLease(r.lease) &&
    isError(r.lastError) &&
    Array.isArray(r.childOperationIds) &&
    r.childOperationIds.length <= workflowRowChildrenMax &&
    r.childOperationIds.every((id) => typeof id === 'string' && isOperationId(id)) &&
    Number.isSafeInteger(r.childOperations) &&
    (r.childOperations as number) >= r.childOperationIds.length &&
    isParent(r.parent) &&
    typeof r.revision === 'string' &&
    /^(0|[1-9][0-9]{0,19})$/.test(r.revision);
  return ok ? (r as unknown as WorkflowIndexRow) : undefined;
}

/** The row stored as these bytes (UTF-8 JSON), or undefined for bytes that are not one. */
export function parseWorkflowIndexRow(data: Uint8Array | string): WorkflowIndexRow | undefined {
  try {
    return workflowIndexRowOf(JSON.parse(typeof data === 'string' ? data : decoder.decode(data)));
  } catch {
    return undefined;
  }
}

/**
 * The committing side's row after `stored`, when it is a whole row of this instance at exactly
 * the revision stored; undefined otherwise (none given, a void creation, or one that does not
 * match what was written — never trusted over the log).
 */
export function committedWorkflowRow(instanceId: string, stored: StoredTransition, after: IndexAfter | undefined): WorkflowIndexRow | undefined {
  if (after === undefined) return undefined;
  let answer: unknown;
  try {
    answer = after(stored);
  } catch {
    return undefined;
  }
  const row = workflowIndexRowOf(answer);
  return row !== undefined && row.instanceId === instanceId && row.revision === stored.revision ? copyOfRow(row) : undefined;
}

/**
 * A copy the store owns (callers may keep changing what they handed over), of a row that is
 * exactly one (workflowIndexRowOf said so, or this module made it): every nested object and array
 * copied, an error's absent fields left out — what a JSON round trip answers for such a row, for a
 * tenth of its cost (each append writes a row).
 */
export function copyOfRow(row: WorkflowIndexRow): WorkflowIndexRow {
  const { currentTask, lease, lastError, parent } = row;
  return {
    ...row,
    parent: parent && { instanceId: parent.instanceId, at: parent.at },
    currentTask: currentTask && { at: currentTask.at, name: currentTask.name },
    lease: lease && { worker: lease.worker, epoch: lease.epoch, untilMs: lease.untilMs },
    lastError: lastError && copyOfError(lastError),
    childOperationIds: [...row.childOperationIds],
  };
}

function copyOfError(error: WorkflowRowError): WorkflowRowError {
  const copy: Record<string, unknown> = {};
  for (const key in error) {
    const value = (error as unknown as Record<string, unknown>)[key];
    if (value !== undefined) copy[key] = value;
  }
  return copy as unknown as WorkflowRowError;
}

/** A copy of a row handed in whole (`put`), through JSON: whatever it holds, nothing of the caller's stays shared. */
export function detachedRow(row: WorkflowIndexRow): WorkflowIndexRow {
  return JSON.parse(JSON.stringify(row)) as WorkflowIndexRow;
}
