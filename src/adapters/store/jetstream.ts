/**
 * The JetStream event store (docs/design.md §2, §8): stream CONVOKE_OPS, one subject per operation
 * (`convoke.op.<operationId>`), one message per Transition, file storage, limits retention,
 * discard-new, no age or byte cap (capacity pressure refuses writes instead of evicting accepted
 * history; nats-server 2.9 evicts at a byte cap even under discard-new). Workflow
 * instances (`wf…` ids) live in the same stream on `convoke.wf.<instanceId>`, under the same CAS
 * and guard-on-fold rules; operationIds() and follow() see operations only, watch() both.
 *
 * Compare-and-swap: create publishes with `expect.lastSubjectSequence: 0`, append with the
 * expected revision, which *is* the stream sequence of the subject's last message. A wrong
 * sequence (JetStreamApiError 10071/10164) writes nothing and answers `conflict`.
 *
 * Guard-on-fold: JetStream cannot check a time guard inside its write, but it stamps every stored
 * message with its own clock, in stream order. That stamp is committedAtMs. The fold applies a
 * transition only if the stamp passes its guard and is not before the previous applied one
 * (guard.ts `appliesOnFold`); otherwise the transition stays in the log as void. After the
 * PubAck the adapter learns the stored stamp — from its stamp feed (stamp-feed.ts: the server
 * pushes each stored message's headers and stamp, usually with the PubAck), or else by reading
 * the message back by sequence — and answers exactly what the fold decides: ok, `expired`
 * (guard) or `unavailable` (rollback).
 * Caveat, documented: a void transition is *recorded* (it advances the revision, it is returned
 * by read) but changes no state; readers must fold with `appliesOnFold`. That protocol (the CAS
 * write and its retries, the answer from the stamp, reading back, the index row) is the base
 * shared with EventStoreDB, replay-stamped.ts; this file holds the JetStream client calls.
 *
 * Tombstones: a minimal key record on `convoke.tomb.<operationId>` (its own stream), then a
 * marker message CAS-appended to the operation subject, then a purge of that subject keeping
 * only the marker. From the first create on, an operation subject is never empty (its messages
 * stay until the purge, and the purge keeps the marker), so the create CAS itself refuses
 * recreation — no check-then-act window, and no tombstone lookup before a create. A refused
 * create is then classified (expired when the marker is found). A marker counts only beside its
 * key record: one published on the subject by anything else makes the log `unavailable`.
 *
 * Stream identity: the markers refuse recreation only in the operations stream the keys were used
 * in. The store remembers when the operations and tombstone streams it opened on were created
 * (stream info `created`) and refuses writes once a reading finds one created at another instant
 * (deleted and made anew). At open, an operations stream created after a key record or index row
 * was stored (keyHistoryOlder) was made anew since: refused, unless an operator accepts it by its
 * creation instant (`acceptRecreated`), and then each create looks up the key's tombstone record
 * and index row before writing.
 */
import { hash } from 'node:crypto';
import { connect, errors, headers as natsHeaders, nanos, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type MsgRequest,
  type StoredMsg,
  type StreamConfig,
} from '@nats-io/jetstream';
import type { StoredTransition, Transition } from '../../events/types.js';
import { AdapterError, AssertionFailure, invalidInput, unavailable, unsupported } from '../../contract/errors.js';
import { isOperationId, namespacePattern } from '../../contract/ids.js';
import { isWorkflowStream } from './workflow-rows.js';
import { limits as contractLimits } from '../../contract/limits.js';
import { decodeStored, isStoreFailure, notifyAll, parseRevision } from './codec.js';
import { capacityReached, refusedCreates, resolveStoreLimits } from './limits.js';
import { StampFeed } from './stamp-feed.js';
import { JetStreamOperationIndex, ensureIndexStream, indexStreamName, indexStreamProblem } from './jetstream-index.js';
import { inBatches } from './in-batches.js';
import { addedMeanwhile, evictingLimits, messageCapProblem, messageReserve } from './jetstream-stream-limits.js';
import { JetStreamOpenSet, ensureOpenSetStream, openSetStreamName, openSetStreamProblem } from './jetstream-open-set.js';
import { ensureSnapshotStream, snapshotStreamName } from './jetstream-index-snapshot.js';
import { pageRowsDefault } from './jetstream-index-pages.js';
import { PubAckMux } from '../transport/nats-pubacks.js';
import { ReplayStampedStore, closedFailure, notFoundOf, streamFamily, type LogState, type TailState, type WriteOutcome } from './replay-stamped.js';
import type { AppendListener, AppendOutcome, RecordAfter, RevisionListener, StoreFailure, StoreLimits } from './types.js';
import { loginOptions } from '../transport/nats-creds.js';
import { streamMessageTooLarge } from '../transport/nats-errors.js';
import { deniedByNats, jetStreamNotAnswering, retryWhileStarting, serverNotListening, startupWait, type StartupWait } from '../transport/nats-startup.js';

export interface JetStreamStoreOptions {
  /** An existing connection (left open on close), or `servers` to connect to (closed on close). */
  connection?: NatsConnection;
  servers?: string | string[];
  user?: string;
  pass?: string;
  /** A NATS credentials file's contents (user JWT and nkey seed), in place of user and password. */
  creds?: Uint8Array;
  /** Default CONVOKE_OPS; the tombstone records live in `<streamName>_TOMBS` (tombStreamName). */
  streamName?: string;
  /** Default 'convoke': subjects `<prefix>.op.<id>` and `<prefix>.tomb.<id>`. */
  subjectPrefix?: string;
  limits?: Partial<StoreLimits>;
  /** How long a PubAck or JetStream API reply is awaited before answering `unavailable`. */
  requestTimeoutMs?: number;
  /**
   * How long an append waits for its stamp from the stamp feed before reading the message back
   * (default 250 ms); 0 turns the feed off (every append reads back).
   */
  stampWaitMs?: number;
  /**
   * Snapshots of the index view (jetstream-index-pages.ts): a view that has applied this many
   * rows since the last snapshot writes a new generation of pages (default 1000); a one-shot
   * list reads at most 4 times as many rows after it before it starts a view instead. 0 turns
   * snapshots off (every list starts a view, which reads every row).
   */
  indexSnapshotTailMin?: number;
  /** Rows per page of the paged snapshot (default 1000). */
  indexSnapshotPageRows?: number;
  /**
   * How long an open operation's index row may wait for a later one to replace it before it is
   * published (jetstream-index.ts `appended`; default 1 s): an operation decided within it
   * writes one row. 0 publishes every row at once.
   */
  indexRowDelayMs?: number;
  /**
   * How long a JetStream that does not answer yet (a server still starting: "jetstream is not
   * enabled") is waited out before opening fails as unavailable (nats-startup.ts); by default
   * limits.natsStartupWaitMsMax from the start of the open. Given, it also waits out a server that
   * does not listen yet when the store makes its own connection (`servers`).
   */
  startup?: StartupWait;
  /**
   * Told, once per store client, what the operator should know that does not stop the store:
   * index snapshots off because the store user cannot use the snapshot stream (the generated
   * permissions of a deployment from before snapshots), or a snapshot that could not be read or
   * written. Silent without it (`indexSnapshotProblem` holds the same line).
   */
  onNotice?: (line: string) => void;
  /**
   * The creation instant (stream info `created`, as open's refusal names it) of an operations
   * stream younger than its key history that an operator accepts: one deleted and made anew, its
   * logs and tombstone markers gone (see `keyHistoryOlder`). The store opens on that stream only,
   * and its creates then refuse every key the tombstone and index streams know. A stream made anew
   * again has another instant and is refused again.
   */
  acceptRecreated?: string;
}

