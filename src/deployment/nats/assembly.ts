/**
 * `convoke serve` on NATS: the coordinator's connection and transport, the JetStream resources of
 * durable mode, the durability gate on admissions, the command API, and what each NATS principal
 * of the deployment must be permitted (rendered into a nats-server config for operators).
 *
 * Core mode: one core-NATS transport; results, claims and cancel results arrive on plain
 * subscriptions; one attempt's worth of promises, no offline delivery (spec: memory mode).
 *
 * Durable mode (spec: "Outbox, durable delivery and recovery"; docs/design.md §5):
 * - per subject namespace and known peer, a requests stream and a results stream (file,
 *   work queue, discard new: nats-streams.ts) whose duplicate window must cover timeoutMs + max(settlementGraceMs, cancelTimeoutMs) of every
 *   deployed interaction: start is refused otherwise;
 * - a filtered durable consumer per peer for its requests and one for its cancels, provisioned
 *   here for every peer the deployment knows (directory groups and static audiences the bundles
 *   use, explicit branches), so peers bind without consumer-create permission;
 * - the coordinator's result, claim and cancel-result paths are durable consumers
 *   (`coordinatorConsumerName`), acknowledged only after the guarded append (runtime/intake.ts);
 * - checkDurability() at start (not ok: start fails) and every durabilityCheckIntervalMs, and at
 *   once on a lost connection: while it is not ok, new admissions are refused with
 *   AdapterError('unavailable', why) and the problem is logged. The gate wraps the store's create
 *   (the admission commit point), so the Coordinator itself is unchanged;
 * - a request that exhausts its deliveries (the peer's consumer reached max_deliver) is recorded
 *   as an observed failure of that attempt: retryable within the attempt budget, never a new branch.
 */
import { listingDeps } from '../listing.js';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { BundleRegistry, CompiledBundle } from '../../contract/bundle.js';
import { invalidInput, unavailable } from '../../contract/errors.js';
import { StaticDirectory } from '../../adapters/directory/static.js';
import { NatsConsumerPresence } from '../../adapters/directory/nats-presence.js';
import { StaticPolicy, policyTtlMsDefault } from '../../adapters/policy/static.js';
import { JetStreamEventStore } from '../../adapters/store/jetstream.js';
import { openStore } from '../../adapters/store/open.js';
import type { EventStore } from '../../adapters/store/types.js';
import { connectNats, NatsTransport } from '../../adapters/transport/nats.js';
import type { NatsLogin } from '../../adapters/transport/nats-creds.js';
import { jetStreamNotAnswering, retryWhileStarting, startupWait, type StartupWait } from '../../adapters/transport/nats-startup.js';
import { coordinatorConsumerName, inboxPrefixFor } from '../../adapters/transport/nats-names.js';
import { ConsumerMuxTransport, coordinatorKinds, coordinatorRoute } from '../../adapters/transport/nats-mux.js';
import type { StreamContinuity, ExhaustedInfo, Transport } from '../../adapters/transport/types.js';
import { SubjectNamespaceVerifier } from '../../adapters/verification/subject.js';
import type { Clock } from '../../contract/clock.js';
import { startCommandServer, type CommandServer } from '../../nats-api/commands.js';
import type { WorkflowHostFactory, WorkflowHosting } from '../../runtime/workflow-service.js';
import type { RunningDeployment, DeploymentConfig, DeploymentLog, NatsRuntime, NatsTransportConfig } from '../types.js';
import type { Logger } from '../../runtime/operation-log.js';
import type { HttpSettings } from '../../http/settings.js';
import { type ResolvedNatsTransport, checkNatsTransport, peersByNamespace, durableConfigFor, safeUrl } from './settings.js';
import { NatsDeploymentTransport } from './transport.js';
import { AdmissionGatedStore, DurabilityMonitor, watchConnection } from './durability.js';
import { releaseExhausted, watchRequestExhaustion } from './exhaustion.js';
import { Coordinator } from '../../runtime/coordinator.js';
import { attestedEffectFencing } from '../../runtime/capabilities.js';
import { observeStampSources } from '../../runtime/metrics.js';
import { pacedLog } from '../paced-log.js';

