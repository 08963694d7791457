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
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription as NatsSubscription } from '@nats-io/transport-node';
import type { BundleRegistry, CompiledBundle } from '../contract/bundle.js';
import { invalidInput, unavailable } from '../contract/errors.js';
import { parseStrictBytes } from '../contract/ijson.js';
import { tokenPattern, tokenSchema } from '../contract/ids.js';
import { compileChecker } from '../contract/validation.js';
import { checkRequestMessage } from '../events/wire-schemas.js';
import type { StoredTransition, Transition } from '../events/types.js';
import { decideDispatchRecorded } from '../machines/decide.js';
import { StaticDirectory } from '../adapters/directory/static.js';
import { NatsConsumerPresence } from '../adapters/directory/nats-presence.js';
import { StaticPolicy } from '../adapters/policy/static.js';
import { JetStreamEventStore } from '../adapters/store/jetstream.js';
import { openStore } from '../adapters/store/open.js';
import type { AppendOutcome, EventStore, ReadOutcome, StoreFailure } from '../adapters/store/types.js';
import { BoundedMap } from '../contract/bounded-map.js';
import { connectNats, NatsTransport, type DurableConfig } from '../adapters/transport/nats.js';
import {
  coordinatorConsumerName,
  durableLayout,
  durableStreamNames,
  inboxPrefixFor,
  maxDeliveriesAdvisorySubject,
  type DurableLayout,
} from '../adapters/transport/nats-names.js';
import { ConsumerMuxTransport, coordinatorKinds, coordinatorRoute } from '../adapters/transport/nats-mux.js';
import { commandClientPermissions, coordinatorPermissions, peerPermissions, type NatsPermissions } from '../adapters/transport/nats-permissions.js';
import type { DurabilityCheck, StreamContinuity, ExhaustedInfo, MessageHandler, PublishOptions, PublishReceipt, SubscribeOptions, Subscription, Transport, TransportCapabilities } from '../adapters/transport/types.js';
import { SubjectNamespaceVerifier } from '../adapters/verification/subject.js';
import type { Clock } from './clock.js';
import { commandQueueDefault, startCommandServer, type CommandServer } from './commands.js';
import { limits } from '../contract/limits.js';
import type { Deployment, DeploymentConfig, HttpSettings, NatsDurableSettings, NatsTransportConfig } from './config.js';
import { Coordinator } from './coordinator.js';
import { attestedEffectFencing } from './capabilities.js';
import { observeStampSources } from './metrics.js';

// ── settings ─────────────────────────────────────────────────────────────────

/**
 * Defaults of durable mode; the duplicate window defaults to what the deployed interactions require.
 * ack_wait is short because live work never waits it out (subscribers send in-progress acks, see
 * nats-consumers.ts): it is how soon a stopped process's unacknowledged messages go to another.
 */
export const natsDurableDefaults = { maxDeliver: 5, ackWaitMs: 5_000 } as const;
export const durabilityCheckIntervalMsDefault = 5_000;
/** Advisory sequences remembered, so a re-emitted advisory is not recorded twice. */
const exhaustedSeenMax = 10_000;

export interface ResolvedNatsTransport {
  servers: string;
  user: string;
  passwordEnv: string;
  mode: 'core' | 'durable';
  coordinatorId: string;
  durable: Required<Pick<NatsDurableSettings, 'duplicateWindowMs' | 'maxDeliver' | 'ackWaitMs'>> & Pick<NatsDurableSettings, 'maxMsgs' | 'maxMsgBytes'>;
  manageStreams: boolean;
  durabilityCheckIntervalMs: number;
  commandQueue: string;
  commandSenders: Record<string, string>;
}

const positiveMs = (max: number, min = 1) => ({ type: 'integer', minimum: min, maximum: max }) as const;

/**
 * The `{"kind":"nats"}` transport of the deployment config (config.ts embeds it in its schema;
 * it lives here so config.ts can import it without an import cycle at load).
 */
export const natsTransportSchema = {
  type: 'object',
  required: ['kind', 'servers', 'user', 'passwordEnv', 'mode'],
  additionalProperties: false,
  properties: {
    kind: { const: 'nats' },
    servers: { type: 'string', minLength: 1, maxLength: 4096 },
    user: { type: 'string', minLength: 1, maxLength: 256 },
    passwordEnv: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]{0,127}$' },
    mode: { enum: ['core', 'durable'] },
    coordinatorId: tokenSchema,
    durable: {
      type: 'object',
      additionalProperties: false,
      properties: {
        duplicateWindowMs: positiveMs(limits.timeoutMsMax + limits.settlementGraceMsMax + limits.cancelTimeoutMsMax),
        maxMsgs: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
        maxMsgBytes: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
        // Accepted by the schema only to be refused with its reason (checkNatsTransport).
        maxBytes: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
        maxDeliver: { type: 'integer', minimum: 1, maximum: 1000 },
        ackWaitMs: positiveMs(limits.leaseMsMax, 100),
      },
    },
    manageStreams: { type: 'boolean' },
    durabilityCheckIntervalMs: positiveMs(600_000, 100),
    commandQueue: tokenSchema,
    commandSenders: { type: 'object', propertyNames: tokenSchema, maxProperties: 4096, additionalProperties: tokenSchema },
  },
} as const;

