/**
 * The Transport conformance suite: one function, run against every adapter (the in-process bus,
 * core NATS, JetStream). Each test is named after the rule it checks. Connections carry the
 * permissions of convoke's principals as nats-permissions.ts defines them, so "alfa may publish
 * only its own results" means the same thing on every adapter.
 *
 * Durable-only rules are reported as skipped for adapters without storage.
 */
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { AdapterError } from '../../src/contract/errors.js';
import type { DurableConfig } from '../../src/adapters/transport/nats.js';
import { inboxPrefixFor, peerConsumerFilter, peerConsumerName, type DurableStreamNames } from '../../src/adapters/transport/nats-names.js';
import { commandClientPermissions, coordinatorPermissions, peerPermissions, type NatsPermissions } from '../../src/adapters/transport/nats-permissions.js';
import type { InboundMessage, PublishReceipt, SubscribeOptions, Transport } from '../../src/adapters/transport/types.js';

export const conformanceNamespace = 'conf.v1';
/** The peers of the roster: a durable harness keeps streams for each. */
export const conformancePeers = ['alfa', 'bravo'] as const;

export type Identity = 'observer' | 'coordinator' | 'alfa' | 'bravo' | 'client';

export interface RosterEntry {
  identity: Identity;
  /** undefined: everything allowed (the observer stands for a test's omniscient admin). */
  permissions: NatsPermissions | undefined;
  /** The connection's inbox prefix; must match the inbox permission. */
  inboxPrefix: string | undefined;
}

/** Every principal a conformance test connects as. NATS servers are started with exactly these users. */
export function conformanceRoster(namespace = conformanceNamespace): RosterEntry[] {
  return [
    { identity: 'observer', permissions: undefined, inboxPrefix: undefined },
    {
      identity: 'coordinator',
      permissions: coordinatorPermissions(namespace, 'coordinator', conformancePeers, { manageStreams: true }),
      inboxPrefix: inboxPrefixFor('coord', 'coordinator'),
    },
    { identity: 'alfa', permissions: peerPermissions(namespace, 'alfa'), inboxPrefix: inboxPrefixFor('peer', 'alfa') },
    { identity: 'bravo', permissions: peerPermissions(namespace, 'bravo'), inboxPrefix: inboxPrefixFor('peer', 'bravo') },
    { identity: 'client', permissions: commandClientPermissions('client'), inboxPrefix: inboxPrefixFor('cmd', 'client') },
  ];
}

/** What a durable (JetStream-backed) harness lets a test do to the broker itself. */
export interface DurableControls {
  config: DurableConfig;
  /** alfa's two streams. */
  streams: DurableStreamNames;
  /** Stops the server and starts it again on the same port with the same store dir. */
  restartServer(): Promise<void>;
  stopServer(): Promise<void>;
  startServer(): Promise<void>;
  /**
   * Stops the server, serves the port for `interludeMs` from a server without JetStream (clients
   * reconnect, and every JetStream call they make then fails), then starts the real one again.
   */
  restartServerThroughInterlude(interludeMs: number): Promise<void>;
  /** Changes a stream's config as an administrator would (jsm.streams.update). */
  alterStream(stream: string, patch: { duplicate_window?: number; max_bytes?: number }): Promise<void>;
  /** Purges a stream as an administrator would. */
  purgeStream(stream: string): Promise<void>;
  /** Deletes a stream as an administrator would. */
  deleteStream(stream: string): Promise<void>;
}

/** Durable transports expose provisioning beyond the Transport interface (NatsTransport does). */
export interface DurableTransport extends Transport {
  ensureStreams(): Promise<void>;
  provisionPeerConsumers(peerId: string): Promise<void>;
  checkDurability(): ReturnType<NonNullable<Transport['checkDurability']>>;
}

export interface ConformanceContext {
  /** A new connection for the principal; closed by dispose(). */
  connect(identity: Identity): Promise<Transport>;
  durable?: DurableControls;
  dispose(): Promise<void>;
}

