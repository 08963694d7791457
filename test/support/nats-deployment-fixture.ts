/**
 * A whole convoke deployment on a real nats-server, for integration and fault tests:
 *
 * - nats-server (test/support/nats-server.ts: loopback, random port, temp JetStream store) whose
 *   users are exactly the deployment's principal plan (natsPrincipalPlan: the coordinator, one
 *   user per peer with peerPermissions, one per command principal), plus an unrestricted `admin`
 *   the tests use to read the JetStream store directly;
 * - `convoke serve` as a child process (test/support/http-server.ts startServe) on that server,
 *   with a sqlite, jetstream or memory store;
 * - `convoke peer` child processes (test/support/nats-cli-entry.ts), one per peer;
 * - command clients and peer impersonations over NatsTransport, with the right inbox prefixes.
 *
 * Passwords are random per fixture and reach the children only through their environment.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before } from 'node:test';
import { loadBundle } from '../../src/contract/bundle.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import type { ContractRef } from '../../src/contract/types.js';
import type { StoredTransition } from '../../src/events/types.js';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { durableStreamNames, inboxPrefixFor } from '../../src/adapters/transport/nats-names.js';
import { connectNats, NatsTransport, type DurableConfig, type NatsConnection } from '../../src/adapters/transport/nats.js';
import { SystemClock } from '../../src/contract/clock.js';
import { commandTimeoutMs, sendCommand, type CommandReply } from '../../src/nats-api/commands.js';
import { sendWorkflowCommand, type WorkflowReply } from '../../src/nats-api/workflow-commands.js';
import type { NatsDurableSettings } from '../../src/deployment/types.js';
import { natsDurableDefaults } from '../../src/deployment/nats/settings.js';
import { natsPrincipalPlan, passwordVariableOf, type NatsPrincipalPlan } from '../../src/deployment/nats/permissions.js';
import type { InvocationResult } from '../../src/projections/views.js';
import type { PeerConfig, PeerInteractionConfig } from '../../src/cli/commands/peer.js';
import { startServe, repoRoot, type ServeProcess } from './http-server.js';
import type { WorkflowEventsConfig } from '../../src/runtime/workflow-service.js';
import { madeForSuite, startNatsServer, type NatsServer, type NatsUser } from './nats-server.js';

const here = dirname(fileURLToPath(import.meta.url));
const runningFromSource = import.meta.url.endsWith('.ts');

export type StoreKind = 'sqlite' | 'jetstream' | 'memory';

export interface PeerSpec {
  interactions: Record<string, PeerInteractionConfig>;
  effectSink?: 'sqlite' | 'memory';
}

export interface NatsFixtureOptions {
  mode: 'core' | 'durable';
  store: StoreKind;
  bundle: JsonObject;
  groups: Record<string, string[]>;
  /** Peers that run as `convoke peer` processes (startPeer); every other audience peer only gets a NATS user. */
  peers: Record<string, PeerSpec>;
  commandClients: string[];
  durable?: NatsDurableSettings;
  durabilityCheckIntervalMs?: number;
  waitMsMax?: number;
  /** The serve config's resultBatchMs (absent: the default). */
  resultBatchMs?: number;
  /** The serve config's lowered byte budgets (`limits`; absent: the hard maxima). */
  limits?: { resultBytesMax?: number; transitionBytesMax?: number; recordBytesMax?: number };
  /** The serve config's operator principals (they list every principal's operations). */
  operators?: string[];
  /** Start nats-server with its monitoring endpoints (server.monitorUrl); benches read /varz. */
  monitoring?: boolean;
  /** `serve` writes its log (standard error) to serve.log in the fixture's directory, not to a pipe this process reads (benches). */
  serveLogToFile?: boolean;
  /** The serve config's `workflows` section (absent: the defaults). */
  workflows?: JsonObject;
  /** The serve config's policy rules (absent: one rule allowing everything). */
  policy?: JsonObject[];
  /**
   * Bundles of other subject namespaces deployed beside `bundle` (each attested peer-exclusive):
   * their audience peers get publish rights there too, as a peer that belongs to two deployments.
   */
  extraBundles?: JsonObject[];
}

