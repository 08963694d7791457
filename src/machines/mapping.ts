/**
 * The domain-event → machine-event mapping: one table, one entry per event kind. The mapped type
 * makes the compiler refuse a new event kind until it is mapped here (to nothing, when the event
 * changes data only). The projection steps the machines with exactly these events, and the
 * deciders check their output against the same table before it is appended (domain/legal.ts),
 * so a decided event the machines do not allow is an assertion before it is a stored fact.
 */
import { AssertionFailure } from '../contract/errors.js';
import type { DomainEvent } from '../events/types.js';
import { isClaimed as isClaimedState, type BranchMachineEvent, type BranchMachineState, type OperationMachineEvent } from './index.js';

/** What the mapper may read of a branch: its machine state and its current attempt and fence. */
export interface BranchView {
  state: BranchMachineState;
  attempt: number;
  fence: number;
}

/** The machine events one domain event is: at most one for the operation, any for branches. */
export interface MachineMoves {
  operation?: OperationMachineEvent['type'];
  branches: readonly { branchId: string; event: BranchMachineEvent['type'] }[];
}

type BranchLookup = (branchId: string) => BranchView;
type Mapper<K extends DomainEvent['type']> = (event: Extract<DomainEvent, { type: K }>, branch: BranchLookup) => MachineMoves;

const none: MachineMoves = { branches: [] };
const one = (branchId: string, event: BranchMachineEvent['type']): MachineMoves => ({ branches: [{ branchId, event }] });

export const machineEventTable: { readonly [K in DomainEvent['type']]: Mapper<K> } = {
  'operation-admitted': () => none,
  'dispatch-recorded': (e, branch) => {
    const b = branch(e.branchId);
    // A receipt of an older attempt moves nothing; one recorded after the branch moved on (its
    // result raced the receipt) moves only the operation.
    if (e.attempt !== b.attempt || e.fence !== b.fence) return none;
    if (!isClaimedState(b.state)) return { operation: 'DISPATCHED', branches: [] };
    const failed = e.receipt === 'rejected' || e.receipt === 'exhausted';
    return { operation: 'DISPATCHED', branches: [{ branchId: e.branchId, event: failed ? 'EXHAUSTED' : 'DISPATCHED' }] };
  },
  'result-accepted': (e) => one(e.branchId, e.status === 'success' ? 'RESULT_SUCCESS' : e.retryAtMs !== null ? 'RETRY_SCHEDULED' : 'RESULT_FAILURE'),
  'lease-renewed': () => none,
  'claim-ended': (e) => one(e.branchId, e.retryAtMs === null ? 'EXHAUSTED' : 'RETRY_SCHEDULED'),
  'branch-reassigned': (e) => one(e.branchId, 'REASSIGNED'),
  'branch-failed': (e) => one(e.branchId, 'EXHAUSTED'),
  'branch-revoked': (e) => one(e.branchId, 'REVOKED'),
  'cancel-dispatched': () => none,
  'cancel-result-accepted': (e) =>
    one(e.branchId, e.outcome === 'stopped' ? 'CANCEL_STOPPED' : e.outcome === 'already-completed' ? 'CANCEL_ALREADY_COMPLETED' : 'CANCEL_UNKNOWN'),
  'cancel-withdrawn': (e) => one(e.branchId, 'CANCEL_WITHDRAWN'),
  'cancel-timed-out': (e) => ({ branches: e.branchIds.map((branchId) => ({ branchId, event: 'CANCEL_UNKNOWN' as const })) }),
  'result-rejected': () => none,
  'protocol-conflict-recorded': () => none,
  'decision-closed': (e) => ({
    operation: 'CLOSED',
    branches: e.siblings.map((s) => ({
      branchId: s.branchId,
      event: s.disposition === 'cancel-requested' ? ('CANCEL_REQUESTED' as const) : ('DETACHED' as const),
    })),
  }),
  'settlement-completed': () => ({ operation: 'SETTLED', branches: [] }),
};

/**
 * The machine events of one domain event, given the branches as they stand before it. A switch
 * onto the table's entries: each case reads one fixed property (every fold and legality check
 * runs this per event), where indexing the table by the event's type is a generic lookup.
 */
export function machineMoves(event: DomainEvent, branch: BranchLookup): MachineMoves {
  const t = machineEventTable;
  switch (event.type) {
    case 'operation-admitted':
      return t['operation-admitted'](event, branch);
    case 'dispatch-recorded':
      return t['dispatch-recorded'](event, branch);
    case 'result-accepted':
      return t['result-accepted'](event, branch);
    case 'lease-renewed':
      return t['lease-renewed'](event, branch);
    case 'claim-ended':
      return t['claim-ended'](event, branch);
    case 'branch-reassigned':
      return t['branch-reassigned'](event, branch);
    case 'branch-failed':
      return t['branch-failed'](event, branch);
    case 'branch-revoked':
      return t['branch-revoked'](event, branch);
    case 'cancel-dispatched':
      return t['cancel-dispatched'](event, branch);
    case 'cancel-result-accepted':
      return t['cancel-result-accepted'](event, branch);
    case 'cancel-withdrawn':
      return t['cancel-withdrawn'](event, branch);
    case 'cancel-timed-out':
      return t['cancel-timed-out'](event, branch);
    case 'result-rejected':
      return t['result-rejected'](event, branch);
    case 'protocol-conflict-recorded':
      return t['protocol-conflict-recorded'](event, branch);
    case 'decision-closed':
      return t['decision-closed'](event, branch);
    case 'settlement-completed':
      return t['settlement-completed'](event, branch);
    default: {
      const unknown: never = event;
      throw new AssertionFailure(`unknown event ${(unknown as DomainEvent).type}`);
    }
  }
}
