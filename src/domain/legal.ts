/**
 * A decider's output checked against the machines before it is appended: every lifecycle move
 * its events make (machines/mapping.ts) must be legal from the state the record is in, in order.
 * An illegal move is a bug in a decider, and an assertion here — before it is a stored fact that
 * every later fold would trip over. Only machine states are stepped: no record is built.
 */
import { AssertionFailure } from '../contract/errors.js';
import type { DomainEvent } from '../events/types.js';
import { stepBranch, stepOperation } from '../machines/index.js';
import { machineMoves, type BranchView } from '../machines/mapping.js';
import { branchOf, type OperationRecord } from '../projections/record.js';

export function assertLegal(record: OperationRecord, events: readonly DomainEvent[], command: string): void {
  let phase = record.phase;
  const touched = new Map<string, BranchView>();
  const view = (branchId: string): BranchView => {
    let b = touched.get(branchId);
    if (b === undefined) {
      const current = branchOf(record, branchId);
      b = { state: current.state, attempt: current.attempt, fence: current.fence };
      touched.set(branchId, b);
    }
    return b;
  };
  for (const event of events) {
    if (event.type === 'operation-admitted') throw new AssertionFailure(`${command} decided an admission for an operation that exists`);
    const moves = machineMoves(event, view);
    if (moves.operation !== undefined) phase = stepOperation(phase, moves.operation);
    for (const move of moves.branches) {
      const b = view(move.branchId);
      b.state = stepBranch(b.state, move.event);
    }
    if (event.type === 'branch-reassigned') {
      const b = view(event.branchId);
      b.attempt = event.attempt;
      b.fence = event.fence;
    }
  }
}
