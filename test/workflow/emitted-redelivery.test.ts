/**
 * Emitted events are never answered, so their publisher (the coordinator) never sends one again:
 * the NATS intake keeps one it could not deliver for now — the intake unavailable, the in-flight
 * bound reached — and delivers it again itself (emittedRedelivery). An outside event is answered
 * `unavailable` instead, once, and its publisher retries. Real nats-server; the intake is a stub
 * that answers as told, so each case is exact.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { serveCloudEvents, emittedRedelivery } from '../../src/adapters/transport/nats-cloudevents.js';
import { emittedEventSubject, type CloudEvent, type CloudEventDelivery, type CloudEventIntake } from '../../src/contract/cloudevents.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import { limits } from '../../src/contract/limits.js';
import { startNatsServer, type NatsServer } from '../support/nats-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const type = 'com.example.order.placed';
const event = (id: string): CloudEvent => ({ specversion: '1.0', id, source: 'https://shop.example', type });

/** An intake answering each delivery by `answer` (its call count), recording the ids it was offered. */
function stubIntake(answer: (call: number) => Promise<CloudEventDelivery>): CloudEventIntake & { offered: string[] } {
  const offered: string[] = [];
  return {
    offered,
    deliver: (e) => {
      offered.push(e.id);
      return answer(offered.length);
    },
  };
}

async function withNats(run: (nc: NatsConnection) => Promise<void>): Promise<void> {
  const server: NatsServer = await startNatsServer();
  const nc = await connect({ servers: server.url });
  try {
    await run(nc);
  } finally {
    await nc.close();
    await server.stop();
  }
}

test('an emitted event the intake could not take for now is delivered again by the host, with backoff; an outside one is answered unavailable once', async () => {
  await withNats(async (nc) => {
    const intake = stubIntake(async (call) => {
      if (call <= 2) throw new AdapterError('unavailable', `busy (${call})`);
      return { matched: ['wf-1'] };
    });
    const drops: string[] = [];
    const subscription = serveCloudEvents(nc, 'test.events', intake, {
      emitSubjectPrefix: 'test.emitted',
      onEmittedDropped: (_s, reason, detail) => drops.push(`${reason}: ${detail}`),
    });
    try {
      const started = Date.now();
      nc.publish(emittedEventSubject('test.emitted', 'alice', type), JSON.stringify(event('e-1')));
      await eventually(() => intake.offered.length === 3, 'offered a third time', 10_000);
      // Two backoffs (100 ms, then 200 ms) before the third attempt.
      assert.ok(Date.now() - started >= emittedRedelivery.firstDelayMs * 3, `retried after its backoff (${Date.now() - started} ms)`);
      assert.deepEqual(intake.offered, ['e-1', 'e-1', 'e-1']);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(intake.offered.length, 3, 'taken on the third attempt: not offered again');
      assert.deepEqual(drops, []);

      // An outside event is the publisher's to send again: answered unavailable, offered once.
      const refusing = stubIntake(async () => {
        throw new AdapterError('unavailable', 'busy');
      });
      const outside = serveCloudEvents(nc, 'test.outside', refusing);
      try {
        const answer = (await nc.request(`test.outside.${type}`, JSON.stringify(event('o-1')), { timeout: 5000 })).json<{
          status: string;
          error?: { kind: string };
        }>();
        assert.deepEqual([answer.status, answer.error?.kind], ['rejected', 'unavailable']);
        await new Promise((resolve) => setTimeout(resolve, 400));
        assert.deepEqual(refusing.offered, ['o-1']);
      } finally {
        await outside.close();
      }
    } finally {
      await subscription.close();
    }
  });
});

