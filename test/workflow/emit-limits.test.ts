/**
 * An emitted event larger than the NATS deployment takes — past the server's max_payload, or the
 * emit stream's max_msg_size — can never be published: the emit task faults with a validation
 * error (400) at its pointer, which a `try` catches, instead of being driven again every second
 * for ever (a refusal that stays one, taken for an outage). An emitted event the receiving intake
 * refuses (it stays refused) is told dropped, as one given up on after its retries is: an operator
 * sees every emitted event that reached no listen. Real nats-server, small limits.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type Msg } from '@nats-io/transport-node';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { NatsCloudEventSink, serveCloudEvents } from '../../src/adapters/transport/nats-cloudevents.js';
import { emittedEventSubject, type CloudEvent, type CloudEventIntake } from '../../src/contract/cloudevents.js';
import { SystemClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import type { JsonObject } from '../../src/contract/json.js';
import { errorTypes } from '../../src/workflow/exec/dsl-errors.js';
import { eventually } from '../support/nats-deployment-fixture.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { startNatsServer } from '../support/nats-server.js';
import { harness, runToEnd, yaml } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const head = `document: { dsl: '1.0.3', namespace: test, name: big, version: '1.0.0' }\n`;

/** Emits `.small`, then `.big` inside a try that catches a validation error. */
const caught = yaml(`${head}do:
  - small:
      emit: { event: { with: { source: https://convoke.dev/test, type: com.example.small, data: '\${ .small }' } } }
  - guarded:
      try:
        - big:
            emit: { event: { with: { source: https://convoke.dev/test, type: com.example.big, data: '\${ $workflow.input.big }' } } }
      catch:
        errors: { with: { type: '${errorTypes.validation}' } }
        as: problem
        do:
          - report:
              set: '\${ { caught: $problem } }'
`);

const uncaught = yaml(`${head}do:
  - big:
      emit: { event: { with: { source: https://convoke.dev/test, type: com.example.big, data: '\${ .big }' } } }
`);

test("an emitted event past the server's max_payload faults its emit task (catchable, at its pointer) before it is recorded as emitted", async () => {
  const server = await startNatsServer({ maxPayload: 4096, jetstream: false });
  const nc = await connect({ servers: server.url });
  const h = harness({ store: new MemoryEventStore({ clock: new SystemClock() }), events: new NatsCloudEventSink(nc, { emitSubjectPrefix: 'test.emitted' }) });
  const received: Msg[] = [];
  const subscription = nc.subscribe('test.emitted.>', { callback: (_error, msg) => void received.push(msg) });
  try {
    const record = await runToEnd(h, caught, { small: 'x'.repeat(100), big: 'x'.repeat(6000) }, 'big-1', 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const problem = (record.output as JsonObject).caught as JsonObject;
    assert.equal(problem.type, errorTypes.validation);
    assert.equal(problem.status, 400);
    assert.equal(problem.instance, '/do/1/guarded/try/0/big');
    assert.match(String(problem.detail), /at most 4096 \(max_payload\)/);
    // Refused before it was recorded as emitted: the log holds no event that never went out.
    const emitted = record.steps['/do/1/guarded/try/0/big>emitted'];
    assert.ok(emitted && 'error' in emitted, JSON.stringify(emitted));
    assert.equal(record.steps['/do/1/guarded/try/0/big>published'], undefined);
    await nc.flush();
    assert.deepEqual(
      received.map((msg) => msg.subject),
      ['test.emitted.alice.com.example.small'],
      'the small event went out, the large one did not',
    );
    assert.deepEqual(h.executor.failures, [], 'never driven again as if the server were unavailable');
  } finally {
    subscription.unsubscribe();
    await h.close();
    await nc.close();
    await server.dispose();
  }
});

test("an emitted event past the emit stream's max_msg_size faults its emit task at its pointer once the stream refuses it", async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'WF_EVENTS', subjects: ['test.emitted.>'], max_msg_size: 4096 });
  const h = harness({
    store: new MemoryEventStore({ clock: new SystemClock() }),
    events: new NatsCloudEventSink(nc, { emitSubjectPrefix: 'test.emitted', jetstream: true }),
  });
  try {
    const record = await runToEnd(h, uncaught, { big: 'x'.repeat(6000) }, 'big-2', 10_000);
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, errorTypes.validation);
    assert.equal(record.error?.status, 400);
    assert.equal(record.error?.instance, '/do/0/big');
    assert.match(String(record.error?.detail), /10054|max_msg_size|exceeds/);
    // The detail is the sink's description, not the error's kind-prefixed message.
    assert.doesNotMatch(String(record.error?.detail), /^invalid-input: /);
    const published = record.steps['/do/0/big>published'];
    assert.ok(published && 'error' in published, 'the refusal is what the publication recorded');
    assert.equal((await jsm.streams.info('WF_EVENTS')).state.messages, 0);
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
    await nc.close();
    await server.dispose();
  }
});

test('an emitted event the intake refuses for good is told dropped, with the refusal', async () => {
  const server = await startNatsServer({ jetstream: false });
  const nc = await connect({ servers: server.url });
  const offered: string[] = [];
  const intake: CloudEventIntake = {
    deliver: async (event: CloudEvent) => {
      offered.push(event.id);
      throw new AdapterError('invalid-input', 'the event is 300000 bytes of JSON; a listen records it in one transition of at most 262144 bytes');
    },
  };
  const drops: Array<[string, string, string]> = [];
  const subscription = serveCloudEvents(nc, 'test.events', intake, {
    emitSubjectPrefix: 'test.emitted',
    onEmittedDropped: (subject, reason, detail) => drops.push([subject, reason, detail]),
  });
  try {
    const subject = emittedEventSubject('test.emitted', 'alice', 'com.example.big');
    nc.publish(subject, JSON.stringify({ specversion: '1.0', id: 'e-1', source: 'https://convoke.dev/test', type: 'com.example.big' }));
    await eventually(() => drops.length === 1, 'told dropped', 5_000);
    assert.equal(drops[0]?.[0], subject);
    assert.equal(drops[0]?.[1], 'refused');
    assert.match(drops[0]?.[2] ?? '', /refused \(invalid-input\).*262144 bytes/);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(offered, ['e-1'], 'a refusal that stays one is not offered again');
    assert.equal(drops.length, 1);
  } finally {
    await subscription.close();
    await nc.close();
    await server.dispose();
  }
});
