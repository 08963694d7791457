/**
 * The rules the durability check applies to a provisioned consumer (nats-consumer-health.ts), on
 * consumer infos as nats-server 2.9.10 reports them; the clock is injected.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConsumerInfo } from '@nats-io/jetstream';
import { StarvationWatch, consumerAhead, type OwnedConsumer } from '../../src/adapters/transport/nats-consumer-health.js';

const owned: OwnedConsumer = { stream: 'S', durable: 'c', filter: 'ns.*.*.request.alfa' };

function info(
  overrides: { delivered?: [number, number]; pending?: number; waiting?: number; ackPending?: number; maxAckPending?: number; created?: string } = {},
): ConsumerInfo {
  const [consumerSeq, streamSeq] = overrides.delivered ?? [10, 20];
  return {
    stream_name: 'S',
    name: 'c',
    created: overrides.created ?? '2026-01-01T00:00:00Z',
    config: { durable_name: 'c', ack_policy: 'explicit', max_ack_pending: overrides.maxAckPending ?? 1000 },
    delivered: { consumer_seq: consumerSeq, stream_seq: streamSeq, last_active: 0 },
    ack_floor: { consumer_seq: consumerSeq - 1, stream_seq: streamSeq - 1, last_active: 0 },
    num_ack_pending: overrides.ackPending ?? 3,
    num_redelivered: 0,
    num_waiting: overrides.waiting ?? 1,
    num_pending: overrides.pending ?? 4,
    push_bound: false,
  } as unknown as ConsumerInfo;
}

test("a consumer that delivered past its stream's last sequence is ahead of it (the broker lost acknowledged writes); at or below it is not", () => {
  assert.equal(consumerAhead(info({ delivered: [5, 20] }), 20), undefined);
  assert.equal(consumerAhead(info({ delivered: [5, 19] }), 20), undefined);
  assert.match(consumerAhead(info({ delivered: [5, 21] }), 20) ?? '', /delivered up to stream sequence 21, past the stream's last sequence 20/);
});

test('a consumer is starved only after delivering nothing for two ack waits while a pull and messages waited below its ack bound', () => {
  let nowMs = 0;
  const watch = new StarvationWatch(1_000, () => nowMs);
  assert.equal(watch.observe(owned, info()), undefined, 'first sight starts the watch');
  nowMs = 1_999;
  assert.equal(watch.observe(owned, info()), undefined, 'one ack wait and a bit is not enough');
  nowMs = 2_000;
  assert.match(watch.observe(owned, info()) ?? '', /delivered nothing for 2000 ms/);
});

test('any delivery, a redelivery included, restarts the starvation watch', () => {
  let nowMs = 0;
  const watch = new StarvationWatch(1_000, () => nowMs);
  watch.observe(owned, info({ delivered: [10, 20] }));
  nowMs = 1_500;
  // A redelivery moves the consumer sequence, not the stream sequence.
  assert.equal(watch.observe(owned, info({ delivered: [11, 20] })), undefined);
  nowMs = 3_000;
  assert.equal(watch.observe(owned, info({ delivered: [11, 20] })), undefined, 'counted from the redelivery');
  nowMs = 3_500;
  assert.ok(watch.observe(owned, info({ delivered: [11, 20] })) !== undefined);
});

test('a consumer with nothing waiting, no pull waiting, nothing pending acknowledgement or at its max_ack_pending is idle, never starved', () => {
  const idle = [{ pending: 0 }, { waiting: 0 }, { ackPending: 0 }, { ackPending: 1000, maxAckPending: 1000 }];
  for (const overrides of idle) {
    let nowMs = 0;
    const watch = new StarvationWatch(1_000, () => nowMs);
    for (; nowMs <= 10_000; nowMs += 500) assert.equal(watch.observe(owned, info(overrides)), undefined, JSON.stringify(overrides));
  }
});

test('a recreated consumer (another creation instant) and a forgotten one start the watch again', () => {
  let nowMs = 0;
  const watch = new StarvationWatch(1_000, () => nowMs);
  watch.observe(owned, info());
  nowMs = 2_500;
  assert.equal(watch.observe(owned, info({ created: '2026-01-01T00:00:02Z' })), undefined);
  nowMs = 5_000;
  watch.forget(owned);
  assert.equal(watch.observe(owned, info({ created: '2026-01-01T00:00:02Z' })), undefined);
});
