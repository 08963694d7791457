/**
 * Emitted CloudEvents (`<emitPrefix>.<P>.<type>`) are published only by the coordinator, on behalf
 * of the principal whose workflow emitted them: the subject proves the principal. The NATS intake
 * has at most limits.cloudEventsInFlightPerPrincipalMax of one principal's in flight; the rest
 * wait in the backlog (emittedRedelivery) for one of that principal's slots, while another
 * principal's are delivered at once. Real nats-server; the intake is a stub that holds alice's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { connect } from '@nats-io/transport-node';
import { serveCloudEvents } from '../../src/adapters/transport/nats-cloudevents.js';
import { emittedEventSubject, type CloudEvent, type CloudEventIntake } from '../../src/contract/cloudevents.js';
import { limits } from '../../src/contract/limits.js';
import { startNatsServer } from '../support/nats-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const type = 'com.example.tick';
const event = (id: string): CloudEvent => ({ specversion: '1.0', id, source: 'https://shop.example', type });

test("one principal's emitted events past its in-flight bound wait for its own slots; another principal's are delivered meanwhile; none is dropped", async () => {
  const bound = limits.cloudEventsInFlightPerPrincipalMax;
  const server = await startNatsServer({ jetstream: false });
  const nc = await connect({ servers: server.url });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const offered: Record<string, string[]> = { alice: [], bob: [] };
  const intake: CloudEventIntake = {
    deliver: async (e, principalId) => {
      offered[principalId ?? 'nobody']?.push(e.id);
      if (principalId === 'alice') await released;
      return { matched: [] };
    },
  };
  const drops: string[] = [];
  const subscription = serveCloudEvents(nc, 'test.events', intake, {
    emitSubjectPrefix: 'test.emitted',
    onEmittedDropped: (subject, reason, detail) => drops.push(`${subject} ${reason}: ${detail}`),
  });
  try {
    const extra = 10;
    for (let i = 0; i < bound + extra; i++) nc.publish(emittedEventSubject('test.emitted', 'alice', type), JSON.stringify(event(`a-${i}`)));
    // Published after alice's on the same connection: received after every one of them.
    nc.publish(emittedEventSubject('test.emitted', 'bob', type), JSON.stringify(event('b-0')));
    await nc.flush();
    await eventually(() => offered.bob!.length === 1, "bob's event delivered while alice's are held", 10_000);
    await delay(100);
    assert.equal(offered.alice!.length, bound, `alice has ${offered.alice!.length} emitted events in flight; at most ${bound}`);

    release();
    await eventually(() => offered.alice!.length === bound + extra, "alice's waiting events delivered as her slots free", 10_000);
    assert.deepEqual([...offered.alice!].sort(), Array.from({ length: bound + extra }, (_, i) => `a-${i}`).sort(), 'each offered once');
    assert.deepEqual(drops, []);
  } finally {
    release();
    await subscription.close();
    await nc.close();
    await server.dispose();
  }
});
