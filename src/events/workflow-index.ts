/**
 * The workflow instances index: one row per instance, the shape every store keeps and every
 * instance list answers with. The row is derived from the instance's log by one pure function
 * (src/workflow/exec/index-row.ts, over the instance's record); this module holds only the
 * vocabulary the projection, the stores and the facades share — the row, the query, a page, the
 * stuck reasons — and the pure predicates over them, so that every store filters exactly alike.
 */

export const workflowStatuses = ['running', 'completed', 'faulted', 'cancelled'] as const;
export type WorkflowStatus = (typeof workflowStatuses)[number];

/** The DSL's error shape (RFC 7807), as the instance recorded it. */
export interface WorkflowRowError {
  type: string;
  status: number;
  title?: string;
  detail?: string;
  instance?: string;
}

/** The parent of a child workflow instance, as its row names it. */
export interface WorkflowRowParent {
  instanceId: string;
  at: string;
}

/** How many child operation ids a row carries (the first bound); `childOperations` counts them all. */
export const workflowRowChildrenMax = 32;

export interface WorkflowIndexRow {
  instanceId: string;
  principalId: string;
  workflowName: string;
  bundleDigest: string;
  invocationKey: string;
  status: WorkflowStatus;
  /** The store's commit instant of `workflow-started`: the list order. */
  startedAtMs: number;
  /** The commit instant of the end; null while running. */
  endedAtMs: number | null;
  /** startedAtMs + the workflow's timeout; null when it has none. */
  deadlineMs: number | null;
  /** The innermost task running (its pointer and frame, and its name); null when none or ended. */
  currentTask: { at: string; name: string } | null;
  /** The earliest armed timer's instant while running; null when none. */
  nextDueMs: number | null;
  /** The worker lease as recorded (held until `untilMs` unless renewed); null when none is held. */
  lease: { worker: string; epoch: number; untilMs: number } | null;
  /** The instance's error when it faulted, else the last task fault recorded; null when none. */
  lastError: WorkflowRowError | null;
  /** The child operations' ids in the order their calls were bound (at most workflowRowChildrenMax). */
  childOperationIds: string[];
  /** How many child operations were bound in all. */
  childOperations: number;
  /**
   * The instance whose `run: workflow` task started this one (its id, and the task execution:
   * JSON Pointer and frame); null for an instance started on its own. Rows written before this
   * field existed are read with null (workflow-rows.ts).
   */
  parent: WorkflowRowParent | null;
  /** The log revision the row was derived at (void transitions included). */
  revision: string;
}

export const workflowStuckReasons = ['past-timeout', 'timer-overdue', 'lease-expired'] as const;
export type WorkflowStuckReason = (typeof workflowStuckReasons)[number];

/** How long past each instant a running instance may stay before it counts as stuck (docs/workflows-executor.md "Listing instances"). */
export interface WorkflowStuckBounds {
  /** Still running this long after its workflow timeout. */
  timeoutGraceMs: number;
  /** An armed timer due this long ago while no worker holds a live lease. */
  timerGraceMs: number;
  /** The recorded lease ended this long ago and was neither renewed, released nor taken over. */
  leaseGraceMs: number;
}

export const workflowStuckBoundsDefault: WorkflowStuckBounds = { timeoutGraceMs: 30_000, timerGraceMs: 60_000, leaseGraceMs: 30_000 };

/** Why the row is stuck at `nowMs`, in the order of workflowStuckReasons; empty when it is not (an ended instance never is). */
export function workflowStuckReasonsOf(row: WorkflowIndexRow, nowMs: number, bounds: WorkflowStuckBounds): WorkflowStuckReason[] {
  if (row.status !== 'running') return [];
  const reasons: WorkflowStuckReason[] = [];
  if (row.deadlineMs !== null && row.deadlineMs + bounds.timeoutGraceMs < nowMs) reasons.push('past-timeout');
  const leaseLive = row.lease !== null && row.lease.untilMs >= nowMs;
  if (row.nextDueMs !== null && row.nextDueMs + bounds.timerGraceMs < nowMs && !leaseLive) reasons.push('timer-overdue');
  if (row.lease !== null && row.lease.untilMs + bounds.leaseGraceMs < nowMs) reasons.push('lease-expired');
  return reasons;
}

/** A list query. Every filter is optional; rows come newest start first. */
export interface WorkflowIndexQuery {
  /** Only this principal's instances; undefined lists every principal's (operators). */
  principalId?: string;
  status?: WorkflowStatus;
  workflowName?: string;
  /** Started at or after (ms). */
  sinceMs?: number;
  /** Started strictly before (ms). */
  untilMs?: number;
  /** Only rows stuck at `nowMs` for any reason (or the one named). */
  stuck?: { nowMs: number; bounds: WorkflowStuckBounds; reason?: WorkflowStuckReason };
  limit: number;
  /** Continue after this position (from a previous page's next). */
  after?: WorkflowIndexPosition;
}

/** A row's place in the order: startedAtMs descending, then instanceId descending. Both never change. */
export interface WorkflowIndexPosition {
  startedAtMs: number;
  instanceId: string;
}

export interface WorkflowIndexPage {
  rows: WorkflowIndexRow[];
  /** Where the next page starts; undefined on the last page. */
  next?: WorkflowIndexPosition;
}

/** Whether `row` comes after `position` in list order (strictly). */
export function isAfterPosition(row: WorkflowIndexPosition, position: WorkflowIndexPosition): boolean {
  return row.startedAtMs < position.startedAtMs || (row.startedAtMs === position.startedAtMs && row.instanceId < position.instanceId);
}

/** List order: newest start first, ties by instanceId descending. */
export function compareWorkflowOrder(a: WorkflowIndexPosition, b: WorkflowIndexPosition): number {
  if (a.startedAtMs !== b.startedAtMs) return b.startedAtMs - a.startedAtMs;
  return a.instanceId < b.instanceId ? 1 : a.instanceId > b.instanceId ? -1 : 0;
}

/** Whether `row` passes every filter of `query` (the position excepted). */
export function matchesWorkflowQuery(row: WorkflowIndexRow, query: WorkflowIndexQuery): boolean {
  if (query.principalId !== undefined && row.principalId !== query.principalId) return false;
  if (query.status !== undefined && row.status !== query.status) return false;
  if (query.workflowName !== undefined && row.workflowName !== query.workflowName) return false;
  if (query.sinceMs !== undefined && row.startedAtMs < query.sinceMs) return false;
  if (query.untilMs !== undefined && row.startedAtMs >= query.untilMs) return false;
  if (query.stuck) {
    const reasons = workflowStuckReasonsOf(row, query.stuck.nowMs, query.stuck.bounds);
    if (query.stuck.reason === undefined ? reasons.length === 0 : !reasons.includes(query.stuck.reason)) return false;
  }
  return true;
}

/** One page of `rows` (any order) for `query`: the reference every store's index answers like. */
export function workflowPageOf(rows: Iterable<WorkflowIndexRow>, query: WorkflowIndexQuery): WorkflowIndexPage {
  const matching: WorkflowIndexRow[] = [];
  for (const row of rows) if (matchesWorkflowQuery(row, query) && (query.after === undefined || isAfterPosition(row, query.after))) matching.push(row);
  matching.sort(compareWorkflowOrder);
  const page = matching.slice(0, query.limit);
  const last = page.at(-1);
  return matching.length > query.limit && last ? { rows: page, next: { startedAtMs: last.startedAtMs, instanceId: last.instanceId } } : { rows: page };
}
