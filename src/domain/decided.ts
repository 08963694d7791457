/**
 * The one shape a decider answers with when a command may be refused: the transition to append,
 * or a typed refusal (an AdapterError kind, so the boundary reports it unchanged). A broken
 * invariant is not a refusal: it stays an assertion and is thrown.
 */
import { isAdapterError, type AdapterError } from '../contract/errors.js';

export type Decided<T> = { kind: 'decided'; transition: T } | { kind: 'refused'; refusal: AdapterError };

/** Runs a planning step whose rules refuse by throwing typed errors, and answers the one shape. */
export function decidedOf<T>(plan: () => T): Decided<T> {
  try {
    return { kind: 'decided', transition: plan() };
  } catch (error) {
    if (isAdapterError(error)) return { kind: 'refused', refusal: error };
    throw error;
  }
}

/** At a boundary that reports refusals as errors: the transition, or the refusal thrown. */
export function orThrow<T>(decided: Decided<T>): T {
  if (decided.kind === 'refused') throw decided.refusal;
  return decided.transition;
}
