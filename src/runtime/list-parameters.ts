/**
 * What every list (operations, operation-list.ts; workflow instances, workflow-list.ts) shares:
 * the checks of the parameters both take (since, until, limit, cursor, stuck, and no unknown
 * name), and the opaque cursor, the position of a page's last row (an instant and an id, neither
 * of which changes) in a versioned binary form. Each list adds its own filters and its row type.
 */
import { limits } from '../contract/limits.js';
import { quoted } from '../contract/validation.js';

export const listLimitDefault = 50;

/** What the shared parameters give a request, already checked. */
export interface CommonListRequest<Reason extends string> {
  limit: number;
  sinceMs?: number;
  untilMs?: number;
  cursor?: string;
  /** true: stuck for any reason; a reason: stuck for that one. */
  stuck?: true | Reason;
}

type Raw = Readonly<Record<string, unknown>>;

/**
 * Checks the shared parameters of `raw` and that it names only `known` ones, adding what is wrong
 * to `problems`. `validCursor` says whether a cursor is one this list's pages return.
 */
export function commonListParameters<Reason extends string>(
  raw: Raw,
  known: readonly string[],
  stuckReasons: readonly Reason[],
  validCursor: (cursor: string) => boolean,
  problems: string[],
): CommonListRequest<Reason> {
  const unknown = Object.keys(raw).filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    const named = unknown.slice(0, unknownNamedMax).map(quoted).join(', ');
    const more = unknown.length > unknownNamedMax ? ` and ${unknown.length - unknownNamedMax} more` : '';
    problems.push(`unknown parameter${unknown.length > 1 ? 's' : ''} ${named}${more} (known: ${known.join(', ')})`);
  }
  const request: CommonListRequest<Reason> = { limit: listLimitDefault };
  const sinceMs = instantOf('since', raw.since, problems);
  const untilMs = instantOf('until', raw.until, problems);
  if (sinceMs !== undefined) request.sinceMs = sinceMs;
  if (untilMs !== undefined) request.untilMs = untilMs;
  if (sinceMs !== undefined && untilMs !== undefined && sinceMs >= untilMs) problems.push('since must be before until');
  const limit = integerOf(raw.limit);
  if (raw.limit !== undefined && (limit === undefined || limit < 1 || limit > limits.listLimitMax))
    problems.push(`limit must be an integer from 1 to ${limits.listLimitMax} (got ${quoted(raw.limit)})`);
  else if (limit !== undefined) request.limit = limit;
  if (raw.cursor !== undefined) {
    if (typeof raw.cursor === 'string' && validCursor(raw.cursor)) request.cursor = raw.cursor;
    else problems.push('cursor is not one a list page returned (pass nextCursor unchanged)');
  }
  const stuck = stuckOf(raw.stuck, stuckReasons, problems);
  if (stuck !== undefined) request.stuck = stuck;
  return request;
}

/** The unknown parameters a refusal names (the rest are counted): a caller decides how many it sends. */
const unknownNamedMax = 5;
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
    problems.push(`${name} must be milliseconds since the epoch or an RFC 3339 timestamp such as 2026-01-31T12:00:00Z (got ${quoted(value)})`);
    return undefined;
  }
  return ms;
}

function stuckOf<Reason extends string>(value: unknown, reasons: readonly Reason[], problems: string[]): true | Reason | undefined {
  if (value === undefined || value === false || value === 'false') return undefined;
  if (value === true || value === 'true') return true;
  if (typeof value === 'string' && (reasons as readonly string[]).includes(value)) return value as Reason;
  problems.push(`stuck must be true, false or a reason (${reasons.join(', ')}) (got ${quoted(value)})`);
  return undefined;
}

// ── the cursor ──────────────────────────────────────────────────────────────

/** A row's position: an instant and a 32-byte id written as `<prefix><64 hex>`. */
export interface CursorPosition {
  atMs: number;
  id: string;
}

/** Cursor bytes: a version, the instant (a signed 64-bit integer), the id's 32 bytes. */
const cursorBytes = 1 + 8 + 32;

/**
 * The cursor codec of one list: its own version byte (so one list's cursor is never taken for
 * another's) and id prefix. Decoding answers undefined for anything an encode did not give:
 * re-encoding must give the same text, so no position has a second spelling.
 */
export function cursorCodec(version: number, idPrefix: string, isId: (id: string) => boolean) {
  const encode = (position: CursorPosition): string => {
    const bytes = Buffer.alloc(cursorBytes);
    bytes.writeUInt8(version, 0);
    bytes.writeBigInt64BE(BigInt(position.atMs), 1);
    Buffer.from(position.id.slice(idPrefix.length), 'hex').copy(bytes, 9);
    return bytes.toString('base64url');
  };
  const decode = (cursor: string): CursorPosition | undefined => {
    if (!/^[A-Za-z0-9_-]{55}$/.test(cursor)) return undefined;
    const bytes = Buffer.from(cursor, 'base64url');
    if (bytes.length !== cursorBytes || bytes.readUInt8(0) !== version) return undefined;
    const position = { atMs: Number(bytes.readBigInt64BE(1)), id: `${idPrefix}${bytes.subarray(9).toString('hex')}` };
    if (!Number.isSafeInteger(position.atMs) || !isId(position.id)) return undefined;
    return encode(position) === cursor ? position : undefined;
  };
  return { encode, decode };
}
