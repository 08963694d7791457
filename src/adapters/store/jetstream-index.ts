/**
 * The JetStream store's operations index: a last-per-subject stream `<stream>_INDEX`, one subject
 * per operation (`<prefix>.idx.<operationId>`, max_msgs_per_subject 1) holding its row as JSON,
 * or once the operation is tombstoned a removal marker (header `Convoke-Index-Removed`, no body)
 * that no later row replaces.
 *
 * JetStream has no transaction spanning two subjects, so the row is written right after the
 * append it follows is stored and its fold outcome known (jetstream.ts answerStored). Each row
 * carries the log revision it was derived at, and a row is published with the index subject's
 * last sequence as a compare-and-swap, never over a row of a later revision: two coordinators
 * racing on one operation cannot leave the older row last. A crash between the append and its
 * row leaves the row one revision behind (what the log said at that revision), or an admission
 * with no row, until the operation's next append or `convoke replay --fix-index`; recovery still
 * finds such an operation: its create marked it in the open set first (jetstream-open-set.ts),
 * and openOperationIds reads the marked operations, not every row.
 *
 * Listing and the stuck counts read an in-memory view of the stream (jetstream-index-feed.ts,
 * index-view.ts), started by the first of them and kept current by an ordered consumer: a page
 * costs one request (the stream's last sequence, so rows any process stored before it are in it)
 * and the rows it walks in memory, whatever the number of operations; the view's start reads
 * every row once (docs/decisions/jetstream-list-view.md). `get` reads the one subject.
 *
 * Workflow instances' rows (workflow-rows.ts) share the stream, on `<prefix>.idx.<instanceId>`
 * (`wf…` ids), written after each stored append from the committing side's row under the same
 * revision compare-and-swap, and held by the same feed in a view of their own
 * (workflow-index-view.ts).
 *
 * Only the store's user writes rows: the stream takes `<prefix>.idx.*` (one token after `idx`),
 * and a peer's subjects have at least five tokens with a result, claim or cancel-result kind
 * where a row subject has `idx`, so nothing a peer may publish lands in the index.
 */
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { headers as natsHeaders, nanos } from '@nats-io/transport-node';
import { BoundedMap } from '../../contract/bounded-map.js';
import { inBatches } from './in-batches.js';
import { AdapterError, unavailable, unsupported } from '../../contract/errors.js';
import { addedMeanwhile, evictingLimits } from './jetstream-stream-limits.js';
import { limits as contractLimits } from '../../contract/limits.js';
import { type IndexPage, type IndexQuery, type OperationIndexRow, type StuckBounds, type StuckCounts } from '../../events/operation-index.js';
import type { StoredTransition } from '../../events/types.js';
import { isSettled } from '../../machines/index.js';
import { mayBeOpen, type IndexStates } from './index-states.js';
import type { JetStreamOpenSet } from './jetstream-open-set.js';
import { indexRowOnSubject, parseIndexRow } from './index-row.js';
import { JetStreamIndexFeed, StaleFeed } from './jetstream-index-feed.js';
import type { IndexView } from './index-view.js';
import type { IndexAfter, OperationIndexStore, WorkflowIndexStore } from './types.js';
import type { WorkflowIndexRow } from '../../events/workflow-index.js';
import type { WorkflowIndexView } from './workflow-index-view.js';
import { committedWorkflowRow, isWorkflowStream, parseWorkflowIndexRow } from './workflow-rows.js';
import { startsWorkflow } from './workflow-running.js';
import type { WorkflowIndexPage, WorkflowIndexQuery } from '../../events/workflow-index.js';
import { operationPages } from './index-view.js';
import { instancePages } from './workflow-index-view.js';
import { pageOfPages } from './index-pages.js';
import { PageGone, readDirectory, readPage, type DirectoryPage } from './jetstream-index-pages.js';
import { snapshotStreamName, type SnapshotHost } from './jetstream-index-snapshot.js';

