/**
 * The emit stream's per-principal bound, over a real nats-server: a principal's workflows
 * emitting past their share (workflows.events.streamEventsPerPrincipalMax) lose their own oldest
 * events from the stream, never another principal's — whatever types they emit, and from several
 * sinks (serve processes) at once. The stream's shared bound here (max_msgs) is small enough that
 * the flood would have evicted the other principal's events without the per-principal bound.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DiscardPolicy, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { trimEvery } from '../../src/adapters/transport/emitted-stream-trim.js';
import { NatsCloudEventSink, checkEmittedStreamTrim, type NatsCloudEventSinkOptions } from '../../src/adapters/transport/nats-cloudevents.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { SystemClock } from '../../src/contract/clock.js';
import { isAdapterError, type AdapterError } from '../../src/contract/errors.js';
import { limits } from '../../src/contract/limits.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { workflowEventsDefaults } from '../../src/runtime/workflow-service.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { harness, yaml, type Harness } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

/** Emits one event per item, each of its own type when `types` is set (a principal evading a per-subject bound). */
const emitting = (types: boolean) =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: emitting, version: '1.0.0' }
do:
  - each:
      for: { in: '\${ .items }', each: item }
      do:
        - tick:
            emit:
              event:
                with:
                  source: https://convoke.dev/test
                  type: ${types ? `'\${ "com.example.t\\($item)" }'` : 'com.example.tick'}
                  data: { n: '\${ $item }' }
`);

/** The shared bound: the stream keeps at most 40 messages, every principal's together, the oldest dropped first. */
async function smallStream(jsm: JetStreamManager, name: string, prefix: string): Promise<void> {
  await jsm.streams.add({ name, subjects: [`${prefix}.>`], max_msgs: 40, discard: DiscardPolicy.Old });
}

/** Runs one instance of `emitting` for the principal and waits for its end. */
async function emit(h: Harness, principalId: string, key: string, count: number, types = false): Promise<void> {
  const items = Array.from({ length: count }, (_, i) => i);
  const { instanceId } = await h.executor.start({ principalId, invocationKey: key, document: emitting(types), input: { items } });
  const record = await h.executor.wait(instanceId, 60_000);
  assert.equal(record.status, 'completed', JSON.stringify(record.error));
}

/** The stream's messages of each principal (the subject's token after the prefix), with their `data.n`. */
async function held(jsm: JetStreamManager, stream: string, prefix: string): Promise<Map<string, number[]>> {
  const info = await jsm.streams.info(stream);
  const byPrincipal = new Map<string, number[]>();
  const messages = await jsm.streams.get(stream);
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const message = await messages.getMessage({ seq }).catch(() => null);
    if (!message) continue;
    const principal = message.subject.slice(prefix.length + 1).split('.', 1)[0] ?? '';
    byPrincipal.set(principal, [...(byPrincipal.get(principal) ?? []), (message.json<CloudEvent>().data as { n: number }).n]);
  }
  return byPrincipal;
}

const sinkOptions = (prefix: string, stream: string, eventsPerPrincipal: number): NatsCloudEventSinkOptions => ({
  emitSubjectPrefix: prefix,
  jetstream: true,
  stream,
  eventsPerPrincipal,
});

for (const types of [false, true])
  test(`a principal emitting past its share (${types ? 'each event its own type' : 'one type'}) loses its own oldest events, never another principal's`, async () => {
    const server = await startJetStreamServer();
    const nc = await connect({ servers: server.url });
    const jsm = await jetstreamManager(nc);
    await smallStream(jsm, 'QUOTA', 'q.emitted');
    const h = harness({ store: new MemoryEventStore({ clock: new SystemClock() }), events: new NatsCloudEventSink(nc, sinkOptions('q.emitted', 'QUOTA', 16)) });
    try {
      await emit(h, 'bob', 'bob-1', 5);
      await emit(h, 'alice', 'alice-1', 60, types);
      const byPrincipal = await held(jsm, 'QUOTA', 'q.emitted');
      assert.deepEqual(byPrincipal.get('bob'), [0, 1, 2, 3, 4], "bob's events are all still in the stream");
      assert.deepEqual(
        byPrincipal.get('alice'),
        Array.from({ length: 16 }, (_, i) => 44 + i),
        'alice keeps her 16 latest events: her share, the oldest of hers dropped',
      );
    } finally {
      await h.close();
      await nc.close();
      await server.dispose();
    }
  });

