/**
 * An operation's log budgets, checked in the commit pipeline before every append, and the
 * deployment's (lower) byte budgets. docs/design.md §10: a store accepts only what it can read back in
 * full — and the coordinator never asks it to: every store reads back at least
 * transitionsPerOperationMax transitions (limits.transitionsStoredMax, asserted at load), and a
 * store configured to hold fewer lowers the budget to its count (resolveBudgets).
 *
 * Transitions are of two sorts:
 * - *ordinary* ones (results, claims, receipts, rejections, lease and retry facts, late results)
 *   are accepted up to the budget minus the closing reserve (closingTransitionsPerBranch per
 *   branch plus closingTransitionsBase; in bytes, closingBytesPerBranch per branch plus one
 *   transition of transitionBytesMax);
 * - *closing* ones — a transition that closes the decision, and a settlement fact after it
 *   (cancel dispatched, cancel reply or withdrawal, cancel timeout, settlement) — are what the
 *   reserve is kept for, and the budget never refuses them: each is checked only against what the
 *   store takes and reads back (transitionBytesMax for the one transition here; the store's own
 *   transitionsMax for the log, which it refuses past itself, invalid-input, nothing written).
 *   Ordinary traffic under this budget leaves them their reserve; a log that another writer under
 *   larger budgets (or an earlier version) filled past this process's room still closes. Refused by
 *   the budget, the deadline's timeout, a cancel and the log-budget closing itself met the same
 *   refusal for ever and the operation stayed open; closing transitions are few (one decision, a
 *   handful of facts per branch), so letting them through costs the log little.
 *
 * The defined outcome at the ordinary limit: an undecided operation closes as indeterminate, reason
 * `log-budget-exhausted` (decideLogBudgetExhausted), and the command that did not fit is answered
 * with LogBudgetExhausted (a result is then a counted rejection, acknowledged, never redelivered).
 * A decided operation refuses the ordinary transition the same way. The log always stays readable
 * and the operation can always close: only the store's hard limits can refuse a closing, and
 * ordinary transitions stop short of them by the reserve.
 */
import { AdapterError, assert } from '../contract/errors.js';
import { limits } from '../contract/limits.js';
import type { Transition } from '../events/types.js';
import type { OperationRecord } from '../projections/record.js';
import { measureTransition } from '../adapters/store/codec.js';
import type { StoreLimits } from '../adapters/store/types.js';

/** The byte budgets a deployment may lower (never raise) in its config, and the transition budget. */
export interface Budgets {
  /** Serialized bytes of one result: larger ones are rejected at intake (reason `oversized`). */
  resultBytesMax: number;
  /** Serialized bytes of one transition. */
  transitionBytesMax: number;
  /** Serialized bytes of an operation's whole log. */
  recordBytesMax: number;
  transitionsPerOperationMax: number;
}

/** What a deployment's `limits` may set; the transition count is the hard budget, lowered only to the store's (resolveBudgets). */
export type BudgetOverrides = Partial<Pick<Budgets, 'resultBytesMax' | 'transitionBytesMax' | 'recordBytesMax'>>;

/** Smallest byte budgets a deployment may configure: room for an admission and its closing. */
export const budgetBytesMin = {
  resultBytesMax: 1024,
  transitionBytesMax: limits.transitionOverheadBytesMax + 1024,
  recordBytesMax: 4 * (limits.transitionOverheadBytesMax + 1024),
} as const;

/** Why `overrides` are not a valid lowering of the hard budgets (every problem), or an empty list. */
export function budgetProblems(overrides: BudgetOverrides): string[] {
  const problems: string[] = [];
  for (const key of ['resultBytesMax', 'transitionBytesMax', 'recordBytesMax'] as const) {
    const value = overrides[key];
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value < budgetBytesMin[key] || value > limits[key]) {
      problems.push(`limits.${key} must be an integer in ${budgetBytesMin[key]}..${limits[key]} (the hard maximum); got ${value}`);
    }
  }
  const b = { ...hardBudgets(), ...overrides };
  if (b.resultBytesMax + limits.transitionOverheadBytesMax > b.transitionBytesMax) {
    problems.push(
      `limits.resultBytesMax (${b.resultBytesMax}) plus ${limits.transitionOverheadBytesMax} bytes of transition overhead must fit limits.transitionBytesMax (${b.transitionBytesMax})`,
    );
  }
  if (2 * b.transitionBytesMax > b.recordBytesMax) {
    problems.push(`limits.recordBytesMax (${b.recordBytesMax}) must hold at least two transitions of limits.transitionBytesMax (${b.transitionBytesMax})`);
  }
  return problems;
}

