/**
 * Workflow instances beside a deployment's coordinator, on its store: the executor, jq in its
 * worker, and the instance service the facades use. Each deployed bundle's pipelines and workflows
 * are checked and made standalone by the workflow language (workflow/dsl/bundle.ts); contract calls
 * go in-process through the coordinator (no socket).
 *
 * `createWorkflowHost` is the WorkflowHostFactory `convoke serve` hands to buildDeployment, and the
 * embedded demo's.
 */
import { randomInt } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import {
  NatsCloudEventSink,
  checkEmittedStreamTrim,
  ensureEmittedEventStream,
  serveCloudEvents,
  type CloudEventSubscription,
  type EmittedStreamOptions,
  type NatsCloudEventSinkOptions,
  type ServeCloudEventsOptions,
} from '../adapters/transport/nats-cloudevents.js';
import { inboxPrefixFor } from '../adapters/transport/nats-names.js';
import type { CloudEventSink } from '../contract/cloudevents.js';
import { invalidInput, unsupported } from '../contract/errors.js';
import type { EventStore } from '../adapters/store/types.js';
import type { BundleRegistry, CompiledBundle } from '../contract/bundle.js';
import type { Clock } from '../contract/clock.js';
import type { JsonObject, JsonValue } from '../contract/json.js';
import type { ContractRef } from '../contract/types.js';
import { seededRandom } from '../runtime/random.js';
import type { InvocationService } from '../runtime/service.js';
import { workflowEventsDefaults, type WorkflowHosting, type WorkflowHttpConfig, type WorkflowsConfig } from '../runtime/workflow-service.js';
import { workflowStuckBoundsDefault, type WorkflowStuckBounds } from '../events/workflow-index.js';
import { observeStuckWorkflowInstances } from '../runtime/workflow-stuck-metrics.js';
import { observeRefusedWorkflowStarts } from '../runtime/workflow-start-metrics.js';
import { observeDroppedEmittedEvents } from '../runtime/workflow-emitted-metrics.js';
import type { Registry } from 'prom-client';
import { checkedRunnableWorkflows } from './runnable.js';
import { isWorkflowNamed } from '../workflow/exec/document.js';
import { WorkflowExecutor } from '../workflow/exec/executor.js';
import type { EgressOptions } from '../workflow/exec/egress.js';
import { WorkflowInstances, type WorkflowDefinition } from '../workflow/exec/instances.js';
import { JqWorkerEvaluator, type ExpressionEvaluator } from '../workflow/exec/jq.js';
import { workflowStreams } from '../workflow/exec/streams.js';

export interface WorkflowHostParts {
  coordinator: InvocationService;
  bundles: BundleRegistry;
  store: EventStore;
  clock: Clock;
  /** Seed of the retry jitter source (random when absent). */
  seed?: number;
  /** Where emitted CloudEvents go (recorded in the instance's log either way). */
  emit?: (event: JsonObject) => Promise<void>;
  /** The serve config's `workflows` section. */
  settings?: WorkflowsConfig;
  /** The coordinator's NATS connection: event transports (workflows.events) need it. */
  nats?: NatsConnection;
  /** Who lists every principal's instances, and when a running instance counts as stuck (else settings.stuck, then the defaults). */
  listing?: { operators: ReadonlySet<string>; stuckBounds?: WorkflowStuckBounds };
  /** Where the stuck instances gauge is registered (none: no gauge). */
  metrics?: Registry;
  /** Whether a principal may start a new instance (the deployment's policy, WorkflowHostFactory); none: every start is allowed. */
  authorizeStart?: (principalId: string, bundle: ContractRef, workflow: string) => Promise<void>;
  /** The secrets workflows may read (config workflowSecrets, read at start-up). */
  secrets?: ReadonlyMap<string, JsonValue>;
  /** The only origins a request carrying a secret may go to, by the secret's name (config workflowSecrets.<name>.origins). */
  secretOrigins?: ReadonlyMap<string, readonly string[]>;
  /** Told each error that stopped driving an instance (WorkflowExecutorOptions.onFailure): serve logs them (failureNotices). */
  onFailure?: (error: unknown) => void;
  /** Told each emitted CloudEvent the NATS intake gave up on (emittedRedelivery) or refused for good: its subject, the reason, what happened. */
  onEmittedDropped?: ServeCloudEventsOptions['onEmittedDropped'];
  /** Told when the server closes an event intake subscription after start (ServeCloudEventsOptions.onSubscriptionLost): serve logs it. */
  onSubscriptionLost?: ServeCloudEventsOptions['onSubscriptionLost'];
  /** Told when purging a principal's events past its share of the emit stream failed (NatsCloudEventSinkOptions.onTrimFailed): serve logs it. */
  onEmitStreamTrimFailed?: NatsCloudEventSinkOptions['onTrimFailed'];
}