const defaultIndexRowDelayMs = 1000;

const defaultSnapshotTailMin = 1000;

/** Bytes reserved for the headers the adapter adds (Nats-Msg-Id, expected sequence). */
const headerBytesAllowance = 512;
const tombstoneHeader = 'Convoke-Tombstone';
const defaultStampWaitMs = 250;
const decoder = new TextDecoder('utf-8', { fatal: true });

const wrongSequenceCodes = new Set([10071, 10164]);

export function isWrongSequence(error: unknown): boolean {
  return error instanceof JetStreamApiError && wrongSequenceCodes.has(error.code);
}

/** Everything but a CAS rejection is `unavailable`: a timeout may or may not have stored the message. */
export function natsFailure(error: unknown): StoreFailure {
  if (error instanceof AssertionFailure) throw error;
  if (error instanceof JetStreamApiError && error.code === streamMessageTooLarge) {
    return { kind: 'invalid-input', description: `jetstream: ${error.message}` };
  }
  const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return { kind: 'unavailable', description: `jetstream: ${detail}` };
}

/** Server stamps carry nanoseconds; both the ISO and the bigint forms truncate to the same ms. */
function stampMs(timestamp: string): number {
  const ms = Date.parse(timestamp);
  // A stamp we cannot read is a backend failure (→ unavailable), not a bug of ours.
  if (!Number.isSafeInteger(ms)) throw new Error(`unparseable server timestamp ${JSON.stringify(timestamp)}`);
  return ms;
}

/** The Nats-Msg-Id of one attempted write: a retry of the same write dedupes to the stored message. */
function publicationId(operationId: string, expectedSeq: number, body: Uint8Array): string {
  return hash('sha256', Buffer.concat([Buffer.from(`${operationId}\u0000${expectedSeq}\u0000`, 'utf8'), body]), 'hex');
}

const isMarker = (msg: StoredMsg) => msg.header?.get(tombstoneHeader) === '1';

/** The stream of the tombstone key records kept beside operations stream `streamName` (`<prefix>.tomb.<operationId>`). */
export function tombStreamName(streamName: string): string {
  return `${streamName}_TOMBS`;
}

