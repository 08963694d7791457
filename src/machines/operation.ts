/**
 * The operation machine: admitted ─DISPATCHED▶ active ─CLOSED▶ closed ─SETTLED▶ settled.
 * Closure may happen before any dispatch (admitted ─CLOSED▶ closed). Once closed, no CLOSED is
 * legal again: a decision never changes, and a second closure is a bug that the fold asserts.
 */
import { setup } from 'xstate';

export type OperationMachineEvent = { type: 'DISPATCHED' } | { type: 'CLOSED' } | { type: 'SETTLED' };
export type OperationMachineState = 'admitted' | 'active' | 'closed' | 'settled';

export const operationMachine = setup({
  types: { events: {} as OperationMachineEvent },
}).createMachine({
  id: 'operation',
  initial: 'admitted',
  states: {
    admitted: { on: { DISPATCHED: { target: 'active' }, CLOSED: { target: 'closed' } } },
    active: { on: { DISPATCHED: { target: 'active' }, CLOSED: { target: 'closed' } } },
    // Receipts of publications already in flight at closure may still be recorded.
    closed: { on: { DISPATCHED: { target: 'closed' }, SETTLED: { target: 'settled' } } },
    settled: { on: { DISPATCHED: { target: 'settled' } } },
  },
});

export const operationStates: readonly OperationMachineState[] = ['admitted', 'active', 'closed', 'settled'];
export const operationEventTypes: readonly OperationMachineEvent['type'][] = ['DISPATCHED', 'CLOSED', 'SETTLED'];
