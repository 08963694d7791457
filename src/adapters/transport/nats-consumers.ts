/**
 * Durable pull consumers: one filtered consumer per logical recipient (spec: "Independent logical
 * recipients use independently addressed messages and filtered durable consumers"), explicit
 * acks, bounded deliveries, and max-delivery exhaustion reported as an observed event — never as
 * another message.
 */
import {
  JetStreamApiCodes,
  JetStreamApiError,
  type ConsumerConfig,
  type ConsumerInfo,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { NatsConnection, Subscription as NatsSubscription } from '@nats-io/transport-node';
import { BoundedMap } from '../../contract/bounded-map.js';
import { AdapterError } from '../../contract/errors.js';
import { fromNatsHeaders, msToNanos } from './nats-codec.js';
import { toAdapterError } from './nats-errors.js';
import { maxDeliveriesAdvisorySubject } from './nats-names.js';
import type { DurableConfig } from './nats-durable-config.js';
import type { ExhaustedInfo, InboundMessage, MessageHandler, Subscription } from './types.js';
import { limits } from '../../contract/limits.js';

/**
 * How long one pull stays open, bounded to nats.js's accepted range. It also paces the consumer's
 * recovery: after a reconnect nats.js checks the consumer and pulls again, and when that check
 * fails (JetStream not ready yet after a broker restart) it tries again only after this long, and
 * missed heartbeats (half of it each) are noticed after twice half of it. With nats.js's default
 * 30 s a consumer could stay idle as long as a lease after a restart; tied to ack_wait, it recovers
 * about as fast as an unacknowledged message would come back.
 */
export function pullExpiresMs(config: DurableConfig): number {
  return Math.min(limits.natsPullExpiresMsMax, Math.max(limits.natsPullExpiresMsMin, config.ackWaitMs));
}

export interface JetStreamContext {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  config: DurableConfig;
}

export function desiredConsumerConfig(durable: string, filter: string, config: DurableConfig): Partial<ConsumerConfig> {
  return {
    durable_name: durable,
    filter_subject: filter,
    ack_policy: 'explicit',
    deliver_policy: 'all',
    replay_policy: 'instant',
    max_deliver: config.maxDeliver,
    ack_wait: msToNanos(config.ackWaitMs),
  };
}

/** Why an existing consumer cannot be used as this subscription's consumer, or undefined. */
export function consumerMismatch(info: ConsumerInfo, filter: string, config: DurableConfig): string | undefined {
  const c = info.config;
  const problems: string[] = [];
  if (c.filter_subject !== filter) problems.push(`filter ${String(c.filter_subject)} is not ${filter}`);
  if (c.ack_policy !== 'explicit') problems.push(`ack policy ${c.ack_policy} is not explicit`);
  if (c.max_deliver !== config.maxDeliver) problems.push(`max_deliver ${String(c.max_deliver)} is not ${config.maxDeliver}`);
  if (c.ack_wait !== msToNanos(config.ackWaitMs)) problems.push(`ack_wait ${String(c.ack_wait)} ns is not ${msToNanos(config.ackWaitMs)} ns`);
  if (c.deliver_subject) problems.push('it is a push consumer');
  return problems.length === 0 ? undefined : `consumer ${info.name} on ${info.stream_name}: ${problems.join('; ')}`;
}

async function consumerInfoOrUndefined(jsm: JetStreamManager, stream: string, durable: string): Promise<ConsumerInfo | undefined> {
  try {
    return await jsm.consumers.info(stream, durable);
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound) return undefined;
    throw error;
  }
}

/**
 * Binds an existing consumer, creating it only when absent. Binding first is what lets a peer run
 * without consumer-create permission (see nats-permissions.ts); a consumer whose config differs
 * is a conflict for whoever provisions consumers to resolve, not something a subscriber rewrites.
 */
export async function bindOrCreateConsumer(ctx: JetStreamContext, stream: string, durable: string, filter: string): Promise<ConsumerInfo> {
  let info: ConsumerInfo;
  try {
    info =
      (await consumerInfoOrUndefined(ctx.jsm, stream, durable)) ?? (await ctx.jsm.consumers.add(stream, desiredConsumerConfig(durable, filter, ctx.config)));
  } catch (error) {
    throw toAdapterError(error, `binding consumer ${durable} on ${stream}`);
  }
  const mismatch = consumerMismatch(info, filter, ctx.config);
  if (mismatch !== undefined) throw new AdapterError('conflict', mismatch);
  return info;
}

