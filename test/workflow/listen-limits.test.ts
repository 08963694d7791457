/**
 * A listen's events are recorded one per transition, each within the store's limit; its output is
 * those events as read, which the log holds already. A listen taking `all` of two events that fit
 * one transition each, but not together, answers both senders `accepted` and completes with both:
 * its completion names the events it took (`outputFrom: {listen}`) instead of writing them again,
 * which no transition could hold. Real nats-server for the senders' answers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { serveCloudEvents } from '../../src/adapters/transport/nats-cloudevents.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonObject } from '../../src/contract/json.js';
import type { WorkflowEvent } from '../../src/workflow/exec/events.js';
import { startNatsServer } from '../support/nats-server.js';
import { assertReplayEqual, harness, yaml } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

/** The store's transition size here: each event below fits one, the two together do not. */
const storeLimit = 64 * 1024;

const event = (type: string, id: string, bytes: number): CloudEvent => ({
  specversion: '1.0',
  id,
  source: 'https://shop.example',
  type: `com.example.${type}`,
  data: { part: type, blob: 'x'.repeat(bytes) },
});

const both = yaml(`document: { dsl: '1.0.3', namespace: test, name: both, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          all:
            - with: { type: com.example.a }
            - with: { type: com.example.b }
`);

test('a listen taking all of two events that fit a transition each, not together, answers both accepted and completes with both', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock, limits: { transitionBytesMax: storeLimit } });
  const h = harness({ store, clock });
  const server = await startNatsServer({ jetstream: false });
  const nc = await connect({ servers: server.url });
  const subscription = serveCloudEvents(nc, 'test.events', h.executor);
  try {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'both-1', document: both, input: {} });
    while (!(await h.executor.get(instanceId))?.listens['/do/0/wait']) await new Promise((r) => setTimeout(r, 5));
    const ask = async (e: CloudEvent) => (await nc.request(`test.events.${e.type}`, JSON.stringify(e), { timeout: 5000 })).json();
    const size = 40 * 1024;
    assert.deepEqual(await ask(event('a', 'a-1', size)), { status: 'accepted', count: 1 });
    assert.deepEqual(await ask(event('b', 'b-1', size)), { status: 'accepted', count: 1 });
    const record = await h.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const output = record.output as JsonObject[];
    assert.deepEqual(
      output.map((data) => [data.part, String(data.blob).length]),
      [
        ['a', size],
        ['b', size],
      ],
      'the output is both events, read',
    );
    await assertReplayEqual(h, instanceId);
    // The completion names the events the log holds already, and writes none of them again.
    const log = await store.read(instanceId);
    assert.equal(log.kind, 'ok');
    const events = log.kind === 'ok' ? log.transitions.flatMap((t) => t.transition.events as unknown as WorkflowEvent[]) : [];
    const completed = events.find((e) => e.type === 'task-completed' && e.at === '/do/0/wait');
    assert.deepEqual(completed, { type: 'task-completed', v: 1, at: '/do/0/wait', outputFrom: { listen: '/do/0/wait' } });
    for (const t of log.kind === 'ok' ? log.transitions : []) assert.ok(Buffer.byteLength(JSON.stringify(t.transition)) <= storeLimit);
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await subscription.close();
    await h.close();
    await nc.close();
    await server.dispose();
  }
});
