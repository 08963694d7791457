/**
 * How a peer's durable request consumer reads as presence (src/adapters/directory/nats-presence.ts),
 * and the observation's cache and revision: admissions reuse an observation for its TTL, and the
 * revision moves exactly when an observed presence changes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ConsumerInfo, JetStreamManager } from '@nats-io/jetstream';
import { NatsConsumerPresence, presenceOf } from '../../src/adapters/directory/nats-presence.js';
import { VirtualClock } from '../../src/contract/clock.js';

const info = (num_waiting: number, num_pending: number, num_ack_pending: number, consumer_seq: number) => ({
  num_waiting,
  num_pending,
  num_ack_pending,
  delivered: { consumer_seq, stream_seq: consumer_seq },
});

test('presence from a request consumer: a waiting pull is online, an idle consumer with no pull offline, a busy one online only while it delivers', () => {
  assert.equal(presenceOf(info(1, 0, 0, 0), undefined), 'online');
  assert.equal(presenceOf(info(0, 0, 0, 5), undefined), 'offline');
  assert.equal(presenceOf(info(0, 3, 0, 5), undefined), undefined, 'work outstanding, no pull waiting, first look: not observed');
  assert.equal(presenceOf(info(0, 3, 2, 7), 5), 'online', 'delivered since the last look');
  assert.equal(presenceOf(info(0, 3, 2, 7), 7), 'offline', 'work outstanding and nothing delivered since');
});

test('presence observations are reused for their TTL, one API call per peer, and the revision moves only when a presence changes', async () => {
  const clock = new VirtualClock(1_000);
  const state = new Map<string, ReturnType<typeof info>>([
    ['convoke-peer-alfa-request', info(1, 0, 0, 0)],
    ['convoke-peer-bravo-request', info(0, 0, 0, 0)],
  ]);
  let calls = 0;
  const jsm = {
    consumers: { info: async (_stream: string, name: string) => (calls++, state.get(name) as unknown as ConsumerInfo) },
  } as unknown as JetStreamManager;
  const presence = new NatsConsumerPresence(async () => jsm, { peers: new Map([['demo.v1.lab', ['alfa', 'bravo']]]), clock, ttlMs: 1_000 });
  const first = await presence.observe('demo.v1.lab', ['alfa', 'bravo', 'charlie']);
  assert.deepEqual([first.online, first.offline], [['alfa'], ['bravo']], 'charlie has no provisioned consumer: not observed');
  await Promise.all([presence.observe('demo.v1.lab', ['alfa', 'bravo']), presence.observe('demo.v1.lab', ['alfa'])]);
  assert.equal(calls, 2, 'within the TTL nothing is asked again');
  await clock.advance(1_000);
  const same = await presence.observe('demo.v1.lab', ['alfa', 'bravo']);
  assert.equal(calls, 4);
  assert.equal(same.revision, first.revision, 'nothing changed: the same revision');
  state.set('convoke-peer-alfa-request', info(0, 0, 0, 0));
  await clock.advance(1_000);
  const moved = await presence.observe('demo.v1.lab', ['alfa', 'bravo']);
  assert.deepEqual([moved.online, moved.offline], [[], ['alfa', 'bravo']]);
  assert.notEqual(moved.revision, first.revision);
});
