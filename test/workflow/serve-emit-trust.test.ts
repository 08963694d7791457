/**
 * Whom an emitted event reaches, and whether it lands in its stream, over a real nats-server whose
 * users have the permissions the deployment's plan generates (`convoke serve` as a child process,
 * emit jetstream, listen):
 *
 * - an event a principal's workflow emits travels on `<emitPrefix>.<principal>.<type>` and wakes
 *   that principal's listens only; another principal's listen on the type keeps waiting, and is
 *   woken by an event publisher's event of the type (which reaches every principal);
 * - nobody but the coordinator may publish into the emitted space: not an event publisher
 *   allowed the type, not a command client (the broker refuses); and the coordinator no longer
 *   publishes on the publishers' space;
 * - no one can take the JetStream message id of another principal's emitted event first: not a
 *   workflow emitting an event under that event's id (`emit.event.with.id`), not a publisher
 *   sending a message with that id as `Nats-Msg-Id` — the event still lands in the stream;
 * - an event publisher cannot keep a principal's emitted event from that principal's listens by
 *   sending first, on its own subject, an event under the identity the emitted one will carry
 *   (its type, source and derivable id): the two came from different senders, and both are taken;
 * - a principal whose workflows emit past its share of the stream (workflows.events.streamEventsPerPrincipal)
 *   loses its own oldest events from it, and every other principal's stay (the generated
 *   coordinator user may purge the stream).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { errors, headers as natsHeaders } from '@nats-io/transport-node';
import { inboxPrefixFor } from '../../src/adapters/transport/nats-names.js';
import { sha256Hex } from '../../src/contract/canonical.js';
import { emittedMessageId, type CloudEvent } from '../../src/contract/cloudevents.js';
import { subjectSpacesOverlap } from '../../src/contract/ids.js';
import type { JsonObject } from '../../src/contract/json.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';
import { deploymentForSuite, e2eBundle, eventTypes, eventually, type CommandClient } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const prefix = 'shop.events';
const emitPrefix = 'shop.emitted';
const stream = 'SHOP_EMITTED';
const placed = 'com.example.order.placed';
/** Each principal's share of the stream: billing's workflows emit past it in the last test. */
const share = 3;

function bundle(): JsonObject {
  const b = e2eBundle();
  b.workflows = {
    announce: {
      document: { dsl: '1.0.3', namespace: 'e2e', name: 'announce', version: '1.0.0' },
      do: [{ placed: { emit: { event: { with: { source: 'https://shop.example', type: placed, data: '${ {orderId: .orderId} }' } } } } }],
    },
    // Emits under an id of its input's choosing.
    squat: {
      document: { dsl: '1.0.3', namespace: 'e2e', name: 'squat', version: '1.0.0' },
      do: [{ placed: { emit: { event: { with: { id: '${ .id }', source: 'https://shop.example', type: placed, data: { squat: true } } } } } }],
    },
    await: {
      document: { dsl: '1.0.3', namespace: 'e2e', name: 'await', version: '1.0.0' },
      do: [{ placed: { listen: { to: { one: { with: { type: placed } } } } } }],
    },
    // Takes every event of the type, wherever it comes from, until it holds two.
    collect: {
      document: { dsl: '1.0.3', namespace: 'e2e', name: 'collect', version: '1.0.0' },
      do: [{ placed: { listen: { to: { any: [{ with: { type: placed } }], until: '${ length >= 2 }' }, read: 'envelope' } } }],
    },
  };
  return b;
}

const clients = new Map<string, CommandClient>();

const deployment = deploymentForSuite(
  {
    mode: 'core',
    store: 'sqlite',
    bundle: bundle(),
    groups: { reviewers: ['alfa'] },
    peers: {},
    commandClients: ['billing', 'sales'],
    workflows: {
      events: {
        subjectPrefix: prefix,
        emitSubjectPrefix: emitPrefix,
        emit: 'jetstream',
        stream,
        streamEventsPerPrincipal: share,
        listen: {},
        publishers: { shop: [placed] },
      },
    },
  },
  {
    startUp: async (f) => {
      await f.startServe();
      for (const principal of ['billing', 'sales']) clients.set(principal, await f.client(principal));
    },
  },
);

const start = (principal: string, workflow: string, key: string, input: JsonObject) => clients.get(principal)!.startedInstance(workflow, key, input);
const finished = async (id: string) => eventTypes(await deployment.fixture.log(id)).includes('workflow-completed');
const event = (id: string, data: JsonObject) =>
  new TextEncoder().encode(JSON.stringify({ specversion: '1.0', id, source: 'https://pay.example', type: placed, data }));
