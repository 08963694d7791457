/**
 * An event's identity (type, source and id) names one event of its senders in an instance: a send
 * again of the event it took is answered as taken, and a different event under the same identity
 * from the same senders is not — it is refused as a conflict, never answered as taken while the
 * log holds another event. The senders are part of the identity, as the type is: the instance's
 * principal (POST /workflow-events) claiming the identity an event publisher's event will carry
 * does not keep that event out. Over real parts: POST /workflow-events on a socket, and a NATS
 * request on a real nats-server.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { serveCloudEvents } from '../../src/adapters/transport/nats-cloudevents.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonValue } from '../../src/contract/json.js';
import { buildFixtureApp, writeHttpFixture } from '../support/http-fixtures.js';
import { startNatsServer } from '../support/nats-server.js';
import { assertReplayEqual, harness, yaml } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const paid = (data: JsonValue): CloudEvent => ({ specversion: '1.0', id: 'pay-1', source: 'https://bank.example/payments', type: 'com.example.paid', data });

const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: wait-paid, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          any:
            - with: { type: com.example.paid }
          until:
            one: { with: { type: com.example.shipped } }
`);

test('an event under the identity of one an instance took from the same senders, with other content, is refused as a conflict (HTTP 409, NATS rejected), never answered as taken; another sender’s is another event', async () => {
  const fixture = await writeHttpFixture();
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  const h = harness();
  const built = await buildFixtureApp(fixture, new SystemClock(), { workflowEvents: h.executor });
  const subscription = serveCloudEvents(nc, 'test.events', h.executor);
  try {
    const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
    const post = (event: CloudEvent) =>
      fetch(`${address}/workflow-events`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json', authorization: `Bearer ${fixture.tokens.alice}` },
        body: JSON.stringify(event),
      });
    const publish = async (event: CloudEvent) =>
      (await nc.request(`test.events.${event.type}`, JSON.stringify(event), { timeout: 5000 })).json<{
        status: string;
        count?: number;
        error?: { kind: string };
      }>();
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'paid-1', document, input: {} });
    while (!(await h.executor.get(instanceId))?.listens['/do/0/wait']) await new Promise((r) => setTimeout(r, 5));

    // The instance's principal posts its own event first, under the identity the bank's will carry.
    const squat = await post(paid({ amount: 0 }));
    assert.equal(squat.status, 202);
    // The bank's event, from an event publisher: another sender's, so another event. The principal's claim does not keep it out.
    assert.deepEqual(await publish(paid({ amount: 100 })), { status: 'accepted', count: 1 });
    // Another event under the identity from the same senders as one taken: a conflicting claim. Answering it taken would tell its sender the instance has it.
    const forged = await publish(paid({ amount: 1 }));
    assert.equal(forged.status, 'rejected', `another publisher's event is not answered as taken: ${JSON.stringify(forged)}`);
    assert.equal(forged.error?.kind, 'conflict');
    const again = await post(paid({ amount: 2 }));
    assert.equal(again.status, 409, 'over HTTP too');
    assert.match(((await again.json()) as { description: string }).description, /pay-1/);
    // A send again of an event taken is still answered as taken, over either transport, and appends nothing.
    for (const amount of [0, 100]) {
      assert.deepEqual(await publish(paid({ amount })), { status: 'accepted', count: 1 });
      assert.equal((await post(paid({ amount }))).status, 202);
    }
    const listen = (await h.executor.get(instanceId))!.listens['/do/0/wait']!;
    assert.deepEqual(
      listen.events.map((taken) => [(taken.event as { data?: JsonValue }).data, taken.from]),
      [
        [{ amount: 0 }, 'principal'],
        [{ amount: 100 }, 'outside'],
      ],
      'the log holds one event of each sender',
    );
    await assertReplayEqual(h, instanceId);
  } finally {
    await subscription.close();
    await built.close();
    await h.close();
    await nc.close();
    await server.dispose();
    await fixture.dispose();
  }
});

test('a send again after the instance that took the event ended, on a host that no longer holds it (a restart), finds no waiting listen: 404 no-match, as docs/workflows-executor.md says', async () => {
  const fixture = await writeHttpFixture();
  const first = harness();
  const once = yaml(`document: { dsl: '1.0.3', namespace: test, name: wait-once, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          one: { with: { type: com.example.paid } }
`);
  const { instanceId } = await first.executor.start({ principalId: 'alice', invocationKey: 'once-1', document: once, input: {} });
  while (!(await first.executor.get(instanceId))?.listens['/do/0/wait']) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual((await first.executor.deliver(paid({ amount: 1 }), 'alice')).matched, [instanceId]);
  assert.equal((await first.executor.wait(instanceId, 5000)).status, 'completed');
  await first.close();
  // Another process on the same store (a restart): it holds the running instances, not the ended ones.
  const second = harness({ store: first.store });
  await second.executor.resume();
  const built = await buildFixtureApp(fixture, new SystemClock(), { workflowEvents: second.executor });
  try {
    const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
    const again = await fetch(`${address}/workflow-events`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', authorization: `Bearer ${fixture.tokens.alice}` },
      body: JSON.stringify(paid({ amount: 1 })),
    });
    assert.equal(again.status, 404);
    assert.deepEqual(await again.json(), { status: 'no-match', matched: [] });
    const listen = (await second.executor.get(instanceId))!.listens['/do/0/wait']!;
    assert.equal(
      listen.events.length,
      1,
      'the log holds the event the first send took: no-match says no waiting listen takes it now, not that no instance ever did',
    );
  } finally {
    await built.close();
    await second.close();
    await fixture.dispose();
  }
});
