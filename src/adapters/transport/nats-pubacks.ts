/**
 * JetStream publishes whose PubAcks come back on one subscription per connection.
 *
 * `js.publish` in nats.js is a full request per message: a request object with its own deferred
 * and timer, and after the answer a cancellation that builds an Error (with a captured stack)
 * that nobody reads. On a busy coordinator that was the single largest library cost. This mux
 * publishes with a reply subject under one wildcard inbox subscription, keeps the waiting
 * publishes in a map by token, and times them out with one sweep timer.
 *
 * It answers exactly what `js.publish` answers, and fails with the same error classes, so
 * classifyNatsError and isWrongSequence read both alike:
 * - a PubAck → resolved (`stream`, `seq`, `duplicate`);
 * - a JetStream API error response → JetStreamApiError (the server did not store);
 * - a 503 status with no body → NoRespondersError (no stream captured the subject);
 * - the server's publish permission violation for this subject → PermissionViolationError,
 *   matched to the oldest waiting publish on that subject, as nats.js matches its requests;
 * - a message past the server's max_payload → PayloadTooLarge (invalid-input), before anything is
 *   written (nats.js names no size: the mux does);
 * - no answer within the timeout, the connection closing while waiting, or the PubAck
 *   subscription being lost → TimeoutError / ClosedConnectionError / ProtocolError: nothing
 *   proven either way.
 */
import { JetStreamApiError, type PubAck } from '@nats-io/jetstream';
import { createInbox, errors, MsgHdrsImpl, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { setHeader } from './nats-codec.js';
import { messageBytes, sendFailure } from './nats-errors.js';

export interface PubAckPublishOptions {
  msgID?: string;
  expect?: { streamName?: string; lastSubjectSequence?: number };
  headers?: MsgHdrs;
  /** How long to wait for the PubAck (ms). */
  timeout: number;
}

interface Waiting {
  subject: string;
  deadlineMs: number;
  resolve: (ack: PubAck) => void;
  reject: (error: Error) => void;
}

/** How often waiting publishes are checked for their timeout. */
const sweepMs = 50;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

const byConnection = new WeakMap<NatsConnection, PubAckMux>();

export class PubAckMux {
  private readonly waiting = new Map<string, Waiting>();
  private sub: Subscription | undefined;
  private inbox = '';
  private nextToken = 0;
  private sweeper: ReturnType<typeof setInterval> | undefined;
  private watching = false;
  /** Disconnects and reconnects seen since the first publish. */
  private breaks = 0;

  private constructor(private readonly nc: NatsConnection) {}

  /** The connection's mux (one subscription per connection, shared by every publisher on it). */
  static of(nc: NatsConnection): PubAckMux {
    let mux = byConnection.get(nc);
    if (!mux) {
      mux = new PubAckMux(nc);
      byConnection.set(nc, mux);
    }
    return mux;
  }

  publish(subject: string, data: Uint8Array | string, options: PubAckPublishOptions): Promise<PubAck> {
    let token: string;
    const h = options.headers ?? new MsgHdrsImpl();
    try {
      if (options.msgID !== undefined) setHeader(h, 'Nats-Msg-Id', options.msgID);
      if (options.expect?.streamName !== undefined) setHeader(h, 'Nats-Expected-Stream', options.expect.streamName);
      if (options.expect?.lastSubjectSequence !== undefined) setHeader(h, 'Nats-Expected-Last-Subject-Sequence', String(options.expect.lastSubjectSequence));
      const reply = this.replySubject();
      token = reply.slice(this.inbox.length);
      this.nc.publish(subject, data, { reply, headers: h });
    } catch (error) {
      // Thrown before anything was written: a header with CR/LF, closed or draining connection, bad subject, payload too big (PayloadTooLarge).
      const bytes = messageBytes(typeof data === 'string' ? encoder.encode(data) : data, h);
      return Promise.reject(sendFailure(this.nc, error, bytes) as Error);
    }
    return new Promise<PubAck>((resolve, reject) => {
      this.waiting.set(token, { subject, deadlineMs: Date.now() + options.timeout, resolve, reject });
      this.sweeper ??= setInterval(() => this.sweep(), sweepMs);
    });
  }

  /**
   * How many times the connection was seen to drop or come back since this mux's first publish: a
   * sequence a PubAck gave before a break may have been lost by a restarted server and reused since.
   */
  get connectionBreaks(): number {
    return this.breaks;
  }

  private replySubject(): string {
    if (this.sub === undefined || this.sub.isClosed()) this.listen();
    return `${this.inbox}${(this.nextToken++).toString(36)}`;
  }

  private listen(): void {
    const prefix = (this.nc as NatsConnection & { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
    this.inbox = `${createInbox(prefix)}.`;
    this.sub = this.nc.subscribe(`${this.inbox}*`, { callback: (error, msg) => (error ? this.inboxLost(error) : this.answer(msg)) });
    if (!this.watching) {
      this.watching = true;
      void this.watchStatus();
      void this.nc.closed().then(() => this.failAll(new errors.ClosedConnectionError()));
    }
  }

  private answer(msg: Msg): void {
    const token = msg.subject.slice(this.inbox.length);
    const entry = this.waiting.get(token);
    if (!entry) return; // timed out already: its receipt stays unknown
    this.waiting.delete(token);
    if (msg.data.length === 0 && msg.headers?.code === 503) return entry.reject(new errors.NoRespondersError(entry.subject));
    let response: PubAck & { error?: ConstructorParameters<typeof JetStreamApiError>[0] };
    try {
      response = JSON.parse(decoder.decode(msg.data)) as typeof response;
    } catch (error) {
      return entry.reject(new errors.ProtocolError(`unreadable PubAck for ${entry.subject}: ${(error as Error).message}`));
    }
    if (response.error) return entry.reject(new JetStreamApiError(response.error));
    if (typeof response.stream !== 'string' || response.stream === '' || !Number.isSafeInteger(response.seq))
      return entry.reject(new errors.ProtocolError(`invalid PubAck for ${entry.subject}`));
    response.duplicate = response.duplicate === true;
    entry.resolve(response);
  }

  /** The server reports a denied publish asynchronously, naming only its subject. */
  private async watchStatus(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type === 'disconnect' || status.type === 'reconnect') this.breaks++;
      if (status.type !== 'error' || !(status.error instanceof errors.PermissionViolationError)) continue;
      // A denied subscription of the mux reaches its callback (nats.js closes it with the error).
      const denied = status.error;
      if (denied.operation !== 'publish') continue;
      for (const [token, entry] of this.waiting) {
        if (entry.subject !== denied.subject) continue;
        this.waiting.delete(token);
        entry.reject(denied);
        break;
      }
    }
  }

  private sweep(): void {
    const now = Date.now();
    for (const [token, entry] of this.waiting) {
      if (entry.deadlineMs > now) continue;
      this.waiting.delete(token);
      entry.reject(new errors.TimeoutError());
    }
    if (this.waiting.size === 0 && this.sweeper !== undefined) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  /**
   * The PubAck subscription failed (denied, or closed by the server). The publishes waiting on it
   * may well be stored — only their answers are lost — so they fail as uncertain, never with the
   * subscription's permission error, which would read as "not stored".
   */
  private inboxLost(error: Error): void {
    this.failAll(new errors.ProtocolError(`the PubAck inbox ${this.inbox}* was lost (${error.message}): storage unknown`));
  }

  private failAll(error: Error): void {
    const entries = [...this.waiting.values()];
    this.waiting.clear();
    for (const entry of entries) entry.reject(error);
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
    // A closed subscription is replaced on the next publish.
  }
}
