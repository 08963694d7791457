/**
 * Listing workflow instances from the workflow instances index (GET /workflow-instances, the NATS
 * `workflow-list` command, `convoke workflow list`): one parser of the list parameters for every
 * facade, the opaque cursor, visibility (a caller sees its own instances; an operator principal
 * sees all — the rule operations follow, operation-list.ts) and the page as it is answered, each
 * row with the stuck reasons it has now.
 */
import { invalidInput } from '../contract/errors.js';
import {
  workflowStatuses,
  workflowStuckReasons,
  workflowStuckReasonsOf,
  type WorkflowIndexPosition,
  type WorkflowIndexQuery,
  type WorkflowIndexRow,
  type WorkflowStatus,
  type WorkflowStuckBounds,
  type WorkflowStuckReason,
} from '../events/workflow-index.js';
import type { WorkflowIndexStore } from '../adapters/store/types.js';
import { quoted } from '../contract/validation.js';
import { commonListParameters, cursorCodec, type CommonListRequest } from './list-parameters.js';

/** What a caller asks for, already checked; visibility is decided by the caller's principal. */
export interface WorkflowListRequest extends Omit<WorkflowIndexQuery, 'principalId' | 'stuck' | 'after'>, CommonListRequest<WorkflowStuckReason> {}

export type ListedInstance = WorkflowIndexRow & { stuck: WorkflowStuckReason[] };

export interface WorkflowListPage {
  instances: ListedInstance[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** The parameters every facade accepts; their values may be query-string text or JSON. */
export const workflowListParameterNames = ['status', 'workflow', 'since', 'until', 'limit', 'cursor', 'stuck'] as const;

/** A workflow name as a filter: 1 to 128 characters, no control characters. */
const isWorkflowName = (value: unknown): value is string =>
  typeof value === 'string' && value.length >= 1 && value.length <= 128 && [...value].every((c) => c >= ' ' && c !== '\u007f');

/** Checks list parameters and answers the request, or throws invalid-input naming every problem at once. */
export function parseWorkflowListParameters(raw: Readonly<Record<string, unknown>>): WorkflowListRequest {
  const problems: string[] = [];
  const request: WorkflowListRequest = commonListParameters(
    raw,
    workflowListParameterNames,
    workflowStuckReasons,
    (cursor) => decodeWorkflowCursor(cursor) !== undefined,
    problems,
  );
  if (raw.status !== undefined) {
    if (typeof raw.status === 'string' && (workflowStatuses as readonly string[]).includes(raw.status)) request.status = raw.status as WorkflowStatus;
    else problems.push(`status must be one of ${workflowStatuses.join(', ')} (got ${quoted(raw.status)})`);
  }
  if (raw.workflow !== undefined) {
    if (isWorkflowName(raw.workflow)) request.workflowName = raw.workflow;
    else problems.push('workflow must be a workflow name: 1 to 128 characters, no control characters');
  }
  if (problems.length > 0) throw invalidInput(`list parameters: ${problems.join('; ')}`);
  return request;
}

// ── the cursor ──────────────────────────────────────────────────────────────

/** Version 2: an instance's position (its start instant and id), never taken for an operation's. */
const cursors = cursorCodec(2, 'wf', (id) => /^wf[0-9a-f]{64}$/.test(id));

/** Opaque to callers: the position of the last row of a page (start instant and id, neither of which changes). */
export function encodeWorkflowCursor(position: WorkflowIndexPosition): string {
  return cursors.encode({ atMs: position.startedAtMs, id: position.instanceId });
}

export function decodeWorkflowCursor(cursor: string): WorkflowIndexPosition | undefined {
  const position = cursors.decode(cursor);
  return position && { startedAtMs: position.atMs, instanceId: position.id };
}

// ── the page ────────────────────────────────────────────────────────────────

export interface WorkflowListContext {
  index: WorkflowIndexStore;
  nowMs: number;
  bounds: WorkflowStuckBounds;
  /** The principal whose instances are listed; undefined lists everyone's (an operator). */
  principalId: string | undefined;
}

/** One page for `request`, each row with its stuck reasons at `nowMs`. */
export async function listWorkflowInstances(context: WorkflowListContext, request: WorkflowListRequest): Promise<WorkflowListPage> {
  const query: WorkflowIndexQuery = { limit: request.limit };
  if (context.principalId !== undefined) query.principalId = context.principalId;
  if (request.status !== undefined) query.status = request.status;
  if (request.workflowName !== undefined) query.workflowName = request.workflowName;
  if (request.sinceMs !== undefined) query.sinceMs = request.sinceMs;
  if (request.untilMs !== undefined) query.untilMs = request.untilMs;
  if (request.stuck !== undefined) query.stuck = { nowMs: context.nowMs, bounds: context.bounds, ...(request.stuck === true ? {} : { reason: request.stuck }) };
  if (request.cursor !== undefined) query.after = decodeWorkflowCursor(request.cursor);
  const page = await context.index.list(query);
  return {
    instances: page.rows.map((row) => ({ ...row, stuck: workflowStuckReasonsOf(row, context.nowMs, context.bounds) })),
    nextCursor: page.next ? encodeWorkflowCursor(page.next) : null,
  };
}