const checkTransportShape = compileChecker<NatsTransportConfig & Required<Pick<NatsTransportConfig, 'servers' | 'user' | 'passwordEnv' | 'mode'>>>(natsTransportSchema, 'transport');

/**
 * Checks a nats transport (again: configs built in code skip the file's schema) and fills in the
 * defaults. Every problem is reported at once.
 */
export function checkNatsTransport(transport: NatsTransportConfig, compiled: CompiledBundle[]): ResolvedNatsTransport {
  const t = checkTransportShape(transport);
  const problems: string[] = [];
  const coordinatorId = t.coordinatorId ?? t.user;
  if (!tokenPattern.test(coordinatorId)) problems.push(`transport.coordinatorId is needed: user ${JSON.stringify(t.user)} is not a token-safe id`);
  if (t.mode === 'core' && t.durable !== undefined) problems.push('transport.durable is only for mode "durable"');
  const requiredWindowMs = requiredDuplicateWindowMs(compiled);
  const durable = {
    duplicateWindowMs: t.durable?.duplicateWindowMs ?? requiredWindowMs,
    maxDeliver: t.durable?.maxDeliver ?? natsDurableDefaults.maxDeliver,
    ackWaitMs: t.durable?.ackWaitMs ?? natsDurableDefaults.ackWaitMs,
    ...(t.durable?.maxMsgs === undefined ? {} : { maxMsgs: t.durable.maxMsgs }),
    ...(t.durable?.maxMsgBytes === undefined ? {} : { maxMsgBytes: t.durable.maxMsgBytes }),
  };
  if (t.durable?.maxBytes !== undefined) {
    problems.push('transport.durable.maxBytes is not supported: nats-server 2.9 evicts a stored message when a small one lands at a stream\'s byte limit, even under discard new; bound bytes with maxMsgs and maxMsgBytes instead');
  }
  if (t.mode === 'durable') problems.push(...duplicateWindowProblems(compiled, durable.duplicateWindowMs));
  if (problems.length > 0) throw invalidInput(`deployment config: ${problems.join('; ')}`);
  return {
    servers: t.servers,
    user: t.user,
    passwordEnv: t.passwordEnv,
    mode: t.mode,
    coordinatorId,
    durable,
    manageStreams: t.manageStreams ?? false,
    durabilityCheckIntervalMs: t.durabilityCheckIntervalMs ?? durabilityCheckIntervalMsDefault,
    commandQueue: t.commandQueue ?? commandQueueDefault,
    commandSenders: t.commandSenders ?? {},
  };
}

/**
 * What an interaction needs the duplicate window to cover: requests are republished with the same
 * Msg-Id until the deadline, cancels until the cancel timeout after closure, and business results
 * are recorded until the settlement grace ends — closure is at the deadline at the latest.
 */
export function interactionWindowMs(spec: { timeoutMs: number; settlementGraceMs: number; cancelTimeoutMs: number }): number {
  return spec.timeoutMs + Math.max(spec.settlementGraceMs, spec.cancelTimeoutMs);
}

export function requiredDuplicateWindowMs(compiled: CompiledBundle[]): number {
  let windowMs = 1;
  for (const b of compiled) for (const i of b.interactions.values()) windowMs = Math.max(windowMs, interactionWindowMs(i.spec));
  return windowMs;
}

export function duplicateWindowProblems(compiled: CompiledBundle[], duplicateWindowMs: number): string[] {
  const problems: string[] = [];
  for (const b of compiled) {
    for (const i of b.interactions.values()) {
      const needMs = interactionWindowMs(i.spec);
      if (needMs > duplicateWindowMs) {
        problems.push(`transport.durable.duplicateWindowMs ${duplicateWindowMs} does not cover ${b.ref.id}/${i.id}: timeoutMs + max(settlementGraceMs, cancelTimeoutMs) = ${needMs}`);
      }
    }
  }
  return problems;
}

/**
 * Every peer each namespace can address: members of the directory groups its interactions name,
 * static audiences, and explicit branch peers. Sorted, for stable provisioning and configs.
 */
export function peersByNamespace(compiled: CompiledBundle[], groups: Record<string, string[]>): Map<string, string[]> {
  const byNamespace = new Map<string, Set<string>>();
  for (const b of compiled) {
    const peers = byNamespace.get(b.bundle.subjectNamespace) ?? new Set<string>();
    byNamespace.set(b.bundle.subjectNamespace, peers);
    for (const i of b.interactions.values()) {
      const audience = i.spec.audience;
      for (const p of 'peers' in audience ? audience.peers : (groups[audience.group] ?? [])) peers.add(p);
      for (const branch of i.spec.branches ?? []) peers.add(branch.peerId);
    }
  }
  return new Map([...byNamespace].map(([ns, peers]) => [ns, [...peers].sort()]));
}

