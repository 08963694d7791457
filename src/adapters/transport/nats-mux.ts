/**
 * One durable consumer, many subscriptions: the coordinator and the peer SDK subscribe per
 * interaction, while durable mode provisions one filtered consumer per recipient and kind.
 */
import { unavailable } from '../../contract/errors.js';
import { coordinatorConsumerName, peerConsumerFilter, peerConsumerName, type CoordinatorConsumerKind } from './nats-names.js';
import { tokensMatchSubject } from './subjects.js';
import type {
  DurabilityCheck,
  ExhaustedInfo,
  InboundMessage,
  MessageHandler,
  PublishOptions,
  PublishReceipt,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportCapabilities,
} from './types.js';

/** A message for an interaction not (yet) subscribed is handed back this long. */
const unroutedNakDelayMs = 250;

export interface ConsumerRoute {
  /** The provisioned durable consumer that carries the pattern's messages. */
  durable: string;
  /** Its filter: every subject of the pattern, and possibly more (other interactions). */
  filter: string;
}

export interface ConsumerMuxOptions {
  onExhausted?: (durable: string, info: ExhaustedInfo) => void;
}

interface MuxGroup {
  handlers: Map<symbol, { tokens: string[]; handler: MessageHandler }>;
  subscription: Promise<Subscription> | undefined;
}

/**
 * Binds one provisioned durable consumer per route and hands each message to the subscription
 * whose pattern matches its subject. The runtime and the peer SDK subscribe per interaction; the
 * consumers are per recipient and kind (one filtered consumer per logical recipient, which is what
 * the NATS permissions can scope). A message no subscription matches yet is handed back (nak) for
 * redelivery; it counts against max_deliver like any other delivery.
 */
export class ConsumerMuxTransport implements Transport {
  private readonly groups = new Map<string, MuxGroup>();

  constructor(
    private readonly inner: Transport,
    private readonly route: (pattern: string) => ConsumerRoute | undefined,
    private readonly options: ConsumerMuxOptions = {},
  ) {}

  get capabilities(): TransportCapabilities {
    return this.inner.capabilities;
  }

  get identity(): string {
    return this.inner.identity;
  }

  publish(subject: string, data: Uint8Array, options?: PublishOptions): Promise<PublishReceipt> {
    return this.inner.publish(subject, data, options);
  }

  async request(subject: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    if (!this.inner.request) throw unavailable(`transport ${this.inner.identity} has no request/reply`);
    return this.inner.request(subject, data, timeoutMs);
  }

  checkDurability(): Promise<DurabilityCheck> {
    return this.inner.checkDurability
      ? this.inner.checkDurability()
      : Promise.resolve({ ok: false, description: `${this.inner.identity}: no durability check` });
  }

  async subscribe(pattern: string, handler: MessageHandler, options: SubscribeOptions = {}): Promise<Subscription> {
    const route = this.route(pattern);
    if (route === undefined) return this.inner.subscribe(pattern, handler, options);
    const key = `${route.durable}\u0000${route.filter}`;
    let group = this.groups.get(key);
    if (!group) {
      group = { handlers: new Map(), subscription: undefined };
      this.groups.set(key, group);
    }
    const id = Symbol(pattern);
    group.handlers.set(id, { tokens: pattern.split('.'), handler });
    try {
      await this.bind(group, route);
    } catch (error) {
      group.handlers.delete(id);
      throw error;
    }
    return { close: () => this.release(key, group, id) };
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private bind(group: MuxGroup, route: ConsumerRoute): Promise<Subscription> {
    const onExhausted = this.options.onExhausted;
    group.subscription ??= this.inner.subscribe(route.filter, (message) => this.dispatch(group, message), {
      durable: route.durable,
      ...(onExhausted ? { onExhausted: (info: ExhaustedInfo) => onExhausted(route.durable, info) } : {}),
    });
    // A failed bind is forgotten so the next subscribe tries again.
    group.subscription.catch(() => (group.subscription = undefined));
    return group.subscription;
  }

  private async release(key: string, group: MuxGroup, id: symbol): Promise<void> {
    group.handlers.delete(id);
    if (group.handlers.size > 0 || this.groups.get(key) !== group) return;
    this.groups.delete(key);
    const subscription = group.subscription;
    group.subscription = undefined;
    if (subscription) await (await subscription).close();
  }

  private dispatch(group: MuxGroup, message: InboundMessage): void | Promise<void> {
    for (const { tokens, handler } of group.handlers.values()) {
      if (tokensMatchSubject(tokens, message.subject)) return handler(message);
    }
    return message.nak(unroutedNakDelayMs);
  }
}

export const coordinatorKinds: readonly CoordinatorConsumerKind[] = ['result', 'claim', 'cancel-result'];

/** The coordinator's inbound patterns (`<ns>.<interaction>.*.<kind>.*`) go to its per-kind durable consumers. */
export function coordinatorRoute(namespace: string, coordinatorId: string): (pattern: string) => ConsumerRoute | undefined {
  const nsTokens = namespace.split('.').length;
  return (pattern) => {
    if (!pattern.startsWith(`${namespace}.`)) return undefined;
    const rest = pattern.split('.').slice(nsTokens);
    const kind = rest[2] as CoordinatorConsumerKind;
    if (rest.length !== 4 || rest[1] !== '*' || rest[3] !== '*' || !coordinatorKinds.includes(kind)) return undefined;
    return { durable: coordinatorConsumerName(coordinatorId, kind), filter: `${namespace}.*.*.${kind}.*` };
  };
}

/** A peer's per-interaction patterns (`<ns>.<interaction>.*.{request,cancel}.<peer>`) go to its provisioned consumers. */
export function peerRoute(namespace: string, peerId: string): (pattern: string) => ConsumerRoute | undefined {
  const nsTokens = namespace.split('.').length;
  return (pattern) => {
    if (!pattern.startsWith(`${namespace}.`)) return undefined;
    const rest = pattern.split('.').slice(nsTokens);
    const kind = rest[2];
    if (rest.length !== 4 || rest[1] !== '*' || rest[3] !== peerId || (kind !== 'request' && kind !== 'cancel')) return undefined;
    return { durable: peerConsumerName(peerId, kind), filter: peerConsumerFilter(namespace, peerId, kind) };
  };
}
