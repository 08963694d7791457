/**
 * The OperationRecord: the projection of an operation's stream. `fold` rebuilds it from stored
 * transitions (replay); the runtime applies exactly the same `applyStored` to each transition it
 * commits, so live state and replayed state cannot drift apart by construction — and replay tests
 * check that they do not.
 */
import { AssertionFailure, assert } from '../contract/errors.js';
import { setMember, type JsonValue } from '../contract/json.js';
import type {
  DecisionReason,
  OperationAdmitted,
  RejectionReason,
  BranchDisposition,
  DecisionOutcome,
  DeliveryReceipt,
  DomainEvent,
  StoredTransition,
} from '../events/types.js';
import type { CancelOutcome } from '../events/wire.js';
import { appliesOnFold } from '../events/guard.js';
import { machineMoves, type MachineMoves } from '../machines/mapping.js';
import {
  branchMachine,
  isCancelling,
  operationMachine,
  stepBranch,
  stepOperation,
  type BranchMachineEvent,
  type BranchMachineState,
  type OperationMachineEvent,
  type OperationMachineState,
} from '../machines/index.js';
import { stepWithMachine } from '../machines/table.js';

export interface AcceptedResult {
  status: 'success' | 'failure';
  retryable: boolean;
  result: JsonValue;
  attempt: number;
  fence: number;
  acceptedAtMs: number;
}

export interface BranchRecord {
  branchId: string;
  peerId: string;
  state: BranchMachineState;
  attempt: number;
  fence: number;
  leaseUntilMs: number;
  outbox: { publicationId: string; attempt: number; fence: number; receipt: DeliveryReceipt | 'pending' };
  accepted: AcceptedResult | null;
  /** When the branch is waiting to retry: the earliest instant of its next attempt. */
  retryAtMs: number | null;
  /** Store time of the current attempt's assignment or last renewal (renewal rate bound). */
  claimedAtMs: number;
  /** Store time the current attempt began: the admission, or its reassignment (the outbox waits since then). */
  attemptStartedAtMs: number;
  /** Peers whose assignment of this branch ended in a terminal outcome (one-eligible selection skips them). */
  excluded: string[];
  disposition: BranchDisposition['disposition'] | null;
  /** `transient`: its last receipt is a rejection that may pass (cancel-dispatched), so it is published again. */
  cancel: { receipt: DeliveryReceipt | 'pending'; attempt: number; fence: number; transient?: true } | null;
  /** A peer's cancel reply, or `withdrawn` when the coordinator knew the request was never sent. */
  cancelOutcome: CancelOutcome | 'withdrawn' | null;
}

export interface DecisionRecord {
  outcome: DecisionOutcome;
  reason: DecisionReason;
  closedAtMs: number;
  successVotes: number;
  failedUnits: number;
  /** Cancel replies are accepted strictly before this instant (closedAtMs + cancelTimeoutMs). */
  cancelDeadlineMs: number;
  /** Business results of cancelling siblings are recorded as facts strictly before this instant. */
  graceEndMs: number;
  /**
   * The accepted outcomes as of the closing transition, in manifest order: what the decision's
   * aggregation projects. A sibling's result recorded later is a fact beside the decision
   * (branches, settlement), never folded into its output.
   */
  acceptedAtClose: ClosingOutcome[];
}

export interface ClosingOutcome {
  branchId: string;
  peerId: string;
  accepted: AcceptedResult;
}

/** The record: the admission's immutable identity and manifest, plus everything that evolves. */
export interface OperationRecord extends Omit<OperationAdmitted, 'type' | 'v' | 'outbox'> {
  admittedAtMs: number;
  deadlineMs: number;
  phase: OperationMachineState;
  branches: Readonly<Record<string, BranchRecord>>;
  decision: DecisionRecord | null;
  settlement: { status: 'pending' | 'complete' | 'indeterminate'; completedAtMs: number | null };
  rejectionsRecorded: number;
  /** The last result-rejected event applied, with the store instant of its transition. */
  lastRejection: { reason: RejectionReason; atMs: number } | null;
  protocolConflicts: number;
  /** The last stored revision (void transitions included): the expectedRevision of the next append. */
  revision: string;
  lastAppliedAtMs: number;
  transitionsApplied: number;
  transitionsVoid: number;
}