export function durableConfigFor(namespace: string, settings: ResolvedNatsTransport['durable'], peers: readonly string[]): DurableConfig {
  const config: DurableConfig = { namespace, peers, duplicateWindowMs: settings.duplicateWindowMs, maxDeliver: settings.maxDeliver, ackWaitMs: settings.ackWaitMs };
  if (settings.maxMsgs !== undefined) config.maxMsgs = settings.maxMsgs;
  if (settings.maxMsgBytes !== undefined) config.maxMsgBytes = settings.maxMsgBytes;
  return config;
}

// ── the coordinator's transport ──────────────────────────────────────────────

/**
 * One connection, several namespaces: a subject a namespace's durable streams capture goes
 * through that namespace's durable transport; everything else (commands) through core NATS.
 */
export class NatsDeploymentTransport implements Transport {
  readonly capabilities: TransportCapabilities;
  readonly identity: string;
  private readonly routes: { layout: DurableLayout; transport: Transport }[];

  constructor(
    private readonly core: NatsTransport,
    durable: Map<string, Transport>,
  ) {
    this.identity = core.identity;
    this.capabilities = { durable: durable.size > 0, resultFencing: core.capabilities.resultFencing && [...durable.values()].every((t) => t.capabilities.resultFencing) };
    // Placing a subject needs no peer list: the namespace's durable subjects have one shape.
    this.routes = [...durable].map(([namespace, transport]) => ({ layout: durableLayout(namespace, []), transport }));
  }

  publish(subject: string, data: Uint8Array, options?: PublishOptions): Promise<PublishReceipt> {
    return this.transportFor(subject).publish(subject, data, options);
  }

  subscribe(pattern: string, handler: MessageHandler, options?: SubscribeOptions): Promise<Subscription> {
    return this.transportFor(pattern).subscribe(pattern, handler, options);
  }

  request(subject: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    return this.core.request(subject, data, timeoutMs);
  }

  /** Every namespace's streams; not ok if any one is not (fail closed). */
  async checkDurability(): Promise<DurabilityCheck> {
    if (this.routes.length === 0) return { ok: false, description: 'core NATS: no durable streams' };
    const checks = await Promise.all(this.routes.map((r) => (r.transport.checkDurability ? r.transport.checkDurability() : Promise.resolve<DurabilityCheck>({ ok: false, description: 'no durability check' }))));
    const problems = checks.flatMap((c) => (c.ok ? [] : [c.description]));
    const broken = checks.flatMap((c) => (c.ok ? [] : (c.brokenNamespaces ?? [])));
    const repaired = checks.flatMap((c) => c.repaired ?? []);
    const repairs = repaired.length > 0 ? { repaired } : {};
    if (problems.length === 0) return { ok: true, ...repairs };
    return broken.length > 0 ? { ok: false, description: problems.join('; '), brokenNamespaces: broken, ...repairs } : { ok: false, description: problems.join('; '), ...repairs };
  }

  async close(): Promise<void> {
    await Promise.all(this.routes.map((r) => r.transport.close().catch(() => undefined)));
    await this.core.close();
  }

  private transportFor(subjectOrPattern: string): Transport {
    return this.routes.find((r) => r.layout.captures(subjectOrPattern))?.transport ?? this.core;
  }
}

// ── the admission gate ───────────────────────────────────────────────────────

/**
 * Refuses `create` (the admission commit point) while the gate names a problem; everything else
 * passes through, so operations already admitted carry on (their publications are receipted and
 * reconciled as usual). The coordinator answers the refusal as AdapterError('unavailable').
 */
export class AdmissionGatedStore implements EventStore {
  constructor(
    private readonly inner: EventStore,
    private readonly problem: () => string | undefined,
  ) {}

  get name(): string {
    return this.inner.name;
  }

  get capabilities() {
    return this.inner.capabilities;
  }

  async create(operationId: string, transition: Transition): Promise<AppendOutcome> {
    const problem = this.problem();
    if (problem !== undefined) return { kind: 'unavailable', description: problem };
    return this.inner.create(operationId, transition);
  }

  append(operationId: string, expectedRevision: string, transition: Transition): Promise<AppendOutcome> {
    return this.inner.append(operationId, expectedRevision, transition);
  }

  read(operationId: string): Promise<ReadOutcome> {
    return this.inner.read(operationId);
  }

  operationIds(): AsyncIterable<string> {
    return this.inner.operationIds();
  }

  tombstone(operationId: string): Promise<AppendOutcome | StoreFailure> {
    return this.inner.tombstone(operationId);
  }

  follow(listener: (operationId: string, stored: StoredTransition) => void): Promise<{ close(): Promise<void> }> {
    return this.inner.follow(listener);
  }

