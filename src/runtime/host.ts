/** What the coordinator's parts share: its dependencies, the per-operation entry, and the commit loop. */
import type { AdmissionRateConfig } from './admission-rate.js';
import type { StuckBounds } from '../events/operation-index.js';
import type { BundleRegistry, CompiledInteraction } from '../contract/bundle.js';
import type { RuntimeContext } from '../contract/types.js';
import type { Transition } from '../events/types.js';
import type { OperationRecord } from '../projections/record.js';
import type { Directory, PresenceSource } from '../adapters/directory/types.js';
import type { CheckedDecision } from '../contract/authorization.js';
import type { AuthorizationInput, Policy } from '../adapters/policy/types.js';
import type { EventStore } from '../adapters/store/types.js';
import type { StreamContinuity, Subscription, Transport } from '../adapters/transport/types.js';
import type { PublisherVerifier } from '../adapters/verification/subject.js';
import type { ManifestSource } from '../adapters/manifest/types.js';
import type { Clock, TimerHandle } from '../contract/clock.js';
import type { Stream } from '../kernel/kernel.js';
import type { Metrics } from './metrics.js';
import type { Logger, OperationLog, RejectionContext } from './operation-log.js';
import type { BudgetOverrides, Budgets, LogSize } from './log-budget.js';

export interface Deployment {
  account: string;
  system: string;
  domain: string;
}

export interface CoordinatorDeps {
  store: EventStore;
  transport: Transport;
  directory: Directory;
  policy: Policy;
  verifier: PublisherVerifier;
  clock: Clock;
  bundles: BundleRegistry;
  deployment: Deployment;
  /**
   * Whether the peers of a subject namespace commit business effects through sinks that fence
   * them: observed where the sinks are in process (EffectSink.capabilities), attested by the
   * operator where they are remote (config `attestations[].effectFencing`). Without it,
   * interactions declaring fenced effects are unsupported.
   */
  effectFencing?: (namespace: string) => boolean;
  /**
   * Where presence is observed (durable NATS: the peers' request consumers). Without it, only what
   * the directory reports of its groups is recorded, and static audiences have no observation.
   */
  presence?: PresenceSource;
  /**
   * Durable delivery's stream continuity: admission records it, and an open operation loaded from
   * the store (recovery, another coordinator's) whose peers' streams were created since closes
   * as indeterminate (durability-lost) before anything else of it runs.
   */
  continuity?: StreamContinuity;
  /**
   * Told when an open operation closed as indeterminate because the store lost transitions of it
   * that it had acknowledged (the operator's log says so: `convoke serve` prints it).
   */
  onLostWrites?: (operationId: string, description: string) => void;
  /** Where gather interactions get their expected result set; without it, gather is unsupported. */
  manifests?: ManifestSource;
  metrics?: Metrics;
  /** Where the operation lifecycle is logged (operation-log.ts); nothing is logged without one. */
  logger?: Logger;
  /**
   * How long a result that closes no decision may wait for the results that do, so that they
   * share one transition (default resultBatchMsDefault; 0 commits every batch at once).
   */
  resultBatchMs?: number;
  /** The deployment's lower byte budgets (config `limits`); the hard maxima otherwise. */
  budgets?: BudgetOverrides;
  /** Principals that list and inspect every principal's operations (config `operators`); others only their own. */
  operators?: ReadonlySet<string>;
  /** When open work counts as stuck (config `stuck`); stuckBoundsDefault otherwise. */
  stuckBounds?: StuckBounds;
  /** New admissions per principal (config `admissionRate`, admission-rate.ts); unbounded without it. */
  admissionRate?: AdmissionRateConfig;
}

/** A quorum's early votes usually ride with the vote that closes it: one append instead of several. */
export const resultBatchMsDefault = 50;
/** The longest batching window a deployment may configure is limits.resultBatchMsMax. */

export interface Caller {
  principalId: string;
  senderPeerId: string | null;
}

/**
 * One operation in memory: the kernel's stream (the fold of its log, its serial queue, waiters,
 * due timer and known revisions) with what the operation's runtime keeps beside it.
 */
export interface OpEntry extends Stream<OperationRecord> {
  interaction: CompiledInteraction;
  /**
   * Publication ids this process committed to its outbox and has not yet handed to the transport.
   * Process-local knowledge: empty after a restart, when "never sent" cannot be known, and proof
   * of nothing where other processes share the store and the broker (outbox.ts soleSender).
   */
  unsent: Set<string>;
  /** Commands submitted while the queue was busy, committed together by one drain. */
  arrivals: Arrival[];
  /** A drain of `arrivals` is queued. */
  drainQueued: boolean;
  /** What the operation's log holds: the budgets (log-budget.ts) are checked against it before each append. */
  log: LogSize;
  /** The republication of requests not known to have been stored, and of cancels not known to have been carried (outbox.ts). */
  reconcile: { requests: Reconcile; cancels: Reconcile };
}

