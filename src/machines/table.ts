/**
 * Transition tables derived from the XState machines by exhaustive exploration at load.
 *
 * Why: xstate's pure transition() costs ~27 µs on this hardware and an operation takes ~15 machine
 * steps, which would cap the runtime near 2k operations/s. The machines here are context-free
 * and guard-free, so (state × event type) exploration with the machine's own transition() is
 * exact; the fold then uses the table. test/unit/machines.test.ts replays random event sequences
 * through both and requires identical results, so the machines stay the single authority.
 */
import { transition, type AnyStateMachine } from 'xstate';
import { AssertionFailure } from '../contract/errors.js';

export type Table<S extends string, E extends string> = ReadonlyMap<S, ReadonlyMap<E, S>>;

export function deriveTable<S extends string, E extends string>(machine: AnyStateMachine, states: readonly S[], events: readonly E[]): Table<S, E> {
  const table = new Map<S, Map<E, S>>();
  for (const state of states) {
    const row = new Map<E, S>();
    const snapshot = machine.resolveState({ value: state, context: {} });
    for (const type of events) {
      if (!snapshot.can({ type })) continue;
      const [next] = transition(machine, snapshot, { type });
      row.set(type, next.value as S);
    }
    table.set(state, row);
  }
  return table;
}

/** One legal step, or an assertion: a decided event the machine cannot take is a bug. */
export function step<S extends string, E extends string>(table: Table<S, E>, machineId: string, state: S, event: E): S {
  const next = table.get(state)?.get(event);
  if (next === undefined) throw new AssertionFailure(`${machineId} machine: event ${event} is not legal in state ${state}`);
  return next;
}

/** Replays with xstate's own transition(): the slow path used to cross-check the tables. */
export function stepWithMachine<S extends string>(machine: AnyStateMachine, state: S, event: string): S | undefined {
  const snapshot = machine.resolveState({ value: state, context: {} });
  if (!snapshot.can({ type: event })) return undefined;
  const [next] = transition(machine, snapshot, { type: event });
  return next.value as S;
}
