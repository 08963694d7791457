/**
 * Shared by the guard-on-fold adapters (jetstream, eventstoredb): the server stamps each stored
 * transition; the fold applies it only if that stamp passes its guard and does not go back in
 * time (guard.ts `appliesOnFold`). An append must answer exactly what the fold will decide, so
 * the adapter needs the committedAtMs of the last *applied* transition before the one it wrote.
 * FoldTracker remembers that per operation (keyed by the revision it describes) so the common
 * single-writer path needs no re-read; any mismatch falls back to folding the stored prefix.
 * The store protocol built on these is replay-stamped.ts.
 */
import { BoundedMap } from '../../contract/bounded-map.js';
import type { StoredTransition, TimeGuard } from '../../events/types.js';
import { appliesOnFold, guardAdmits, guardFailure, rollbackFailure } from '../../events/guard.js';
import type { AppendOutcome } from './types.js';
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

  constructor(entriesMax: number = limits.foldPointsKeptMax) {
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
