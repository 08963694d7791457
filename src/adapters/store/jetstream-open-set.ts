/**
 * The JetStream store's open set: what recovery reads at start-up instead of the whole history.
 * Stream `<stream>_OPEN` holds one empty marker per operation that may be open
 * (`<prefix>.open.<operationId>`, max_msgs_per_subject 1), and a record `<prefix>.openset` once
 * the set is complete: at once for a new deployment (no operation stored when the stream was
 * created), else after the first listing.
 *
 * The invariant, once complete: every live operation whose log is not settled has a marker.
 *   - A create publishes its marker before the admission (jetstream.ts create): an admission that
 *     is stored has its marker, even if its writer dies before the index row is written — the case
 *     that made recovery read every operation. A writer that dies between the marker and the
 *     admission leaves a marker with no operation: listed, read, found missing.
 *   - The marker goes when the operation's row is settled (settled is final: phases only
 *     advance), when the operation is tombstoned, or when recovery finds the row settled. A
 *     marker that outlives its operation's settling (a failed removal, a crash) only costs
 *     recovery one row read, after which it is removed.
 *   - Removal deletes the marker by the sequence its PubAck gave this client (STREAM.MSG.DELETE,
 *     no erase): a purge filtered by subject made nats-server 2.9 search the stream and cost it
 *     about twice the CPU. A sequence is only trusted while the connection has not dropped since
 *     (a restarted server may have lost it and given it to another marker). Otherwise — a marker
 *     another process wrote, one this client no longer remembers, one deleted or replaced since,
 *     a principal not allowed the delete — the filtered purge removes it, as before.
 *   - A broker that loses acknowledged writes (nats-server 2.9 SIGKILLed, no fsync) can lose a
 *     marker while the admission after it survives. A store that published to the set sees its
 *     sequence go back at its next publish and removes the completeness record (below). Only a
 *     store that published before and after the loss can tell.
 *   - A store written before the open set existed has operations without markers: until the
 *     record is there, recovery lists as before (every live operation without a settled row),
 *     gives each listed operation its marker, then writes the record. Every coordinator sharing the
 *     store must run a build that writes markers by then (docs/operations.md, "Start-up").
 *
 * Workflow instances that may be running (workflow-running.ts) have their markers in the same
 * stream (`<prefix>.open.wf<hex>`), published before the instance's creation and removed after
 * its end is stored, and their own completeness record, `<prefix>.open.workflows`: a store from
 * before it gets a marker for each of its instances (ended ones included: the executor reads
 * each and has the ended ones' markers removed), then the record.
 */
import { DiscardPolicy, JetStreamApiError, RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import { errors } from '@nats-io/transport-node';
import { BoundedMap } from '../../contract/bounded-map.js';
import { unavailable, unsupported } from '../../contract/errors.js';
import { isOperationId } from '../../contract/ids.js';
import { streamFamily } from './workflow-running.js';
import { addedMeanwhile, evictingLimits } from './jetstream-stream-limits.js';

export interface JetStreamOpenSetHost {
  /** A JetStream publish awaiting its PubAck (the store's PubAck mux): the stored sequence. */
  publish(subject: string, data: Uint8Array): Promise<{ seq: number }>;
  jsm: JetStreamManager;
  /** How many times the connection dropped or came back (PubAckMux.connectionBreaks). */
  connectionBreaks(): number;
  /** The operations stream's name; the open set's stream is `<name>_OPEN`. */
  streamName: string;
  prefix: string;
}

/**
 * Creates the open set's stream, or checks an existing one is a last-per-subject stream of its
 * subjects. Answers whether this call created it.
 */
export async function ensureOpenSetStream(jsm: JetStreamManager, streamName: string, prefix: string): Promise<boolean> {
  const name = openSetStreamName(streamName);
  const subjects = openSetSubjects(prefix);
  try {
    const info = await jsm.streams.info(name);
    const shape = shapeProblem(info.config, subjects);
    if (shape !== undefined) throw unavailable(`stream ${name} ${shape}`);
    const evicting = evictingProblem(info.config);
    if (evicting !== undefined) throw unsupported(`stream ${name} ${evicting}`);
    return false;
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === 10059)) throw error;
  }
  try {
    await jsm.streams.add({
      name,
      subjects,
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      max_msgs_per_subject: 1,
    });
    return true;
  } catch (error) {
    if (!(await addedMeanwhile(jsm, name, error))) throw error;
    return false;
  }
}

/**
 * What in the open set's stream configuration breaks what the store needs of it (one message per
 * subject, its subjects, no limit that evicts a mark), or undefined: what open refuses, read again
 * with the operations stream while the store runs (jetstream.ts `readStream`).
 */
export function openSetStreamProblem(c: StreamConfig, prefix: string): string | undefined {
  return shapeProblem(c, openSetSubjects(prefix)) ?? evictingProblem(c);
}

/** A stream that is not one message per subject of `subjects`. */
function shapeProblem(c: StreamConfig, subjects: readonly string[]): string | undefined {
  if (c.max_msgs_per_subject === 1 && subjects.every((s) => c.subjects.includes(s))) return undefined;
  return `has no max_msgs_per_subject 1 and subjects ${subjects.join(', ')}`;
}

/** A limit that would evict a mark (jetstream-stream-limits.ts evictingLimits). */
function evictingProblem(c: StreamConfig): string | undefined {
  const evicting = evictingLimits(c, 1);
  return evicting === undefined ? undefined : `${evicting}: it would drop marks of operations and workflow instances that may be open`;
}

export function openSetStreamName(streamName: string): string {
  return `${streamName}_OPEN`;
}

