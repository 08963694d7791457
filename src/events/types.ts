/**
 * The log's vocabulary: one type per fact. Every event carries `type` and `v` (its schema
 * version). A Transition is the unit appended: all events decided from one command, appended
 * atomically with the expected revision as the compare-and-swap.
 */
import type { rejectionReasons } from './schemas.js';
import type { JsonValue } from '../contract/json.js';
import type { Completion, ContractRef, DeliveryMode, SiblingPolicy, VoteMode, WaitFor } from '../contract/types.js';

export type BranchStatus = 'pending' | 'success' | 'failure' | 'revoked' | 'cancelled' | 'indeterminate';
export type DecisionOutcome = 'success' | 'partial' | 'failed' | 'indeterminate';
export type SettlementStatus = 'pending' | 'complete' | 'indeterminate';
export type OperationPhase = 'admitted' | 'active' | 'closed' | 'settled';
/** `durability-lost`: the durable transport's guarantee broke under an open operation (its outcome is indeterminate). */
/** `log-budget-exhausted`: the operation's log reached its ordinary budget (runtime/log-budget.ts); later evidence could not be recorded. */
export type DecisionReason = 'threshold' | 'impossible' | 'complete' | 'timeout' | 'cancelled' | 'durability-lost' | 'log-budget-exhausted';

/**
 * Delivery receipts. The spec's five, plus `sent` for best-effort transports (memory mode and
 * core NATS) that have no storage acknowledgment to verify.
 */
export type DeliveryReceipt = 'stored' | 'already-stored' | 'rejected' | 'unknown' | 'exhausted' | 'sent';

/** Which attempt of which branch a fact is about: the correlation every branch-level event carries. */
export interface AttemptRef {
  branchId: string;
  attempt: number;
  fence: number;
}

export interface TimeGuard {
  /** Inclusive. */
  notBeforeMs: number;
  /** Exclusive. */
  notAfterMs: number;
}

export interface ManifestBranch {
  branchId: string;
  peerId: string;
}

export interface Authorization {
  peerId: string;
  revision: string;
  expiresAtMs: number;
}

/** Frozen at admission; never changes afterwards. */
export interface Manifest {
  delivery: DeliveryMode;
  completion: Completion;
  votes: VoteMode;
  /** Number of voting units: branches for distinct-branches, distinct peers for distinct-peers. */
  units: number;
  /** Success votes needed to close with success (exact integer; fraction resolved at admission). */
  threshold: number;
  onTimeout: 'partial' | 'failed';
  siblings: SiblingPolicy;
  waitFor: WaitFor;
  attemptsMax: number;
  leaseMs: number;
  renewIntervalMs: number;
  retryBackoffMs: number;
  cancelTimeoutMs: number;
  settlementGraceMs: number;
  branches: ManifestBranch[];
  /** Distinct logical peers of the initial assignments, sorted. */
  peers: string[];
  /**
   * one-eligible: every eligible authorized candidate, in unsigned byte order (reassignment picks
   * the first not excluded by a terminal assignment outcome). Other modes: the same as peers.
   */
  eligible: string[];
}

export interface OperationAdmitted {
  type: 'operation-admitted';
  v: 1;
  operationId: string;
  principalId: string;
  senderPeerId: string | null;
  contract: ContractRef;
  interaction: string;
  subjectNamespace: string;
  invocationKey: string;
  inputDigest: string;
  input: JsonValue;
  /** admittedAtMs is the committing store's timestamp; deadlineMs = admittedAtMs + timeoutMs. */
  timeoutMs: number;
  manifest: Manifest;
  /** Observed revisions: directory, policy, and (gather) the manifest source. */
  revisions: { directory: string; policy: string; manifest?: string };
  authorizations: Authorization[];
  /** The pending outbox: one intended dispatch per branch (attempt 1, fence 1). */
  outbox: OutboxIntent[];
  /**
   * What the directory observed of the candidates' presence, with its revision (absent when it
   * reported none); candidates in neither list were not observed. An observation, not a promise
   * that an online peer stays connected.
   */
  presence?: PresenceObservation;
  /**
   * Durable delivery: the latest creation instant (the broker's clock) of the namespace's streams
   * as the coordinator had verified them when it admitted. A stream of the operation's peers
   * created after it was recreated since, and the operation closes as durability-lost when it is
   * resumed. Absent for other transports (and in logs written before it was recorded).
   */
  streamsCreatedUntilMs?: number;
}

export interface PresenceObservation {
  revision: string;
  online: string[];
  offline: string[];
}

/** A request the admission will send: always each branch's first attempt, at fence 1. */
export interface OutboxIntent {
  branchId: string;
  peerId: string;
  attempt: 1;
  fence: 1;
  publicationId: string;
}

export interface DispatchRecorded extends AttemptRef {
  type: 'dispatch-recorded';
  v: 1;
  receipt: DeliveryReceipt;
  detail?: string;
}

