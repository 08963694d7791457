/**
 * emit on NATS, over a real nats-server: the CloudEvent is recorded first, then published on
 * `<emitPrefix>.<principal>.<type>` (structured mode) and the publication recorded; its id is
 * derived from the instance and the task execution; a worker that dies after publishing, before
 * recording it, publishes the same event again on recovery under the same Nats-Msg-Id (derived
 * from the task execution, not from the event), and JetStream drops the duplicate.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DiscardPolicy, jetstreamManager } from '@nats-io/jetstream';
import { connect, type Msg } from '@nats-io/transport-node';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { NatsCloudEventSink, emittedStreamBounds, ensureEmittedEventStream } from '../../src/adapters/transport/nats-cloudevents.js';
import { AdapterError } from '../../src/contract/errors.js';
import { cloudEventsMediaType, emittedMessageId, type CloudEvent, type EmitOrigin } from '../../src/contract/cloudevents.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonObject } from '../../src/contract/json.js';
import type { WorkflowEvent } from '../../src/workflow/exec/events.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { startNatsServer } from '../support/nats-server.js';
import { harness, runToEnd, yaml } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const ticks = yaml(`document: { dsl: '1.0.3', namespace: test, name: ticks, version: '1.0.0' }
do:
  - each:
      for: { in: '\${ .items }', each: item }
      do:
        - tick:
            emit:
              event:
                with:
                  source: https://convoke.dev/test
                  type: com.example.tick
                  data: { n: '\${ $item }' }
`);

test('emit publishes each recorded CloudEvent on <emitPrefix>.<principal>.<type>, with an id per task execution, after its record', async () => {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  const store = new MemoryEventStore({ clock: new SystemClock() });
  const h = harness({ store, events: new NatsCloudEventSink(nc, { emitSubjectPrefix: 'test.emitted' }) });
  const received: Msg[] = [];
  const subscription = nc.subscribe('test.emitted.>', { callback: (_error, msg) => void received.push(msg) });
  try {
    const record = await runToEnd(h, ticks, { items: [1, 2] }, 'ticks-1');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    await nc.flush();
    assert.equal(received.length, 2);
    const recorded = ['/do/0/each/do/0/tick[0]', '/do/0/each/do/0/tick[1]'].map((at) => {
      const step = record.steps[`${at}>emitted`];
      assert.ok(step && 'ok' in step, `${at} recorded its event`);
      return step.ok as CloudEvent;
    });
    const events = received.map((msg) => msg.json<CloudEvent>());
    assert.deepEqual(events, recorded, 'what was published is what was recorded');
    assert.notEqual(events[0]!.id, events[1]!.id, 'each iteration has its own id');
    assert.deepEqual(
      events.map((e) => (e.data as JsonObject).n),
      [1, 2],
    );
    for (const msg of received) {
      assert.equal(msg.subject, 'test.emitted.alice.com.example.tick');
      assert.equal(msg.headers?.get('content-type'), cloudEventsMediaType);
    }
    // Recorded, then published: the publication step comes after the event's record in the log.
    const log = await store.read(record.instanceId);
    const steps =
      log.kind === 'ok' ? log.transitions.flatMap((t) => (t.transition.events as unknown as WorkflowEvent[]).map((e) => ('at' in e ? e.at : ''))) : [];
    assert.ok(steps.indexOf('/do/0/each/do/0/tick[0]>emitted') < steps.indexOf('/do/0/each/do/0/tick[0]>published'));
  } finally {
    subscription.unsubscribe();
    await h.close();
    await nc.close();
    await server.dispose();
  }
});

test('a worker that dies after publishing: the recovered one publishes again under the same Nats-Msg-Id and JetStream keeps one message', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'WF_EVENTS', subjects: ['test.emitted.>'] });
  const sink = new NatsCloudEventSink(nc, { emitSubjectPrefix: 'test.emitted', jetstream: true });
  const store = new MemoryEventStore({ clock: new SystemClock() });
  const published: string[] = [];
  const origins: EmitOrigin[] = [];
  // The first worker publishes, then dies before the publication is recorded.
  const dying = harness({
    store,
    events: {
      publish: async (event, origin) => {
        await sink.publish(event, origin);
        published.push(event.id);
        origins.push(origin);
        throw new Error('worker killed after publishing');
      },
    },
  });
  const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: once, version: '1.0.0' }
do:
  - announce:
      emit: { event: { with: { source: https://convoke.dev/test, type: com.example.once, data: { ok: true } } } }
`);
  const { instanceId } = await dying.executor.start({ principalId: 'alice', invocationKey: 'once-1', document, input: {} });
  while (dying.executor.failures.length === 0) await new Promise((r) => setTimeout(r, 10));
  await dying.close();
  assert.equal((await dying.executor.replay(instanceId))?.steps['/do/0/announce>published'], undefined, 'the publication was not recorded');

  const recovering = harness({
    store,
    events: {
      publish: async (event, origin) => {
        published.push(event.id);
        origins.push(origin);
        await sink.publish(event, origin);
      },
    },
  });
  try {
    const record = await recovering.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(published.length, 2, 'published again on recovery');
    assert.equal(published[0], published[1], 'under the same CloudEvent id');
    assert.deepEqual(origins[0], origins[1], 'from the same task execution');
    assert.deepEqual(origins[0], { principalId: 'alice', instanceId, at: '/do/0/announce' });
    const info = await jsm.streams.info('WF_EVENTS');
    assert.equal(info.state.messages, 1, 'the stream dropped the duplicate by Nats-Msg-Id');
    const stored = await (await jsm.streams.get('WF_EVENTS')).getMessage({ seq: 1 });
    assert.equal(stored?.json<CloudEvent>().id, published[0]);
    assert.equal(stored?.subject, 'test.emitted.alice.com.example.once');
    assert.equal(stored?.header.get('Nats-Msg-Id'), emittedMessageId(origins[0]!), 'the message id is the task execution’s, not the event’s id');
    assert.notEqual(emittedMessageId(origins[0]!), published[0]);
  } finally {
    await recovering.close();
    await nc.close();
    await server.dispose();
  }
});

test('the emitted events’ stream captures the emitted space alone, with bounded retention: made, moved from the former space, or refused', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  const bounded = { max_age: emittedStreamBounds.maxAgeMs * 1_000_000, max_bytes: emittedStreamBounds.maxBytes };
  try {
    // Missing: made, bounded.
    await ensureEmittedEventStream(jsm, { emitSubjectPrefix: 'test.emitted', subjectPrefix: 'test.events', stream: 'MADE' });
    const made = (await jsm.streams.info('MADE')).config;
    assert.deepEqual(made.subjects, ['test.emitted.>']);
    assert.deepEqual({ max_age: made.max_age, max_bytes: made.max_bytes, discard: made.discard }, { ...bounded, discard: DiscardPolicy.Old });

    // What convoke made before: the publishers' space, unbounded. Moved, and bounded.
    await jsm.streams.add({ name: 'FORMER', subjects: ['former.events.>'] });
    await ensureEmittedEventStream(jsm, { emitSubjectPrefix: 'former.emitted', subjectPrefix: 'former.events', stream: 'FORMER' });
    const moved = (await jsm.streams.info('FORMER')).config;
    assert.deepEqual(moved.subjects, ['former.emitted.>']);
    assert.deepEqual({ max_age: moved.max_age, max_bytes: moved.max_bytes }, bounded);

    // Bounds an operator set are kept.
    await jsm.streams.add({ name: 'TUNED', subjects: ['tuned.emitted.>'], max_age: 60_000_000_000, max_bytes: 1_000_000 });
    await ensureEmittedEventStream(jsm, { emitSubjectPrefix: 'tuned.emitted', subjectPrefix: 'tuned.events', stream: 'TUNED' });
    const tuned = (await jsm.streams.info('TUNED')).config;
    assert.deepEqual({ max_age: tuned.max_age, max_bytes: tuned.max_bytes }, { max_age: 60_000_000_000, max_bytes: 1_000_000 });

    // Anything else is not touched: refused.
    await jsm.streams.add({ name: 'OTHER', subjects: ['other.emitted.>', 'other.events.>'] });
    await assert.rejects(
      ensureEmittedEventStream(jsm, { emitSubjectPrefix: 'other.emitted', subjectPrefix: 'other.events', stream: 'OTHER' }),
      (error: unknown) =>
        error instanceof AdapterError && error.kind === 'conflict' && /stream OTHER captures .*not other\.emitted\.> alone/.test(error.message),
    );
    assert.deepEqual((await jsm.streams.info('OTHER')).config.subjects, ['other.emitted.>', 'other.events.>']);
  } finally {
    await nc.close();
    await server.dispose();
  }
});