const wrongSequenceCodes = new Set([10071, 10164]);
/**
 * A one-shot page reads a tail of at most this many times tailMin rows; beyond, it starts a
 * view (which writes a new generation of pages): the bound when no view runs to write them.
 */
export const tailReadsPerTailMin = 4;
/** Pages a client keeps once read (about 1 000 rows each). */
const pagesCached = 16;
const removedHeader = 'Convoke-Index-Removed';

export interface JetStreamIndexHost {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** The operations stream's name; the index stream is `<name>_INDEX`. */
  streamName: string;
  prefix: string;
  requestTimeoutMs: number;
  /**
   * A row's compare-and-swap publish (expected last subject sequence), through the store's PubAck
   * mux: one after every stored append, so not a nats.js request each. Fails as js.publish does.
   */
  publishRow(subject: string, data: string, lastSubjectSequence: number): Promise<{ seq: number }>;
  states: IndexStates;
  closed(): boolean;
  /** The operation's log as read() answers it: transitions, or undefined when it has none (missing, tombstoned). */
  logOf(operationId: string): Promise<StoredTransition[] | undefined>;
  /** Every live operation id (the store's operationIds). */
  operationIds(): AsyncIterable<string>;
  /** The operations that may be open (jetstream-open-set.ts): what recovery reads. */
  openSet: JetStreamOpenSet;
  /** How long an open operation's row may wait to be replaced by a later one before it is published (0: at once). */
  rowDelayMs: number;
  /** Snapshots of the view (jetstream-index-snapshot.ts); none when the snapshot stream could not be had. */
  snapshots?: { tailMin: number; pageRows: number; onFailure?: (doing: 'reading' | 'writing', error: unknown) => void };
}

/** The index stream beside operations stream `streamName`. */
export function indexStreamName(streamName: string): string {
  return `${streamName}_INDEX`;
}

/**
 * Creates the index stream, or checks an existing one is a last-per-subject stream of the index
 * subjects with no limit that evicts a row. A stream made before the subjects narrowed to
 * `<prefix>.idx.*` (it took `<prefix>.idx.>`) is narrowed where the client may update streams;
 * either way only row subjects are read from it.
 */
export async function ensureIndexStream(jsm: JetStreamManager, streamName: string, prefix: string): Promise<void> {
  const name = indexStreamName(streamName);
  const subject = `${prefix}.idx.*`;
  const earlier = `${prefix}.idx.>`;
  try {
    const info = await jsm.streams.info(name);
    const subjects = info.config.subjects;
    const shape = indexShapeProblem(info.config, prefix);
    if (shape !== undefined) throw unavailable(`stream ${name} ${shape}`);
    const evicting = indexEvictingProblem(info.config);
    if (evicting !== undefined) throw unsupported(`stream ${name} ${evicting}`);
    if (subjects.includes(earlier)) await jsm.streams.update(name, { subjects: subjects.map((s) => (s === earlier ? subject : s)) }).catch(() => undefined);
    return;
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === 10059)) throw error;
  }
  try {
    await jsm.streams.add({
      name,
      subjects: [subject],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      max_msgs_per_subject: 1,
      allow_direct: true,
    });
  } catch (error) {
    if (!(await addedMeanwhile(jsm, name, error))) throw error;
  }
}

/**
 * What in the index stream's configuration breaks what the store needs of it (one row per subject
 * of the row subjects, no limit that evicts a row), or undefined: what open refuses, read again
 * with the operations stream while the store runs (jetstream.ts `readStream`).
 */
export function indexStreamProblem(c: StreamConfig, prefix: string): string | undefined {
  return indexShapeProblem(c, prefix) ?? indexEvictingProblem(c);
}

/** A stream that is not one message per subject of the row subjects (or the wider ones of an earlier build). */
function indexShapeProblem(c: StreamConfig, prefix: string): string | undefined {
  const subject = `${prefix}.idx.*`;
  if (c.max_msgs_per_subject === 1 && (c.subjects.includes(subject) || c.subjects.includes(`${prefix}.idx.>`))) return undefined;
  return `has no max_msgs_per_subject 1 and subject ${subject}`;
}

