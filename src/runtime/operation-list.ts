/**
 * Listing operations from the operations index (GET /contract-invocations, the NATS `list`
 * command, `convoke list`): one parser of the list parameters for every facade, the opaque
 * cursor, visibility (a caller sees its own operations; an operator principal sees all) and the
 * page as it is answered, each row with the stuck reasons it has now.
 */
import { invalidInput } from '../contract/errors.js';
import { isOperationId, tokenPattern } from '../contract/ids.js';
import {
  stuckReasons,
  stuckReasonsOf,
  type IndexPosition,
  type IndexQuery,
  type OperationIndexRow,
  type StuckBounds,
  type StuckReason,
} from '../events/operation-index.js';
import type { DecisionOutcome, OperationPhase, SettlementStatus } from '../events/types.js';
import type { OperationIndexStore } from '../adapters/store/types.js';
import { quoted } from '../contract/validation.js';
import { commonListParameters, cursorCodec, type CommonListRequest } from './list-parameters.js';

export { instantOf, integerOf, listLimitDefault } from './list-parameters.js';

const phases: readonly OperationPhase[] = ['admitted', 'active', 'closed', 'settled'];
const outcomes: readonly (DecisionOutcome | 'open')[] = ['open', 'success', 'partial', 'failed', 'indeterminate'];
const settlements: readonly SettlementStatus[] = ['pending', 'complete', 'indeterminate'];

/**
 * What a caller asks for, already checked: the index query's filters, with visibility decided by
 * the caller's principal (not asked for), an opaque cursor for the position, and stuck work named
 * without the instant and bounds the coordinator supplies.
 */
export interface ListRequest extends Omit<IndexQuery, 'principalId' | 'stuck' | 'after'>, CommonListRequest<StuckReason> {}

export type ListedOperation = OperationIndexRow & { stuck: StuckReason[] };

export interface ListPage {
  operations: ListedOperation[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** The parameters every facade accepts; their values may be query-string text or JSON. */
export const listParameterNames = ['phase', 'outcome', 'settlement', 'interaction', 'since', 'until', 'limit', 'cursor', 'stuck'] as const;

/**
 * Checks list parameters (query-string text or JSON values) and answers the request, or throws
 * invalid-input naming every problem at once.
 */
export function parseListParameters(raw: Readonly<Record<string, unknown>>): ListRequest {
  const problems: string[] = [];
  const request: ListRequest = commonListParameters(raw, listParameterNames, stuckReasons, (cursor) => decodeCursor(cursor) !== undefined, problems);
  const oneOf = <T extends string>(name: string, allowed: readonly T[]): T | undefined => {
    const value = raw[name];
    if (value === undefined) return undefined;
    if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
    problems.push(`${name} must be one of ${allowed.join(', ')} (got ${quoted(value)})`);
    return undefined;
  };
  const assign = <K extends keyof ListRequest>(key: K, value: ListRequest[K] | undefined) => {
    if (value !== undefined) request[key] = value;
  };
  assign('phase', oneOf('phase', phases));
  assign('outcome', oneOf('outcome', outcomes));
  assign('settlement', oneOf('settlement', settlements));
  if (raw.interaction !== undefined) {
    if (typeof raw.interaction === 'string' && tokenPattern.test(raw.interaction)) request.interaction = raw.interaction;
    else problems.push(`interaction must be an interaction id (${tokenPattern.source})`);
  }
  if (problems.length > 0) throw invalidInput(`list parameters: ${problems.join('; ')}`);
  return request;
}

// ── the cursor ──────────────────────────────────────────────────────────────

/** Version 1: an operation's position (its admission instant and id). */
const cursors = cursorCodec(1, 'op', isOperationId);

/** Opaque to callers: the position of the last row of a page (admission instant and id, neither of which changes). */
export function encodeCursor(position: IndexPosition): string {
  return cursors.encode({ atMs: position.admittedAtMs, id: position.operationId });
}

export function decodeCursor(cursor: string): IndexPosition | undefined {
  const position = cursors.decode(cursor);
  return position && { admittedAtMs: position.atMs, operationId: position.id };
}

// ── the page ────────────────────────────────────────────────────────────────

export interface ListContext {
  index: OperationIndexStore;
  nowMs: number;
  bounds: StuckBounds;
  /** The principal whose operations are listed; undefined lists everyone's (an operator). */
  principalId: string | undefined;
}

/** One page for `request`, each row with its stuck reasons at `nowMs`. */
export async function listOperations(context: ListContext, request: ListRequest): Promise<ListPage> {
  const query: IndexQuery = { limit: request.limit };
  if (context.principalId !== undefined) query.principalId = context.principalId;
  if (request.phase !== undefined) query.phase = request.phase;
  if (request.outcome !== undefined) query.outcome = request.outcome;
  if (request.settlement !== undefined) query.settlement = request.settlement;
  if (request.interaction !== undefined) query.interaction = request.interaction;
  if (request.sinceMs !== undefined) query.sinceMs = request.sinceMs;
  if (request.untilMs !== undefined) query.untilMs = request.untilMs;
  if (request.stuck !== undefined) query.stuck = { nowMs: context.nowMs, bounds: context.bounds, ...(request.stuck === true ? {} : { reason: request.stuck }) };
  if (request.cursor !== undefined) query.after = decodeCursor(request.cursor);
  const page = await context.index.list(query);
  return {
    operations: page.rows.map((row) => ({ ...row, stuck: stuckReasonsOf(row, context.nowMs, context.bounds) })),
    nextCursor: page.next ? encodeCursor(page.next) : null,
  };
}