export interface PeerProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
}

/**
 * How long a starting `convoke serve` may take to be ready: a generous bound, not a rule. A
 * restarted one recovers every open operation from the store first, which has taken over a
 * minute on a loaded 2-core machine with hundreds open.
 */
const serveReadyTimeoutMs = 180_000;

export class NatsDeploymentFixture {
  server!: NatsServer;
  serve: ServeProcess | undefined;
  readonly peers = new Map<string, PeerProcess>();
  readonly contract: ContractRef;
  readonly namespace: string;
  /** `namespace`, then those of extraBundles. */
  readonly namespaces: string[];
  private readonly passwords = new Map<string, string>();
  private readonly adminPassword = randomBytes(12).toString('hex');
  /** The bearer token of the HTTP principal `web` (the config holds only its hash). */
  readonly webToken = `web-${randomBytes(12).toString('hex')}`;
  /** The NATS users the server was started with (the deployment's principal plan). */
  readonly plan: NatsPrincipalPlan[];
  private readonly open: { close(): Promise<unknown> }[] = [];
  private readonly servers: NatsServer[] = [];
  private readonly otherServes: ServeProcess[] = [];

  private constructor(
    readonly dir: string,
    readonly storeDir: string,
    readonly options: NatsFixtureOptions,
  ) {
    const compiled = loadBundle(options.bundle);
    this.contract = compiled.ref;
    this.namespace = compiled.bundle.subjectNamespace;
    const extra = (options.extraBundles ?? []).map((b) => loadBundle(b));
    this.namespaces = [this.namespace, ...extra.map((b) => b.bundle.subjectNamespace)];
    // Each peer gets a peer's permissions in every namespace whose audiences name it.
    const namespacesOf = new Map<string, Set<string>>(Object.keys(options.peers).map((p) => [p, new Set([this.namespace])]));
    for (const bundle of [compiled, ...extra]) {
      for (const i of bundle.interactions.values()) {
        const audience = i.spec.audience;
        for (const p of 'peers' in audience ? audience.peers : (options.groups[audience.group] ?? []))
          namespacesOf.set(p, (namespacesOf.get(p) ?? new Set()).add(bundle.bundle.subjectNamespace));
      }
    }
    this.plan = natsPrincipalPlan({
      namespaces: this.namespaces,
      coordinator: { user: 'coordinator', coordinatorId: 'coordinator', manageStreams: true, ...(options.store === 'jetstream' ? { jetstreamStore: {} } : {}) },
      peers: Object.fromEntries([...namespacesOf].map(([p, namespaces]) => [p, [...namespaces]])),
      commandClients: options.commandClients,
      ...(options.workflows?.events ? { events: options.workflows.events as WorkflowEventsConfig } : {}),
    });
    for (const p of this.plan) this.passwords.set(p.user, randomBytes(12).toString('hex'));
  }

  static async start(options: NatsFixtureOptions): Promise<NatsDeploymentFixture> {
    const dir = await mkdtemp(join(tmpdir(), 'convoke-nats-e2e-'));
    const fixture = new NatsDeploymentFixture(dir, join(dir, 'jetstream'), options);
    try {
      await fixture.startServer();
      await fixture.writeFiles();
    } catch (error) {
      await fixture.dispose();
      throw error;
    }
    return fixture;
  }

  get url(): string {
    return this.server.url;
  }

  /** The environment every child gets: each principal's password under its conventional variable. */
  env(): Record<string, string> {
    return Object.fromEntries([...this.passwords].map(([user, pass]) => [passwordVariableOf(user), pass]));
  }

  /** The unrestricted `admin` user's password (tests and benches only). */
  adminSecret(): string {
    return this.adminPassword;
  }

  password(user: string): string {
    const pass = this.passwords.get(user);
    if (pass === undefined) throw new Error(`no NATS user ${user} in this fixture`);
    return pass;
  }

  get serveConfigPath(): string {
    return join(this.dir, 'serve.json');
  }

