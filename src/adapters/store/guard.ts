/**
 * Time-guard rules shared by every store adapter: validation of the interval and the check at
 * the serialization point (inclusive lower bound, exclusive upper bound).
 */
import type { StoredTransition, TimeGuard, Transition } from '../../events/types.js';
import type { StoreFailure } from './types.js';

/** An empty, reversed or non-integer interval is invalid-input (never expired). */
export function checkGuardShape(guard: TimeGuard): StoreFailure | undefined {
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

export function guardFailure(guard: TimeGuard, atMs: number): StoreFailure {
  return {
    kind: 'expired',
    description: `store time ${atMs} is outside the guard [${guard.notBeforeMs}, ${guard.notAfterMs})`,
  };
}

export function rollbackFailure(nowMs: number, lastMs: number): StoreFailure {
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
export function appliesOnFold(stored: StoredTransition, lastAppliedAtMs: number): boolean {
  return guardAdmits(stored.transition.timeGuard, stored.committedAtMs) && stored.committedAtMs >= lastAppliedAtMs;
}
