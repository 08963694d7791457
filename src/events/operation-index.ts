/**
 * The operations index: one row per operation, the shape every store keeps and every list query
 * answers with. The row is derived from the operation's log by one pure function
 * (src/projections/operation-index.ts); this module holds only the vocabulary the projection, the
 * stores and the facades share — the row, the query, a page, the stuck reasons — and the pure
 * predicates over them, so that every store filters exactly alike.
 */
import type { DecisionOutcome, OperationPhase, RejectionReason, SettlementStatus } from './types.js';

export interface OperationIndexRow {
  operationId: string;
  principalId: string;
  contractId: string;
  contractVersion: string;
  interaction: string;
  phase: OperationPhase;
  /** null while the decision is open. */
  outcome: DecisionOutcome | null;
  settlement: SettlementStatus;
  admittedAtMs: number;
  decidedAtMs: number | null;
  settledAtMs: number | null;
  deadlineMs: number;
  /** The next instant a timer of the operation falls due (deadline, lease, retry, cancel timeout); null when none. */
  nextDueMs: number | null;
  /** Branches whose status is pending (not terminal). */
  openBranches: number;
  /** The last result-rejected event of the log, with the store instant of its transition. */
  lastRejection: { reason: RejectionReason; atMs: number } | null;
  /** Undecided: the earliest lease end among branches whose attempt holds a claim; else null. */
  leaseExpiresAtMs: number | null;
  /** The earliest instant since which a request or cancel publication has waited for its receipt; null when none waits. */
  outboxPendingSinceMs: number | null;
  /** The log revision the row was derived at (void transitions included). */
  revision: string;
}

export const stuckReasons = ['open-past-deadline', 'lease-expired', 'outbox-pending', 'settlement-indeterminate'] as const;
export type StuckReason = (typeof stuckReasons)[number];

/** How long past each instant an operation may stay before it counts as stuck (docs/operations.md "Stuck work"). */
export interface StuckBounds {
  /** Undecided this long after its deadline. */
  deadlineGraceMs: number;
  /** A claimed attempt's lease ended this long ago and no claim-ended was recorded. */
  leaseGraceMs: number;
  /** A publication has waited this long for its delivery receipt. */
  outboxPendingMs: number;
}

export const stuckBoundsDefault: StuckBounds = { deadlineGraceMs: 30_000, leaseGraceMs: 30_000, outboxPendingMs: 60_000 };

/** Why the row is stuck at `nowMs`, in the order of stuckReasons; empty when it is not. */
export function stuckReasonsOf(row: OperationIndexRow, nowMs: number, bounds: StuckBounds): StuckReason[] {
  const reasons: StuckReason[] = [];
  if (row.outcome === null && row.deadlineMs + bounds.deadlineGraceMs < nowMs) reasons.push('open-past-deadline');
  if (row.leaseExpiresAtMs !== null && row.leaseExpiresAtMs + bounds.leaseGraceMs < nowMs) reasons.push('lease-expired');
  if (row.outboxPendingSinceMs !== null && row.outboxPendingSinceMs + bounds.outboxPendingMs < nowMs) reasons.push('outbox-pending');
  if (row.settlement === 'indeterminate') reasons.push('settlement-indeterminate');
  return reasons;
}

/** A list query. Every filter is optional; rows come newest admission first. */
export interface IndexQuery {
  /** Only this principal's operations; undefined lists every principal's (operators). */
  principalId?: string;
  phase?: OperationPhase;
  /** `open` matches undecided operations. */
  outcome?: DecisionOutcome | 'open';
  settlement?: SettlementStatus;
  interaction?: string;
  /** Admitted at or after (ms). */
  sinceMs?: number;
  /** Admitted strictly before (ms). */
  untilMs?: number;
  /** Only rows stuck at `nowMs` for any reason (or the one named). */
  stuck?: { nowMs: number; bounds: StuckBounds; reason?: StuckReason };
  limit: number;
  /** Continue after this position (from a previous page's nextCursor). */
  after?: IndexPosition;
}

/** A row's place in the order: admittedAtMs descending, then operationId descending. Both never change. */
export interface IndexPosition {
  admittedAtMs: number;
  operationId: string;
}

export interface IndexPage {
  rows: OperationIndexRow[];
  /** Where the next page starts; undefined on the last page. */
  next?: IndexPosition;
}

export type StuckCounts = Record<StuckReason, number>;

/** Whether `row` comes after `position` in list order (strictly). */
export function isAfter(row: IndexPosition, position: IndexPosition): boolean {
  return row.admittedAtMs < position.admittedAtMs || (row.admittedAtMs === position.admittedAtMs && row.operationId < position.operationId);
}

/** List order: newest admission first, ties by operationId descending. */
export function compareListOrder(a: IndexPosition, b: IndexPosition): number {
  if (a.admittedAtMs !== b.admittedAtMs) return b.admittedAtMs - a.admittedAtMs;
  return a.operationId < b.operationId ? 1 : a.operationId > b.operationId ? -1 : 0;
}

/** Whether `row` passes every filter of `query` (the position excepted). */
export function matchesQuery(row: OperationIndexRow, query: IndexQuery): boolean {
  if (query.principalId !== undefined && row.principalId !== query.principalId) return false;
  if (query.phase !== undefined && row.phase !== query.phase) return false;
  if (query.outcome !== undefined && (query.outcome === 'open' ? row.outcome !== null : row.outcome !== query.outcome)) return false;
  if (query.settlement !== undefined && row.settlement !== query.settlement) return false;
  if (query.interaction !== undefined && row.interaction !== query.interaction) return false;
  if (query.sinceMs !== undefined && row.admittedAtMs < query.sinceMs) return false;
  if (query.untilMs !== undefined && row.admittedAtMs >= query.untilMs) return false;
  if (query.stuck) {
    const reasons = stuckReasonsOf(row, query.stuck.nowMs, query.stuck.bounds);
    if (query.stuck.reason === undefined ? reasons.length === 0 : !reasons.includes(query.stuck.reason)) return false;
  }
  return true;
}

/** One page of `rows` (any order) for `query`: what a store without a secondary index answers. */
export function pageOf(rows: Iterable<OperationIndexRow>, query: IndexQuery): IndexPage {
  const matching: OperationIndexRow[] = [];
  for (const row of rows) if (matchesQuery(row, query) && (query.after === undefined || isAfter(row, query.after))) matching.push(row);
  matching.sort(compareListOrder);
  const page = matching.slice(0, query.limit);
  const last = page.at(-1);
  return matching.length > query.limit && last ? { rows: page, next: { admittedAtMs: last.admittedAtMs, operationId: last.operationId } } : { rows: page };
}

/** Counts per stuck reason over `rows` (a row stuck for two reasons counts under both). */
export function countStuck(rows: Iterable<OperationIndexRow>, nowMs: number, bounds: StuckBounds): StuckCounts {
  const counts: StuckCounts = { 'open-past-deadline': 0, 'lease-expired': 0, 'outbox-pending': 0, 'settlement-indeterminate': 0 };
  for (const row of rows) for (const reason of stuckReasonsOf(row, nowMs, bounds)) counts[reason]++;
  return counts;
}
