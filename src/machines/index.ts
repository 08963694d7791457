import { branchEventTypes, branchMachine, branchStates, type BranchMachineEvent, type BranchMachineState } from './branch.js';
import { operationEventTypes, operationMachine, operationStates, type OperationMachineEvent, type OperationMachineState } from './operation.js';
import { branchStateSets, operationStateSets } from './states.js';
import { deriveTable, step } from './table.js';

export const branchTable = deriveTable<BranchMachineState, BranchMachineEvent['type']>(branchMachine, branchStates, branchEventTypes);
export const operationTable = deriveTable<OperationMachineState, OperationMachineEvent['type']>(operationMachine, operationStates, operationEventTypes);

export const stepBranch = (state: BranchMachineState, event: BranchMachineEvent['type']) => step(branchTable, 'branch', state, event);
export const stepOperation = (state: OperationMachineState, event: OperationMachineEvent['type']) => step(operationTable, 'operation', state, event);

/** The named sets, derived from the machines (states.ts). */
export const branchSets = branchStateSets(branchTable);
export const operationSets = operationStateSets(operationTable);

/** Not final: the branch may still produce a result or be ended (the profile's `pending`). */
export const isOpenBranch = (state: BranchMachineState): boolean => branchSets.open.has(state);
export const isTerminalBranch = (state: BranchMachineState): boolean => branchSets.terminal.has(state);
/** Its current attempt holds a live claim (its request outstanding or delivered). */
export const isClaimed = (state: BranchMachineState): boolean => branchSets.claimed.has(state);
export const isRetrying = (state: BranchMachineState): boolean => branchSets.retrying.has(state);
export const isCancelling = (state: BranchMachineState): boolean => branchSets.cancelling.has(state);
export const isSettled = (phase: OperationMachineState): boolean => operationSets.settled.has(phase);

export type { BranchMachineEvent, BranchMachineState, OperationMachineEvent, OperationMachineState };
export { branchMachine, branchStatusOf } from './branch.js';
export { operationMachine } from './operation.js';