export class JetStreamEventStore extends ReplayStampedStore {
  readonly name = 'jetstream';
  /**
   * The last reading of the store's streams: the operations stream's operation and message counts
   * (and how many of this client's creates had ended when it was asked for), its message cap (0:
   * none), and what in the configuration of the operations, tombstone, open-set and index streams
   * breaks the store's promises (undefined: nothing).
   */
  private streamSeen: StreamReading = {
    count: 0,
    createsEnded: 0,
    messages: 0,
    maxMsgs: 0,
    atMs: Number.NEGATIVE_INFINITY,
    problems: { ops: undefined, tombs: undefined, openSet: undefined, index: undefined },
  };
  /** The stream reading under way, shared by the writes that wait for it. */
  private streamReading: Promise<void> | undefined;
  /**
   * This client's creates let through the capacity check, and how many of those have ended
   * (stored, refused or failed): those that had not ended when a reading was asked for may be
   * missing from its counts (capacityFailure).
   */
  private readonly creates = { admitted: 0, ended: 0 };
  /** How appends learned their server stamps: from the stamp feed, or by reading the message back. */
  readonly stampSources = { fed: 0, readBack: 0 };
  /** The connection's PubAck mux, shared with any transport on the same connection. */
  private readonly pubAcks: PubAckMux;
  /** The operations index (jetstream-index.ts): a row per operation, written after each stored append. */
  readonly index: JetStreamOperationIndex;
  /** The operations that may be open (jetstream-open-set.ts): marked before their admission is written. */
  private readonly openSet: JetStreamOpenSet;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly ownsConnection: boolean,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly streamName: string,
    private readonly prefix: string,
    limits: StoreLimits,
    private readonly requestTimeoutMs: number,
    /** Whether the stream answers direct gets (allow_direct): the cheaper read-back path. */
    private readonly directGet: boolean,
    /** The creation instants of the operations and tombstone streams the store opened on: what each reading compares. */
    private readonly opened: { ops: string; tombs: string },
    /** Whether the operations stream is a recreated one an operator accepted: creates then look up the key's history first. */
    private readonly keyHistoryLookup: boolean,
    private readonly stamps: StampFeed | undefined,
    private readonly stampWaitMs: number,
    snapshots: { tailMin: number; pageRows: number; onFailure: (doing: 'reading' | 'writing', error: unknown) => void } | undefined,
    private readonly snapshotReport: SnapshotReport,
    indexRowDelayMs: number,
  ) {
    // A subject's sequence before its first message is 0: the create CAS expects it.
    super(limits, 0);
    this.pubAcks = PubAckMux.of(nc);
    this.openSet = new JetStreamOpenSet({
      publish: (subject, data) => this.pubAcks.publish(subject, data, { timeout: requestTimeoutMs }),
      jsm,
      connectionBreaks: () => this.pubAcks.connectionBreaks,
      streamName,
      prefix,
    });
    this.index = new JetStreamOperationIndex({
      js,
      jsm,
      streamName,
      prefix,
      requestTimeoutMs,
      publishRow: (subject, data, lastSubjectSequence) => this.pubAcks.publish(subject, data, { expect: { lastSubjectSequence }, timeout: requestTimeoutMs }),
      ...this.indexHost(),
      openSet: this.openSet,
      rowDelayMs: indexRowDelayMs,
      ...(snapshots ? { snapshots } : {}),
    });
  }

  static async open(options: JetStreamStoreOptions): Promise<JetStreamEventStore> {
    const requestTimeoutMs = options.requestTimeoutMs ?? 5000;
    checkSubjectPrefix(options.subjectPrefix ?? 'convoke');
    const nc = options.connection ?? (await connectFor(options, requestTimeoutMs));
    try {
      // The account-info request ($JS.API.INFO) answers once the server's JetStream is up.
      await retryWhileStarting(
        'JetStream account info',
        () => jetstreamManager(nc, { timeout: contractLimits.natsStartupProbeMsMax }),
        jetStreamNotAnswering,
        options.startup ?? startupWait(),
      );
      const jsm = await jetstreamManager(nc, { timeout: requestTimeoutMs, checkAPI: false });
      const js = jetstream(nc, { timeout: requestTimeoutMs });
      const configured = resolveStoreLimits(options.limits);
      // A message (body plus our headers) must fit the server's max_payload; never claim more.
      const payloadMax = (nc.info?.max_payload ?? contractLimits.transitionBytesMax) - headerBytesAllowance;
      const streamName = options.streamName ?? 'CONVOKE_OPS';
      const prefix = options.subjectPrefix ?? 'convoke';
      const made = Math.min(configured.transitionBytesMax, payloadMax) + headerBytesAllowance;
      const ops = await ensureStream(jsm, streamName, `${prefix}.op.>`, made, `${prefix}.wf.>`, true);
      const limits = { ...configured, transitionBytesMax: Math.min(configured.transitionBytesMax, payloadMax, ops.messageBytesMax - headerBytesAllowance) };
      if (limits.transitionBytesMax <= 0)
        throw unsupported(
          `stream ${streamName} has max_msg_size ${ops.messageBytesMax}: no transition fits beside the store's ${headerBytesAllowance} bytes of headers`,
        );
      const tombs = await ensureStream(jsm, tombStreamName(streamName), `${prefix}.tomb.>`, 4096);
      await ensureIndexStream(jsm, streamName, prefix);
      const older = await keyHistoryOlder(jsm, streamName, prefix, ops.created);
      const recreatedAccepted = older !== undefined && options.acceptRecreated === ops.created;
      if (older !== undefined && !recreatedAccepted) throw unavailable(recreatedRefusal(streamName, ops.created, older));
      const openSetCreated = await ensureOpenSetStream(jsm, streamName, prefix);
      const tailMin = options.indexSnapshotTailMin ?? defaultSnapshotTailMin;
      const snapshotReport = new SnapshotReport(snapshotStreamName(streamName), options.onNotice);
      const unusable = tailMin > 0 ? await ensureSnapshotStream(jsm, streamName, prefix) : undefined;
      if (unusable !== undefined) snapshotReport.off(unusable);
      const pageRows = options.indexSnapshotPageRows ?? pageRowsDefault;
      const snapshots = tailMin > 0 && unusable === undefined ? { tailMin, pageRows, onFailure: snapshotReport.failed } : undefined;
      const stampWaitMs = options.stampWaitMs ?? defaultStampWaitMs;
      let stamps: StampFeed | undefined;
      if (stampWaitMs > 0) {
        const info = await jsm.streams.info(streamName);
        stamps = await StampFeed.start(js, streamName, info.state.last_seq + 1);
      }
      const store = new JetStreamEventStore(
        nc,
        !options.connection,
        js,
        jsm,
        streamName,
        prefix,
        limits,
        requestTimeoutMs,
        ops.directGet,
        { ops: ops.created, tombs: tombs.created },
        recreatedAccepted,
        stamps,
        stampWaitMs,
        snapshots,
        snapshotReport,
        options.indexRowDelayMs ?? defaultIndexRowDelayMs,
      );
      if (openSetCreated) await store.openSet.completeIfNew();
      return store;
    } catch (error) {
      if (!options.connection) await nc.close().catch(() => undefined);
      // A stream's info or create refused to this user: denied, as the account-info probe says it.
      throw error instanceof AdapterError ? error : (deniedByNats(error, 'opening the JetStream store') ?? error);
    }
  }

  /** Why index snapshots are off or failed, as told to onNotice (once); undefined while they work. */
  get indexSnapshotProblem(): string | undefined {
    return this.snapshotReport.problem;
  }

  /**
   * A create of an operation is marked in the open set before it is written: a stored admission is
   * in the open set even if its writer dies before its index row (jetstream-open-set.ts). Workflow
   * instances are not recovered from it.
   */
  override async create(operationId: string, transition: Transition, after?: RecordAfter): Promise<AppendOutcome> {
    const outcome = await super.create(operationId, transition, after);
    // Tombstoned, or an admission void on its guard: this operation (or instance) can never be open.
    if (outcome.kind === 'expired') await this.openSet.remove(operationId).catch(() => undefined);
    return outcome;
  }

  /**
   * The workflow instances marked in the open set (jetstream-open-set.ts). Until its workflows
   * record is there (a store from before the markers), every instance subject of the operations
   * stream is marked first — ended ones too: the executor reads each and has those unmarked.
   */
  async *runningWorkflowIds(): AsyncIterable<string> {
    this.throwIfClosed();
    try {
      if (!(await this.openSet.workflowsComplete())) {
        const wfPrefix = `${this.prefix}.wf.`;
        const instances = (await subjectsOf(this.jsm, this.streamName, `${wfPrefix}>`)).map((subject) => subject.slice(wfPrefix.length));
        await inBatches(instances, contractLimits.recoveryReadsMax, (instanceId) => this.openSet.add(instanceId));
        await this.openSet.markWorkflowsComplete();
      }
      yield* await this.openSet.ids('wf');
    } catch (error) {
      throw unavailable(`jetstream open set: ${natsFailure(error).description}`, error);
    }
  }

  /** The instance subjects less those with a tombstone key record, as operationIds() lists operations. */
  async *workflowInstanceIds(): AsyncIterable<string> {
    this.throwIfClosed();
    const wfPrefix = `${this.prefix}.wf.`;
    let subjects: string[];
    let tombs: Set<string>;
    try {
      subjects = await subjectsOf(this.jsm, this.streamName, `${wfPrefix}>`);
      tombs = new Set(await subjectsOf(this.jsm, tombStreamName(this.streamName), `${this.prefix}.tomb.>`));
    } catch (error) {
      throw unavailable(natsFailure(error).description, error);
    }
    for (const subject of subjects) {
      const id = subject.slice(wfPrefix.length);
      // A subject under the prefix that names no instance (published by something else) is none.
      if (isWorkflowStream(id) && !tombs.has(this.tombSubject(id))) yield id;
    }
  }

  async workflowEnded(instanceId: string): Promise<void> {
    this.throwIfClosed();
    try {
      await this.openSet.remove(instanceId);
    } catch (error) {
      throw unavailable(`jetstream open set: ${natsFailure(error).description}`, error);
    }
  }

  protected async markWorkflowRunning(instanceId: string): Promise<void> {
    await this.openSet.add(instanceId);
  }

  async *operationIds(): AsyncIterable<string> {
    this.throwIfClosed();
    let ops: string[];
    let tombs: Set<string>;
    try {
      ops = await subjectsOf(this.jsm, this.streamName, `${this.prefix}.op.>`);
      tombs = new Set(await subjectsOf(this.jsm, tombStreamName(this.streamName), `${this.prefix}.tomb.>`));
    } catch (error) {
      throw unavailable(natsFailure(error).description, error);
    }
    const opPrefix = `${this.prefix}.op.`;
    const tombPrefix = `${this.prefix}.tomb.`;
    for (const subject of ops) {
      const id = subject.slice(opPrefix.length);
      // A subject under the prefix that names no operation (`<id>.extra`, published by something else) is none, as in the other stores.
      if (isOperationId(id) && !tombs.has(tombPrefix + id)) yield id;
    }
  }

  /**
   * The server's clock: the instant its stream info was made (nats-server 2.10 and later), else
   * the stamp of the stream's last message, which the server's clock has passed (2.9 says no more
   * without a write). Never earlier than that stamp.
   */
  async nowMs(): Promise<number> {
    this.throwIfClosed();
    try {
      const info = await this.jsm.streams.info(this.streamName);
      const readings = [info.state.last_ts, info.ts].map((iso) => (iso === undefined ? Number.NaN : Date.parse(iso)));
      return Math.max(Number.MIN_SAFE_INTEGER, ...readings.filter(Number.isFinite));
    } catch (error) {
      throw unavailable(`jetstream server time: ${natsFailure(error).description}`, error);
    }
  }

  async tombstone(operationId: string): Promise<AppendOutcome | StoreFailure> {
    if (this.closed) return closedFailure;
    const subject = this.opSubject(operationId);
    try {
      const refused = (await this.streamFailure('ops')) ?? this.streamProblem('tombs', 'tombstones');
      if (refused) return refused;
      const last = await this.jsm.streams.getMessage(this.streamName, { last_by_subj: subject });
      if (!last) return (await this.hasTombRecord(operationId)) ? { kind: 'ok', revision: '0', committedAtMs: 0 } : notFoundOf(operationId);
      // Key record first: from here on a create answers expired even if we stop half-way.
      await this.writeTombRecord(operationId, last.seq);
      const marker = isMarker(last) ? last : await this.appendMarker(operationId, last.seq);
      // Purge below the marker (never `keep: 1`): the marker always survives, so the subject's
      // last sequence never returns to 0 and the create CAS can never recreate the stream.
      await this.jsm.streams.purge(this.streamName, { filter: subject, seq: marker.seq });
      this.fold.forget(operationId);
      await this.index.remove(operationId);
      return { kind: 'ok', revision: String(marker.seq), committedAtMs: stampMs(marker.timestamp) };
    } catch (error) {
      return natsFailure(error);
    }
  }

  /**
   * From the stamp feed, which already sees every stored message's subject and sequence (the
   * revision): no second consumer, no message bodies. Without a feed, from a consumer of the
   * stream's headers. Either way a tombstone's marker is told as the revision it took.
   */
  async watch(listener: RevisionListener): Promise<{ close(): Promise<void> }> {
    this.throwIfClosed();
    const prefixes = [`${this.prefix}.op.`, `${this.prefix}.wf.`];
    const tell = (subject: string, seq: number) => {
      const prefix = prefixes.find((candidate) => subject.startsWith(candidate));
      if (prefix !== undefined) listener(subject.slice(prefix.length), String(seq));
    };
    if (!this.stamps) return this.consumeFromEnd({ headers_only: true }, (msg) => tell(msg.subject, msg.seq));
    const stop = this.stamps.watch(tell);
    return { close: async () => stop() };
  }

  follow(listener: AppendListener): Promise<{ close(): Promise<void> }> {
    return this.consumeFromEnd({ filter_subjects: `${this.prefix}.op.>` }, (msg) => this.deliver(msg, listener));
  }

  /** Each message stored from now on, in order, handed to `each` (an ordered consumer with `options`). */
  private async consumeFromEnd(options: { filter_subjects?: string; headers_only?: boolean }, each: (msg: JsMsg) => void): Promise<{ close(): Promise<void> }> {
    this.throwIfClosed();
    let messages: Awaited<ReturnType<Awaited<ReturnType<JetStreamClient['consumers']['get']>>['consume']>>;
    try {
      // Start right after the current end (not DeliverPolicy.New, which is fixed only when the
      // consumer is created — possibly after an append the caller made once follow resolved).
      const info = await this.jsm.streams.info(this.streamName);
      const consumer = await this.js.consumers.get(this.streamName, {
        ...options,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: info.state.last_seq + 1,
      });
      messages = await consumer.consume();
    } catch (error) {
      throw unavailable(natsFailure(error).description, error);
    }
    const pump = (async () => {
      for await (const msg of messages) each(msg);
    })().catch(() => undefined);
    return this.followed(async () => {
      await messages.close();
      await pump;
    });
  }

  protected async closeClient(): Promise<void> {
    await this.stamps?.close();
    await this.index.close();
    if (this.ownsConnection) await this.nc.close().catch(() => undefined);
  }

  // -------------------------------------------------------------------------------------------

  private opSubject(operationId: string): string {
    return `${this.prefix}.${streamFamily(operationId)}.${operationId}`;
  }

  private tombSubject(operationId: string): string {
    return `${this.prefix}.tomb.${operationId}`;
  }

  protected parseRevision(revision: string): number | undefined {
    return parseRevision(revision);
  }

  protected failure(error: unknown): StoreFailure {
    return natsFailure(error);
  }

  /**
   * No tombstone lookup: a tombstoned subject keeps its marker, so the create CAS refuses it (see
   * the header) — except on an operations stream made anew that an operator accepted, which holds
   * no marker of the keys used before it (keyUsedBefore).
   */
  protected async beforeCreate(operationId: string): Promise<StoreFailure | undefined> {
    const used = this.keyHistoryLookup ? await this.keyUsedBefore(operationId) : undefined;
    if (used) return used;
    const full = await this.capacityFailure(operationId);
    if (full) return full;
    try {
      if (streamFamily(operationId) === 'op') await this.openSet.add(operationId);
    } catch (error) {
      // Refused after all: nothing of it is written.
      this.createEnded();
      throw error;
    }
    return undefined;
  }

  /**
   * On an accepted recreated operations stream, why a create of this key must not be written: its
   * tombstone key record (expired, as the marker would have answered), or an index row (or the
   * row's removal) while its subject is empty: it held a log in the stream before it was made
   * anew, lost with it. A subject holding messages is left to the create CAS (a conflict).
   */
  private async keyUsedBefore(operationId: string): Promise<StoreFailure | undefined> {
    const [last, tombstoned, row] = await Promise.all([
      this.jsm.streams.getMessage(this.streamName, { last_by_subj: this.opSubject(operationId) }),
      this.hasTombRecord(operationId),
      this.jsm.streams.getMessage(indexStreamName(this.streamName), { last_by_subj: `${this.prefix}.idx.${operationId}` }),
    ]);
    if (last) return undefined;
    if (tombstoned) return { kind: 'expired', description: `operation ${operationId} is tombstoned; its key is never recreated` };
    if (!row) return undefined;
    return {
      kind: 'unavailable',
      description: `operation ${operationId} held a log in ${this.streamName} before it was recreated; that log is lost, and its key is not used again`,
    };
  }

  /** The CAS publish: the expected revision *is* the stream sequence of the subject's last message. */
  protected async writeAt(operationId: string, expectedSeq: number, text: string): Promise<WriteOutcome> {
    const refused = await this.streamFailure('ops');
    if (refused) return refused;
    // Encoded once: hashed for the publication identity and published as these bytes.
    const body = Buffer.from(text, 'utf8');
    try {
      const ack = await this.pubAcks.publish(this.opSubject(operationId), body, {
        msgID: publicationId(operationId, expectedSeq, body),
        expect: { lastSubjectSequence: expectedSeq },
        timeout: this.requestTimeoutMs,
      });
      if (ack.duplicate) return await this.duplicateOutcome(operationId, ack.seq, body);
      return { kind: 'stored', revision: ack.seq };
    } catch (error) {
      if (!isWrongSequence(error)) throw error;
      return { kind: 'rejected' };
    }
  }

  /**
   * A PubAck saying `duplicate`: the stream already holds a message under this write's Nats-Msg-Id,
   * at `seq`, and stored nothing now. When that message is this exact write (this subject, these
   * bytes, no marker) stored before, answering from it makes the retry of an uncertain append
   * idempotent — while it is still there: a tombstone since purged it, and the retry is refused like
   * any write the subject no longer takes (the log, read, says tombstoned: expired). Any other
   * message was published under the id by something else (anyone who may publish into the stream
   * can compute it): this write was dropped for it and is not stored. Never `stored` (the log does
   * not hold this transition), nor `rejected` (classified as a conflict, it would invite a write
   * after a message this store did not write): unavailable, until the duplicate window has passed.
   */
  private async duplicateOutcome(operationId: string, seq: number, body: Uint8Array): Promise<WriteOutcome> {
    const held = await this.readBack(seq);
    if (held === null) return { kind: 'rejected' };
    const subject = this.opSubject(operationId);
    if (held.subject === subject && !isMarker(held) && Buffer.from(held.data).equals(body)) return { kind: 'stored', revision: seq };
    const where = held.subject === subject ? `on ${subject}` : 'on another subject';
    return {
      kind: 'unavailable',
      description: `the write to ${subject} was deduplicated to message ${seq} ${where}, which this store did not write: nothing of it was stored`,
    };
  }

  protected async stampAt(operationId: string, seq: number): Promise<number | StoreFailure> {
    const stamp = await this.stampOf(seq);
    if (!stamp || stamp.subject !== this.opSubject(operationId)) {
      return { kind: 'unavailable', description: `stored message ${seq} could not be read back; its fold outcome is unknown` };
    }
    return stamp.committedAtMs;
  }

  /** The server stamp of stored message `seq`: from the stamp feed, or else read back. */
  private async stampOf(seq: number): Promise<{ subject: string; committedAtMs: number } | undefined> {
    const fed = this.stamps ? await this.stamps.stampOf(seq, this.stampWaitMs) : undefined;
    if (fed) {
      this.stampSources.fed++;
      return fed;
    }
    this.stampSources.readBack++;
    const stored = await this.readBack(seq);
    return stored ? { subject: stored.subject, committedAtMs: stampMs(stored.timestamp) } : undefined;
  }

  /**
   * One stored message by sequence. A stored message never changes, so a direct get (cheaper;
   * possibly answered by a replica) is trusted when it finds it; a miss — a replica that has not
   * applied it yet — falls back to the stream leader's STREAM.MSG.GET.
   */
  private async readBack(seq: number): Promise<StoredMsg | null> {
    if (this.directGet) {
      const direct = await this.jsm.direct.getMessage(this.streamName, { seq }).catch(() => null);
      if (direct && direct.seq === seq) return direct;
    }
    return this.jsm.streams.getMessage(this.streamName, { seq });
  }

  protected async logState(operationId: string): Promise<LogState> {
    return this.vouchedTombstone(operationId, await this.readLog(operationId));
  }

  protected async logTail(operationId: string, after: number): Promise<TailState> {
    return this.vouchedTombstone(operationId, await this.readTail(operationId, after));
  }

  /**
   * A tombstone marker is this store's only when the key record a tombstone writes before it is
   * there. A message with the marker's header and no record was published on the subject by
   * something else: answered `expired`, it would retire a live operation for every reader (and
   * recovery), so the log is `unavailable`, as for any message the store did not write.
   */
  private async vouchedTombstone<T extends LogState | TailState>(operationId: string, state: T): Promise<T | StoreFailure> {
    if (state.kind !== 'tombstoned' || (await this.hasTombRecord(operationId))) return state;
    return { kind: 'unavailable', description: `operation ${operationId} holds a tombstone marker without its key record: a message this store did not write` };
  }

  private async readLog(operationId: string): Promise<LogState> {
    const last = await this.jsm.streams.getMessage(this.streamName, { last_by_subj: this.opSubject(operationId) });
    // An empty subject was never created: a tombstone keeps its marker (see the header).
    if (!last) return { kind: 'missing' };
    if (isMarker(last)) return { kind: 'tombstoned' };
    return this.scan(operationId, 1, last.seq);
  }

  /**
   * The subject's messages after `after`, read as logState reads the whole log: its last message
   * first (the tail's end, or a tombstone), then the message at `after`, which must be this
   * subject's own (STREAM.MSG.GET `next_by_subj` from `after` answers it only when it is), then
   * the scan from the next sequence on. A log whose last message is before `after` came back
   * shorter; one whose message at `after` is gone or another subject's does not continue it.
   */
  private async readTail(operationId: string, after: number): Promise<TailState> {
    const subject = this.opSubject(operationId);
    const last = await this.jsm.streams.getMessage(this.streamName, { last_by_subj: subject });
    if (!last) return { kind: 'missing' };
    if (isMarker(last)) return { kind: 'tombstoned' };
    if (last.seq === after) return { kind: 'live', lastRevision: after, transitions: [] };
    const diverged = { kind: 'diverged' as const, description: `operation ${operationId} no longer holds message ${after} (its last is ${last.seq})` };
    if (last.seq < after) return diverged;
    const held = await this.jsm.streams.getMessage(this.streamName, { seq: after, next_by_subj: subject } as unknown as MsgRequest);
    if (!held || held.seq > last.seq) return this.gapOrTombstone(operationId, last.seq);
    if (isMarker(held)) return { kind: 'tombstoned' };
    if (held.seq !== after) return diverged;
    return this.scan(operationId, after + 1, last.seq);
  }

  /**
   * Every message of the operation's subject from `fromSeq` up to and including `untilSeq`, in
   * order, read from the stream leader (never the direct-get API, whose replicas may answer
   * stale): the first few by STREAM.MSG.GET `next_by_subj` (nats-server ≥ 2.9), a longer log's
   * rest in pulled batches (scanBatched). A marker anywhere means tombstoned. At most
   * limits.transitionsStoredMax transitions are read: the most any store accepts (older logs
   * beyond it answer unavailable).
   */
  private async scan(operationId: string, fromSeq: number, untilSeq: number): Promise<LogState> {
    const subject = this.opSubject(operationId);
    const transitions: StoredTransition[] = [];
    let from = fromSeq;
    while (transitions.length < contractLimits.jetstreamScanGetsMax) {
      // The v3 typings list only seq/last_by_subj here; the server also takes next_by_subj.
      const query = { seq: from, next_by_subj: subject } as unknown as MsgRequest;
      const msg = await this.jsm.streams.getMessage(this.streamName, query);
      if (!msg || msg.seq > untilSeq) return this.gapOrTombstone(operationId, untilSeq);
      const taken = takeMessage(transitions, msg.seq, stampMs(msg.timestamp), msg.data, isMarker(msg));
      if (taken) return taken;
      if (msg.seq === untilSeq) return { kind: 'live', lastRevision: untilSeq, transitions };
      from = msg.seq + 1;
    }
    return this.scanBatched(operationId, transitions, from, untilSeq);
  }

  /**
   * The rest of a long log: an ephemeral consumer filtered on the subject, starting at `fromSeq`
   * (after what was read into `transitions`), pulled in batches of contractLimits.jetstreamScanBatchMax (one request each) and deleted afterwards.
   * Deliveries must be consecutive; a gap is unavailable, never a shorter log.
   */
  private async scanBatched(operationId: string, transitions: StoredTransition[], fromSeq: number, untilSeq: number): Promise<LogState> {
    const readMax = contractLimits.transitionsStoredMax;
    const info = await this.jsm.consumers.add(this.streamName, {
      filter_subject: this.opSubject(operationId),
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: fromSeq,
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: nanos(Math.max(10_000, 4 * this.requestTimeoutMs)),
    });
    try {
      const consumer = await this.js.consumers.get(this.streamName, info.name);
      let delivered = 0;
      while (delivered < info.num_pending) {
        const wanted = Math.min(contractLimits.jetstreamScanBatchMax, info.num_pending - delivered, readMax + 1 - transitions.length);
        if (wanted <= 0) break;
        const batch = await consumer.fetch({ max_messages: wanted, expires: Math.max(1000, this.requestTimeoutMs) });
        const before = delivered;
        for await (const msg of batch) {
          delivered++;
          if (msg.info.deliverySequence !== delivered || msg.seq > untilSeq) return this.gapOrTombstone(operationId, untilSeq);
          const taken = takeMessage(transitions, msg.seq, Number(msg.timestampNanos / 1_000_000n), msg.data, msg.headers?.get(tombstoneHeader) === '1');
          if (taken) return taken;
          if (msg.seq === untilSeq) return { kind: 'live', lastRevision: untilSeq, transitions };
        }
        if (delivered === before) break;
      }
    } finally {
      void this.jsm.consumers.delete(this.streamName, info.name).catch(() => undefined);
    }
    if (transitions.length > readMax)
      return { kind: 'unavailable', description: `operation ${operationId} holds more than ${readMax} transitions, more than a store reads back` };
    return this.gapOrTombstone(operationId, untilSeq);
  }

  /** Messages vanished under a scan: a tombstone purged them (the marker shows it) or history is damaged. */
  private async gapOrTombstone(operationId: string, untilSeq: number): Promise<LogState> {
    const last = await this.jsm.streams.getMessage(this.streamName, { last_by_subj: this.opSubject(operationId) });
    if (last && isMarker(last)) return { kind: 'tombstoned' };
    return { kind: 'unavailable', description: `operation ${operationId} is missing messages up to ${untilSeq}` };
  }

  private async hasTombRecord(operationId: string): Promise<boolean> {
    const record = await this.jsm.streams.getMessage(tombStreamName(this.streamName), { last_by_subj: this.tombSubject(operationId) });
    return record !== null;
  }

  /** The minimal key record kept after the payload is gone; written once (CAS on an empty subject). */
  private async writeTombRecord(operationId: string, lastSeq: number): Promise<void> {
    const record = JSON.stringify({ operationId, lastRevision: String(lastSeq) });
    try {
      await this.js.publish(this.tombSubject(operationId), record, { expect: { lastSubjectSequence: 0 }, timeout: this.requestTimeoutMs });
    } catch (error) {
      if (!isWrongSequence(error)) throw error; // Already recorded by an earlier (partial) tombstone.
    }
  }

  /** CAS-appends the tombstone marker after whatever is last; concurrent appends just move the target. */
  private async appendMarker(operationId: string, lastSeq: number): Promise<StoredMsg> {
    const subject = this.opSubject(operationId);
    let expectedSeq = lastSeq;
    for (let attempt = 0; attempt < contractLimits.storeCasAttemptsMax; attempt++) {
      const h = natsHeaders();
      h.set(tombstoneHeader, '1');
      try {
        const ack = await this.js.publish(subject, '', { headers: h, expect: { lastSubjectSequence: expectedSeq }, timeout: this.requestTimeoutMs });
        const marker = await this.jsm.streams.getMessage(this.streamName, { seq: ack.seq });
        if (marker) return marker;
        throw unavailable(`tombstone marker ${ack.seq} could not be read back`);
      } catch (error) {
        if (!isWrongSequence(error)) throw error;
      }
      const last = await this.jsm.streams.getMessage(this.streamName, { last_by_subj: subject });
      if (!last) throw unavailable(`operation ${operationId} vanished while being tombstoned`);
      if (isMarker(last)) return last;
      expectedSeq = last.seq;
    }
    throw unavailable(`operation ${operationId} kept moving; tombstone not completed`);
  }

  /**
   * Reads the store's streams (one reading at a time, its four requests in parallel): the
   * operations stream's counts, message cap and configuration, and the configuration of the
   * tombstone, open-set and index streams, whose limits an operator may change after open as well.
   * (The snapshot stream is not read: a snapshot is a checksummed copy of the index, and one whose
   * pages are gone is not used; a list reads every row instead.)
   */
  private async readStream(): Promise<void> {
    this.streamReading ??= (async () => {
      // Every create that ended before the request is in the counts it answers.
      const createsEnded = this.creates.ended;
      try {
        // A stream deleted since open answers undefined: a problem of its own (missingOps and the others).
        const [ops, tombs, openSet, index] = await Promise.all(
          [this.streamName, tombStreamName(this.streamName), openSetStreamName(this.streamName), indexStreamName(this.streamName)].map((name) =>
            this.jsm.streams.info(name).catch(undefinedWhenMissing),
          ),
        );
        this.streamSeen = {
          count: ops?.state.num_subjects ?? 0,
          createsEnded,
          messages: ops?.state.messages ?? 0,
          maxMsgs: (ops?.config.max_msgs ?? -1) > 0 ? (ops?.config.max_msgs ?? 0) : 0,
          atMs: performance.now(),
          problems: {
            ops:
              ops === undefined
                ? missingOps
                : (recreated(ops.created, this.opened.ops, recreatedOpsConsequence) ??
                  changed(historyStreamProblem(ops.config, `${this.prefix}.op.>`) ?? messagesShrunk(ops.config, this.limits.transitionBytesMax))),
            tombs:
              tombs === undefined
                ? missingTombs
                : (recreated(tombs.created, this.opened.tombs, recreatedTombsConsequence) ??
                  changed(historyStreamProblem(tombs.config, `${this.prefix}.tomb.>`))),
            openSet: openSet === undefined ? missingOpenSet : changed(openSetStreamProblem(openSet.config, this.prefix)),
            index: index === undefined ? missingIndex : changed(indexStreamProblem(index.config, this.prefix)),
          },
        };
      } finally {
        this.streamReading = undefined;
      }
    })();
    await this.streamReading;
  }

  private streamFresh(): boolean {
    return performance.now() - this.streamSeen.atMs < contractLimits.jetstreamStreamReadingAgeMsMax;
  }

  /**
   * Why no write may go in now: a stream's configuration was changed since open (an operator's
   * `nats stream edit`) to one that evicts stored messages or breaks the store's other promises —
   * what open refuses as unsupported — or the stream was deleted and made anew (its creation
   * instant is not the one the store opened on). The operations stream's (`ops`) refuses every
   * write; the reading is taken again once the last one is over a second old, so within about a
   * second of the change writes answer unavailable, naming what changed, instead of appending
   * history the stream will drop or writing a log again into a stream that lost it; writes go on
   * once the configuration is restored, or the stream restored from a backup (which keeps its
   * creation instant).
   */
  private async streamFailure(which: keyof StreamReading['problems']): Promise<StoreFailure | undefined> {
    if (!this.streamFresh()) await this.readStream();
    return this.streamProblem(which, 'writes');
  }

  /**
   * The refusal of `refused` (what writes the stream takes or needs) while the last reading found
   * stream `which` broken: the tombstone stream refuses tombstones (its key records would vanish
   * and every reader would take the markers for forged ones), the open set's stream new
   * operations and workflow instances (their marks would vanish, and recovery with them), the
   * index stream the same (their rows would vanish from lists and stuck counts; appends go on,
   * since the log they follow is whole and a lost row is rebuilt from it).
   */
  private streamProblem(which: keyof StreamReading['problems'], refused: string): StoreFailure | undefined {
    const problem = this.streamSeen.problems[which];
    if (problem === undefined) return undefined;
    const stream = {
      ops: this.streamName,
      tombs: tombStreamName(this.streamName),
      openSet: openSetStreamName(this.streamName),
      index: indexStreamName(this.streamName),
    }[which];
    return { kind: 'unavailable', description: `stream ${stream} ${problem.change}; ${refused} are refused until ${problem.remedy}` };
  }

  /**
   * Live and tombstoned operations both count (one subject each): exhaustion refuses admissions.
   * So does an operations stream with a message cap (max_msgs under discard-new) once it holds
   * the cap less its reserve (jetstream-stream-limits.ts `messageReserve`): the reserve is kept for
   * the appends of the operations already open — their decisions, settlements, cancellation
   * results and tombstone markers — which a full stream would refuse, stranding them undecided.
   * The counts come from the server (stream info) whenever the stream has a message cap (another
   * client's appends may fill it within any second), the store is within 10% of its operation
   * limit, or the last reading is over a second old; otherwise a fresh reading is used, saving a
   * round trip per admission. Either way each create this client let through that may be missing
   * from the reading (not ended when it was asked for, or admitted since) counts against the room
   * it left, so creates made at once cannot pass the cap or the reserve together; across clients
   * the check is check-then-act (racing writers can overshoot by their number) — documented.
   * Each refusal names what the create of `operationId` would have made (refusedCreates).
   */
  private async capacityFailure(operationId: string): Promise<StoreFailure | undefined> {
    const refused = refusedCreates(operationId);
    const last = this.streamSeen;
    if (!(this.streamFresh() && last.maxMsgs === 0 && last.count + this.createsUncounted() < 0.9 * this.limits.operationsMax)) await this.readStream();
    // Refused before the open set is marked: the write itself would be.
    const unlisted = this.streamProblem('ops', 'writes') ?? this.streamProblem('openSet', refused) ?? this.streamProblem('index', refused);
    if (unlisted) return unlisted;
    const seen = this.streamSeen;
    const uncounted = this.createsUncounted();
    if (seen.count + uncounted >= this.limits.operationsMax) return capacityReached(this.limits.operationsMax, operationId);
    const reserve = messageReserve(seen.maxMsgs);
    if (seen.maxMsgs > 0 && seen.messages + uncounted >= seen.maxMsgs - reserve) {
      return {
        kind: 'unavailable',
        description: `stream ${this.streamName} holds ${seen.messages} messages of its max_msgs ${seen.maxMsgs}; the last ${reserve} are kept for the appends of operations already open, so ${refused} are refused until operations are pruned or the cap is raised`,
      };
    }
    this.creates.admitted++;
    return undefined;
  }

  /** This client's admitted creates the last reading may not count: those not ended when it was asked for. */
  private createsUncounted(): number {
    return this.creates.admitted - this.streamSeen.createsEnded;
  }

  protected override createEnded(): void {
    this.creates.ended++;
  }

  private deliver(msg: JsMsg, listener: AppendListener): void {
    if (msg.headers?.get(tombstoneHeader) === '1') return;
    const operationId = msg.subject.slice(`${this.prefix}.op.`.length);
    // Same truncation to ms as the ISO stamp read() uses, so follow and read agree exactly.
    const committedAtMs = Number(msg.timestampNanos / 1_000_000n);
    const stored = decodeMessage(msg.seq, committedAtMs, msg.data);
    if (!isStoreFailure(stored)) notifyAll([listener], operationId, stored);
  }
}