export interface TransportFactory {
  capabilities: {
    durable: boolean;
    /**
     * What a publish the broker refuses for permission returns: the memory bus and JetStream
     * (a request with a reply) say so; core NATS reports it to the connection, not the call.
     * `streamSubject`: a subject a durable stream captures; `plainSubject`: any other.
     */
    publishDenialReceipt: { streamSubject: 'rejected' | 'sent'; plainSubject: 'rejected' | 'sent' };
  };
  start(options?: { durable?: Partial<DurableConfig> }): Promise<ConformanceContext>;
}

const encoder = new TextEncoder();
const bytes = (s: string) => encoder.encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls until the predicate holds; bounded, so a missing message fails the test instead of hanging. */
export async function waitFor(predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadlineMs = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadlineMs) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** A handler that records what it receives. */
export function collector() {
  const messages: InboundMessage[] = [];
  return { messages, handler: (m: InboundMessage) => void messages.push(m), payloads: () => messages.map((m) => text(m.data)) };
}

async function started(t: TestContext, factory: TransportFactory, durable?: Partial<DurableConfig>): Promise<ConformanceContext> {
  const ctx = await factory.start(durable === undefined ? {} : { durable });
  t.after(() => ctx.dispose());
  return ctx;
}

async function rejectsWith(promise: Promise<unknown>, kind: AdapterError['kind']): Promise<void> {
  await assert.rejects(promise, (error: unknown) => error instanceof AdapterError && error.kind === kind);
}

const ns = conformanceNamespace;
const testTimeoutMs = 30_000;

export function transportConformance(name: string, factory: TransportFactory): void {
  describe(`Transport conformance: ${name}`, () => {
    coreRules(factory);
    permissionRules(factory);
    durableRules(factory);
  });
}

function coreRules(factory: TransportFactory): void {
  it(
    'a subscription is registered before subscribe() resolves: a publish from another connection right after arrives',
    { timeout: testTimeoutMs },
    async (t) => {
      const ctx = await started(t, factory);
      const coordinator = await ctx.connect('coordinator');
      const alfa = await ctx.connect('alfa');
      for (let round = 0; round < 10; round++) {
        const got = collector();
        const sub = await coordinator.subscribe(`${ns}.review.op${round}.result.*`, got.handler);
        // No delay between resolution and publish: that gap is exactly what the rule covers.
        await alfa.publish(`${ns}.review.op${round}.result.alfa`, bytes(`r${round}`));
        await waitFor(() => got.messages.length === 1, `result ${round}`);
        assert.equal(got.messages[0]?.subject, `${ns}.review.op${round}.result.alfa`);
        await sub.close();
      }
    },
  );

  it('wildcards: * matches exactly one token, > matches one or more trailing tokens', { timeout: testTimeoutMs }, async (t) => {
    const ctx = await started(t, factory);
    const receiver = await ctx.connect('observer');
    const sender = await ctx.connect('observer');
    const star = collector();
    const tail = collector();
    await receiver.subscribe('wild.*.x', star.handler);
    await receiver.subscribe('wild.>', tail.handler);
    for (const subject of ['wild', 'wild.a.x', 'wild.a.b.x', 'wild.a', 'other.a.x', 'wild.fence.x']) await sender.publish(subject, bytes(subject));
    await waitFor(() => star.payloads().includes('wild.fence.x') && tail.payloads().includes('wild.fence.x'), 'the fence message');
    await sleep(50);
    assert.deepEqual(star.payloads().sort(), ['wild.a.x', 'wild.fence.x']);
    assert.deepEqual(tail.payloads().sort(), ['wild.a', 'wild.a.b.x', 'wild.a.x', 'wild.fence.x']);
  });

  it('a queue group delivers each message to exactly one member, plain subscribers get every message', { timeout: testTimeoutMs }, async (t) => {
    const ctx = await started(t, factory);
    const members = [collector(), collector()];
    const plain = collector();
    for (const member of members) await (await ctx.connect('observer')).subscribe('work.items', member.handler, { queue: 'workers' });
    await (await ctx.connect('observer')).subscribe('work.items', plain.handler);
    const sender = await ctx.connect('observer');
    const count = 40;
    for (let i = 0; i < count; i++) await sender.publish('work.items', bytes(String(i)));
    await waitFor(() => plain.messages.length === count && members[0]!.messages.length + members[1]!.messages.length === count, 'all deliveries');
    await sleep(100);
    const queued = [...members[0]!.payloads(), ...members[1]!.payloads()];
    assert.equal(queued.length, count, 'no message went to two members');
    assert.equal(new Set(queued).size, count, 'every message went to one member');
  });

  it('request/reply: respond() answers the requester', { timeout: testTimeoutMs }, async (t) => {
    const ctx = await started(t, factory);
    const responder = await ctx.connect('observer');
    const requester = await ctx.connect('observer');
    await responder.subscribe('svc.echo', async (m) => {
      assert.ok(m.respond, 'a request carries a reply path');
      await m.respond(bytes(`echo:${text(m.data)}`));
    });
    assert.ok(requester.request);
    assert.equal(text(await requester.request('svc.echo', bytes('ping'), 2_000)), 'echo:ping');
  });

  it('a request nobody answers fails with unavailable', { timeout: testTimeoutMs }, async (t) => {
    const ctx = await started(t, factory);
    const requester = await ctx.connect('observer');
    assert.ok(requester.request);
    await rejectsWith(requester.request('svc.nobody', bytes('ping'), 500), 'unavailable');
  });

  it('a plain published message has no reply path and is not marked redelivered', { timeout: testTimeoutMs }, async (t) => {
    const ctx = await started(t, factory);
    const got = collector();
    await (await ctx.connect('observer')).subscribe('plain.msg', got.handler);
    await (await ctx.connect('observer')).publish('plain.msg', bytes('x'), { headers: { 'Convoke-Operation': 'op1' } });
    await waitFor(() => got.messages.length === 1, 'the message');
    assert.equal(got.messages[0]?.respond, undefined);
    assert.equal(got.messages[0]?.redelivered, false);
    assert.equal(got.messages[0]?.headers['Convoke-Operation'], 'op1');
  });
}