/** A limit that would evict a row (jetstream-stream-limits.ts evictingLimits). */
function indexEvictingProblem(c: StreamConfig): string | undefined {
  const evicting = evictingLimits(c, 1);
  return evicting === undefined ? undefined : `${evicting}: it would drop rows of the operations index`;
}

export class JetStreamOperationIndex implements OperationIndexStore {
  /** The index subject's last sequence and row revision this client wrote or read, per operation. */
  private readonly written = new BoundedMap<string, { seq: number; revision: number }>(4096);
  /** The view's feed, from the first list or stuck count on; `started` once it runs. */
  private feed: Promise<JetStreamIndexFeed> | undefined;
  private started: JetStreamIndexFeed | undefined;
  /** Messages applied by views this client started and dropped. */
  private retiredDeliveries = 0;
  /** Lists answered from the paged snapshot (fromPages), the pages they read and skipped, the tail rows they read. */
  readonly paged = { lists: 0, read: 0, skipped: 0, tailRows: 0 };
  /** Pages read by fromPages, by id (a page's rows never change). */
  private readonly pageCache = new BoundedMap<string, readonly unknown[]>(pagesCached);
  /** Open operations' rows not yet published, the newest of each (appended). */
  private readonly waiting = new Map<string, OperationIndexRow | WorkflowIndexRow>();
  private waitingTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly host: JetStreamIndexHost) {}

  private get stream(): string {
    return indexStreamName(this.host.streamName);
  }

  /** Row subjects are `<prefix>.idx.<operationId>`. */
  private get rowSubjectPrefix(): string {
    return `${this.host.prefix}.idx.`;
  }

  private subject(operationId: string): string {
    return `${this.rowSubjectPrefix}${operationId}`;
  }

  /**
   * After an append was stored at `stored.revision` on the log at `previousRevision`: the row
   * from the held state, or from the log read back. A failure here cannot undo the append; the
   * row stays behind (never ahead) and the next append or a rebuild writes it.
   *
   * A settled row is published at once, then the operation's open-set marker removed (in that
   * order: a crash between them leaves a marker, and recovery finds the settled row and removes
   * it). An open operation's row waits up to `rowDelayMs`, replaced by any later row: an
   * operation decided within that time writes one row, not two. A row that waits is what this
   * process's pages and counts see (they write the waiting rows first); other processes see it
   * once written. A crash before it is written leaves the operation with the row of an earlier
   * revision or none, as a failed publish does, and its marker: recovery writes the row from the
   * log (stillOpen).
   */
  async appended(operationId: string, previousRevision: string | undefined, stored: StoredTransition, after?: IndexAfter): Promise<void> {
    try {
      const row = await this.host.states.rowAfterStored(operationId, previousRevision, stored, () => this.host.logOf(operationId), after);
      if (row === undefined) return;
      await this.write(operationId, row, !isSettled(row.phase));
      // A settled log is final: its marker can go, off the append's path (one left behind costs recovery a row read).
      if (isSettled(row.phase)) void this.unmark(operationId);
    } catch {
      // Behind, never wrong: see the header.
    }
  }

  /** Holds a row that may wait (`waits`, and a row delay is set), else publishes it at once in place of any that waits. */
  private async write(id: string, row: OperationIndexRow | WorkflowIndexRow, waits: boolean): Promise<void> {
    if (waits && this.host.rowDelayMs > 0) return this.hold(id, row);
    this.waiting.delete(id);
    await this.publish(id, row);
  }

  /** Holds an open operation's or a running instance's row (the newest replaces an older) until the next write of waiting rows. */
  private hold(operationId: string, row: OperationIndexRow | WorkflowIndexRow): void {
    const held = this.waiting.get(operationId);
    if (held !== undefined && Number(held.revision) > Number(row.revision)) return;
    this.waiting.set(operationId, row);
    if (this.waitingTimer !== undefined) return;
    this.waitingTimer = setTimeout(() => void this.writeWaiting(), this.host.rowDelayMs);
    this.waitingTimer.unref();
  }

  /** Publishes the row waiting for `id`, if one is (a failure leaves it behind, as in appended). */
  private async writeHeld(id: string): Promise<void> {
    const waiting = this.waiting.get(id);
    if (waiting === undefined) return;
    this.waiting.delete(id);
    await this.publish(id, waiting).catch(() => undefined);
  }

  /** Publishes every waiting row (failures leave them behind, as in appended). */
  async writeWaiting(): Promise<void> {
    clearTimeout(this.waitingTimer);
    this.waitingTimer = undefined;
    if (this.waiting.size === 0) return;
    const rows = [...this.waiting];
    this.waiting.clear();
    await inBatches(rows, contractLimits.recoveryReadsMax, ([operationId, row]) => this.publish(operationId, row).catch(() => undefined));
  }

  /**
   * Publishes `row` unless the subject already holds a row of the same or a later revision, or a
   * removal marker (a tombstoned operation's row never comes back).
   */
  private async publish(operationId: string, row: OperationIndexRow | WorkflowIndexRow): Promise<void> {
    const revision = Number(row.revision);
    let known = this.written.get(operationId);
    for (let attempt = 0; attempt < contractLimits.storeCasAttemptsMax; attempt++) {
      if (known && known.revision >= revision) return;
      try {
        const ack = await this.host.publishRow(this.subject(operationId), JSON.stringify(row), known?.seq ?? 0);
        this.written.set(operationId, { seq: ack.seq, revision });
        return;
      } catch (error) {
        if (!(error instanceof JetStreamApiError && wrongSequenceCodes.has(error.code))) throw error;
      }
      const last = await this.host.jsm.streams.getMessage(this.stream, { last_by_subj: this.subject(operationId) });
      known = last
        ? { seq: last.seq, revision: last.header?.get(removedHeader) === '1' ? Number.POSITIVE_INFINITY : Number(storedRevision(last.data)) }
        : undefined;
    }
  }

  /**
   * Removes the operation's row and its open-set marker (a tombstone, or a log that has none): a removal marker replaces
   * it, so every process's view (jetstream-index-feed.ts) sees it go, and no row is written over it.
   */
  async remove(operationId: string): Promise<void> {
    this.host.states.forget(operationId);
    this.written.delete(operationId);
    this.waiting.delete(operationId);
    const marker = natsHeaders();
    marker.set(removedHeader, '1');
    await this.host.js.publish(this.subject(operationId), new Uint8Array(0), { headers: marker, timeout: this.host.requestTimeoutMs });
    await this.host.openSet.remove(operationId);
  }

  /**
   * One page, with this process's waiting rows in it: from the view, made current first
   * (docs/design.md §11), once one runs; before, from the paged snapshot and the rows after it
   * (fromPages), and from a view started then when the pages cannot answer.
   */
  async list(query: IndexQuery): Promise<IndexPage> {
    await this.writeWaiting();
    if (this.feed === undefined) {
      const page = await this.fromPages('operations', query);
      if (page) return page;
    }
    return (await this.view()).view.page(query);
  }

  /**
   * After a workflow instance's transition was stored: the committing side's row, when it gave one.
   * Behind, never wrong. The start's row is published at once (a worker that dies holding a later
   * one leaves the instance listed, as running), and so is an ended instance's; a running
   * instance's row after its start waits up to `rowDelayMs` as an open operation's does (appended),
   * replaced by any later one: an instance that ends within it writes two rows, its start's and its end's.
   */
  async workflowAppended(instanceId: string, stored: StoredTransition, after?: IndexAfter): Promise<void> {
    const row = committedWorkflowRow(instanceId, stored, after);
    if (row) await this.write(instanceId, row, row.status === 'running' && !startsWorkflow(stored.transition)).catch(() => undefined);
  }

  readonly workflow: WorkflowIndexStore = {
    list: async (query) => {
      await this.writeWaiting();
      if (this.feed === undefined) {
        const page = await this.fromPages('workflows', query);
        if (page) return page;
      }
      return (await this.view()).workflowView.page(query);
    },
    // From the view, made current first (as a page): a start's and an end's rows are written at once, never held back.
    countRunning: async (principalId, atMost) => (await this.view()).workflowView.countRunning(principalId, atMost),
    get: async (instanceId) => {
      this.assertOpen();
      await this.writeHeld(instanceId);
      try {
        const last = await this.host.jsm.streams.getMessage(this.stream, { last_by_subj: this.subject(instanceId) });
        const row = last ? parseWorkflowIndexRow(last.data) : undefined;
        return row?.instanceId === instanceId ? row : undefined;
      } catch (error) {
        throw unavailable(`jetstream index: ${error instanceof Error ? error.message : String(error)}`, error);
      }
    },
    put: async (instanceId, row) => {
      this.assertOpen();
      try {
        if (row?.instanceId !== instanceId) return await this.remove(instanceId);
        this.waiting.delete(instanceId);
        // A rebuild replaces whatever is there (a damaged row may claim a later revision).
        const last = await this.host.jsm.streams.getMessage(this.stream, { last_by_subj: this.subject(instanceId) });
        const ack = await this.host.js.publish(this.subject(instanceId), JSON.stringify(row), {
          expect: { lastSubjectSequence: last?.seq ?? 0 },
          timeout: this.host.requestTimeoutMs,
        });
        this.written.set(instanceId, { seq: ack.seq, revision: Number(row.revision) });
      } catch (error) {
        throw unavailable(`jetstream index: ${error instanceof Error ? error.message : String(error)}`, error);
      }
    },
  };

  async get(operationId: string): Promise<OperationIndexRow | undefined> {
    this.assertOpen();
    await this.writeHeld(operationId);
    try {
      const last = await this.host.jsm.streams.getMessage(this.stream, { last_by_subj: this.subject(operationId) });
      const row = last ? parseIndexRow(last.data) : undefined;
      return row?.operationId === operationId ? row : undefined;
    } catch (error) {
      throw unavailable(`jetstream index: ${error instanceof Error ? error.message : String(error)}`, error);
    }
  }

  async rebuild(operationId: string): Promise<OperationIndexRow | undefined> {
    this.assertOpen();
    try {
      this.waiting.delete(operationId);
      const log = await this.host.logOf(operationId);
      const row = log === undefined ? undefined : this.host.states.rowOfLog(operationId, log);
      if (row === undefined) {
        await this.remove(operationId);
        return undefined;
      }
      // A rebuild replaces whatever is there (a damaged row may claim a later revision).
      const last = await this.host.jsm.streams.getMessage(this.stream, { last_by_subj: this.subject(operationId) });
      const ack = await this.host.js.publish(this.subject(operationId), JSON.stringify(row), {
        expect: { lastSubjectSequence: last?.seq ?? 0 },
        timeout: this.host.requestTimeoutMs,
      });
      this.written.set(operationId, { seq: ack.seq, revision: Number(row.revision) });
      await (isSettled(row.phase) ? this.host.openSet.remove(operationId) : this.host.openSet.add(operationId));
      return row;
    } catch (error) {
      throw unavailable(`jetstream index: ${error instanceof Error ? error.message : String(error)}`, error);
    }
  }

  /** Starts the view (a list before it reads the paged snapshot instead) and makes it current. */
  async startView(): Promise<void> {
    await this.writeWaiting();
    await this.view();
  }

  /** A long-running process's view, started before its first page or scrape asks (OperationIndexStore.warm). */
  warm(): Promise<void> {
    return this.startView();
  }

  /** Counted in the view: a seek per reason (index-view.ts). */
  async countStuck(nowMs: number, bounds: StuckBounds): Promise<StuckCounts> {
    await this.writeWaiting();
    return (await this.view()).view.countStuck(nowMs, bounds);
  }

  /** Messages the views of this client have applied (each one started again counts anew): what their upkeep has read. */
  get rowsDelivered(): number {
    return this.retiredDeliveries + (this.started?.messagesApplied ?? 0);
  }

  /** Where snapshots are read and written (jetstream-index-snapshot.ts, jetstream-index-pages.ts); none when off. */
  private get snapshotHost(): (SnapshotHost & { tailMin: number; pageRows: number }) | undefined {
    const snapshots = this.host.snapshots;
    if (!snapshots) return undefined;
    return {
      js: this.host.js,
      jsm: this.host.jsm,
      stream: snapshotStreamName(this.host.streamName),
      subjectPrefix: `${this.host.prefix}.isnap.`,
      requestTimeoutMs: this.host.requestTimeoutMs,
      tailMin: snapshots.tailMin,
      pageRows: snapshots.pageRows,
      ...(snapshots.onFailure ? { onFailure: snapshots.onFailure } : {}),
    };
  }

  /**
   * One page from the paged snapshot (jetstream-index-pages.ts) without a view: the directory,
   * every index message stored after it (the tail, at most tailReadMax; each replaces the pages'
   * row of its id, a removal marker removes it), and the pages whose summary may hold a match,
   * from the cursor on. Undefined when it cannot answer — no snapshot of this stream, a tail
   * longer than the bound, a page gone meanwhile, a failure — and the caller reads the view.
   */
  private async fromPages(kind: 'operations', query: IndexQuery): Promise<IndexPage | undefined>;
  private async fromPages(kind: 'workflows', query: WorkflowIndexQuery): Promise<WorkflowIndexPage | undefined>;
  private async fromPages(kind: 'operations' | 'workflows', query: IndexQuery | WorkflowIndexQuery): Promise<IndexPage | WorkflowIndexPage | undefined> {
    const host = this.snapshotHost;
    if (!host) return undefined;
    this.assertOpen();
    try {
      const info = await this.host.jsm.streams.info(this.stream);
      const directory = await readDirectory(host, info.created, info.state.last_seq);
      if (!directory) return undefined;
      const tail = await this.storedRows(directory.seq + 1, tailReadsPerTailMin * host.tailMin);
      if (!tail) return undefined;
      this.paged.tailRows += tail.length;
      const pages = directory[kind];
      const read = <Row>(n: number): Promise<Row[]> => {
        const page = pages[n] as DirectoryPage;
        const cached = this.pageCache.get(page.id);
        if (cached) return Promise.resolve(cached as Row[]);
        return readPage(host, kind as 'operations', page).then((rows) => {
          this.pageCache.set(page.id, rows);
          return rows as unknown as Row[];
        });
      };
      let page: IndexPage | WorkflowIndexPage;
      if (kind === 'operations') {
        const overlay = new Map<string, OperationIndexRow | null>();
        for (const { id, data } of tail)
          if (!isWorkflowStream(id)) overlay.set(id, indexRowOnSubject(this.rowSubjectPrefix, this.subject(id), data).row ?? null);
        page = await pageOfPages(operationPages, pages, overlay, query as IndexQuery, read<OperationIndexRow>, this.paged);
      } else {
        const overlay = new Map<string, WorkflowIndexRow | null>();
        for (const { id, data } of tail) {
          if (!isWorkflowStream(id)) continue;
          const row = parseWorkflowIndexRow(data);
          overlay.set(id, row?.instanceId === id ? row : null);
        }
        page = await pageOfPages(instancePages, pages, overlay, query as WorkflowIndexQuery, read<WorkflowIndexRow>, this.paged);
      }
      this.paged.lists++;
      return page;
    } catch (error) {
      if (!(error instanceof PageGone)) host.onFailure?.('reading', error);
      return undefined;
    }
  }

  /**
   * The index messages stored from `startSeq` on (each subject's last: its row, or a removal
   * marker); undefined when there are more than `max`.
   */
  private async storedRows(startSeq: number, max: number): Promise<{ id: string; data: Uint8Array }[] | undefined> {
    const messages: { id: string; data: Uint8Array }[] = [];
    const read = await this.scanRows({ deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: startSeq }, max, (subject, data) =>
      messages.push({ id: subject.slice(this.rowSubjectPrefix.length), data }),
    );
    return read ? messages : undefined;
  }

  /**
   * Every message on the row subjects an ephemeral consumer starting at `from` delivers, pulled in
   * batches and handed to `each`, the consumer deleted afterwards; false, with nothing pulled,
   * when more than `max` are pending. Throws what failed.
   */
  private async scanRows(
    from: { deliver_policy: DeliverPolicy; opt_start_seq?: number },
    max: number,
    each: (subject: string, data: Uint8Array) => void,
  ): Promise<boolean> {
    const { jsm, js } = this.host;
    const info = await jsm.consumers.add(this.stream, {
      // Row subjects only, as the view reads them (jetstream-index-feed.ts): one token after `idx`.
      filter_subject: `${this.host.prefix}.idx.*`,
      ...from,
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: nanos(Math.max(10_000, 4 * this.host.requestTimeoutMs)),
    });
    try {
      if (info.num_pending > max) return false;
      const consumer = await js.consumers.get(this.stream, info.name);
      let delivered = 0;
      while (delivered < info.num_pending) {
        const batch = await consumer.fetch({
          max_messages: Math.min(contractLimits.jetstreamScanBatchMax, info.num_pending - delivered),
          expires: Math.max(1000, this.host.requestTimeoutMs),
        });
        const before = delivered;
        for await (const msg of batch) {
          delivered++;
          each(msg.subject, msg.data);
        }
        if (delivered === before) throw new Error(`the index read stopped after ${delivered} of ${info.num_pending} rows`);
      }
      return true;
    } finally {
      void jsm.consumers.delete(this.stream, info.name).catch(() => undefined);
    }
  }

  /** Rows the current view started from, read from a snapshot (0: it read every row). */
  get rowsFromSnapshot(): number {
    return this.started?.rowsFromSnapshot ?? 0;
  }

  /** Resolves when the view writes no snapshot (tests and benches wait for one to be stored). */
  async snapshotIdle(): Promise<void> {
    await this.started?.snapshotIdle();
  }

  /** Rows pages have walked in the view (their cost in memory), for tests and benches. */
  get rowsWalked(): number {
    return this.started?.view.rowsWalked ?? 0;
  }

  /** Writes the waiting rows and stops the view's consumer (the store is closing). */
  async close(): Promise<void> {
    await this.writeWaiting();
    const feed = this.feed;
    this.feed = undefined;
    this.started = undefined;
    await (await feed?.catch(() => undefined))?.close();
  }

  /**
   * The view, holding every row stored before this call. Started by the first call; started again
   * when its feed ended (its consumer could not be recreated) or the index stream was created
   * again since (StaleFeed). A request that failed (the server unreachable, a wait that timed
   * out) leaves the feed running: its consumer resumes where it stopped.
   */
  private async view(): Promise<{ view: IndexView; workflowView: WorkflowIndexView }> {
    this.assertOpen();
    for (let attempt = 0; ; attempt++) {
      const snapshots = this.snapshotHost;
      const starting = (this.feed ??= JetStreamIndexFeed.start({
        js: this.host.js,
        jsm: this.host.jsm,
        stream: this.stream,
        subjectPrefix: this.rowSubjectPrefix,
        requestTimeoutMs: this.host.requestTimeoutMs,
        ...(snapshots ? { snapshots } : {}),
      }));
      let feed: JetStreamIndexFeed | undefined;
      try {
        feed = await starting;
        this.started = feed;
        await feed.current();
        feed.maybeSnapshot();
        return feed;
      } catch (error) {
        const stale = error instanceof StaleFeed;
        if (this.feed === starting && (feed === undefined || feed.ended || stale)) {
          this.feed = undefined;
          this.started = undefined;
          this.retiredDeliveries += feed?.messagesApplied ?? 0;
          void feed?.close();
        }
        if (stale && attempt === 0) continue;
        if (error instanceof AdapterError) throw error;
        throw unavailable(`jetstream index: ${error instanceof Error ? error.message : String(error)}`, error);
      }
    }
  }

  /**
   * The operations the open set marks (jetstream-open-set.ts), less those whose row is settled:
   * one row read per marked operation, whatever the history. An admission whose row was never
   * written (a crash between the two publishes) is marked, has no row, and is listed (its row
   * written from its log). Until the open set is complete — a store written before it existed —
   * as before: the live operations less those whose row is settled, every row read; each listed
   * operation is then marked and the set recorded complete.
   */
  async *openOperationIds(): AsyncIterable<string> {
    this.assertOpen();
    let complete: boolean;
    try {
      complete = await this.host.openSet.complete();
    } catch (error) {
      throw unavailable(`jetstream open set: ${error instanceof Error ? error.message : String(error)}`, error);
    }
    yield* complete ? await this.openFromMarkers() : await this.openFromHistory();
  }

  /** The marked operations that may still be open; markers of settled operations are removed. */
  private async openFromMarkers(): Promise<string[]> {
    try {
      const marked = await this.host.openSet.ids();
      // A marked operation that cannot be checked is listed: the coordinator's read of it decides.
      const open = await inBatches(marked, contractLimits.recoveryReadsMax, (operationId) => this.stillOpen(operationId).catch(() => true));
      return marked.filter((_, i) => open[i]);
    } catch (error) {
      throw unavailable(`jetstream open set: ${error instanceof Error ? error.message : String(error)}`, error);
    }
  }

  /**
   * Whether a marked operation may be open. A settled row says no. Otherwise (no row, or an open
   * one, which may be behind: a crash after a settled append, before its row) the log decides,
   * and its row is written when it is newer. No log yet: listed (a create may be under way; the
   * coordinator finds nothing to resume). Settled, or a log with no admission applied: the
   * marker goes.
   */
  private async stillOpen(operationId: string): Promise<boolean> {
    const stored = await this.get(operationId);
    if (stored === undefined || !isSettled(stored.phase)) {
      const log = await this.host.logOf(operationId);
      if (log === undefined) return true;
      const row = this.host.states.rowOfLog(operationId, log);
      if (row) await this.publish(operationId, row);
      if (row && !isSettled(row.phase)) return true;
    }
    await this.host.openSet.remove(operationId);
    return false;
  }

  /** Before the open set is complete: every live operation without a settled row, each then marked. */
  private async openFromHistory(): Promise<string[]> {
    const open: string[] = [];
    for await (const operationId of mayBeOpen(this.host.operationIds(), await this.allRows())) open.push(operationId);
    try {
      await inBatches(open, contractLimits.recoveryReadsMax, (operationId) => this.host.openSet.add(operationId));
      await this.host.openSet.markComplete();
    } catch (error) {
      throw unavailable(`jetstream open set: ${error instanceof Error ? error.message : String(error)}`, error);
    }
    return open;
  }

  /** Removes a settled operation's marker; a failure leaves it for recovery to remove. */
  private async unmark(operationId: string): Promise<void> {
    await this.host.openSet.remove(operationId).catch(() => undefined);
  }

  private assertOpen(): void {
    if (this.host.closed()) throw unavailable('store is closed');
  }

  /** Every operation's last row: an ephemeral consumer, last per subject, pulled in batches. */
  private async allRows(): Promise<OperationIndexRow[]> {
    this.assertOpen();
    const rows: OperationIndexRow[] = [];
    try {
      await this.scanRows({ deliver_policy: DeliverPolicy.LastPerSubject }, Number.POSITIVE_INFINITY, (subject, data) => {
        const { row } = indexRowOnSubject(this.rowSubjectPrefix, subject, data);
        if (row) rows.push(row);
      });
    } catch (error) {
      throw unavailable(`jetstream index: ${error instanceof Error ? error.message : String(error)}`, error);
    }
    return rows;
  }
}

/** The log revision a stored row (an operation's or an instance's) was derived at; 0 when the bytes are no row. */
function storedRevision(data: Uint8Array): string {
  return parseIndexRow(data)?.revision ?? parseWorkflowIndexRow(data)?.revision ?? '0';
}