/** Applies one stored transition (or records it as void when its guard fails on fold). */
/**
 * How lifecycle moves are stepped. The runtime uses the transition tables derived from the XState
 * machines; `machineSteps` runs xstate's own transition() (slow), so replay can cross-check them.
 */
export interface Steps {
  branch(state: BranchMachineState, event: BranchMachineEvent['type']): BranchMachineState;
  operation(state: OperationMachineState, event: OperationMachineEvent['type']): OperationMachineState;
}

export const tableSteps: Steps = { branch: stepBranch, operation: stepOperation };

export const machineSteps: Steps = {
  branch: (state, event) => {
    const next = stepWithMachine(branchMachine, state, event);
    if (next === undefined) throw new AssertionFailure(`branch machine: event ${event} is not legal in state ${state}`);
    return next;
  },
  operation: (state, event) => {
    const next = stepWithMachine(operationMachine, state, event);
    if (next === undefined) throw new AssertionFailure(`operation machine: event ${event} is not legal in state ${state}`);
    return next;
  },
};

export function applyStored(record: OperationRecord | undefined, stored: StoredTransition, steps: Steps = tableSteps): OperationRecord | undefined {
  const lastAppliedAtMs = record?.lastAppliedAtMs ?? Number.MIN_SAFE_INTEGER;
  if (!appliesOnFold(stored, lastAppliedAtMs)) {
    return record && { ...record, revision: stored.revision, transitionsVoid: record.transitionsVoid + 1 };
  }
  const next = recordAfter(record, stored.transition.events, stored.committedAtMs, steps);
  next.revision = stored.revision;
  next.lastAppliedAtMs = stored.committedAtMs;
  next.transitionsApplied += 1;
  return next;
}

/** Rebuilds a record from its whole log. Undefined when no admission was ever applied. */
export function fold(transitions: readonly StoredTransition[], steps: Steps = tableSteps): OperationRecord | undefined {
  let record: OperationRecord | undefined;
  for (const stored of transitions) record = applyStored(record, stored, steps);
  return record;
}

/** The record after `events` at `atMs`; `record` itself is never changed. */
export function applyEvents(record: OperationRecord, events: readonly DomainEvent[], atMs: number, steps: Steps = tableSteps): OperationRecord {
  return events.length === 0 ? record : recordAfter(record, events, atMs, steps);
}

export function evolve(record: OperationRecord | undefined, event: DomainEvent, atMs: number, steps: Steps = tableSteps): OperationRecord {
  return recordAfter(record, [event], atMs, steps);
}