  peerConfigPath(peerId: string, variant = ''): string {
    return join(this.dir, `peer-${peerId}${variant}.json`);
  }

  get effectsPath(): string {
    return join(this.dir, 'effects.db');
  }

  get storePath(): string {
    return join(this.dir, 'ops.db');
  }

  users(): NatsUser[] {
    const users: NatsUser[] = this.plan.map((p) => ({
      user: p.user,
      password: this.password(p.user),
      publish: p.permissions.publish,
      subscribe: p.permissions.subscribe,
    }));
    return [...users, { user: 'admin', password: this.adminPassword }];
  }

  async startServer(port?: number): Promise<void> {
    this.server = await startNatsServer({
      users: this.users(),
      jetstream: true,
      storeDir: this.storeDir,
      monitoring: this.options.monitoring ?? false,
      ...(port === undefined ? {} : { port }),
    });
    this.servers.push(this.server);
  }

  /** Stops nats-server, runs `whileDown`, and starts it again on the same port with the same store dir. */
  async restartServer(whileDown: () => Promise<void> = async () => {}): Promise<void> {
    const port = this.server.port;
    await this.server.stop();
    try {
      await whileDown();
    } finally {
      await this.startServer(port);
    }
  }

  /** POST /contract-invocations on the serve process's HTTP facade, as the `web` principal. */
  async httpInvoke(interaction: string, input: JsonValue, key: string, waitMs = 10_000): Promise<{ status: number; body: JsonObject }> {
    if (!this.serve) throw new Error('serve is not running');
    const response = await fetch(`${this.serve.url}/contract-invocations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.webToken}` },
      body: JSON.stringify({ contract: this.contract, interaction, invocationKey: key, input, waitMs }),
    });
    return { status: response.status, body: (await response.json()) as JsonObject };
  }

  private serveConfig(): JsonObject {
    const o = this.options;
    const store = o.store === 'sqlite' ? 'sqlite:ops.db' : o.store === 'jetstream' ? `jetstream:${this.url}` : 'memory:';
    const transport: JsonObject = {
      kind: 'nats',
      servers: this.url,
      user: 'coordinator',
      passwordEnv: passwordVariableOf('coordinator'),
      mode: o.mode,
      manageStreams: true,
      ...(o.durabilityCheckIntervalMs === undefined ? {} : { durabilityCheckIntervalMs: o.durabilityCheckIntervalMs }),
      ...(o.durable === undefined ? {} : { durable: o.durable as JsonObject }),
    };
    return {
      store,
      transport,
      bundles: ['bundle.json', ...(o.extraBundles ?? []).map((_, n) => this.extraBundleFile(n))],
      directory: { groups: o.groups },
      policy: { rules: o.policy ?? [{ effect: 'allow' }], ttlMs: 60_000 },
      attestations: this.namespaces.map((namespace) => ({ namespace, exclusivePeerPublishers: true })),
      deployment: { account: 'test', system: 'convoke', domain: 'nats-e2e' },
      http: {
        host: '127.0.0.1',
        port: 0,
        bodyLimitBytes: 65536,
        waitMsMax: o.waitMsMax ?? 30_000,
        principals: [{ principalId: 'web', tokenSha256: createHash('sha256').update(this.webToken, 'utf8').digest('hex') }],
      },
      ...(o.resultBatchMs === undefined ? {} : { resultBatchMs: o.resultBatchMs }),
      ...(o.limits === undefined ? {} : { limits: o.limits as JsonObject }),
      ...(o.operators === undefined ? {} : { operators: o.operators }),
      ...(o.workflows === undefined ? {} : { workflows: o.workflows }),
    };
  }

  peerConfig(peerId: string, overrides: Partial<PeerConfig> = {}): PeerConfig {
    const spec = this.options.peers[peerId];
    if (!spec) throw new Error(`no peer process ${peerId} in this fixture`);
    return {
      peerId,
      namespace: this.namespace,
      nats: { servers: this.url, passwordEnv: passwordVariableOf(peerId) },
      durable: this.options.mode === 'durable',
      effectSink: spec.effectSink === 'sqlite' ? `sqlite:${this.effectsPath}` : 'memory:',
      interactions: spec.interactions,
      provisionWaitMs: 30_000,
      ...overrides,
    };
  }

  async writePeerConfig(peerId: string, overrides: Partial<PeerConfig> = {}, variant = ''): Promise<string> {
    const path = this.peerConfigPath(peerId, variant);
    await writeFile(path, JSON.stringify(this.peerConfig(peerId, overrides), null, 2));
    return path;
  }

  private extraBundleFile(n: number): string {
    return `bundle-extra-${n}.json`;
  }

  private async writeFiles(): Promise<void> {
    await writeFile(join(this.dir, 'bundle.json'), JSON.stringify(this.options.bundle, null, 2));
    for (const [n, bundle] of (this.options.extraBundles ?? []).entries())
      await writeFile(join(this.dir, this.extraBundleFile(n)), JSON.stringify(bundle, null, 2));
    await writeFile(this.serveConfigPath, JSON.stringify(this.serveConfig(), null, 2));
    for (const peerId of Object.keys(this.options.peers)) await this.writePeerConfig(peerId);
  }

  /**
   * Rewrites the configs (the server URL changes only if the port does) and starts `convoke serve`.
   * It listens once it recovered every operation a previous process left open (docs/operations.md,
   * "Start-up"): in a long chaos run on a loaded two-core machine that took up to 83 s, hence the
   * generous bound.
   */
  async startServe(options: { onSpawn?: (child: ChildProcess) => void } = {}): Promise<ServeProcess> {
    await writeFile(this.serveConfigPath, JSON.stringify(this.serveConfig(), null, 2));
    this.serve = await startServe(this.serveConfigPath, {
      env: this.env(),
      readyTimeoutMs: serveReadyTimeoutMs,
      ...(this.options.serveLogToFile ? { stderrFile: join(this.dir, 'serve.log') } : {}),
      ...options,
    });
    return this.serve;
  }

  /**
   * Starts one more `convoke serve` on the same config (same user, coordinatorId and store): a
   * second coordinator of the deployment. Not `serve`; dispose() stops it too.
   */
  async startAnotherServe(): Promise<ServeProcess> {
    const serve = await startServe(this.serveConfigPath, { env: this.env(), readyTimeoutMs: serveReadyTimeoutMs });
    this.otherServes.push(serve);
    return serve;
  }

  /** Starts `convoke peer` and resolves once it printed its ready line. */
  async startPeer(peerId: string, configPath = this.peerConfigPath(peerId)): Promise<PeerProcess> {
    const peer = spawnCli(['peer', '--config', configPath], this.env());
    await waitForLine(peer, new RegExp(`convoke peer ${peerId} ready`), 40_000);
    this.peers.set(peerId, peer);
    return peer;
  }

  async startPeers(): Promise<void> {
    await Promise.all(Object.keys(this.options.peers).map((p) => this.startPeer(p)));
  }

  /** A command client connected as its own NATS user (inbox prefix `_INBOX.cmd.<principal>`). */
  async client(principal: string): Promise<CommandClient> {
    const transport = await NatsTransport.connect(
      { servers: this.url, user: principal, pass: this.password(principal), inboxPrefix: inboxPrefixFor('cmd', principal) },
      { identity: principal },
    );
    this.open.push(transport);
    return new CommandClient(transport, principal, this.contract);
  }

  /** A connection as `user` with its own permissions and inbox prefix (an event publisher, a command principal); closed by dispose(). */
  async userConnection(user: string, inboxPrefix: string): Promise<NatsConnection> {
    const nc = await connectNats({ servers: this.url, user, pass: this.password(user), inboxPrefix });
    this.open.push(nc);
    return nc;
  }

  /** An unrestricted connection (inspection of streams and consumers); closed by dispose(). */
  async adminConnection(): Promise<NatsConnection> {
    const nc = await connectNats({ servers: this.url, user: 'admin', pass: this.adminPassword });
    this.open.push(nc);
    return nc;
  }

  /** A connection with a peer's credentials (its permissions), durable in `namespace` if the deployment is. */
  async peerTransport(peerId: string, namespace = this.namespace): Promise<NatsTransport> {
    // Consumer settings as the coordinators provision them: binding checks them.
    const { maxDeliver, ackWaitMs } = { ...natsDurableDefaults, ...this.options.durable };
    const durable: DurableConfig | undefined =
      this.options.mode === 'durable' ? { namespace, peers: [peerId], duplicateWindowMs: 1, maxDeliver, ackWaitMs } : undefined;
    const transport = await NatsTransport.connect(
      { servers: this.url, user: peerId, pass: this.password(peerId), inboxPrefix: inboxPrefixFor('peer', peerId) },
      { identity: peerId, durable, publishAckTimeoutMs: 2_000 },
    );
    this.open.push(transport);
    return transport;
  }

  /** The operation's stored transitions, read from the store directly (sqlite file or JetStream as admin). */
  async log(operationId: string): Promise<StoredTransition[]> {
    const store =
      this.options.store === 'sqlite'
        ? new SqliteEventStore({ path: this.storePath, clock: new SystemClock() })
        : this.options.store === 'jetstream'
          ? await JetStreamEventStore.open({ servers: this.url, user: 'admin', pass: this.adminPassword })
          : undefined;
    if (!store) throw new Error('a memory store cannot be read from the test process');
    try {
      const read = await store.read(operationId);
      if (read.kind !== 'ok') throw new Error(`reading ${operationId}: ${read.kind} ${read.description}`);
      return read.transitions;
    } finally {
      await store.close();
    }
  }

  /** A peer's two durable streams (in `namespace`). */
  streams(peerId: string, namespace = this.namespace) {
    return durableStreamNames(namespace, peerId);
  }

  /**
   * SIGKILLs every process this fixture started, at once and without waiting: for a test file
   * that must exit while a failed run still holds them (dispose() never ran), so that no peer,
   * coordinator or nats-server outlives it.
   */
  killAll(): void {
    const children = [
      ...[...this.peers.values()].map((p) => p.child),
      ...[this.serve, ...this.otherServes].map((s) => s?.child),
      ...this.servers.map((s) => s.process),
    ];
    for (const child of children) if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }

  async dispose(): Promise<void> {
    await Promise.all(this.open.map((c) => c.close().catch(() => undefined)));
    await Promise.all([...this.peers.values()].map((p) => p.stop()));
    await this.serve?.stop(5_000);
    for (const serve of this.otherServes) await serve.stop(5_000);
    for (const server of this.servers.reverse()) await server.dispose();
    await rm(this.dir, { recursive: true, force: true });
  }
}

