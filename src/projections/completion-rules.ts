/**
 * The closing rules of completion modes, keyed by name: each mode's entry in the one table of
 * modes (src/contract/completion.ts) names its threshold and which of these closes it. Two exist
 * today: a threshold of success votes (closed early as impossible when the open units cannot
 * reach it) and collection (every unit terminal). Exact integer arithmetic throughout.
 */
import { closingRuleOf, type ClosingRuleName, type Completion } from '../contract/completion.js';
import type { DecisionClosed, DecisionOutcome } from '../events/types.js';

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

/** How a tally closes a decision before the deadline. */
export interface ClosingRule {
  /** The outcome and reason when the tally closes it now; undefined while it stays open. */
  closes(t: Tally): { outcome: DecisionOutcome; reason: DecisionClosed['reason'] } | undefined;
  /** Whether `results` more results (each changes at most one unit) could close it. */
  couldClose(t: Tally, results: number): boolean;
}

/** Closes at `threshold` success votes, or as impossible when the open units cannot reach it. */
const byThreshold: ClosingRule = {
  closes: (t) => {
    if (t.successVotes >= t.threshold) return { outcome: 'success', reason: 'threshold' };
    if (t.successVotes + t.openUnits < t.threshold) return { outcome: 'failed', reason: 'impossible' };
    return undefined;
  },
  couldClose: (t, results) => t.successVotes + results >= t.threshold || t.successVotes + Math.max(0, t.openUnits - results) < t.threshold,
};

/** Closes when every unit is terminal: collection complete is success even when business branches failed (aggregation keeps those failures). */
const byCollection: ClosingRule = {
  closes: (t) => (t.terminalUnits === t.units ? { outcome: 'success', reason: 'complete' } : undefined),
  couldClose: (t, results) => t.terminalUnits + results >= t.units,
};

export const closingRules: { readonly [N in ClosingRuleName]: ClosingRule } = { threshold: byThreshold, collection: byCollection };

/** The closing rule of a completion's mode. */
export function completionRuleOf(completion: Completion): ClosingRule {
  return closingRules[closingRuleOf(completion)];
}

export { thresholdFor } from '../contract/completion.js';
