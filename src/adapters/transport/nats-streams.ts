/**
 * The durable streams of a namespace and the guarantee they must keep (spec: "Outbox, durable
 * delivery and recovery"; docs/design.md §10). Streams hold in-flight work, not history — the
 * operation logs are the history:
 *
 * - two streams per peer (nats-names.ts durableStreamNames), each with one publishing role, so
 *   deduplication and capacity are per peer: no principal can publish a message id another
 *   principal's message will carry, and a peer filling its own stream refuses only its own work;
 * - work-queue retention: a message is removed when its consumer acknowledges it, so the streams
 *   hold what is in flight and a small cap serves any number of operations in a row. Every
 *   consumer is filtered to one kind of one peer, so no two overlap (work queues require that);
 * - discard new with a message-count cap (maxMsgs, per stream) and a per-message size cap: a full
 *   stream refuses new work, and never evicts. No byte cap: on nats-server 2.9 a discard-new
 *   stream at its max_bytes still evicts its oldest message when a small message lands at the
 *   boundary (the limit check counts the payload, the store counts the record). maxMsgs ×
 *   maxMsgBytes bounds the bytes instead;
 * - no max_age: age would evict unconsumed work;
 * - a duplicate window covering the operation deadline plus recovery/settlement grace (the
 *   server keeps a message id for the window even after the message was consumed and removed);
 * - continuity: an anchor message, stored on creation on a subject no consumer takes, stays at
 *   the head of the stream; a stream without it was recreated or purged. The check also reports
 *   messages the server lost from disk and a stream recreated since this process first saw it.
 *
 * Creation happens once, by a principal allowed to manage streams; every other principal only
 * verifies. An existing stream that breaks the guarantee is reported, never reconfigured.
 */
import { JetStreamApiCodes, JetStreamApiError, type JetStreamClient, type JetStreamManager, type StreamConfig, type StreamInfo } from '@nats-io/jetstream';
import { AdapterError } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import { msToNanos } from './nats-codec.js';
import { consumerAhead, createMissingConsumer, ownedConsumerInfo, recreateConsumer, type OwnedConsumer, type StarvationWatch } from './nats-consumer-health.js';
import { toAdapterError } from './nats-errors.js';
import { durableStreamNames, durableStreamSubjects, streamAnchorSubject } from './nats-names.js';
import type { DurabilityCheck } from './types.js';
import type { DurableConfig } from './nats-durable-config.js';

export type { DurableConfig } from './nats-durable-config.js';

export interface DurableStream {
  name: string;
  peerId: string;
  /** The work subjects plus the anchor's. */
  subjects: string[];
  anchor: string;
}

/**
 * A namespace's streams, computed once per peer list (a transport asks with its config's list on
 * every admission and durability check). Read-only: callers share it.
 */
export function durableStreams(namespace: string, peers: readonly string[]): readonly DurableStream[] {
  let byNamespace = streamsOfPeers.get(peers);
  if (byNamespace === undefined) streamsOfPeers.set(peers, (byNamespace = new Map()));
  let streams = byNamespace.get(namespace);
  if (streams === undefined) byNamespace.set(namespace, (streams = Object.freeze(streamsOf(namespace, peers))));
  return streams;
}

const streamsOfPeers = new WeakMap<readonly string[], Map<string, readonly DurableStream[]>>();

function streamsOf(namespace: string, peers: readonly string[]): DurableStream[] {
  return peers.flatMap((peerId) => {
    const names = durableStreamNames(namespace, peerId);
    const subjects = durableStreamSubjects(namespace, peerId);
    return (['requests', 'results'] as const).map((role) => {
      const anchor = streamAnchorSubject(names[role]);
      return { name: names[role], peerId, subjects: [...subjects[role], anchor], anchor };
    });
  });
}

export function desiredStreamConfig(stream: DurableStream, config: DurableConfig): Partial<StreamConfig> & { name: string } {
  return {
    name: stream.name,
    subjects: stream.subjects,
    storage: 'file',
    retention: 'workqueue',
    discard: 'new',
    duplicate_window: msToNanos(config.duplicateWindowMs),
    // One more than the in-flight cap: the anchor holds a slot for the stream's whole life.
    max_msgs: (config.maxMsgs ?? limits.durableStreamMsgsDefault) + 1,
    max_bytes: -1,
    max_msg_size: config.maxMsgBytes ?? limits.durableMsgBytesDefault,
    max_age: 0,
    max_msgs_per_subject: -1,
    num_replicas: config.replicas ?? 1,
  };
}

