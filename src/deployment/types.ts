/**
 * The shapes of start-up wiring: the deployment config file (validated by config.ts) and the
 * running deployment that buildDeployment returns. Types only, so the config reader and the NATS
 * assembly share them without importing each other.
 */
import type { AdmissionRateConfig } from '../runtime/admission-rate.js';
import type { BundleRegistry } from '../contract/bundle.js';
import type { JsonValue } from '../contract/json.js';
import type { PolicyRule } from '../adapters/policy/static.js';
import type { EventStore } from '../adapters/store/types.js';
import type { MemoryBus } from '../adapters/transport/memory.js';
import type { NamespaceAttestation } from '../adapters/verification/subject.js';
import type { Peer } from '../peer/peer.js';
import type { Clock } from '../contract/clock.js';
import type { Coordinator, Deployment as DeploymentBinding } from '../runtime/coordinator.js';
import type { BudgetOverrides } from '../runtime/log-budget.js';
import type { HttpSettings } from '../http/settings.js';
import type { StuckBounds } from '../events/operation-index.js';
import type { WorkflowInstanceService, WorkflowsConfig } from '../runtime/workflow-service.js';
import type { CloudEventIntake } from '../contract/cloudevents.js';

// ── the file's shape ─────────────────────────────────────────────────────────

/** Every key but `delayMs` is an interaction id; its value is the fixed result the peer returns. */
export type ExamplePeerConfig = { [interaction: string]: JsonValue } & {
  /** How long the peer "works" before answering, on the deployment clock. */
  delayMs?: number;
};

export type TransportConfig = { kind: 'memory'; examplePeers?: Record<string, ExamplePeerConfig> } | NatsTransportConfig;

/** JetStream resources of durable mode (docs/design.md §5); absent fields take the defaults in nats/settings.ts. */
export interface NatsDurableSettings {
  /** Must cover timeoutMs + max(settlementGraceMs, cancelTimeoutMs) of every deployed interaction; by default exactly that. */
  duplicateWindowMs?: number;
  /**
   * In-flight messages each peer's request stream and result stream hold (discard new: a full
   * stream refuses new work; consumed messages are released). Default limits.durableStreamMsgsDefault.
   */
  maxMsgs?: number;
  /** The largest message a stream stores; with maxMsgs it bounds each peer's bytes. Default limits.durableMsgBytesDefault. */
  maxMsgBytes?: number;
  /**
   * Refused: nats-server 2.9 evicts a stored message when a small one lands at a stream's byte
   * limit, even under discard new. Bound bytes with maxMsgs and maxMsgBytes.
   */
  maxBytes?: number;
  /** Broker deliveries of one message before exhaustion is observed (a failed attempt, never a new branch). */
  maxDeliver?: number;
  /** Redelivery after this long without an ack: must outlast the longest peer handler. */
  ackWaitMs?: number;
}

/**
 * `{"kind":"nats", …}`. Configs built in code skip the file's schema, so buildDeployment checks
 * the transport again (nats/settings.ts `checkNatsTransport`) before using it.
 */
export interface NatsTransportConfig {
  kind: 'nats';
  /** One URL or a comma-separated list. */
  servers: string;
  /** The coordinator's NATS user. */
  user: string;
  /**
   * The NAME of the environment variable that holds the password: no secret lives in the file.
   * Needed unless `convoke serve` is given the login (--creds, or a context's password or credentials).
   */
  passwordEnv?: string;
  /**
   * A NATS credentials file (user JWT and seed; owner-only, read by `convoke serve` at start),
   * relative to the config file: the login of an operator-mode server. Not with passwordEnv.
   */
  credsFile?: string;
  /** core: best-effort core NATS, one attempt's worth of promises; durable: JetStream streams and consumers. */
  mode: 'core' | 'durable';
  /** Names the coordinator's inbox prefix and durable consumers; defaults to `user` (which must then be token-safe). */
  coordinatorId?: string;
  durable?: NatsDurableSettings;
  /** Create the namespaces' streams at start (needs stream-create permission); otherwise they are only verified. */
  manageStreams?: boolean;
  /** Durable mode: how often the broker resources are re-verified (admissions stop while they are not). */
  durabilityCheckIntervalMs?: number;
  /** Queue group of the command subscriptions, shared by every coordinator of the deployment. */
  commandQueue?: string;
  /** Command principals that speak as a peer (`sender: exclude`): principal id -> peer id. */
  commandSenders?: Record<string, string>;
}