export class CommandClient {
  constructor(
    readonly transport: NatsTransport,
    readonly principal: string,
    private readonly contract: ContractRef,
  ) {}

  invoke(interaction: string, input: JsonValue, options: { key?: string; waitFor?: 'decision' | 'settled'; waitMs?: number } = {}): Promise<CommandReply> {
    const body = {
      contract: this.contract,
      interaction,
      invocationKey: options.key ?? `k-${randomBytes(8).toString('hex')}`,
      input,
      ...(options.waitFor ? { waitFor: options.waitFor } : {}),
      waitMs: options.waitMs ?? 15_000,
    };
    return sendCommand(this.transport, this.principal, 'invoke', body, commandTimeoutMs(body.waitMs));
  }

  get(operationId: string, options: { waitFor?: 'decision' | 'settled'; waitMs?: number } = {}): Promise<CommandReply> {
    const body = { operationId, ...(options.waitFor ? { waitFor: options.waitFor } : {}), waitMs: options.waitMs ?? 15_000 };
    return sendCommand(this.transport, this.principal, 'get', body, commandTimeoutMs(body.waitMs));
  }

  send(verb: 'invoke' | 'get' | 'cancel', body: unknown, timeoutMs = 10_000): Promise<CommandReply> {
    return sendCommand(this.transport, this.principal, verb, body, timeoutMs);
  }

