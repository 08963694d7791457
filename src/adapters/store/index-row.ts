/**
 * Reading a stored operations index row back (JetStream and EventStoreDB keep rows as JSON apart
 * from the logs). A row is trusted only in full: every field of OperationIndexRow present with
 * its type and, for the enumerations, one of its values, and nothing else. Anything short of that
 * is no row — never listed as a guess, never able to break the order an in-memory view keeps
 * (index-view.ts sorts by admittedAtMs and keys its lists by the enumerations).
 */
import { isOperationId } from '../../contract/ids.js';
import type { OperationIndexRow } from '../../events/operation-index.js';

const decoder = new TextDecoder('utf-8', { fatal: true });

const phases = new Set(['admitted', 'active', 'closed', 'settled']);
const outcomes = new Set(['success', 'partial', 'failed', 'indeterminate']);
const settlements = new Set(['pending', 'complete', 'indeterminate']);
const rowKeys = 18;

const isInstant = (v: unknown): v is number => Number.isSafeInteger(v);
const isInstantOrNull = (v: unknown): boolean => v === null || Number.isSafeInteger(v);
const isText = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/** The row `value` is, or undefined when it is not exactly one. */
export function indexRowOf(value: unknown): OperationIndexRow | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const r = value as Record<string, unknown>;
  if (Object.keys(r).length !== rowKeys) return undefined;
  return indexRowFieldsOf(r);
}

/**
 * The row an object that has exactly the row's fields and nothing else (built so, as a snapshot
 * builds its rows) is, or undefined when a field is not what the row's is: indexRowOf without
 * counting the fields again.
 */
export function indexRowFieldsOf(r: Record<string, unknown>): OperationIndexRow | undefined {
  const rejection = r.lastRejection;
  const ok =
    typeof r.operationId === 'string' &&
    isOperationId(r.operationId) &&
    isText(r.principalId) &&
    isText(r.contractId) &&
    isText(r.contractVersion) &&
    isText(r.interaction) &&
    typeof r.phase === 'string' &&
    phases.has(r.phase) &&
    (r.outcome === null || (typeof r.outcome === 'string' && outcomes.has(r.outcome))) &&
    typeof r.settlement === 'string' &&
    settlements.has(r.settlement) &&
    isInstant(r.admittedAtMs) &&
    isInstantOrNull(r.decidedAtMs) &&
    isInstantOrNull(r.settledAtMs) &&
    isInstant(r.deadlineMs) &&
    isInstantOrNull(r.nextDueMs) &&
    Number.isSafeInteger(r.openBranches) &&
    (r.openBranches as number) >= 0 &&
    (rejection === null ||
      (typeof rejection === 'object' &&
        rejection !== null &&
        Object.keys(rejection).length === 2 &&
        isText((rejection as Record<string, unknown>).reason) &&
        isInstant((rejection as Record<string, unknown>).atMs))) &&
    isInstantOrNull(r.leaseExpiresAtMs) &&
    isInstantOrNull(r.outboxPendingSinceMs) &&
    typeof r.revision === 'string' &&
    /^(0|[1-9][0-9]{0,19})$/.test(r.revision);
  return ok ? (r as unknown as OperationIndexRow) : undefined;
}

/** The row stored as these bytes (UTF-8 JSON), or undefined for bytes that are not one. */
export function parseIndexRow(data: Uint8Array): OperationIndexRow | undefined {
  try {
    return indexRowOf(JSON.parse(decoder.decode(data)));
  } catch {
    return undefined;
  }
}

/**
 * The row stored on one row subject (`<subjectPrefix><operationId>`): the operation the subject
 * names, and its row only when the stored row names that same operation (a removal marker, a
 * damaged row or a row naming another operation is none).
 */
export function indexRowOnSubject(subjectPrefix: string, subject: string, data: Uint8Array): { operationId: string; row: OperationIndexRow | undefined } {
  const operationId = subject.slice(subjectPrefix.length);
  const row = parseIndexRow(data);
  return { operationId, row: row?.operationId === operationId ? row : undefined };
}
