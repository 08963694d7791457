/**
 * A broker that loses acknowledged stream writes (nats-server 2.9 after a SIGKILL) while the
 * consumers' state survives, reproduced exactly by test/support/lost-writes.ts on a real
 * nats-server under `convoke serve` and `convoke peer`:
 *
 * - the peer's request consumer is left ahead of its stream (it has delivered sequences the
 *   stream no longer has); the durability check finds it and recreates it, so the requests stored
 *   afterwards at the reused sequences are delivered and their operations decide;
 * - the operation whose stored request was lost closes `indeterminate` (durability-lost), never
 *   `failed` at its lease as if the peer had not answered;
 * - a consumer whose surviving state still holds deliveries of messages the work queue has since
 *   removed is starved on nats-server before 2.11.0 (it spends every wake-up failing to redeliver
 *   one of them); the durability check sees it deliver nothing while a pull and a message wait,
 *   recreates it, and the waiting request is delivered and decides.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { fold } from '../../src/projections/record.js';
import { startNatsServer } from '../support/nats-server.js';
import { peerConsumerName } from '../../src/adapters/transport/nats-names.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { consumerSnapshotState, restoreStreamPart, snapshotRunningConsumer, snapshotStreamPart, type StoreSnapshot } from '../support/lost-writes.js';
import { NatsDeploymentFixture, approve, e2eBundle, e2eNamespace, eventually, resultOf, type CommandClient } from '../support/nats-deployment-fixture.js';

/**
 * Invokes `allok` under `key` until answered, at most `retries` retries 250 ms apart: right after a
 * broker restart a command or its reply can be lost, and admissions are refused (503) until the
 * coordinator has reconnected and proven its streams again; the key makes a retry safe.
 */