export interface PrincipalConfig {
  principalId: string;
  /** Lowercase hex SHA-256 of the bearer token's UTF-8 bytes; the token itself is never stored. */
  tokenSha256: string;
  senderPeerId?: string;
}

export interface JwtConfig {
  issuer: string;
  audience: string;
  /** A public JSON Web Key Set file (relative to the config file). */
  jwksFile: string;
  /** Accepted JWS algorithms; by default every asymmetric algorithm jose knows for the key. */
  algorithms?: string[];
  /**
   * A JWT's principal is this prefix followed by its `sub` (default `jwt:<issuer>:`), so JWT
   * subjects live in their own namespace: no static principal's id may start with it.
   */
  principalPrefix?: string;
}

export interface HttpConfig {
  host: string;
  /** 0 picks a free port; `convoke serve` prints the URL it got. */
  port: number;
  bodyLimitBytes: number;
  /** The longest a request may wait for its boundary; longer waitMs values are clamped to it. */
  waitMsMax: number;
  principals: PrincipalConfig[];
  jwt?: JwtConfig;
  /**
   * On shutdown, how long /healthz (and every other route) answers 503 before the listener closes,
   * so a load balancer can stop routing here first. 0 by default.
   */
  drainMs?: number;
  /** Long-polls one principal holds at once (default 256); past it a wait answers at once. */
  waitsPerPrincipal?: number;
  /** Long-polls all principals hold at once (default 10 000); past it a wait answers at once. */
  waitsMax?: number;
  /** CloudEvent deliveries (POST /workflow-events) one principal has in flight at once (default 64); past it a delivery is refused, 503. */
  eventDeliveriesPerPrincipal?: number;
  /** CloudEvent deliveries all principals have in flight at once (default 1 024); past it a delivery is refused, 503. */
  eventDeliveriesMax?: number;
  /**
   * Server-sent event streams (GET /contract-invocations/{id}/events, the console's live updates):
   * the idle heartbeat (default 15 000 ms), how many one principal may hold open (default 8) and
   * how many all principals may (default 1 024).
   */
  events?: { heartbeatMs?: number; streamsPerPrincipal?: number; streamsMax?: number };
  /** How long a client may take to send a request's headers (default 10 000). */
  headersTimeoutMs?: number;
  /** How long a client may take to send a whole request, headers and body (default 30 000). */
  requestTimeoutMs?: number;
}

/** What the operator attests of a subject namespace: its result publishers, and its peers' effect sinks. */
export interface DeploymentAttestation extends NamespaceAttestation {
  /**
   * Every peer serving this namespace commits business effects through an effect sink that
   * rejects older fences and honours the operation/branch key atomically. Required for
   * interactions declaring `effects: "fenced"`; absent means false.
   */
  effectFencing?: boolean;
}