/** Every way a live stream config can break the guarantee; empty when it holds. */
export function streamGuaranteeProblems(info: StreamInfo, stream: DurableStream, config: DurableConfig): string[] {
  const c = info.config;
  const windowNanos = msToNanos(config.duplicateWindowMs);
  const problems: string[] = [];
  if (c.storage !== 'file') problems.push(`storage is ${c.storage}, not file`);
  if (c.retention !== 'workqueue') problems.push(`retention is ${c.retention}, not workqueue: consumed messages are not released`);
  if (c.discard !== 'new') problems.push(`discard is ${c.discard}: capacity pressure would evict accepted work`);
  if (c.duplicate_window < windowNanos) problems.push(`duplicate window ${c.duplicate_window} ns is shorter than the required ${windowNanos} ns`);
  if (c.max_age > 0) problems.push(`max_age ${c.max_age} ns expires unconsumed messages`);
  if (c.max_bytes > 0)
    problems.push(`max_bytes ${c.max_bytes}: nats-server 2.9 evicts a stored message when a small one lands at the byte limit, even under discard new`);
  // A per-subject limit evicts the older message of a subject even under discard new.
  if (c.max_msgs_per_subject > 0 && !c.discard_new_per_subject) problems.push(`max_msgs_per_subject ${c.max_msgs_per_subject} evicts older messages`);
  if (c.sealed) problems.push('the stream is sealed: new work cannot be stored');
  if (c.mirror) problems.push('the stream is a mirror: it does not accept publishes');
  const missing = stream.subjects.filter((s) => !c.subjects?.includes(s));
  if (missing.length > 0) problems.push(`subjects ${missing.join(', ')} are not captured`);
  return problems.map((p) => `${stream.name}: ${p}`);
}

async function streamInfoOrUndefined(jsm: JetStreamManager, name: string): Promise<StreamInfo | undefined> {
  try {
    return await jsm.streams.info(name);
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return undefined;
    throw error;
  }
}

/** Server error: a new stream's subjects overlap an existing stream's. */
const subjectsOverlapCode = 10065;

const migrationHint =
  'its subjects overlap an existing stream: an earlier convoke layout kept one request and one result stream per namespace (CONVOKE_REQ_<ns>_<hash>, CONVOKE_RES_<ns>_<hash>); let the operations in flight close, stop the coordinators and peers, delete those streams, and start again (README: durable mode)';

/**
 * Creates a stream and stores its anchor. The anchor is published with a fixed message id, so a
 * second creator (two coordinators starting at once) stores it once.
 */
async function createStream(jsm: JetStreamManager, js: JetStreamClient, stream: DurableStream, config: DurableConfig): Promise<StreamInfo> {
  let info: StreamInfo;
  try {
    info = await jsm.streams.add(desiredStreamConfig(stream, config));
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === subjectsOverlapCode)
      throw new AdapterError('conflict', `creating stream ${stream.name}: ${migrationHint}`);
    throw error;
  }
  await storeAnchor(jsm, js, stream);
  return info;
}

/**
 * The anchor must be the stream's first message (expected last sequence 0). A second creator
 * (two coordinators starting at once) finds the sequence taken and accepts the first one's anchor.
 */
async function storeAnchor(jsm: JetStreamManager, js: JetStreamClient, stream: DurableStream): Promise<void> {
  try {
    await js.publish(stream.anchor, new TextEncoder().encode(JSON.stringify({ kind: 'anchor', stream: stream.name })), {
      expect: { streamName: stream.name, lastSequence: 0 },
    });
  } catch (error) {
    if ((await anchorOf(jsm, stream)) === null) throw error;
  }
}

function anchorOf(jsm: JetStreamManager, stream: DurableStream) {
  return jsm.streams.getMessage(stream.name, { last_by_subj: stream.anchor }).catch((error: unknown) => {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.NoMessageFound) return null;
    throw error;
  });
}

/** JetStream answers an info request on the namespace's first stream (not found is an answer); throws what the request threw otherwise. */
export async function durableStreamsAnswer(jsm: JetStreamManager, config: DurableConfig): Promise<void> {
  const first = durableStreams(config.namespace, config.peers)[0];
  if (first !== undefined) await streamInfoOrUndefined(jsm, first.name);
}

/**
 * Creates every peer's streams when absent and verifies them when present. An existing stream
 * that breaks the guarantee is reported, never silently reconfigured: someone changed it, and
 * overwriting their change would hide that in-flight work may already be affected. An existing
 * stream that has never stored anything (created, then interrupted before its anchor) gets its
 * anchor: it cannot have lost work.
 */