/** A new record: `record` (or the one an admission starts) after `events`, all on one draft. */
function recordAfter(record: OperationRecord | undefined, events: readonly DomainEvent[], atMs: number, steps: Steps): Mutable<OperationRecord> {
  const draft = draftOf(record, events, atMs);
  if (draft === undefined) {
    const first = events[0];
    throw new AssertionFailure(first === undefined ? 'a stream begins with operation-admitted' : `${first.type} before operation-admitted`);
  }
  for (const event of events) evolveDraft(draft, event, atMs, steps);
  return draft.record;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * One transition's changes to a record, copy-on-write: the record is copied once, its branch
 * table once, and each branch the events touch once — however many events there are. Earlier
 * records stay exactly as they were (replay, provisional decisions and the live record share
 * structure). An admission starts a fresh record, which is the draft's own from the beginning.
 */
class RecordDraft {
  readonly record: Mutable<OperationRecord>;
  private branchesOwned: boolean;
  /** Every branch is the draft's own (an admission's fresh record). */
  private readonly allBranchesOwned: boolean;
  /** Branches copied by this draft: a set, since one closing transition may touch every branch. */
  private ownedBranches: Set<string> | undefined;
  /** Set while the admission this draft was made from has not been evolved yet. */
  private admissionPending: boolean;

  constructor(base: OperationRecord, fromAdmission: boolean) {
    this.record = fromAdmission ? base : { ...base };
    this.branchesOwned = fromAdmission;
    this.admissionPending = fromAdmission;
    this.allBranchesOwned = fromAdmission;
  }

  /** True once, for the admission the draft began with; any other admission is a damaged stream. */
  takeAdmission(): boolean {
    const pending = this.admissionPending;
    this.admissionPending = false;
    return pending;
  }

  branch(branchId: string): BranchRecord {
    return branchOf(this.record, branchId);
  }

  /** The branch as it stands, for the event-to-machine table (made once per draft, not per event). */
  readonly lookup = (branchId: string): BranchRecord => branchOf(this.record, branchId);

  /** Changes one branch; the fields not named keep their values. */
  setBranch(branchId: string, changes: Partial<BranchRecord>): void {
    if (!this.branchesOwned) {
      this.record.branches = { ...this.record.branches };
      this.branchesOwned = true;
    }
    const current = branchOf(this.record, branchId);
    if (this.allBranchesOwned || this.ownedBranches?.has(branchId)) Object.assign(current, changes);
    else {
      setMember(this.record.branches as Record<string, BranchRecord>, branchId, { ...current, ...changes });
      (this.ownedBranches ??= new Set()).add(branchId);
    }
  }
}

/** A draft over `record`, or over the fresh record an admission (first event) creates. */
function draftOf(record: OperationRecord | undefined, events: readonly DomainEvent[], atMs: number): RecordDraft | undefined {
  const first = events[0];
  if (first?.type === 'operation-admitted') {
    assert(record === undefined, 'operation-admitted only begins a stream');
    return new RecordDraft(admitted(first, atMs), true);
  }
  return record === undefined ? undefined : new RecordDraft(record, false);
}

/** The machine event of an event's `i`-th branch move, from the mapping table. */
function branchMove(moves: MachineMoves, i = 0): BranchMachineEvent['type'] {
  const move = moves.branches[i];
  if (move === undefined) throw new AssertionFailure(`the mapping table gives this event a branch move ${i}`);
  return move.event;
}

/** The operation machine's event; the table gives one to every event that moves the operation. */
function operationMove(moves: MachineMoves): OperationMachineEvent['type'] {
  if (moves.operation === undefined) throw new AssertionFailure('the mapping table gives this event an operation move');
  return moves.operation;
}

type EventOf<T extends DomainEvent['type']> = Extract<DomainEvent, { type: T }>;

function evolveDraft(draft: RecordDraft, event: DomainEvent, atMs: number, steps: Steps): void {
  const record = draft.record;
  // The lifecycle moves come from the one mapping table; the cases below change the data.
  const moves = machineMoves(event, draft.lookup);
  switch (event.type) {
    case 'operation-admitted':
      // draftOf made the record from it; any other admission is a damaged stream.
      assert(draft.takeAdmission(), 'operation-admitted only begins a stream');
      return;
    case 'dispatch-recorded': {
      const branch = draft.branch(event.branchId);
      if (event.attempt !== branch.attempt || event.fence !== branch.fence) return; // a receipt of an older attempt
      // A receipt recorded after the branch already moved on (its result raced the receipt) changes only the outbox.
      const state = moves.branches.length > 0 ? steps.branch(branch.state, branchMove(moves)) : branch.state;
      draft.setBranch(event.branchId, { state, outbox: { ...branch.outbox, receipt: event.receipt } });
      record.phase = steps.operation(record.phase, operationMove(moves));
      return;
    }
    case 'result-accepted':
      return resultAccepted(draft, event, atMs, steps.branch(draft.branch(event.branchId).state, branchMove(moves)));
    case 'lease-renewed':
      draft.setBranch(event.branchId, { leaseUntilMs: event.leaseUntilMs, claimedAtMs: atMs });
      return;
    case 'claim-ended': {
      const branch = draft.branch(event.branchId);
      const state = steps.branch(branch.state, branchMove(moves));
      draft.setBranch(event.branchId, { state, retryAtMs: event.retryAtMs, excluded: addPeer(branch.excluded, branch.peerId) });
      return;
    }
    case 'branch-reassigned':
      return branchReassigned(draft, event, atMs, steps.branch(draft.branch(event.branchId).state, branchMove(moves)));
    case 'branch-failed':
    case 'branch-revoked':
      draft.setBranch(event.branchId, { state: steps.branch(draft.branch(event.branchId).state, branchMove(moves)), retryAtMs: null });
      return;
    case 'cancel-dispatched': {
      const cancel = { receipt: event.receipt, attempt: event.attempt, fence: event.fence };
      draft.setBranch(event.branchId, { cancel: event.transient === true ? { ...cancel, transient: true } : cancel });
      return;
    }
    case 'cancel-result-accepted':
    case 'cancel-withdrawn': {
      const state = steps.branch(draft.branch(event.branchId).state, branchMove(moves));
      draft.setBranch(event.branchId, { state, cancelOutcome: event.type === 'cancel-withdrawn' ? 'withdrawn' : event.outcome });
      return;
    }
    case 'cancel-timed-out':
      event.branchIds.forEach((branchId, i) => {
        draft.setBranch(branchId, { state: steps.branch(draft.branch(branchId).state, branchMove(moves, i)), cancelOutcome: 'unknown' });
      });
      return;
    case 'result-rejected':
      record.rejectionsRecorded += 1;
      record.lastRejection = { reason: event.reason, atMs };
      return;
    case 'protocol-conflict-recorded':
      record.protocolConflicts += 1;
      return;
    case 'decision-closed':
      return decisionClosed(draft, event, atMs, steps, moves);
    case 'settlement-completed':
      record.phase = steps.operation(record.phase, operationMove(moves));
      record.settlement = { status: event.status, completedAtMs: atMs };
      return;
    default: {
      const unreachable: never = event;
      throw new AssertionFailure(`unknown event ${(unreachable as DomainEvent).type}`);
    }
  }
}

function resultAccepted(draft: RecordDraft, event: EventOf<'result-accepted'>, atMs: number, state: BranchMachineState): void {
  const branch = draft.branch(event.branchId);
  const retry = event.status === 'failure' && event.retryAtMs !== null;
  const accepted: AcceptedResult = {
    status: event.status,
    retryable: event.retryable,
    result: event.result,
    attempt: event.attempt,
    fence: event.fence,
    acceptedAtMs: atMs,
  };
  const cancelOutcome = isCancelling(branch.state) ? 'already-completed' : branch.cancelOutcome;
  const excluded = event.status === 'failure' ? addPeer(branch.excluded, branch.peerId) : branch.excluded;
  draft.setBranch(event.branchId, { state, accepted, cancelOutcome, excluded, retryAtMs: retry ? event.retryAtMs : null });
}

function branchReassigned(draft: RecordDraft, event: EventOf<'branch-reassigned'>, atMs: number, state: BranchMachineState): void {
  const branch = draft.branch(event.branchId);
  const record = draft.record;
  assert(event.attempt === branch.attempt + 1 && event.fence > branch.fence, 'a reassignment starts the next attempt with a higher fence');
  draft.setBranch(event.branchId, {
    state,
    peerId: event.peerId,
    attempt: event.attempt,
    fence: event.fence,
    leaseUntilMs: Math.min(atMs + record.manifest.leaseMs, record.deadlineMs),
    claimedAtMs: atMs,
    attemptStartedAtMs: atMs,
    retryAtMs: null,
    outbox: { publicationId: event.publicationId, attempt: event.attempt, fence: event.fence, receipt: 'pending' },
  });
}

function decisionClosed(draft: RecordDraft, event: EventOf<'decision-closed'>, atMs: number, steps: Steps, moves: MachineMoves): void {
  const record = draft.record;
  assert(record.decision === null, 'a decision closes once and never changes');
  record.phase = steps.operation(record.phase, operationMove(moves));
  for (const [i, sibling] of event.siblings.entries()) {
    const branch = draft.branch(sibling.branchId);
    const state = steps.branch(branch.state, branchMove(moves, i));
    // A branch that was only waiting to retry has nothing running: nothing to cancel, nothing to send.
    const cancel = isCancelling(state) ? { receipt: 'pending' as const, attempt: branch.attempt, fence: branch.fence } : null;
    draft.setBranch(sibling.branchId, { state, disposition: sibling.disposition, cancel, retryAtMs: null });
  }
  record.decision = {
    outcome: event.outcome,
    reason: event.reason,
    closedAtMs: atMs,
    successVotes: event.successVotes,
    failedUnits: event.failedUnits,
    cancelDeadlineMs: atMs + record.manifest.cancelTimeoutMs,
    graceEndMs: atMs + record.manifest.settlementGraceMs,
    acceptedAtClose: acceptedOutcomes(record),
  };
}

function admitted(event: Extract<DomainEvent, { type: 'operation-admitted' }>, atMs: number): OperationRecord {
  const deadlineMs = atMs + event.timeoutMs;
  assert(Number.isSafeInteger(deadlineMs), 'deadline arithmetic stays within safe integers');
  const leaseUntilMs = Math.min(atMs + event.manifest.leaseMs, deadlineMs);
  const branches: Record<string, BranchRecord> = {};
  for (const intent of event.outbox) {
    assert(intent.attempt === 1 && intent.fence === 1, 'every branch starts with attempt 1 and fence 1');
    setMember(branches, intent.branchId, {
      branchId: intent.branchId,
      peerId: intent.peerId,
      state: 'assigned',
      attempt: 1,
      fence: 1,
      leaseUntilMs,
      outbox: { publicationId: intent.publicationId, attempt: 1, fence: 1, receipt: 'pending' },
      accepted: null,
      retryAtMs: null,
      claimedAtMs: atMs,
      attemptStartedAtMs: atMs,
      excluded: [],
      disposition: null,
      cancel: null,
      cancelOutcome: null,
    });
  }
  // Named field by field: rest-and-spread copies go through the engine's slow generic path, and
  // every record should share one shape.
  return {
    operationId: event.operationId,
    principalId: event.principalId,
    senderPeerId: event.senderPeerId,
    contract: event.contract,
    interaction: event.interaction,
    subjectNamespace: event.subjectNamespace,
    invocationKey: event.invocationKey,
    inputDigest: event.inputDigest,
    input: event.input,
    timeoutMs: event.timeoutMs,
    manifest: event.manifest,
    revisions: event.revisions,
    authorizations: event.authorizations,
    admittedAtMs: atMs,
    deadlineMs,
    phase: 'admitted',
    branches,
    decision: null,
    settlement: { status: 'pending', completedAtMs: null },
    rejectionsRecorded: 0,
    lastRejection: null,
    protocolConflicts: 0,
    revision: '0',
    lastAppliedAtMs: atMs,
    transitionsApplied: 0,
    transitionsVoid: 0,
  };
}

/** The branch with this ID, if the manifest has it (an own member: "constructor" is no branch unless named so). */
export function findBranch(record: OperationRecord, branchId: string): BranchRecord | undefined {
  return Object.hasOwn(record.branches, branchId) ? record.branches[branchId] : undefined;
}

export function branchOf(record: OperationRecord, branchId: string): BranchRecord {
  const branch = findBranch(record, branchId);
  if (!branch) throw new AssertionFailure(`unknown branch ${branchId} in ${record.operationId}`);
  return branch;
}

/** Branches with an accepted result, in manifest order (AcceptedResult values are replaced, never changed, so sharing them is safe). */
function acceptedOutcomes(record: OperationRecord): ClosingOutcome[] {
  const outcomes: ClosingOutcome[] = [];
  for (const b of branchList(record)) if (b.accepted !== null) outcomes.push({ branchId: b.branchId, peerId: b.peerId, accepted: b.accepted });
  return outcomes;
}

function addPeer(peers: string[], peerId: string): string[] {
  return peers.includes(peerId) ? peers : [...peers, peerId];
}

/** Branches in manifest order. */
export function branchList(record: OperationRecord): BranchRecord[] {
  return record.manifest.branches.map((b) => branchOf(record, b.branchId));
}
