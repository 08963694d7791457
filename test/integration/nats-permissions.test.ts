/**
 * Result-publisher identity on a real nats-server (spec: "Identity, context and authorization"):
 * peer users get exactly peerPermissions(), so the subject a result arrives on proves which peer
 * published it. The server reports a refused publish to the publisher's connection as a
 * permission violation; the message itself goes nowhere.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { errors, type NatsConnection } from '@nats-io/transport-node';
import { AdapterError } from '../../src/contract/errors.js';
import { connectNats, NatsTransport } from '../../src/adapters/transport/nats.js';
import { durableStreamNames, inboxPrefixFor, peerConsumerName } from '../../src/adapters/transport/nats-names.js';
import { commandClientPermissions, coordinatorPermissions, peerPermissions, type NatsPermissions } from '../../src/adapters/transport/nats-permissions.js';
import type { InboundMessage, Transport } from '../../src/adapters/transport/types.js';
import { startJetStreamServer } from '../conformance/transport-nats-harness.js';
import type { NatsServer, NatsUser } from '../support/nats-server.js';

const namespace = 'demo.v1.lab';
const encoder = new TextEncoder();
const text = (b: Uint8Array) => new TextDecoder().decode(b);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const principals: Record<string, { permissions: NatsPermissions; inboxPrefix: string }> = {
  alfa: { permissions: peerPermissions(namespace, 'alfa'), inboxPrefix: inboxPrefixFor('peer', 'alfa') },
  bravo: { permissions: peerPermissions(namespace, 'bravo'), inboxPrefix: inboxPrefixFor('peer', 'bravo') },
  coordinator: { permissions: coordinatorPermissions(namespace, 'coordinator', ['alfa', 'bravo']), inboxPrefix: inboxPrefixFor('coord', 'coordinator') },
  billing: { permissions: commandClientPermissions('billing'), inboxPrefix: inboxPrefixFor('cmd', 'billing') },
};

/** Not convoke principals: an administrator, and a peer that was (wrongly) also given consumer create. */
const { requests: requestStream } = durableStreamNames(namespace, 'alfa');
const { results: bravoResultStream } = durableStreamNames(namespace, 'bravo');
const extraUsers: NatsUser[] = [
  { user: 'admin', password: 'pw-admin' },
  {
    user: 'creator',
    password: 'pw-creator',
    publish: [...peerPermissions(namespace, 'alfa').publish, `$JS.API.CONSUMER.CREATE.${requestStream}.>`],
    subscribe: ['_INBOX.>'],
  },
];

function users(): NatsUser[] {
  const convoke = Object.entries(principals).map(([user, { permissions }]) => ({
    user,
    password: `pw-${user}`,
    publish: permissions.publish,
    subscribe: permissions.subscribe,
  }));
  return [...convoke, ...extraUsers];
}

let server: NatsServer;
let storeDir: string;
const open: { close(): Promise<unknown> }[] = [];

async function connection(user: string): Promise<NatsConnection> {
  const nc = await connectNats({ servers: server.url, user, pass: `pw-${user}`, inboxPrefix: principals[user]?.inboxPrefix });
  open.push(nc);
  return nc;
}

async function transport(user: string): Promise<Transport> {
  const t = new NatsTransport(await connection(user), { identity: user });
  open.push(t);
  return t;
}