  /** `workflow-start` of the bundle's `workflow` under `invocationKey`: the command's reply. */
  startWorkflow(workflow: string, invocationKey: string, input: JsonObject): Promise<WorkflowReply> {
    return sendWorkflowCommand(this.transport, this.principal, 'workflow-start', { bundle: { ...this.contract }, workflow, invocationKey, input }, 10_000);
  }

  /** startWorkflow's instance id; throws with the reply when it names none. */
  async startedInstance(workflow: string, invocationKey: string, input: JsonObject): Promise<string> {
    const reply = await this.startWorkflow(workflow, invocationKey, input);
    if (!('instance' in reply)) throw new Error(`workflow-start of ${workflow}: ${JSON.stringify(reply)}`);
    return reply.instance.instanceId;
  }
}

/** A suite's deployment (deploymentForSuite): its fixture, started, and the command client its tests share. */
export interface DeploymentSuite {
  readonly fixture: NatsDeploymentFixture;
  readonly client: CommandClient;
}

export interface DeploymentSuiteStart {
  /** Starts what the suite's tests need on the started fixture (serve, peers, clients of its own): serve alone when absent. */
  startUp?: (f: NatsDeploymentFixture) => Promise<unknown>;
  /** The command principal whose client (`client`) the tests share, connected once startUp is done. */
  client?: string;
  /** Runs after the tests on a deployment that started (checks of what its processes wrote, processes of the suite's own to stop first); the fixture is disposed of even when it throws. */
  beforeDispose?: (f: NatsDeploymentFixture) => unknown;
}