async function invokeUntilAnswered(client: CommandClient, key: string, waitMs: number, retries: number) {
  for (let tries = 0; ; tries++) {
    try {
      return resultOf(await client.invoke('allok', { document: key }, { key, waitMs }));
    } catch (error) {
      if (tries >= retries) throw error;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/**
 * Asks the broker again while a request right after its restart fails (timed out, or JetStream
 * still loading its streams): what is asked is read-only, so asking again is safe.
 */
async function askAgain<T>(ask: () => Promise<T>): Promise<T> {
  for (let tries = 0; ; tries++) {
    try {
      return await ask();
    } catch (error) {
      if (tries >= 40) throw error;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** Reads an operation, asking again while a command or its reply is lost to a reconnect. */
async function getUntilAnswered(client: CommandClient, operationId: string) {
  for (let tries = 0; ; tries++) {
    try {
      return resultOf(await client.get(operationId, { waitMs: 0 }));
    } catch (error) {
      if (tries >= 40) throw error;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/**
 * Waits until the command client's connection and the coordinator's command subscriptions are
 * back after a broker restart: a command sent while the client reconnects is dropped by nats.js
 * with its outgoing buffer when it dials again (NATS is at most once), and would wait out its
 * whole reply timeout; this asks with a short one until a get is answered.
 */
async function commandsAnswered(client: CommandClient, operationId: string): Promise<void> {
  for (let tries = 0; ; tries++) {
    try {
      resultOf(await client.send('get', { operationId, waitMs: 0 }, 1_000));
      return;
    } catch (error) {
      if (tries >= 40) throw error;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/**
 * A durable deployment on a SQLite store where allok goes to alfa alone, its durability checked
 * every 300 ms, with serve and alfa started, and billing's command client.
 */
async function startAlfaDeployment(
  allok: { result: typeof approve; delayMs?: number },
  durable: { ackWaitMs: number; maxDeliver?: number },
  bundle = e2eBundle(),
): Promise<{ f: NatsDeploymentFixture; client: CommandClient }> {
  const f = await NatsDeploymentFixture.start({
    mode: 'durable',
    store: 'sqlite',
    bundle,
    groups: { reviewers: ['alfa'] },
    peers: { alfa: { interactions: { allok } } },
    commandClients: ['billing'],
    durable,
    durabilityCheckIntervalMs: 300,
  });
  await Promise.all([f.startServe(), f.startPeer('alfa')]);
  return { f, client: await f.client('billing') };
}

describe('NATS durable: a broker that lost acknowledged stream writes', { timeout: 150_000 }, () => {
  let f: NatsDeploymentFixture;
  let client: CommandClient;

  before(async () => {
    // allok goes to alfa alone (attempts 1, lease 10 s): a lost request would fail it at its lease.
    ({ f, client } = await startAlfaDeployment({ result: approve }, { ackWaitMs: 1_000 }));
  });
  after(() => f?.dispose());

  const decide = (key: string, waitMs = 10_000) => invokeUntilAnswered(client, key, waitMs, 120);

  it('a consumer ahead of its stream is detected and recreated, and an operation whose stored request was lost closes indeterminate (durability-lost), never failed', async () => {
    const stream = f.streams('alfa').requests;
    const consumer = peerConsumerName('alfa', 'request');
    for (let i = 0; i < 3; i++) assert.equal((await decide(`before-${i}`)).decision?.outcome, 'success');
    // The messages as they were here are what the broker will come back with.
    let older: StoreSnapshot | undefined;
    await f.restartServer(async () => {
      older = await snapshotStreamPart(f.storeDir, stream, 'msgs');
    });
    try {
      for (let i = 0; i < 4; i++) assert.equal((await decide(`between-${i}`)).decision?.outcome, 'success');
      // alfa stops; the next request is stored, acknowledged to the coordinator, and never taken.
      await f.peers.get('alfa')!.stop();
      const lost = (await decide('lost', 0)).operationId;
      const jsm = await jetstreamManager(await f.adminConnection());
      await eventually(
        async () =>
          (await jsm.streams.getMessage(stream, { last_by_subj: subjectFor(e2eNamespace, 'allok', lost, 'request', 'alfa') }).catch(() => null)) !== null,
        'the request stored',
      );
      const deliveredBefore = (await jsm.consumers.info(stream, consumer)).delivered.stream_seq;

      await f.restartServer(() => restoreStreamPart(f.storeDir, stream, older!));
      const jsmAfter = await askAgain(async () => jetstreamManager(await f.adminConnection()));
      await f.startPeer('alfa');

      // Right after the restart a command or its reply can be lost (the client is reconnecting):
      // such a get answers nothing yet, and is asked again.
      await eventually(
        () =>
          client.get(lost, { waitMs: 0 }).then(
            (r) => resultOf(r).decision !== null,
            () => false,
          ),
        'the operation whose request was lost closed',
        30_000,
      );
      const closed = await getUntilAnswered(client, lost);
      assert.deepEqual(
        [closed.decision?.outcome, closed.decision?.reason, closed.settlement.status],
        ['indeterminate', 'durability-lost', 'indeterminate'],
        JSON.stringify(closed),
      );
      assert.match(
        f.serve!.stdout() + f.serve!.stderr(),
        new RegExp(
          `durable consumer repaired: ${stream}: consumer ${consumer} has delivered up to stream sequence ${deliveredBefore}, past the stream's last sequence`,
        ),
      );
      const info = await jsmAfter.consumers.info(stream, consumer);
      const last = (await jsmAfter.streams.info(stream)).state.last_seq;
      assert.ok(info.delivered.stream_seq <= last, `the recreated consumer is not ahead: delivered ${info.delivered.stream_seq}, last ${last}`);

      // The next requests are stored at the sequences the broker handed out before: they are delivered.
      for (let i = 0; i < 4; i++) {
        const reply = await decide(`after-${i}`);
        assert.deepEqual([reply.decision?.outcome, reply.decision?.successVotes], ['success', 1], `after-${i}: ${JSON.stringify(reply)}`);
      }
    } finally {
      await older?.dispose();
    }
  });
});

describe('NATS durable: an owned consumer deleted under the deployment', { timeout: 90_000 }, () => {
  let f: NatsDeploymentFixture;
  let client: CommandClient;

  before(async () => {
    ({ f, client } = await startAlfaDeployment({ result: approve }, { ackWaitMs: 1_000 }));
  });
  after(() => f?.dispose());

  it('a request consumer deleted under the deployment is created again, and the request stored meanwhile is delivered and decides', async () => {
    const stream = f.streams('alfa').requests;
    const consumer = peerConsumerName('alfa', 'request');
    const jsm = await askAgain(async () => jetstreamManager(await f.adminConnection()));
    await askAgain(() => jsm.consumers.delete(stream, consumer));
    const reply = await invokeUntilAnswered(client, 'after-delete', 30_000, 40);
    assert.deepEqual([reply.decision?.outcome, reply.decision?.successVotes], ['success', 1], JSON.stringify(reply));
    assert.match(
      f.serve!.stdout() + f.serve!.stderr(),
      new RegExp(`durable consumer repaired: ${stream}: consumer ${consumer} was missing; it was created again`),
    );
  });
});

/** Whether the operation decided success; false while a get after a broker restart is lost. */
const decided = (client: CommandClient, operationId: string) =>
  client.get(operationId, { waitMs: 0 }).then(
    (r) => resultOf(r).decision?.outcome === 'success',
    () => false,
  );

/**
 * Stores `count` requests for alfa, waits until alfa holds them all (delivered, none
 * acknowledged), and copies the request consumer's state as the broker has saved it then; alfa
 * crashes holding them. Answers the operations and that copy.
 */
async function crashAlfaHolding(f: NatsDeploymentFixture, client: CommandClient, count: number): Promise<{ ops: string[]; snapshot: StoreSnapshot }> {
  const stream = f.streams('alfa').requests;
  const consumer = peerConsumerName('alfa', 'request');
  const ops = await Promise.all(Array.from({ length: count }, (_, i) => invokeUntilAnswered(client, `held-${i}`, 0, 40).then((r) => r.operationId)));
  const jsm = await jetstreamManager(await f.adminConnection());
  await eventually(async () => (await jsm.consumers.info(stream, consumer)).num_ack_pending === count, `alfa holds ${count} deliveries`);
  let held: StoreSnapshot | undefined;
  await eventually(async () => {
    const copy = await snapshotRunningConsumer(f.storeDir, stream, consumer);
    if (copy?.state.pending === count) held = copy.snapshot;
    else await copy?.snapshot.dispose();
    return held !== undefined;
  }, `the broker's saved state of ${consumer} holding ${count} deliveries`);
  const holding = f.peers.get('alfa')!;
  holding.child.kill('SIGKILL');
  await holding.exited;
  return { ops, snapshot: held! };
}

describe('NATS durable: a consumer starved by redeliveries of removed messages', { timeout: 150_000 }, () => {
  let f: NatsDeploymentFixture;
  let client: CommandClient;
  /**
   * As many deliveries as one pull takes (nats.js asks for natsPullBatchMessagesMax). After its
   * start the broker queues every one of them for redelivery, again once per ack wait, and each
   * wake-up of the consumer (a pull arriving, a waiting pull's heartbeat or expiry, the redelivery
   * timer) is spent failing to load one of them: with alfa's one pull waiting that is about three
   * an ack wait, a handful more when a loaded alfa has pulled again after missed heartbeats. With
   * eight held, those wake-ups could empty the queue within one ack wait, and the waiting request
   * was delivered before the durability check's two ack waits had passed.
   */
  const held = 64;

  before(async () => {
    // alfa as started holds every request longer than the test runs. max_deliver is high, so
    // the starvation could not end by exhaustion within the test, and the long lease keeps the
    // held operations open through alfa's crash.
    ({ f, client } = await startAlfaDeployment(
      { result: approve, delayMs: 60_000 },
      { ackWaitMs: 1_000, maxDeliver: 50 },
      e2eBundle({ leaseMs: 30_000, timeoutMs: 60_000 }),
    ));
  });
  after(() => f?.dispose());

  const invoke = (key: string, waitMs: number) => invokeUntilAnswered(client, key, waitMs, 40);

  it('a consumer starved by redeliveries of removed messages is detected and recreated, and the request waiting behind them is delivered and decides', async () => {
    const stream = f.streams('alfa').requests;
    const consumer = peerConsumerName('alfa', 'request');
    const admin = async () => jetstreamManager(await f.adminConnection());
    const { ops, snapshot } = await crashAlfaHolding(f, client, held);
    try {
      const saved = await consumerSnapshotState(snapshot);
      assert.ok(saved.redelivered < held, `the saved state leaves deliveries not yet redelivered: ${JSON.stringify(saved)}`);
      // An alfa that answers at once takes over: the held requests come to it once their ack
      // wait has passed, are answered, and the work queue removes them.
      await f.startPeer('alfa', await f.writePeerConfig('alfa', { interactions: { allok: { result: approve } } }, '-answering'));
      for (const op of ops) await eventually(() => decided(client, op), `${op} decided`, 30_000);
      let jsm = await admin();
      await eventually(async () => (await jsm.streams.info(stream)).state.messages === 1, 'the work queue removed every answered request');

      await f.restartServer(() => restoreStreamPart(f.storeDir, stream, snapshot));
      jsm = await askAgain(admin);
      const restored = await askAgain(() => jsm.consumers.info(stream, consumer));
      assert.equal(restored.num_ack_pending, held, `the consumer holds deliveries of removed messages: ${JSON.stringify(restored)}`);
      // The broker queues them for redelivery only at its first redelivery timer after starting:
      // a request stored before then would be delivered at once. It is redelivering them once a
      // wake-up of alfa's pull was spent on one not redelivered before (more are redelivered than
      // saved: alfa kept them from redelivery until the copy, so few if any were).
      await eventually(
        async () => (await jsm.consumers.info(stream, consumer)).num_redelivered > saved.redelivered,
        'the broker redelivering removed messages',
        30_000,
      );
      await commandsAnswered(client, ops[0]!);

      const reply = await invoke('waiting', 20_000);
      assert.deepEqual([reply.decision?.outcome, reply.decision?.successVotes], ['success', 1], JSON.stringify(reply));
      assert.match(
        f.serve!.stdout() + f.serve!.stderr(),
        new RegExp(`durable consumer repaired: ${stream}: consumer ${consumer} delivered nothing for \\d+ ms`),
      );
    } finally {
      await snapshot.dispose();
    }
  });
});

describe('a JetStream store that lost acknowledged writes of an operation held in memory', { timeout: 120_000 }, () => {
  it('the operation closes indeterminate (durability-lost) when its log comes back shorter, never failed on what is left of it', async () => {
    const storeDir = await mkdtemp(join(tmpdir(), 'convoke-lost-log-'));
    let server = await startNatsServer({ jetstream: true, storeDir });
    const port = server.port;
    const store = await JetStreamEventStore.open({ servers: server.url });
    // all-successful over p1 and p2 with one attempt: p2 never answers (no renewal), so its lease
    // fails its branch; p1's approval, once accepted, is the log's only proof p1 answered.
    const bundle = reviewBundle({ completion: { mode: 'all-successful' }, leaseMs: 20_000, renewIntervalMs: 2_000, timeoutMs: 90_000 });
    let snapshot: StoreSnapshot | undefined;
    const embedded = await createEmbedded({ clock: new SystemClock(), store, bundle, groups: { reviewers: ['p1', 'p2'] } }).catch(async (error: unknown) => {
      await store.close();
      await server.dispose();
      throw error;
    });
    try {
      let approve!: () => void;
      const approved = new Promise<void>((resolve) => (approve = resolve));
      await embedded.addPeer('p1', { review: async () => (await approved, { verdict: 'approve' }) });
      await embedded.addPeer('p2', { review: () => new Promise(() => {}) }, { renew: false });
      const caller = { principalId: 'p', senderPeerId: null };
      const { result } = await embedded.coordinator.invoke(caller, {
        contract: embedded.bundle.ref,
        interaction: 'review',
        invocationKey: 'k',
        input: { document: 'd' },
      });
      const op = result.operationId;
      const record = async () => (await embedded.coordinator.record(op))!;
      await eventually(async () => Object.values((await record()).branches).every((b) => b.outbox.receipt !== 'pending'), 'both requests dispatched');
      // The log as it is now (admitted, dispatched) is what the broker will come back with.
      await server.stop();
      snapshot = await snapshotStreamPart(storeDir, 'CONVOKE_OPS', 'msgs');
      server = await startNatsServer({ jetstream: true, storeDir, port });
      // The store's connection is back before p1 answers (the in-process bus does not redeliver).
      await eventually(async () => (await store.read(op)).kind === 'ok', 'the store reachable again', 30_000);
      approve();
      await eventually(
        async () => Object.values((await record()).branches).some((b) => b.accepted?.status === 'success'),
        "p1's approval accepted and stored",
      ).catch(async (error: unknown) => {
        throw new Error(`${String(error)}: ${JSON.stringify(await record())} ${await embedded.coordinator.metrics.registry.metrics()}`);
      });
      // The broker loses that acknowledged write: p1's request was answered and will not come again.
      await server.stop();
      await restoreStreamPart(storeDir, 'CONVOKE_OPS', snapshot);
      server = await startNatsServer({ jetstream: true, storeDir, port });
      await eventually(async () => (await record()).decision !== null, 'the operation closed', 45_000);
      const closed = embedded.coordinator.view((await embedded.coordinator.load(op))!);
      assert.deepEqual(
        [closed.decision?.outcome, closed.decision?.reason, closed.settlement.status],
        ['indeterminate', 'durability-lost', 'indeterminate'],
        JSON.stringify(closed),
      );
      const stored = await store.read(op);
      assert.equal(stored.kind === 'ok' ? fold(stored.transitions)?.decision?.reason : stored.kind, 'durability-lost', 'the log says so too');
    } finally {
      await embedded.close().catch(() => undefined);
      await snapshot?.dispose();
      await server.dispose();
      await rm(storeDir, { recursive: true, force: true });
    }
  });
});
