/**
 * A message larger than the NATS server's max_payload is never sent, now or on any later attempt:
 * nats.js refuses it before writing. The transport says so as a permanent refusal (invalid-input,
 * naming the message's size and the server's max_payload), never as `unavailable` (an outage worth
 * another try), and every caller acts on it: a request or a reply fails for good, a publication is
 * `rejected` with the refusal, a peer whose result can never be carried is told (onUndeliverable)
 * instead of taking its request again for ever, a request the coordinator cannot dispatch is
 * recorded as rejected with its reason logged and its branch failed at once (never another attempt,
 * which would meet the same refusal), and a command reply keeps its status, leaving out its large
 * members and saying so. A message not sent because the connection is gone stays `unavailable`.
 * A request its peer stream refuses as past its max_msg_size is refused for good the same way.
 * Real nats-server with a small max_payload.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { StaticDirectory } from '../../src/adapters/directory/static.js';
import { StaticPolicy } from '../../src/adapters/policy/static.js';
import { SubjectNamespaceVerifier } from '../../src/adapters/verification/subject.js';
import { NatsTransport } from '../../src/adapters/transport/nats.js';
import { peerConsumerName } from '../../src/adapters/transport/nats-names.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import type { InboundMessage } from '../../src/adapters/transport/types.js';
import { BundleRegistry, loadBundle } from '../../src/contract/bundle.js';
import { SystemClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import type { JsonObject } from '../../src/contract/json.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { encodeWire, type RequestMessage } from '../../src/events/wire.js';
import { createNatsPeer } from '../../src/peer/nats-peer.js';
import { Coordinator } from '../../src/runtime/coordinator.js';
import { sendCommand, sendListCommand, startCommandServer } from '../../src/nats-api/commands.js';
import { sendWorkflowCommand } from '../../src/nats-api/workflow-commands.js';
import type { WorkflowInstance, WorkflowInstanceService } from '../../src/runtime/workflow-service.js';
import type { Logger } from '../../src/runtime/operation-log.js';
import { eventually } from '../support/nats-deployment-fixture.js';
import { natsTransportForSuite, startNatsServer, type NatsServer } from '../support/nats-server.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const maxPayload = 4096;
const big = new Uint8Array(6000).fill(0x61);
const tooLarge = /is 6\d{3} bytes.*at most 4096 \(max_payload\)/;

function assertTooLarge(error: unknown): true {
  assert.ok(error instanceof AdapterError, String(error));
  assert.equal(error.kind, 'invalid-input', error.message);
  assert.match(error.message, tooLarge);
  return true;
}

/** A coordinator for the review example on `transport` (memory store), its peers never answering. */
function reviewCoordinator(
  transport: NatsTransport,
  options: { logger?: Logger; store?: EventStore; review?: JsonObject } = {},
): { coordinator: Coordinator; bundle: ReturnType<typeof loadBundle>; bundles: BundleRegistry } {
  const { logger, store, review } = options;
  const clock = new SystemClock();
  const bundle = loadBundle(reviewBundle({ completion: { mode: 'all-terminal' }, ...review }));
  const bundles = new BundleRegistry();
  bundles.add(bundle);
  const namespace = bundle.bundle.subjectNamespace;
  const coordinator = new Coordinator({
    store: store ?? new MemoryEventStore({ clock }),
    transport,
    directory: new StaticDirectory({ groups: { reviewers: ['alfa', 'bravo'] } }),
    policy: new StaticPolicy({ rules: [{ effect: 'allow' }], ttlMs: 60_000 }, clock),
    verifier: new SubjectNamespaceVerifier([{ namespace, exclusivePeerPublishers: true }]),
    clock,
    bundles,
    deployment: { account: 'local', system: 'convoke', domain: 'oversize' },
    effectFencing: () => false,
    resultBatchMs: 0,
    ...(logger ? { logger } : {}),
  });
  return { coordinator, bundle, bundles };
}

