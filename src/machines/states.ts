/**
 * Named state sets and predicates, derived from the machines at load: the one place that says
 * which lifecycle states are open, terminal, claimed, retrying or cancelling. Deciders, the
 * outbox and the runtime ask these instead of comparing state names, so a state added to a
 * machine lands in the right sets by its transitions, not by a hunt for string literals.
 *
 * Each set is read off the machine's own structure: terminal states are its final states; a
 * claimed branch is one a dispatch receipt can still move (it accepts DISPATCHED); a retrying
 * branch is one that can be reassigned; a cancelling branch is one a cancel reply can stop; a
 * settled operation is the target of SETTLED. test/unit/machines.test.ts pins each set.
 */
import type { AnyStateMachine } from 'xstate';
import { assert } from '../contract/errors.js';
import { branchMachine, branchStates, type BranchMachineEvent, type BranchMachineState } from './branch.js';
import { operationStates, type OperationMachineEvent, type OperationMachineState } from './operation.js';
import type { Table } from './table.js';

function finalStates<S extends string>(machine: AnyStateMachine, states: readonly S[]): ReadonlySet<S> {
  return new Set(states.filter((s) => machine.states[s]?.type === 'final'));
}

function accepting<S extends string, E extends string>(table: Table<S, E>, states: readonly S[], event: E): ReadonlySet<S> {
  return new Set(states.filter((s) => table.get(s)?.has(event) === true));
}

function targetsOf<S extends string, E extends string>(table: Table<S, E>, states: readonly S[], event: E): ReadonlySet<S> {
  const targets = new Set<S>();
  for (const s of states) {
    const next = table.get(s)?.get(event);
    if (next !== undefined && next !== s) targets.add(next);
  }
  return targets;
}

export interface BranchStateSets {
  /** Final: nothing moves the branch again. */
  terminal: ReadonlySet<BranchMachineState>;
  /** Not final: the profile's `pending`. */
  open: ReadonlySet<BranchMachineState>;
  /** The current attempt holds a live claim: its request is outstanding and a receipt can still move it. */
  claimed: ReadonlySet<BranchMachineState>;
  /** Waiting for its next attempt. */
  retrying: ReadonlySet<BranchMachineState>;
  /** Waiting for a cancel reply. */
  cancelling: ReadonlySet<BranchMachineState>;
}

export interface OperationStateSets {
  /** Closed and with nothing left to settle. */
  settled: ReadonlySet<OperationMachineState>;
}

export function branchStateSets(table: Table<BranchMachineState, BranchMachineEvent['type']>): BranchStateSets {
  const terminal = finalStates(branchMachine, branchStates);
  const sets: BranchStateSets = {
    terminal,
    open: new Set(branchStates.filter((s) => !terminal.has(s))),
    claimed: accepting(table, branchStates, 'DISPATCHED'),
    retrying: accepting(table, branchStates, 'REASSIGNED'),
    cancelling: accepting(table, branchStates, 'CANCEL_STOPPED'),
  };
  for (const name of ['claimed', 'retrying', 'cancelling'] as const) {
    for (const s of sets[name]) assert(sets.open.has(s), `a ${name} branch state is open (${s})`);
  }
  return sets;
}

export function operationStateSets(table: Table<OperationMachineState, OperationMachineEvent['type']>): OperationStateSets {
  const settled = targetsOf(table, operationStates, 'SETTLED');
  assert(settled.size === 1, 'SETTLED leads to one state');
  return { settled };
}
