/**
 * The decision side of each completion mode, as one table keyed by mode (the syntax side is
 * src/contract/completion.ts): the threshold the manifest freezes at admission, and the rule that
 * closes a decision from the tally of votes. Two closing rules exist today: a threshold of success
 * votes (closed early as impossible when the open units cannot reach it) and collection (every
 * unit terminal). Exact integer arithmetic throughout.
 */
import { assert } from '../contract/errors.js';
import type { CompletionOf } from '../contract/completion.js';
import type { Completion, CompletionMode } from '../contract/types.js';
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

interface CompletionRule<M extends CompletionMode> extends ClosingRule {
  /** The success votes needed among `units` units. */
  threshold(completion: CompletionOf<M>, units: number): number;
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

/**
 * Quorum threshold as an exact integer: count as given; a fraction num/den of the units needs
 * ceil(units·num/den) votes. Inputs are bounded (units ≤ branchesMax, den ≤ 10^6), so the
 * product stays far below 2^53; asserted anyway.
 */
function quorumThreshold(completion: CompletionOf<'quorum'>, units: number): number {
  if ('count' in completion) return completion.count;
  const { num, den } = completion.fraction;
  const product = units * num;
  assert(Number.isSafeInteger(product + den), 'quorum arithmetic stays within safe integers');
  return Math.floor((product + den - 1) / den);
}

export const completionRules: { readonly [M in CompletionMode]: CompletionRule<M> } = {
  'first-success': { threshold: () => 1, ...byThreshold },
  quorum: { threshold: quorumThreshold, ...byThreshold },
  'all-successful': { threshold: (_, units) => units, ...byThreshold },
  'all-terminal': { threshold: (_, units) => units, ...byCollection },
};

/** The rule of a completion's mode, typed for it (the lookup TypeScript cannot correlate itself). */
export function completionRuleOf<M extends CompletionMode>(completion: CompletionOf<M>): CompletionRule<M> {
  return completionRules[completion.mode as M] as CompletionRule<M>;
}

export function thresholdFor(completion: Completion, units: number): number {
  return completionRuleOf(completion).threshold(completion, units);
}