function hardBudgets(): Budgets {
  return {
    resultBytesMax: limits.resultBytesMax,
    transitionBytesMax: limits.transitionBytesMax,
    recordBytesMax: limits.recordBytesMax,
    transitionsPerOperationMax: limits.transitionsPerOperationMax,
  };
}

/** What the store takes (EventStore.limits): the largest transition, and the most transitions one operation's log holds. */
export type StoreTakes = Pick<StoreLimits, 'transitionBytesMax' | 'transitionsMax'>;

/** What every store takes unless configured lower: the hard maxima. */
const storeTakesDefault: StoreTakes = { transitionBytesMax: limits.transitionBytesMax, transitionsMax: limits.transitionsStoredMax };

/**
 * The fewest transitions a store must hold per operation for the coordinator to start over it:
 * an admission and the closing reserve of an operation of limits.branchesMax branches. The
 * branch count is an operation's (its audience, resolved at admission), so the start checks the
 * most any admission may have: then every operation's admission fits its ordinary room and its
 * decision and settlement fit their reserve, whatever its audience.
 */
export const budgetTransitionsMin = 1 + limits.closingTransitionsPerBranch * limits.branchesMax + limits.closingTransitionsBase;

/**
 * The hard budgets lowered by `overrides`, and lowered further to what the store takes (`store`,
 * its limits): the transition budget to its limits.transitionBytesMax (JetStream's follows the
 * server's max_payload and its operations stream's max_msg_size), the transition count to its
 * limits.transitionsMax. Invalid overrides are invalid-input.
 *
 * The store's byte limit lowers transitionBytesMax as a configured one would, and the same rules
 * hold of it: in particular a result of resultBytesMax with its transition overhead must fit, so
 * every result intake lets through is one the store takes. When the store takes less, the
 * coordinator refuses to start (invalid-input naming both numbers) rather than lower the result
 * budget on its own: the result budget is what every peer of every contract is promised, a server
 * setting changed underneath must not shrink it unannounced, and an operator who lowers it in
 * `limits` does so knowingly. Without either, intake let a result through that the store then
 * refused: acknowledged, recorded nowhere, its branch left waiting and a decision it would close
 * left open until the deadline.
 *
 * The store's count lowers transitionsPerOperationMax, and the closing reserve is kept inside the
 * lowered budget (logLimits): ordinary transitions stop short of the store's count by it, so the
 * decision, the cancellation facts and the settlement always have room at the store. A store
 * holding fewer than budgetTransitionsMin makes the coordinator refuse to start (invalid-input
 * naming both numbers). Without this, ordinary traffic filled a log to the store's count while
 * the coordinator still saw room: the store then refused the results that would decide, the
 * deadline's transition and the settlement, and the operation stayed undecided for ever.
 */
export function resolveBudgets(overrides: BudgetOverrides = {}, store: StoreTakes = storeTakesDefault): Budgets {
  const problems = budgetProblems(overrides);
  if (problems.length > 0) throw new AdapterError('invalid-input', problems.join('; '));
  const budgets = { ...hardBudgets(), ...overrides };
  assert(budgets.transitionsPerOperationMax <= limits.transitionsStoredMax, 'every store reads back the transition budget');
  const countProblem = storeCountProblem(store.transitionsMax);
  if (countProblem !== undefined) throw new AdapterError('invalid-input', countProblem);
  const transitionsPerOperationMax = Math.min(budgets.transitionsPerOperationMax, store.transitionsMax);
  if (store.transitionBytesMax >= budgets.transitionBytesMax) return { ...budgets, transitionsPerOperationMax };
  const problem = storeLimitProblem(budgets.resultBytesMax, store.transitionBytesMax);
  if (problem !== undefined) throw new AdapterError('invalid-input', problem);
  return { ...budgets, transitionBytesMax: store.transitionBytesMax, transitionsPerOperationMax };
}

/** Why a store holding at most `storeTransitionsMax` transitions per operation is too small for any operation to close in, or undefined. */
function storeCountProblem(storeTransitionsMax: number): string | undefined {
  if (storeTransitionsMax >= budgetTransitionsMin) return undefined;
  const taken = `the store holds at most ${storeTransitionsMax} transitions per operation (its limits.transitionsMax)`;
  const reserve = `${limits.closingTransitionsPerBranch} per branch for limits.branchesMax (${limits.branchesMax}) branches plus ${limits.closingTransitionsBase}`;
  return `${taken}; an admission and the closing reserve of the largest operation (${reserve}) need ${budgetTransitionsMin}: let the store hold at least ${budgetTransitionsMin}`;
}