/** How often, at most, `failureNotices` writes a line while failures keep coming. */
export const failureNoticeEveryMs = 10_000;

/**
 * The executor's failures as notices an operator can read without being flooded: the first at
 * once, then at most one per `everyMs` while they keep coming (a store down for an hour with a
 * thousand running instances is one line each `everyMs`, not a thousand a second), each naming
 * how many failures it stands for and the latest one's message.
 */
export function failureNotices(
  write: (notice: { failures: number; error: string }) => void,
  clock: Clock,
  everyMs = failureNoticeEveryMs,
): (error: unknown) => void {
  let unreported = 0;
  let lastWrittenMs = Number.NEGATIVE_INFINITY;
  return (error) => {
    unreported++;
    const nowMs = clock.nowMs();
    if (nowMs - lastWrittenMs < everyMs) return;
    write({ failures: unreported, error: error instanceof Error ? error.message : String(error) });
    unreported = 0;
    lastWrittenMs = nowMs;
  };
}

export interface WorkflowHost extends WorkflowHosting {
  service: WorkflowInstances;
  executor: WorkflowExecutor;
}

/**
 * Who lists every principal's instances and when a running instance counts as stuck (the
 * listing's bounds, else the config's workflows.stuck, then the defaults); the stuck instances
 * gauge counts with the same bounds.
 */
function instanceListing(parts: WorkflowHostParts) {
  const stuckBounds = parts.listing?.stuckBounds ?? { ...workflowStuckBoundsDefault, ...parts.settings?.stuck };
  if (parts.metrics) observeStuckWorkflowInstances(parts.metrics, () => parts.store.workflowIndex, parts.clock, stuckBounds);
  return { store: parts.store, clock: parts.clock, operators: parts.listing?.operators ?? new Set<string>(), stuckBounds };
}

/** What is told of a dropped emitted event: the dropped events counter (with metrics) and parts.onEmittedDropped. */
function emittedDropped(parts: WorkflowHostParts): WorkflowHostParts['onEmittedDropped'] {
  if (!parts.metrics) return parts.onEmittedDropped;
  const count = observeDroppedEmittedEvents(parts.metrics);
  return (subject, reason, detail) => {
    count(reason);
    parts.onEmittedDropped?.(subject, reason, detail);
  };
}

/**
 * The intake once the server took its subscriptions. A NATS user that may not subscribe to its
 * subjects stops the start (denied, naming the subject): the intake would take no event, and say
 * nothing. The intake is closed then, and what was started before it (`undo`).
 */
async function readyIntake(intake: CloudEventSubscription, undo: () => Promise<void>): Promise<CloudEventSubscription> {
  try {
    await intake.ready();
    return intake;
  } catch (error) {
    await intake.close();
    await undo();
    throw error;
  }
}

/** The NATS subscriptions of `workflows.events.listen`: outside events on the subject prefix, emitted ones on the emit prefix. */
function eventIntake(
  nc: NatsConnection,
  executor: WorkflowExecutor,
  events: NonNullable<WorkflowsConfig['events']>,
  prefixes: { subjectPrefix: string; emitSubjectPrefix: string },
  onEmittedDropped: WorkflowHostParts['onEmittedDropped'],
  clock: Clock,
  onSubscriptionLost: WorkflowHostParts['onSubscriptionLost'],
): CloudEventSubscription {
  return serveCloudEvents(nc, prefixes.subjectPrefix, executor, {
    emitSubjectPrefix: prefixes.emitSubjectPrefix,
    clock,
    queue: events.listen?.queue ?? workflowEventsDefaults.queue,
    ...publisherRules(prefixes.subjectPrefix, events.publishers),
    ...(onEmittedDropped ? { onEmittedDropped } : {}),
    ...(onSubscriptionLost ? { onSubscriptionLost } : {}),
  });
}

