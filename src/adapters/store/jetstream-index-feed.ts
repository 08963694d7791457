/**
 * The JetStream operations index held in memory (index-view.ts), fed by an ordered push consumer
 * over the index stream (docs/decisions/jetstream-list-view.md).
 *
 * The index stream keeps one message per operation subject (max_msgs_per_subject 1): the row, or
 * a removal marker once the operation is tombstoned. So delivering every message of the stream
 * in sequence order, then every new one as it is stored, gives each operation's latest row;
 * applied in that order the view is, at every moment, the index as the stream held it at the
 * last sequence applied. The consumer filters on `<prefix>.idx.*`: one token after `idx`, the
 * subjects only the store's user can publish (see ensureIndexStream).
 *
 * Exact after any process writes: `current()` asks the stream its last sequence (one request)
 * and waits until the view has applied it, so a page reflects every row stored before it was
 * asked for, whoever stored it. A stream created again since the feed started (deleted and
 * recreated: its sequences restart) is reported stale and the caller starts a new feed.
 *
 * The cost moves to the start and to memory: a new feed without a snapshot reads every row once
 * (5–8 s and 60–110 MiB of heap at 100 000 operations on the loaded development machine,
 * docs/performance.md), after which a page costs the one request plus the rows it walks in
 * memory. With snapshots (jetstream-index-snapshot.ts) a feed starts from the newest one and
 * reads only the rows stored after it; a feed whose view has applied enough rows since its
 * snapshot writes a new one, so the next start's tail stays short.
 */