export interface DeploymentConfig {
  /** A store URL for openStore: "memory:", "sqlite:PATH" (PATH relative to the config file), "jetstream:nats://…", "esdb://…". */
  store: string;
  transport: TransportConfig;
  /** Bundle files, relative to the config file. */
  bundles: string[];
  directory: { groups: Record<string, string[]> };
  policy: { rules: PolicyRule[]; ttlMs?: number };
  attestations: DeploymentAttestation[];
  deployment: DeploymentBinding;
  http: HttpConfig;
  /**
   * How long a result that closes no decision may wait for the results that do, to share their
   * append (default 50; 0 appends each batch at once).
   */
  resultBatchMs?: number;
  /**
   * Lower byte budgets than the hard maxima of src/contract/limits.ts (never higher): results
   * over resultBytesMax are rejected at intake; transitions and an operation's whole log are
   * checked against transitionBytesMax and recordBytesMax before each append.
   */
  limits?: BudgetOverrides;
  /** Principals that list and inspect every principal's operations (GET /contract-invocations, NATS `list`, the console); others only their own. */
  operators?: string[];
  /** When open work counts as stuck (docs/operations.md "Stuck work"); absent fields take stuckBoundsDefault. */
  stuck?: Partial<StuckBounds>;
  /**
   * New admissions per principal, per coordinator (src/runtime/admission-rate.ts): a token bucket
   * refilled at `perSecond` up to `burst`; past it a new invocation is 503 `unavailable`. Absent:
   * unbounded.
   */
  admissionRate?: AdmissionRateConfig;
  /**
   * The deployment's own payload expiry (docs/operations.md "Retention: payload expiry"): every
   * `everyMs` (default an hour) operations settled (complete) more than `keepMs` ago are
   * tombstoned, as `convoke prune --keep` does. Absent: nothing is pruned but by that command.
   */
  retention?: { keepMs: number; everyMs?: number };
  /** How the workflow instances beside the coordinator run (docs/reference.md "workflows"). */
  workflows?: WorkflowsConfig;
  /**
   * The secrets workflows may read (`use.secrets`, docs/workflows-executor.md "Secrets"), by name:
   * each read at start-up from an environment variable or an owner-only file, never stored.
   */
  workflowSecrets?: Record<string, WorkflowSecretSource>;
}

/**
 * Where a workflow secret's value comes from: its text, parsed as JSON when it is JSON (an object
 * for basic or bearer `use`). `origins`: the only origins a request carrying it may go to
 * (origins.ts: the egress allow list's syntax); absent, any origin of workflows.http.allow —
 * which must then exist (a config with a secret confined by neither is refused at load), and
 * `serve` warns of each such secret at start-up.
 */
export type WorkflowSecretSource = ({ env: string } | { file: string }) & { origins?: string[] };

/** What a NATS deployment exposes beyond RunningDeployment (diagnostics, tests). */
export interface NatsRuntime {
  mode: 'core' | 'durable';
  coordinatorId: string;
  namespaces: string[];
  /** The peers each namespace's consumers were provisioned for (durable mode). */
  peers: Map<string, string[]>;
  commandSubjects: string[];
  /** Why admissions are refused now, or undefined. */
  admissionProblem(): string | undefined;
  /** Verifies the broker resources now and updates the gate. */
  checkNow(): Promise<void>;
}

/**
 * Where a deployment's operational notices go (durability lost or regained, consumers repaired,
 * exhausted deliveries, connection changes): one line each, with its level (warn unless given).
 * `convoke serve` writes them as JSON log lines.
 */
export type DeploymentLog = (line: string, level?: 'info' | 'warn' | 'error') => void;

/** A deployment built from its config and running: what `convoke serve` and the tests hold. */
export interface RunningDeployment {
  coordinator: Coordinator;
  bundles: BundleRegistry;
  store: EventStore;
  clock: Clock;
  http: HttpSettings;
  /** The in-process bus (memory transport), for diagnostics. */
  bus: MemoryBus | undefined;
  /** The NATS transport's state (nats transport), for diagnostics and tests. */
  nats?: NatsRuntime;
  peers: Peer[];
  /** Workflow instances on the deployment's store (when the deployment was built with a WorkflowHostFactory). */
  workflows?: WorkflowInstanceService;
  /** Where POST /workflow-events delivers (workflows.events.http). */
  workflowEvents?: CloudEventIntake;
  /** Closes the coordinator (after its queued appends), the example peers, the transport and the store. */
  close(): Promise<void>;
}
