/**
 * The NATS transport: core NATS in memory mode, JetStream in durable mode. It is handed an open
 * connection (`new NatsTransport(nc, …)`, the nats.js v3 "pass the layer below in" style) and
 * speaks convoke's Transport interface on top of it.
 *
 * Receipts are evidence, never hope (spec: "Outbox, durable delivery and recovery"):
 * - core publish: `sent` — core NATS has no storage acknowledgment, and a publish permission
 *   violation is reported asynchronously by the server, never to the publish call;
 * - durable publish: `stored` only for a PubAck from the expected stream, `already-stored` for a
 *   duplicate Msg-Id inside the window, `rejected` when the server answered that it did not store
 *   (permission, discard-new limits, other API errors), and `unknown` when nothing was proven — a
 *   timeout, a lost connection or no stream listening (a restart) is never proof of non-delivery.
 */
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type PubAck } from '@nats-io/jetstream';
import { connect, errors, type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { AdapterError } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import type { DeliveryReceipt } from '../../events/types.js';
import { headers as wireHeaders } from '../../events/wire.js';
import { fromNatsHeaders, toNatsHeaders } from './nats-codec.js';
import { PubAckMux, type PubAckPublishOptions } from './nats-pubacks.js';
import { ensureConsumer, subscribeDurable, type JetStreamContext } from './nats-consumers.js';
import { classifyNatsError, messageBytes, pastMaxPayload, sendFailure, streamMessageTooLarge, toAdapterError, type NatsFailure } from './nats-errors.js';
import { loginOptions } from './nats-creds.js';
import { jetStreamNotAnswering, retryWhileStarting, serverNotListening, type StartupWait } from './nats-startup.js';
import {
  assertNamespace,
  assertToken,
  durableLayout,
  peerConsumerFilter,
  peerConsumerName,
  type DurableLayout,
  type DurableRoute,
  type PeerConsumerKind,
} from './nats-names.js';
import { StarvationWatch, type OwnedConsumer } from './nats-consumer-health.js';
import {
  checkDurableStreams,
  durableStreamsAnswer,
  ensureDurableStreams,
  streamsCreatedUntilMs,
  streamsRecreatedSince,
  type ConsumerHealthState,
  type DurableConfig,
} from './nats-streams.js';
import type {
  DurabilityCheck,
  InboundMessage,
  MessageHandler,
  PublishOptions,
  PublishReceipt,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportCapabilities,
} from './types.js';

export type { DurableConfig } from './nats-streams.js';
export type { NatsConnection } from '@nats-io/transport-node';

const connectTimeoutMsDefault = 5_000;
const reconnectTimeWaitMsDefault = 250;
const publishAckTimeoutMsDefault = 5_000;

export interface NatsConnectOptions {
  /** One URL or a comma-separated list. */
  servers: string;
  user?: string;
  pass?: string;
  /** A credentials file's contents (user JWT and nkey seed), in place of user and password. */
  creds?: Uint8Array;
  /** Connection name shown by the server (monitoring, logs). */
  name?: string;
  timeoutMs?: number;
  /** Must match the user's inbox permission (inboxPrefixFor in nats-names.ts). */
  inboxPrefix?: string;
  reconnectTimeWaitMs?: number;
  /** Wait out a server that is not listening yet (nats-startup.ts); without it, the first refusal fails. */
  startup?: StartupWait;
}

/**
 * Opens a connection. It reconnects forever: a durable runtime outlives broker restarts, and
 * work in flight is protected by storage and idempotent publication, not by the socket. With
 * `startup`, a server that does not listen yet is tried again until the start-up wait ends.
 */
export async function connectNats(options: NatsConnectOptions): Promise<NatsConnection> {
  if (options.startup === undefined) return connectOnce(options);
  return retryWhileStarting(`connecting to ${options.servers}`, () => connectOnce(options), serverNotListening, options.startup);
}

async function connectOnce(options: NatsConnectOptions): Promise<NatsConnection> {
  try {
    return await connect({
      servers: options.servers.split(',').map((s) => s.trim()),
      ...loginOptions(options),
      name: options.name,
      timeout: options.timeoutMs ?? connectTimeoutMsDefault,
      inboxPrefix: options.inboxPrefix,
      maxReconnectAttempts: -1,
      reconnectTimeWait: options.reconnectTimeWaitMs ?? reconnectTimeWaitMsDefault,
      // No stack capture per request: nats.js otherwise builds two Error objects for every
      // request and publish (about 7% of a busy coordinator's CPU); failures still say what and where.
      noAsyncTraces: true,
    });
  } catch (error) {
    const kind = error instanceof errors.AuthorizationError ? 'denied' : 'unavailable';
    throw new AdapterError(kind, `connecting to ${options.servers}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

export interface NatsTransportOptions {
  /** The identity this connection authenticated as (normally the NATS user). */
  identity: string;
  /** Durable mode: JetStream streams and consumers for this namespace. */
  durable?: DurableConfig;
  /** close() drains and closes the connection too; true when the transport opened it. */
  ownsConnection?: boolean;
  /** How long a durable publish waits for its storage acknowledgment before `unknown`. */
  publishAckTimeoutMs?: number;
  /** The clock the durability check times consumer starvation with (nats-consumer-health.ts); Date.now by default. */
  nowMs?: () => number;
  /**
   * Told when a core (non-durable) subscription's handler throws: the message is not delivered
   * again (a durable one is handed back for redelivery instead), so this is where it is seen. A
   * handler is expected to answer every failure itself; this reports the ones it did not.
   */
  onHandlerError?: (subject: string, error: unknown) => void;
}

function validateDurableConfig(config: DurableConfig): void {
  assertNamespace(config.namespace);
  for (const peerId of config.peers) assertToken(peerId, 'peer id');
  const positive = (value: number | undefined, name: string) => {
    if (value !== undefined && !(Number.isSafeInteger(value) && value > 0))
      throw new AdapterError('invalid-input', `${name} must be a positive integer, got ${value}`);
  };
  positive(config.duplicateWindowMs, 'duplicateWindowMs');
  positive(config.ackWaitMs, 'ackWaitMs');
  positive(config.maxDeliver, 'maxDeliver');
  positive(config.maxMsgs, 'maxMsgs');
  positive(config.maxMsgBytes, 'maxMsgBytes');
  if (config.replicas !== undefined && config.replicas !== 1) throw new AdapterError('invalid-input', 'replicas must be 1');
}

function receiptFromAck(ack: PubAck, expectedStream: string): PublishReceipt {
  // The server enforces expect.streamName; this check is what makes `stored` mean "stored in
  // the expected stream" even if a future server or proxy answered otherwise.
  if (ack.stream !== expectedStream) return { receipt: 'rejected', detail: `stored in ${ack.stream}, expected ${expectedStream} (seq ${ack.seq})` };
  return ack.duplicate ? { receipt: 'already-stored', detail: `${ack.stream} seq ${ack.seq}` } : { receipt: 'stored', detail: `${ack.stream} seq ${ack.seq}` };
}

/**
 * No responders is not a refusal: nothing stored the message, but nothing said it never will.
 * A stream stops listening while its server shuts down or restarts, and a stream that is really
 * gone is the durability check's finding (which closes the affected operations), so the
 * publication stays pending reconciliation and is sent again under the same identity.
 */
function receiptFromFailure(failure: NatsFailure, error: unknown, stored?: { stream: string; bytes: number }): PublishReceipt {
  const receiptByKind: Record<NatsFailure['kind'], DeliveryReceipt> = {
    permission: 'rejected',
    'no-responders': 'unknown',
    api: 'rejected',
    'not-sent': 'rejected',
    invalid: 'rejected',
    'too-large': 'rejected',
    uncertain: 'unknown',
  };
  const detail = failure.kind === 'no-responders' ? `no stream answered for the subject (${failure.detail})` : failure.detail;
  const receipt: PublishReceipt = { receipt: receiptByKind[failure.kind], detail };
  // A message past max_payload or malformed is never carried: the publisher is told so in a typed refusal, not a string.
  if (failure.kind === 'too-large' || failure.kind === 'invalid') receipt.refusal = toAdapterError(error, 'publishing');
  // So is one its stream answers it stores no message this large: the same message meets the same max_msg_size on every attempt.
  if (failure.kind === 'api' && failure.code === streamMessageTooLarge && stored !== undefined) {
    const limit = `the message is ${stored.bytes} bytes (payload and headers); the stream ${stored.stream} takes at most its max_msg_size`;
    receipt.refusal = new AdapterError('invalid-input', `publishing: ${limit}: ${failure.detail}`, { cause: error });
  }
  return receipt;
}

/**
 * `replyable` is false for messages a durable stream captures: their reply subject is the
 * publisher's PubAck inbox, not an application request, and answering it would forge a storage
 * acknowledgment.
 */
function inboundFromMsg(nc: NatsConnection, msg: Msg, replyable: boolean): InboundMessage {
  return new CoreInbound(nc, msg, replyable && msg.reply !== undefined && msg.reply !== '' ? msg.reply : undefined);
}

/**
 * A core message as the runtime sees it. A class, not an object literal: a literal with a getter
 * and closures is built by the engine's slow generic path, about a microsecond per message.
 */
class CoreInbound implements InboundMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly redelivered = false;
  readonly replyTo?: string;
  readonly respond?: (data: Uint8Array) => Promise<void>;
  private decodedHeaders: Record<string, string> | undefined;

  constructor(
    nc: NatsConnection,
    private readonly msg: Msg,
    replyTo: string | undefined,
  ) {
    this.subject = msg.subject;
    this.data = msg.data;
    if (replyTo !== undefined) {
      this.replyTo = replyTo;
      this.respond = async (data: Uint8Array) => {
        // nats.js writes a reply through the protocol, not the connection: on a closed one it is dropped without a word.
        if (nc.isClosed()) throw new AdapterError('unavailable', `could not reply to ${msg.subject}: the connection is closed`);
        let replied: boolean;
        try {
          replied = msg.respond(data);
        } catch (error) {
          // A reply past max_payload is refused for good (invalid-input); a closed connection is unavailable.
          throw toAdapterError(sendFailure(nc, error, data.length), `replying to ${msg.subject}`);
        }
        if (!replied) throw new AdapterError('unavailable', `could not reply to ${msg.subject}`);
      };
    }
  }

  // Decoded on first read (see JsInbound).
  get headers(): Record<string, string> {
    return (this.decodedHeaders ??= fromNatsHeaders(this.msg.headers));
  }

  async ack(): Promise<void> {}

  async nak(): Promise<void> {}
}

export class NatsTransport implements Transport {
  readonly capabilities: TransportCapabilities;
  readonly identity: string;
  private readonly durable: DurableConfig | undefined;
  private readonly layout: DurableLayout | undefined;
  private readonly ownsConnection: boolean;
  private readonly js: JetStreamClient;
  private readonly pubAcks: PubAckMux;
  private readonly publishAckTimeoutMs: number;
  private jsm: Promise<JetStreamManager> | undefined;
  /** Each stream's creation time when this transport first verified it (checkDurableStreams). */
  private readonly seenCreated = new Map<string, string>();
  /** The consumers this transport provisioned (ensureDurableConsumer), keyed stream/durable: the ones its durability check repairs. */
  private readonly owned = new Map<string, OwnedConsumer>();
  private readonly health: ConsumerHealthState | undefined;
  private readonly nowMs: () => number;
  private readonly onHandlerError: ((subject: string, error: unknown) => void) | undefined;
  /**
   * When the owned consumers are read next (checkDurability): at the first check, at once after a
   * reconnect (a broker restart is when a consumer can be left ahead or starved), and otherwise
   * once per ack wait — enough to see a starvation over two ack waits, without reading every
   * consumer at every check: on nats-server 2.9 a filtered consumer's info counts its pending
   * messages, and the JetStream API it shares with the store and the peers slows down for all.
   */
  private consumersDueAtMs = 0;
  private readonly subscriptions = new Set<Subscription>();
  private closed = false;

  constructor(
    private readonly nc: NatsConnection,
    options: NatsTransportOptions,
  ) {
    if (options.durable !== undefined) validateDurableConfig(options.durable);
    this.identity = options.identity;
    this.durable = options.durable;
    this.layout = options.durable === undefined ? undefined : durableLayout(options.durable.namespace, options.durable.peers);
    this.ownsConnection = options.ownsConnection ?? false;
    this.capabilities = { durable: options.durable !== undefined, resultFencing: true };
    this.publishAckTimeoutMs = options.publishAckTimeoutMs ?? publishAckTimeoutMsDefault;
    this.js = jetstream(nc, { timeout: this.publishAckTimeoutMs });
    this.pubAcks = PubAckMux.of(nc);
    this.nowMs = options.nowMs ?? Date.now;
    this.onHandlerError = options.onHandlerError;
    this.health =
      options.durable === undefined
        ? undefined
        : { owned: () => [...this.owned.values()], watch: new StarvationWatch(options.durable.ackWaitMs, this.nowMs), lastSeqSeen: new Map() };
    if (options.durable !== undefined) void this.watchReconnects();
  }

  private async watchReconnects(): Promise<void> {
    try {
      for await (const status of this.nc.status()) if (status.type === 'reconnect') this.consumersDueAtMs = 0;
    } catch {
      // The connection closed: nothing to check any more.
    }
  }

  /** Opens a connection the transport owns (close() closes it). */
  static async connect(connectOptions: NatsConnectOptions, options: NatsTransportOptions): Promise<NatsTransport> {
    const nc = await connectNats(connectOptions);
    return new NatsTransport(nc, { ...options, ownsConnection: true });
  }

  async publish(subject: string, data: Uint8Array, options: PublishOptions = {}): Promise<PublishReceipt> {
    if (this.closed) return { receipt: 'rejected', detail: 'transport is closed' };
    // A best-effort transport ignores expectStream, as the memory bus does: its `sent` receipt
    // already says nothing was stored.
    const stream = this.layout === undefined ? undefined : (options.expectStream ?? this.layout.streamFor(subject));
    return stream === undefined ? this.publishCore(subject, data, options) : this.publishDurable(subject, data, options, stream);
  }

  async subscribe(pattern: string, handler: MessageHandler, options: SubscribeOptions = {}): Promise<Subscription> {
    if (this.closed) throw new AdapterError('unavailable', 'transport is closed');
    const inner =
      options.durable === undefined ? await this.subscribeCore(pattern, handler, options.queue) : await this.subscribeDurable(pattern, handler, options);
    const tracked: Subscription = {
      close: async () => {
        this.subscriptions.delete(tracked);
        await inner.close();
      },
    };
    this.subscriptions.add(tracked);
    return tracked;
  }

  async request(subject: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    if (this.closed) throw new AdapterError('unavailable', 'transport is closed');
    // Checked before sending: nats.js would refuse it with a generic argument error, naming no size.
    const tooLarge = pastMaxPayload(this.nc, data.length);
    if (tooLarge !== undefined) throw toAdapterError(tooLarge, `request on ${subject}`);
    try {
      return (await this.nc.request(subject, data, { timeout: timeoutMs })).data;
    } catch (error) {
      throw toAdapterError(sendFailure(this.nc, error, data.length), `request on ${subject}`);
    }
  }

  /**
   * Waits until JetStream answers a stream-info request on one of this namespace's streams (a
   * stream not found is an answer): a server still starting has no responder on its API yet.
   */
  async awaitJetStream(startup: StartupWait): Promise<void> {
    const config = this.requireDurable('awaitJetStream');
    // Its own short request timeout: a request sent while the connection is re-established waits it out.
    const jsm = await jetstreamManager(this.nc, { checkAPI: false, timeout: limits.natsStartupProbeMsMax });
    const answer = () => durableStreamsAnswer(jsm, config).catch((error: unknown) => Promise.reject(toAdapterError(error, `JetStream (${config.namespace})`)));
    await retryWhileStarting(`JetStream (${config.namespace})`, answer, jetStreamNotAnswering, startup);
  }

  /** Creates (or verifies) the streams of every configured peer; needs stream-create permission. */
  async ensureStreams(): Promise<void> {
    const config = this.requireDurable('ensureStreams');
    await ensureDurableStreams(await this.manager(), this.js, config);
  }

  async checkDurability(): Promise<DurabilityCheck> {
    if (this.durable === undefined) return { ok: false, description: 'core NATS transport: no durable streams' };
    if (this.closed) return { ok: false, description: 'transport is closed' };
    const nowMs = this.nowMs();
    const withConsumers = this.owned.size > 0 && nowMs >= this.consumersDueAtMs;
    const check = await checkDurableStreams(await this.manager(), this.durable, this.seenCreated, withConsumers ? this.health : undefined);
    // A check that could not read everything leaves the consumers due.
    if (withConsumers && (check.ok || check.brokenNamespaces !== undefined)) this.consumersDueAtMs = nowMs + this.durable.ackWaitMs;
    return check;
  }

  /** When this namespace's streams, as the last durability check verified them, were created at the latest (StreamContinuity). */
  streamsCreatedUntilMs(): number | undefined {
    return this.durable === undefined ? undefined : streamsCreatedUntilMs(this.durable, this.seenCreated);
  }

  /** Why the peers' streams were created after `createdUntilMs` (or are gone), as verified (streamsRecreatedSince); undefined if not. */
  async streamsRecreatedSince(peers: readonly string[], createdUntilMs: number): Promise<string | undefined> {
    const config = this.requireDurable('streamsRecreatedSince');
    return streamsRecreatedSince(await this.manager(), config.namespace, peers, createdUntilMs, this.seenCreated);
  }

  /**
   * Creates or updates a durable consumer to the declared config (provisioning), on every stream
   * the pattern spans. The transport owns it from then on: its durability check recreates it when
   * it is found ahead of its stream or starved (nats-consumer-health.ts).
   */
  async ensureDurableConsumer(pattern: string, durable: string): Promise<void> {
    const ctx = await this.context();
    for (const route of this.routesOf(pattern)) {
      await ensureConsumer(ctx, route.stream, durable, route.filter);
      this.owned.set(`${route.stream}/${durable}`, { stream: route.stream, durable, filter: route.filter });
    }
  }

  /** Provisions a peer's request and cancel consumers, which the peer then binds without create permission. */
  async provisionPeerConsumers(peerId: string): Promise<void> {
    const namespace = this.requireDurable('provisionPeerConsumers').namespace;
    for (const kind of ['request', 'cancel'] as const satisfies readonly PeerConsumerKind[]) {
      await this.ensureDurableConsumer(peerConsumerFilter(namespace, peerId, kind), peerConsumerName(peerId, kind));
    }
  }

  /** Closes every subscription (pull consumers stop, core subscriptions drain), then an owned connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close().catch(() => {})));
    if (this.ownsConnection && !this.nc.isClosed()) await this.nc.drain().catch(() => this.nc.close());
  }

  private publishCore(subject: string, data: Uint8Array, options: PublishOptions): PublishReceipt {
    // No deduplication without a stream; the id still travels for diagnostics and reconciliation.
    let headers: MsgHdrs | undefined;
    try {
      headers = toNatsHeaders(options.msgId === undefined ? options.headers : { ...options.headers, [wireHeaders.msgId]: options.msgId });
      this.nc.publish(subject, data, { headers });
      return { receipt: 'sent' };
    } catch (error) {
      // nc.publish throws only before writing (closed, draining, bad subject or header, payload too big).
      const failure = sendFailure(this.nc, error, messageBytes(data, headers));
      return receiptFromFailure(classifyNatsError(failure, true), failure);
    }
  }

  private async publishDurable(subject: string, data: Uint8Array, options: PublishOptions, stream: string): Promise<PublishReceipt> {
    const publishOptions: PubAckPublishOptions = { expect: { streamName: stream }, timeout: this.publishAckTimeoutMs };
    if (options.msgId !== undefined) publishOptions.msgID = options.msgId;
    // Only a check before sending proves nothing was sent; a close during the wait proves nothing.
    if (this.nc.isClosed() || this.nc.isDraining()) return { receipt: 'rejected', detail: 'connection is closed' };
    try {
      // A header refused here (a name or value nats.js would refuse) is the same lasting refusal as one refused in the client.
      const headers = toNatsHeaders(options.headers);
      if (headers !== undefined) publishOptions.headers = headers;
    } catch (error) {
      return receiptFromFailure(classifyNatsError(error, true), error);
    }
    try {
      return receiptFromAck(await this.pubAcks.publish(subject, data, publishOptions), stream);
    } catch (error) {
      return receiptFromFailure(classifyNatsError(error), error, { stream, bytes: messageBytes(data, publishOptions.headers) });
    }
  }

  /**
   * Resolves only after a flush round trip: the server has processed the SUB before the PONG,
   * so the registration is in place before the caller publishes requests (spec: result
   * subscriptions before any request), and a subscribe permission violation has already closed
   * the subscription by then.
   */
  private async subscribeCore(pattern: string, handler: MessageHandler, queue: string | undefined): Promise<Subscription> {
    const deliver = (message: InboundMessage) =>
      void Promise.resolve()
        .then(() => handler(message))
        .catch((error: unknown) => {
          try {
            this.onHandlerError?.(message.subject, error);
          } catch {
            // The report itself failed: nothing is left to tell it to.
          }
        });
    try {
      const replyable = (subject: string) => this.layout?.streamFor(subject) === undefined;
      const sub = this.nc.subscribe(pattern, {
        queue,
        callback: (error, msg) => (error ? undefined : deliver(inboundFromMsg(this.nc, msg, replyable(msg.subject)))),
      });
      await this.nc.flush();
      if (sub.isClosed()) throw (await sub.closed) ?? new AdapterError('unavailable', `subscription to ${pattern} closed`);
      return { close: () => sub.drain().catch(() => {}) };
    } catch (error) {
      throw toAdapterError(error, `subscribing to ${pattern}`);
    }
  }

  private async subscribeDurable(pattern: string, handler: MessageHandler, options: SubscribeOptions): Promise<Subscription> {
    const durable = options.durable;
    if (durable === undefined) throw new AdapterError('invalid-input', 'a durable subscription needs a consumer name');
    // Pull consumers already share work between every subscriber bound to the same durable:
    // that is the queue group of durable mode, so `queue` adds nothing here. A pattern spanning
    // several peers' streams binds the same-named consumer on each.
    const ctx = await this.context();
    const bound: Subscription[] = [];
    try {
      for (const route of this.routesOf(pattern)) {
        bound.push(await subscribeDurable(ctx, { stream: route.stream, durable, filter: route.filter, handler, onExhausted: options.onExhausted }));
      }
    } catch (error) {
      await Promise.all(bound.map((s) => s.close().catch(() => undefined)));
      throw error;
    }
    return { close: async () => void (await Promise.all(bound.map((s) => s.close()))) };
  }

  private routesOf(pattern: string): DurableRoute[] {
    const namespace = this.requireDurable('a durable consumer').namespace;
    const routes = this.layout?.routesFor(pattern) ?? [];
    if (routes.length === 0)
      throw new AdapterError(
        'invalid-input',
        `${pattern} is not inside a durable stream of ${namespace} (for the peers ${this.layout?.peers.join(', ') || 'none'})`,
      );
    return routes;
  }

  private requireDurable(what: string): DurableConfig {
    if (this.durable === undefined) throw new AdapterError('unsupported', `${what} needs a durable NATS transport (DurableConfig)`);
    return this.durable;
  }

  private manager(): Promise<JetStreamManager> {
    // checkAPI: false — the account-info probe needs $JS.API.INFO, which peers are not granted.
    this.jsm ??= jetstreamManager(this.nc, { checkAPI: false });
    return this.jsm;
  }

  private async context(): Promise<JetStreamContext> {
    return { nc: this.nc, js: this.js, jsm: await this.manager(), config: this.requireDurable('a durable consumer') };
  }
}