/** One kind of republication of an operation (outbox.ts): rounds in a row that left something to send again, and the armed timer. */
export interface Reconcile {
  /** How long the next wait is: it doubles with each round in a row. */
  rounds: number;
  /** The armed republication, if any: never more than one. */
  timer: TimerHandle | undefined;
}

export function newEntry(record: OperationRecord, interaction: CompiledInteraction): OpEntry {
  // The stream's fields named one by one (newStream's, in its order): a spread of another
  // object's fields takes the engine's generic copy, once per operation.
  return {
    id: record.operationId,
    record,
    queue: Promise.resolve(),
    waiters: new Set(),
    dueTimer: undefined,
    dueAtMs: undefined,
    known: new Set([record.revision]),
    interaction,
    unsent: new Set(),
    arrivals: [],
    drainQueued: false,
    log: { transitions: 0, bytes: 0 },
    reconcile: { requests: { rounds: 0, timer: undefined }, cancels: { rounds: 0, timer: undefined } },
  };
}

/**
 * Decides one command against `record`. Rejections are counted in the metrics, or, when
 * `rejected` is given, collected there for the caller to count if it commits the answer (the
 * coordinator probes a batch to see whether it closes the decision).
 */
export type Decider = (record: OperationRecord, retryAsLate: boolean, rejected?: string[]) => Transition | undefined;

export interface SubmitOptions {
  /**
   * A fact that may wait for company: it rides with the next command submitted for the
   * operation, or is committed on its own after this long.
   */
  lingerMs?: number;
  /**
   * A result: while the operation is undecided and its batch closes nothing, it may wait up to
   * deps.resultBatchMs for the results that do, to share their transition.
   */
  batchable?: boolean;
}

/** A submitted command: its asynchronous checks run when its turn comes, then its decider. */
export interface Arrival {
  prepare: () => Promise<Decider>;
  /** An upper bound of what it adds to a transition (the message size), to keep batches inside transitionBytesMax. */
  weightBytes: number;
  done: (error?: unknown) => void;
  /** Lingering and batchable commands: the latest instant a drain may still hold it back. */
  holdUntilMs?: number;
  /** A peer result (SubmitOptions.batchable): it can change one branch. */
  batchable: boolean;
}

export interface RuntimeHost {
  readonly deps: CoordinatorDeps;
  /** Set once the coordinator stops accepting work: nothing is published again after it. */
  readonly closing: boolean;
  readonly metrics: Metrics;
  readonly log: OperationLog;
  /** A peer message refused: counted by reason (convoke_result_rejections_total) and logged. */
  rejected(reason: string, context?: RejectionContext): void;
  /** A store or transport failure at a stage: counted and logged. */
  failed(layer: 'store' | 'transport' | 'policy', stage: string, error?: unknown, record?: OperationRecord): void;
  /** The byte and transition budgets in force (the hard maxima, lowered by deps.budgets, the transition budget by the store's limit). */
  readonly budgets: Budgets;
  /** Runs work after everything already queued for this operation. */
  enqueue<T>(entry: OpEntry, work: () => Promise<T>): Promise<T>;
  /** Decides against the current record and appends at its revision (CAS), retrying on conflict. */
  commitDecided(entry: OpEntry, decide: Decider): Promise<void>;
  /**
   * Queues a command for the operation; commands that wait for the queue together are committed
   * as one transition. Resolves once its outcome is stored (or nothing needed storing).
   */
  submit(entry: OpEntry, prepare: () => Promise<Decider>, weightBytes: number, options?: SubmitOptions): Promise<void>;
  /**
   * The operation held in memory, or read from the store and then held (its timers armed, its
   * outbox reconciled). With `keep`, a record read from the store that `keep` refuses is answered
   * without being held: nothing of it is armed or published, and only its record may be read —
   * for a caller about to refuse what named it (a peer message on another subject than the
   * operation's own), so that refusing leaves no trace.
   */
  load(operationId: string, keep?: (record: OperationRecord) => boolean): Promise<OpEntry | undefined>;
  /**
   * Whether the operation's stream is tombstoned in the store (retention expired its payload): a
   * command on an operation held in memory that meets it drops the operation from memory.
   */
  expiredInStore(operationId: string): Promise<boolean>;
  /** Fails closed: unavailable policy answers are errors, never allows; expired allows are refused (decisionAt). */
  authorize(input: AuthorizationInput): Promise<CheckedDecision>;
  context(caller: Caller, nowMs: number, deadlineMs: number | null): RuntimeContext;
  inboundPath(namespace: string, interaction: string, kind: 'result' | 'claim' | 'cancel-result'): Promise<Subscription>;
}
