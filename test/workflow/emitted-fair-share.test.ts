/**
 * The backlog of emitted CloudEvents waiting for another attempt (emittedRedelivery, 1 024 at
 * most) is shared by every principal, but when it is full the event dropped is one of the
 * principal holding the most in it: one principal whose workflows emit faster than their events
 * are delivered loses its own events, never another's. Real nats-server; the intake is a stub
 * that holds alice's and bob's deliveries and answers carol's first one unavailable.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { emittedRedelivery, serveCloudEvents, type EmittedDropReason } from '../../src/adapters/transport/nats-cloudevents.js';
import { emittedEventSubject, type CloudEvent, type CloudEventIntake } from '../../src/contract/cloudevents.js';
import { AdapterError } from '../../src/contract/errors.js';
import { limits } from '../../src/contract/limits.js';
import { startNatsServer } from '../support/nats-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const type = 'com.example.tick';
const event = (id: string): CloudEvent => ({ specversion: '1.0', id, source: 'https://shop.example', type });
const subjectOf = (principal: string) => emittedEventSubject('test.emitted', principal, type);

test("one principal filling the emitted backlog loses its own events, never another principal's that must wait", async () => {
  const bound = limits.cloudEventsInFlightPerPrincipalMax;
  const server = await startNatsServer({ jetstream: false });
  const nc = await connect({ servers: server.url });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const offered: Record<string, string[]> = { alice: [], bob: [], carol: [] };
  const intake: CloudEventIntake = {
    deliver: async (e, principalId) => {
      const mine = offered[principalId ?? 'nobody']!;
      mine.push(e.id);
      if (principalId === 'carol' && mine.length === 1) throw new AdapterError('unavailable', 'the store is busy');
      if (principalId === 'alice' || principalId === 'bob') await released;
      return { matched: [] };
    },
  };
  const drops: [string, EmittedDropReason, string][] = [];
  const subscription = serveCloudEvents(nc, 'test.events', intake, {
    emitSubjectPrefix: 'test.emitted',
    onEmittedDropped: (subject, reason, detail) => drops.push([subject, reason, detail]),
  });
  try {
    // Alice: her in-flight bound, then the whole backlog, then one more (her own, dropped).
    const alices = bound + emittedRedelivery.heldMax + 1;
    for (let i = 0; i < alices; i++) nc.publish(subjectOf('alice'), JSON.stringify(event(`a-${i}`)));
    await nc.flush();
    await eventually(() => drops.length === 1, "alice's event past the full backlog dropped", 10_000);
    assert.deepEqual(drops[0]?.slice(0, 2), [subjectOf('alice'), 'backlog-full']);

    // Bob: his in-flight bound, then one that must wait for one of his slots (the hold path).
    for (let i = 0; i <= bound; i++) nc.publish(subjectOf('bob'), JSON.stringify(event(`b-${i}`)));
    // Carol: one the intake answers unavailable, kept for its retry (the retry path).
    nc.publish(subjectOf('carol'), JSON.stringify(event('c-0')));
    await nc.flush();
    await eventually(() => offered.bob!.length === bound && offered.carol!.length >= 1, "bob's and carol's first deliveries", 10_000);
    await eventually(() => drops.length >= 3, 'room made for bob and carol', 10_000);
    assert.deepEqual(
      drops.map(([subject, reason]) => [subject, reason]),
      Array.from({ length: 3 }, () => [subjectOf('alice'), 'backlog-full']),
      `only alice's events are dropped: ${JSON.stringify(drops.map(([subject, reason, detail]) => `${subject} ${reason}: ${detail}`))}`,
    );
    // The ones dropped to make room are alice's newest: her oldest keep their place.
    assert.match(drops[1]?.[2] ?? '', /holds the most/);

    release();
    await eventually(() => offered.bob!.length === bound + 1, "bob's waiting event delivered", 10_000);
    await eventually(() => offered.carol!.length === 2, "carol's event delivered again", 10_000);
    await eventually(() => offered.alice!.length === alices - 3, "alice's kept events delivered", 20_000);
    assert.deepEqual(
      offered.alice,
      Array.from({ length: alices - 3 }, (_, i) => `a-${i}`),
      "alice's oldest, each once, in order",
    );
    assert.equal(drops.length, 3);
  } finally {
    release();
    await subscription.close();
    await nc.close();
    await server.dispose();
  }
});
