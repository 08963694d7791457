/**
 * Event transports wired by the serve config (`workflows.events`), over a real nats-server whose
 * users have the permissions the deployment's plan generates: a workflow in `convoke serve`
 * emits an event on core NATS, in the emitted space (serve-emit-trust.test.ts: whom it reaches); another listens and is woken by an event published by an event
 * publisher principal, answered in that principal's own inbox; a principal without the
 * permission — a command client, or the publisher on a type it is not allowed — is refused by
 * the broker, and the refused event wakes nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errors } from '@nats-io/transport-node';
import { inboxPrefixFor } from '../../src/adapters/transport/nats-names.js';
import type { JsonObject } from '../../src/contract/json.js';
import type { Stored } from '../../src/kernel/types.js';
import type { WorkflowTransition } from '../../src/workflow/exec/events.js';
import { foldWorkflow } from '../../src/workflow/exec/record.js';
import { deploymentForSuite, e2eBundle, eventTypes, eventually } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const prefix = 'shop.events';
const paid = 'com.example.order.paid';

function bundle(): JsonObject {
  const b = e2eBundle();
  b.workflows = {
    announce: {
      document: { dsl: '1.0.3', namespace: 'e2e', name: 'announce', version: '1.0.0' },
      do: [{ placed: { emit: { event: { with: { source: 'https://shop.example', type: 'com.example.order.placed', data: '${ {orderId: .orderId} }' } } } } }],
    },
    await: {
      document: { dsl: '1.0.3', namespace: 'e2e', name: 'await', version: '1.0.0' },
      do: [
        {
          payment: {
            listen: { to: { one: { with: { type: paid }, correlate: { order: { from: '${ .data.orderId }', expect: '${ .orderId }' } } } } },
          },
        },
      ],
    },
  };
  return b;
}

const deployment = deploymentForSuite(
  {
    mode: 'core',
    store: 'sqlite',
    bundle: bundle(),
    groups: { reviewers: ['alfa'] },
    peers: {},
    commandClients: ['billing'],
    workflows: { events: { subjectPrefix: prefix, emit: 'nats', listen: {}, publishers: { shop: [paid] } } },
  },
  { client: 'billing' },
);

const start = (workflow: string, key: string, input: JsonObject) => deployment.client.startedInstance(workflow, key, input);
const paidEvent = (orderId: string, id: string) =>
  new TextEncoder().encode(JSON.stringify({ specversion: '1.0', id, source: 'https://pay.example', type: paid, data: { orderId } }));
const isPermissionViolation = (error: unknown) => error instanceof Error && error.cause instanceof errors.PermissionViolationError;

test('emit: a workflow in serve publishes its event on <emitPrefix>.<principal>.<type> once it is recorded', async () => {
  const admin = await deployment.fixture.adminConnection();
  const seen: JsonObject[] = [];
  const sub = admin.subscribe('convoke.emitted.>', {
    callback: (_e, msg) => void seen.push({ subject: msg.subject, ...(JSON.parse(new TextDecoder().decode(msg.data)) as JsonObject) }),
  });
  await admin.flush();
  const id = await start('announce', 'emit-1', { orderId: 'o-1' });
  await eventually(() => seen.length > 0, 'the emitted event on NATS', 20_000);
  sub.unsubscribe();
  assert.equal(
    seen[0]?.subject,
    'convoke.emitted.billing.com.example.order.placed',
    'the default emitted space, under the principal whose workflow emitted it',
  );
  assert.deepEqual(seen[0]?.data, { orderId: 'o-1' });
  await eventually(async () => eventTypes(await deployment.fixture.log(id)).includes('workflow-completed'), 'the emit task completed', 20_000);
});

test('listen: an event publisher wakes a waiting instance; others are refused by the broker', async () => {
  const id = await start('await', 'listen-1', { orderId: 'o-7' });
  await eventually(async () => eventTypes(await deployment.fixture.log(id)).includes('listen-started'), 'the listen waits', 20_000);

  // A command client has no publish permission on event subjects.
  const intruder = await deployment.fixture.userConnection('billing', inboxPrefixFor('cmd', 'billing'));
  await assert.rejects(intruder.request(`${prefix}.${paid}`, paidEvent('o-7', 'forged-1'), { timeout: 3_000 }), isPermissionViolation);
  // The publisher may send only its own types.
  const shop = await deployment.fixture.userConnection('shop', inboxPrefixFor('evt', 'shop'));
  await assert.rejects(shop.request(`${prefix}.com.example.order.refunded`, paidEvent('o-7', 'forged-2'), { timeout: 3_000 }), isPermissionViolation);
  assert.ok(!eventTypes(await deployment.fixture.log(id)).includes('listen-event-received'), 'nothing refused reached the listen');

  const answer = await shop.request(`${prefix}.${paid}`, paidEvent('o-7', 'pay-1'), { timeout: 10_000 });
  assert.deepEqual(JSON.parse(new TextDecoder().decode(answer.data)), { status: 'accepted', count: 1 });
  await eventually(async () => eventTypes(await deployment.fixture.log(id)).includes('workflow-completed'), 'the woken instance completed', 20_000);
  const log = await deployment.fixture.log(id);
  // The output as the log gives it (the event may name where it was recorded rather than carry it).
  assert.deepEqual(foldWorkflow(log as unknown as Stored<WorkflowTransition>[])?.output, [{ orderId: 'o-7' }]);
});

test('an emitted event the intake refuses for good is counted, by reason, in convoke_workflow_emitted_events_dropped_total, and logged', async () => {
  const serve = deployment.fixture.serve;
  assert.ok(serve);
  const dropped = async () => {
    const text = await (await fetch(`${serve.url}/metrics`)).text();
    const counts = new Map<string, number>();
    for (const [, reason, value] of text.matchAll(/^convoke_workflow_emitted_events_dropped_total\{reason="([^"]+)"\} (\d+)$/gm))
      counts.set(reason!, Number(value));
    return counts;
  };
  // Every reason shows from the first scrape, at 0.
  assert.deepEqual([...(await dropped())].sort(), [
    ['backlog-full', 0],
    ['intake-closed', 0],
    ['refused', 0],
    ['window', 0],
  ]);
  const admin = await deployment.fixture.adminConnection();
  // Not a CloudEvent (no id): refused for good, and nobody is answered for an emitted event.
  admin.publish(
    'convoke.emitted.billing.com.example.order.placed',
    JSON.stringify({ specversion: '1.0', source: 'https://shop.example', type: 'com.example.order.placed' }),
  );
  await admin.flush();
  await eventually(async () => (await dropped()).get('refused') === 1, 'the refusal counted', 20_000);
  assert.deepEqual([(await dropped()).get('window'), (await dropped()).get('backlog-full'), (await dropped()).get('intake-closed')], [0, 0, 0]);
  await eventually(() => /"event":"emitted-event-dropped"/.test(serve.stderr()), 'the drop logged', 10_000);
  assert.match(
    serve.stderr(),
    /"event":"emitted-event-dropped"[^\n]*convoke\.emitted\.billing\.com\.example\.order\.placed \(refused\): refused \(invalid-input\): not a CloudEvent/,
  );
});
