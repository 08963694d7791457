/**
 * The Transport interface: subject-addressed messages with publish permissions enforced by the
 * broker (or, in memory mode, by the in-process bus exactly as NATS would).
 *
 * Implementations: memory (in-process), nats (core NATS and JetStream).
 */
import type { AdapterError } from '../../contract/errors.js';
import type { DeliveryReceipt } from '../../events/types.js';

export interface InboundMessage {
  /** The subject the broker delivered on: verification reads the peer token from here, never from the body. */
  subject: string;
  data: Uint8Array;
  headers: Record<string, string>;
  /** True when a durable consumer delivers this message again. */
  redelivered: boolean;
  /**
   * Acknowledge (durable consumers); a no-op on best-effort subscriptions. Resolves once the ack
   * is handed to the connection, not when the broker confirms it: an ack can be lost, and a lost
   * ack means one redelivery, so a handler must ack only after its outcome is stored and must
   * answer a redelivery from that stored outcome.
   */
  ack(): Promise<void>;
  /** Ask for redelivery (durable consumers); a no-op on best-effort subscriptions. */
  nak(delayMs?: number): Promise<void>;
  /** The subject `respond` publishes to; absent when the sender asked for no reply. */
  replyTo?: string;
  /** Reply to a request (request/reply subjects); absent when the sender asked for no reply. */
  respond?(data: Uint8Array): Promise<void>;
}

export interface PublishOptions {
  /** Stable native message id (JetStream Nats-Msg-Id): the publication identity. */
  msgId?: string;
  headers?: Record<string, string>;
  /** Durable publish: wait for a storage acknowledgment from this stream. */
  expectStream?: string;
}

export interface PublishReceipt {
  receipt: DeliveryReceipt;
  detail?: string;
  /**
   * With `rejected`: the message itself is refused, and every later attempt would be too
   * (invalid-input: larger than the broker carries or than the stream capturing it stores, or
   * malformed — a subject or header the client refuses). Absent when the refusal may not last.
   */
  refusal?: AdapterError;
}

/** A message that reached the broker's delivery limit (spec: exhaustion is observed, not a new branch). */
export interface ExhaustedInfo {
  /** The exhausted message's subject; '' when the transport could not learn it. */
  subject: string;
  /** The durable stream that holds it. */
  stream: string;
  /** Its position in that stream. */
  streamSeq: number;
  /** Deliveries made before the broker stopped. */
  deliveries: number;
}

export interface SubscribeOptions {
  /** Durable consumer name (durable transports); best-effort subscription when absent. */
  durable?: string;
  /** Queue group for load-shared receivers. */
  queue?: string;
  /**
   * Durable subscriptions: called when a message exhausts its deliveries. It is not delivered
   * again; the runtime decides retry or failure by the application attempt budget.
   */
  onExhausted?: (info: ExhaustedInfo) => void;
}

export interface Subscription {
  close(): Promise<void>;
}

export type MessageHandler = (message: InboundMessage) => void | Promise<void>;

/**
 * Whether the durable streams keep their guarantee. `brokenNamespaces` names the namespaces whose
 * streams provably break it (missing, or reconfigured against it); a check that merely could not
 * verify (broker unreachable) is not ok but names none.
 */
export type DurabilityCheck = ({ ok: true } | { ok: false; description: string; brokenNamespaces?: string[] }) & {
  /** Consumers the check found broken and recreated (nats-consumer-health.ts), one line each, for the log. */
  repaired?: string[];
};

/**
 * The continuity of durable streams across the life of an operation (nats-streams.ts): admission
 * records when the namespace's streams, as last verified, were created; an operation resumed
 * later (a restart, another coordinator) whose peers' streams were created after that was
 * admitted before a recreation, so the work those streams held for it may be gone, whatever
 * anchor the new streams carry.
 */
export interface StreamContinuity {
  /** The latest creation instant (the broker's clock, ms) of the namespace's streams as last verified; undefined when not known. */
  createdUntilMs(namespace: string): number | undefined;
  /** Why the peers' streams cannot have kept work admitted when they were created until `createdUntilMs` (one was created later, or is gone), or undefined. */
  lostSince(namespace: string, peers: readonly string[], createdUntilMs: number): Promise<string | undefined>;
}

export interface TransportCapabilities {
  /** Storage acknowledgments, redelivery and offline peers. */
  durable: boolean;
  /**
   * Result fencing: every request carries its branch, attempt and fence, and results come back
   * on peer-bearing subjects carrying them, so a result of a superseded attempt is told apart and
   * rejected. Advertised separately from effect fencing (EffectSink.capabilities), which is the
   * peer's business: a transport can fence results without any effect being fenced.
   */
  resultFencing: boolean;
  /**
   * The in-process bus: its messages are lost only with the process that also holds the
   * coordinator and the peers (src/runtime/mode.ts: with a durable store this is not memory mode).
   */
  inProcess?: boolean;
}

export interface Transport {
  readonly capabilities: TransportCapabilities;
  /** The identity this connection authenticated as (a NATS user; a bus connection name). */
  readonly identity: string;
  publish(subject: string, data: Uint8Array, options?: PublishOptions): Promise<PublishReceipt>;
  /** Resolves only when the subscription is registered with the broker (spec: results before requests). */
  subscribe(pattern: string, handler: MessageHandler, options?: SubscribeOptions): Promise<Subscription>;
  /** Request/reply (commands over NATS). */
  request?(subject: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array>;
  /** Durable transports: verifies the live broker configuration; uncertainty reports not ok. */
  checkDurability?(): Promise<DurabilityCheck>;
  close(): Promise<void>;
}