/** Inside a `describe`: a nats-server with the small max_payload and no JetStream, started before its tests and disposed after them. */
function smallPayloadServerForSuite(): { readonly server: NatsServer } {
  const made: { server?: NatsServer } = {};
  before(async () => {
    made.server = await startNatsServer({ maxPayload, jetstream: false });
  });
  after(() => made.server?.dispose());
  return {
    get server() {
      assert.ok(made.server, "the suite's nats-server is started before its tests run");
      return made.server;
    },
  };
}

/** Both branches failed at attempt 1, each recorded as a rejected dispatch whose detail matches `refusal`, none retried. */
function assertRefusedAtOnce(inspection: Awaited<ReturnType<Coordinator['inspect']>>, refusal: RegExp): void {
  assert.deepEqual(
    inspection.result.branches.map((b) => [b.branchId, b.status, b.attempt]),
    [
      ['alfa', 'failure', 1],
      ['bravo', 'failure', 1],
    ],
  );
  const events = inspection.timeline.flatMap((entry) => entry.events);
  const refused = events.filter((e) => e.type === 'dispatch-recorded');
  assert.deepEqual(
    refused.map((e) => [e.branchId, e.receipt]),
    [
      ['alfa', 'rejected'],
      ['bravo', 'rejected'],
    ],
    JSON.stringify(events),
  );
  for (const e of refused) assert.match(e.type === 'dispatch-recorded' ? (e.detail ?? '') : '', refusal);
  assert.deepEqual(
    events.filter((e) => e.type === 'claim-ended'),
    [],
  );
}
/**
 * Invokes `review` (4 attempts, 200 ms apart) on a durable transport over a SQLite store with an
 * input of `inputBytes`, and asserts both branches failed at once with `refusal` recorded: retried,
 * each would take its next attempt 200 ms after the last and fail only at its fourth.
 */
async function assertInvokedRefusedAtOnce(
  server: NatsServer,
  path: string,
  call: { inputBytes: number; key: string; maxMsgBytes?: number },
  refusal: RegExp,
): Promise<void> {
  const nc = await connect({ servers: server.url });
  const durable = { namespace: 'demo.v1.lab', peers: ['alfa', 'bravo'], ackWaitMs: 2000, duplicateWindowMs: 20_000, maxDeliver: 100 };
  const transport = new NatsTransport(nc, {
    identity: 'coordinator',
    durable: call.maxMsgBytes === undefined ? durable : { ...durable, maxMsgBytes: call.maxMsgBytes },
  });
  await transport.ensureStreams();
  const store = new SqliteEventStore({ path, clock: new SystemClock() });
  const { coordinator, bundle } = reviewCoordinator(transport, { store, review: { attempts: 4, retryBackoffMs: 200 } });
  try {
    const caller = { principalId: 'svc-a', senderPeerId: null };
    const input = { document: 'x'.repeat(call.inputBytes) };
    const { result } = await coordinator.invoke(caller, { contract: bundle.ref, interaction: 'review', invocationKey: call.key, input });
    await eventually(async () => (await coordinator.get('svc-a', result.operationId)).decision !== null, 'the decision closed', 15_000);
    await new Promise((r) => setTimeout(r, 1500));
    assertRefusedAtOnce(await coordinator.inspect('svc-a', result.operationId), refusal);
  } finally {
    await coordinator.close();
    await transport.close();
    await nc.close();
    await store.close();
  }
}