/** A reading of the store's streams (JetStreamEventStore `readStream`). */
interface StreamReading {
  count: number;
  /** This client's creates that had ended when the reading was asked for. */
  createsEnded: number;
  messages: number;
  /** The operations stream's max_msgs; 0 when it has none. */
  maxMsgs: number;
  atMs: number;
  problems: { ops: StreamProblem | undefined; tombs: StreamProblem | undefined; openSet: StreamProblem | undefined; index: StreamProblem | undefined };
}

/** What a reading found changed in one of the store's streams since open, and what ends the refusals it causes. */
interface StreamProblem {
  change: string;
  remedy: string;
}

/** A configuration that breaks the store's promises (`problem`, as open words it), or undefined. */
function changed(problem: string | undefined): StreamProblem | undefined {
  return problem === undefined ? undefined : { change: `now ${problem} (its configuration changed since the store opened)`, remedy: 'it is restored' };
}

/**
 * A stream whose creation instant is no longer the one the store opened on: deleted and made anew,
 * holding nothing of what it held (`consequence`: what is gone with it, for whom), or undefined.
 */
function recreated(created: string, opened: string, consequence: StreamProblem): StreamProblem | undefined {
  if (created === opened) return undefined;
  return { change: `was recreated at ${created} (the store opened on one created at ${opened}): ${consequence.change}`, remedy: consequence.remedy };
}

