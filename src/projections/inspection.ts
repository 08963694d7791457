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
import { changedEntries, changedFields } from './delta.js';
import { applyStored, branchList, type OperationRecord } from './record.js';
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

/**
 * What changed in an operation's inspection since the last one sent on a live stream (GET
 * /contract-invocations/{id}/events `update`): `principalId` never changes; `result` holds only its
 * fields that changed (absent when none did), its `branches` only the changed ones; `branches` the
 * changed inspected branches (by branchId; the manifest fixes which there are and their order);
 * `transitionsApplied` and `transitionsVoid` when they changed; `timeline` the transitions stored
 * since, in order.
 */
export interface OperationInspectionUpdate {
  /** The revision of the last transition it covers. */
  revision: string;
  result?: Partial<InvocationResult>;
  branches: InspectedBranch[];
  transitionsApplied?: number;
  transitionsVoid?: number;
  timeline: TimelineEntry[];
}

/** The record after `transitions` (the log's from position `from` on), and their timeline entries. */
export function foldTimeline(
  record: OperationRecord | undefined,
  transitions: readonly StoredTransition[],
  from: number,
): { record: OperationRecord | undefined; timeline: TimelineEntry[] } {
  const timeline: TimelineEntry[] = [];
  for (const [offset, t] of transitions.entries()) {
    const applied = appliesOnFold(t, record?.lastAppliedAtMs ?? Number.MIN_SAFE_INTEGER);
    record = applyStored(record, t);
    timeline.push({
      index: from + offset,
      revision: t.revision,
      committedAtMs: t.committedAtMs,
      timeGuard: t.transition.timeGuard,
      applied,
      command: t.transition.causation.command,
      events: t.transition.events,
    });
  }
  return { record, timeline };
}

/** The inspection of a record, with these timeline entries. */
export function inspectionOf(record: OperationRecord, interaction: CompiledInteraction | undefined, timeline: TimelineEntry[]): OperationInspection {
  const result = invocationResult(record, interaction);
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
    timeline,
  };
}

/** The update from the inspection `sent` (its timeline aside) to `next`, whose timeline holds only the transitions stored since. */
export function inspectionChanges(sent: OperationInspection, next: OperationInspection, revision: string): OperationInspectionUpdate {
  const byBranch = (branch: BranchView) => branch.branchId;
  const update: OperationInspectionUpdate = { revision, branches: changedEntries(sent.branches, next.branches, byBranch), timeline: next.timeline };
  const result = changedFields(sent.result, next.result, { branches: byBranch });
  if (Object.keys(result).length > 0) update.result = result;
  if (sent.transitionsApplied !== next.transitionsApplied) update.transitionsApplied = next.transitionsApplied;
  if (sent.transitionsVoid !== next.transitionsVoid) update.transitionsVoid = next.transitionsVoid;
  return update;
}