import { DeliverPolicy, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { unavailable } from '../../contract/errors.js';
import type { OperationIndexRow } from '../../events/operation-index.js';
import { IndexView } from './index-view.js';
import { indexRowOnSubject } from './index-row.js';
import { WorkflowIndexView } from './workflow-index-view.js';
import { readSnapshot, type IndexSnapshot, type SnapshotHost } from './jetstream-index-snapshot.js';
import { readAllPages, readDirectory, writePages, type WrittenPages } from './jetstream-index-pages.js';
import { isWorkflowStream, parseWorkflowIndexRow } from './workflow-rows.js';

/** How often a wait for the view checks that deliveries still come. */
const progressCheckMs = 25;
/** How long without a delivery before a wait asks whether its target still exists. */
const stallCheckAfterMs = 50;

export interface IndexFeedHost {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** The index stream. */
  stream: string;
  /** Row subjects are `<subjectPrefix><operationId>` (`<prefix>.idx.`). */
  subjectPrefix: string;
  /** How long a wait may go without a delivery before the view is reported unavailable. */
  requestTimeoutMs: number;
  /** Where snapshots are read and written; none: every start reads every row. */
  snapshots?: SnapshotHost & {
    /** Rows applied since the last snapshot before a new one is written: what bounds a one-shot reader's tail. */
    tailMin: number;
    /** Rows per page of a paged snapshot (jetstream-index-pages.ts). */
    pageRows: number;
  };
}

/** The index stream was created again since the feed started: its view is of a stream that is gone. */
export class StaleFeed extends Error {
  override readonly name = 'StaleFeed';
}

interface Waiter {
  seq: number;
  resolve(): void;
}

export class JetStreamIndexFeed {
  readonly view = new IndexView();
  /** Workflow instances' rows (`<prefix>.idx.wf…`), beside the operations'. */
  readonly workflowView = new WorkflowIndexView();
  /** The stream sequence of the last message applied. */
  private appliedSeq = 0;
  /** Messages applied since the feed started (each a row or a removal). */
  messagesApplied = 0;
  /** Rows the view started from, read from a snapshot (0: it read the whole stream). */
  rowsFromSnapshot = 0;
  /** The sequence of the snapshot this feed started from or last wrote (0: none). */
  private snapshotSeq = 0;
  /** A snapshot being written, if any. */
  private snapshotting: Promise<void> | undefined;
  /** The pages of the generation this feed started from or last wrote: unchanged pages are named again, not written. */
  private written: WrittenPages | undefined;
  /** The stored directory names a page that is gone: the next generation replaces it whoever wrote it. */
  private directoryBroken = false;
  private readonly waiters = new Set<Waiter>();
  /** Why the feed stopped (its consumer ended, an update failed, it was closed): it is not current again. */
  private failure: Error | undefined;
  private stopConsumer: () => Promise<void> = async () => undefined;
  /**
   * One string per distinct principal, contract, version and interaction: the rows share them
   * instead of each holding its own copy. Few distinct values (they are what lists filter by).
   */
  private readonly interned = new Map<string, string>();

  private constructor(
    private readonly host: IndexFeedHost,
    /** The stream's creation instant as the server reported it when the feed started. */
    private readonly created: string,
  ) {}

  static async start(host: IndexFeedHost): Promise<JetStreamIndexFeed> {
    const info = await host.jsm.streams.info(host.stream);
    const feed = new JetStreamIndexFeed(host, info.created);
    const snapshot = host.snapshots ? await feed.readSnapshot(host.snapshots, info.created, info.state.last_seq) : undefined;
    if (snapshot) feed.startFrom(snapshot);
    const consumer = await host.js.consumers.getPushConsumer(host.stream, {
      filter_subjects: `${host.subjectPrefix}*`,
      ...(snapshot ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: snapshot.seq + 1 } : { deliver_policy: DeliverPolicy.All }),
    });
    const messages = await consumer.consume({ callback: (msg) => feed.deliver(msg) });
    feed.stopConsumer = async () => void (await messages.close());
    messages.closed().then(
      () => feed.end(new Error('the index feed ended')),
      (error: unknown) => feed.end(error instanceof Error ? error : new Error(String(error))),
    );
    return feed;
  }

  /**
   * The newest snapshot: a paged one (its pages kept for the next generation), else a version 2
   * body; undefined when there is none usable (a page gone: a newer generation replaced it).
   */
  private async readSnapshot(host: SnapshotHost, created: string, lastSeq: number): Promise<IndexSnapshot | undefined> {
    try {
      const directory = await readDirectory(host, created, lastSeq);
      if (directory) {
        const { snapshot, written } = await readAllPages(host, directory);
        this.written = written;
        return snapshot;
      }
    } catch (error) {
      if (error instanceof Error && error.name === 'PageGone') this.directoryBroken = true;
      else host.onFailure?.('reading', error);
      return undefined;
    }
    return readSnapshot(host, created, lastSeq);
  }

  /**
   * Resolves once the view holds every row the stream held when called; throws StaleFeed when
   * the stream was created again, an AdapterError `unavailable` when the feed ended or stopped
   * delivering for requestTimeoutMs while behind.
   */
  async current(): Promise<void> {
    if (this.failure) throw unavailable(`jetstream index: ${this.failure.message}`, this.failure);
    const info = await this.host.jsm.streams.info(this.host.stream);
    if (info.created !== this.created) throw new StaleFeed(`stream ${this.host.stream} was created again at ${info.created}`);
    if (this.appliedSeq >= info.state.last_seq) return;
    await this.reach(info.state.last_seq);
  }

  /** Whether the feed stopped for good (a new one must start); a failed `current()` alone does not say so. */
  get ended(): boolean {
    return this.failure !== undefined;
  }

  /**
   * Writes a snapshot of the view (a generation of pages, jetstream-index-pages.ts) in the
   * background when it has applied the host's tailMin rows since the last one: a one-shot
   * reader's tail is bounded by the rows applied, not by the rows held (pages whose rows did not
   * change are not written again). The rows and the sequence are taken together, between two
   * deliveries, so the snapshot is the view at that sequence.
   */
  maybeSnapshot(): void {
    const snapshots = this.host.snapshots;
    if (!snapshots || this.snapshotting || this.failure) return;
    const tail = this.appliedSeq - this.snapshotSeq;
    if (tail < snapshots.tailMin) return;
    const snapshot = { seq: this.appliedSeq, operations: this.view.heldRows(), workflows: this.workflowView.heldRows() };
    // A failed write is tried again only after as many rows again.
    this.snapshotSeq = snapshot.seq;
    this.snapshotting = writePages(snapshots, this.created, snapshot, this.written, { ...snapshots, replace: this.directoryBroken })
      .then((written) => {
        if (!written) return;
        this.written = written;
        this.directoryBroken = false;
      })
      .catch((error: unknown) => snapshots.onFailure?.('writing', error))
      .finally(() => (this.snapshotting = undefined));
  }

  /** Resolves when no snapshot is being written. */
  async snapshotIdle(): Promise<void> {
    await this.snapshotting;
  }

  async close(): Promise<void> {
    // A snapshot under way is finished: a short-lived process (convoke list) writes the one the next start reads.
    await this.snapshotting;
    this.end(new Error('the index feed was closed'));
    await this.stopConsumer().catch(() => undefined);
  }

  /** The view as the snapshot holds it, at its sequence: the consumer then delivers from the next one. */
  private startFrom(snapshot: IndexSnapshot): void {
    this.view.load(snapshot.operations.map((row) => this.intern(row)));
    this.workflowView.load(snapshot.workflows);
    this.appliedSeq = snapshot.seq;
    this.snapshotSeq = snapshot.seq;
    this.rowsFromSnapshot = snapshot.operations.length + snapshot.workflows.length;
  }

  /** One stored message, in stream order: the operation's row, or (a removal marker, a damaged row) none. */
  deliver(msg: Pick<JsMsg, 'seq' | 'subject' | 'data'>): void {
    const { operationId, row } = indexRowOnSubject(this.host.subjectPrefix, msg.subject, msg.data);
    try {
      if (isWorkflowStream(operationId)) {
        const instanceRow = parseWorkflowIndexRow(msg.data);
        if (instanceRow?.instanceId === operationId) this.workflowView.apply(instanceRow);
        else this.workflowView.remove(operationId);
      } else if (row !== undefined) this.view.apply(this.intern(row));
      else this.view.remove(operationId);
    } catch (error) {
      // A view that failed half-way through an update is not trusted again: the next read starts a new feed.
      this.end(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    this.messagesApplied++;
    if (msg.seq > this.appliedSeq) this.appliedSeq = msg.seq;
    if (this.waiters.size > 0) for (const w of this.waiters) if (w.seq <= this.appliedSeq) this.settle(w);
  }

  /**
   * Waits until `seq` is applied. While deliveries come the wait goes on (a new feed reads the
   * whole stream first); when none came for a while, the stream's last message that still
   * exists is asked for: a target removed before it was delivered (purged) is then already
   * passed. No delivery for requestTimeoutMs while behind is `unavailable`.
   */
  private reach(seq: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let seen = this.messagesApplied;
      let stalledMs = 0;
      let checking = false;
      const waiter: Waiter = {
        seq,
        resolve: () => {
          clearInterval(timer);
          resolve();
        },
      };
      const fail = (error: Error) => {
        this.waiters.delete(waiter);
        clearInterval(timer);
        reject(error);
      };
      const timer = setInterval(() => {
        if (this.failure) return fail(unavailable(`jetstream index: ${this.failure.message}`, this.failure));
        if (this.messagesApplied !== seen) {
          seen = this.messagesApplied;
          stalledMs = 0;
          return;
        }
        stalledMs += progressCheckMs;
        if (stalledMs > this.host.requestTimeoutMs)
          return fail(unavailable(`jetstream index: no row delivered for ${stalledMs} ms, ${seq - this.appliedSeq} behind`));
        if (checking || stalledMs < stallCheckAfterMs) return;
        checking = true;
        this.lastStoredSeq()
          .then((last) => {
            if (last <= this.appliedSeq) this.settle(waiter);
          })
          .catch(() => undefined)
          .finally(() => (checking = false));
      }, progressCheckMs);
      this.waiters.add(waiter);
      if (seq <= this.appliedSeq) this.settle(waiter);
    });
  }

  /** The sequence of the stream's last row or marker that still exists (0 when none). */
  private async lastStoredSeq(): Promise<number> {
    const last = await this.host.jsm.streams.getMessage(this.host.stream, { last_by_subj: `${this.host.subjectPrefix}*` });
    return last?.seq ?? 0;
  }

  private settle(waiter: Waiter): void {
    if (this.waiters.delete(waiter)) waiter.resolve();
  }

  private end(error: Error): void {
    this.failure ??= error;
  }

  private intern(row: OperationIndexRow): OperationIndexRow {
    const one = (s: string): string => {
      const held = this.interned.get(s);
      if (held !== undefined) return held;
      this.interned.set(s, s);
      return s;
    };
    row.principalId = one(row.principalId);
    row.contractId = one(row.contractId);
    row.contractVersion = one(row.contractVersion);
    row.interaction = one(row.interaction);
    return row;
  }
}