export interface NatsParts {
  clock: Clock;
  bundles: BundleRegistry;
  compiled: CompiledBundle[];
  http: HttpSettings;
  log: DeploymentLog;
  /** Where the coordinator logs the operation lifecycle; silent without one. */
  logger?: Logger;
  env: NodeJS.ProcessEnv;
  /** The coordinator's login when handed in (BuildOptions.natsLogin); else the password in transport.passwordEnv. */
  login?: NatsLogin;
  /** Hosts workflow instances beside the coordinator (and their NATS commands); none without it. */
  workflows?: WorkflowHostFactory;
}

/** Closes what was opened, last first, whatever fails. */
class Closers {
  private readonly stack: (() => Promise<unknown> | unknown)[] = [];
  push(close: () => Promise<unknown> | unknown): void {
    this.stack.push(close);
  }
  async closeAll(): Promise<void> {
    for (let close = this.stack.pop(); close; close = this.stack.pop()) await Promise.resolve(close()).catch(() => undefined);
  }
}

export async function buildNatsDeployment(config: DeploymentConfig, transportConfig: NatsTransportConfig, parts: NatsParts): Promise<RunningDeployment> {
  const settings = checkNatsTransport(transportConfig, parts.compiled);
  const login = parts.login ?? passwordLogin(settings, parts.env, transportConfig.credsFile);
  const closers = new Closers();
  try {
    return await assembleNats(config, settings, login, parts, closers);
  } catch (error) {
    await closers.closeAll();
    throw error;
  }
}

/** The transport's user with the password in the environment variable transport.passwordEnv names. */
function passwordLogin(settings: ResolvedNatsTransport, env: NodeJS.ProcessEnv, credsFile: string | undefined): NatsLogin {
  if (credsFile !== undefined)
    throw invalidInput(
      `deployment config: transport.credsFile ${credsFile} is read by convoke serve; a deployment built in code is handed its login (natsLogin)`,
    );
  if (settings.passwordEnv === undefined)
    throw invalidInput(
      'deployment config: transport.passwordEnv or transport.credsFile is needed (or give convoke serve --creds, or a context with a password or credentials)',
    );
  const pass = env[settings.passwordEnv];
  if (pass === undefined || pass === '')
    throw invalidInput(`deployment config: environment variable ${settings.passwordEnv} (transport.passwordEnv) is not set`);
  return { user: settings.user, pass };
}

