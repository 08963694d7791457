/**
 * The durable streams of a namespace and the guarantee they must keep (spec: "Outbox, durable
 * delivery and recovery"): file-backed, limits retention, discard new — capacity pressure
 * rejects new work instead of silently evicting accepted work — and a duplicate window covering
 * the operation deadline plus recovery/settlement grace. Creation happens once, by a principal
 * allowed to manage streams; every other principal only verifies.
 */
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager, type StreamConfig, type StreamInfo } from '@nats-io/jetstream';
import { AdapterError } from '../../contract/errors.js';
import { msToNanos } from './nats-codec.js';
import { toAdapterError } from './nats-errors.js';
import { durableStreamNames, durableStreamSubjects } from './nats-names.js';
import type { DurabilityCheck } from './types.js';

export interface DurableConfig {
  /** The bundle's subjectNamespace; the streams are derived from it (durableStreamNames). */
  namespace: string;
  /** Must cover the operation deadline plus recovery/settlement grace (DESIGN.md §5). */
  duplicateWindowMs: number;
  /** Capacity of each stream; full means new publishes are rejected (discard new). */
  maxMsgs?: number;
  maxBytes?: number;
  replicas?: 1;
  /** Broker deliveries per message before exhaustion becomes an observed event. */
  maxDeliver: number;
  /** Redelivery after this long without an ack. */
  ackWaitMs: number;
}

export interface DurableStream {
  name: string;
  subjects: string[];
}

export function durableStreams(namespace: string): DurableStream[] {
  const names = durableStreamNames(namespace);
  const subjects = durableStreamSubjects(namespace);
  return [
    { name: names.requests, subjects: subjects.requests },
    { name: names.results, subjects: subjects.results },
  ];
}

export function desiredStreamConfig(stream: DurableStream, config: DurableConfig): Partial<StreamConfig> & { name: string } {
  return {
    name: stream.name,
    subjects: stream.subjects,
    storage: 'file',
    retention: 'limits',
    discard: 'new',
    duplicate_window: msToNanos(config.duplicateWindowMs),
    max_msgs: config.maxMsgs ?? -1,
    max_bytes: config.maxBytes ?? -1,
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
  if (c.retention !== 'limits') problems.push(`retention is ${c.retention}, not limits`);
  if (c.discard !== 'new') problems.push(`discard is ${c.discard}: capacity pressure would evict accepted work`);
  if (c.duplicate_window < windowNanos) problems.push(`duplicate window ${c.duplicate_window} ns is shorter than the required ${windowNanos} ns`);
  if (c.max_age > 0 && c.max_age < windowNanos) problems.push(`max_age ${c.max_age} ns expires messages inside the required window`);
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

/**
 * Creates the namespace's streams when absent and verifies them when present. An existing stream
 * that breaks the guarantee is reported, never silently reconfigured: someone changed it, and
 * overwriting their change would hide that in-flight work may already be affected.
 */
export async function ensureDurableStreams(jsm: JetStreamManager, config: DurableConfig): Promise<void> {
  for (const stream of durableStreams(config.namespace)) {
    let info: StreamInfo | undefined;
    try {
      info = (await streamInfoOrUndefined(jsm, stream.name)) ?? (await jsm.streams.add(desiredStreamConfig(stream, config)));
    } catch (error) {
      throw toAdapterError(error, `ensuring stream ${stream.name}`);
    }
    const problems = streamGuaranteeProblems(info, stream, config);
    if (problems.length > 0) throw new AdapterError('conflict', problems.join('; '));
  }
}

/** Fail closed: a stream that cannot be read is reported as not ok, never assumed fine. */
export async function checkDurableStreams(jsm: JetStreamManager, config: DurableConfig): Promise<DurabilityCheck> {
  const problems: string[] = [];
  let broken = false;
  for (const stream of durableStreams(config.namespace)) {
    try {
      const info = await streamInfoOrUndefined(jsm, stream.name);
      const found = info === undefined ? [`${stream.name}: the stream does not exist`] : streamGuaranteeProblems(info, stream, config);
      if (found.length > 0) broken = true;
      problems.push(...found);
    } catch (error) {
      problems.push(`${stream.name}: cannot verify (${toAdapterError(error, 'stream info').description ?? 'unknown error'})`);
    }
  }
  if (problems.length === 0) return { ok: true };
  return broken ? { ok: false, description: problems.join('; '), brokenNamespaces: [config.namespace] } : { ok: false, description: problems.join('; ') };
}