export async function createWorkflowHost(parts: WorkflowHostParts): Promise<WorkflowHost> {
  const events = parts.settings?.events ?? {};
  const subjectPrefix = events.subjectPrefix ?? workflowEventsDefaults.subjectPrefix;
  const emitSubjectPrefix = events.emitSubjectPrefix ?? workflowEventsDefaults.emitSubjectPrefix;
  const emit = events.emit ?? 'none';
  if ((emit !== 'none' || events.listen) && !parts.nats)
    throw invalidInput('workflows.events: emit over NATS and listen need a nats transport (POST /workflow-events works with any)');
  const sink = emit === 'none' || !parts.nats ? undefined : await eventSink(parts.nats, emit, sinkOptions(parts, events, { subjectPrefix, emitSubjectPrefix }));
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 2000, ...(parts.settings?.jqWorkers === undefined ? {} : { workers: parts.settings.jqWorkers }) });
  const { definitions, refs } = await definitionsOf(parts.bundles.all(), evaluator).catch(async (error: unknown) => {
    await evaluator.close();
    throw error;
  });
  const executor = new WorkflowExecutor({
    store: workflowStreams(parts.store),
    clock: parts.clock,
    random: seededRandom(parts.seed ?? randomInt(2 ** 31)),
    evaluator,
    invocations: parts.coordinator,
    // Any principal allowed to start a workflow chooses where its HTTP calls go (an endpoint from its input): the deployment's policy bounds them.
    egress: egressOf(parts.settings?.http),
    ...(parts.emit ? { emit: parts.emit } : {}),
    ...(sink ? { events: sink } : {}),
    ...(parts.settings?.leaseMs === undefined ? {} : { leaseMs: parts.settings.leaseMs }),
    ...(parts.settings?.runningInstancesPerPrincipal === undefined ? {} : { runningPerPrincipal: parts.settings.runningInstancesPerPrincipal }),
    ...(parts.settings?.startRate === undefined ? {} : { startRate: parts.settings.startRate }),
    ...(parts.secrets ? { secrets: parts.secrets } : {}),
    ...(parts.secretOrigins ? { secretOrigins: parts.secretOrigins } : {}),
    ...(parts.onFailure ? { onFailure: parts.onFailure } : {}),
    ...(parts.metrics ? { onStartRefused: observeRefusedWorkflowStarts(parts.metrics) } : {}),
    ...startPolicy(parts.authorizeStart, refs),
    // run: workflow names a pipeline or workflow of the same bundle (by its namespace, its bundle name and version).
    workflows: (digest, ref) => [...(definitions.get(digest)?.values() ?? [])].find((definition) => isWorkflowNamed(definition.document, ref))?.document,
  });
  const stop = async () => {
    await executor.close();
    await evaluator.close();
  };
  // Every instance a previous process left running is driven again now, not when next read; and
  // instances other workers left (their lease ended unrenewed) are picked up once per lease.
  await executor.resume().catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  executor.resumeEvery(executor.leaseMs);
  // Other serve processes on the store append to instances held here too (a listen they started, a lease they took): follow them.
  await executor.watch();
  const subscription =
    events.listen && parts.nats
      ? await readyIntake(
          eventIntake(parts.nats, executor, events, { subjectPrefix, emitSubjectPrefix }, emittedDropped(parts), parts.clock, parts.onSubscriptionLost),
          stop,
        )
      : undefined;
  return {
    service: instanceService(parts, executor, definitions, refs),
    executor,
    ...(events.http ? { events: executor } : {}),
    close: async () => {
      await subscription?.close();
      await stop();
    },
  };
}

/**
 * The executor's authorizeStart: the deployment's policy decides each new instance, a caller's or
 * a `run: workflow` child's, for the bundle with the start's digest and the workflow's name.
 */
function startPolicy(
  authorize: WorkflowHostParts['authorizeStart'],
  refs: ReadonlyMap<string, ContractRef>,
): { authorizeStart?: NonNullable<ConstructorParameters<typeof WorkflowExecutor>[0]['authorizeStart']> } {
  if (authorize === undefined) return {};
  return {
    authorizeStart: async ({ principalId, bundleDigest, workflow }) => {
      const bundle = refs.get(bundleDigest);
      if (bundle === undefined) throw unsupported(`bundle digest ${bundleDigest} is not deployed here`);
      await authorize(principalId, bundle, workflow);
    },
  };
}

/** The workflow instance service (HTTP and NATS commands) over the executor and the deployed definitions. */
function instanceService(
  parts: WorkflowHostParts,
  executor: WorkflowExecutor,
  definitions: ReadonlyMap<string, ReadonlyMap<string, WorkflowDefinition>>,
  refs: ReadonlyMap<string, ContractRef>,
): WorkflowInstances {
  return new WorkflowInstances({
    executor,
    bundleOf: (digest) => refs.get(digest),
    definition: (digest, name) => definitions.get(digest)?.get(name),
    operations: parts.coordinator,
    listing: instanceListing(parts),
  });
}

/** The egress policy of the config's workflows.http: any public origin, or only those in allow; private addresses only with privateNetworks. */
function egressOf(http: WorkflowHttpConfig | undefined): EgressOptions {
  return { privateNetworks: http?.privateNetworks ?? false, ...(http?.allow ? { allow: http.allow } : {}) };
}

/**
 * Each deployed bundle's pipelines and workflows as instances run them, by digest and name; and
 * each bundle's ref. Every expression is compiled once here, by the host's evaluator: a deployment
 * holds no workflow that would fault on jq that does not compile.
 */