async function assembleNats(
  config: DeploymentConfig,
  settings: ResolvedNatsTransport,
  login: NatsLogin,
  parts: NatsParts,
  closers: Closers,
): Promise<RunningDeployment> {
  const { clock, log } = parts;
  const phases = new StartupPhases(clock, log);
  const namespaces = [...new Set(parts.compiled.map((b) => b.bundle.subjectNamespace))];
  // One start-up wait for everything: a server that does not listen yet, a JetStream that does not answer yet.
  // In real time, as its sleeps are: an injected clock that stands still must not make it endless.
  const startup = startupWait(Date.now, (what, detail, waitMs) => log(`start-up: ${what} not ready (${detail}); trying again in ${waitMs} ms`));
  const connect = connector(settings, login, startup);
  const nc = await connect('coordinator');
  closers.push(() => nc.drain().catch(() => nc.close()));
  phases.done('connect');
  const durable = settings.mode === 'durable';
  const peers = peersByNamespace(parts.compiled, config.directory.groups);
  const { transport, byNamespace } = coordinatorTransport(nc, settings, durable ? peers : new Map(), log, clock);
  closers.push(() => transport.close());
  if (durable) await prepareDurable(settings, { byNamespace, peers, transport, startup }, phases);

  const monitor = new DurabilityMonitor(() => transport.checkDurability(), log);
  const inner = await openDeploymentStore(config.store, { clock, startup, log }, closers, connect);
  phases.done('store');
  const store = durable ? new AdmissionGatedStore(inner, () => monitor.problem()) : inner;
  let jsm: Promise<JetStreamManager> | undefined;
  const manager = () => (jsm ??= jetstreamManager(nc, { checkAPI: false }));
  const coordinator = natsCoordinator(config, { store, transport, durable, peers, byNamespace, manager, parts });
  closers.push(() => coordinator.close());
  observeStampSources(coordinator.metrics, inner);
  monitor.onBroken = async (brokenNamespaces, description) => {
    const closed = await coordinator.closeDurabilityLost(new Set(brokenNamespaces));
    if (closed > 0) log(`durability lost in ${brokenNamespaces.join(', ')} (${description}): ${closed} open operation(s) closed as indeterminate`);
  };
  await resumeCoordinator(coordinator, parts.compiled, phases);
  if (durable) {
    const watcher = await watchRequestExhaustion(nc, await manager(), peers, coordinator, clock, log);
    closers.push(() => watcher.close());
    monitor.start(settings.durabilityCheckIntervalMs);
    closers.push(() => monitor.stop());
  }
  watchConnection(nc, log, durable ? monitor : undefined);
  const workflows = await hostWorkflows(config, parts, { coordinator, store, nc, closers });
  const refusals = pacedLog(() => clock.nowMs(), log);
  const commands = await startCommandServer({
    transport,
    coordinator,
    ...(workflows ? { workflows: workflows.service } : {}),
    bundles: parts.bundles,
    waitMsMax: parts.http.waitMsMax,
    bodyLimitBytes: parts.http.bodyLimitBytes,
    queue: settings.commandQueue,
    senders: settings.commandSenders,
    replyInbox: (principalId) => inboxPrefixFor('cmd', principalId),
    onInternalError: (error) => log(`command: internal error: ${(error as Error)?.stack ?? String(error)}`, 'error'),
    onReplyFailure: (error, verb) => log(`command: could not reply to a ${verb} command: ${error instanceof Error ? error.message : String(error)}`, 'warn'),
    onMisaddressed: (verb, _principal, reason) => refusals(`command: ${verb} neither run nor answered: ${reason}`, 'warn'),
  });
  closers.push(() => commands.close());
  phases.done('command server');
  log(phases.summary(), 'info');
  const runtime = runtimeOf(settings, namespaces, durable ? peers : new Map(), commands, monitor);
  return deploymentOf({ coordinator, store, parts, closers, runtime, workflows });
}

/** The coordinator's connections (one name per role), waiting out a server that does not listen yet. */
function connector(settings: ResolvedNatsTransport, login: NatsLogin, startup: StartupWait) {
  return (role: string, servers = settings.servers) =>
    connectNats({
      servers,
      ...login,
      name: `convoke-${role}-${settings.coordinatorId}`,
      inboxPrefix: inboxPrefixFor('coord', settings.coordinatorId),
      startup,
    });
}

