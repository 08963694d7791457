/**
 * The completion rule: counts votes per unit (distinct branches or distinct peers) and decides
 * whether the frozen rule closes, with exact integer arithmetic.
 */
import { assert } from '../contract/errors.js';
import type { Completion } from '../contract/types.js';
import type { DecisionOutcome, DecisionClosed } from '../events/types.js';
import { branchStatusOf } from '../machines/index.js';
import { branchList, type OperationRecord } from './record.js';

export interface Tally {
  units: number;
  threshold: number;
  successVotes: number;
  /** Units that are terminal and supplied no success vote. */
  failedUnits: number;
  /** Units that can still supply a success vote. */
  openUnits: number;
  /** Units whose every branch is terminal. */
  terminalUnits: number;
}

interface UnitState {
  success: boolean;
  open: boolean;
}

/**
 * Quorum threshold as an exact integer: count as given; a fraction num/den of the units needs
 * ceil(units·num/den) votes. Inputs are bounded (units ≤ branchesMax, den ≤ 10^6), so the
 * product stays far below 2^53; asserted anyway.
 */
export function thresholdFor(completion: Completion, units: number): number {
  switch (completion.mode) {
    case 'first-success':
      return 1;
    case 'all-successful':
    case 'all-terminal':
      return units;
    case 'quorum': {
      if ('count' in completion) return completion.count;
      const { num, den } = completion.fraction;
      const product = units * num;
      assert(Number.isSafeInteger(product + den), 'quorum arithmetic stays within safe integers');
      return Math.floor((product + den - 1) / den);
    }
    default: {
      const unreachable: never = completion;
      return unreachable;
    }
  }
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
  if (record.manifest.completion.mode === 'all-terminal') {
    // Collection complete is success even when business branches failed; aggregation keeps those failures.
    return t.terminalUnits === t.units ? { outcome: 'success', reason: 'complete', tally: t } : undefined;
  }
  if (t.successVotes >= t.threshold) return { outcome: 'success', reason: 'threshold', tally: t };
  if (t.successVotes + t.openUnits < t.threshold) return { outcome: 'failed', reason: 'impossible', tally: t };
  return undefined;
}

/**
 * Whether `results` more peer results could close the rule. Each result changes at most one
 * branch, so at most one unit: it can add one success vote, or make one open unit terminal
 * without a vote. False means that no `results` results can close it, whatever they say — the
 * coordinator then holds them back for company without deciding them (result batching).
 */
export function couldClose(record: OperationRecord, results: number): boolean {
  const t = tally(record);
  if (record.manifest.completion.mode === 'all-terminal') return t.terminalUnits + results >= t.units;
  return t.successVotes + results >= t.threshold || t.successVotes + Math.max(0, t.openUnits - results) < t.threshold;
}

/** Closure at the deadline: the declared onTimeout outcome. */
export function timeoutClosure(record: OperationRecord): Closure {
  return { outcome: record.manifest.onTimeout, reason: 'timeout', tally: tally(record) };
}