/**
 * Inside a `describe` (or at a test file's top level): a deployment of the suite's own (`options`),
 * started before its tests and disposed of after them, with all it runs, even when start-up failed
 * half-way. Read the fields inside the tests, once made.
 */
export function deploymentForSuite(options: NatsFixtureOptions, start: DeploymentSuiteStart = {}): DeploymentSuite {
  const made: { fixture?: NatsDeploymentFixture; client?: CommandClient } = {};
  before(async () => {
    const f = (made.fixture = await NatsDeploymentFixture.start(options));
    await (start.startUp ? start.startUp(f) : f.startServe());
    if (start.client !== undefined) made.client = await f.client(start.client);
  });
  after(async () => {
    const f = made.fixture;
    if (f === undefined) return;
    try {
      await start.beforeDispose?.(f);
    } finally {
      await f.dispose();
    }
  });
  return {
    get fixture() {
      return madeForSuite(made.fixture, 'deployment');
    },
    get client() {
      if (start.client === undefined) throw new Error('the suite names no command principal for its client');
      return madeForSuite(made.client, `${start.client} client`);
    },
  };
}

/** The types of a log's events, in order. */
export const eventTypes = (log: readonly StoredTransition[]): string[] =>
  log.flatMap((stored) => stored.transition.events.map((event) => event.type as string));

/** The InvocationResult of a 200/202 reply; throws with the error otherwise. */
export function resultOf(reply: CommandReply): InvocationResult {
  if (!('result' in reply)) throw new Error(`expected a result, got status ${reply.status}: ${JSON.stringify(reply.error)}`);
  if ('omitted' in reply) throw new Error(`expected the whole result, got one without ${reply.omitted.members.join(', ')}`);
  return reply.result;
}

// ── child processes ──────────────────────────────────────────────────────────

function cliEntryArgs(): string[] {
  const entry = join(here, runningFromSource ? 'nats-cli-entry.ts' : 'nats-cli-entry.js');
  return runningFromSource ? ['--import', 'tsx', entry] : [entry];
}