/** The coordinator of a NATS deployment: its store, transport, directory, policy and attestations. */
function natsCoordinator(
  config: DeploymentConfig,
  wiring: {
    store: EventStore;
    transport: Transport;
    durable: boolean;
    peers: Map<string, string[]>;
    byNamespace: Map<string, NatsTransport>;
    manager: () => Promise<JetStreamManager>;
    parts: NatsParts;
  },
): Coordinator {
  const { store, transport, durable, peers, byNamespace, manager, parts } = wiring;
  const { clock, log } = parts;
  return new Coordinator({
    store,
    transport,
    directory: new StaticDirectory({ groups: config.directory.groups }),
    // Durable mode observes presence from the peers' request consumers; core NATS has none to read.
    ...(durable ? { presence: new NatsConsumerPresence(manager, { peers, clock }), continuity: streamContinuity(byNamespace) } : {}),
    policy: new StaticPolicy({ rules: config.policy.rules, ttlMs: config.policy.ttlMs ?? policyTtlMsDefault }, clock),
    verifier: new SubjectNamespaceVerifier(config.attestations),
    effectFencing: attestedEffectFencing(config.attestations),
    clock,
    bundles: parts.bundles,
    deployment: { account: config.deployment.account, system: config.deployment.system, domain: config.deployment.domain },
    ...(config.resultBatchMs === undefined ? {} : { resultBatchMs: config.resultBatchMs }),
    ...(config.limits === undefined ? {} : { budgets: config.limits }),
    ...(config.admissionRate === undefined ? {} : { admissionRate: config.admissionRate }),
    ...(parts.logger ? { logger: parts.logger } : {}),
    onLostWrites: (operationId, description) => log(`durability lost in operation ${operationId} (${description}): it closed as indeterminate`),
    ...listingDeps(config),
  });
}

/**
 * Every inbound path, then the store watch, then recovery. The paths come first: durable results
 * of operations a previous process left open must have a subscriber even when no request of
 * theirs is republished; they are bound together (each kind's consumer is bound once, however
 * many interactions share it). Recovery comes before the exhaustion watch and the command
 * server: an operation a previous process left open is resumed (its continuity checked first)
 * before anything else may act on it.
 */
async function resumeCoordinator(coordinator: Coordinator, compiled: CompiledBundle[], phases: StartupPhases): Promise<void> {
  const inbound = compiled.flatMap((b) =>
    [...b.interactions.keys()].flatMap((interaction) => coordinatorKinds.map((kind) => [b.bundle.subjectNamespace, interaction, kind] as const)),
  );
  await Promise.all(inbound.map(([namespace, interaction, kind]) => coordinator.inboundPath(namespace, interaction, kind)));
  phases.done('inbound paths');
  // Coordinators sharing the store (several serve processes) follow each other's appends.
  await coordinator.watchStore();
  phases.done('store watch');
  const recovered = await coordinator.recover();
  phases.done(`recovery (${recovered.scanned} operation(s) read, ${recovered.resumed} open, ${recovered.failed} unreadable)`);
}

/**
 * One connection: core NATS for commands, and per durable namespace a JetStream transport whose
 * result, claim and cancel-result subscriptions go to the coordinator's durable consumers.
 */