test('several sinks (serve processes) emitting for one principal at once: the stream ends holding its share of them, and every other principal’s events', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const other = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  await smallStream(jsm, 'SHARED', 's.emitted');
  const store = new MemoryEventStore({ clock: new SystemClock() });
  const first = harness({ store, events: new NatsCloudEventSink(nc, sinkOptions('s.emitted', 'SHARED', 16)), worker: 'w1' });
  const second = harness({ store, events: new NatsCloudEventSink(other, sinkOptions('s.emitted', 'SHARED', 16)), worker: 'w2' });
  try {
    await emit(first, 'bob', 'bob-1', 5);
    await Promise.all([emit(first, 'alice', 'alice-1', 30, true), emit(second, 'alice', 'alice-2', 30, true)]);
    const byPrincipal = await held(jsm, 'SHARED', 's.emitted');
    assert.deepEqual(byPrincipal.get('bob'), [0, 1, 2, 3, 4], "bob's events are all still in the stream");
    // Each publish is followed by a trim of alice's events (the bound is 16: every emit trims), the last one after the last publish.
    assert.equal(byPrincipal.get('alice')?.length, 16, `alice holds her share: ${JSON.stringify(byPrincipal.get('alice'))}`);
  } finally {
    await first.close();
    await second.close();
    await other.close();
    await nc.close();
    await server.dispose();
  }
});

test('a sink trims a principal at its first event, then once every sixteenth of its share: it holds at most its share plus fewer than that', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'BATCHED', subjects: ['b.emitted.>'] });
  const share = 64;
  const every = trimEvery(share);
  assert.equal(every, 4);
  const h = harness({
    store: new MemoryEventStore({ clock: new SystemClock() }),
    events: new NatsCloudEventSink(nc, sinkOptions('b.emitted', 'BATCHED', share)),
  });
  try {
    await emit(h, 'alice', 'alice-1', 101);
    // Trimmed at events 1, 5, …, 97, 101: the last trim followed the last event.
    assert.deepEqual(
      (await held(jsm, 'BATCHED', 'b.emitted')).get('alice'),
      Array.from({ length: share }, (_, i) => 37 + i),
    );
    await emit(h, 'alice', 'alice-2', every - 1);
    const after = (await held(jsm, 'BATCHED', 'b.emitted')).get('alice') ?? [];
    assert.equal(after.length, share + every - 1, 'events published since the last trim wait for the next one');
  } finally {
    await h.close();
    await nc.close();
    await server.dispose();
  }
});

test('a failed trim does not fail the emit (its event is in the stream): it is told, and tried again at the principal’s next event', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'REAL', subjects: ['f.emitted.>'] });
  const failed: [string, AdapterError][] = [];
  // The sink is told another stream than the one capturing its events: every purge fails (stream not found).
  const sink = new NatsCloudEventSink(nc, {
    ...sinkOptions('f.emitted', 'ELSEWHERE', 16),
    onTrimFailed: (principal, error) => void failed.push([principal, error]),
  });
  const h = harness({ store: new MemoryEventStore({ clock: new SystemClock() }), events: sink });
  try {
    await emit(h, 'alice', 'alice-1', 3);
    assert.deepEqual((await held(jsm, 'REAL', 'f.emitted')).get('alice'), [0, 1, 2], 'every event was published');
    assert.equal(failed.length, 3, 'each event found the principal due, its trim having failed');
    for (const [principal, error] of failed) {
      assert.equal(principal, 'alice');
      assert.equal(error.kind, 'unavailable');
      assert.match(error.message, /trimming alice's events in stream ELSEWHERE/);
    }
  } finally {
    await h.close();
    await nc.close();
    await server.dispose();
  }
});