/** A stream info's refusal for a stream that does not exist (JetStream 10059) as undefined; any other is thrown. */
function undefinedWhenMissing(error: unknown): undefined {
  if (error instanceof JetStreamApiError && error.code === 10059) return undefined;
  throw error;
}

const deletedSinceOpen = 'is missing (deleted since the store opened)';

/** Without the operations stream nothing can be written: an open operation's log is gone with it. */
const missingOps: StreamProblem = {
  change: `${deletedSinceOpen}: the logs and tombstone markers it held are gone with it`,
  remedy: 'it is restored from a backup (a stream made anew holds none of them, and the store refuses it)',
};

/** Without the tombstone stream no key record can be written: tombstones wait; appends and creates need none. */
const missingTombs: StreamProblem = {
  change: `${deletedSinceOpen}: the key records it held are gone with it, and the tombstone markers they vouch for read as forged`,
  remedy: 'it is restored from a backup',
};

/**
 * Without the open set no create can be marked: creates wait; appends go on. A set made anew is
 * restored: it holds no completeness record, so the next start lists the open operations from
 * the history and marks them (jetstream-open-set.ts).
 */
const missingOpenSet: StreamProblem = {
  change: `${deletedSinceOpen}: it takes no marks of operations and workflow instances that may be open`,
  remedy: 'it is made again (a store opening makes it; its next start lists the open operations from the history)',
};