  watch(listener: (operationId: string, revision: string) => void): Promise<{ close(): Promise<void> }> {
    return this.inner.watch(listener);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/**
 * Re-verifies the broker resources on a period and at once after a reconnect; a lost connection
 * closes the gate immediately (nothing can be proven while disconnected). Logs each change.
 * A check that finds a namespace's streams provably broken (not merely unreachable) also hands
 * those namespaces to `onBroken`: the operations open there close as indeterminate.
 */
export class DurabilityMonitor {
  private current: string | undefined;
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  onBroken: ((namespaces: string[], description: string) => Promise<void>) | undefined;

  constructor(
    private readonly check: () => Promise<DurabilityCheck>,
    private readonly log: (line: string) => void,
  ) {}

  /** The reason admissions are refused, or undefined while durability is proven. */
  problem(): string | undefined {
    return this.current === undefined ? undefined : `durable delivery is not proven, new admissions are refused: ${this.current}`;
  }

  start(intervalMs: number): void {
    this.timer = setInterval(() => void this.run(), intervalMs);
    this.timer.unref();
  }

  /** The connection went away: nothing can be proven until it is back and checked. */
  disconnected(): void {
    if (!this.stopped) this.set('the NATS connection is lost');
  }

  /** Runs one check (or joins the one running) and updates the gate. */
  run(): Promise<void> {
    this.running ??= (async () => {
      try {
        const result = await this.check();
        for (const line of result.repaired ?? []) this.log(`durable consumer repaired: ${line}`);
        this.set(result.ok ? undefined : result.description);
        if (!result.ok && result.brokenNamespaces && result.brokenNamespaces.length > 0) await this.onBroken?.(result.brokenNamespaces, result.description);
      } catch (error) {
        this.set(`cannot verify: ${(error as Error).message}`);
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
  }

  private set(problem: string | undefined): void {
    if (problem === this.current) return;
    const before = this.current;
    this.current = problem;
    if (problem === undefined) this.log(`durability proven again (was: ${before}); admissions resume`);
    else this.log(`durability NOT proven, new admissions refused: ${problem}`);
  }
}

/**
 * Logs what the server tells the coordinator's connection — permission violations above all: the
 * server reports a refused publish or subscribe to the connection, never to the call — and feeds
 * disconnects and reconnects to the durability gate. Ends when the connection closes.
 */
function watchConnection(nc: NatsConnection, log: (line: string) => void, monitor: DurabilityMonitor | undefined): void {
  void (async () => {
    for await (const status of nc.status()) {
      switch (status.type) {
        case 'disconnect':
          log(`NATS: disconnected from ${status.server}`);
          monitor?.disconnected();
          break;
        case 'reconnect':
          log(`NATS: reconnected to ${status.server}`);
          void monitor?.run();
          break;
        case 'error':
          log(`NATS: ${status.error.message}`);
          break;
        default:
          break;
      }
    }
  })().catch(() => undefined);
}

// ── exhausted requests ───────────────────────────────────────────────────────

interface Advisory {
  stream_seq: number;
  deliveries: number;
}

function parseAdvisory(data: Uint8Array): Advisory | undefined {
  try {
    const value = JSON.parse(new TextDecoder().decode(data)) as Partial<Advisory>;
    return Number.isSafeInteger(value.stream_seq) && Number.isSafeInteger(value.deliveries) ? (value as Advisory) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Watches every peer consumer of the request streams for max-delivery exhaustion and records
 * it on the operation as the observed failure of that attempt (decideDispatchRecorded with
 * receipt `exhausted`: a retry within the attempt budget, or a failed branch). The request body
 * read back from the stream names the branch, attempt and fence; a superseded attempt is ignored
 * by the decider, so a re-emitted advisory changes nothing. Once recorded (a cancel: once seen;
 * its timeout decides settlement) the message is deleted: it is never delivered again, and a
 * work-queue stream would keep it, holding a slot of the peer's capacity for good.
 */
async function watchRequestExhaustion(nc: NatsConnection, jsm: JetStreamManager, peers: Map<string, string[]>, coordinator: Coordinator, clock: Clock, log: (line: string) => void): Promise<{ close(): void }> {
  const seen = new BoundedMap<string, true>(exhaustedSeenMax);
  const subscriptions: NatsSubscription[] = [];
  const record = async (stream: string, advisory: Advisory) => {
    const key = `${stream}/${advisory.stream_seq}`;
    if (seen.has(key)) return;
    seen.set(key, true);
    const stored = await jsm.streams.getMessage(stream, { seq: advisory.stream_seq });
    if (!stored) return;
    if (stored.subject.split('.').includes('request')) {
      const request = checkRequestMessage(parseStrictBytes(stored.data, 'exhausted request'));
      const entry = await coordinator.load(request.operationId);
      if (entry) {
        const receipt = { branchId: request.branchId, attempt: request.attempt, fence: request.fence, receipt: 'exhausted' as const, detail: `${advisory.deliveries} deliveries` };
        await coordinator.enqueue(entry, () => coordinator.commitDecided(entry, (current) => decideDispatchRecorded(current, [receipt], clock.nowMs())));
        log(`request ${stored.subject} exhausted ${advisory.deliveries} deliveries: recorded as a failed attempt ${request.attempt}`);
      }
    }
    await releaseExhausted(jsm, stream, advisory.stream_seq);
  };
  for (const [namespace, namespacePeers] of peers) {
    for (const peerId of namespacePeers) subscriptions.push(watchStreamExhaustion(nc, durableStreamNames(namespace, peerId).requests, record, log));
  }
  await nc.flush();
  return { close: () => subscriptions.forEach((s) => s.unsubscribe()) };
}

function watchStreamExhaustion(nc: NatsConnection, stream: string, record: (stream: string, advisory: Advisory) => Promise<void>, log: (line: string) => void): NatsSubscription {
  return nc.subscribe(maxDeliveriesAdvisorySubject(stream, '*'), {
    callback: (error, msg) => {
      const advisory = error ? undefined : parseAdvisory(msg.data);
      if (advisory) void record(stream, advisory).catch((e: unknown) => log(`recording an exhausted request of ${stream} failed: ${(e as Error).message}`));
    },
  });
}

/** Deletes a message that exhausted its deliveries (see watchRequestExhaustion); one already gone is fine. */
async function releaseExhausted(jsm: JetStreamManager, stream: string, seq: number): Promise<void> {
  await jsm.streams.deleteMessage(stream, seq, false).catch((error: unknown) => {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.NoMessageFound)) throw error;
  });
}

// ── assembly ─────────────────────────────────────────────────────────────────

export interface NatsParts {
  clock: Clock;
  bundles: BundleRegistry;
  compiled: CompiledBundle[];
  http: HttpSettings;
  log: (line: string) => void;
  env: NodeJS.ProcessEnv;
}

/** What a NATS deployment exposes beyond Deployment (diagnostics, tests). */
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

/** Closes what was opened, last first, whatever fails. */
class Closers {
  private readonly stack: (() => Promise<unknown> | unknown)[] = [];
  push(close: () => Promise<unknown> | unknown): void {
    this.stack.push(close);
  }
  async closeAll(): Promise<void> {
    while (this.stack.length > 0) await Promise.resolve(this.stack.pop()!()).catch(() => undefined);
  }
}

export async function buildNatsDeployment(config: DeploymentConfig, transportConfig: NatsTransportConfig, parts: NatsParts): Promise<Deployment> {
  const settings = checkNatsTransport(transportConfig, parts.compiled);
  const pass = parts.env[settings.passwordEnv];
  if (pass === undefined || pass === '') throw invalidInput(`deployment config: environment variable ${settings.passwordEnv} (transport.passwordEnv) is not set`);
  const closers = new Closers();
  try {
    return await assembleNats(config, settings, pass, parts, closers);
  } catch (error) {
    await closers.closeAll();
    throw error;
  }
}

async function assembleNats(config: DeploymentConfig, settings: ResolvedNatsTransport, pass: string, parts: NatsParts, closers: Closers): Promise<Deployment> {
  const { clock, log } = parts;
  const namespaces = [...new Set(parts.compiled.map((b) => b.bundle.subjectNamespace))];
  const connect = (role: string, servers = settings.servers) =>
    connectNats({ servers, user: settings.user, pass, name: `convoke-${role}-${settings.coordinatorId}`, inboxPrefix: inboxPrefixFor('coord', settings.coordinatorId) });
  const nc = await connect('coordinator');
  closers.push(() => nc.drain().catch(() => nc.close()));
  const durable = settings.mode === 'durable';
  const peers = peersByNamespace(parts.compiled, config.directory.groups);
  const { transport, byNamespace } = coordinatorTransport(nc, settings, durable ? peers : new Map(), log);
  closers.push(() => transport.close());
  if (durable) await prepareDurable(settings, byNamespace, peers, transport);

  const monitor = new DurabilityMonitor(() => transport.checkDurability(), log);
  const inner = await openDeploymentStore(config.store, clock, closers, connect);
  const store = durable ? new AdmissionGatedStore(inner, () => monitor.problem()) : inner;
  let jsm: Promise<JetStreamManager> | undefined;
  const manager = () => (jsm ??= jetstreamManager(nc, { checkAPI: false }));
  const coordinator = new Coordinator({
    store,
    transport,
    directory: new StaticDirectory({ groups: config.directory.groups }),
    // Durable mode observes presence from the peers' request consumers; core NATS has none to read.
    ...(durable ? { presence: new NatsConsumerPresence(manager, { peers, clock }), continuity: streamContinuity(byNamespace) } : {}),
    policy: new StaticPolicy({ rules: config.policy.rules, ttlMs: config.policy.ttlMs ?? 60_000 }, clock),
    verifier: new SubjectNamespaceVerifier(config.attestations),
    effectFencing: attestedEffectFencing(config.attestations),
    clock,
    bundles: parts.bundles,
    deployment: { account: config.deployment.account, system: config.deployment.system, domain: config.deployment.domain },
    ...(config.resultBatchMs === undefined ? {} : { resultBatchMs: config.resultBatchMs }),
    ...(config.limits === undefined ? {} : { budgets: config.limits }),
  });
  closers.push(() => coordinator.close());
  observeStampSources(coordinator.metrics, inner);
  monitor.onBroken = async (brokenNamespaces, description) => {
    const closed = await coordinator.closeDurabilityLost(new Set(brokenNamespaces));
    if (closed > 0) log(`durability lost in ${brokenNamespaces.join(', ')} (${description}): ${closed} open operation(s) closed as indeterminate`);
  };
  // Every inbound path before recovery: durable results of operations a previous process left
  // open must have a subscriber even when no request of theirs is republished.
  for (const b of parts.compiled) {
    for (const interaction of b.interactions.keys()) for (const kind of coordinatorKinds) await coordinator.inboundPath(b.bundle.subjectNamespace, interaction, kind);
  }
  // Coordinators sharing the store (several serve processes) follow each other's appends.
  await coordinator.watchStore();
  await coordinator.recover();
  if (durable) {
    const watcher = await watchRequestExhaustion(nc, await manager(), peers, coordinator, clock, log);
    closers.push(() => watcher.close());
    monitor.start(settings.durabilityCheckIntervalMs);
    closers.push(() => monitor.stop());
  }
  watchConnection(nc, log, durable ? monitor : undefined);
  const commands = await startCommandServer({
    transport,
    coordinator,
    bundles: parts.bundles,
    waitMsMax: parts.http.waitMsMax,
    bodyLimitBytes: parts.http.bodyLimitBytes,
    queue: settings.commandQueue,
    senders: settings.commandSenders,
    replyInbox: (principalId) => inboxPrefixFor('cmd', principalId),
    onInternalError: (error) => log(`command: internal error: ${(error as Error)?.stack ?? String(error)}`),
  });
  closers.push(() => commands.close());
  return deploymentOf({ coordinator, store, parts, closers, runtime: runtimeOf(settings, namespaces, durable ? peers : new Map(), commands, monitor) });
}

/**
 * One connection: core NATS for commands, and per durable namespace a JetStream transport whose
 * result, claim and cancel-result subscriptions go to the coordinator's durable consumers.
 */
function coordinatorTransport(nc: NatsConnection, settings: ResolvedNatsTransport, durablePeers: Map<string, string[]>, log: (line: string) => void) {
  const byNamespace = new Map([...durablePeers].map(([ns, peers]) => [ns, new NatsTransport(nc, { identity: settings.user, durable: durableConfigFor(ns, settings.durable, peers) })]));
  let jsm: Promise<JetStreamManager> | undefined;
  // Logged, then deleted: it is never delivered again, and the peer's work-queue stream would keep it for good.
  const onExhausted = (consumer: string, info: ExhaustedInfo) => {
    log(`result path ${consumer}: ${info.subject || `stream seq ${info.streamSeq}`} exhausted ${info.deliveries} deliveries and will not be delivered again`);
    jsm ??= jetstreamManager(nc, { checkAPI: false });
    void jsm.then((m) => releaseExhausted(m, info.stream, info.streamSeq)).catch((e: unknown) => log(`deleting exhausted ${info.stream} seq ${info.streamSeq} failed: ${(e as Error).message}`));
  };
  const muxed = new Map<string, Transport>([...byNamespace].map(([ns, t]) => [ns, new ConsumerMuxTransport(t, coordinatorRoute(ns, settings.coordinatorId), { onExhausted })]));
  return { transport: new NatsDeploymentTransport(new NatsTransport(nc, { identity: settings.user }), muxed), byNamespace };
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
 * Streams (created when managed), the guarantee checked (start fails if not proven), then the
 * consumers provisioned to the configured max_deliver and ack_wait — every known peer's and the
 * coordinator's own result paths — so a changed setting updates them instead of failing the bind.
 */
async function prepareDurable(settings: ResolvedNatsTransport, byNamespace: Map<string, NatsTransport>, peers: Map<string, string[]>, transport: NatsDeploymentTransport): Promise<void> {
  if (settings.manageStreams) for (const t of byNamespace.values()) await t.ensureStreams();
  const check = await transport.checkDurability();
  if (!check.ok) throw unavailable(`durable NATS resources do not give the delivery guarantee: ${check.description}`);
  for (const [ns, t] of byNamespace) {
    for (const peerId of peers.get(ns) ?? []) await t.provisionPeerConsumers(peerId);
    for (const kind of coordinatorKinds) await t.ensureDurableConsumer(`${ns}.*.*.${kind}.*`, coordinatorConsumerName(settings.coordinatorId, kind));
  }
}

/**
 * Opens the store. A `jetstream:` URL without credentials uses the transport's user, password and
 * inbox prefix on a connection of its own, so no password appears in the config file (that user
 * then needs jetstreamStorePermissions). Any other URL is opened as usual.
 */
async function openDeploymentStore(
  url: string,
  clock: Clock,
  closers: Closers,
  connect: (role: string, servers?: string) => Promise<NatsConnection>,
): Promise<EventStore> {
  const jetstreamUrl = /^jetstream:(.*)$/i.exec(url)?.[1];
  const parsed = jetstreamUrl === undefined ? undefined : safeUrl(jetstreamUrl);
  const credentialed = parsed !== undefined && (parsed.username !== '' || parsed.searchParams.has('user') || parsed.searchParams.has('pass'));
  if (parsed === undefined || credentialed) {
    const store = await openStore(url, { clock });
    closers.push(() => store.close());
    return store;
  }
  const nc = await connect('store', `${parsed.protocol}//${parsed.host}`);
  closers.push(() => nc.close());
  const store = await JetStreamEventStore.open({ connection: nc, streamName: parsed.searchParams.get('stream') ?? undefined, subjectPrefix: parsed.searchParams.get('prefix') ?? undefined });
  closers.push(() => store.close());
  return store;
}

function safeUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

function runtimeOf(settings: ResolvedNatsTransport, namespaces: string[], peers: Map<string, string[]>, commands: CommandServer, monitor: DurabilityMonitor): NatsRuntime {
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

function deploymentOf(args: { coordinator: Coordinator; store: EventStore; parts: NatsParts; closers: Closers; runtime: NatsRuntime }): Deployment {
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
    // Commands stop first (waits answered), then the coordinator's queued appends, then transport and store.
    close: () => (closing ??= args.closers.closeAll()),
  };
}

// ── what each NATS principal of a deployment needs ───────────────────────────

export interface JetStreamStoreNames {
  /** Default CONVOKE_OPS (the store's tombstones live in `<stream>_TOMBS`). */
  stream?: string;
  /** Default convoke. */
  prefix?: string;
}

/**
 * What a coordinator's user additionally needs to run a `jetstream:` store over its own
 * credentials (openDeploymentStore). Stream create only with manageStreams: a stream's config
 * (republish, sources) can write onto result subjects, so it is inside the attested boundary.
 */
export function jetstreamStorePermissions(names: JetStreamStoreNames = {}, options: { manageStreams?: boolean } = {}): NatsPermissions {
  const stream = names.stream ?? 'CONVOKE_OPS';
  const prefix = names.prefix ?? 'convoke';
  const publish = [`${prefix}.op.>`, `${prefix}.tomb.>`, '$JS.API.INFO'];
  for (const s of [stream, `${stream}_TOMBS`]) {
    publish.push(
      `$JS.API.STREAM.INFO.${s}`,
      `$JS.API.STREAM.MSG.GET.${s}`,
      `$JS.API.DIRECT.GET.${s}`,
      `$JS.API.DIRECT.GET.${s}.>`,
      `$JS.API.STREAM.PURGE.${s}`,
      `$JS.API.CONSUMER.CREATE.${s}`,
      `$JS.API.CONSUMER.CREATE.${s}.>`,
      `$JS.API.CONSUMER.DELETE.${s}.>`,
      `$JS.API.CONSUMER.INFO.${s}.>`,
      `$JS.API.CONSUMER.MSG.NEXT.${s}.>`,
      `$JS.ACK.${s}.>`,
      // Flow-control replies of the stamp feed (an ordered push consumer). Refused, the server
      // stalls the feed at its first flow-control window and every append falls back to a read.
      `$JS.FC.${s}.>`,
    );
    if (options.manageStreams) publish.push(`$JS.API.STREAM.CREATE.${s}`);
  }
  return { publish, subscribe: [] };
}

export function mergePermissions(...blocks: NatsPermissions[]): NatsPermissions {
  return { publish: [...new Set(blocks.flatMap((b) => b.publish))], subscribe: [...new Set(blocks.flatMap((b) => b.subscribe))] };
}

export interface NatsPrincipalPlan {
  user: string;
  role: 'coordinator' | 'peer' | 'command';
  permissions: NatsPermissions;
  /** The inbox prefix the principal's connections must use (its subscribe permission allows only that). */
  inboxPrefix: string;
}

export interface NatsPlanOptions {
  namespaces: string[];
  coordinator: { user: string; coordinatorId: string; manageStreams?: boolean; jetstreamStore?: JetStreamStoreNames };
  /** peer id -> the namespaces it serves. */
  peers: Map<string, string[]> | Record<string, string[]>;
  commandClients: string[];
}

/**
 * Every NATS user a deployment needs, each with exactly its permissions: the coordinator (all
 * namespaces, plus its jetstream store when it uses one), one user per peer (peerPermissions of
 * each namespace it serves), one per command principal (commandClientPermissions).
 */
export function natsPrincipalPlan(options: NatsPlanOptions): NatsPrincipalPlan[] {
  const c = options.coordinator;
  const peers = options.peers instanceof Map ? options.peers : new Map(Object.entries(options.peers));
  const peersOf = (ns: string) => [...peers].filter(([, namespaces]) => namespaces.includes(ns)).map(([peerId]) => peerId).sort();
  const coordinatorBlocks = options.namespaces.map((ns) => coordinatorPermissions(ns, c.coordinatorId, peersOf(ns), { manageStreams: c.manageStreams ?? false }));
  if (c.jetstreamStore) coordinatorBlocks.push(jetstreamStorePermissions(c.jetstreamStore, { manageStreams: c.manageStreams ?? false }));
  const plan: NatsPrincipalPlan[] = [{ user: c.user, role: 'coordinator', permissions: mergePermissions(...coordinatorBlocks), inboxPrefix: inboxPrefixFor('coord', c.coordinatorId) }];
  for (const [peerId, namespaces] of [...peers].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    plan.push({ user: peerId, role: 'peer', permissions: mergePermissions(...namespaces.map((ns) => peerPermissions(ns, peerId))), inboxPrefix: inboxPrefixFor('peer', peerId) });
  }
  for (const principal of options.commandClients) {
    plan.push({ user: principal, role: 'command', permissions: commandClientPermissions(principal), inboxPrefix: inboxPrefixFor('cmd', principal) });
  }
  return plan;
}

/** peer id -> namespaces, from peersByNamespace. */
export function namespacesByPeer(byNamespace: Map<string, string[]>): Map<string, string[]> {
  const result = new Map<string, string[]>();
  for (const [ns, peers] of byNamespace) for (const p of peers) result.set(p, [...(result.get(p) ?? []), ns]);
  return result;
}

/**
 * The `authorization { users: [...] }` block of a nats-server config. Passwords are written as
 * `$NAME` references, which nats-server resolves from its environment: no secret in the file.
 */
export function renderNatsAuthorization(plan: NatsPrincipalPlan[], passwordVariable: (user: string) => string): string {
  const quote = (s: string) => JSON.stringify(s);
  const list = (items: string[]) => `[\n${items.map((i) => `          ${quote(i)}`).join(',\n')}\n        ]`;
  const users = plan.map((p) => {
    const lines = [`    # ${p.role}; connect with inbox prefix ${p.inboxPrefix}`, '    {', `      user: ${quote(p.user)}`, `      password: $${passwordVariable(p.user)}`, '      permissions: {'];
    lines.push(`        publish: { allow: ${list(p.permissions.publish)} }`);
    lines.push(`        subscribe: { allow: ${list(p.permissions.subscribe)} }`);
    lines.push('      }', '    }');
    return lines.join('\n');
  });
  return `authorization {\n  users: [\n${users.join('\n')}\n  ]\n}\n`;
}

/** A conventional variable name for a user's password: CONVOKE_NATS_PASSWORD_<USER>. */
export function passwordVariableOf(user: string): string {
  return `CONVOKE_NATS_PASSWORD_${user.toUpperCase().replace(/[^A-Z0-9_]/g, '_')}`;
}

/**
 * The principal plan of a deployment config: its coordinator (with the jetstream store's
 * permissions when the store borrows the transport's credentials), every peer its bundles can
 * address, and the given command principals.
 */
export function natsPlanFor(config: DeploymentConfig, compiled: CompiledBundle[], commandClients: string[]): NatsPrincipalPlan[] {
  if (config.transport.kind !== 'nats') throw invalidInput('the deployment does not use a nats transport');
  const settings = checkNatsTransport(config.transport, compiled);
  const storeUrl = /^jetstream:(.*)$/i.exec(config.store)?.[1];
  const parsed = storeUrl === undefined ? undefined : safeUrl(storeUrl);
  const borrowsCredentials = parsed !== undefined && parsed.username === '' && !parsed.searchParams.has('user') && !parsed.searchParams.has('pass');
  const jetstreamStore = borrowsCredentials ? { stream: parsed.searchParams.get('stream') ?? undefined, prefix: parsed.searchParams.get('prefix') ?? undefined } : undefined;
  return natsPrincipalPlan({
    namespaces: [...new Set(compiled.map((b) => b.bundle.subjectNamespace))],
    coordinator: { user: settings.user, coordinatorId: settings.coordinatorId, manageStreams: settings.manageStreams, ...(jetstreamStore ? { jetstreamStore } : {}) },
    peers: namespacesByPeer(peersByNamespace(compiled, config.directory.groups)),
    commandClients,
  });
}

/** A whole nats-server config: loopback listener, JetStream on a file store, the plan's users. */
export function renderNatsServerConfig(plan: NatsPrincipalPlan[], options: { host: string; port: number; storeDir: string }): string {
  return [
    '# Generated from src/adapters/transport/nats-permissions.ts (natsPrincipalPlan); passwords come',
    '# from the environment variables named below, never from this file.',
    '# nats-server 2.10+: add `sync_interval: always` to the jetstream block (fsync before every ack).',
    `host: ${JSON.stringify(options.host)}`,
    `port: ${options.port}`,
    `jetstream { store_dir: ${JSON.stringify(options.storeDir)} }`,
    renderNatsAuthorization(plan, passwordVariableOf),
  ].join('\n');
}
