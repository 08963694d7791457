/**
 * What the facades may ask of workflow instances: the one service interface the HTTP facade
 * (src/http/workflow-instances.ts) and the NATS command API are thin adapters over, as they are
 * over InvocationService for operations. The workflow executor's instance service
 * (src/workflow/exec/instances.ts) implements it; a facade depends on this interface only.
 *
 * A WorkflowInstance is a view of the instance's log: its status, the task running now, each
 * contract call (a stage) with its operation id, decision and settlement, and the output or error.
 */
import type { InstancePruneTally, PruneRequest } from './retention.js';
import type { AdmissionRateConfig } from './admission-rate.js';
import type { NatsConnection } from '@nats-io/transport-node';
import type { EventStore } from '../adapters/store/types.js';
import type { CloudEventIntake } from '../contract/cloudevents.js';
import type { BundleRegistry } from '../contract/bundle.js';
import type { Clock } from '../contract/clock.js';
import type { JsonValue } from '../contract/json.js';
import { contractRefSchema } from '../contract/schemas.js';
import { invocationKeySchema } from '../contract/ids.js';
import { limits } from '../contract/limits.js';
import type { ContractRef } from '../contract/types.js';
import type { DecisionView, SettlementView } from '../projections/views.js';
import type { LiveInspection } from './live-inspection.js';
import type { InvocationService } from './service.js';
import type { WorkflowListPage, WorkflowListRequest } from './workflow-list.js';
import type { WorkflowStuckBounds } from '../events/workflow-index.js';
import type { Registry } from 'prom-client';

export interface WorkflowStartRequest {
  /** The bundle that pins the workflow (its digest names the exact version). */
  bundle: ContractRef;
  /** A pipeline or workflow name of that bundle. */
  workflow: string;
  invocationKey: string;
  input: JsonValue;
  /** How long the start may wait for the instance to finish (clamped to the facade's bound). */
  waitMs?: number;
}

export type WorkflowInstanceStatus = 'running' | 'completed' | 'faulted' | 'cancelled';

/** The DSL's error shape (RFC 7807). */
export interface WorkflowInstanceError {
  type: string;
  status: number;
  title?: string;
  detail?: string;
  instance?: string;
}

/** One contract call of the instance. */
export interface WorkflowStage {
  /** The task execution that called (its JSON Pointer and frame). */
  at: string;
  /** The top-level task it is part of (a pipeline's stage name). */
  stage: string;
  /** The calling task's name. */
  task: string;
  operationId: string;
  invocationKey: string;
  /** The operation's decision and settlement as the contract runtime reports them now (null while unknown). */
  decision: DecisionView | null;
  settlement: SettlementView | null;
}

export interface WorkflowInstance {
  instanceId: string;
  bundle: ContractRef;
  workflow: string;
  invocationKey: string;
  status: WorkflowInstanceStatus;
  /** The innermost task running now; null once the instance has ended. */
  currentTask: { at: string; name: string } | null;
  stages: WorkflowStage[];
  output: JsonValue | null;
  error: WorkflowInstanceError | null;
  /** Whether the caller may cancel it (the bundle's `workflowCancellation`). */
  cancellation: 'none' | 'caller';
  startedAtMs: number;
  endedAtMs: number | null;
  /** The instance whose `run: workflow` task started this one, and that task's execution (JSON Pointer and frame); null for a top-level instance. */
  parent: { instanceId: string; at: string } | null;
  /** The child instances its `run: workflow` tasks started, in the order their tasks started. */
  childInstances: WorkflowChildInstance[];
}

/** A child instance as its parent's view lists it. */
export interface WorkflowChildInstance {
  /** The `run: workflow` task execution that bound it. */
  at: string;
  instanceId: string;
  /** The workflow it runs (its document's name). */
  workflow: string;
  /**
   * Its status now, from the workflow instances index (else its log); null when it was bound but
   * never started; `pruned` when retention expired its log (a parent kept outlives the child it ran).
   */
  status: WorkflowInstanceStatus | 'pruned' | null;
  /** What its parent made of it when the task awaiting it stopped waiting (cancelled, already-closed, not-started); null otherwise. */
  disposition: string | null;
}

/** One task execution of an instance, as recorded. */
export interface WorkflowTaskView {
  /** The execution's JSON Pointer and frame. */
  at: string;
  name: string;
  state: 'running' | 'completed' | 'faulted' | 'cancelled';
  startedAtMs: number;
  /** Order of its start among every task start and end of the instance. */
  startedSeq: number;
  endedSeq: number | null;
  input: JsonValue;
  output: JsonValue | null;
  error: WorkflowInstanceError | null;
}

