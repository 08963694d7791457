/**
 * Views of a record: the decision view, the settlement view and the InvocationResult the HTTP
 * facade and the NATS command API return. Aggregation is a typed projection of the accepted
 * outcomes, validated against the interaction's output schema; a projection failure is reported
 * beside the decision and never erases votes.
 */
import type { CompiledInteraction } from '../contract/bundle.js';
import { valueAt } from '../contract/bundle.js';
import type { AdapterErrorBody } from '../contract/errors.js';
import { setMember, type JsonObject, type JsonValue } from '../contract/json.js';
import { describeErrors } from '../contract/validation.js';
import type { ContractRef } from '../contract/types.js';
import type { BranchStatus, DecisionOutcome, DecisionReason, OperationPhase, SettlementStatus } from '../events/types.js';
import { branchStatusOf, isSettled } from '../machines/index.js';
import { branchList, type OperationRecord } from './record.js';

export interface DecisionView {
  outcome: DecisionOutcome;
  reason: DecisionReason;
  closedAtMs: number;
  successVotes: number;
  failedUnits: number;
  units: number;
  threshold: number;
}

export interface SettlementView {
  status: SettlementStatus;
  siblings: { branchId: string; disposition: string; outcome?: string }[];
}

export interface BranchView {
  branchId: string;
  peerId: string;
  status: BranchStatus;
  attempt: number;
  fence: number;
  result?: JsonValue;
}

export interface InvocationResult {
  operationId: string;
  contract: ContractRef;
  interaction: string;
  invocationKey: string;
  phase: OperationPhase;
  admittedAtMs: number;
  deadlineMs: number;
  decision: DecisionView | null;
  settlement: SettlementView;
  branches: BranchView[];
  output: JsonValue;
  outputError: AdapterErrorBody | null;
}

export function decisionView(record: OperationRecord): DecisionView | null {
  const d = record.decision;
  if (!d) return null;
  return {
    outcome: d.outcome,
    reason: d.reason,
    closedAtMs: d.closedAtMs,
    successVotes: d.successVotes,
    failedUnits: d.failedUnits,
    units: record.manifest.units,
    threshold: record.manifest.threshold,
  };
}

export function settlementView(record: OperationRecord): SettlementView {
  const siblings: SettlementView['siblings'] = [];
  for (const b of branchList(record)) {
    if (b.disposition === null) continue;
    siblings.push(
      b.cancelOutcome ? { branchId: b.branchId, disposition: b.disposition, outcome: b.cancelOutcome } : { branchId: b.branchId, disposition: b.disposition },
    );
  }
  return { status: record.settlement.status, siblings };
}

export function branchViews(record: OperationRecord): BranchView[] {
  return branchList(record).map((b) => {
    const view: BranchView = { branchId: b.branchId, peerId: b.peerId, status: branchStatusOf(b.state), attempt: b.attempt, fence: b.fence };
    if (b.accepted) view.result = b.accepted.result;
    return view;
  });
}

/**
 * The levels an aggregate output holds a peer's result below its root, at most: a collected
 * output's `outcomes[i].result` (a first-success output's `result` is one level down).
 */
export const outputResultLevels = 3;

/**
 * The aggregate output of a closed decision, or null; never throws. It projects the accepted
 * outcomes as of the closing transition only, so it is fixed with the decision: a cancelling
 * sibling's result recorded afterwards shows in the branches and the settlement, not here.
 */
export function aggregateOutput(
  record: OperationRecord,
  interaction: CompiledInteraction | undefined,
): { output: JsonValue; outputError: AdapterErrorBody | null } {
  const aggregate = interaction?.spec.aggregate;
  if (!record.decision || !aggregate || !interaction) return { output: null, outputError: null };
  const accepted = record.decision.acceptedAtClose;
  let output: JsonValue;
  switch (aggregate.kind) {
    case 'collect':
      output = { outcomes: accepted.map((b) => ({ branchId: b.branchId, peerId: b.peerId, status: b.accepted.status, result: b.accepted.result })) };
      break;
    case 'first-success': {
      const first = accepted.filter((b) => b.accepted.status === 'success').sort((a, b) => a.accepted.acceptedAtMs - b.accepted.acceptedAtMs)[0];
      output = first ? { branchId: first.branchId, peerId: first.peerId, result: first.accepted.result } : null;
      break;
    }
    case 'tally': {
      // Counted in a Map: a peer's value may be "__proto__" or "constructor", which an object
      // read would find on Object.prototype and a plain assignment would not store.
      const tally = new Map<string, number>();
      for (const b of accepted) {
        const value = valueAt(b.accepted.result, aggregate.pointer);
        const key = value === undefined ? '(missing)' : typeof value === 'string' ? value : JSON.stringify(value);
        tally.set(key, (tally.get(key) ?? 0) + 1);
      }
      const counts: JsonObject = {};
      for (const [key, count] of tally) setMember(counts, key, count);
      output = { counts, total: accepted.length };
      break;
    }
    default: {
      const unreachable: never = aggregate;
      return unreachable;
    }
  }
  const validate = interaction.validateOutput;
  if (validate && !validate(output)) {
    return {
      output: null,
      outputError: { kind: 'invalid-input', description: `aggregate output does not match the output schema: ${describeErrors(validate.errors)}` },
    };
  }
  return { output, outputError: null };
}

export function invocationResult(record: OperationRecord, interaction: CompiledInteraction | undefined): InvocationResult {
  const { output, outputError } = aggregateOutput(record, interaction);
  return {
    operationId: record.operationId,
    contract: record.contract,
    interaction: record.interaction,
    invocationKey: record.invocationKey,
    phase: record.phase,
    admittedAtMs: record.admittedAtMs,
    deadlineMs: record.deadlineMs,
    decision: decisionView(record),
    settlement: settlementView(record),
    branches: branchViews(record),
    output,
    outputError,
  };
}

/** Whether the record has reached a waitFor boundary. */
export function reached(record: OperationRecord, boundary: 'decision' | 'settled'): boolean {
  return boundary === 'decision' ? record.decision !== null : isSettled(record.phase);
}