test('start-up refuses a NATS user that may not purge the emit stream, naming the subject to grant', async () => {
  const password = 'secret';
  const publish = ['$JS.API.INFO', '$JS.API.STREAM.INFO.PURGEABLE', 'p.emitted.>'];
  const server = await startJetStreamServer({
    users: [
      { user: 'without', password, publish, subscribe: ['_INBOX.>'] },
      { user: 'with', password, publish: [...publish, '$JS.API.STREAM.PURGE.PURGEABLE', '$JS.API.STREAM.CREATE.PURGEABLE'], subscribe: ['_INBOX.>'] },
    ],
  });
  const admin = await connect({ servers: server.url, user: 'with', pass: password });
  const without = await connect({ servers: server.url, user: 'without', pass: password });
  try {
    const jsm = await jetstreamManager(admin);
    await jsm.streams.add({ name: 'PURGEABLE', subjects: ['p.emitted.>'] });
    const options = { stream: 'PURGEABLE', emitSubjectPrefix: 'p.emitted' };
    await assert.rejects(
      checkEmittedStreamTrim(await jetstreamManager(without, { checkAPI: false }), options),
      (error: unknown) => isAdapterError(error) && error.kind === 'denied' && /may not publish to "\$JS\.API\.STREAM\.PURGE\.PURGEABLE"/.test(error.message),
    );
    await checkEmittedStreamTrim(await jetstreamManager(admin, { checkAPI: false }), options);
  } finally {
    await without.close();
    await admin.close();
    await server.dispose();
  }
});

test('the share is configured in workflows.events.streamEventsPerPrincipal: 1 to the most, 1 000 by default; anything else is refused naming the field', () => {
  const parse = (events: object) =>
    parseDeploymentConfig(
      Buffer.from(
        JSON.stringify(
          minimalServeConfig({ transport: { kind: 'nats', servers: 'nats://127.0.0.1:1', user: 'coordinator', mode: 'core' }, workflows: { events } }),
        ),
      ),
      '/tmp',
    );
  assert.equal(parse({ emit: 'jetstream', streamEventsPerPrincipal: 25 }).workflows?.events?.streamEventsPerPrincipal, 25);
  assert.equal(
    parse({ emit: 'jetstream', streamEventsPerPrincipal: limits.emittedStreamEventsPerPrincipalMax }).workflows?.events?.streamEventsPerPrincipal,
    limits.emittedStreamEventsPerPrincipalMax,
  );
  assert.equal(workflowEventsDefaults.streamEventsPerPrincipal, 1_000);
  for (const bad of [0, -1, 2.5, limits.emittedStreamEventsPerPrincipalMax + 1, '100', null])
    assert.throws(
      () => parse({ emit: 'jetstream', streamEventsPerPrincipal: bad }),
      (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input' && /workflows\/events\/streamEventsPerPrincipal/.test(error.message),
      String(bad),
    );
});

test("the emit stream's settings (stream, streamEventsPerPrincipal) without emit: jetstream are refused at load naming the field: no stream is kept, so neither would do anything", () => {
  const parse = (events: object) =>
    parseDeploymentConfig(
      Buffer.from(
        JSON.stringify(
          minimalServeConfig({ transport: { kind: 'nats', servers: 'nats://127.0.0.1:1', user: 'coordinator', mode: 'core' }, workflows: { events } }),
        ),
      ),
      '/tmp',
    );
  for (const [field, value] of [
    ['streamEventsPerPrincipal', 25],
    ['stream', 'MINE'],
  ] as const)
    for (const emit of [{}, { emit: 'none' }, { emit: 'nats' }])
      assert.throws(
        () => parse({ ...emit, [field]: value }),
        (error: unknown) =>
          isAdapterError(error) &&
          error.kind === 'invalid-input' &&
          (error.description ?? '').includes(`workflows.events.${field} is set, but emit is ${emit.emit ?? 'none'}:`) &&
          /only emit: jetstream keeps/.test(error.description ?? ''),
        `${field} with ${JSON.stringify(emit)}`,
      );
  const both = parse({ emit: 'jetstream', stream: 'MINE', streamEventsPerPrincipal: 25 }).workflows?.events;
  assert.deepEqual([both?.stream, both?.streamEventsPerPrincipal], ['MINE', 25]);
});