/** An instance's whole record and log, for an operator's console (GET /workflow-instances/{id}/transitions). */
export interface WorkflowInspection {
  instance: WorkflowInstance;
  principalId: string;
  input: JsonValue;
  /** startedAtMs + the workflow's timeout; null when it has none. */
  deadlineMs: number | null;
  lease: { worker: string; epoch: number; untilMs: number } | null;
  /** Every task execution in the order it started. */
  tasks: WorkflowTaskView[];
  timers: { key: string; purpose: string; dueAtMs: number; state: string }[];
  /** Every child operation bound, in the order its call started. */
  children: { at: string; operationId: string; invocationKey: string; attempt: number; disposition: string | null }[];
  /** Every stored transition. */
  timeline: WorkflowTimelineEntry[];
}

/** One stored transition of an instance's stream. */
export interface WorkflowTimelineEntry {
  /** Position in the log, from 0. */
  index: number;
  revision: string;
  committedAtMs: number;
  command: string;
  applied: boolean;
  events: JsonValue[];
}

/**
 * What changed in an instance's inspection since the last one sent on a live stream (GET
 * /workflow-instances/{id}/events `update`): `principalId`, `input` and `deadlineMs` never change;
 * `instance` holds only its fields that changed (absent when none did), its `stages` and
 * `childInstances` only their new and changed entries; `lease` is there when it changed; `tasks`,
 * `timers` and `children` hold the new and changed entries (by `at`, `key`, `at`); `timeline` the
 * transitions stored since, in order.
 */
export interface WorkflowInspectionUpdate {
  /** The revision of the last transition it covers. */
  revision: string;
  instance?: Partial<WorkflowInstance>;
  lease?: WorkflowInspection['lease'];
  tasks: WorkflowInspection['tasks'];
  timers: WorkflowInspection['timers'];
  children: WorkflowInspection['children'];
  timeline: WorkflowTimelineEntry[];
}

export interface WorkflowInstanceService {
  /**
   * Starts an instance of the bundle's workflow, or finds the one the same principal, bundle,
   * workflow and key name (same input: the same instance; a different input: conflict).
   */
  start(principalId: string, request: Omit<WorkflowStartRequest, 'waitMs'>): Promise<{ instance: WorkflowInstance; created: boolean }>;
  /** The instance, for its principal only: another principal's instance is not found. */
  get(principalId: string, instanceId: string): Promise<WorkflowInstance>;
  /** Resolves when the instance has ended, or when waitMs or the signal ends the wait. */
  wait(principalId: string, instanceId: string, waitMs: number, signal?: AbortSignal): Promise<{ instance: WorkflowInstance; finished: boolean }>;
  /** Cancels a running instance whose workflow declares caller cancellation (else unsupported). */
  cancel(principalId: string, instanceId: string): Promise<WorkflowInstance>;
  /** A page of the workflow instances index: the caller's own instances, every principal's for an operator. */
  list(principalId: string, request: WorkflowListRequest): Promise<WorkflowListPage>;
  /** The instance's record and log, for its principal or an operator (anyone else: not found). */
  inspect(principalId: string, instanceId: string): Promise<WorkflowInspection>;
  /**
   * The inspection, visible as for inspect, and then what changed since the last answer, read from
   * the transitions stored after the last one it saw (what GET /workflow-instances/{id}/events sends).
   */
  inspectLive(principalId: string, instanceId: string): Promise<LiveInspection<WorkflowInspection, WorkflowInspectionUpdate>>;
  /** Notice of each append to the instance's stream, by any client of the store (one store watch for every follower: stream-feed.ts). */
  followInstance(instanceId: string, listener: () => void): Promise<{ close(): Promise<void> }>;
  /** Notice of each append to any instance's stream, by any client of the store (the same one watch). */
  followInstances(listener: () => void): Promise<{ close(): Promise<void> }>;
  /** Payload expiry of the store's ended instances (the config's `retention`, src/runtime/retention.ts). */
  prune?(request: Omit<PruneRequest<InstancePruneTally>, 'store'>): Promise<InstancePruneTally>;
  /** Lets a pruned instance go from memory: what reads it next meets its tombstone (404, a start under its key 410). */
  forget?(instanceId: string): void;
}