/** Runs the NATS CLI entry (peer, invoke) from source under tsx or compiled, like this file. */
export function spawnCli(args: string[], env: Record<string, string>): PeerProcess {
  const child = spawn(process.execPath, [...cliEntryArgs(), ...args], { cwd: repoRoot(), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    output: () => out,
    exited,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export async function waitForLine(p: PeerProcess, pattern: RegExp, timeoutMs: number): Promise<void> {
  const deadlineMs = Date.now() + timeoutMs;
  while (!pattern.test(p.output())) {
    if (p.child.exitCode !== null || p.child.signalCode !== null) throw new Error(`process exited before ${pattern}:\n${p.output()}`);
    if (Date.now() > deadlineMs) {
      p.child.kill('SIGKILL');
      throw new Error(`no ${pattern} within ${timeoutMs} ms:\n${p.output()}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Polls until the predicate holds; bounded. */
export async function eventually(predicate: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadlineMs = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadlineMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// ── the test contract ────────────────────────────────────────────────────────

export const e2eNamespace = 'e2e.v1.lab';
export const approve = { verdict: 'approve' };
export const reject = { verdict: 'reject' };

/**
 * One interaction per completion mode over the `reviewers` group, plus `forge` (all-successful)
 * and `manual` (all-terminal over peers no process serves: the tests answer for them).
 * Inputs steer the peers deterministically: `rejectBy`, `slow` and `slowReject` name peers.
 */
export function e2eBundle(overrides: JsonObject = {}): JsonObject {
  const base: JsonObject = {
    input: {
      type: 'object',
      required: ['document'],
      additionalProperties: false,
      properties: {
        document: { type: 'string' },
        rejectBy: { type: 'array', items: { type: 'string' } },
        slow: { type: 'array', items: { type: 'string' } },
        slowReject: { type: 'array', items: { type: 'string' } },
      },
    },
    result: { type: 'object', required: ['verdict'], additionalProperties: false, properties: { verdict: { enum: ['approve', 'reject'] } } },
    output: { type: 'object' },
    audience: { group: 'reviewers' },
    success: { pointer: '/verdict', equals: 'approve' },
    timeoutMs: 15_000,
    leaseMs: 10_000,
    renewIntervalMs: 2_000,
    settlementGraceMs: 5_000,
    cancelTimeoutMs: 5_000,
    aggregate: { kind: 'tally', pointer: '/verdict' },
    ...overrides,
  };
  return {
    profile: '0.2',
    contract: { id: 'e2e.review', version: '1.0.0' },
    subjectNamespace: e2eNamespace,
    interactions: {
      first: { ...base, completion: { mode: 'first-success' }, siblings: 'cancel' },
      quorum: { ...base, completion: { mode: 'quorum', count: 2 } },
      fraction: { ...base, completion: { mode: 'quorum', fraction: { num: 2, den: 3 } } },
      allok: { ...base, completion: { mode: 'all-successful' } },
      allterm: { ...base, completion: { mode: 'all-terminal' } },
      forge: { ...base, completion: { mode: 'all-successful' } },
      manual: { ...base, audience: { peers: ['delta', 'echo', 'foxtrot'] }, completion: { mode: 'all-terminal' } },
    },
  };
}

/** A reviewer: approves, unless the input names it in rejectBy / slow / slowReject. */
export function reviewerSpec(peerId: string, delayMs = 1_500): PeerSpec['interactions'][string] {
  return {
    result: approve,
    rules: [
      { when: { pointer: '/slowReject', contains: peerId }, result: reject, delayMs },
      { when: { pointer: '/rejectBy', contains: peerId }, result: reject },
      { when: { pointer: '/slow', contains: peerId }, result: approve, delayMs },
    ],
  };
}

/**
 * The forged-result test publishes its forgeries while the slow reviewer's answer is pending, a
 * connection and several round trips after the invocation: its reviewers wait longer, so that a
 * loaded machine still lands the forgeries before the decision.
 */
const forgeDelayMs = 6_000;

export function reviewerPeers(peerIds: string[], effectSink: PeerSpec['effectSink'] = 'memory'): Record<string, PeerSpec> {
  const interactions = ['first', 'quorum', 'fraction', 'allok', 'allterm', 'forge'];
  const spec = (p: string, i: string) => reviewerSpec(p, i === 'forge' ? forgeDelayMs : undefined);
  return Object.fromEntries(peerIds.map((p) => [p, { effectSink, interactions: Object.fromEntries(interactions.map((i) => [i, spec(p, i)])) }]));
}