export async function ensureDurableStreams(jsm: JetStreamManager, js: JetStreamClient, config: DurableConfig): Promise<void> {
  for (const stream of durableStreams(config.namespace, config.peers)) {
    let info: StreamInfo | undefined;
    try {
      info = await streamInfoOrUndefined(jsm, stream.name);
      if (info === undefined) info = await createStream(jsm, js, stream, config);
      else if (info.state.last_seq === 0 && streamGuaranteeProblems(info, stream, config).length === 0) await storeAnchor(jsm, js, stream);
    } catch (error) {
      throw error instanceof AdapterError ? error : toAdapterError(error, `ensuring stream ${stream.name}`);
    }
    const problems = streamGuaranteeProblems(info, stream, config);
    if (problems.length > 0) throw new AdapterError('conflict', problems.join('; '));
  }
}

/**
 * What proves a stream kept what it stored: its anchor is still there, the server lost nothing
 * from disk, and it is the stream this process saw before (`created` unchanged). `seenCreated`
 * remembers each stream's creation time; a change is reported once, then the new stream is the
 * one watched (its operations from then on are stored in it).
 */
async function continuityProblems(jsm: JetStreamManager, info: StreamInfo, stream: DurableStream, seenCreated: Map<string, string>): Promise<string[]> {
  const problems: string[] = [];
  const before = seenCreated.get(stream.name);
  seenCreated.set(stream.name, info.created);
  if (before !== undefined && before !== info.created)
    problems.push(`the stream was recreated at ${info.created} (it was created at ${before}): the work it held is lost`);
  const lost = info.state.lost?.msgs?.length ?? 0;
  if (lost > 0) problems.push(`the server lost ${lost} stored message(s) from disk`);
  if ((await anchorOf(jsm, stream)) === null)
    problems.push(`its anchor (${stream.anchor}) is gone: the stream was recreated or purged, and the work it held is lost`);
  return problems.map((p) => `${stream.name}: ${p}`);
}

/**
 * The latest creation instant (ms, the broker's clock) among the streams a durability check has
 * verified (`seenCreated`); undefined before every stream of the namespace was seen once.
 */
export function streamsCreatedUntilMs(config: DurableConfig, seenCreated: ReadonlyMap<string, string>): number | undefined {
  let untilMs = Number.NEGATIVE_INFINITY;
  for (const stream of durableStreams(config.namespace, config.peers)) {
    const created = Date.parse(seenCreated.get(stream.name) ?? '');
    if (!Number.isSafeInteger(created)) return undefined;
    untilMs = Math.max(untilMs, created);
  }
  return Number.isSafeInteger(untilMs) ? untilMs : undefined;
}

/**
 * Why the streams of `peers` cannot have kept work admitted when the namespace's streams had been
 * created until `createdUntilMs`: one was created later (deleted and recreated since: a new
 * stream stores a new anchor, so only its creation instant tells), or it is gone. Undefined when
 * every one is older. A stream that cannot be read throws: that proves nothing either way.
 * What the last durability check saw (`seenCreated`) is used first, so resuming an operation
 * costs no API call for streams already verified: a stream recreated after that check is the
 * next check's finding (reported as recreated, which closes the namespace's open operations).
 */
export async function streamsRecreatedSince(
  jsm: JetStreamManager,
  namespace: string,
  peers: readonly string[],
  createdUntilMs: number,
  seenCreated: ReadonlyMap<string, string>,
): Promise<string | undefined> {
  const problems: string[] = [];
  for (const stream of durableStreams(namespace, peers)) {
    const created = seenCreated.get(stream.name) ?? (await streamInfoOrUndefined(jsm, stream.name))?.created;
    if (created === undefined) problems.push(`${stream.name}: the stream does not exist`);
    else if (Date.parse(created) > createdUntilMs)
      problems.push(
        `${stream.name}: created at ${created}, after the operation was admitted (its streams were created until ${new Date(createdUntilMs).toISOString()})`,
      );
  }
  return problems.length === 0 ? undefined : problems.join('; ');
}

/**
 * What a durability check remembers between runs about the streams' sequences and the consumers
 * it owns (nats-consumer-health.ts): the highest last sequence seen of each stream (per creation:
 * a stream's last sequence never goes back, so a lower one proves acknowledged writes were lost),
 * and the starvation watch.
 */
export interface ConsumerHealthState {
  owned: () => readonly OwnedConsumer[];
  watch: StarvationWatch;
  lastSeqSeen: Map<string, { created: string; lastSeq: number }>;
}

interface StreamFindings {
  broken: string[];
  unverified: string[];
  repaired: string[];
}

/**
 * The owned consumers of one stream, read before the stream (consumerAhead relies on that order),
 * and what they and the stream's sequence say: lost writes (broken, and an ahead consumer is
 * recreated) or starvation (recreated; nothing was lost).
 */
