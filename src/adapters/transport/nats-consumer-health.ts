/**
 * The health of the durable consumers a coordinator provisions (its own result consumers and the
 * peers' request and cancel consumers: the consumers it owns), checked with its streams by every
 * durability check (nats-streams.ts checkDurableStreams) and repaired by recreating them.
 *
 * Two broken states survive a nats-server 2.9 SIGKILL (docs/operations.md "Broker restarts"):
 *
 * - **ahead of its stream**: the server lost stream writes it had acknowledged while the
 *   consumer's state survived, so the consumer has delivered sequences past the stream's last
 *   one. New messages get those sequences again and a consumer never delivers below its own
 *   next sequence: they would wait in the work queue for good. Read in this order — the consumer
 *   first, then the stream — delivered ≤ last always holds on a healthy server (the stream's last
 *   sequence only grows), so delivered > last proves the loss. The stored work of the open
 *   operations may be gone: the check reports the namespace broken (they close indeterminate).
 * - **starved** (fixed upstream in 2.11.0, "consumer slowdown when redelivering deleted
 *   message"): pending deliveries of messages that were removed from the work-queue stream are
 *   scheduled for redelivery every ack_wait; each wake-up of the consumer is spent failing to load
 *   one of them, so new messages wait behind them until max_deliver drops them, which can take
 *   max_deliver × ack_wait. The API lists no pending sequences, so the state is recognised by what
 *   it does: across two ack waits a pull was waiting, messages were waiting, acknowledgement was
 *   not at its max_ack_pending bound, and the consumer delivered nothing at all (its delivery
 *   sequence, which counts redeliveries too, did not move). A healthy consumer answers a waiting
 *   pull at once. Nothing stored is lost: the messages it skips were acknowledged and removed.
 *
 * The repair deletes the consumer and creates it again with the declared config (deliver all):
 * it delivers every message the work queue still holds from the start, so the in-flight ones come
 * once more and every handler answers a redelivery from what it stored. Subscribers bound to it
 * (nats.js consume) find it again after the delete's notice or a missed heartbeat. A consumer
 * recreated since it was observed (another coordinator repaired it) is left alone.
 */
import { JetStreamApiError, type ConsumerInfo, type JetStreamManager } from '@nats-io/jetstream';
import { limits } from '../../contract/limits.js';
import { desiredConsumerConfig } from './nats-consumers.js';
import type { DurableConfig } from './nats-durable-config.js';

/** A consumer the coordinator provisioned (NatsTransport.ensureDurableConsumer), on one stream. */
export interface OwnedConsumer {
  stream: string;
  durable: string;
  filter: string;
}

/** Why a consumer read before its stream is ahead of it (lost acknowledged writes), or undefined. */
export function consumerAhead(info: ConsumerInfo, streamLastSeq: number): string | undefined {
  const delivered = info.delivered.stream_seq;
  if (delivered <= streamLastSeq) return undefined;
  return `consumer ${info.name} has delivered up to stream sequence ${delivered}, past the stream's last sequence ${streamLastSeq}: the server lost acknowledged writes, and new messages at the reused sequences would never be delivered`;
}

/** What one observation of a consumer says about starvation (see StarvationWatch). */
function stallEligible(info: ConsumerInfo): boolean {
  const maxAckPending = info.config.max_ack_pending ?? -1;
  const belowAckBound = maxAckPending <= 0 || info.num_ack_pending < maxAckPending;
  return info.num_waiting > 0 && info.num_pending > 0 && info.num_ack_pending > 0 && belowAckBound;
}

interface Stall {
  created: string;
  deliveredConsumerSeq: number;
  sinceMs: number;
}

/**
 * Remembers, per owned consumer, since when it has delivered nothing while a pull and messages
 * waited. A consumer is starved once that lasted at least two ack waits (the server schedules
 * redeliveries once per ack wait, so one whole cycle passed without a delivery).
 */
export class StarvationWatch {
  private readonly stalls = new Map<string, Stall>();

  constructor(
    private readonly ackWaitMs: number,
    private readonly nowMs: () => number,
  ) {}