function permissionRules(factory: TransportFactory): void {
  it('a publish permission violation is never delivered', { timeout: testTimeoutMs }, async (t) => {
    const ctx = await started(t, factory);
    const observer = await ctx.connect('observer');
    const alfa = await ctx.connect('alfa');
    const got = collector();
    await observer.subscribe(`${ns}.>`, got.handler);
    const forged = await alfa.publish(`${ns}.review.op1.result.bravo`, bytes('forged'));
    const request = await alfa.publish(`${ns}.review.op1.request.bravo`, bytes('forged-request'));
    // Same connection, same server: had the forged publishes been routed they would arrive
    // before this fence. The fence turns "never delivered" into a bounded wait.
    const fence = await alfa.publish(`${ns}.review.op1.result.alfa`, bytes('fence'));
    assert.equal(forged.receipt, factory.capabilities.publishDenialReceipt.streamSubject);
    assert.equal(request.receipt, factory.capabilities.publishDenialReceipt.streamSubject);
    assert.notEqual(fence.receipt, 'rejected');
    await waitFor(() => got.payloads().includes('fence'), 'the fence message');
    await sleep(100);
    assert.deepEqual(got.payloads(), ['fence']);
  });

  it('a subscribe permission violation rejects with denied and leaves the connection usable', { timeout: testTimeoutMs }, async (t) => {
    const ctx = await started(t, factory);
    const alfa = await ctx.connect('alfa');
    await rejectsWith(
      alfa.subscribe(`${ns}.*.*.request.bravo`, () => {}),
      'denied',
    );
    await rejectsWith(
      alfa.subscribe(`${ns}.>`, () => {}),
      'denied',
    );
    const got = collector();
    await alfa.subscribe(`${ns}.*.*.request.alfa`, got.handler);
    await (await ctx.connect('coordinator')).publish(`${ns}.review.op1.request.alfa`, bytes('work'));
    await waitFor(() => got.messages.length === 1, "alfa's own request");
  });

  it('each principal connects with its own permissions: a command client publishes only its own commands', { timeout: testTimeoutMs }, async (t) => {
    const ctx = await started(t, factory);
    const observer = await ctx.connect('observer');
    const client = await ctx.connect('client');
    const got = collector();
    await observer.subscribe('convoke.cmd.>', got.handler);
    const foreign = await client.publish('convoke.cmd.someone-else.invoke', bytes('forged'));
    await client.publish('convoke.cmd.client.invoke', bytes('mine'));
    assert.equal(foreign.receipt, factory.capabilities.publishDenialReceipt.plainSubject);
    await waitFor(() => got.payloads().includes('mine'), 'the permitted command');
    await sleep(100);
    assert.deepEqual(got.payloads(), ['mine']);
  });
}

