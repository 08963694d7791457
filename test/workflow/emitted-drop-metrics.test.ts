/**
 * Emitted CloudEvents the NATS intake drops are counted by a closed reason:
 * `convoke_workflow_emitted_events_dropped_total{reason}`, every reason shown at 0 from the first
 * scrape, under the metrics naming rules. serveCloudEvents tells each drop with its reason (the
 * wiring into `convoke serve`: serve-events.test.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { connect } from '@nats-io/transport-node';
import { emittedDropReasons, emittedRedelivery, serveCloudEvents, type EmittedDropReason } from '../../src/adapters/transport/nats-cloudevents.js';
import { emittedEventSubject, type CloudEventIntake } from '../../src/contract/cloudevents.js';
import { limits } from '../../src/contract/limits.js';
import { namingProblems } from '../../src/runtime/metrics.js';
import { emittedDroppedName, observeDroppedEmittedEvents } from '../../src/runtime/workflow-emitted-metrics.js';
import { startNatsServer } from '../support/nats-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const valueOf = async (registry: Registry, reason: string) =>
  (await registry.getSingleMetric(emittedDroppedName)?.get())?.values.find((v) => v.labels.reason === reason)?.value;

test('the dropped emitted events counter shows every reason at 0, counts each drop by its reason, and follows the naming rules', async () => {
  const registry = new Registry();
  const count = observeDroppedEmittedEvents(registry);
  for (const reason of emittedDropReasons) assert.equal(await valueOf(registry, reason), 0, reason);
  count('refused');
  count('refused');
  count('backlog-full');
  assert.deepEqual(await Promise.all(emittedDropReasons.map(async (reason) => [reason, await valueOf(registry, reason)])), [
    ['refused', 2],
    ['window', 0],
    ['backlog-full', 1],
    ['intake-closed', 0],
  ]);
  // Registered once per registry: a second host on it counts on the same counter.
  observeDroppedEmittedEvents(registry)('window');
  assert.equal(await valueOf(registry, 'window'), 1);
  assert.deepEqual(await namingProblems(registry), []);
});

test('the NATS intake tells each dropped emitted event with its closed reason: past the backlog bound, and what it still held at close', async () => {
  const server = await startNatsServer({ jetstream: false });
  const nc = await connect({ servers: server.url });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const intake: CloudEventIntake = { deliver: async () => (await released, { matched: [] }) };
  const drops: [EmittedDropReason, string][] = [];
  const subscription = serveCloudEvents(nc, 'test.events', intake, {
    emitSubjectPrefix: 'test.emitted',
    onEmittedDropped: (_subject, reason, detail) => drops.push([reason, detail]),
  });
  try {
    // Enough principals to fill the in-flight bound (each has at most cloudEventsInFlightPerPrincipalMax in flight), in turn.
    const principals = Math.ceil(limits.cloudEventsInFlightMax / limits.cloudEventsInFlightPerPrincipalMax);
    const subject = (i: number) => emittedEventSubject('test.emitted', `p${i % principals}`, 'com.example.tick');
    // The in-flight bound, then the backlog's bound, then one more: that one is dropped.
    const total = limits.cloudEventsInFlightMax + emittedRedelivery.heldMax + 1;
    for (let i = 0; i < total; i++)
      nc.publish(subject(i), JSON.stringify({ specversion: '1.0', id: `e-${i}`, source: 'https://shop.example', type: 'com.example.tick' }));
    await nc.flush();
    await eventually(() => drops.length === 1, 'one dropped past the backlog bound', 10_000);
    assert.equal(drops[0]?.[0], 'backlog-full');
    assert.match(drops[0]?.[1] ?? '', new RegExp(`${emittedRedelivery.heldMax} emitted events wait already`));
  } finally {
    // Closing waits for the deliveries in flight: they end once released.
    const closing = subscription.close();
    release();
    await closing;
    await nc.close();
    await server.dispose();
  }
  // Closing dropped what the backlog still held, each told as intake-closed.
  assert.equal(drops.length, 1 + emittedRedelivery.heldMax);
  assert.ok(
    drops.slice(1).every(([reason]) => reason === 'intake-closed'),
    JSON.stringify(drops.slice(1, 3)),
  );
});
