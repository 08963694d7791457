/**
 * The peer SDK: what a service embeds to take part in contract invocations. It receives requests
 * on its own subjects, runs the handler through the fenced effect sink, publishes its terminal
 * result on its peer-bearing result subject, and only then acknowledges the request. On
 * redelivery it returns the result it already has instead of repeating the effect.
 */
import { parseStrictBytes } from '../contract/ijson.js';
import type { JsonValue } from '../contract/json.js';
import { checkRequestMessage } from '../events/wire-schemas.js';
import { encodeWire, type RequestMessage, type ResultMessage } from '../events/wire.js';
import { subjectFor } from '../adapters/transport/subjects.js';
import type { InboundMessage, Subscription, Transport } from '../adapters/transport/types.js';
import { MemoryEffectSink, type EffectSink } from './effect-sink.js';

export interface HandlerContext {
  request: RequestMessage;
  /** Commits a business effect under this request's operation/branch key and fence. */
  effect(apply: () => JsonValue | Promise<JsonValue>): Promise<JsonValue>;
}

export type Handler = (input: JsonValue, context: HandlerContext) => JsonValue | Promise<JsonValue>;

export interface PeerOptions {
  transport: Transport;
  namespace: string;
  peerId: string;
  handlers: Record<string, Handler>;
  sink?: EffectSink;
  /** Durable consumer name prefix (durable transports). */
  durable?: boolean;
}

export interface Peer {
  readonly peerId: string;
  readonly sink: EffectSink;
  /** Requests received, handled and results published, for diagnostics. */
  readonly stats: { received: number; handled: number; replayed: number; failed: number };
  close(): Promise<void>;
}

export async function createPeer(options: PeerOptions): Promise<Peer> {
  const sink = options.sink ?? new MemoryEffectSink();
  const results = new Map<string, JsonValue>();
  const stats = { received: 0, handled: 0, replayed: 0, failed: 0 };
  const subscriptions: Subscription[] = [];
  for (const [interaction, handler] of Object.entries(options.handlers)) {
    const pattern = subjectFor(options.namespace, interaction, '*', 'request', options.peerId);
    const onRequest = (inbound: InboundMessage) => handleRequest({ options, interaction, handler, sink, results, stats }, inbound);
    const subscribeOptions = options.durable ? { durable: `peer-${options.peerId}-${interaction}` } : {};
    subscriptions.push(await options.transport.subscribe(pattern, onRequest, subscribeOptions));
  }
  return {
    peerId: options.peerId,
    sink,
    stats,
    close: async () => {
      for (const s of subscriptions) await s.close();
    },
  };
}

interface PeerState {
  options: PeerOptions;
  interaction: string;
  handler: Handler;
  sink: EffectSink;
  results: Map<string, JsonValue>;
  stats: Peer['stats'];
}

async function handleRequest(state: PeerState, inbound: InboundMessage): Promise<void> {
  const { options, sink, results, stats } = state;
  stats.received++;
  let request: RequestMessage;
  try {
    request = checkRequestMessage(parseStrictBytes(inbound.data, 'request'));
  } catch {
    stats.failed++;
    await inbound.ack(); // a malformed request can never become valid by redelivery
    return;
  }
  if (request.peerId !== options.peerId || request.interaction !== state.interaction) {
    stats.failed++;
    await inbound.ack();
    return;
  }
  const key = `${request.operationId}/${request.branchId}/${request.attempt}`;
  let result = results.get(key);
  if (result !== undefined) stats.replayed++;
  else {
    try {
      result = await state.handler(request.input, {
        request,
        effect: async (apply) => (await sink.commit({ operationId: request.operationId, branchId: request.branchId }, request.fence, request.attempt, apply)).value,
      });
    } catch {
      stats.failed++;
      await inbound.nak(1000);
      return;
    }
    results.set(key, result);
    stats.handled++;
  }
  const message: ResultMessage = { kind: 'result', operationId: request.operationId, branchId: request.branchId, peerId: options.peerId, attempt: request.attempt, fence: request.fence, result };
  const subject = subjectFor(options.namespace, state.interaction, request.operationId, 'result', options.peerId);
  const receipt = await options.transport.publish(subject, encodeWire(message), { msgId: `${request.publicationId}.result` });
  // The request is acknowledged only once the result is stored (or sent, on best-effort transports).
  if (receipt.receipt === 'stored' || receipt.receipt === 'already-stored' || receipt.receipt === 'sent') await inbound.ack();
  else await inbound.nak(500);
}