test('an emitted event past the in-flight bound waits for a slot; a refusal that stays one is not retried but told dropped; so is what waits at close', async () => {
  await withNats(async (nc) => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const intake = stubIntake(async (call) => {
      if (call <= limits.cloudEventsInFlightMax) await released;
      return { matched: [] };
    });
    const drops: string[] = [];
    const subscription = serveCloudEvents(nc, 'test.events', intake, {
      emitSubjectPrefix: 'test.emitted',
      onEmittedDropped: (_s, reason, detail) => drops.push(`${reason}: ${detail}`),
    });
    try {
      // Enough principals to fill the in-flight bound (each has at most cloudEventsInFlightPerPrincipalMax in flight), in turn.
      const principals = Math.ceil(limits.cloudEventsInFlightMax / limits.cloudEventsInFlightPerPrincipalMax);
      for (let i = 0; i <= limits.cloudEventsInFlightMax; i++)
        nc.publish(emittedEventSubject('test.emitted', `p${i % principals}`, type), JSON.stringify(event(`e-${i}`)));
      await nc.flush();
      await eventually(() => intake.offered.length === limits.cloudEventsInFlightMax, 'the bound taken', 10_000);
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(intake.offered.length, limits.cloudEventsInFlightMax, 'the event past the bound waits');
      release();
      await eventually(() => intake.offered.length === limits.cloudEventsInFlightMax + 1, 'the waiting event delivered once a slot freed', 10_000);
      assert.equal(intake.offered.at(-1), `e-${limits.cloudEventsInFlightMax}`);
      assert.deepEqual(drops, []);
    } finally {
      await subscription.close();
    }

    // Invalid input stays invalid: not kept, told dropped. An unavailable one kept for its retry is told dropped at close.
    const dropsAtClose: string[] = [];
    const refusing = stubIntake(async (call) => {
      throw call === 1 ? new AdapterError('invalid-input', 'no such listen') : new AdapterError('unavailable', 'busy');
    });
    const closing = serveCloudEvents(nc, 'test.events', refusing, {
      emitSubjectPrefix: 'test.emitted',
      onEmittedDropped: (_s, reason, detail) => dropsAtClose.push(`${reason}: ${detail}`),
    });
    const subject = emittedEventSubject('test.emitted', 'alice', type);
    nc.publish(subject, JSON.stringify(event('bad-1')));
    await eventually(() => refusing.offered.length === 1, 'offered once', 10_000);
    nc.publish(subject, JSON.stringify(event('busy-1')));
    await eventually(() => refusing.offered.length === 2, 'the second offered', 10_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await closing.close();
    assert.deepEqual(refusing.offered.slice(0, 2), ['bad-1', 'busy-1'], 'the refused event was not offered again');
    assert.equal(dropsAtClose.length, 2, JSON.stringify(dropsAtClose));
    assert.match(dropsAtClose[0] ?? '', /^refused: refused \(invalid-input\): no such listen$/, 'the refusal is told at once');
    assert.match(dropsAtClose[1] ?? '', /^intake-closed: (busy; the intake closed|the intake closed before it was delivered)$/);
  });
});

test('an emitted event’s window runs from its arrival: a first attempt that took long before it was answered unavailable does not lengthen it', async () => {
  await withNats(async (nc) => {
    const clock = new VirtualClock();
    let answerFirst: (() => void) | undefined;
    const intake = stubIntake(async (call) => {
      // The first attempt is answered unavailable only after most of the window has passed (a slow store).
      if (call === 1) await new Promise<void>((resolve) => (answerFirst = resolve));
      throw new AdapterError('unavailable', `busy (${call})`);
    });
    const drops: { atMs: number; reason: string }[] = [];
    const subscription = serveCloudEvents(nc, 'test.events', intake, {
      emitSubjectPrefix: 'test.emitted',
      clock,
      onEmittedDropped: (_s, reason) => drops.push({ atMs: clock.nowMs(), reason }),
    });
    try {
      const arrivedMs = clock.nowMs();
      nc.publish(emittedEventSubject('test.emitted', 'alice', type), JSON.stringify(event('slow-1')));
      await eventually(() => answerFirst !== undefined, 'offered once', 10_000);
      await clock.advance(emittedRedelivery.windowMs - 5_000);
      answerFirst?.();
      // Attempts go on after their backoff until the next would come past the window from its arrival.
      for (let moved = 0; moved < 30_000 && drops.length === 0; moved += emittedRedelivery.firstDelayMs) {
        await clock.advance(emittedRedelivery.firstDelayMs);
        await new Promise((resolve) => setImmediate(resolve));
      }
      assert.equal(drops.length, 1, `dropped once (offered ${intake.offered.length} times)`);
      assert.equal(drops[0]?.reason, 'window');
      assert.ok(drops[0]!.atMs - arrivedMs <= emittedRedelivery.windowMs, `dropped ${drops[0]!.atMs - arrivedMs} ms after its arrival, past its window`);
    } finally {
      await subscription.close();
    }
  });
});