  /** Why the consumer is starved, or undefined; call once per check with a fresh info. */
  observe(owned: OwnedConsumer, info: ConsumerInfo): string | undefined {
    const key = `${owned.stream}/${owned.durable}`;
    const nowMs = this.nowMs();
    if (!stallEligible(info)) {
      this.stalls.delete(key);
      return undefined;
    }
    const seen = this.stalls.get(key);
    if (seen === undefined || seen.created !== info.created || seen.deliveredConsumerSeq !== info.delivered.consumer_seq) {
      this.stalls.set(key, { created: info.created, deliveredConsumerSeq: info.delivered.consumer_seq, sinceMs: nowMs });
      return undefined;
    }
    const stalledMs = nowMs - seen.sinceMs;
    if (stalledMs < 2 * this.ackWaitMs) return undefined;
    return `consumer ${info.name} delivered nothing for ${stalledMs} ms (two ack waits of ${this.ackWaitMs} ms) while ${info.num_pending} message(s) and ${info.num_waiting} pull(s) waited with ${info.num_ack_pending} delivery(ies) pending acknowledgement: it is starved by redeliveries of removed messages (nats-server before 2.11.0)`;
  }

  /** Forgets a consumer (after it was recreated). */
  forget(owned: OwnedConsumer): void {
    this.stalls.delete(`${owned.stream}/${owned.durable}`);
  }
}

/** JSConsumerNotFoundErr. */
const consumerNotFoundCode = 10014;

/**
 * Deletes the consumer and creates it again with the declared config, unless it was recreated
 * since `observed` (its creation instant changed): another coordinator repaired it already.
 * Answers whether this call recreated it.
 *
 * Coordinators that observed the same broken consumer repair it at once: their deletes and creates
 * interleave, and nats-server 2.9 answers the loser "consumer not found" for its delete, or an
 * error for its create (a file error such as "meta.inf: no such file" when the other's delete
 * removed the directory under it). A consumer gone before this delete is created all the same,
 * and a failed step is looked at again (up to limits.consumerRecreateAttemptsMax times): a consumer of another
 * creation instant than `observed` is the other coordinator's repair, and ends this one.
 */
export async function recreateConsumer(jsm: JetStreamManager, owned: OwnedConsumer, observed: ConsumerInfo, config: DurableConfig): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    const current = await jsm.consumers.info(owned.stream, owned.durable).catch(() => undefined);
    if (current !== undefined && current.created !== observed.created) return false;
    try {
      if (current !== undefined) await jsm.consumers.delete(owned.stream, owned.durable).catch(unlessNotFound);
      await jsm.consumers.add(owned.stream, desiredConsumerConfig(owned.durable, owned.filter, config));
      return true;
    } catch (error) {
      // A racing delete can fail half-way on the server's files ("directory not empty"): look again
      // (another's consumer now, nothing, or the observed one still there) and go on from there.
      if (attempt >= limits.consumerRecreateAttemptsMax) {
        const after = await jsm.consumers.info(owned.stream, owned.durable).catch(() => undefined);
        if (after !== undefined && after.created !== observed.created) return false;
        throw error;
      }
    }
  }
}

/**
 * An owned consumer's info, `'missing'` when the server answers that it does not exist (deleted by
 * an operator or a principal allowed to, or a repair whose create failed after its delete), or
 * undefined when it could not be read (then nothing is concluded from it).
 */
export async function ownedConsumerInfo(jsm: JetStreamManager, owned: OwnedConsumer): Promise<ConsumerInfo | 'missing' | undefined> {
  try {
    return await jsm.consumers.info(owned.stream, owned.durable);
  } catch (error) {
    return error instanceof JetStreamApiError && error.code === consumerNotFoundCode ? 'missing' : undefined;
  }
}

/**
 * Creates a missing owned consumer again with its declared config (deliver all: every message the
 * work queue still holds is delivered, as after a repair). Creating one that another coordinator
 * created meanwhile with the same config is no change on the server.
 */
export async function createMissingConsumer(jsm: JetStreamManager, owned: OwnedConsumer, config: DurableConfig): Promise<void> {
  await jsm.consumers.add(owned.stream, desiredConsumerConfig(owned.durable, owned.filter, config));
}

/** A delete that found no consumer: another coordinator deleted it first. */
function unlessNotFound(error: unknown): boolean {
  if (error instanceof JetStreamApiError && error.code === consumerNotFoundCode) return false;
  throw error;
}