/** The instance `announce` started by `principal` under `key` will be, and its emitted event's id and JetStream message id: all computable. */
function announced(principal: string, key: string): { instanceId: string; eventId: string; messageId: string } {
  const instanceId = workflowInstanceId(principal, deployment.fixture.contract.digest, 'announce', key);
  const digest = sha256Hex(`${instanceId}\u0000/do/0/placed`);
  const eventId = `${digest.slice(0, 8)}-${digest.slice(8, 12)}-${digest.slice(12, 16)}-${digest.slice(16, 20)}-${digest.slice(20, 32)}`;
  return { instanceId, eventId, messageId: emittedMessageId({ instanceId, at: '/do/0/placed' }) };
}
const isPermissionViolation = (error: unknown) => error instanceof Error && error.cause instanceof errors.PermissionViolationError;

test('an emitted event wakes its own principal’s listens only; an event publisher’s reaches every principal’s', async () => {
  // Sales' listen first: the intake offers an event to the instances in the order it holds them,
  // so an emitted event delivered to every principal would reach sales' listen before billing's.
  const theirs = await start('sales', 'await', 'a-sales', {});
  const own = await start('billing', 'await', 'a-billing', {});
  for (const id of [theirs, own])
    await eventually(async () => eventTypes(await deployment.fixture.log(id)).includes('listen-started'), 'the listen waits', 20_000);

  await start('billing', 'announce', 'a-announce', { orderId: 'o-1' });
  await eventually(() => finished(own), 'billing’s listen is woken by billing’s emitted event', 20_000);
  assert.ok(!eventTypes(await deployment.fixture.log(theirs)).includes('listen-event-received'), 'sales’ listen took nothing from billing’s workflow');

  // Sales' listen was waiting all along: an event publisher's event of the type reaches it.
  const shop = await deployment.fixture.userConnection('shop', inboxPrefixFor('evt', 'shop'));
  const answer = await shop.request(`${prefix}.${placed}`, event('pub-1', { orderId: 'o-2' }), { timeout: 10_000 });
  assert.deepEqual(JSON.parse(new TextDecoder().decode(answer.data)), { status: 'accepted', count: 1 });
  await eventually(() => finished(theirs), 'sales’ listen is woken by the publisher’s event', 20_000);
});

test('only the coordinator publishes into the emitted space: a publisher allowed the type and a command client are refused by the broker', async () => {
  const shop = await deployment.fixture.userConnection('shop', inboxPrefixFor('evt', 'shop'));
  const billing = await deployment.fixture.userConnection('billing', inboxPrefixFor('cmd', 'billing'));
  for (const [who, nc] of [
    ['shop', shop],
    ['billing', billing],
  ] as const) {
    await assert.rejects(nc.request(`${emitPrefix}.sales.${placed}`, event(`forged-${who}`, {}), { timeout: 3_000 }), isPermissionViolation, who);
  }
  // The generated users: the coordinator publishes emitted events, and nothing on the publishers'
  // space; no other user may publish anything the emitted space holds.
  for (const user of deployment.fixture.plan) {
    const into = user.permissions.publish.filter((subject) => subjectSpacesOverlap(subject.replace(/\.>$/, ''), emitPrefix));
    if (user.role === 'coordinator') {
      assert.deepEqual(into, [`${emitPrefix}.>`]);
      assert.ok(
        !user.permissions.publish.some((subject) => subjectSpacesOverlap(subject.replace(/\.>$/, ''), prefix)),
        'the coordinator publishes no outside event',
      );
      for (const space of [`${prefix}.>`, `${emitPrefix}.>`]) assert.ok(user.permissions.subscribe.includes(space), space);
    } else assert.deepEqual(into, [], user.user);
  }
});

