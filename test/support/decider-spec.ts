/**
 * Given / when / then for deciders, in the style of Emmett's DeciderSpecification: the state is
 * built by folding the decider's own evolve over the given events (never by hand), the command is
 * decided once, and the answer is compared — events, nothing, or a thrown error.
 */
import assert from 'node:assert/strict';

export interface DeciderUnderTest<S, E, C, D> {
  initialState(): S;
  evolve(state: S, event: E): S;
  decide(command: C, state: S): D;
}

export interface Then<D> {
  /** The decision equals `expected` (deep equality). */
  then(expected: D): void;
  /** The decision passes `check` (for answers compared in part). */
  thenAssert(check: (decision: D) => void): void;
  /** Deciding throws, matching `error` as assert.throws does. */
  thenThrows(error: RegExp | (new (...args: never[]) => Error)): void;
}

export function deciderSpecification<S, E, C, D>(decider: DeciderUnderTest<S, E, C, D>) {
  return {
    given(events: readonly E[]) {
      return {
        when(command: C): Then<D> {
          const state = events.reduce((s, e) => decider.evolve(s, e), decider.initialState());
          const decide = () => decider.decide(command, state);
          return {
            then(expected) {
              assert.deepEqual(decide(), expected);
            },
            thenAssert(check) {
              check(decide());
            },
            thenThrows(error) {
              assert.throws(decide, error);
            },
          };
        },
      };
    },
  };
}
