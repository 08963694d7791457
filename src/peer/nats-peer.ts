/**
 * The peer SDK on a NATS connection: what a service calls to take part in contract invocations.
 *
 *   const peer = await createNatsPeer({ nc, namespace: 'demo.v1.lab', peerId: 'alfa', durable: true,
 *     handlers: { review: async (input, ctx) => ctx.effect(() => decide(input)) } });
 *
 * Core mode subscribes to the peer's own request and cancel subjects. Durable mode binds the two
 * consumers the coordinator provisions for this peer (the peer's NATS user may bind but not create
 * them), waiting for them up to `provisionWaitMs`, and adopts their max_deliver and ack_wait.
 * The connection stays the caller's: `close()` stops the peer and its subscriptions, not `nc`.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { AdapterError } from '../contract/errors.js';
import { nanosToMs } from '../adapters/transport/nats-codec.js';
import { deniedByNats } from '../adapters/transport/nats-startup.js';
import { ConsumerMuxTransport, peerRoute } from '../adapters/transport/nats-mux.js';
import { durableStreamNames, peerConsumerName } from '../adapters/transport/nats-names.js';
import { NatsTransport, type DurableConfig } from '../adapters/transport/nats.js';
import type { Transport } from '../adapters/transport/types.js';
import { createPeer, type Peer, type PeerOptions } from './peer.js';

export interface NatsPeerOptions extends Omit<PeerOptions, 'transport' | 'durable'> {
  nc: NatsConnection;
  /** Bind the provisioned durable consumers (JetStream) instead of core subscriptions. */
  durable?: boolean;
  /** How long durable mode waits for the coordinator to provision this peer's consumers (default 60 s). */
  provisionWaitMs?: number;
  /** Told once while durable mode waits for its consumers. */
  onWaiting?: (message: string) => void;
  /** The identity the transport reports (default: the peer id). */
  identity?: string;
}

const provisionWaitMsDefault = 60_000;
const provisionPollMs = 250;

export async function createNatsPeer(options: NatsPeerOptions): Promise<Peer> {
  const { nc, durable = false, provisionWaitMs, onWaiting, identity, ...rest } = options;
  const transport = await peerTransport(
    nc,
    options.namespace,
    options.peerId,
    durable,
    identity ?? options.peerId,
    provisionWaitMs ?? provisionWaitMsDefault,
    onWaiting,
  );
  let peer: Peer;
  try {
    peer = await createPeer({ ...rest, transport, durable });
  } catch (error) {
    await transport.close().catch(() => undefined);
    throw error;
  }
  // `stats` is the live object: the SDK updates it in place.
  return {
    peerId: peer.peerId,
    sink: peer.sink,
    stats: peer.stats,
    close: async () => {
      await peer.close();
      await transport.close();
    },
  };
}

/** Core NATS, or the peer's two provisioned durable consumers behind one per-interaction mux. */
async function peerTransport(
  nc: NatsConnection,
  namespace: string,
  peerId: string,
  durable: boolean,
  identity: string,
  provisionWaitMs: number,
  onWaiting: ((message: string) => void) | undefined,
): Promise<Transport> {
  if (!durable) return new NatsTransport(nc, { identity });
  const settings = await provisionedConsumerSettings(nc, namespace, peerId, provisionWaitMs, onWaiting);
  return new ConsumerMuxTransport(new NatsTransport(nc, { identity, durable: settings }), peerRoute(namespace, peerId));
}

/**
 * Waits (bounded) for the coordinator to provision this peer's consumers, and adopts their
 * max_deliver and ack_wait: binding checks a consumer against exactly these, and the peer must not
 * disagree with the deployment about them. The duplicate window is the streams' business (the
 * coordinator verifies it); a peer never creates or checks streams, so any positive value serves.
 */
async function provisionedConsumerSettings(
  nc: NatsConnection,
  namespace: string,
  peerId: string,
  provisionWaitMs: number,
  onWaiting: ((message: string) => void) | undefined,
): Promise<DurableConfig> {
  const jsm = await jetstreamManager(nc, { checkAPI: false });
  const stream = durableStreamNames(namespace, peerId).requests;
  const deadlineMs = Date.now() + provisionWaitMs;
  let told = false;
  for (;;) {
    try {
      const [request, cancel] = await Promise.all([
        jsm.consumers.info(stream, peerConsumerName(peerId, 'request')),
        jsm.consumers.info(stream, peerConsumerName(peerId, 'cancel')),
      ]);
      const maxDeliver = request.config.max_deliver ?? -1;
      const ackWaitMs = nanosToMs(request.config.ack_wait ?? 0);
      if (cancel.config.max_deliver !== maxDeliver || nanosToMs(cancel.config.ack_wait ?? 0) !== ackWaitMs)
        throw new AdapterError('conflict', `consumers of peer ${peerId} disagree on max_deliver/ack_wait`);
      return { namespace, peers: [peerId], duplicateWindowMs: 1, maxDeliver, ackWaitMs };
    } catch (error) {
      if (error instanceof AdapterError) throw error;
      // Not waited on: the consumers may well exist, this user may not look at them.
      const refused = deniedByNats(error, `reading the consumers of peer ${peerId} on ${stream}`);
      if (refused !== undefined) throw refused;
      if (Date.now() >= deadlineMs)
        throw new AdapterError(
          'unavailable',
          `the consumers of peer ${peerId} on ${stream} are not provisioned (is the coordinator running?): ${(error as Error).message}`,
        );
      if (!told) onWaiting?.(`waiting for the coordinator to provision the consumers of peer ${peerId} on ${stream}`);
      told = true;
      await new Promise((r) => setTimeout(r, provisionPollMs));
    }
  }
}