/** Without the index no row can be written: creates wait; appends go on, a lost row being rebuilt from its log. */
const missingIndex: StreamProblem = {
  change: `${deletedSinceOpen}: it takes no rows`,
  remedy: 'it is made again (a store opening makes it; convoke replay --fix-index rebuilds the rows it held)',
};

const recreatedOpsConsequence: StreamProblem = {
  change: 'the logs and tombstone markers it held are gone, so an open operation would start a new log and a key used before could be created again',
  remedy:
    'it is restored from a backup (which keeps its creation instant) or the store is opened again, which refuses such a stream unless an operator accepts it',
};

const recreatedTombsConsequence: StreamProblem = {
  change: 'the key records it held are gone, and the tombstone markers they vouch for read as forged',
  remedy: 'it is restored from a backup (which keeps its creation instant)',
};

/**
 * The key records and index rows stored before the operations stream was created (`opsCreated`,
 * the server's clock, as the records' stamps): a store writes a row or a key record only for an
 * operation its operations stream already holds, so one stored earlier proves that stream was
 * deleted and made anew since, the logs and tombstone markers it held gone — and with the markers,
 * what refuses a create of a key used before. The oldest record of each stream is read (one
 * request each) and named with its stamp; undefined when neither is older. Streams deleted with it
 * or emptied prove nothing: nothing is left that knows the keys.
 */
