/**
 * The JetStream store's stamp feed: an append awaits the delivery of its own sequence; whatever the
 * feed cannot answer in time goes to the read-back path, and after one miss the feed is bypassed
 * until it delivers past the sequence it missed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StampFeed, type Delivery } from '../../src/adapters/store/stamp-feed.js';

const at = (seq: number, ms: number, subject = 'convoke.op.x'): Delivery => ({ seq, subject, timestampNanos: BigInt(ms) * 1_000_000n + 999_999n });

function feed(): { feed: StampFeed; stopped: () => boolean } {
  let stopped = false;
  const f = new StampFeed(async () => {
    stopped = true;
  });
  return { feed: f, stopped: () => stopped };
}

test('a stamp delivered after the append asked is handed to it, truncated to the millisecond', async () => {
  const { feed: f } = feed();
  const asked = f.stampOf(7, 1_000);
  f.deliver(at(7, 1_700_000_000_123));
  assert.deepEqual(await asked, { subject: 'convoke.op.x', committedAtMs: 1_700_000_000_123 });
});

test('a stamp delivered before the PubAck came back is answered at once', () => {
  const { feed: f } = feed();
  f.deliver(at(3, 50, 'convoke.op.y'));
  assert.deepEqual(f.stampOf(3, 1_000), { subject: 'convoke.op.y', committedAtMs: 50 });
});

test('a wait the feed cannot answer in time goes to read-back, and the feed is bypassed until it catches up', async () => {
  const { feed: f } = feed();
  assert.equal(await f.stampOf(10, 5), undefined, 'no delivery within the wait');
  assert.equal(f.stampOf(11, 1_000), undefined, 'distrusted: no wait at all');
  f.deliver(at(9, 1));
  assert.equal(f.stampOf(12, 1_000), undefined, 'still behind the missed sequence');
  f.deliver(at(10, 2));
  const asked = f.stampOf(12, 1_000);
  assert.ok(asked instanceof Promise, 'caught up: waits again');
  f.deliver(at(11, 3));
  f.deliver(at(12, 4));
  assert.equal((await asked)?.committedAtMs, 4);
});

test('a sequence the ordered feed has passed without delivering (purged) is released to read-back at once', async () => {
  const { feed: f } = feed();
  const skipped = f.stampOf(20, 60_000);
  f.deliver(at(21, 5));
  assert.equal(await skipped, undefined);
  assert.equal(f.stampOf(20, 60_000), undefined, 'below the highest delivered: not waited for');
});

test('close releases every waiter and stops the consumer', async () => {
  const { feed: f, stopped } = feed();
  const waiting = [f.stampOf(1, 60_000), f.stampOf(1, 60_000), f.stampOf(2, 60_000)];
  await f.close();
  assert.deepEqual(await Promise.all(waiting), [undefined, undefined, undefined]);
  assert.ok(stopped());
});
