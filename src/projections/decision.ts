/**
 * The completion rule applied to a record: counts votes per unit (distinct branches or distinct
 * peers) and asks the frozen mode's rule (completion-rules.ts) whether the decision closes.
 */
import type { DecisionOutcome, DecisionClosed } from '../events/types.js';
import { branchStatusOf } from '../machines/index.js';
import { completionRuleOf, type Tally } from './completion-rules.js';
import { branchList, type OperationRecord } from './record.js';

export { thresholdFor, type Tally } from './completion-rules.js';

interface UnitState {
  success: boolean;
  open: boolean;
}

export function tally(record: OperationRecord): Tally {
  const units = new Map<string, UnitState>();
  const byPeer = record.manifest.votes === 'distinct-peers';
  for (const branch of branchList(record)) {
    const key = byPeer ? branch.peerId : branch.branchId;
    const unit = units.get(key) ?? { success: false, open: false };
    const status = branchStatusOf(branch.state);
    if (status === 'success') unit.success = true;
    if (status === 'pending') unit.open = true;
    units.set(key, unit);
  }
  const result: Tally = { units: record.manifest.units, threshold: record.manifest.threshold, successVotes: 0, failedUnits: 0, openUnits: 0, terminalUnits: 0 };
  for (const unit of units.values()) {
    if (unit.success) result.successVotes++;
    if (!unit.open) result.terminalUnits++;
    if (!unit.open && !unit.success) result.failedUnits++;
    if (unit.open && !unit.success) result.openUnits++;
  }
  return result;
}

export interface Closure {
  outcome: DecisionOutcome;
  reason: DecisionClosed['reason'];
  tally: Tally;
}

/** Whether the frozen rule closes now (before the deadline). Undefined while it stays open. */
export function evaluateCompletion(record: OperationRecord): Closure | undefined {
  const t = tally(record);
  const closed = completionRuleOf(record.manifest.completion).closes(t);
  return closed === undefined ? undefined : { ...closed, tally: t };
}

/**
 * Whether `results` more peer results could close the rule. Each result changes at most one
 * branch, so at most one unit: it can add one success vote, or make one open unit terminal
 * without a vote. False means that no `results` results can close it, whatever they say — the
 * coordinator then holds them back for company without deciding them (result batching).
 */
export function couldClose(record: OperationRecord, results: number): boolean {
  return completionRuleOf(record.manifest.completion).couldClose(tally(record), results);
}

/** Closure at the deadline: the declared onTimeout outcome. */
export function timeoutClosure(record: OperationRecord): Closure {
  return { outcome: record.manifest.onTimeout, reason: 'timeout', tally: tally(record) };
}
