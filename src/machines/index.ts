import { branchEventTypes, branchMachine, branchStates, type BranchMachineEvent, type BranchMachineState } from './branch.js';
import { operationEventTypes, operationMachine, operationStates, type OperationMachineEvent, type OperationMachineState } from './operation.js';
import { deriveTable, step } from './table.js';

export const branchTable = deriveTable<BranchMachineState, BranchMachineEvent['type']>(branchMachine, branchStates, branchEventTypes);
export const operationTable = deriveTable<OperationMachineState, OperationMachineEvent['type']>(operationMachine, operationStates, operationEventTypes);

export const stepBranch = (state: BranchMachineState, event: BranchMachineEvent['type']) => step(branchTable, 'branch', state, event);
export const stepOperation = (state: OperationMachineState, event: OperationMachineEvent['type']) => step(operationTable, 'operation', state, event);

export type { BranchMachineEvent, BranchMachineState, OperationMachineEvent, OperationMachineState };
export { branchMachine, branchStatusOf } from './branch.js';
export { operationMachine } from './operation.js';
