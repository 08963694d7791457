/**
 * An operation as the web console shows it: the InvocationResult (decision, settlement, output),
 * each branch with its lease and dispositions, and the event-stream timeline — every stored
 * transition with its commit time, time guard and whether the fold applied it or voided it
 * (guard-on-fold stores may hold void transitions). Built from the log alone, so it is the
 * store's truth whichever coordinator wrote it.
 */
import type { CompiledInteraction } from '../contract/bundle.js';
import { appliesOnFold } from '../events/guard.js';
import type { DomainEvent, StoredTransition, TimeGuard } from '../events/types.js';
import { branchList, fold, type OperationRecord } from './record.js';
import { invocationResult, type BranchView, type InvocationResult } from './views.js';

export interface InspectedBranch extends BranchView {
  leaseUntilMs: number;
  /** What the decision's closure did to the branch, when it was still open then. */
  disposition: string | null;
  cancelOutcome: string | null;
  retryAtMs: number | null;
}

export interface TimelineEntry {
  /** Position in the log, from 0. */
  index: number;
  revision: string;
  committedAtMs: number;
  timeGuard: TimeGuard;
  applied: boolean;
  command: string;
  events: DomainEvent[];
}

export interface OperationInspection {
  principalId: string;
  result: InvocationResult;
  branches: InspectedBranch[];
  transitionsApplied: number;
  transitionsVoid: number;
  timeline: TimelineEntry[];
}

/** Which stored transitions the fold applied, in log order. */
export function appliedFlags(transitions: readonly StoredTransition[]): boolean[] {
  let lastAppliedAtMs = Number.MIN_SAFE_INTEGER;
  return transitions.map((t) => {
    const applied = appliesOnFold(t, lastAppliedAtMs);
    if (applied) lastAppliedAtMs = t.committedAtMs;
    return applied;
  });
}

/** The inspection of a log, or undefined when no admission was ever applied. */
export function inspectLog(
  transitions: readonly StoredTransition[],
  interactionOf: (record: OperationRecord) => CompiledInteraction | undefined,
): OperationInspection | undefined {
  const record = fold(transitions);
  if (!record) return undefined;
  const applied = appliedFlags(transitions);
  const result = invocationResult(record, interactionOf(record));
  const byId = new Map(branchList(record).map((b) => [b.branchId, b]));
  return {
    principalId: record.principalId,
    result,
    branches: result.branches.map((view) => {
      const b = byId.get(view.branchId);
      return {
        ...view,
        leaseUntilMs: b?.leaseUntilMs ?? 0,
        disposition: b?.disposition ?? null,
        cancelOutcome: b?.cancelOutcome ?? null,
        retryAtMs: b?.retryAtMs ?? null,
      };
    }),
    transitionsApplied: record.transitionsApplied,
    transitionsVoid: record.transitionsVoid,
    timeline: transitions.map((t, index) => ({
      index,
      revision: t.revision,
      committedAtMs: t.committedAtMs,
      timeGuard: t.transition.timeGuard,
      applied: applied[index] === true,
      command: t.transition.causation.command,
      events: t.transition.events,
    })),
  };
}
