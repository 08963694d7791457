/**
 * The workflow instances index held in memory, sorted every way a list narrows: the rows of a
 * store whose own storage has no sorted secondary index (the memory store, JetStream,
 * EventStoreDB), answering a page without reading every row — as index-view.ts does for
 * operations.
 *
 * One list in list order (newest start first, ties by instance id descending) of every row, and
 * one per value of each filter: principal, status, workflow name, principal and status, and the
 * running rows (the only ones that can be stuck; all and per principal). A page takes the
 * shortest list the query's filters name, seeks to the cursor (or `until`) and walks until it has
 * `limit + 1` matching rows or passes `since`; for one filter every row walked is a row of the
 * page, so a page's cost does not grow with the number of rows stored.
 *
 * The lists, the in-place update and the page are row-view.ts's, shared with the operations view.
 *
 * Pure: no I/O, no clock (the instant comes with the query). Rows handed to `apply` are kept as
 * they are and must not be changed afterwards; rows handed out are copies.
 */
import {
  compareWorkflowOrder,
  isAfterPosition,
  matchesWorkflowQuery,
  type WorkflowIndexPosition,
  type WorkflowIndexQuery,
  type WorkflowIndexRow,
} from '../../events/workflow-index.js';
import { RowView, type RowShape, type ViewEntry } from './row-view.js';
import type { PagedKind } from './index-pages.js';
import { copyOfRow } from './workflow-rows.js';

/** An instance's place in the lists (row-view.ts): only a change of status, principal or name (the start and the end) moves it. */
type Entry = ViewEntry<WorkflowIndexRow>;

/** Oldest start first: the reverse of list order, so that a new instance is appended, never inserted. */
const oldestFirst = (a: Entry, b: Entry): number => (a === b ? 0 : compareWorkflowOrder(b.row, a.row));

/** The keyed lists a row belongs to. A separator no principal or name holds keeps pairs apart. */
function keysOf(row: WorkflowIndexRow): string[] {
  const keys = [`p\u0000${row.principalId}`, `s\u0000${row.status}`, `w\u0000${row.workflowName}`, `ps\u0000${row.principalId}\u0000${row.status}`];
  if (row.status === 'running') keys.push('run', `prun\u0000${row.principalId}`);
  return keys;
}

/** The keyed lists a query may walk instead of every row: each holds every row the query can match. */
function candidateKeys(query: WorkflowIndexQuery): string[] {
  const keys: string[] = [];
  const p = query.principalId;
  if (p !== undefined) keys.push(`p\u0000${p}`);
  if (query.status !== undefined) keys.push(`s\u0000${query.status}`, ...(p === undefined ? [] : [`ps\u0000${p}\u0000${query.status}`]));
  if (query.workflowName !== undefined) keys.push(`w\u0000${query.workflowName}`);
  if (query.stuck) keys.push(p === undefined ? 'run' : `prun\u0000${p}`);
  return keys;
}

/** The workflow instances index's rows as row-view.ts keeps them. */
export const instanceShape: RowShape<WorkflowIndexRow, WorkflowIndexQuery, WorkflowIndexPosition> = {
  name: 'workflow instances index',
  idOf: (row) => row.instanceId,
  atMsOf: (row) => row.startedAtMs,
  oldestFirst,
  keysOf,
  sameKeys: (a, b) => a.principalId === b.principalId && a.status === b.status && a.workflowName === b.workflowName,
  groupOf: (row) => `${row.principalId}\u0000${row.status}\u0000${row.workflowName}`,
  candidateKeys,
  isAfter: isAfterPosition,
  matches: matchesWorkflowQuery,
  copy: copyOfRow,
  positionOf: (row) => ({ startedAtMs: row.startedAtMs, instanceId: row.instanceId }),
};

/**
 * The workflow instances index as pages keep it (index-pages.ts): the running rows' timeout,
 * timer and lease instants summarised by their earliest (a timer overdue also needs no live
 * lease, which a summary does not tell: the page is read).
 */
export const instancePages: PagedKind<WorkflowIndexRow, WorkflowIndexQuery, WorkflowIndexPosition> = {
  shape: instanceShape,
  keyOfPosition: (position) => [position.startedAtMs, position.instanceId],
  instants: {
    timeout: (row) => (row.status === 'running' ? row.deadlineMs : null),
    timer: (row) => (row.status === 'running' ? row.nextDueMs : null),
    lease: (row) => (row.status === 'running' ? (row.lease?.untilMs ?? null) : null),
  },
  stuckMayHold: ({ earliest }, query) => {
    const { nowMs, bounds, reason } = query.stuck as NonNullable<WorkflowIndexQuery['stuck']>;
    const before = (at: number | undefined, graceMs: number) => at !== undefined && at + graceMs < nowMs;
    const may = {
      'past-timeout': () => before(earliest.timeout, bounds.timeoutGraceMs),
      'timer-overdue': () => before(earliest.timer, bounds.timerGraceMs),
      'lease-expired': () => before(earliest.lease, bounds.leaseGraceMs),
    };
    return reason === undefined ? Object.values(may).some((m) => m()) : may[reason]();
  },
};

export class WorkflowIndexView extends RowView<WorkflowIndexRow, WorkflowIndexQuery, WorkflowIndexPosition> {
  constructor() {
    super(instanceShape);
  }

  /** How many of the principal's rows are running, no more than `atMost` (WorkflowIndexStore.countRunning): the size of its running list. */
  countRunning(principalId: string, atMost: number): number {
    return Math.min(this.keyed.get(`prun\u0000${principalId}`)?.size ?? 0, atMost);
  }
}
