/**
 * Outside CloudEvents (`<prefix>.<type>`): the broker lets only the publishers the config allows a
 * type publish on its subject, so the subject proves which set of publishers sent an event. The
 * NATS intake holds at most limits.cloudEventsInFlightPerPublishersMax events of one such set in
 * flight and answers the rest `unavailable`, while another publisher's events are delivered: one
 * publisher flooding its own types cannot take the slots of every other. Real nats-server; the
 * intake is a stub that holds alice's events until released.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { serveCloudEvents, type ServeCloudEventsOptions } from '../../src/adapters/transport/nats-cloudevents.js';
import { cloudEventSubject, type CloudEvent, type CloudEventIntake } from '../../src/contract/cloudevents.js';
import { limits } from '../../src/contract/limits.js';
import { publishersOf } from '../../src/cli/workflow-host.js';
import { startNatsServer } from '../support/nats-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const prefix = 'test.events';
const publishers = { alice: ['com.example.alice'], bob: ['com.example.bob', 'com.example.shared'], carol: ['com.example.shared'] };
const event = (id: string, type: string): CloudEvent => ({ specversion: '1.0', id, source: 'https://shop.example', type });

interface Answer {
  status: string;
  error?: { kind: string; message: string };
}

/** Sends the event as a request and reads the intake's answer. */
async function send(nc: NatsConnection, id: string, type: string): Promise<Answer> {
  const reply = await nc.request(cloudEventSubject(prefix, type), JSON.stringify(event(id, type)), { timeout: 10_000 });
  return reply.json<Answer>();
}

/**
 * Floods alice's type past every bound with the intake holding alice's events, then sends one
 * event of `type`; answers what the flood's answered events and that event came to.
 */
async function floodThenSend(
  options: ServeCloudEventsOptions,
  type: string,
): Promise<{ floodAnswers: Answer[]; heldAlice: number; answer: Answer; offered: string[] }> {
  const server = await startNatsServer({ jetstream: false });
  const nc = await connect({ servers: server.url });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const offered: string[] = [];
  const intake: CloudEventIntake = {
    deliver: async (e) => {
      offered.push(e.id);
      if (e.type === 'com.example.alice') await released;
      return { matched: [] };
    },
  };
  const subscription = serveCloudEvents(nc, prefix, intake, options);
  try {
    const flood = limits.cloudEventsInFlightMax + 10;
    const floodAnswers: Answer[] = [];
    const pending = Array.from({ length: flood }, (_, i) => send(nc, `a-${i}`, 'com.example.alice').then((a) => floodAnswers.push(a)));
    await eventually(() => floodAnswers.length + offered.length >= flood, 'every flooded event held or answered', 10_000);
    const heldAlice = offered.length;
    const answer = await send(nc, 'other-0', type);
    release();
    await Promise.all(pending);
    return { floodAnswers: floodAnswers.slice(0, flood - heldAlice), heldAlice, answer, offered };
  } finally {
    release();
    await subscription.close();
    await nc.close();
    await server.dispose();
  }
}

test('publishersOf keys each outside subject by the sorted set of publishers the config allows its type; subjects none may use share one key', () => {
  const keyOf = publishersOf(prefix, publishers);
  assert.equal(keyOf('test.events.com.example.alice'), '["alice"]');
  assert.equal(keyOf('test.events.com.example.bob'), '["bob"]');
  assert.equal(keyOf('test.events.com.example.shared'), '["bob","carol"]');
  assert.equal(keyOf('test.events.com.example.nobody'), '[]');
  assert.equal(keyOf('other.events.com.example.alice'), '[]', 'another prefix is no configured subject');
});

test("one publisher flooding its type holds its own slots alone: past them it is answered unavailable, and another publisher's event is delivered meanwhile", async () => {
  const bound = limits.cloudEventsInFlightPerPublishersMax;
  assert.ok(bound < limits.cloudEventsInFlightMax, 'the bound per set of publishers is below the global one');
  const { floodAnswers, heldAlice, answer, offered } = await floodThenSend({ publishersOf: publishersOf(prefix, publishers) }, 'com.example.bob');
  assert.equal(heldAlice, bound, `alice had ${heldAlice} events in flight; at most ${bound}`);
  assert.equal(floodAnswers.length, limits.cloudEventsInFlightMax + 10 - bound);
  for (const a of floodAnswers) {
    assert.equal(a.status, 'rejected');
    assert.equal(a.error?.kind, 'unavailable');
    assert.match(a.error?.message ?? '', /publishers allowed its type have 64 events in flight/);
  }
  assert.deepEqual(answer, { status: 'no-match' }, "bob's event reached the intake while alice's were held");
  assert.ok(offered.includes('other-0'));
});

test('a type several publishers may publish has slots of its own, apart from one of theirs flooding a type it alone may publish', async () => {
  const { answer } = await floodThenSend({ publishersOf: publishersOf(prefix, publishers) }, 'com.example.shared');
  assert.deepEqual(answer, { status: 'no-match' });
});

test('without publishersOf (no publishers configured) outside events meet the global bound alone: a flood takes every slot', async () => {
  const { heldAlice, answer, offered } = await floodThenSend({}, 'com.example.bob');
  assert.equal(heldAlice, limits.cloudEventsInFlightMax);
  assert.equal(answer.status, 'rejected');
  assert.equal(answer.error?.kind, 'unavailable');
  assert.match(answer.error?.message ?? '', /too many events in flight/);
  assert.ok(!offered.includes('other-0'));
});
