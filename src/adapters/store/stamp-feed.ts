/**
 * Server stamps of appended messages, delivered instead of read back.
 *
 * A JetStream PubAck (nats-server 2.9) carries the stream sequence but not the timestamp the
 * server stored, and guard-on-fold needs that timestamp to answer an append. Reading the message
 * back costs a second round trip per append. This feed is an ordered push consumer over the
 * operations stream, headers only: the server pushes every stored message to it, and each
 * delivery names its sequence, subject and server timestamp (the `$JS.ACK` reply subject). An
 * append then awaits the delivery of its own sequence, which usually arrives with the PubAck.
 *
 * The feed is only a faster path to the same fact: when a delivery does not come in time (the
 * consumer is being recreated after a reconnect, or lags), the caller reads the message back
 * exactly as before. After a miss the feed is not trusted again until it delivers past the
 * sequence it missed, so a dead feed costs one wait, not one per append.
 */
import { DeliverPolicy, type JetStreamClient } from '@nats-io/jetstream';
import { BoundedMap } from '../../contract/bounded-map.js';
import { notifyAll } from './codec.js';
import { limits } from '../../contract/limits.js';

export interface Stamp {
  subject: string;
  committedAtMs: number;
}

/** What the feed reads of one delivered message (a JsMsg has these). */
export interface Delivery {
  seq: number;
  subject: string;
  timestampNanos: bigint;
}

export class StampFeed {
  private readonly seen = new BoundedMap<number, Stamp>(limits.stampFeedKeptMax);
  private readonly waiting = new Map<number, Array<(stamp: Stamp | undefined) => void>>();
  private highestSeq = 0;
  /** Told of every delivery (subject and sequence): the store's revision watchers. */
  private readonly watchers = new Set<(subject: string, seq: number) => void>();
  /** Set when a wait timed out: the feed is bypassed until it delivers past this sequence. */
  private distrustedUntilSeq = 0;

  /** `stop` ends the consumer feeding `deliver` (start() wires both). */
  constructor(private readonly stop: () => Promise<void>) {}

  /** Starts delivering from `fromSeq` (the stream's next sequence when the store opened). */
  static async start(js: JetStreamClient, stream: string, fromSeq: number): Promise<StampFeed> {
    const consumer = await js.consumers.getPushConsumer(stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: fromSeq,
      headers_only: true,
    });
    // eslint-disable-next-line prefer-const -- the callback reads it; it is set once the consumer runs
    let feed: StampFeed | undefined;
    const messages = await consumer.consume({ callback: (msg) => feed?.deliver(msg) });
    feed = new StampFeed(() => messages.close().then(() => undefined));
    return feed;
  }

  /**
   * The stamp of message `seq`, or undefined if the feed cannot say within `waitMs` (the caller
   * then reads the message back).
   */
  stampOf(seq: number, waitMs: number): Promise<Stamp | undefined> | Stamp | undefined {
    const known = this.seen.get(seq);
    if (known) return known;
    if (seq <= this.highestSeq || this.distrustedUntilSeq > 0) return undefined;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.unwait(seq, settle);
        if (seq > this.distrustedUntilSeq) this.distrustedUntilSeq = seq;
        resolve(undefined);
      }, waitMs);
      const settle = (stamp: Stamp | undefined) => {
        clearTimeout(timer);
        resolve(stamp);
      };
      const list = this.waiting.get(seq);
      if (list) list.push(settle);
      else this.waiting.set(seq, [settle]);
    });
  }

  /** Tells `watcher` the subject and sequence of every message delivered from now on; the answer stops it. */
  watch(watcher: (subject: string, seq: number) => void): () => void {
    this.watchers.add(watcher);
    return () => void this.watchers.delete(watcher);
  }

  async close(): Promise<void> {
    for (const list of this.waiting.values()) for (const settle of list) settle(undefined);
    this.waiting.clear();
    await this.stop().catch(() => undefined);
  }

  /** One stored message, in stream order (the ordered consumer's callback). */
  deliver(msg: Delivery): void {
    const seq = msg.seq;
    const stamp: Stamp = {
      subject: msg.subject,
      // Same truncation to ms as the ISO stamp a read-back parses.
      committedAtMs: Number(msg.timestampNanos / 1_000_000n),
    };
    if (seq > this.highestSeq) this.highestSeq = seq;
    if (this.distrustedUntilSeq > 0 && seq >= this.distrustedUntilSeq) this.distrustedUntilSeq = 0;
    this.seen.set(seq, stamp);
    if (this.watchers.size > 0) notifyAll(this.watchers, msg.subject, seq);
    const list = this.waiting.get(seq);
    if (list) {
      this.waiting.delete(seq);
      for (const settle of list) settle(stamp);
    }
    // Waits below the highest delivered sequence will not be answered (an ordered consumer
    // delivers in order): release them to the read-back path now instead of at their timeout.
    if (this.waiting.size > 0) {
      for (const [waitingSeq, waiters] of this.waiting) {
        if (waitingSeq >= this.highestSeq) continue;
        this.waiting.delete(waitingSeq);
        for (const settle of waiters) settle(undefined);
      }
    }
  }

  private unwait(seq: number, settle: (stamp: Stamp | undefined) => void): void {
    const list = this.waiting.get(seq);
    if (!list) return;
    const rest = list.filter((s) => s !== settle);
    if (rest.length === 0) this.waiting.delete(seq);
    else this.waiting.set(seq, rest);
  }
}
