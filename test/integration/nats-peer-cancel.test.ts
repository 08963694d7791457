/**
 * The peer SDK around a stop, on a real nats-server with the deployment's real permissions and
 * durable consumers. Once a peer has received the cancel of an attempt, a delivery of that
 * attempt's request does not start its handler (again): requests and cancels travel on two
 * consumers, and a request comes again after a handler failed (nak) or after an ack that was
 * lost; without this, work the coordinator cancelled — and may have been told `stopped` about —
 * would run after the cancel, its business effect included. And a handler stopped by the peer's
 * own close() (no cancel came) hands its request back: acknowledging it would lose the work.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { loadBundle } from '../../src/contract/bundle.js';
import type { JsonObject } from '../../src/contract/json.js';
import { connectNats, type NatsConnection } from '../../src/adapters/transport/nats.js';
import { inboxPrefixFor } from '../../src/adapters/transport/nats-names.js';
import { SystemClock } from '../../src/contract/clock.js';
import { buildDeployment, parseDeploymentConfig } from '../../src/deployment/config.js';
import type { RunningDeployment } from '../../src/deployment/types.js';
import { natsPrincipalPlan, passwordVariableOf } from '../../src/deployment/nats/permissions.js';
import { createNatsPeer } from '../../src/peer/nats-peer.js';
import type { Handler, Peer } from '../../src/peer/peer.js';
import { startNatsServer, type NatsServer, type NatsUser } from '../support/nats-server.js';
import { approve, e2eBundle, e2eNamespace, eventually } from '../support/nats-deployment-fixture.js';

const reviewers = ['alfa', 'bravo', 'charlie'];
/** The e2e bundle's `manual` interaction names these peers: the coordinator provisions their streams too. */
const manualPeers = ['delta', 'echo', 'foxtrot'];
const caller = { principalId: 'billing', senderPeerId: null };

/** The coordinator's deployment: durable NATS as the coordinator user, a memory store; ack_wait `ackWaitMs` (default 5 s). */
function deploymentConfig(servers: string, ackWaitMs?: number): JsonObject {
  return {
    store: 'memory:',
    transport: {
      kind: 'nats',
      servers,
      user: 'coordinator',
      passwordEnv: passwordVariableOf('coordinator'),
      mode: 'durable',
      manageStreams: true,
      durable: { duplicateWindowMs: 20_000, ...(ackWaitMs === undefined ? {} : { ackWaitMs }) },
    },
    bundles: ['bundle.json'],
    directory: { groups: { reviewers } },
    policy: { rules: [{ effect: 'allow' }] },
    attestations: [{ namespace: e2eNamespace, exclusivePeerPublishers: true }],
    deployment: { account: 'test', system: 'convoke', domain: 'peer-cancel' },
    http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 65536, waitMsMax: 10_000, principals: [{ principalId: 'web', tokenSha256: 'a'.repeat(64) }] },
    resultBatchMs: 0,
  };
}

/** The deployment's principal plan as nats-server users: the coordinator and one peer user each. */
function natsUsers(passwords: ReadonlyMap<string, string>): NatsUser[] {
  const plan = natsPrincipalPlan({
    namespaces: [e2eNamespace],
    coordinator: { user: 'coordinator', coordinatorId: 'coordinator', manageStreams: true },
    peers: Object.fromEntries([...reviewers, ...manualPeers].map((p) => [p, [e2eNamespace]])),
    commandClients: [],
  });
  return plan.map((p) => ({ user: p.user, password: passwords.get(p.user)!, ...p.permissions }));
}

interface Harness {
  deploy(ackWaitMs?: number): Promise<RunningDeployment>;
  /** A durable session of peer `peerId` serving the `first` interaction with `first`. */
  peer(peerId: string, first: Handler): Promise<Peer>;
  /** The same, with the connection it runs on. */
  session(peerId: string, first: Handler): Promise<{ peer: Peer; nc: NatsConnection }>;
}

/** charlie's handler fails once; the decision closes and its attempt is cancelled before the request comes again. */
async function cancelAfterFailure(h: Harness): Promise<void> {
  const deployment = await h.deploy();
  let charlieFailed!: () => void;
  const failed = new Promise<void>((resolve) => (charlieFailed = resolve));
  // charlie's first run fails (its request is handed back for redelivery 1 s later); every run
  // notes whether charlie had already received a cancel when it started.
  const runs: { cancelsSeen: number }[] = [];
  const charlie: Peer = await h.peer('charlie', () => {
    runs.push({ cancelsSeen: charlie.stats.cancels });
    if (runs.length === 1) {
      charlieFailed();
      throw new Error('a transient failure');
    }
    return approve;
  });
  // alfa approves once charlie has failed: first-success closes and charlie's attempt is cancelled
  // while its request waits to be delivered again.
  await h.peer('alfa', async () => (await failed, approve));
  const { result } = await deployment.coordinator.invoke(caller, {
    contract: loadBundle(e2eBundle()).ref,
    interaction: 'first',
    invocationKey: 'cancel-after-failure',
    input: { document: 'd' },
  });
  const decided = await deployment.coordinator.wait('billing', result.operationId, 'decision', 10_000);
  assert.equal(decided.result.decision?.outcome, 'success');
  await eventually(() => runs.length > 1 || charlie.stats.refused.cancelled > 0, "the redelivery of charlie's request");
  assert.equal(charlie.stats.cancels, 1, 'charlie received the cancel of its attempt');
  assert.deepEqual(runs, [{ cancelsSeen: 0 }], 'the handler ran once, before the cancel; never after it');
  assert.equal(charlie.stats.refused.cancelled, 1);
}