/** The serve config's `workflows` section (docs/reference.md). */
export interface WorkflowsConfig {
  /** The worker lease of each instance (default 10 000): renewed every third of it; after a crash another worker takes over once it ends. */
  leaseMs?: number;
  /** jq worker threads, shared between principals in rotation (docs/workflows-executor.md "Expressions"); default one per core beside the runtime's, at most 4. */
  jqWorkers?: number;
  /** How CloudEvents reach `listen` tasks and leave `emit` tasks. */
  events?: WorkflowEventsConfig;
  /** When a running instance counts as stuck (docs/workflows-executor.md "Listing instances"); absent fields take the defaults. */
  stuck?: Partial<WorkflowStuckBounds>;
  /** Where the workflows' HTTP calls may go (docs/workflows-executor.md "Egress"). */
  http?: WorkflowHttpConfig;
  /**
   * Running instances one principal may hold, its `run: workflow` children included (default
   * limits.workflowRunningPerPrincipalDefault, 1000; at most limits.workflowRunningPerPrincipalMax,
   * 10 000): a start past it is refused, 503 unavailable (docs/workflows-executor.md "Running instances per principal").
   */
  runningInstancesPerPrincipal?: number;
  /**
   * New instances a principal may start, per worker: a token bucket (admission-rate.ts); a start
   * past it is refused 503 `unavailable` before anything is recorded, one under a key that already
   * names an instance answered. Children (`run: workflow`) are bounded by the running bound instead.
   */
  startRate?: AdmissionRateConfig;
}

/** The serve config's `workflows.http`: the egress policy of `call: http` and `call: openapi`. */
export interface WorkflowHttpConfig {
  /** The only origins calls may reach (`https://api.example.com`, `https://*.example.com`, `http://10.1.2.3:8080`); absent: any. */
  allow?: string[];
  /** Whether calls may reach private and special-purpose addresses (loopback, RFC 1918, link-local, …; default false). */
  privateNetworks?: boolean;
}

/** The serve config's `workflows.events`: the event transports of emit and listen (docs/workflows-executor.md "Events"). */
export interface WorkflowEventsConfig {
  /** Events of type T from outside (event publishers) travel on `<subjectPrefix>.T` (default convoke.events) and reach every principal's listens. */
  subjectPrefix?: string;
  /**
   * Events of type T that a workflow of principal P emits travel on `<emitSubjectPrefix>.<P>.T`
   * (default convoke.emitted; P as principalSubjectToken writes it), which only the coordinator may
   * publish to, and reach only P's listens.
   */
  emitSubjectPrefix?: string;
  /** Where emitted events are published once recorded: none (recorded only; the default), nats (core, flushed), jetstream (the stream's acknowledgment; Nats-Msg-Id from the task execution). */
  emit?: 'none' | 'nats' | 'jetstream';
  /** The stream capturing `<emitSubjectPrefix>.>` that emit jetstream publishes to (default CONVOKE_EVENTS; created, or moved from `<subjectPrefix>.>`, at start with transport.manageStreams). */
  stream?: string;
  /**
   * With emit jetstream: the events of one principal the stream keeps (default 1 000, at most
   * 10 000 000). Past them its oldest are purged, whatever their types: a principal emitting a
   * great deal loses its own events from the stream, never another principal's.
   */
  streamEventsPerPrincipal?: number;
  /** Subscribes `<subjectPrefix>.>` and `<emitSubjectPrefix>.>` in this queue group (default convoke-workflow-events): each event is taken by one serve process. */
  listen?: { queue?: string };
  /** POST /workflow-events on the HTTP facade (default false). */
  http?: boolean;
  /** NATS principals that publish events to listens: each may publish only the event types listed (their users' permissions) and reads answers in its own inbox. */
  publishers?: Record<string, string[]>;
}

export const workflowEventsDefaults = {
  subjectPrefix: 'convoke.events',
  emitSubjectPrefix: 'convoke.emitted',
  stream: 'CONVOKE_EVENTS',
  streamEventsPerPrincipal: limits.emittedStreamEventsPerPrincipalDefault,
  queue: 'convoke-workflow-events',
} as const;

/** Workflow instances hosted beside a deployment's coordinator, on its store. */
export interface WorkflowHosting {
  service: WorkflowInstanceService;
  /** Where POST /workflow-events delivers (when the config's workflows.events.http enables it). */
  events?: CloudEventIntake;
  /** Stops the instances' interpreters (they stay as recorded) before the coordinator closes. */
  close(): Promise<void>;
}

/**
 * Builds the hosting for a deployment (the CLI supplies it: the executor and the workflow language
 * are wired there). Contract calls of its instances go in-process through `coordinator`.
 */
