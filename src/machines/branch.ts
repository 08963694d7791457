/**
 * The branch machine: the lifecycle of one logical branch of an operation. Context-free on
 * purpose — attempts, fences, leases and results are data in the record, and the decide
 * functions check them; this machine is the authority on which lifecycle moves are legal.
 *
 *   assigned ──DISPATCHED──▶ dispatched ──RESULT_SUCCESS──▶ success
 *      │  └────────RESULT_*──────┤        ──RESULT_FAILURE──▶ failure
 *      │                          ├─RETRY_SCHEDULED─▶ retrying ──REASSIGNED──▶ assigned
 *      │                          ├─CANCEL_REQUESTED─▶ cancelling ──CANCEL_STOPPED──▶ cancelled
 *      └──────────────────────────┴─REVOKED / DETACHED / EXHAUSTED ─▶ revoked / indeterminate / failure
 */
import { setup } from 'xstate';

export type BranchMachineEvent =
  | { type: 'DISPATCHED' }
  | { type: 'RESULT_SUCCESS' }
  | { type: 'RESULT_FAILURE' }
  | { type: 'RETRY_SCHEDULED' }
  | { type: 'REASSIGNED' }
  | { type: 'EXHAUSTED' }
  | { type: 'REVOKED' }
  | { type: 'DETACHED' }
  | { type: 'CANCEL_REQUESTED' }
  | { type: 'CANCEL_STOPPED' }
  | { type: 'CANCEL_ALREADY_COMPLETED' }
  | { type: 'CANCEL_UNKNOWN' }
  | { type: 'CANCEL_WITHDRAWN' };

export type BranchMachineState = 'assigned' | 'dispatched' | 'retrying' | 'cancelling' | 'success' | 'failure' | 'revoked' | 'cancelled' | 'indeterminate';

const open = {
  RESULT_SUCCESS: { target: 'success' },
  RESULT_FAILURE: { target: 'failure' },
  RETRY_SCHEDULED: { target: 'retrying' },
  EXHAUSTED: { target: 'failure' },
  REVOKED: { target: 'revoked' },
  DETACHED: { target: 'indeterminate' },
  CANCEL_REQUESTED: { target: 'cancelling' },
} as const;

export const branchMachine = setup({
  types: { events: {} as BranchMachineEvent },
}).createMachine({
  id: 'branch',
  initial: 'assigned',
  states: {
    assigned: { on: { ...open, DISPATCHED: { target: 'dispatched' } } },
    // A repeated receipt (reconciliation after an uncertain publish) is legal and changes nothing.
    dispatched: { on: { ...open, DISPATCHED: { target: 'dispatched' } } },
    retrying: {
      on: {
        REASSIGNED: { target: 'assigned' },
        EXHAUSTED: { target: 'failure' },
        REVOKED: { target: 'revoked' },
        DETACHED: { target: 'indeterminate' },
        CANCEL_REQUESTED: { target: 'cancelled' },
      },
    },
    cancelling: {
      on: {
        CANCEL_STOPPED: { target: 'cancelled' },
        CANCEL_ALREADY_COMPLETED: { target: 'indeterminate' },
        CANCEL_UNKNOWN: { target: 'indeterminate' },
        // Its request was never sent: nothing runs, nothing to wait for.
        CANCEL_WITHDRAWN: { target: 'cancelled' },
        // A result that raced the cancel: the fact is preserved, the decision is not reopened.
        RESULT_SUCCESS: { target: 'success' },
        RESULT_FAILURE: { target: 'failure' },
        REVOKED: { target: 'revoked' },
      },
    },
    success: { type: 'final' },
    failure: { type: 'final' },
    revoked: { type: 'final' },
    cancelled: { type: 'final' },
    indeterminate: { type: 'final' },
  },
});

export const branchStates: readonly BranchMachineState[] = [
  'assigned',
  'dispatched',
  'retrying',
  'cancelling',
  'success',
  'failure',
  'revoked',
  'cancelled',
  'indeterminate',
];

export const branchEventTypes: readonly BranchMachineEvent['type'][] = [
  'DISPATCHED',
  'RESULT_SUCCESS',
  'RESULT_FAILURE',
  'RETRY_SCHEDULED',
  'REASSIGNED',
  'EXHAUSTED',
  'REVOKED',
  'DETACHED',
  'CANCEL_REQUESTED',
  'CANCEL_STOPPED',
  'CANCEL_ALREADY_COMPLETED',
  'CANCEL_UNKNOWN',
  'CANCEL_WITHDRAWN',
];

/** The profile's branch status for a machine state. */
export function branchStatusOf(state: BranchMachineState): 'pending' | 'success' | 'failure' | 'revoked' | 'cancelled' | 'indeterminate' {
  switch (state) {
    case 'assigned':
    case 'dispatched':
    case 'retrying':
    case 'cancelling':
      return 'pending';
    case 'success':
    case 'failure':
    case 'revoked':
    case 'cancelled':
    case 'indeterminate':
      return state;
    default: {
      const unreachable: never = state;
      return unreachable;
    }
  }
}
