/**
 * Requests that exhausted their deliveries: each is recorded as an observed failure of its
 * attempt, then released from its stream.
 */
import type { DeploymentLog } from '../types.js';
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription as NatsSubscription } from '@nats-io/transport-node';
import { parseRequestMessage } from '../../events/wire-schemas.js';
import { decideDispatchRecorded } from '../../domain/decide.js';
import { BoundedMap } from '../../contract/bounded-map.js';
import { parseMaxDeliveriesAdvisory, type MaxDeliveriesAdvisory } from '../../adapters/transport/nats-consumers.js';
import { durableStreamNames, maxDeliveriesAdvisorySubject } from '../../adapters/transport/nats-names.js';
import type { Clock } from '../../contract/clock.js';
import { limits } from '../../contract/limits.js';
import type { Coordinator } from '../../runtime/coordinator.js';

/**
 * Watches every peer consumer of the request streams for max-delivery exhaustion and records
 * it on the operation as the observed failure of that attempt (decideDispatchRecorded with
 * receipt `exhausted`: a retry within the attempt budget, or a failed branch). The request body
 * read back from the stream names the branch, attempt and fence; a superseded attempt is ignored
 * by the decider, so a re-emitted advisory changes nothing. Once recorded (a cancel: once seen;
 * its timeout decides settlement) the message is deleted: it is never delivered again, and a
 * work-queue stream would keep it, holding a slot of the peer's capacity for good.
 */
export async function watchRequestExhaustion(
  nc: NatsConnection,
  jsm: JetStreamManager,
  peers: Map<string, string[]>,
  coordinator: Coordinator,
  clock: Clock,
  log: DeploymentLog,
): Promise<{ close(): void }> {
  const seen = new BoundedMap<string, true>(limits.exhaustedAdvisoriesSeenMax);
  const subscriptions: NatsSubscription[] = [];
  const record = async (stream: string, advisory: MaxDeliveriesAdvisory) => {
    const key = `${stream}/${advisory.stream_seq}`;
    if (seen.has(key)) return;
    seen.set(key, true);
    const stored = await jsm.streams.getMessage(stream, { seq: advisory.stream_seq });
    if (!stored) return;
    if (stored.subject.split('.').includes('request')) {
      const request = parseRequestMessage(stored.data, 'exhausted request');
      const entry = await coordinator.load(request.operationId);
      if (entry) {
        const receipt = {
          branchId: request.branchId,
          attempt: request.attempt,
          fence: request.fence,
          receipt: 'exhausted' as const,
          detail: `${advisory.deliveries} deliveries`,
        };
        await coordinator.enqueue(entry, () => coordinator.commitDecided(entry, (current) => decideDispatchRecorded(current, [receipt], clock.nowMs())));
        log(`request ${stored.subject} exhausted ${advisory.deliveries} deliveries: recorded as a failed attempt ${request.attempt}`);
      }
    }
    await releaseExhausted(jsm, stream, advisory.stream_seq);
  };
  for (const [namespace, namespacePeers] of peers) {
    for (const peerId of namespacePeers) subscriptions.push(watchStreamExhaustion(nc, durableStreamNames(namespace, peerId).requests, record, log));
  }
  await nc.flush();
  return { close: () => subscriptions.forEach((s) => s.unsubscribe()) };
}

function watchStreamExhaustion(
  nc: NatsConnection,
  stream: string,
  record: (stream: string, advisory: MaxDeliveriesAdvisory) => Promise<void>,
  log: DeploymentLog,
): NatsSubscription {
  return nc.subscribe(maxDeliveriesAdvisorySubject(stream, '*'), {
    callback: (error, msg) => {
      const advisory = error ? undefined : parseMaxDeliveriesAdvisory(msg.data);
      if (advisory) void record(stream, advisory).catch((e: unknown) => log(`recording an exhausted request of ${stream} failed: ${(e as Error).message}`));
    },
  });
}

/** Deletes a message that exhausted its deliveries (see watchRequestExhaustion); one already gone is fine. */
export async function releaseExhausted(jsm: JetStreamManager, stream: string, seq: number): Promise<void> {
  await jsm.streams.deleteMessage(stream, seq, false).catch((error: unknown) => {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.NoMessageFound)) throw error;
  });
}