/** A cooperative handler stopped by its session's close(), then a new session of the same peer. */
async function stoppedByClose(h: Harness): Promise<void> {
  const deployment = await h.deploy();
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  // A cooperative handler: it stops when its signal aborts, as on a cancel.
  const first = await h.peer('alfa', (_input, { signal }) => {
    started();
    return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('stopping'))));
  });
  const { result } = await deployment.coordinator.invoke(caller, {
    contract: loadBundle(e2eBundle()).ref,
    interaction: 'first',
    invocationKey: 'stopped-by-close',
    input: { document: 'd' },
  });
  await running;
  await first.close(); // a rolling restart: this session stops; no cancel was sent
  await h.peer('alfa', () => approve);
  const decided = await deployment.coordinator.wait('billing', result.operationId, 'decision', 8_000);
  assert.equal(decided.reached, true, 'the request came back to the next session, which answered it');
  assert.deepEqual(
    decided.result.branches.filter((b) => b.peerId === 'alfa').map((b) => [b.status, b.result]),
    [['success', approve]],
  );
}

/**
 * A handler that takes a moment to stop on close(), whose session closes its connection right
 * after: close() must have handed the request back by then, or the broker redelivers it only
 * after ack_wait (30 s here, past the lease), and the close is not counted as a failure.
 */
async function handedBackBeforeConnectionCloses(h: Harness): Promise<void> {
  const deployment = await h.deploy(30_000);
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const first = await h.session('alfa', (_input, { signal }) => {
    started();
    // Cooperative, but its clean-up takes 200 ms.
    return new Promise((_resolve, reject) => signal.addEventListener('abort', () => setTimeout(() => reject(new Error('stopping')), 200)));
  });
  const { result } = await deployment.coordinator.invoke(caller, {
    contract: loadBundle(e2eBundle()).ref,
    interaction: 'first',
    invocationKey: 'handed-back-before-close',
    input: { document: 'd' },
  });
  await running;
  await first.peer.close();
  await first.nc.close(); // a process that stops: its connection goes right after the peer
  assert.equal(first.peer.stats.handedBack, 1, 'the stopped request is counted as handed back');
  assert.equal(first.peer.stats.failed, 0, 'not as failed');
  await h.peer('alfa', () => approve);
  const decided = await deployment.coordinator.wait('billing', result.operationId, 'decision', 6_000);
  assert.equal(decided.reached, true, 'the request came back to the next session at once, not after ack_wait');
  assert.deepEqual(
    decided.result.branches.filter((b) => b.peerId === 'alfa').map((b) => [b.status, b.result]),
    [['success', approve]],
  );
}

describe('the peer SDK: what it starts and acknowledges around a stop (real nats-server, durable)', { timeout: 60_000 }, () => {
  let server: NatsServer;
  let dir: string;
  const users = ['coordinator', ...reviewers, ...manualPeers];
  const passwords = new Map(users.map((u) => [u, randomBytes(8).toString('hex')]));
  const env = Object.fromEntries([...passwords].map(([u, p]) => [passwordVariableOf(u), p]));
  const open: { close(): Promise<unknown> }[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'convoke-peer-cancel-'));
    await writeFile(join(dir, 'bundle.json'), JSON.stringify(e2eBundle()));
    server = await startNatsServer({ users: natsUsers(passwords), jetstream: true });
  });
  // Each test's peer sessions and deployment go with it: a session left open would share the next test's consumers.
  afterEach(async () => {
    for (const c of open.reverse()) await c.close().catch(() => undefined);
    open.length = 0;
  });
  after(async () => {
    await server?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  async function deploy(ackWaitMs?: number): Promise<RunningDeployment> {
    const config = parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(deploymentConfig(server.url, ackWaitMs))), dir);
    const deployment = await buildDeployment(config, { clock: new SystemClock(), env, log: () => {} });
    open.push(deployment);
    return deployment;
  }

  const harness: Harness = {
    deploy: (ackWaitMs) => deploy(ackWaitMs),
    peer: async (peerId, first) => (await session(peerId, first)).peer,
    session: (peerId, first) => session(peerId, first),
  };

  async function session(peerId: string, first: Handler): Promise<{ peer: Peer; nc: NatsConnection }> {
    const login = { user: peerId, pass: passwords.get(peerId)!, inboxPrefix: inboxPrefixFor('peer', peerId) };
    const nc: NatsConnection = await connectNats({ servers: server.url, ...login });
    open.push(nc);
    const created = await createNatsPeer({ nc, namespace: e2eNamespace, peerId, durable: true, provisionWaitMs: 10_000, handlers: { first } });
    open.push(created);
    return { peer: created, nc };
  }

  it('a request handed back after its handler failed is refused unrun once its cancel came, and counted (refused.cancelled)', () =>
    cancelAfterFailure(harness));
  it('a handler stopped by close() (no cancel) hands its request back: the next session of the peer answers it', () => stoppedByClose(harness));
  it('close() resolves once its hand-backs are sent (the connection may close right after) and counts them as handed back, not failed', () =>
    handedBackBeforeConnectionCloses(harness));
});