function coordinatorTransport(nc: NatsConnection, settings: ResolvedNatsTransport, durablePeers: Map<string, string[]>, log: DeploymentLog, clock: Clock) {
  const byNamespace = new Map(
    [...durablePeers].map(([ns, peers]) => [ns, new NatsTransport(nc, { identity: settings.user, durable: durableConfigFor(ns, settings.durable, peers) })]),
  );
  let jsm: Promise<JetStreamManager> | undefined;
  // Logged, then deleted: it is never delivered again, and the peer's work-queue stream would keep it for good.
  const onExhausted = (consumer: string, info: ExhaustedInfo) => {
    log(`result path ${consumer}: ${info.subject || `stream seq ${info.streamSeq}`} exhausted ${info.deliveries} deliveries and will not be delivered again`);
    jsm ??= jetstreamManager(nc, { checkAPI: false });
    void jsm
      .then((m) => releaseExhausted(m, info.stream, info.streamSeq))
      .catch((e: unknown) => log(`deleting exhausted ${info.stream} seq ${info.streamSeq} failed: ${(e as Error).message}`));
  };
  const muxed = new Map<string, Transport>(
    [...byNamespace].map(([ns, t]) => [ns, new ConsumerMuxTransport(t, coordinatorRoute(ns, settings.coordinatorId), { onExhausted })]),
  );
  // A core handler's failure is its message lost: logged (paced, since a sender may cause it at will).
  const failures = pacedLog(() => clock.nowMs(), log);
  const onHandlerError = (subject: string, error: unknown) =>
    failures(
      `a handler of ${subject} failed; the message is not delivered again: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      'error',
    );
  return { transport: new NatsDeploymentTransport(new NatsTransport(nc, { identity: settings.user, onHandlerError }), muxed), byNamespace };
}

/** Stream continuity across restarts (StreamContinuity), from each namespace's durable transport. */
function streamContinuity(byNamespace: Map<string, NatsTransport>): StreamContinuity {
  return {
    createdUntilMs: (namespace) => byNamespace.get(namespace)?.streamsCreatedUntilMs(),
    lostSince: async (namespace, peers, createdUntilMs) => {
      const transport = byNamespace.get(namespace);
      return transport === undefined ? undefined : transport.streamsRecreatedSince(peers, createdUntilMs);
    },
  };
}

/**
 * Creates (or verifies) each namespace's streams within the start-up wait: a server restarted
 * after JetStream first answered ("jetstream is not enabled" while it starts again) is waited out
 * as at the first probe, instead of ending the start.
 */
export async function ensureStreamsWhileStarting(byNamespace: ReadonlyMap<string, Pick<NatsTransport, 'ensureStreams'>>, startup: StartupWait): Promise<void> {
  for (const [namespace, t] of byNamespace) await retryWhileStarting(`the streams of ${namespace}`, () => t.ensureStreams(), jetStreamNotAnswering, startup);
}

/**
 * JetStream answering (within the start-up wait), streams (created when managed), the guarantee checked (start fails if not proven), then the
 * consumers provisioned to the configured max_deliver and ack_wait — every known peer's and the
 * coordinator's own result paths — so a changed setting updates them instead of failing the bind.
 */
async function prepareDurable(
  settings: ResolvedNatsTransport,
  wiring: { byNamespace: Map<string, NatsTransport>; peers: Map<string, string[]>; transport: NatsDeploymentTransport; startup: StartupWait },
  phases: StartupPhases,
): Promise<void> {
  const { byNamespace, peers, transport, startup } = wiring;
  // A server still starting answers no JetStream request for a moment: waited out here, and again
  // while the streams are made (a server restarted meanwhile is starting again).
  for (const t of byNamespace.values()) await t.awaitJetStream(startup);
  if (settings.manageStreams) await ensureStreamsWhileStarting(byNamespace, startup);
  phases.done('streams');
  const check = await transport.checkDurability();
  if (!check.ok) throw unavailable(`durable NATS resources do not give the delivery guarantee: ${check.description}`);
  phases.done('durability check');
  for (const [ns, t] of byNamespace) {
    for (const peerId of peers.get(ns) ?? []) await t.provisionPeerConsumers(peerId);
    for (const kind of coordinatorKinds) await t.ensureDurableConsumer(`${ns}.*.*.${kind}.*`, coordinatorConsumerName(settings.coordinatorId, kind));
  }
  phases.done('consumers');
}

/**
 * Where a coordinator's start spends its time, logged once it is ready: an operator whose
 * coordinator is slow to listen sees which step it waited on (docs/operations.md, "Start-up").
 */
class StartupPhases {
  private readonly startedAtMs: number;
  private lastAtMs: number;
  private readonly spent: string[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly log: DeploymentLog,
  ) {
    this.startedAtMs = clock.nowMs();
    this.lastAtMs = this.startedAtMs;
  }

  done(phase: string): void {
    const nowMs = this.clock.nowMs();
    this.spent.push(`${phase} ${nowMs - this.lastAtMs} ms`);
    this.lastAtMs = nowMs;
    // Each step as it ends too: a start that hangs shows the last step it finished.
    this.log(`start-up: ${phase} done after ${nowMs - this.startedAtMs} ms`, 'info');
  }

  summary(): string {
    return `started in ${this.lastAtMs - this.startedAtMs} ms: ${this.spent.join(', ')}`;
  }
}

/**
 * Opens the store. A `jetstream:` URL without credentials uses the transport's user, password and
 * inbox prefix on a connection of its own, so no password appears in the config file (that user
 * then needs jetstreamStorePermissions). Any other URL is opened as usual.
 */
async function openDeploymentStore(
  url: string,
  { clock, startup, log }: { clock: Clock; startup: StartupWait; log: DeploymentLog },
  closers: Closers,
  connect: (role: string, servers?: string) => Promise<NatsConnection>,
): Promise<EventStore> {
  const jetstreamUrl = /^jetstream:(.*)$/i.exec(url)?.[1];
  const parsed = jetstreamUrl === undefined ? undefined : safeUrl(jetstreamUrl);
  const credentialed = parsed !== undefined && (parsed.username !== '' || parsed.searchParams.has('user') || parsed.searchParams.has('pass'));
  if (parsed === undefined || credentialed) {
    const store = await openStore(url, { clock, startup, notice: (line) => log(line) });
    closers.push(() => store.close());
    return store;
  }
  const nc = await connect('store', `${parsed.protocol}//${parsed.host}`);
  closers.push(() => nc.close());
  const store = await JetStreamEventStore.open({
    connection: nc,
    streamName: parsed.searchParams.get('stream') ?? undefined,
    subjectPrefix: parsed.searchParams.get('prefix') ?? undefined,
    acceptRecreated: parsed.searchParams.get('acceptRecreated') ?? undefined,
    startup,
    onNotice: (line) => log(line),
  });
  closers.push(() => store.close());
  return store;
}

function runtimeOf(
  settings: ResolvedNatsTransport,
  namespaces: string[],
  peers: Map<string, string[]>,
  commands: CommandServer,
  monitor: DurabilityMonitor,
): NatsRuntime {
  return {
    mode: settings.mode,
    coordinatorId: settings.coordinatorId,
    namespaces,
    peers,
    commandSubjects: commands.subjects,
    admissionProblem: () => (settings.mode === 'durable' ? monitor.problem() : undefined),
    checkNow: () => (settings.mode === 'durable' ? monitor.run() : Promise.resolve()),
  };
}

/** Workflow instances beside the coordinator (when the deployment hosts them), on its store and NATS connection. */
async function hostWorkflows(
  config: DeploymentConfig,
  parts: NatsParts,
  wiring: { coordinator: Coordinator; store: EventStore; nc: NatsConnection; closers: Closers },
): Promise<WorkflowHosting | undefined> {
  if (!parts.workflows) return undefined;
  const { coordinator, store, nc, closers } = wiring;
  const workflows = await parts.workflows({
    coordinator,
    bundles: parts.bundles,
    store,
    clock: parts.clock,
    settings: config.workflows ?? {},
    nats: nc,
    listing: { operators: new Set(config.operators ?? []) },
    metrics: coordinator.metrics.registry,
    authorizeStart: (principalId, bundle, workflow) => coordinator.authorizeWorkflowStart(principalId, bundle, workflow),
  });
  closers.push(() => workflows.close());
  return workflows;
}

function deploymentOf(args: {
  coordinator: Coordinator;
  store: EventStore;
  parts: NatsParts;
  closers: Closers;
  runtime: NatsRuntime;
  workflows: WorkflowHosting | undefined;
}): RunningDeployment {
  const { parts } = args;
  let closing: Promise<void> | undefined;
  return {
    coordinator: args.coordinator,
    bundles: parts.bundles,
    store: args.store,
    clock: parts.clock,
    http: parts.http,
    bus: undefined,
    peers: [],
    nats: args.runtime,
    ...(args.workflows ? { workflows: args.workflows.service } : {}),
    ...(args.workflows?.events ? { workflowEvents: args.workflows.events } : {}),
    // Commands stop first (waits answered), then the coordinator's queued appends, then transport and store.
    close: () => (closing ??= args.closers.closeAll()),
  };
}