/** Creates or updates a consumer to the declared config (provisioning, e.g. a peer's consumer). */
export async function ensureConsumer(ctx: JetStreamContext, stream: string, durable: string, filter: string): Promise<ConsumerInfo> {
  let info: ConsumerInfo;
  try {
    info = await ctx.jsm.consumers.add(stream, desiredConsumerConfig(durable, filter, ctx.config));
  } catch (error) {
    throw toAdapterError(error, `provisioning consumer ${durable} on ${stream}`);
  }
  const mismatch = consumerMismatch(info, filter, ctx.config);
  if (mismatch !== undefined) throw new AdapterError('conflict', mismatch);
  return info;
}

/**
 * The messages of one subscription whose handler still runs (it has neither returned nor acked
 * or nakked). While it runs the broker is told so (an in-progress ack, which restarts ack_wait)
 * every third of ack_wait: only a message whose process stopped — or whose connection broke, or
 * whose handler returned without acking — waits out ack_wait and is redelivered, so ack_wait can
 * be short (fast redelivery after a crash) without a slow handler seeing its request again while
 * it still works on it.
 */
class Outstanding {
  private readonly messages = new Set<JsInbound>();
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(private readonly ackWaitMs: number) {
    this.timer = setInterval(() => this.keepAlive(), Math.max(1, Math.floor(ackWaitMs / 3)));
    this.timer.unref();
  }

  add(inbound: JsInbound): void {
    this.messages.add(inbound);
  }

  delete(inbound: JsInbound): void {
    this.messages.delete(inbound);
  }

  close(): void {
    clearInterval(this.timer);
    this.messages.clear();
  }

  private keepAlive(): void {
    const beforeMs = Date.now() - this.ackWaitMs / 3;
    for (const inbound of this.messages) if (inbound.deliveredAtMs <= beforeMs) inbound.working();
  }
}

/**
 * A delivered JetStream message as the runtime sees it. A class, not an object literal: a literal
 * with getters and closures is built by the engine's slow generic path, about a microsecond per
 * message.
 */
class JsInbound implements InboundMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly deliveredAtMs = Date.now();
  private decodedHeaders: Record<string, string> | undefined;

  constructor(
    private readonly ctx: JetStreamContext,
    private readonly m: JsMsg,
    private readonly outstanding: Outstanding,
  ) {
    this.subject = m.subject;
    this.data = m.data;
  }

  // Decoded on first read: the payload carries everything the runtime acts on, and decoding
  // every delivered message's headers was a tenth of a busy peer's allocations.
  get headers(): Record<string, string> {
    return (this.decodedHeaders ??= fromNatsHeaders(this.m.headers));
  }

  get redelivered(): boolean {
    return this.m.redelivered;
  }

  // A plain ack, not a confirmed one: every handler acks only after its outcome is stored,
  // and answers a redelivery from what it stored (the peer returns its stored result, the
  // coordinator sees a duplicate), so a lost ack costs one redelivery, never a repeated effect.
  // Waiting for the server's confirmation would add a request and a wake-up per message.
  async ack(): Promise<void> {
    this.outstanding.delete(this);
    try {
      this.m.ack();
    } catch (error) {
      throw toAdapterError(error, `ack of ${this.m.subject}`);
    }
  }

  async nak(delayMs?: number): Promise<void> {
    this.outstanding.delete(this);
    try {
      this.m.nak(delayMs);
    } catch (error) {
      throw toAdapterError(error, `nak of ${this.m.subject}`);
    }
    // nak is fire-and-forget in nats.js; the flush puts it on the wire before we return.
    await this.ctx.nc.flush().catch(() => {});
  }

  /** Tells the broker the work goes on (restarts ack_wait); Outstanding calls it. */
  working(): void {
    try {
      this.m.working();
    } catch {
      // The connection is gone: the message is redelivered after ack_wait, as for a stopped process.
    }
  }

  /** The handler failed: hand the message back now rather than after ack_wait. */
  failed(): void {
    // If the connection is gone the nak fails too, and ack_wait redelivers the message once a subscriber is back.
    this.nak().catch(() => {});
  }
}

function deliverDurable(
  ctx: JetStreamContext,
  m: JsMsg,
  handler: MessageHandler,
  delivered: BoundedMap<number, string> | undefined,
  outstanding: Outstanding,
): void {
  // Remembered only where exhaustion is watched: the sequence comes from parsing the ack subject.
  delivered?.set(m.info.streamSequence, m.subject);
  const inbound = new JsInbound(ctx, m, outstanding);
  outstanding.add(inbound);
  // A handler that throws has not finished the work: hand the message back now rather than
  // waiting out ack_wait. nak after an ack is ignored by the client.
  void Promise.resolve()
    .then(() => handler(inbound))
    .then(
      () => outstanding.delete(inbound),
      () => inbound.failed(),
    );
}