async function keyHistoryOlder(jsm: JetStreamManager, streamName: string, prefix: string, opsCreated: string): Promise<string | undefined> {
  const opsMs = Date.parse(opsCreated);
  const older: string[] = [];
  const histories: Array<[string, string]> = [
    [tombStreamName(streamName), `${prefix}.tomb.>`],
    [indexStreamName(streamName), `${prefix}.idx.*`],
  ];
  for (const [name, filter] of histories) {
    // The v3 typings list only seq/last_by_subj here; the server also takes next_by_subj.
    const first = await jsm.streams.getMessage(name, { seq: 1, next_by_subj: filter } as unknown as MsgRequest);
    if (first && stampMs(first.timestamp) < opsMs) older.push(`${name} stored ${first.subject} (at ${first.timestamp})`);
  }
  return older.length === 0 ? undefined : older.join(' and ');
}

/** Open's refusal of an operations stream younger than its key history (`older`, keyHistoryOlder). */
function recreatedRefusal(streamName: string, opsCreated: string, older: string): string {
  return (
    `stream ${streamName} was created at ${opsCreated}, after ${older}, which hold the key history of operations it no longer holds: ` +
    `it was deleted and made anew, and the logs and tombstone markers it held are gone. Restore it from a backup (nats stream restore keeps its creation instant), ` +
    `or, to go on without them, open the store with acceptRecreated ${opsCreated} (a jetstream: store URL's acceptRecreated=${opsCreated}): ` +
    'its creates then refuse every key the tombstone and index streams know'
  );
}

/** Adds one scanned message to `transitions`; answers the scan's end when it is a marker or cannot be decoded. */
function takeMessage(transitions: StoredTransition[], seq: number, committedAtMs: number, data: Uint8Array, marker: boolean): LogState | undefined {
  if (marker) return { kind: 'tombstoned' };
  const stored = decodeMessage(seq, committedAtMs, data);
  if (isStoreFailure(stored)) return stored;
  transitions.push(stored);
  return undefined;
}