async function consumerFindings(
  jsm: JetStreamManager,
  stream: DurableStream,
  config: DurableConfig,
  health: ConsumerHealthState | undefined,
): Promise<{ read: () => Promise<StreamInfo | undefined>; judge: (info: StreamInfo) => Promise<StreamFindings> }> {
  const owned = health?.owned().filter((c) => c.stream === stream.name) ?? [];
  const infos = await Promise.all(owned.map(async (c) => ({ owned: c, info: await ownedConsumerInfo(jsm, c) })));
  return {
    read: () => streamInfoOrUndefined(jsm, stream.name),
    judge: async (info) => {
      const findings: StreamFindings = { broken: [], unverified: [], repaired: [] };
      if (health === undefined) return findings;
      const lastSeq = info.state.last_seq;
      const seen = health.lastSeqSeen.get(stream.name);
      if (seen !== undefined && seen.created === info.created && lastSeq < seen.lastSeq) {
        findings.broken.push(`${stream.name}: its last sequence went back from ${seen.lastSeq} to ${lastSeq}: the server lost acknowledged writes`);
      }
      // Reported once: from now on the lower sequence is the one the stream continues from.
      health.lastSeqSeen.set(stream.name, { created: info.created, lastSeq });
      for (const { owned: c, info: consumer } of infos) {
        if (consumer === undefined) continue;
        if (consumer === 'missing') {
          await repairMissing(jsm, c, config, findings);
          continue;
        }
        const ahead = consumerAhead(consumer, lastSeq);
        const starved = ahead === undefined ? health.watch.observe(c, consumer) : undefined;
        if (ahead === undefined && starved === undefined) continue;
        if (ahead !== undefined) findings.broken.push(`${stream.name}: ${ahead}`);
        try {
          const recreated = await recreateConsumer(jsm, c, consumer, config);
          health.watch.forget(c);
          if (recreated) findings.repaired.push(`${stream.name}: ${ahead ?? starved}; the consumer was recreated`);
        } catch (error) {
          findings.unverified.push(
            `${stream.name}: recreating consumer ${c.durable} failed (${toAdapterError(error, 'consumer recreate').description ?? 'unknown error'})`,
          );
        }
      }
      return findings;
    },
  };
}

/** An owned consumer the server does not have: created again, or reported unverified when that fails. */
async function repairMissing(jsm: JetStreamManager, c: OwnedConsumer, config: DurableConfig, findings: StreamFindings): Promise<void> {
  try {
    await createMissingConsumer(jsm, c, config);
    findings.repaired.push(`${c.stream}: consumer ${c.durable} was missing; it was created again`);
  } catch (error) {
    findings.unverified.push(
      `${c.stream}: consumer ${c.durable} is missing and creating it failed (${toAdapterError(error, 'consumer create').description ?? 'unknown error'})`,
    );
  }
}

/**
 * Fail closed: a stream that cannot be read is reported as not ok, never assumed fine. With
 * `health`, the consumers this process owns are checked and repaired too (consumerFindings).
 */
export async function checkDurableStreams(
  jsm: JetStreamManager,
  config: DurableConfig,
  seenCreated: Map<string, string>,
  health?: ConsumerHealthState,
): Promise<DurabilityCheck> {
  const results = await Promise.all(
    durableStreams(config.namespace, config.peers).map(async (stream): Promise<StreamFindings> => {
      try {
        const consumers = await consumerFindings(jsm, stream, config, health);
        const info = await consumers.read();
        if (info === undefined) return { broken: [`${stream.name}: the stream does not exist`], unverified: [], repaired: [] };
        const broken = streamGuaranteeProblems(info, stream, config);
        broken.push(...(await continuityProblems(jsm, info, stream, seenCreated)));
        const found = await consumers.judge(info);
        return { broken: [...broken, ...found.broken], unverified: found.unverified, repaired: found.repaired };
      } catch (error) {
        return {
          broken: [],
          unverified: [`${stream.name}: cannot verify (${toAdapterError(error, 'stream info').description ?? 'unknown error'})`],
          repaired: [],
        };
      }
    }),
  );
  const broken = results.flatMap((r) => r.broken);
  const repaired = results.flatMap((r) => r.repaired);
  const problems = [...broken, ...results.flatMap((r) => r.unverified)];
  const repairs = repaired.length > 0 ? { repaired } : {};
  if (problems.length === 0) return { ok: true, ...repairs };
  return broken.length > 0
    ? { ok: false, description: problems.join('; '), brokenNamespaces: [config.namespace], ...repairs }
    : { ok: false, description: problems.join('; '), ...repairs };
}
