/**
 * The time-guard rule (docs/design.md §2), one place for all of it: how a guard is built, the
 * check at the serialization point (inclusive lower bound, exclusive upper bound), the shape
 * check every store adapter applies, and the fold rule of guard-on-fold stores. Deciders build
 * guards here; stores check them here; the projection voids transitions by the same rule.
 */
import type { TimeGuard, Transition } from './types.js';

/** What a guard check answers when it fails; a store adapter returns it as its StoreFailure. */
export interface GuardFailure {
  kind: 'invalid-input' | 'expired' | 'unavailable';
  description: string;
}

/** A guard with no upper bound: facts that may be recorded at any time after their lower bound. */
export const openEndedMs = Number.MAX_SAFE_INTEGER;

/** The interval [notBeforeMs, notAfterMs): a transition commits only at a store time inside it. */
export function guardBetween(notBeforeMs: number, notAfterMs: number): TimeGuard {
  return { notBeforeMs, notAfterMs };
}

/**
 * The guard of several commands committed as one transition: every window must hold at the one
 * commit instant, so it is their intersection (empty when they do not meet).
 */
export function intersectGuards(guards: Iterable<TimeGuard>): TimeGuard {
  const guard = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
  for (const g of guards) {
    guard.notBeforeMs = Math.max(guard.notBeforeMs, g.notBeforeMs);
    guard.notAfterMs = Math.min(guard.notAfterMs, g.notAfterMs);
  }
  return guard;
}

/** Whether a guard admits no instant at all. */
export function guardIsEmpty(guard: TimeGuard): boolean {
  return guard.notBeforeMs >= guard.notAfterMs;
}

/** An empty, reversed or non-integer interval is invalid-input (never expired). */
export function checkGuardShape(guard: TimeGuard): GuardFailure | undefined {
  const { notBeforeMs, notAfterMs } = guard;
  if (!Number.isSafeInteger(notBeforeMs) || !Number.isSafeInteger(notAfterMs)) {
    return { kind: 'invalid-input', description: `time guard bounds must be safe integers (got ${notBeforeMs}, ${notAfterMs})` };
  }
  if (notAfterMs <= notBeforeMs) {
    return { kind: 'invalid-input', description: `time guard [${notBeforeMs}, ${notAfterMs}) is empty or reversed` };
  }
  return undefined;
}

export function guardAdmits(guard: TimeGuard, atMs: number): boolean {
  return guard.notBeforeMs <= atMs && atMs < guard.notAfterMs;
}

export function guardFailure(guard: TimeGuard, atMs: number): GuardFailure {
  return {
    kind: 'expired',
    description: `store time ${atMs} is outside the guard [${guard.notBeforeMs}, ${guard.notAfterMs})`,
  };
}

export function rollbackFailure(nowMs: number, lastMs: number): GuardFailure {
  return {
    kind: 'unavailable',
    description: `store clock rolled back (${nowMs} < last committed ${lastMs}); protected transitions stop until time is monotonic again`,
  };
}

export function serializedBytes(transition: Transition): number {
  return Buffer.byteLength(JSON.stringify(transition), 'utf8');
}

/**
 * For guard-on-fold stores: whether a stored transition is applied, given the committedAtMs of
 * the last applied one. Void transitions stay in the log and change nothing.
 */
export function appliesOnFold(stored: { committedAtMs: number; transition: { timeGuard: TimeGuard } }, lastAppliedAtMs: number): boolean {
  return guardAdmits(stored.transition.timeGuard, stored.committedAtMs) && stored.committedAtMs >= lastAppliedAtMs;
}