/** Why a store taking transitions of at most `storeBytesMax` cannot hold a result of `resultBytesMax` with its overhead, or undefined. */
function storeLimitProblem(resultBytesMax: number, storeBytesMax: number): string | undefined {
  const overhead = limits.transitionOverheadBytesMax;
  if (resultBytesMax + overhead <= storeBytesMax) return undefined;
  const taken = `the store takes transitions of at most ${storeBytesMax} bytes (its limits.transitionBytesMax; JetStream's follows the server's max_payload and its operations stream's max_msg_size)`;
  const needed = `limits.resultBytesMax (${resultBytesMax}) plus ${overhead} bytes of transition overhead needs ${resultBytesMax + overhead}`;
  const fits = storeBytesMax - overhead;
  const remedy =
    fits >= budgetBytesMin.resultBytesMax
      ? `lower limits.resultBytesMax to at most ${fits}, or let the store take larger transitions`
      : `no result budget fits (the least is ${budgetBytesMin.resultBytesMax}): let the store take transitions of at least ${budgetBytesMin.resultBytesMax + overhead} bytes`;
  return `${taken}; ${needed}: ${remedy}`;
}

/** What an operation's log holds, as the coordinator last applied or read it. */
export interface LogSize {
  transitions: number;
  bytes: number;
}

/**
 * A command the operation's log has no room for: the typed answer of the budget rule. It is
 * invalid-input, as a store's refusal of an append past what it reads back is (codec.logFullFailure):
 * a full log stays full, so the same command sent again meets the same refusal. Answered
 * `unavailable` (503), it told a caller to retry what could never succeed.
 */
export class LogBudgetExhausted extends AdapterError {
  constructor(description: string) {
    super('invalid-input', description);
  }
}

const settlementFacts = new Set(['cancel-dispatched', 'cancel-result-accepted', 'cancel-withdrawn', 'cancel-timed-out', 'settlement-completed']);

export type TransitionKind = 'ordinary' | 'closes-decision' | 'settlement';

export function transitionKind(record: OperationRecord, transition: Transition): TransitionKind {
  if (record.decision === null) return transition.events.some((e) => e.type === 'decision-closed') ? 'closes-decision' : 'ordinary';
  return transition.events.every((e) => settlementFacts.has(e.type)) ? 'settlement' : 'ordinary';
}

/** The most transitions and bytes the log of an operation with `branches` branches may hold after an ordinary transition: the budget less the closing reserve. */
export function logLimits(branches: number, budgets: Budgets): LogSize {
  return {
    transitions: budgets.transitionsPerOperationMax - limits.closingTransitionsPerBranch * branches - limits.closingTransitionsBase,
    bytes: budgets.recordBytesMax - limits.closingBytesPerBranch * branches - budgets.transitionBytesMax,
  };
}

/**
 * What the log's room says of `transition` (of `bytes` serialized bytes). Refused: `oversized`, a
 * single transition over transitionBytesMax (a batch of commands splits), and `ordinary`, an
 * ordinary transition past the ordinary room (logLimits). A closing transition is never refused
 * for the log's size here (the header): the store alone refuses past what it reads back; one past
 * the ordinary room is `closing-past-room` (let through, and counted by the coordinator's
 * closingsPastBudget). Anything else `fits`.
 */
export function logRoom(record: OperationRecord, log: LogSize, transition: Transition, bytes: number, budgets: Budgets): LogRoom {
  if (bytes > budgets.transitionBytesMax) return { kind: 'oversized', description: `transition is ${bytes} bytes; the limit is ${budgets.transitionBytesMax}` };
  const kind = transitionKind(record, transition);
  const max = logLimits(Object.keys(record.branches).length, budgets);
  if (log.transitions + 1 <= max.transitions && log.bytes + bytes <= max.bytes) return { kind: 'fits' };
  if (kind !== 'ordinary') return { kind: 'closing-past-room', closing: kind };
  return {
    kind: 'ordinary',
    description: `operation ${record.operationId}: its log holds ${log.transitions} transitions and ${log.bytes} bytes; an ordinary transition of ${bytes} bytes would pass its budget of ${max.transitions} transitions and ${max.bytes} bytes`,
  };
}

export type LogRoom =
  { kind: 'fits' } | { kind: 'closing-past-room'; closing: Exclude<TransitionKind, 'ordinary'> } | { kind: 'oversized' | 'ordinary'; description: string };

/** What a log read back from a store holds. */
export function logSizeOf(transitions: readonly { transition: Transition }[]): LogSize {
  let bytes = 0;
  for (const stored of transitions) bytes += transitionBytes(stored.transition);
  return { transitions: transitions.length, bytes };
}

/**
 * The serialized size of a transition: exactly what stores encode and check. Measured with the
 * stores' codec, which keeps the body for the store's write of the same transition (one
 * serialization per append, codec.measureTransition).
 */
export function transitionBytes(transition: Transition): number {
  return measureTransition(transition).bytes;
}