const requestSubject = (op: string, peer = 'alfa') => `${ns}.review.${op}.request.${peer}`;

interface DurableSetup {
  ctx: ConformanceContext;
  controls: DurableControls;
  coordinator: DurableTransport;
  alfa: Transport;
}

/** A durable harness with alfa's consumers provisioned by the coordinator. */
async function durableSetup(t: TestContext, factory: TransportFactory, config: Partial<DurableConfig> = {}): Promise<DurableSetup> {
  const ctx = await started(t, factory, config);
  assert.ok(ctx.durable, 'a durable factory provides durable controls');
  const coordinator = (await ctx.connect('coordinator')) as DurableTransport;
  await coordinator.provisionPeerConsumers('alfa');
  return { ctx, controls: ctx.durable, coordinator, alfa: await ctx.connect('alfa') };
}

/** alfa's durable request subscription, exactly as a peer binds it. */
function subscribeAlfaRequests(alfa: Transport, handler: (m: InboundMessage) => void | Promise<void>, onExhausted?: SubscribeOptions['onExhausted']) {
  return alfa.subscribe(peerConsumerFilter(ns, 'alfa', 'request'), handler, { durable: peerConsumerName('alfa', 'request'), onExhausted });
}

/** Publishes until the broker gives a definite answer (after a restart the first tries may be unknown). */
async function publishDefinite(transport: Transport, subject: string, payload: string, msgId: string): Promise<PublishReceipt> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const receipt = await transport.publish(subject, bytes(payload), { msgId });
    if (receipt.receipt !== 'unknown') return receipt;
    await sleep(250);
  }
  return assert.fail(`no definite receipt for ${msgId}`);
}