function openSetSubjects(prefix: string): string[] {
  return [`${prefix}.open.>`, `${prefix}.openset`];
}

/** Marker sequences remembered for removal by sequence; beyond it the oldest are purged by subject. */
const markersRememberedMax = 16_384;

export class JetStreamOpenSet {
  /** The highest sequence this client's publishes to the set's stream were stored at. */
  private storedSeqMax = 0;
  /** Where this client's markers were stored, and the connection's breaks before each was published. */
  private stored = new BoundedMap<string, { seq: number; breaks: number }>(markersRememberedMax);
  /** Set once the server refused a delete (a principal from before deletes were allowed): purges only. */
  private deleteRefused = false;

  constructor(private readonly host: JetStreamOpenSetHost) {}

  private get stream(): string {
    return openSetStreamName(this.host.streamName);
  }

  private subject(operationId: string): string {
    return `${this.host.prefix}.open.${operationId}`;
  }

  /** Stores the operation's marker; throws (the admission must not be written) when it cannot. */
  async add(operationId: string): Promise<void> {
    const breaks = this.host.connectionBreaks();
    const seq = await this.publish(this.subject(operationId));
    this.stored.set(operationId, { seq, breaks });
  }

  /**
   * A stream's sequence never goes back: a publish sent after this client saw a sequence stored
   * is stored above it, unless the server lost acknowledged writes to the set (a SIGKILLed
   * nats-server without fsync) or the stream was recreated — and then markers of admissions that
   * survived may be gone. The set is no longer complete: the record goes, so the next listing
   * reads the history again and marks what it finds. (Publishes under way at once may be stored
   * in any order; each is compared with what was seen before it was sent.)
   */
  private async publish(subject: string): Promise<number> {
    const seenMax = this.storedSeqMax;
    const { seq } = await this.host.publish(subject, new Uint8Array(0));
    if (seq <= seenMax) {
      // Sequences this client remembers may now name other markers: none is deleted by sequence.
      this.stored = new BoundedMap(markersRememberedMax);
      await this.host.jsm.streams.purge(this.stream, { filter: `${this.host.prefix}.openset` });
      await this.host.jsm.streams.purge(this.stream, { filter: this.workflowsRecord });
      this.storedSeqMax = seq;
    } else {
      this.storedSeqMax = Math.max(this.storedSeqMax, seq);
    }
    return seq;
  }

  /**
   * Removes the marker: deleted at the sequence this client stored it at when that is still known
   * to be its (see the class comment), else purged by subject. Throws when neither could be done.
   */
  async remove(operationId: string): Promise<void> {
    const stored = this.stored.get(operationId);
    this.stored.delete(operationId);
    if (stored !== undefined && stored.breaks === this.host.connectionBreaks() && (await this.deleteAt(stored.seq))) return;
    await this.host.jsm.streams.purge(this.stream, { filter: this.subject(operationId) });
  }

  /**
   * Deletes the message at `seq` (no erase: a marker is empty). False when it could not: gone
   * already or replaced by a later marker of the subject, refused, unreachable.
   */
  private async deleteAt(seq: number): Promise<boolean> {
    if (this.deleteRefused) return false;
    try {
      return await this.host.jsm.streams.deleteMessage(this.stream, seq, false);
    } catch (error) {
      if (error instanceof errors.PermissionViolationError) this.deleteRefused = true;
      return false;
    }
  }

  /**
   * Every marked operation (`family` op) or workflow instance (wf): the stream's subjects (markers
   * only, so O(open), whatever the history). Both share the stream; the ids tell them apart.
   */
  async ids(family: 'op' | 'wf' = 'op'): Promise<string[]> {
    const info = await this.host.jsm.streams.info(this.stream, { subjects_filter: `${this.host.prefix}.open.>` });
    const markerPrefix = `${this.host.prefix}.open.`;
    const ids = Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(markerPrefix.length));
    return ids.filter(family === 'op' ? isOperationId : (id) => streamFamily(id) === 'wf');
  }

  /**
   * The record that every running workflow instance has its marker (`<prefix>.open.workflows`):
   * written once the instances of a store from before the markers were marked (workflowsFromHistory).
   */
  private get workflowsRecord(): string {
    return `${this.host.prefix}.open.workflows`;
  }

  async workflowsComplete(): Promise<boolean> {
    return (await this.host.jsm.streams.getMessage(this.stream, { last_by_subj: this.workflowsRecord })) !== null;
  }

  async markWorkflowsComplete(): Promise<void> {
    await this.publish(this.workflowsRecord);
  }

  /** Whether every operation that may be open is known to have its marker (the record exists). */
  async complete(): Promise<boolean> {
    return (await this.host.jsm.streams.getMessage(this.stream, { last_by_subj: `${this.host.prefix}.openset` })) !== null;
  }

  /**
   * Right after this client created the set's stream: complete at once when the operations stream
   * holds no operation yet (a new deployment), since from the stream's creation on every create
   * marks its operation first. Otherwise the first listing completes it from the history.
   */
  async completeIfNew(): Promise<void> {
    const info = await this.host.jsm.streams.info(this.host.streamName, { subjects_filter: `${this.host.prefix}.op.>` });
    if (Object.keys(info.state.subjects ?? {}).length === 0) await this.markComplete();
    const instances = await this.host.jsm.streams.info(this.host.streamName, { subjects_filter: `${this.host.prefix}.wf.>` });
    if (Object.keys(instances.state.subjects ?? {}).length === 0) await this.markWorkflowsComplete();
  }

  async markComplete(): Promise<void> {
    await this.publish(`${this.host.prefix}.openset`);
  }
}