async function definitionsOf(
  bundles: Iterable<CompiledBundle>,
  evaluator: ExpressionEvaluator,
): Promise<{
  definitions: Map<string, Map<string, WorkflowDefinition>>;
  refs: Map<string, ContractRef>;
}> {
  const definitions = new Map<string, Map<string, WorkflowDefinition>>();
  const refs = new Map<string, ContractRef>();
  for (const compiled of bundles) {
    refs.set(compiled.digest, compiled.ref);
    const byName = new Map<string, WorkflowDefinition>();
    for (const [name, workflow] of await checkedRunnableWorkflows(compiled, evaluator))
      byName.set(name, { document: workflow.executable, cancellation: workflow.cancellation });
    definitions.set(compiled.digest, byName);
  }
  return { definitions, refs };
}

/** What the config's workflows.events says of the sink: its spaces, its stream and each principal's share of it (defaults where absent). */
function sinkOptions(
  parts: WorkflowHostParts,
  events: NonNullable<WorkflowsConfig['events']>,
  prefixes: { subjectPrefix: string; emitSubjectPrefix: string },
): Parameters<typeof eventSink>[2] {
  return {
    ...prefixes,
    stream: events.stream ?? workflowEventsDefaults.stream,
    eventsPerPrincipal: events.streamEventsPerPrincipal ?? workflowEventsDefaults.streamEventsPerPrincipal,
    ...(parts.onEmitStreamTrimFailed ? { onTrimFailed: parts.onEmitStreamTrimFailed } : {}),
  };
}

/**
 * Emitted events on core NATS, or on JetStream into the stream capturing the emitted space (made
 * or moved here, where permitted: ensureEmittedEventStream), each principal held to its share of
 * it (EmittedStreamTrim; this user's purge permission checked first: checkEmittedStreamTrim).
 */
async function eventSink(
  nc: NatsConnection,
  emit: 'nats' | 'jetstream',
  options: EmittedStreamOptions & Pick<NatsCloudEventSinkOptions, 'eventsPerPrincipal' | 'onTrimFailed'>,
): Promise<CloudEventSink> {
  const { emitSubjectPrefix, stream, eventsPerPrincipal, onTrimFailed } = options;
  if (emit === 'nats') return new NatsCloudEventSink(nc, { emitSubjectPrefix });
  const jsm = await jetstreamManager(nc, { checkAPI: false });
  await ensureEmittedEventStream(jsm, options);
  await checkEmittedStreamTrim(jsm, options);
  return new NatsCloudEventSink(nc, { emitSubjectPrefix, jetstream: true, stream, eventsPerPrincipal, ...(onTrimFailed ? { onTrimFailed } : {}) });
}

/**
 * Where an answer to an event sent as a request may go: the inbox of a publisher the config
 * allows that event's type (the broker proved the sender may publish it), or, without
 * publishers configured, any event publisher's inbox (all the coordinator's user may answer into).
 */
/** The publishers the config allows on each outside subject, `<subjectPrefix>.<type>`. */
function publishersBySubject(subjectPrefix: string, publishers: Record<string, string[]>): Map<string, string[]> {
  const bySubject = new Map<string, string[]>();
  for (const [principal, types] of Object.entries(publishers))
    for (const type of types) bySubject.set(`${subjectPrefix}.${type}`, [...(bySubject.get(`${subjectPrefix}.${type}`) ?? []), principal]);
  return bySubject;
}

/**
 * What the config's publishers decide for outside events: where an answer may go (a publisher the
 * config allows the event's type; without publishers, only an `_INBOX.evt.` inbox) and, with
 * publishers, whose in-flight slots an event takes (publishersOf). One map of subjects serves both.
 */
function publisherRules(subjectPrefix: string, publishers: Record<string, string[]> | undefined): Pick<ServeCloudEventsOptions, 'answers' | 'publishersOf'> {
  if (!publishers) return { answers: (_subject, reply) => reply.startsWith('_INBOX.evt.') };
  const bySubject = publishersBySubject(subjectPrefix, publishers);
  return {
    answers: (subject, reply) => (bySubject.get(subject) ?? []).some((principal) => reply.startsWith(`${inboxPrefixFor('evt', principal)}.`)),
    publishersOf: publishersKeys(bySubject),
  };
}

/**
 * The key of the publishers that may have sent an outside event on a subject (its in-flight
 * bound's, serveCloudEvents): the sorted set of those the config allows that type, so that one
 * publisher alone on its types holds slots of its own. A subject no configured publisher may use
 * (a user the operator made beside the generated ones) is keyed `[]`: all of those share one.
 */
export function publishersOf(subjectPrefix: string, publishers: Record<string, string[]>): (subject: string) => string {
  return publishersKeys(publishersBySubject(subjectPrefix, publishers));
}

function publishersKeys(bySubject: ReadonlyMap<string, string[]>): (subject: string) => string {
  const keys = new Map([...bySubject].map(([subject, principals]) => [subject, JSON.stringify([...new Set(principals)].sort())]));
  return (subject) => keys.get(subject) ?? '[]';
}