/** The part of JetStream's max-deliveries advisory the transport and the deployment read. */
export interface MaxDeliveriesAdvisory {
  stream_seq: number;
  deliveries: number;
}

/** The advisory's stream sequence and delivery count, or undefined when it does not parse. */
export function parseMaxDeliveriesAdvisory(data: Uint8Array): MaxDeliveriesAdvisory | undefined {
  try {
    const value = JSON.parse(new TextDecoder().decode(data)) as Partial<MaxDeliveriesAdvisory>;
    if (Number.isSafeInteger(value.stream_seq) && Number.isSafeInteger(value.deliveries)) return value as MaxDeliveriesAdvisory;
  } catch {
    // An advisory that does not parse carries no sequence to report.
  }
  return undefined;
}

/**
 * The subject of an exhausted message: from this subscription's own deliveries when it saw it
 * (peers are not allowed STREAM.MSG.GET, see nats-permissions.ts), else read back from the
 * stream; '' when neither is possible.
 */
async function exhaustedSubject(ctx: JetStreamContext, stream: string, seq: number, delivered: BoundedMap<number, string>): Promise<string> {
  const seen = delivered.get(seq);
  if (seen !== undefined) return seen;
  try {
    return (await ctx.jsm.streams.getMessage(stream, { seq }))?.subject ?? '';
  } catch {
    return '';
  }
}

/**
 * Subscribes to the consumer's MAX_DELIVERIES advisory before the consumer starts pulling, so
 * no exhaustion can happen unobserved. The server emits the advisory once per message while it
 * runs but again after a restart, so reports are deduplicated by stream sequence here.
 */
async function watchExhaustion(
  ctx: JetStreamContext,
  stream: string,
  durable: string,
  delivered: BoundedMap<number, string>,
  onExhausted: (info: ExhaustedInfo) => void,
): Promise<NatsSubscription> {
  const reported = new BoundedMap<number, true>(limits.natsExhaustedReportedMax);
  const report = async (advisory: MaxDeliveriesAdvisory) => {
    if (reported.has(advisory.stream_seq)) return;
    reported.set(advisory.stream_seq, true);
    const subject = await exhaustedSubject(ctx, stream, advisory.stream_seq, delivered);
    onExhausted({ subject, stream, streamSeq: advisory.stream_seq, deliveries: advisory.deliveries });
  };
  const sub = ctx.nc.subscribe(maxDeliveriesAdvisorySubject(stream, durable), {
    callback: (error, msg) => {
      const advisory = error ? undefined : parseMaxDeliveriesAdvisory(msg.data);
      if (advisory !== undefined) void report(advisory).catch(() => {});
    },
  });
  await ctx.nc.flush();
  if (sub.isClosed()) throw toAdapterError(await sub.closed, `watching exhaustion of ${durable}`);
  return sub;
}

export interface DurableSubscribeRequest {
  stream: string;
  durable: string;
  filter: string;
  handler: MessageHandler;
  onExhausted?: (info: ExhaustedInfo) => void;
}

/** A durable subscription: watch exhaustion, bind (or create) the consumer, then pull. */
export async function subscribeDurable(ctx: JetStreamContext, request: DurableSubscribeRequest): Promise<Subscription> {
  const { stream, durable, filter, handler, onExhausted } = request;
  // Delivered subjects are remembered only where exhaustion is watched (it names them).
  let delivered: BoundedMap<number, string> | undefined;
  let watcher: NatsSubscription | undefined;
  if (onExhausted) {
    delivered = new BoundedMap<number, string>(limits.natsDeliveredSubjectsMax);
    watcher = await watchExhaustion(ctx, stream, durable, delivered, onExhausted);
  }
  try {
    const info = await bindOrCreateConsumer(ctx, stream, durable, filter);
    // getConsumerFromInfo skips a second INFO round trip; the info was just read.
    const consumer = ctx.js.consumers.getConsumerFromInfo(info);
    const outstanding = new Outstanding(ctx.config.ackWaitMs);
    const messages = await consumer
      .consume({
        max_messages: limits.natsPullBatchMessagesMax,
        expires: pullExpiresMs(ctx.config),
        callback: (m) => deliverDurable(ctx, m, handler, delivered, outstanding),
      })
      .catch((error: unknown) => {
        outstanding.close();
        throw error;
      });
    return {
      close: async () => {
        await messages.close();
        outstanding.close();
        watcher?.unsubscribe();
      },
    };
  } catch (error) {
    watcher?.unsubscribe();
    throw toAdapterError(error, `subscribing durable ${durable}`);
  }
}
