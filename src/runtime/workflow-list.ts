/**
 * Listing workflow instances from the workflow instances index (GET /workflow-instances, the NATS
 * `workflow-list` command, `convoke workflow list`): one parser of the list parameters for every
 * facade, the opaque cursor, visibility (a caller sees its own instances; an operator principal
 * sees all — the rule operations follow, operation-list.ts) and the page as it is answered, each
 * row with the stuck reasons it has now.
 */
import { invalidInput } from '../contract/errors.js';
import { limits } from '../contract/limits.js';
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
import { instantOf, integerOf, listLimitDefault } from './operation-list.js';

/** What a caller asks for, already checked; visibility is decided by the caller's principal. */
export interface WorkflowListRequest extends Omit<WorkflowIndexQuery, 'principalId' | 'stuck' | 'after'> {
  cursor?: string;
  /** true: stuck for any reason; a reason: stuck for that one. */
  stuck?: true | WorkflowStuckReason;
}

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
  for (const name of Object.keys(raw))
    if (!(workflowListParameterNames as readonly string[]).includes(name))
      problems.push(`unknown parameter "${name}" (known: ${workflowListParameterNames.join(', ')})`);
  const request: WorkflowListRequest = { limit: listLimitDefault };
  if (raw.status !== undefined) {
    if (typeof raw.status === 'string' && (workflowStatuses as readonly string[]).includes(raw.status)) request.status = raw.status as WorkflowStatus;
    else problems.push(`status must be one of ${workflowStatuses.join(', ')} (got ${JSON.stringify(raw.status)})`);
  }
  if (raw.workflow !== undefined) {
    if (isWorkflowName(raw.workflow)) request.workflowName = raw.workflow;
    else problems.push('workflow must be a workflow name: 1 to 128 characters, no control characters');
  }
  const sinceMs = instantOf('since', raw.since, problems);
  const untilMs = instantOf('until', raw.until, problems);
  if (sinceMs !== undefined) request.sinceMs = sinceMs;
  if (untilMs !== undefined) request.untilMs = untilMs;
  if (sinceMs !== undefined && untilMs !== undefined && sinceMs >= untilMs) problems.push('since must be before until');
  const limit = integerOf(raw.limit);
  if (raw.limit !== undefined && (limit === undefined || limit < 1 || limit > limits.listLimitMax))
    problems.push(`limit must be an integer from 1 to ${limits.listLimitMax} (got ${JSON.stringify(raw.limit)})`);
  else if (limit !== undefined) request.limit = limit;
  if (raw.cursor !== undefined) {
    if (typeof raw.cursor === 'string' && decodeWorkflowCursor(raw.cursor) !== undefined) request.cursor = raw.cursor;
    else problems.push('cursor is not one a list page returned (pass nextCursor unchanged)');
  }
  const stuck = raw.stuck;
  if (stuck === true || stuck === 'true') request.stuck = true;
  else if (typeof stuck === 'string' && (workflowStuckReasons as readonly string[]).includes(stuck)) request.stuck = stuck as WorkflowStuckReason;
  else if (stuck !== undefined && stuck !== false && stuck !== 'false')
    problems.push(`stuck must be true, false or a reason (${workflowStuckReasons.join(', ')}) (got ${JSON.stringify(stuck)})`);
  if (problems.length > 0) throw invalidInput(`list parameters: ${problems.join('; ')}`);
  return request;
}

// ── the cursor ──────────────────────────────────────────────────────────────

/** Cursor bytes: a version (2: an instance's position, never taken for an operation's), the start instant, the instance id's 32 bytes. */
const cursorVersion = 2;
const cursorBytes = 1 + 8 + 32;

/** Opaque to callers: the position of the last row of a page (start instant and id, neither of which changes). */
export function encodeWorkflowCursor(position: WorkflowIndexPosition): string {
  const bytes = Buffer.alloc(cursorBytes);
  bytes.writeUInt8(cursorVersion, 0);
  bytes.writeBigInt64BE(BigInt(position.startedAtMs), 1);
  Buffer.from(position.instanceId.slice(2), 'hex').copy(bytes, 9);
  return bytes.toString('base64url');
}

export function decodeWorkflowCursor(cursor: string): WorkflowIndexPosition | undefined {
  if (!/^[A-Za-z0-9_-]{55}$/.test(cursor)) return undefined;
  const bytes = Buffer.from(cursor, 'base64url');
  if (bytes.length !== cursorBytes || bytes.readUInt8(0) !== cursorVersion) return undefined;
  const startedAtMs = Number(bytes.readBigInt64BE(1));
  const instanceId = `wf${bytes.subarray(9).toString('hex')}`;
  if (!Number.isSafeInteger(startedAtMs)) return undefined;
  const position = { startedAtMs, instanceId };
  // Re-encoding must give the same text: no second spelling of one position.
  return encodeWorkflowCursor(position) === cursor ? position : undefined;
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
