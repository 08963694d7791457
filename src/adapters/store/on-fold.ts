/**
 * Shared by the guard-on-fold adapters (jetstream, eventstoredb): the server stamps each stored
 * transition; the fold applies it only if that stamp passes its guard and does not go back in
 * time (guard.ts `appliesOnFold`). An append must answer exactly what the fold will decide, so
 * the adapter needs the committedAtMs of the last *applied* transition before the one it wrote.
 * FoldTracker remembers that per operation (keyed by the revision it describes) so the common
 * single-writer path needs no re-read; any mismatch falls back to folding the stored prefix.
 */
import { BoundedMap } from '../../contract/bounded-map.js';
import type { StoredTransition, TimeGuard, Transition } from '../../events/types.js';
import { bodyBytes, checkTransitionShape, encodeTransition, sizeFailure } from './codec.js';
import { appliesOnFold, checkGuardShape, guardAdmits, guardFailure, rollbackFailure } from '../../events/guard.js';
import type { AppendOutcome, ReadOutcome, RecordAfter, StoreFailure } from './types.js';
import { limits } from '../../contract/limits.js';

/** Before any applied transition, every timestamp is "not going back". */
export const noAppliedYetMs = Number.MIN_SAFE_INTEGER;

export interface FoldPoint {
  /** The adapter's numeric revision this point describes (the stream position after it). */
  revision: number;
  /** committedAtMs of the last applied transition at or before `revision`. */
  lastAppliedAtMs: number;
  /** Whether any transition up to `revision` applied (a stream of only void ones is "absent"). */
  anyApplied: boolean;
  /** Transitions stored up to `revision`, void ones included: the store's transitionsMax counts these. */
  count: number;
}

/** Folds stored transitions (in stream order) into the point after the last of them. */
export function foldPoint(transitions: readonly StoredTransition[], revision: number): FoldPoint {
  let lastAppliedAtMs = noAppliedYetMs;
  let anyApplied = false;
  for (const stored of transitions) {
    if (!appliesOnFold(stored, lastAppliedAtMs)) continue;
    lastAppliedAtMs = stored.committedAtMs;
    anyApplied = true;
  }
  return { revision, lastAppliedAtMs, anyApplied, count: transitions.length };
}

/**
 * The answer for a transition the server stored at `revision` with `committedAtMs`, given the fold
 * point just before it. Rollback is checked first, as the in-write stores do: when both fail the
 * fold's decision (void) is the same and `unavailable` is the more truthful reason.
 */
export function answerOnFold(guard: TimeGuard, revision: string, committedAtMs: number, before: FoldPoint): AppendOutcome {
  if (committedAtMs < before.lastAppliedAtMs) return rollbackFailure(committedAtMs, before.lastAppliedAtMs);
  if (!guardAdmits(guard, committedAtMs)) return guardFailure(guard, committedAtMs);
  return { kind: 'ok', revision, committedAtMs };
}

export function advance(before: FoldPoint, revision: number, guard: TimeGuard, committedAtMs: number): FoldPoint {
  const applied = committedAtMs >= before.lastAppliedAtMs && guardAdmits(guard, committedAtMs);
  const count = before.count + 1;
  return applied ? { revision, lastAppliedAtMs: committedAtMs, anyApplied: true, count } : { ...before, revision, count };
}

/** A bounded per-operation memo of fold points (oldest entries dropped first). */
export class FoldTracker {
  private readonly points: BoundedMap<string, FoldPoint>;

  constructor(entriesMax = 10_000) {
    this.points = new BoundedMap(entriesMax);
  }

  /** The point at exactly `revision`, if this client last saw the operation there. */
  at(operationId: string, revision: number): FoldPoint | undefined {
    const point = this.points.get(operationId);
    return point?.revision === revision ? point : undefined;
  }

  remember(operationId: string, point: FoldPoint): void {
    const current = this.points.get(operationId);
    // Never move the memo backwards: a slow reader must not overwrite a newer append's point.
    if (current && current.revision > point.revision) return;
    this.points.set(operationId, point);
  }