describe('NATS transport: a message past max_payload', { timeout: 60_000 }, () => {
  const nats = natsTransportForSuite({ maxPayload, jetstream: false });

  it('a request past max_payload is invalid-input naming both sizes, not unavailable', async () => {
    const sub = nats.nc.subscribe('test.echo', { callback: (_e, msg) => void msg.respond(new Uint8Array(0)) });
    await assert.rejects(nats.transport.request('test.echo', big, 2000), assertTooLarge);
    sub.unsubscribe();
  });

  it('a core publish past max_payload is rejected with a typed invalid-input refusal', async () => {
    const receipt = await nats.transport.publish('test.core', big);
    assert.equal(receipt.receipt, 'rejected');
    assert.match(receipt.detail ?? '', tooLarge);
    assertTooLarge(receipt.refusal);
  });

  it('a reply past max_payload is refused as invalid-input', async () => {
    let replying: Promise<unknown> | undefined;
    const sub = await nats.transport.subscribe('test.reply', (message: InboundMessage) => {
      replying = message.respond?.(big).then(
        () => 'replied',
        (error: unknown) => error,
      );
    });
    await nats.nc.request('test.reply', new Uint8Array(1), { timeout: 300 }).catch(() => undefined);
    await eventually(() => replying !== undefined, 'the handler replied');
    assertTooLarge(await replying);
    await sub.close();
  });

  it('a request on a connection that is gone stays unavailable', async () => {
    const gone = await connect({ servers: nats.server.url });
    const other = new NatsTransport(gone, { identity: 'gone' });
    await gone.close();
    await assert.rejects(other.request('test.echo', new Uint8Array(1), 500), (error: unknown) => {
      assert.ok(error instanceof AdapterError);
      assert.equal(error.kind, 'unavailable', error.message);
      return true;
    });
  });
});

describe('peer SDK: a result past max_payload (durable)', { timeout: 60_000 }, () => {
  const namespace = 'oversize.v1.lab';
  let server: NatsServer;
  let nc: NatsConnection;
  before(async () => {
    server = await startNatsServer({ maxPayload, jetstream: true });
    nc = await connect({ servers: server.url });
  });
  after(async () => {
    await nc?.close();
    await server?.dispose();
  });

  it('the peer is told its result never fits (invalid-input) and acknowledges the request instead of taking it again for ever', async () => {
    const transport = new NatsTransport(nc, {
      identity: 'alfa',
      durable: { namespace, peers: ['alfa'], ackWaitMs: 2000, duplicateWindowMs: 20_000, maxDeliver: 100 },
    });
    await transport.ensureStreams();
    await transport.provisionPeerConsumers('alfa');
    const undeliverable: { operationId: string; error: AdapterError }[] = [];
    let runs = 0;
    const peer = await createNatsPeer({
      nc,
      namespace,
      peerId: 'alfa',
      durable: true,
      renew: false,
      handlers: { review: () => (runs++, { verdict: 'approve', note: 'x'.repeat(6000) }) },
      onUndeliverable: (request, error) => undeliverable.push({ operationId: request.operationId, error }),
    });
    const operationId = `op${'1'.repeat(64)}`;
    const request: RequestMessage = {
      kind: 'request',
      operationId,
      contract: { id: 'lab.review', version: '1.0.0', digest: `sha256:${'2'.repeat(64)}` },
      interaction: 'review',
      branchId: 'alfa',
      peerId: 'alfa',
      attempt: 1,
      fence: 1,
      deadlineMs: Date.now() + 60_000,
      leaseUntilMs: Date.now() + 60_000,
      renewIntervalMs: 1000,
      publicationId: '3'.repeat(64),
      input: { document: 'hello' },
    };
    const sent = await transport.publish(subjectFor(namespace, 'review', operationId, 'request', 'alfa'), encodeWire(request), {
      msgId: request.publicationId,
    });
    assert.equal(sent.receipt, 'stored', sent.detail);
    try {
      await eventually(() => undeliverable.length > 0, 'the peer told its result is undeliverable');
      assert.equal(undeliverable[0]?.operationId, operationId);
      assertTooLarge(undeliverable[0]?.error);
      // Acknowledged: not delivered again (a nak would bring it back every 500 ms).
      await new Promise((r) => setTimeout(r, 1500));
      const jsm = await jetstreamManager(nc);
      const streams = await jsm.streams.list().next();
      const requests = streams.find((s) => s.config.subjects?.some((subject) => subject.includes('.request.')))?.config.name;
      assert.ok(requests, JSON.stringify(streams.map((s) => s.config.subjects)));
      const consumer = await jsm.consumers.info(requests, peerConsumerName('alfa', 'request'));
      assert.deepEqual([consumer.num_ack_pending, consumer.num_redelivered], [0, 0], JSON.stringify(consumer));
      assert.equal(runs, 1);
      assert.deepEqual([peer.stats.undeliverable, peer.stats.replayed], [1, 0]);
    } finally {
      await peer.close();
    }
  });
});