test('nobody takes the message id of another principal’s emitted event first: it still lands in the stream', async () => {
  const nc = await deployment.fixture.adminConnection();
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(stream);
  assert.deepEqual(info.config.subjects, [`${emitPrefix}.>`], 'the stream captures the emitted space only');
  assert.ok(info.config.max_age > 0 && info.config.max_bytes > 0, 'its retention is bounded');
  const onSubject = async (subject: string) => (await jsm.streams.info(stream, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;
  const billingBefore = await onSubject(`${emitPrefix}.billing.${placed}`);

  // The instance sales is about to start, its emitted event's id and its JetStream message id: all computable.
  const { instanceId: victim, eventId: victimEventId, messageId: victimMessageId } = announced('sales', 'c-victim');

  // A publisher sends messages under those ids where it may publish...
  const shop = await deployment.fixture.userConnection('shop', inboxPrefixFor('evt', 'shop'));
  for (const msgID of [victimEventId, victimMessageId]) {
    const h = natsHeaders();
    h.set('Nats-Msg-Id', msgID);
    h.set('content-type', 'application/cloudevents+json');
    shop.publish(`${prefix}.${placed}`, event(msgID, { squat: true }), { headers: h });
  }
  await shop.flush();
  // ...and billing's workflow emits an event under the id sales' event will carry.
  const squatter = await start('billing', 'squat', 'c-squat', { id: victimEventId });
  await eventually(() => finished(squatter), 'the squatting workflow published', 20_000);

  assert.equal(await start('sales', 'announce', 'c-victim', { orderId: 'o-3' }), victim);
  await eventually(() => finished(victim), 'sales’ workflow published', 20_000);
  assert.equal(await onSubject(`${emitPrefix}.sales.${placed}`), 1, 'sales’ event is in the stream');
  assert.equal(await onSubject(`${emitPrefix}.billing.${placed}`), billingBefore + 1, 'billing’s too, under its own subject');
  const stored = await jsm.streams.getMessage(stream, { last_by_subj: `${emitPrefix}.sales.${placed}` });
  assert.ok(stored);
  const landed = stored.json<CloudEvent>();
  assert.equal(landed.id, victimEventId);
  assert.deepEqual(landed.data, { orderId: 'o-3' });
  assert.equal(stored.header.get('Nats-Msg-Id'), victimMessageId);
  assert.equal((await jsm.streams.info(stream)).state.messages, info.state.messages + 2, 'nothing the publisher sent is in the stream');
});

test('an event publisher cannot keep a principal’s emitted event from its listens by sending first under that event’s identity', async () => {
  const collector = await start('sales', 'collect', 'd-collect', {});
  await eventually(async () => eventTypes(await deployment.fixture.log(collector)).includes('listen-started'), 'the listen waits', 20_000);
  // The publisher is allowed the type: its event reaches sales' listen, under the identity (type,
  // source, id) sales' workflow's event will carry, with content of its own.
  const { instanceId: victim, eventId } = announced('sales', 'd-victim');
  const shop = await deployment.fixture.userConnection('shop', inboxPrefixFor('evt', 'shop'));
  const squat = { specversion: '1.0', id: eventId, source: 'https://shop.example', type: placed, data: { squat: true } };
  const answer = await shop.request(`${prefix}.${placed}`, new TextEncoder().encode(JSON.stringify(squat)), { timeout: 10_000 });
  assert.deepEqual(JSON.parse(new TextDecoder().decode(answer.data)), { status: 'accepted', count: 1 });

  assert.equal(await start('sales', 'announce', 'd-victim', { orderId: 'o-4' }), victim);
  await eventually(() => finished(victim), 'sales’ workflow published', 20_000);
  // Sales' own workflow's event is another event than the publisher's: taken too, not refused as a conflicting claim to its identity.
  await eventually(() => finished(collector), 'sales’ listen takes its own workflow’s event beside the publisher’s', 20_000);
  const taken = (await deployment.fixture.log(collector))
    .flatMap((stored) => stored.transition.events)
    .filter((event) => (event as { type: string }).type === 'listen-event-received')
    .map((event) => (event as unknown as { event: CloudEvent }).event);
  assert.deepEqual(
    taken.map((event) => [event.id, event.data]),
    [
      [eventId, { squat: true }],
      [eventId, { orderId: 'o-4' }],
    ],
  );
});

test('a principal emitting past its share of the stream loses its own oldest events from it; another principal’s stay', async () => {
  const nc = await deployment.fixture.adminConnection();
  const jsm = await jetstreamManager(nc);
  const ofPrincipal = async (principal: string) => {
    const subjects = (await jsm.streams.info(stream, { subjects_filter: `${emitPrefix}.${principal}.>` })).state.subjects ?? {};
    return Object.values(subjects).reduce((sum, count) => sum + count, 0);
  };
  const sales = await ofPrincipal('sales');
  assert.ok(sales > 0 && sales <= share, `sales holds ${sales} events, within its share`);
  for (const key of ['e-1', 'e-2', 'e-3', 'e-4', 'e-5']) {
    const id = await start('billing', 'announce', key, { orderId: key });
    await eventually(() => finished(id), `billing's ${key} published`, 20_000);
  }
  assert.equal(await ofPrincipal('billing'), share, 'billing holds its share: its latest events');
  const latest = await jsm.streams.getMessage(stream, { last_by_subj: `${emitPrefix}.billing.${placed}` });
  assert.deepEqual(latest?.json<CloudEvent>().data, { orderId: 'e-5' });
  assert.equal(await ofPrincipal('sales'), sales, 'every event of sales’ is still in the stream');
});