  forget(operationId: string): void {
    this.points.delete(operationId);
  }
}

// ── the parts of a guard-on-fold adapter that do not depend on its backend ──────────────────

/** What the backend's log says about one operation. `lastRevision` is the backend's own position. */
export type LogState = { kind: 'missing' } | { kind: 'tombstoned' } | { kind: 'live'; lastRevision: number; transitions: StoredTransition[] } | StoreFailure;

/** One attempted write, carried through CAS retries. */
export interface PendingWrite {
  transition: Transition;
  body: string;
  mode: 'create' | 'append';
  /** CAS retries so far (a create over a log holding only void transitions retries). */
  attempt: number;
  /** The committing side's record after the transition, for the index row (index-states.ts). */
  after?: RecordAfter;
}

export const expiredOf = (operationId: string) => ({ kind: 'expired' as const, description: `operation ${operationId} is tombstoned` });
export const notFoundOf = (operationId: string) => ({ kind: 'not-found' as const, description: `operation ${operationId} does not exist` });
export const closedFailure: { kind: 'unavailable'; description: string } = { kind: 'unavailable', description: 'store is closed' };

/** The encoded body of a transition this adapter may write, or why nothing may be written. */
export function precheckWrite(closed: boolean, transition: Transition, transitionBytesMax: number): string | StoreFailure {
  if (closed) return closedFailure;
  const shape = checkTransitionShape(transition) ?? checkGuardShape(transition.timeGuard);
  if (shape) return shape;
  const body = encodeTransition(transition);
  const bytes = bodyBytes(body);
  if (bytes > transitionBytesMax) return sizeFailure(bytes, transitionBytesMax);
  return body;
}

/** A read's answer from the log's state; a live log's fold point is remembered. */
export function readAnswer(operationId: string, state: LogState, fold: FoldTracker): ReadOutcome {
  switch (state.kind) {
    case 'missing':
      return notFoundOf(operationId);
    case 'tombstoned':
      return expiredOf(operationId);
    case 'live':
      fold.remember(operationId, foldPoint(state.transitions, state.lastRevision));
      return { kind: 'ok', revision: String(state.lastRevision), transitions: state.transitions };
    default:
      return { kind: 'unavailable', description: state.description };
  }
}

/**
 * A CAS rejection (or an unusable revision) wrote nothing; says why, precisely, from the log's
 * state. A log holding only void transitions (an expired admission) is absent to the fold, so a
 * create may write after them, still as a CAS: the answer is then where to retry.
 */
export function classifyRejection(
  operationId: string,
  expectedRevision: string,
  write: PendingWrite,
  state: LogState,
  fold: FoldTracker,
): AppendOutcome | { retryAt: number; point: FoldPoint } {
  switch (state.kind) {
    case 'tombstoned':
      return expiredOf(operationId);
    case 'missing':
      return write.mode === 'append'
        ? notFoundOf(operationId)
        : { kind: 'unavailable', description: `create of ${operationId} was refused but its log reads empty` };
    case 'live':
      break;
    default:
      return { kind: 'unavailable', description: state.description };
  }
  const point = foldPoint(state.transitions, state.lastRevision);
  fold.remember(operationId, point);
  if (write.mode === 'create' && !point.anyApplied && write.attempt < limits.storeCasAttemptsMax) return { retryAt: state.lastRevision, point };
  return write.mode === 'create'
    ? { kind: 'conflict', description: `operation ${operationId} already exists` }
    : { kind: 'conflict', description: `expected revision ${expectedRevision}, stream is at ${state.lastRevision}` };
}

/** The answer for a write stored at `revision` with the server's `committedAtMs`; the fold point moves on. */
export function answerStoredAt(
  fold: FoldTracker,
  operationId: string,
  revision: number,
  committedAtMs: number,
  before: FoldPoint,
  guard: TimeGuard,
): AppendOutcome {
  const outcome = answerOnFold(guard, String(revision), committedAtMs, before);
  fold.remember(operationId, advance(before, revision, guard, committedAtMs));
  return outcome;
}