describe('outbox: a request past max_payload', { timeout: 60_000 }, () => {
  const nats = smallPayloadServerForSuite();

  it('is recorded as a rejected dispatch (its branch fails, the decision closes) and its reason is logged, not retried for ever', async () => {
    const nc = await connect({ servers: nats.server.url });
    const transport = new NatsTransport(nc, { identity: 'coordinator' });
    const lines: { level: string; fields: Record<string, unknown> }[] = [];
    const logger: Logger = {
      debug: (fields) => void lines.push({ level: 'debug', fields: fields as Record<string, unknown> }),
      info: (fields) => void lines.push({ level: 'info', fields: fields as Record<string, unknown> }),
      warn: (fields) => void lines.push({ level: 'warn', fields: fields as Record<string, unknown> }),
      error: (fields) => void lines.push({ level: 'error', fields: fields as Record<string, unknown> }),
    };
    const { coordinator, bundle } = reviewCoordinator(transport, { logger });
    try {
      const caller = { principalId: 'svc-a', senderPeerId: null };
      const { result } = await coordinator.invoke(caller, {
        contract: bundle.ref,
        interaction: 'review',
        invocationKey: 'big-1',
        input: { document: 'x'.repeat(6000) },
      });
      await eventually(async () => (await coordinator.get('svc-a', result.operationId)).decision !== null, 'the decision closed', 15_000);
      const view = await coordinator.get('svc-a', result.operationId);
      assert.deepEqual(
        view.branches.map((b) => b.status),
        ['failure', 'failure'],
      );
      const logged = lines.filter((l) => typeof l.fields.error === 'string' && tooLarge.test(l.fields.error));
      assert.ok(logged.length > 0, JSON.stringify(lines.map((l) => l.fields)));
      assert.equal(logged[0]?.fields.operationId, result.operationId);
    } finally {
      await coordinator.close();
      await transport.close();
      await nc.close();
    }
  });
});

