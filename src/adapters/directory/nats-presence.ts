/**
 * Presence on durable NATS, read from each peer's durable request consumer (nats-names.ts
 * peerConsumerName), which the coordinator provisioned and the peer binds. A peer process that
 * consumes always keeps a pull request waiting on it (nats.js `consume()` re-pulls before its
 * pulls run out), and nats-server drops a pull request as soon as the connection that made it is
 * gone (closed or killed). So:
 *
 * - a pull request waiting: **online**;
 * - nothing waiting and nothing for it to do (no pending, no unacknowledged message): **offline** —
 *   a live consumer with no work always has a pull waiting;
 * - nothing waiting while work is outstanding (a busy peer may have all its pulls filled): online if
 *   the consumer delivered since the previous observation, offline if it did not, and not observed
 *   on the first look;
 * - the consumer cannot be read (unreachable broker, not provisioned): not observed, which the
 *   offline rule treats as present. Presence is an observation, never a promise that a peer stays.
 *
 * Each peer's observation is reused for limits.presenceObservationTtlMs (concurrent admissions
 * share one API call per peer). The revision names this source (its start instant) and counts the
 * changes it has seen: it moves exactly when some peer's observed presence changed, so admissions
 * that retake their snapshot on a moved revision (coordinator.planWithinBudget) retake only then.
 */
import type { ConsumerInfo, JetStreamManager } from '@nats-io/jetstream';
import { limits } from '../../contract/limits.js';
import type { Clock } from '../../contract/clock.js';
import { durableStreamNames, peerConsumerName } from '../transport/nats-names.js';
import type { PresenceReport, PresenceSource } from './types.js';

type Observed = 'online' | 'offline' | undefined;

interface PeerObservation {
  state: Observed;
  /** The consumer's delivery count when observed: a busy peer is live while it moves. */
  deliveredSeq: number | undefined;
  observedAtMs: number;
}

export interface NatsPresenceOptions {
  /** Each namespace's peers whose request consumers were provisioned; any other peer is not observed. */
  peers: ReadonlyMap<string, readonly string[]>;
  clock: Clock;
  ttlMs?: number;
}

/** How a consumer's state reads as presence, given the delivery count seen the time before. */
export function presenceOf(
  info: Pick<ConsumerInfo, 'num_waiting' | 'num_pending' | 'num_ack_pending'> & { delivered: { consumer_seq: number } },
  deliveredBefore: number | undefined,
): Observed {
  if (info.num_waiting > 0) return 'online';
  if (info.num_pending === 0 && info.num_ack_pending === 0) return 'offline';
  if (deliveredBefore === undefined) return undefined;
  return info.delivered.consumer_seq > deliveredBefore ? 'online' : 'offline';
}

export class NatsConsumerPresence implements PresenceSource {
  private readonly observations = new Map<string, PeerObservation>();
  private readonly refreshing = new Map<string, Promise<PeerObservation>>();
  private readonly ttlMs: number;
  private readonly sourceId: string;
  private changes = 0;

  constructor(
    private readonly jsm: () => Promise<JetStreamManager>,
    private readonly options: NatsPresenceOptions,
  ) {
    this.ttlMs = options.ttlMs ?? limits.presenceObservationTtlMs;
    this.sourceId = `nats-consumers.${options.clock.nowMs()}`;
  }

  async observe(namespace: string, peers: readonly string[]): Promise<PresenceReport> {
    const known = new Set(this.options.peers.get(namespace) ?? []);
    const observed = await Promise.all(
      [...new Set(peers)].filter((p) => known.has(p)).map(async (peerId) => [peerId, (await this.current(namespace, peerId)).state] as const),
    );
    // The revision is read after every observation it covers has been applied.
    return {
      revision: `${this.sourceId}.${this.changes}`,
      online: observed.filter(([, state]) => state === 'online').map(([p]) => p),
      offline: observed.filter(([, state]) => state === 'offline').map(([p]) => p),
    };
  }

  private current(namespace: string, peerId: string): Promise<PeerObservation> {
    const key = `${namespace}\u0000${peerId}`;
    const cached = this.observations.get(key);
    if (cached && this.options.clock.nowMs() - cached.observedAtMs < this.ttlMs) return Promise.resolve(cached);
    let refresh = this.refreshing.get(key);
    if (!refresh) {
      refresh = this.refresh(key, namespace, peerId, cached).finally(() => this.refreshing.delete(key));
      this.refreshing.set(key, refresh);
    }
    return refresh;
  }

  private async refresh(key: string, namespace: string, peerId: string, before: PeerObservation | undefined): Promise<PeerObservation> {
    let next: PeerObservation;
    try {
      const info = await (await this.jsm()).consumers.info(durableStreamNames(namespace, peerId).requests, peerConsumerName(peerId, 'request'));
      next = { state: presenceOf(info, before?.deliveredSeq), deliveredSeq: info.delivered.consumer_seq, observedAtMs: this.options.clock.nowMs() };
    } catch {
      next = { state: undefined, deliveredSeq: undefined, observedAtMs: this.options.clock.nowMs() };
    }
    if (next.state !== before?.state) this.changes++;
    this.observations.set(key, next);
    return next;
  }
}
