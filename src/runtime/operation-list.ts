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
import { limits } from '../contract/limits.js';

export const listLimitDefault = 50;

const phases: readonly OperationPhase[] = ['admitted', 'active', 'closed', 'settled'];
const outcomes: readonly (DecisionOutcome | 'open')[] = ['open', 'success', 'partial', 'failed', 'indeterminate'];
const settlements: readonly SettlementStatus[] = ['pending', 'complete', 'indeterminate'];

/**
 * What a caller asks for, already checked: the index query's filters, with visibility decided by
 * the caller's principal (not asked for), an opaque cursor for the position, and stuck work named
 * without the instant and bounds the coordinator supplies.
 */
export interface ListRequest extends Omit<IndexQuery, 'principalId' | 'stuck' | 'after'> {
  cursor?: string;
  /** true: stuck for any reason; a reason: stuck for that one. */
  stuck?: true | StuckReason;
}

export type ListedOperation = OperationIndexRow & { stuck: StuckReason[] };

export interface ListPage {
  operations: ListedOperation[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** The parameters every facade accepts; their values may be query-string text or JSON. */
export const listParameterNames = ['phase', 'outcome', 'settlement', 'interaction', 'since', 'until', 'limit', 'cursor', 'stuck'] as const;

type Raw = Readonly<Record<string, unknown>>;

/**
 * Checks list parameters (query-string text or JSON values) and answers the request, or throws
 * invalid-input naming every problem at once.
 */
export function parseListParameters(raw: Raw): ListRequest {
  const problems: string[] = [];
  for (const name of Object.keys(raw))
    if (!(listParameterNames as readonly string[]).includes(name)) problems.push(`unknown parameter "${name}" (known: ${listParameterNames.join(', ')})`);
  const request: ListRequest = { limit: listLimitDefault };
  const oneOf = <T extends string>(name: string, allowed: readonly T[]): T | undefined => {
    const value = raw[name];
    if (value === undefined) return undefined;
    if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
    problems.push(`${name} must be one of ${allowed.join(', ')} (got ${JSON.stringify(value)})`);
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
  assign('sinceMs', instantOf('since', raw.since, problems));
  assign('untilMs', instantOf('until', raw.until, problems));
  if (request.sinceMs !== undefined && request.untilMs !== undefined && request.sinceMs >= request.untilMs) problems.push('since must be before until');
  const limit = integerOf(raw.limit);
  if (raw.limit !== undefined && (limit === undefined || limit < 1 || limit > limits.listLimitMax))
    problems.push(`limit must be an integer from 1 to ${limits.listLimitMax} (got ${JSON.stringify(raw.limit)})`);
  else if (limit !== undefined) request.limit = limit;
  if (raw.cursor !== undefined) {
    if (typeof raw.cursor === 'string' && decodeCursor(raw.cursor) !== undefined) request.cursor = raw.cursor;
    else problems.push('cursor is not one a list page returned (pass nextCursor unchanged)');
  }
  assign('stuck', stuckOf(raw.stuck, problems));
  if (problems.length > 0) throw invalidInput(`list parameters: ${problems.join('; ')}`);
  return request;
}

export function integerOf(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value === 'string' && /^-?(0|[1-9][0-9]{0,15})$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : undefined;
  }
  return undefined;
}

const rfc3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;

/** An instant (a list parameter): milliseconds since the epoch (integer or digits) or an RFC 3339 timestamp with its offset. */
export function instantOf(name: string, value: unknown, problems: string[]): number | undefined {
  if (value === undefined) return undefined;
  const ms = integerOf(value) ?? (typeof value === 'string' && rfc3339.test(value) ? Date.parse(value) : undefined);
  if (ms === undefined || !Number.isSafeInteger(ms)) {
    problems.push(`${name} must be milliseconds since the epoch or an RFC 3339 timestamp such as 2026-01-31T12:00:00Z (got ${JSON.stringify(value)})`);
    return undefined;
  }
  return ms;
}

function stuckOf(value: unknown, problems: string[]): true | StuckReason | undefined {
  if (value === undefined || value === false || value === 'false') return undefined;
  if (value === true || value === 'true') return true;
  if (typeof value === 'string' && (stuckReasons as readonly string[]).includes(value)) return value as StuckReason;
  problems.push(`stuck must be true, false or a reason (${stuckReasons.join(', ')}) (got ${JSON.stringify(value)})`);
  return undefined;
}

// ── the cursor ──────────────────────────────────────────────────────────────

/** Cursor bytes: a version, the admission instant (a signed 64-bit integer), the operation id's 32 bytes. */
const cursorVersion = 1;
const cursorBytes = 1 + 8 + 32;

/** Opaque to callers: the position of the last row of a page (admission instant and id, neither of which changes). */
export function encodeCursor(position: IndexPosition): string {
  const bytes = Buffer.alloc(cursorBytes);
  bytes.writeUInt8(cursorVersion, 0);
  bytes.writeBigInt64BE(BigInt(position.admittedAtMs), 1);
  Buffer.from(position.operationId.slice(2), 'hex').copy(bytes, 9);
  return bytes.toString('base64url');
}

export function decodeCursor(cursor: string): IndexPosition | undefined {
  if (!/^[A-Za-z0-9_-]{55}$/.test(cursor)) return undefined;
  const bytes = Buffer.from(cursor, 'base64url');
  if (bytes.length !== cursorBytes || bytes.readUInt8(0) !== cursorVersion) return undefined;
  const admittedAtMs = Number(bytes.readBigInt64BE(1));
  const operationId = `op${bytes.subarray(9).toString('hex')}`;
  // Re-encoding must give the same text: no second spelling of one position.
  if (!Number.isSafeInteger(admittedAtMs) || !isOperationId(operationId)) return undefined;
  const position = { admittedAtMs, operationId };
  return encodeCursor(position) === cursor ? position : undefined;
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