function decodeMessage(seq: number, committedAtMs: number, data: Uint8Array): StoredTransition | StoreFailure {
  let body: string;
  try {
    body = decoder.decode(data);
  } catch {
    return { kind: 'unavailable', description: `stored message ${seq} is not UTF-8` };
  }
  return decodeStored(String(seq), committedAtMs, body);
}

/**
 * What became of the index snapshots, told once per store client: a user that cannot use the
 * snapshot stream lists every row at each view start, which an operator should hear about once,
 * not at every page.
 */
class SnapshotReport {
  problem: string | undefined;

  constructor(
    private readonly stream: string,
    private readonly onNotice: ((line: string) => void) | undefined,
  ) {}

  off(why: string): void {
    this.tell(
      `jetstream store: index snapshots are off: ${why}; every list view starts by reading every index row (the store user needs the permissions jetstreamStorePermissions gives on ${this.stream})`,
    );
  }

  readonly failed = (doing: 'reading' | 'writing', error: unknown): void => {
    const why = error instanceof AdapterError ? (error.description ?? error.message) : error instanceof Error ? error.message : String(error);
    this.tell(`jetstream store: ${doing} an index snapshot in ${this.stream} failed (${why}); list views go on without it`);
  };

  private tell(line: string): void {
    if (this.problem !== undefined) return;
    this.problem = line;
    this.onNotice?.(line);
  }
}

async function connectFor(options: JetStreamStoreOptions, requestTimeoutMs: number): Promise<NatsConnection> {
  if (options.servers === undefined) throw unsupported('a JetStream store needs `connection` or `servers`');
  const { startup } = options;
  if (startup === undefined) return connectOnce(options, requestTimeoutMs);
  return retryWhileStarting(`connecting to ${String(options.servers)}`, () => connectOnce(options, requestTimeoutMs), serverNotListening, startup);
}

async function connectOnce(options: JetStreamStoreOptions, requestTimeoutMs: number): Promise<NatsConnection> {
  if (options.servers === undefined) throw unsupported('a JetStream store needs `connection` or `servers`');
  try {
    return await connect({
      servers: options.servers,
      ...loginOptions(options),
      name: 'convoke-store',
      timeout: requestTimeoutMs,
      // Keep reconnecting: while the server is away every call answers `unavailable`.
      maxReconnectAttempts: -1,
      noAsyncTraces: true,
    });
  } catch (error) {
    // A refused login is the server's answer, not an outage: denied, as connectNats says it.
    if (error instanceof errors.AuthorizationError)
      throw new AdapterError('denied', `connecting to ${String(options.servers)}: ${error.message}`, { cause: error });
    throw unavailable(natsFailure(error).description, error);
  }
}

/**
 * Creates the stream, or checks an existing one keeps the durability promises this adapter
 * makes (the operations stream's: `operations`, whose message cap must leave room beside its
 * reserve, jetstream-stream-limits.ts `messageReserve`). Answers whether the stream allows direct gets,
 * when it was created (stream info `created`: what tells it from one made anew) and the largest
 * message it takes: its own max_msg_size, which an existing stream (an operator's, or one made
 * under a lower limit) may have below `messageBytesMax` and the server's max_payload; the store
 * reports no larger transitions than that. `extra` is a further subject the stream
 * carries (workflow instances, `<prefix>.wf.>`): added to a stream created before it, where the
 * client may update streams; otherwise that stream takes no workflow instances (their appends
 * answer `unavailable`).
 */
async function ensureStream(
  jsm: JetStreamManager,
  name: string,
  subject: string,
  messageBytesMax: number,
  extra?: string,
  operations = false,
): Promise<{ directGet: boolean; created: string; messageBytesMax: number }> {
  try {
    const info = await jsm.streams.info(name);
    const c = info.config;
    const problem = historyStreamProblem(c, subject) ?? (operations ? messageCapProblem(c) : undefined);
    if (problem !== undefined) throw unsupported(`stream ${name} ${problem}`);
    if (extra !== undefined && !c.subjects.includes(extra)) await jsm.streams.update(name, { subjects: [...c.subjects, extra] }).catch(() => undefined);
    return { directGet: c.allow_direct === true, created: info.created, messageBytesMax: streamMessageBytesMax(c, messageBytesMax) };
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === 10059)) throw error;
  }
  try {
    const info = await jsm.streams.add({
      name,
      subjects: extra === undefined ? [subject] : [subject, extra],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.New,
      max_msg_size: messageBytesMax,
      // No byte cap: nats-server 2.9 evicts at one even under discard-new (jetstream-stream-limits.ts).
      max_bytes: -1,
      allow_direct: true,
    });
    return { directGet: true, created: info.created, messageBytesMax: streamMessageBytesMax(info.config, messageBytesMax) };
  } catch (error) {
    // Another client created it between our info and add: fine if it is ours (checked next open).
    if (!(await addedMeanwhile(jsm, name, error))) throw error;
    const info = await jsm.streams.info(name);
    return { directGet: false, created: info.created, messageBytesMax: streamMessageBytesMax(info.config, messageBytesMax) };
  }
}

/**
 * A max_msg_size set below what a transition of the size the store reported at open
 * (`transitionBytesMax`, its limits) takes with its headers, or undefined. Nothing is evicted, but
 * every user was told (and a coordinator budgeted for) transitions up to that size: the larger
 * ones would be refused one by one, as a result, a decision or a settlement arrives. The stream is
 * refused as changed instead, until it is restored.
 */
function messagesShrunk(c: StreamConfig, transitionBytesMax: number): string | undefined {
  const needed = transitionBytesMax + headerBytesAllowance;
  const takes = streamMessageBytesMax(c, Number.POSITIVE_INFINITY);
  return takes < needed
    ? `has max_msg_size ${takes}, below the ${needed} bytes a transition of the store's transitionBytesMax (${transitionBytesMax}, told at open) takes with its headers`
    : undefined;
}

/** The largest message a stream takes: its max_msg_size, or `otherwise` (what the server carries) when it sets none (-1 or 0). */
function streamMessageBytesMax(c: Partial<StreamConfig>, otherwise: number): number {
  const set = c.max_msg_size ?? -1;
  return set > 0 ? Math.min(set, otherwise) : otherwise;
}

/**
 * What in a history stream's configuration breaks the promises the store makes of it (file
 * storage, limits retention, discard-new, capturing `subject`, no limit that evicts), or undefined.
 */
function historyStreamProblem(c: StreamConfig, subject: string): string | undefined {
  const ok = c.storage === StorageType.File && c.retention === RetentionPolicy.Limits && c.discard === DiscardPolicy.New && c.subjects.includes(subject);
  if (!ok) return `exists without file storage, limits retention, discard-new and subject ${subject}`;
  const evicting = evictingLimits(c);
  return evicting === undefined ? undefined : `${evicting}: it would drop stored messages the store reads back`;
}

async function subjectsOf(jsm: JetStreamManager, stream: string, filter: string): Promise<string[]> {
  const info = await jsm.streams.info(stream, { subjects_filter: filter });
  return Object.keys(info.state.subjects ?? {});
}

/**
 * The store's subjects live under its prefix: token-safe NATS tokens (no wildcard, no `$`), and
 * not under `_INBOX`, where every principal's replies go.
 */
function checkSubjectPrefix(prefix: string): void {
  if (!namespacePattern.test(prefix))
    throw invalidInput(`jetstream store: prefix ${JSON.stringify(prefix.slice(0, 80))} must be one to eight dot-separated tokens of [A-Za-z0-9_-]`);
  const root = prefix.split('.', 1)[0] ?? '';
  if (root.toLowerCase() === '_inbox')
    throw invalidInput(`jetstream store: prefix ${JSON.stringify(prefix)} lies under _INBOX, where every principal's replies go`);
}
