/**
 * The coordinator's transport over one NATS connection: core NATS for commands, a durable
 * transport per namespace for the subjects its streams capture.
 */
import { NatsTransport } from '../../adapters/transport/nats.js';
import { durableLayout, type DurableLayout } from '../../adapters/transport/nats-names.js';
import type {
  DurabilityCheck,
  MessageHandler,
  PublishOptions,
  PublishReceipt,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportCapabilities,
} from '../../adapters/transport/types.js';

/**
 * One connection, several namespaces: a subject a namespace's durable streams capture goes
 * through that namespace's durable transport; everything else (commands) through core NATS.
 */
export class NatsDeploymentTransport implements Transport {
  readonly capabilities: TransportCapabilities;
  readonly identity: string;
  private readonly routes: { layout: DurableLayout; transport: Transport }[];

  constructor(
    private readonly core: NatsTransport,
    durable: Map<string, Transport>,
  ) {
    this.identity = core.identity;
    this.capabilities = {
      durable: durable.size > 0,
      resultFencing: core.capabilities.resultFencing && [...durable.values()].every((t) => t.capabilities.resultFencing),
    };
    // Placing a subject needs no peer list: the namespace's durable subjects have one shape.
    this.routes = [...durable].map(([namespace, transport]) => ({ layout: durableLayout(namespace, []), transport }));
  }

  publish(subject: string, data: Uint8Array, options?: PublishOptions): Promise<PublishReceipt> {
    return this.transportFor(subject).publish(subject, data, options);
  }

  subscribe(pattern: string, handler: MessageHandler, options?: SubscribeOptions): Promise<Subscription> {
    return this.transportFor(pattern).subscribe(pattern, handler, options);
  }

  request(subject: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    return this.core.request(subject, data, timeoutMs);
  }

  /** Every namespace's streams; not ok if any one is not (fail closed). */
  async checkDurability(): Promise<DurabilityCheck> {
    if (this.routes.length === 0) return { ok: false, description: 'core NATS: no durable streams' };
    const checks = await Promise.all(
      this.routes.map((r) =>
        r.transport.checkDurability ? r.transport.checkDurability() : Promise.resolve<DurabilityCheck>({ ok: false, description: 'no durability check' }),
      ),
    );
    const problems = checks.flatMap((c) => (c.ok ? [] : [c.description]));
    const broken = checks.flatMap((c) => (c.ok ? [] : (c.brokenNamespaces ?? [])));
    const repaired = checks.flatMap((c) => c.repaired ?? []);
    const repairs = repaired.length > 0 ? { repaired } : {};
    if (problems.length === 0) return { ok: true, ...repairs };
    return broken.length > 0
      ? { ok: false, description: problems.join('; '), brokenNamespaces: broken, ...repairs }
      : { ok: false, description: problems.join('; '), ...repairs };
  }

  async close(): Promise<void> {
    await Promise.all(this.routes.map((r) => r.transport.close().catch(() => undefined)));
    await this.core.close();
  }

  private transportFor(subjectOrPattern: string): Transport {
    return this.routes.find((r) => r.layout.captures(subjectOrPattern))?.transport ?? this.core;
  }
}