export type WorkflowHostFactory = (parts: {
  coordinator: InvocationService;
  bundles: BundleRegistry;
  store: EventStore;
  clock: Clock;
  /** The serve config's `workflows` section. */
  settings: WorkflowsConfig;
  /** The coordinator's NATS connection (a nats transport): where events are emitted and listened for. */
  nats?: NatsConnection;
  /** Who lists every principal's instances, and when a running instance counts as stuck. */
  listing?: { operators: ReadonlySet<string>; stuckBounds?: WorkflowStuckBounds };
  /** Where the stuck instances gauge is registered (the coordinator's registry, served at /metrics). */
  metrics?: Registry;
  /**
   * Whether the principal may start a new instance of the bundle's workflow: the deployment's
   * policy (action start-workflow), asked for each caller's start and each `run: workflow` child's;
   * it throws the refusal (denied naming the policy's revision, or unavailable).
   */
  authorizeStart?: (principalId: string, bundle: ContractRef, workflow: string) => Promise<void>;
}) => Promise<WorkflowHosting>;

// ── schemas (shared by the HTTP facade, the NATS commands and OpenAPI) ─────────────

const workflowName = { type: 'string', pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' } as const;
const instanceIdSchema = { type: 'string', pattern: '^wf[0-9a-f]{64}$' } as const;
const nullable = (schema: object) => ({ anyOf: [{ type: 'null' }, schema] });

export const workflowStartRequestSchema = {
  type: 'object',
  required: ['bundle', 'workflow', 'invocationKey', 'input'],
  additionalProperties: false,
  properties: {
    bundle: contractRefSchema,
    workflow: workflowName,
    invocationKey: invocationKeySchema,
    input: {},
    waitMs: { type: 'integer', minimum: 0, maximum: limits.waitMsMax },
  },
} as const;

/**
 * The levels a workflow start body adds above its input (a member of the body's root object): the
 * HTTP facade and the workflow-start command read the body to limits.jsonDepthMax plus these
 * (ijson.ts parseStrictBody), so an input as deep as a contract invocation's is read; the start
 * still holds the input to limits.jsonDepthMax (the executor's asLogged).
 */
export const workflowStartRequestLevels = 1;

export const workflowInstanceIdSchema = instanceIdSchema;

const errorShape = {
  type: 'object',
  required: ['type', 'status'],
  properties: { type: { type: 'string' }, status: { type: 'integer' }, title: { type: 'string' }, detail: { type: 'string' }, instance: { type: 'string' } },
} as const;

export const workflowInstanceSchema = {
  type: 'object',
  required: [
    'instanceId',
    'bundle',
    'workflow',
    'invocationKey',
    'status',
    'currentTask',
    'stages',
    'output',
    'error',
    'cancellation',
    'startedAtMs',
    'endedAtMs',
  ],
  additionalProperties: false,
  properties: {
    instanceId: instanceIdSchema,
    bundle: contractRefSchema,
    workflow: { type: 'string' },
    invocationKey: { type: 'string' },
    status: { enum: ['running', 'completed', 'faulted', 'cancelled'] },
    currentTask: nullable({
      type: 'object',
      required: ['at', 'name'],
      additionalProperties: false,
      properties: { at: { type: 'string' }, name: { type: 'string' } },
    }),
    stages: {
      type: 'array',
      items: {
        type: 'object',
        required: ['at', 'stage', 'task', 'operationId', 'invocationKey', 'decision', 'settlement'],
        additionalProperties: false,
        properties: {
          at: { type: 'string' },
          stage: { type: 'string' },
          task: { type: 'string' },
          operationId: { type: 'string', pattern: '^op[0-9a-f]{64}$' },
          invocationKey: { type: 'string' },
          decision: nullable({ type: 'object' }),
          settlement: nullable({ type: 'object' }),
        },
      },
    },
    output: {},
    error: nullable(errorShape),
    cancellation: { enum: ['none', 'caller'] },
    startedAtMs: { type: 'integer' },
    endedAtMs: nullable({ type: 'integer' }),
    // Present in every answer since child instances were linked (not required: older servers' answers lack them).
    parent: nullable({
      type: 'object',
      required: ['instanceId', 'at'],
      additionalProperties: false,
      properties: { instanceId: instanceIdSchema, at: { type: 'string' } },
    }),
    childInstances: {
      type: 'array',
      items: {
        type: 'object',
        required: ['at', 'instanceId', 'workflow', 'status', 'disposition'],
        additionalProperties: false,
        properties: {
          at: { type: 'string' },
          instanceId: instanceIdSchema,
          workflow: { type: 'string' },
          status: nullable({ enum: ['running', 'completed', 'faulted', 'cancelled', 'pruned'] }),
          disposition: nullable({ enum: ['cancelled', 'already-closed', 'not-started'] }),
        },
      },
    },
  },
} as const;