export interface ResultAccepted {
  type: 'result-accepted';
  v: 1;
  branchId: string;
  peerId: string;
  attempt: number;
  fence: number;
  /** success / failure by the interaction's typed predicate; retryable by its retryable predicate. */
  status: 'success' | 'failure';
  retryable: boolean;
  /** When a retryable failure is granted an application retry: the earliest retry instant; else null. */
  retryAtMs: number | null;
  result: JsonValue;
  subject: string;
}

export interface LeaseRenewed extends AttemptRef {
  type: 'lease-renewed';
  v: 1;
  leaseUntilMs: number;
}

/** A claim ended without a result: its lease expired or its owner released it. */
export interface ClaimEnded extends AttemptRef {
  type: 'claim-ended';
  v: 1;
  cause: 'expired' | 'released' | 'delivery-exhausted';
  /** The retry instant when the budget and deadline allow another attempt; null closes the branch as failed. */
  retryAtMs: number | null;
}

/** A new attempt (and fence) of the same logical branch, persisted before anything is sent. */
export interface BranchReassigned {
  type: 'branch-reassigned';
  v: 1;
  branchId: string;
  peerId: string;
  attempt: number;
  fence: number;
  publicationId: string;
}

export interface BranchFailed extends AttemptRef {
  type: 'branch-failed';
  v: 1;
  reason: 'no-eligible-peer';
}

export interface BranchRevoked extends AttemptRef {
  type: 'branch-revoked';
  v: 1;
  policyRevision: string;
  reason: string;
}

export interface CancelDispatched extends AttemptRef {
  type: 'cancel-dispatched';
  v: 1;
  receipt: DeliveryReceipt;
  detail?: string;
  /**
   * With `rejected`: the transport refused the publication for a reason that may pass (a closed
   * connection, say), so the cancel is published again while its timeout lasts. Absent, a
   * rejected cancel is refused for good: by the policy, or by the transport as a message it never
   * carries.
   */
  transient?: true;
}

export interface CancelResultAccepted extends AttemptRef {
  type: 'cancel-result-accepted';
  v: 1;
  outcome: 'stopped' | 'already-completed' | 'unknown';
}

/**
 * The coordinator withdraws a cancel because the request it would stop was never handed to the
 * transport (the decision closed first, in the same process): nothing of that attempt can run.
 * After a restart this is never known, so a recovered coordinator always sends the cancel.
 */
export interface CancelWithdrawn extends AttemptRef {
  type: 'cancel-withdrawn';
  v: 1;
  reason: 'request-never-sent';
}

/** The cancellation timeout passed: branches still waiting for a reply become indeterminate. */
export interface CancelTimedOut {
  type: 'cancel-timed-out';
  v: 1;
  branchIds: string[];
}

/** Why a message was rejected; the list is the event schema's (events/schemas.ts `rejectionReasons`). */
export type RejectionReason = (typeof rejectionReasons)[number];

export interface ResultRejected {
  type: 'result-rejected';
  v: 1;
  reason: RejectionReason;
  subject: string;
  branchId: string | null;
  peerId: string | null;
  attempt: number | null;
  fence: number | null;
  detail: string;
}

export interface ProtocolConflictRecorded {
  type: 'protocol-conflict-recorded';
  v: 1;
  branchId: string;
  peerId: string;
  attempt: number;
  fence: number;
  subject: string;
  /** Digest of the conflicting result; the accepted result stays as it was. */
  resultDigest: string;
  detail: string;
}

export interface BranchDisposition {
  branchId: string;
  /** What closure did to an unfinished branch. */
  disposition: 'detached' | 'cancel-requested';
}

export interface DecisionClosed {
  type: 'decision-closed';
  v: 1;
  outcome: DecisionOutcome;
  reason: DecisionReason;
  successVotes: number;
  failedUnits: number;
  siblings: BranchDisposition[];
}

export interface SettlementCompleted {
  type: 'settlement-completed';
  v: 1;
  status: 'complete' | 'indeterminate';
}

export type DomainEvent =
  | OperationAdmitted
  | DispatchRecorded
  | ResultAccepted
  | LeaseRenewed
  | ClaimEnded
  | BranchReassigned
  | BranchFailed
  | BranchRevoked
  | CancelDispatched
  | CancelResultAccepted
  | CancelWithdrawn
  | CancelTimedOut
  | ResultRejected
  | ProtocolConflictRecorded
  | DecisionClosed
  | SettlementCompleted;

export type EventType = DomainEvent['type'];

export interface Causation {
  /** The command that was handled. */
  command: string;
  /** The inbound message or request it came from, when there was one. */
  messageId?: string;
}

/** One handled command: the unit appended with expectedRevision as the CAS. */
export interface Transition {
  events: DomainEvent[];
  timeGuard: TimeGuard;
  causation: Causation;
}

/** A Transition as a store returns it. */
export interface StoredTransition {
  /** Opaque to callers; an adapter's own counter inside. */
  revision: string;
  /** The store's authoritative serialization timestamp. */
  committedAtMs: number;
  transition: Transition;
}