/** Permission violations the server reported to a connection (it reports them there, not to the publish call). */
function violations(nc: NatsConnection): InstanceType<typeof errors.PermissionViolationError>[] {
  const seen: InstanceType<typeof errors.PermissionViolationError>[] = [];
  void (async () => {
    for await (const s of nc.status()) if (s.type === 'error' && s.error instanceof errors.PermissionViolationError) seen.push(s.error);
  })();
  return seen;
}

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadlineMs = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadlineMs) assert.fail(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const isDenied = (error: unknown) => error instanceof AdapterError && error.kind === 'denied';
/** nats.js rejects a refused request with a RequestError whose cause is the violation. */
const isPermissionViolation = (error: unknown) => error instanceof Error && error.cause instanceof errors.PermissionViolationError;

describe('NATS permissions: the result subject proves the publishing peer', () => {
  before(async () => {
    storeDir = await mkdtemp(join(tmpdir(), 'convoke-perm-'));
    server = await startJetStreamServer({ users: users(), storeDir });
  });
  after(async () => {
    await Promise.all(open.map((c) => c.close().catch(() => {})));
    await server.dispose();
    await rm(storeDir, { recursive: true, force: true });
  });

  it('peer alfa publishes demo.v1.lab.review.<op>.result.alfa and the coordinator receives it on that subject', async () => {
    const coordinator = await transport('coordinator');
    const alfa = await transport('alfa');
    const got: InboundMessage[] = [];
    await coordinator.subscribe(`${namespace}.review.*.result.*`, (m) => void got.push(m));
    const receipt = await alfa.publish(`${namespace}.review.op1.result.alfa`, encoder.encode('{"peerId":"alfa"}'));
    assert.equal(receipt.receipt, 'sent');
    await waitFor(() => got.length === 1, "alfa's result");
    assert.equal(got[0]?.subject, `${namespace}.review.op1.result.alfa`);
  });

  it('alfa publishing result.bravo is not delivered: the server reports a permission violation to alfa', async () => {
    const coordinator = await transport('coordinator');
    const alfaConnection = await connection('alfa');
    const reported = violations(alfaConnection);
    const alfa = new NatsTransport(alfaConnection, { identity: 'alfa' });
    const got: string[] = [];
    await coordinator.subscribe(`${namespace}.review.*.result.*`, (m) => void got.push(m.subject));
    await alfa.publish(`${namespace}.review.op2.result.bravo`, encoder.encode('{"peerId":"bravo"}'));
    // The fence from the same connection arrives after anything published before it.
    await alfa.publish(`${namespace}.review.op2.result.alfa`, encoder.encode('fence'));
    await waitFor(() => got.length === 1 && reported.length === 1, 'the fence and the violation report');
    assert.deepEqual(got, [`${namespace}.review.op2.result.alfa`]);
    assert.equal(reported[0]?.operation, 'publish');
    assert.equal(reported[0]?.subject, `${namespace}.review.op2.result.bravo`);
  });

  it("alfa cannot subscribe to bravo's requests, nor to the whole namespace", async () => {
    const alfa = await transport('alfa');
    await assert.rejects(
      alfa.subscribe(`${namespace}.*.*.request.bravo`, () => {}),
      isDenied,
    );
    await assert.rejects(
      alfa.subscribe(`${namespace}.>`, () => {}),
      isDenied,
    );
    await assert.rejects(
      alfa.subscribe(`${namespace}.review.op3.request.bravo`, () => {}),
      isDenied,
    );
  });

  it("inboxes are exclusive: alfa cannot read bravo's or anyone's inbox", async () => {
    const alfa = await transport('alfa');
    await assert.rejects(
      alfa.subscribe(`${inboxPrefixFor('peer', 'bravo')}.>`, () => {}),
      isDenied,
    );
    await assert.rejects(
      alfa.subscribe('_INBOX.>', () => {}),
      isDenied,
    );
  });

  it('the coordinator cannot publish results, so it cannot impersonate a peer', async () => {
    const receiver = await transport('coordinator');
    const coordinatorConnection = await connection('coordinator');
    const reported = violations(coordinatorConnection);
    const got: string[] = [];
    await receiver.subscribe(`${namespace}.review.*.result.*`, (m) => void got.push(m.subject));
    coordinatorConnection.publish(`${namespace}.review.op4.result.alfa`, 'forged');
    await waitFor(() => reported.length === 1, 'the violation report');
    await sleep(100);
    assert.deepEqual(got, []);
  });

  it('a command client publishes only its own commands and the coordinator answers it in its inbox', async () => {
    const coordinator = await transport('coordinator');
    const billing = await transport('billing');
    await coordinator.subscribe('convoke.cmd.*.get', async (m) => {
      const principal = m.subject.split('.')[2];
      assert.ok(m.replyTo?.startsWith(`${inboxPrefixFor('cmd', 'billing')}.`), m.replyTo);
      await m.respond?.(encoder.encode(`hello ${principal}`));
    });
    assert.ok(billing.request);
    assert.equal(text(await billing.request('convoke.cmd.billing.get', encoder.encode('{}'), 2_000)), 'hello billing');
    await assert.rejects(billing.request('convoke.cmd.someone-else.get', encoder.encode('{}'), 2_000), isDenied);
  });

  it("the coordinator may publish into command clients' inboxes, not into a peer's or another coordinator's", async () => {
    const coordinatorConnection = await connection('coordinator');
    const reported = violations(coordinatorConnection);
    const watcher = await connection('admin');
    const got: string[] = [];
    watcher.subscribe('_INBOX.>', { callback: (_e, m) => void got.push(m.subject) });
    await watcher.flush();
    coordinatorConnection.publish(`${inboxPrefixFor('peer', 'alfa')}.x`, 'stray');
    coordinatorConnection.publish(`${inboxPrefixFor('coord', 'other')}.x`, 'stray');
    coordinatorConnection.publish(`${inboxPrefixFor('cmd', 'billing')}.x`, 'reply');
    await waitFor(() => reported.length === 2 && got.length === 1, 'two violations and one delivery');
    assert.deepEqual(got, [`${inboxPrefixFor('cmd', 'billing')}.x`]);
  });

  it('a peer cannot create consumers or read stream messages (consumers are provisioned for it)', async () => {
    const alfaConnection = await connection('alfa');
    const requests = requestStream;
    const create = `$JS.API.CONSUMER.CREATE.${requests}.${peerConsumerName('alfa', 'request')}.${namespace}.*.*.request.alfa`;
    const body = JSON.stringify({ stream_name: requests, config: { durable_name: peerConsumerName('alfa', 'request') } });
    await assert.rejects(alfaConnection.request(create, body, { timeout: 2_000 }), isPermissionViolation);
    await assert.rejects(alfaConnection.request(`$JS.API.STREAM.MSG.GET.${requests}`, JSON.stringify({ seq: 1 }), { timeout: 2_000 }), isPermissionViolation);
  });

  it('why peers never get consumer create: on 2.9.10 a deliver_subject may name a subject its creator cannot publish', async () => {
    const durable = { namespace, peers: ['alfa', 'bravo'], duplicateWindowMs: 60_000, maxDeliver: 5, ackWaitMs: 1_000 };
    const admin = await NatsTransport.connect({ servers: server.url, user: 'admin', pass: 'pw-admin' }, { identity: 'admin', durable });
    open.push(admin);
    await admin.ensureStreams();
    // One request as NatsTransport stores it (with Nats-Expected-Stream), one stored without it.
    assert.equal((await admin.publish(`${namespace}.review.op9.request.alfa`, encoder.encode('with-expect'), { msgId: 'r-9' })).receipt, 'stored');
    const watcher = await connection('admin');
    await jetstream(watcher).publish(`${namespace}.review.op10.request.alfa`, encoder.encode('without-expect'));
    // A push consumer starts delivering when its deliver subject has interest at creation time.
    const pushed: string[] = [];
    watcher.subscribe(`${namespace}.review.op9.result.bravo`, { callback: (_e, m) => void pushed.push(`${m.subject} ${m.string()}`) });
    await watcher.flush();
    const creator = await connectNats({ servers: server.url, user: 'creator', pass: 'pw-creator' });
    open.push(creator);
    const name = 'push-into-results';
    const config = {
      durable_name: name,
      filter_subject: `${namespace}.*.*.request.alfa`,
      ack_policy: 'explicit',
      deliver_subject: `${namespace}.review.op9.result.bravo`,
    };
    const createSubject = `$JS.API.CONSUMER.CREATE.${requestStream}.${name}.${config.filter_subject}`;
    const reply = await creator.request(createSubject, JSON.stringify({ stream_name: requestStream, config }), { timeout: 2_000 });
    assert.equal((reply.json() as { error?: unknown }).error, undefined, "the server accepted a deliver_subject outside the creator's publish permission");
    await waitFor(() => pushed.length === 2, 'the pushed copies');
    // Delivered to result.bravo's subscribers, but under the original subject: subject verification rejects them.
    assert.deepEqual(pushed.sort(), [`${namespace}.review.op10.request.alfa without-expect`, `${namespace}.review.op9.request.alfa with-expect`]);
    // bravo's results stream captured the copy that carried no Nats-Expected-Stream header (after
    // its anchor): it takes discard-new capacity from bravo's results. NatsTransport always sets that header.
    const jsm = await jetstreamManager(watcher);
    await sleep(200);
    assert.equal((await jsm.streams.info(bravoResultStream)).state.messages, 2);
    assert.equal((await jsm.streams.getMessage(bravoResultStream, { seq: 2 }))?.string(), 'without-expect');
  });
});

describe('NATS names: deterministic, token-safe, injective', () => {
  it('stream names derive from the namespace and peer alone and distinguish pairs that read alike', () => {
    const a = durableStreamNames('demo.v1.lab', 'alfa');
    assert.deepEqual(durableStreamNames('demo.v1.lab', 'alfa'), a);
    assert.notEqual(durableStreamNames('demo_v1.lab', 'alfa').requests, a.requests);
    assert.notEqual(durableStreamNames('demo.v1.lab', 'bravo').requests, a.requests);
    assert.notEqual(a.requests, a.results);
    assert.match(a.requests, /^CONVOKE_REQ_demo_v1_lab_alfa_[0-9a-f]{12}$/);
    const longest = durableStreamNames(Array.from({ length: 8 }, () => 'x'.repeat(64)).join('.'), 'p'.repeat(64));
    assert.ok(longest.results.length <= 64 && /^[A-Za-z0-9_-]+$/.test(longest.results));
  });
});