describe('outbox: a request past max_payload where attempts are retried (JetStream, SQLite)', { timeout: 60_000 }, () => {
  let server: NatsServer;
  let dir: string;
  before(async () => {
    server = await startNatsServer({ maxPayload, jetstream: true });
    dir = await mkdtemp(join(tmpdir(), 'convoke-oversize-'));
  });
  after(async () => {
    await server?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it('fails its branch at once, recorded with the refusal, and is never sent again: another attempt would meet the same refusal', async () => {
    await assertInvokedRefusedAtOnce(server, join(dir, 'ops.db'), { inputBytes: 6000, key: 'big-durable' }, tooLarge);
  });
});

describe("outbox: a request past its peer stream's max_msg_size (JetStream, SQLite)", { timeout: 60_000 }, () => {
  // Below max_payload (4096), above the peer streams' max_msg_size: the client sends it, the stream refuses it.
  const maxMsgBytes = 2000;
  const pastStream = /3\d{3} bytes.*stream \S+ takes at most its max_msg_size.*10054 message size exceeds maximum allowed/;
  let server: NatsServer;
  let dir: string;
  before(async () => {
    server = await startNatsServer({ maxPayload, jetstream: true });
    dir = await mkdtemp(join(tmpdir(), 'convoke-oversize-stream-'));
  });
  after(async () => {
    await server?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it('the stream answers 10054 and the publish is rejected with a typed invalid-input refusal naming the limit', async () => {
    const nc = await connect({ servers: server.url });
    const transport = new NatsTransport(nc, {
      identity: 'coordinator',
      durable: { namespace: 'stream.v1.lab', peers: ['alfa'], ackWaitMs: 2000, duplicateWindowMs: 20_000, maxDeliver: 100, maxMsgBytes },
    });
    try {
      await transport.ensureStreams();
      const subject = subjectFor('stream.v1.lab', 'review', `op${'7'.repeat(64)}`, 'request', 'alfa');
      const receipt = await transport.publish(subject, new Uint8Array(3000).fill(0x61), { msgId: '8'.repeat(64) });
      assert.equal(receipt.receipt, 'rejected', receipt.detail);
      // What nats-server answers: JetStream error code 10054, "message size exceeds maximum allowed".
      assert.match(receipt.detail ?? '', /^10054 message size exceeds maximum allowed/);
      assert.ok(receipt.refusal instanceof AdapterError, JSON.stringify(receipt));
      assert.equal(receipt.refusal.kind, 'invalid-input');
      assert.match(receipt.refusal.message, pastStream);
    } finally {
      await transport.close();
      await nc.close();
    }
  });

  it('fails its branch at attempt 1 with the refusal recorded, not retried to the end of its attempt budget', async () => {
    await assertInvokedRefusedAtOnce(server, join(dir, 'ops.db'), { inputBytes: 3000, key: 'big-stream', maxMsgBytes }, pastStream);
  });
});

/** convoke_nats_command_replies_reduced_total as `verb form` → count. */
async function reducedReplies(coordinator: Coordinator): Promise<Record<string, number>> {
  const values = (await coordinator.metrics.registry.getSingleMetric('convoke_nats_command_replies_reduced_total')?.get())?.values ?? [];
  return Object.fromEntries(values.map((v) => [`${String(v.labels.verb)} ${String(v.labels.form)}`, v.value]));
}

/**
 * A command server on its own connection, a coordinator behind it and a client on another
 * connection; `workflows`, where given, stands in for the workflow instance service.
 */
async function commandsOn(server: NatsServer, workflows?: WorkflowInstanceService) {
  const nc = await connect({ servers: server.url });
  const transport = new NatsTransport(nc, { identity: 'coordinator' });
  const clientNc = await connect({ servers: server.url });
  const client = new NatsTransport(clientNc, { identity: 'client' });
  const { coordinator, bundle, bundles } = reviewCoordinator(transport);
  const replyFailures: { error: unknown; verb: string }[] = [];
  const commands = await startCommandServer({
    transport,
    coordinator,
    bundles,
    ...(workflows ? { workflows } : {}),
    waitMsMax: 5000,
    bodyLimitBytes: 2048,
    onReplyFailure: (error, verb) => replyFailures.push({ error, verb }),
  });
  const invoke = async (invocationKey: string) =>
    (
      await coordinator.invoke(
        { principalId: 'svc-a', senderPeerId: null },
        { contract: bundle.ref, interaction: 'review', invocationKey, input: { document: invocationKey } },
      )
    ).result;
  const close = async () => {
    await commands.close();
    await coordinator.close();
    await client.close();
    await transport.close();
    await clientNc.close();
    await nc.close();
  };
  return { nc, client, invoke, replyFailures, close, bundle, coordinator };
}

describe('command server: a reply past max_payload', { timeout: 60_000 }, () => {
  const nats = smallPayloadServerForSuite();

  it('answers at once with a small invalid-input error naming the reply size and max_payload, not a timeout', async () => {
    const { client, invoke, replyFailures, close, coordinator } = await commandsOn(nats.server);
    try {
      for (let i = 0; i < 40; i++) await invoke(`page-${i}`);
      const started = Date.now();
      const reply = await sendListCommand(client, 'svc-a', { limit: 40 }, 10_000);
      const tookMs = Date.now() - started;
      assert.ok('error' in reply, JSON.stringify(reply).slice(0, 200));
      assert.equal(reply.status, 400);
      assert.equal(reply.error.kind, 'invalid-input');
      assert.match(reply.error.description ?? '', /list reply is \d{4,} bytes.*at most 4096 \(max_payload\)/);
      assert.ok(tookMs < 5000, `answered after ${tookMs} ms`);
      // A page that fits is still answered in full.
      const small = await sendListCommand(client, 'svc-a', { limit: 2 }, 10_000);
      assert.ok('page' in small, JSON.stringify(small));
      assert.deepEqual(replyFailures, []);
      // Counted apart from the plain 400s: the page was not carried, an error said so instead.
      assert.deepEqual(await reducedReplies(coordinator), { 'list unsent': 1 });
    } finally {
      await close();
    }
  });

  it('a reply that cannot be sent for another reason (the connection gone) is reported and left to the caller timeout', async () => {
    const { nc, client, invoke, replyFailures, close } = await commandsOn(nats.server);
    try {
      const { operationId } = await invoke('gone-1');
      const waiting = sendCommand(client, 'svc-a', 'get', { operationId, waitFor: 'settled', waitMs: 1000 }, 2500);
      await new Promise((r) => setTimeout(r, 300));
      await nc.close();
      await assert.rejects(waiting, (error: unknown) => error instanceof AdapterError && error.kind === 'unavailable');
      await eventually(() => replyFailures.length > 0, 'the failed reply was reported');
      assert.equal(replyFailures[0]?.verb, 'get');
      assert.ok(replyFailures[0]?.error instanceof AdapterError && replyFailures[0].error.kind === 'unavailable', String(replyFailures[0]?.error));
    } finally {
      await close();
    }
  });
});

describe('command server: an invoke reply past max_payload', { timeout: 60_000 }, () => {
  const nats = smallPayloadServerForSuite();

  it('an invoke whose reply is too large is answered with its status and the small members, naming what was left out, not 400', async () => {
    const { nc, client, replyFailures, close, bundle, coordinator } = await commandsOn(nats.server);
    // Each result fits a message; the two together in one reply do not.
    const note = 'n'.repeat(2500);
    const peers = await Promise.all(
      ['alfa', 'bravo'].map((peerId) =>
        createNatsPeer({ nc, namespace: bundle.bundle.subjectNamespace, peerId, renew: false, handlers: { review: () => ({ verdict: 'approve', note }) } }),
      ),
    );
    try {
      const body = { contract: bundle.ref, interaction: 'review', invocationKey: 'large-reply-1', input: { document: 'd' }, waitFor: 'decision', waitMs: 5000 };
      const reply = (await sendCommand(client, 'svc-a', 'invoke', body, 15_000)) as unknown as Record<string, unknown>;
      assert.equal(reply.status, 200, JSON.stringify(reply).slice(0, 400));
      const result = reply.result as Record<string, unknown>;
      assert.match(String(result.operationId), /^op[0-9a-f]{64}$/);
      assert.equal(result.invocationKey, 'large-reply-1');
      assert.equal((result.decision as { outcome: string }).outcome, 'success');
      assert.equal(typeof (result.settlement as { status: string }).status, 'string');
      const branches = result.branches as Record<string, unknown>[];
      assert.deepEqual(
        branches.map((b) => [b.branchId, b.status, 'result' in b]),
        [
          ['alfa', 'success', false],
          ['bravo', 'success', false],
        ],
      );
      const omitted = reply.omitted as { members: string[]; replyBytes: number; maxPayload: number; read: string };
      assert.deepEqual(omitted.members, ['output', 'branches[].result']);
      assert.equal(omitted.maxPayload, maxPayload);
      assert.ok(omitted.replyBytes > maxPayload, String(omitted.replyBytes));
      assert.equal(omitted.read, `GET /contract-invocations/${String(result.operationId)}`);
      assert.ok(!('output' in result));
      // Counted apart from the plain 200s.
      assert.deepEqual(await reducedReplies(coordinator), { 'invoke omitted': 1 });
      // What was left out is there to read in full.
      const full = await coordinator.get('svc-a', String(result.operationId));
      assert.deepEqual(
        full.branches.map((b) => b.result),
        [
          { verdict: 'approve', note },
          { verdict: 'approve', note },
        ],
      );
      assert.deepEqual(replyFailures, []);
    } finally {
      await Promise.all(peers.map((p) => p.close()));
      await close();
    }
  });
});

/** A workflow instance as a stand-in service answers it: ended, with `output`, under `workflow`. */
function endedInstance(instanceId: string, workflow: string, output: unknown): WorkflowInstance {
  return {
    instanceId,
    bundle: { id: 'lab.review', version: '1.0.0', digest: `sha256:${'4'.repeat(64)}` },
    workflow,
    invocationKey: 'k',
    status: 'completed',
    currentTask: null,
    stages: [],
    output: output as WorkflowInstance['output'],
    error: null,
    cancellation: 'none',
    startedAtMs: 1,
    endedAtMs: 2,
    parent: null,
    childInstances: [],
  };
}

describe('command server: a workflow reply past max_payload', { timeout: 60_000 }, () => {
  const nats = smallPayloadServerForSuite();

  it('a started instance whose output is too large is answered with its status and id, the output named as left out; one that cannot be carried even so is not 400', async () => {
    const large = `wf${'5'.repeat(64)}`;
    const unreducible = `wf${'6'.repeat(64)}`;
    // The instance service stands in: what is under test is how its answers are carried.
    const workflows = {
      start: async () => ({ instance: endedInstance(large, 'big-output', { text: 'o'.repeat(6000) }), created: true }),
      get: async (_principalId: string, instanceId: string) => endedInstance(instanceId, 'w'.repeat(5000), null),
    } as unknown as WorkflowInstanceService;
    const { client, close, coordinator } = await commandsOn(nats.server, workflows);
    try {
      const start = {
        bundle: { id: 'lab.review', version: '1.0.0', digest: `sha256:${'4'.repeat(64)}` },
        workflow: 'big-output',
        invocationKey: 'k',
        input: {},
      };
      const started = (await sendWorkflowCommand(client, 'svc-a', 'workflow-start', start, 10_000)) as unknown as Record<string, unknown>;
      assert.equal(started.status, 200, JSON.stringify(started).slice(0, 400));
      const instance = started.instance as Record<string, unknown>;
      assert.deepEqual([instance.instanceId, instance.status, 'output' in instance], [large, 'completed', false]);
      const omitted = started.omitted as { members: string[]; replyBytes: number; maxPayload: number; read: string };
      assert.deepEqual(omitted.members, ['output']);
      assert.equal(omitted.maxPayload, maxPayload);
      assert.ok(omitted.replyBytes > maxPayload, String(omitted.replyBytes));
      assert.equal(omitted.read, `GET /workflow-instances/${large}`);

      // Its small members alone are past max_payload too: an error then, but not one saying the command was refused.
      const got = (await sendWorkflowCommand(client, 'svc-a', 'workflow-get', { instanceId: unreducible }, 10_000)) as unknown as Record<string, unknown>;
      assert.equal(got.status, 500, JSON.stringify(got).slice(0, 400));
      const error = got.error as { kind: string; description: string };
      assert.equal(error.kind, 'unavailable');
      assert.match(error.description, new RegExp(`workflow-get reply is \\d+ bytes.*at most 4096 \\(max_payload\\).*GET /workflow-instances/${unreducible}`));
      assert.deepEqual(await reducedReplies(coordinator), { 'workflow-start omitted': 1, 'workflow-get unsent': 1 });
    } finally {
      await close();
    }
  });
});

describe('command server: an error reply past max_payload', { timeout: 60_000 }, () => {
  const nats = smallPayloadServerForSuite();

  it('keeps its status and kind, its description cut and saying so', async () => {
    // The instance service stands in: its refusal's description alone is past max_payload.
    const description = 'c'.repeat(6000);
    const workflows = {
      get: async () => {
        throw new AdapterError('conflict', description);
      },
    } as unknown as WorkflowInstanceService;
    const { client, close, coordinator } = await commandsOn(nats.server, workflows);
    try {
      const got = (await sendWorkflowCommand(client, 'svc-a', 'workflow-get', { instanceId: `wf${'7'.repeat(64)}` }, 10_000)) as unknown as Record<
        string,
        unknown
      >;
      assert.equal(got.status, 409, JSON.stringify(got).slice(0, 400));
      const error = got.error as { kind: string; description: string };
      assert.equal(error.kind, 'conflict');
      assert.ok(error.description.startsWith(description.slice(0, 512)), error.description.slice(0, 100));
      assert.match(error.description, /… \(cut: the reply was 6\d{3} bytes; the NATS server takes at most 4096 \(max_payload\)\)$/);
      assert.ok(error.description.length < 1000, String(error.description.length));
      assert.deepEqual(await reducedReplies(coordinator), { 'workflow-get cut': 1 });
    } finally {
      await close();
    }
  });
});
