/**
 * The in-process transport: a message bus with NATS semantics (subjects, `*`/`>` wildcards,
 * queue groups, request/reply, per-connection publish and subscribe permissions). It is the
 * embedded default's transport, not a mock: a connection bound to peer alfa can publish only
 * what its permissions allow, exactly as a NATS user would, so result verification means the
 * same thing here as on a real server. Best-effort delivery: no storage, no offline promise.
 */
import { AdapterError } from '../../contract/errors.js';
import { subjectMatches, tokensMatchSubject } from './subjects.js';
import type { InboundMessage, MessageHandler, PublishOptions, PublishReceipt, SubscribeOptions, Subscription, Transport } from './types.js';

export interface BusPermissions {
  publish?: string[];
  subscribe?: string[];
}

interface BusSubscription {
  pattern: string;
  tokens: string[];
  queue: string | undefined;
  handler: MessageHandler;
  connection: MemoryTransport;
}

/** Ack and nak of a best-effort delivery: nothing to do. */
const settled = async (): Promise<void> => {};

export class MemoryBus {
  /**
   * Subscriptions to a literal subject (reply inboxes, mostly) by that subject, found with one
   * lookup; wildcard subscriptions are matched one by one. Matching every subscription, one
   * inbox per request in flight included, was most of the bus's cost per message.
   */
  private readonly literal = new Map<string, Set<BusSubscription>>();
  private readonly wildcards = new Set<BusSubscription>();
  private inboxSeq = 0;
  private queueCursor = 0;
  /** Messages published and dropped (no permission / no subscriber), for diagnostics. */
  readonly stats = { published: 0, delivered: 0, denied: 0 };

  connect(identity: string, permissions: BusPermissions = {}): MemoryTransport {
    return new MemoryTransport(this, identity, permissions);
  }

  /** @internal */
  add(sub: BusSubscription): void {
    if (sub.tokens.some((t) => t === '*' || t === '>')) this.wildcards.add(sub);
    else {
      const subs = this.literal.get(sub.pattern);
      if (subs) subs.add(sub);
      else this.literal.set(sub.pattern, new Set([sub]));
    }
  }

  /** @internal */
  remove(sub: BusSubscription): void {
    if (this.wildcards.delete(sub)) return;
    const subs = this.literal.get(sub.pattern);
    if (subs?.delete(sub) && subs.size === 0) this.literal.delete(sub.pattern);
  }

  /** @internal */
  newInbox(): string {
    return `_INBOX.${++this.inboxSeq}`;
  }

  /** @internal Routes one message: every plain subscriber, one member per queue group. */
  route(subject: string, data: Uint8Array, headers: Record<string, string>, replyTo?: string): number {
    let groups: Map<string, BusSubscription[]> | undefined;
    const targets: BusSubscription[] = [];
    const take = (sub: BusSubscription) => {
      if (sub.queue === undefined) targets.push(sub);
      else {
        groups ??= new Map();
        const members = groups.get(sub.queue);
        if (members) members.push(sub);
        else groups.set(sub.queue, [sub]);
      }
    };
    const exact = this.literal.get(subject);
    if (exact) for (const sub of exact) take(sub);
    for (const sub of this.wildcards) if (tokensMatchSubject(sub.tokens, subject)) take(sub);
    if (groups) {
      for (const members of groups.values()) {
        const member = members[this.queueCursor++ % members.length];
        if (member !== undefined) targets.push(member);
      }
    }
    for (const sub of targets) {
      // Plain literals of one of two shapes: spreading an optional part in took the engine's slow path.
      const message: InboundMessage =
        replyTo === undefined
          ? { subject, data, headers, redelivered: false, ack: settled, nak: settled }
          : {
              subject,
              data,
              headers,
              redelivered: false,
              ack: settled,
              nak: settled,
              replyTo,
              respond: async (reply: Uint8Array) => void sub.connection.publish(replyTo, reply),
            };
      queueMicrotask(() => {
        this.stats.delivered++;
        void Promise.resolve()
          .then(() => sub.handler(message))
          .catch(() => {});
      });
    }
    return targets.length;
  }
}

export class MemoryTransport implements Transport {
  readonly capabilities = { durable: false, resultFencing: true, inProcess: true } as const;
  private readonly subs = new Set<BusSubscription>();
  private closed = false;
  /** The publish allow-list split into tokens once; null when everything is allowed. */
  private publishTokens: string[][] | null | undefined;

  constructor(
    private readonly bus: MemoryBus,
    readonly identity: string,
    private readonly permissions: BusPermissions,
  ) {}

  canPublish(subject: string): boolean {
    const allow = (this.publishTokens ??= this.permissions.publish?.map((p) => p.split('.')) ?? null);
    return allow === null || allow.some((tokens) => tokensMatchSubject(tokens, subject));
  }

  async publish(subject: string, data: Uint8Array, options: PublishOptions = {}): Promise<PublishReceipt> {
    return this.send(subject, data, options.headers ?? {});
  }

  async subscribe(pattern: string, handler: MessageHandler, options: SubscribeOptions = {}): Promise<Subscription> {
    if (this.closed) throw new AdapterError('unavailable', 'connection is closed');
    const allow = this.permissions.subscribe;
    if (allow !== undefined && !allow.some((p) => subjectMatches(p, pattern) || p === pattern)) {
      throw new AdapterError('denied', `${this.identity} may not subscribe to ${pattern}`);
    }
    const sub: BusSubscription = { pattern, tokens: pattern.split('.'), queue: options.queue, handler, connection: this };
    this.bus.add(sub);
    this.subs.add(sub);
    return {
      close: async () => {
        this.bus.remove(sub);
        this.subs.delete(sub);
      },
    };
  }

  async request(subject: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    const inbox = this.bus.newInbox();
    return new Promise<Uint8Array>((resolve, reject) => {
      const sub: BusSubscription = {
        pattern: inbox,
        tokens: inbox.split('.'),
        queue: undefined,
        connection: this,
        handler: (m) => {
          clearTimeout(timer);
          this.bus.remove(sub);
          resolve(m.data);
        },
      };
      const timer = setTimeout(() => {
        this.bus.remove(sub);
        reject(new AdapterError('unavailable', `no reply on ${subject} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.bus.add(sub);
      const receipt = this.send(subject, data, {}, inbox);
      if (receipt.receipt === 'rejected') {
        clearTimeout(timer);
        this.bus.remove(sub);
        reject(new AdapterError(receipt.detail?.includes('permission') ? 'denied' : 'unavailable', receipt.detail));
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const sub of this.subs) this.bus.remove(sub);
    this.subs.clear();
  }

  private send(subject: string, data: Uint8Array, headers: Record<string, string>, replyTo?: string): PublishReceipt {
    if (this.closed) return { receipt: 'rejected', detail: 'connection is closed' };
    if (!this.canPublish(subject)) {
      this.bus.stats.denied++;
      return { receipt: 'rejected', detail: `permission violation: ${this.identity} may not publish to ${subject}` };
    }
    this.bus.stats.published++;
    const delivered = this.bus.route(subject, data, headers, replyTo);
    if (replyTo !== undefined && delivered === 0) return { receipt: 'rejected', detail: `no responders on ${subject}` };
    return { receipt: 'sent' };
  }
}