function durableRules(factory: TransportFactory): void {
  const options = factory.capabilities.durable
    ? { timeout: testTimeoutMs }
    : { timeout: testTimeoutMs, skip: 'durable-only rule: this adapter stores nothing' };
  it('a durable publish is acknowledged as stored; the same msgId again is already-stored', options, async (t) => {
    const { coordinator } = await durableSetup(t, factory);
    assert.equal((await coordinator.publish(requestSubject('op1'), bytes('a'), { msgId: 'pub-1' })).receipt, 'stored');
    assert.equal((await coordinator.publish(requestSubject('op1'), bytes('a'), { msgId: 'pub-1' })).receipt, 'already-stored');
    assert.equal((await coordinator.publish(requestSubject('op1'), bytes('a'), { msgId: 'pub-2' })).receipt, 'stored');
  });

  it('a message a durable stream captures offers no reply path to core subscribers (its reply is a PubAck inbox)', options, async (t) => {
    const { coordinator, alfa } = await durableSetup(t, factory);
    const got = collector();
    await coordinator.subscribe(`${ns}.review.*.result.*`, got.handler);
    assert.equal((await alfa.publish(`${ns}.review.op1.result.alfa`, bytes('result'), { msgId: 'res-1' })).receipt, 'stored');
    await waitFor(() => got.messages.length === 1, 'the result');
    assert.equal(got.messages[0]?.respond, undefined);
  });

  it('a publish expecting the wrong stream is rejected, not stored', options, async (t) => {
    const { coordinator, controls } = await durableSetup(t, factory);
    const receipt = await coordinator.publish(requestSubject('op1'), bytes('a'), { msgId: 'pub-1', expectStream: controls.streams.results });
    assert.equal(receipt.receipt, 'rejected');
    assert.match(receipt.detail ?? '', /expected stream/);
    assert.equal((await coordinator.publish(requestSubject('op1'), bytes('a'), { msgId: 'pub-1' })).receipt, 'stored', 'the rejected publish left no trace');
  });

  it('a peer binds the consumer provisioned for it without create permission, and no other', options, async (t) => {
    const { coordinator, alfa } = await durableSetup(t, factory);
    await coordinator.provisionPeerConsumers('bravo');
    const got = collector();
    await subscribeAlfaRequests(alfa, async (m) => {
      got.handler(m);
      await m.ack();
    });
    await rejectsWith(
      alfa.subscribe(peerConsumerFilter(ns, 'bravo', 'request'), () => {}, { durable: peerConsumerName('bravo', 'request') }),
      'denied',
    );
    await rejectsWith(
      alfa.subscribe(peerConsumerFilter(ns, 'alfa', 'request'), () => {}, { durable: 'alfa-made-up' }),
      'denied',
    );
    await coordinator.publish(requestSubject('op1', 'bravo'), bytes('for bravo'), { msgId: 'b-1' });
    await coordinator.publish(requestSubject('op1'), bytes('for alfa'), { msgId: 'a-1' });
    await waitFor(() => got.messages.length === 1, "alfa's request");
    await sleep(100);
    assert.deepEqual(got.payloads(), ['for alfa']);
  });

  it('a durable consumer redelivers an un-acked message after ack_wait, marked redelivered', options, async (t) => {
    const { coordinator, alfa } = await durableSetup(t, factory, { ackWaitMs: 300 });
    const got = collector();
    await subscribeAlfaRequests(alfa, async (m) => {
      got.handler(m);
      if (m.redelivered) await m.ack();
    });
    await coordinator.publish(requestSubject('op1'), bytes('work'), { msgId: 'w-1' });
    await waitFor(() => got.messages.length === 2, 'the redelivery');
    await sleep(900);
    assert.deepEqual(
      got.messages.map((m) => m.redelivered),
      [false, true],
      'acked after the redelivery: no third delivery',
    );
  });

  it('a handler that works longer than ack_wait is not sent its message again; one that returned without an ack is', options, async (t) => {
    const { coordinator, alfa } = await durableSetup(t, factory, { ackWaitMs: 400 });
    const deliveries: string[] = [];
    await subscribeAlfaRequests(alfa, async (m) => {
      const payload = new TextDecoder().decode(m.data);
      deliveries.push(`${payload}${m.redelivered ? ' again' : ''}`);
      if (payload === 'slow') {
        await sleep(1_600); // four times ack_wait, still working
        await m.ack();
      } else if (m.redelivered) await m.ack();
      // 'forgotten', first delivery: returns without an ack, so it comes back after ack_wait.
    });
    await coordinator.publish(requestSubject('op1'), bytes('slow'), { msgId: 's-1' });
    await coordinator.publish(requestSubject('op2'), bytes('forgotten'), { msgId: 'f-1' });
    await waitFor(() => deliveries.includes('forgotten again'), 'the redelivery of the message nobody acked', 10_000);
    await sleep(2_000);
    assert.deepEqual(
      deliveries.filter((d) => d.startsWith('slow')),
      ['slow'],
      'the slow handler saw its message once',
    );
    assert.deepEqual(
      deliveries.filter((d) => d.startsWith('forgotten')),
      ['forgotten', 'forgotten again'],
    );
  });

  it('nak redelivers before ack_wait, after the requested delay', options, async (t) => {
    const { coordinator, alfa } = await durableSetup(t, factory, { ackWaitMs: 20_000 });
    const deliveries: { atMs: number; redelivered: boolean }[] = [];
    await subscribeAlfaRequests(alfa, async (m) => {
      deliveries.push({ atMs: Date.now(), redelivered: m.redelivered });
      if (!m.redelivered) await m.nak(400);
      else await m.ack();
    });
    await coordinator.publish(requestSubject('op1'), bytes('work'), { msgId: 'w-1' });
    await waitFor(() => deliveries.length === 2, 'the nak redelivery', 10_000);
    const [first, second] = deliveries as [(typeof deliveries)[0], (typeof deliveries)[0]];
    assert.equal(second.redelivered, true);
    assert.ok(second.atMs - first.atMs >= 300, `redelivered after ${second.atMs - first.atMs} ms, before the 400 ms nak delay`);
  });

  it('max_deliver exhaustion calls onExhausted once and the message is not delivered again', options, async (t) => {
    const { coordinator, alfa, controls } = await durableSetup(t, factory, { maxDeliver: 2, ackWaitMs: 200 });
    const got = collector();
    const exhausted: unknown[] = [];
    await subscribeAlfaRequests(alfa, got.handler, (info) => void exhausted.push(info));
    await coordinator.publish(requestSubject('op1'), bytes('never acked'), { msgId: 'x-1' });
    await waitFor(() => exhausted.length === 1, 'the exhaustion report');
    await sleep(1_000);
    // Sequence 1 is the stream's anchor.
    assert.deepEqual(exhausted, [{ subject: requestSubject('op1'), stream: controls.streams.requests, streamSeq: 2, deliveries: 2 }]);
    assert.deepEqual(
      got.messages.map((m) => m.redelivered),
      [false, true],
    );
  });

  it('a stream filled to max_msgs rejects new publishes (discard new) and keeps the stored ones', options, async (t) => {
    const { coordinator, alfa } = await durableSetup(t, factory, { maxMsgs: 3 });
    for (let i = 1; i <= 3; i++) assert.equal((await coordinator.publish(requestSubject(`op${i}`), bytes(`r${i}`), { msgId: `m-${i}` })).receipt, 'stored');
    const overflow = await coordinator.publish(requestSubject('op4'), bytes('r4'), { msgId: 'm-4' });
    assert.equal(overflow.receipt, 'rejected');
    assert.match(overflow.detail ?? '', /maximum messages/);
    // The duplicate check runs before the limit check: an uncertain retry still reconciles.
    assert.equal((await coordinator.publish(requestSubject('op1'), bytes('r1'), { msgId: 'm-1' })).receipt, 'already-stored');
    assert.deepEqual(await coordinator.checkDurability(), { ok: true }, 'full is not a broken guarantee');
    const got = collector();
    await subscribeAlfaRequests(alfa, got.handler);
    await waitFor(() => got.messages.length === 3, 'the stored requests');
    await sleep(200);
    assert.deepEqual(got.payloads(), ['r1', 'r2', 'r3']);
  });

  it('a restarted server keeps stored-but-unacked requests and the consumer resumes', options, async (t) => {
    const { coordinator, alfa, controls } = await durableSetup(t, factory, { ackWaitMs: 500, maxDeliver: 100 });
    const got = collector();
    let ackAll = false;
    await subscribeAlfaRequests(alfa, async (m) => {
      got.handler(m);
      if (text(m.data) === 'r1' || ackAll) await m.ack();
    });
    await coordinator.publish(requestSubject('op1'), bytes('r1'), { msgId: 'm-1' });
    await coordinator.publish(requestSubject('op2'), bytes('r2'), { msgId: 'm-2' });
    await waitFor(() => got.payloads().includes('r1') && got.payloads().includes('r2'), 'both requests before the restart');
    await controls.restartServer();
    const r2BeforeRestart = got.payloads().filter((p) => p === 'r2').length;
    ackAll = true;
    assert.equal((await publishDefinite(coordinator, requestSubject('op3'), 'r3', 'm-3')).receipt, 'stored');
    await waitFor(
      () => got.payloads().filter((p) => p === 'r2').length > r2BeforeRestart && got.payloads().includes('r3'),
      'r2 again and r3 after the restart',
      15_000,
    );
    assert.equal(got.payloads().filter((p) => p === 'r1').length, 1, 'the acked request stays acked across the restart');
    assert.ok(
      got.messages
        .filter((m) => text(m.data) === 'r2')
        .slice(1)
        .every((m) => m.redelivered),
    );
    assert.deepEqual(await coordinator.checkDurability(), { ok: true });
  });

  it('a durable subscription pulls again within seconds of a broker restart, even when its first look after reconnecting fails', options, async (t) => {
    const { coordinator, alfa, controls } = await durableSetup(t, factory, { ackWaitMs: 2_000, maxDeliver: 100 });
    const got = collector();
    await subscribeAlfaRequests(alfa, async (m) => {
      got.handler(m);
      await m.ack();
    });
    assert.equal((await publishDefinite(coordinator, requestSubject('op1'), 'r1', 'm-1')).receipt, 'stored');
    await waitFor(() => got.payloads().includes('r1'), 'r1 before the restart');
    // While the port is served without JetStream the subscriber reconnects and its consumer
    // check fails; a retry paced by a 30 s pull expiry would leave the consumer idle for as long
    // as a lease, which is what stalled branches after broker restarts.
    await controls.restartServerThroughInterlude(1_500);
    assert.equal((await publishDefinite(coordinator, requestSubject('op2'), 'r2', 'm-2')).receipt, 'stored');
    await waitFor(() => got.payloads().includes('r2'), 'r2 within seconds of the restart', 12_000);
  });

  it('a publish whose storage ack never arrives is unknown, never rejected', options, async (t) => {
    const { coordinator, controls } = await durableSetup(t, factory);
    await controls.stopServer();
    const receipt = await coordinator.publish(requestSubject('op1'), bytes('r1'), { msgId: 'm-1' });
    assert.equal(receipt.receipt, 'unknown');
    await controls.startServer();
    // Reconciliation: retrying with the same id settles it either way, never twice.
    assert.ok(['stored', 'already-stored'].includes((await publishDefinite(coordinator, requestSubject('op1'), 'r1', 'm-1')).receipt));
  });

  it('a publish no stream answers for (a stream stopped or gone) is unknown, pending reconciliation: not proof of refusal', options, async (t) => {
    const { coordinator, controls } = await durableSetup(t, factory);
    await controls.deleteStream(controls.streams.requests);
    const receipt = await coordinator.publish(requestSubject('op1'), bytes('work'), { msgId: 'nobody-1' });
    assert.equal(receipt.receipt, 'unknown', receipt.detail);
    assert.match(receipt.detail ?? '', /no stream answered/);
    assert.equal((await coordinator.checkDurability()).ok, false, "a stream really gone is the durability check's finding");
  });

  it('checkDurability reports a stream whose duplicate window was shortened as not ok', options, async (t) => {
    const { coordinator, controls } = await durableSetup(t, factory, { duplicateWindowMs: 60_000 });
    assert.deepEqual(await coordinator.checkDurability(), { ok: true });
    await controls.alterStream(controls.streams.requests, { duplicate_window: 1_000 * 1_000_000 });
    const report = await coordinator.checkDurability();
    assert.equal(report.ok, false);
    assert.match(report.ok ? '' : report.description, new RegExp(`${controls.streams.requests}: duplicate window`));
  });

  it("a peer squatting another peer's message id cannot make that peer's result disappear", options, async (t) => {
    const { ctx, coordinator, alfa } = await durableSetup(t, factory);
    const bravo = await ctx.connect('bravo');
    const got = collector();
    await coordinator.subscribe(
      `${ns}.review.*.result.*`,
      async (m) => {
        got.handler(m);
        await m.ack();
      },
      { durable: 'coord-result' },
    );
    // Message ids are computable by anyone who knows the operation: alfa publishes first, on its
    // own subject, under the id bravo's result will carry.
    assert.equal((await alfa.publish(`${ns}.review.op1.result.alfa`, bytes('squat'), { msgId: 'pub-bravo.result' })).receipt, 'stored');
    const real = await bravo.publish(`${ns}.review.op1.result.bravo`, bytes('bravo votes'), { msgId: 'pub-bravo.result' });
    assert.equal(real.receipt, 'stored', real.detail);
    await waitFor(() => got.payloads().includes('bravo votes'), "bravo's result at the coordinator");
    assert.deepEqual(got.messages.map((m) => `${m.subject} ${text(m.data)}`).sort(), [
      `${ns}.review.op1.result.alfa squat`,
      `${ns}.review.op1.result.bravo bravo votes`,
    ]);
  });

  it("a peer flooding its own subjects cannot make another peer's work be refused (capacity is per peer)", options, async (t) => {
    const { ctx, coordinator, alfa } = await durableSetup(t, factory, { maxMsgs: 5 });
    const bravo = await ctx.connect('bravo');
    const flood: string[] = [];
    for (let i = 0; i < 8; i++) flood.push((await bravo.publish(`${ns}.review.junk${i}.result.bravo`, bytes('junk'), { msgId: `junk-${i}` })).receipt);
    assert.deepEqual(flood, ['stored', 'stored', 'stored', 'stored', 'stored', 'rejected', 'rejected', 'rejected'], 'bravo fills only its own share');
    const result = await alfa.publish(`${ns}.review.op1.result.alfa`, bytes('alfa votes'), { msgId: 'pub-alfa.result' });
    assert.equal(result.receipt, 'stored', result.detail);
    for (const peer of ['alfa', 'bravo'])
      assert.equal((await coordinator.publish(requestSubject('op2', peer), bytes('work'), { msgId: `req-${peer}` })).receipt, 'stored');
  });

  it('consumed messages are released: a stream capped at 3 messages carries 30 in a row', options, async (t) => {
    const { coordinator, alfa } = await durableSetup(t, factory, { maxMsgs: 3 });
    const got = collector();
    await subscribeAlfaRequests(alfa, async (m) => {
      got.handler(m);
      await m.ack();
    });
    for (let i = 1; i <= 30; i++) {
      const receipt = await coordinator.publish(requestSubject(`op${i}`), bytes(`r${i}`), { msgId: `m-${i}` });
      assert.equal(receipt.receipt, 'stored', `request ${i}: ${receipt.detail}`);
      await waitFor(() => got.messages.length === i, `request ${i} consumed`);
      // The ack is fire-and-forget: wait until the broker has released the message.
      await sleep(i % 3 === 0 ? 50 : 0);
    }
    assert.deepEqual(
      got.payloads(),
      Array.from({ length: 30 }, (_, i) => `r${i + 1}`),
    );
  });

  it(
    'an unconsumed message is never evicted: a full stream refuses, and a byte cap (which nats-server 2.9 enforces by evicting) is reported',
    options,
    async (t) => {
      const { coordinator, alfa, controls } = await durableSetup(t, factory, { maxMsgs: 3 });
      for (let i = 1; i <= 3; i++)
        assert.equal((await coordinator.publish(requestSubject(`op${i}`), bytes(`request ${i} with a body`), { msgId: `m-${i}` })).receipt, 'stored');
      for (let i = 4; i <= 6; i++)
        assert.equal((await coordinator.publish(requestSubject(`op${i}`), bytes(''), { msgId: `m-${i}` })).receipt, 'rejected', 'tiny messages too');
      assert.deepEqual(await coordinator.checkDurability(), { ok: true });
      const got = collector();
      await subscribeAlfaRequests(alfa, got.handler);
      await waitFor(() => got.messages.length === 3, 'the stored requests');
      assert.deepEqual(got.payloads(), ['request 1 with a body', 'request 2 with a body', 'request 3 with a body']);
      await controls.alterStream(controls.streams.requests, { max_bytes: 1_000_000 });
      const report = await coordinator.checkDurability();
      assert.equal(report.ok, false);
      assert.match(report.ok ? '' : report.description, /max_bytes .*evicts/);
    },
  );

  it('a stream that lost stored messages (purged, or recreated) is reported broken for its namespace', options, async (t) => {
    const { coordinator, controls } = await durableSetup(t, factory);
    assert.equal((await coordinator.publish(requestSubject('op1'), bytes('unconsumed'), { msgId: 'm-1' })).receipt, 'stored');
    assert.deepEqual(await coordinator.checkDurability(), { ok: true });
    await controls.purgeStream(controls.streams.requests);
    const purged = await coordinator.checkDurability();
    assert.equal(purged.ok, false);
    assert.deepEqual(purged.ok ? [] : purged.brokenNamespaces, [ns]);
    assert.match(purged.ok ? '' : purged.description, new RegExp(`${controls.streams.requests}: .*(purged|lost)`));
    // Deleted and created again by the deployment: a fresh, anchored stream — but not the one
    // whose messages were in flight, and the check says so once.
    await controls.deleteStream(controls.streams.results);
    await controls.deleteStream(controls.streams.requests);
    await coordinator.ensureStreams();
    const recreated = await coordinator.checkDurability();
    assert.equal(recreated.ok, false);
    assert.deepEqual(recreated.ok ? [] : recreated.brokenNamespaces, [ns]);
    assert.match(recreated.ok ? '' : recreated.description, /recreated/);
    assert.deepEqual(await coordinator.checkDurability(), { ok: true }, 'the new streams are the ones watched from then on');
  });
}
