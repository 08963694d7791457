/**
 * The EventStoreDB operations index held in memory (index-view.ts), fed by a subscription to
 * `$all` filtered on the index streams' prefix (`<prefix>-idx-`): the same design as JetStream's
 * (jetstream-index-feed.ts, docs/decisions/jetstream-list-view.md).
 *
 * Each index stream's events are its row's versions, then possibly a removal marker; applied in
 * `$all` order, the last one an operation's stream holds wins. The subscription starts at the
 * beginning of `$all`: a new feed reads every index event still stored (a stream's older events
 * until a scavenge removes them past maxCount 1).
 *
 * Exact after any process writes: `current()` reads the last position of `$all` (one read) and
 * waits until every index event up to it is applied. The subscription tells how far it got with
 * each event and with the server's checkpoints; when it has not reached the position within
 * `gapWaitMs` (a checkpoint comes only after a window of filtered-out events, so a quiet store
 * may not send one), the events between where it got and the position are read directly (at most
 * `gapReadMax`) and the index ones among them applied. An operation's event is applied only when
 * its position is past the last one applied for it, so the subscription delivering an event the
 * direct read already applied changes nothing.
 *
 * Untested here: no EventStoreDB server runs on the development machines (docs/design.md §8).
 */
import {
  END,
  FORWARDS,
  BACKWARDS,
  START,
  streamNameFilter,
  type AllStreamRecordedEvent,
  type AllStreamResolvedEvent,
  type EventStoreDBClient,
  type Position,
} from '@eventstore/db-client';
import { unavailable } from '../../contract/errors.js';
import { IndexView } from './index-view.js';
import { indexRowOf } from './index-row.js';
import { WorkflowIndexView } from './workflow-index-view.js';
import { isWorkflowStream, workflowIndexRowOf } from './workflow-rows.js';

/** How long `current()` lets the subscription catch up before reading the gap itself. */
const gapWaitMs = 50;
/** The most events a direct read of the gap takes; a longer gap is the subscription's to catch up. */
const gapReadMax = 256;
const progressCheckMs = 25;

export const indexRowType = 'convoke.index-row';
export const indexRemovedType = 'convoke.index-removed';

export interface EsdbIndexFeedHost {
  client: EventStoreDBClient;
  /** Index streams are `<streamPrefix><operationId>` (`<prefix>-idx-`). */
  streamPrefix: string;
  /** How long a wait may go without progress before the view is reported unavailable (ms). */
  deadline: number;
}

const before = (a: Position, b: Position): boolean => a.commit < b.commit || (a.commit === b.commit && a.prepare < b.prepare);

export class EventStoreDbIndexFeed {
  readonly view = new IndexView();
  /** Workflow instances' rows (`<prefix>-idx-wf…`), beside the operations'. */
  readonly workflowView = new WorkflowIndexView();
  /** Every index event up to this position is applied. */
  private caught: Position | undefined;
  /** Where the subscription got (its events and checkpoints): a direct read of the gap starts here. */
  private subscribed: Position | undefined;
  /** Per operation, the position of the event applied last. */
  private readonly appliedAt = new Map<string, Position>();
  messagesApplied = 0;
  /** Why the feed stopped (its subscription ended, an update failed, it was closed). */
  private failure: Error | undefined;
  private stopSubscription: () => Promise<void> = async () => undefined;

  private constructor(private readonly host: EsdbIndexFeedHost) {}

  static start(host: EsdbIndexFeedHost): EventStoreDbIndexFeed {
    const feed = new EventStoreDbIndexFeed(host);
    const subscription = host.client.subscribeToAll({
      fromPosition: START,
      filter: streamNameFilter({ prefixes: [host.streamPrefix], checkpointInterval: 1, checkpointReached: (_s, position) => feed.reached(position) }),
    });
    subscription.on('data', (resolved: AllStreamResolvedEvent) => {
      if (resolved.event) {
        feed.apply(resolved.event);
        feed.reached(resolved.event.position);
      }
    });
    subscription.on('error', (error: Error) => feed.end(error));
    subscription.on('end', () => feed.end(new Error('the index subscription ended')));
    feed.stopSubscription = () => subscription.unsubscribe();
    return feed;
  }

  /** Resolves once every index event stored before the call is applied; `unavailable` when that cannot be shown. */
  async current(): Promise<void> {
    this.assertRunning();
    const target = await this.lastPosition();
    if (target === undefined || this.passed(target)) return;
    const startedMs = Date.now();
    let progressAtMs = startedMs;
    let seen = this.messagesApplied;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, progressCheckMs));
      this.assertRunning();
      if (this.passed(target)) return;
      const nowMs = Date.now();
      if (this.messagesApplied !== seen) [seen, progressAtMs] = [this.messagesApplied, nowMs];
      if (nowMs - startedMs >= gapWaitMs && (await this.readGap(target))) return;
      if (nowMs - progressAtMs > this.host.deadline) throw unavailable('eventstoredb index: the index subscription stopped short of the last position');
    }
  }

  /** Whether the feed stopped for good (a new one must start); a failed `current()` alone does not say so. */
  get ended(): boolean {
    return this.failure !== undefined;
  }

  async close(): Promise<void> {
    this.end(new Error('the index feed was closed'));
    await this.stopSubscription().catch(() => undefined);
  }

  /** One index event: the operation's row, or (a removal marker, anything else) none. Older than what was applied: nothing. */
  private apply(event: AllStreamRecordedEvent): void {
    if (!event.streamId.startsWith(this.host.streamPrefix)) return;
    const operationId = event.streamId.slice(this.host.streamPrefix.length);
    const held = this.appliedAt.get(operationId);
    if (held !== undefined && !before(held, event.position)) return;
    this.appliedAt.set(operationId, event.position);
    try {
      if (isWorkflowStream(operationId)) {
        const instanceRow = event.type === indexRowType && event.isJson ? workflowIndexRowOf(event.data) : undefined;
        if (instanceRow?.instanceId === operationId) this.workflowView.apply(instanceRow);
        else this.workflowView.remove(operationId);
      } else {
        const row = event.type === indexRowType && event.isJson ? indexRowOf(event.data) : undefined;
        if (row !== undefined && row.operationId === operationId) this.view.apply(row);
        else this.view.remove(operationId);
      }
    } catch (error) {
      this.end(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    this.messagesApplied++;
  }

  /** The subscription got to `position` (an event or a checkpoint), in order. */
  private reached(position: Position): void {
    if (this.subscribed === undefined || before(this.subscribed, position)) this.subscribed = position;
    if (this.caught === undefined || before(this.caught, position)) this.caught = position;
  }

  private passed(target: Position): boolean {
    return this.caught !== undefined && !before(this.caught, target);
  }

  /** The position of the last event in `$all`; undefined when it is empty. */
  private async lastPosition(): Promise<Position | undefined> {
    for await (const resolved of this.host.client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1, deadline: this.host.deadline })) {
      if (resolved.event) return resolved.event.position;
    }
    return undefined;
  }

  /**
   * Reads `$all` from where the subscription got up to `target` and applies the index events
   * there; answers whether that reached `target` (a gap longer than gapReadMax is left to the
   * subscription).
   */
  private async readGap(target: Position): Promise<boolean> {
    let last: Position | undefined;
    const from = this.subscribed ?? START;
    for await (const resolved of this.host.client.readAll({ direction: FORWARDS, fromPosition: from, maxCount: gapReadMax, deadline: this.host.deadline })) {
      const event = resolved.event;
      if (!event || before(target, event.position)) break;
      this.apply(event);
      last = event.position;
    }
    if (last === undefined || before(last, target)) return this.passed(target);
    if (this.caught === undefined || before(this.caught, last)) this.caught = last;
    return true;
  }

  private assertRunning(): void {
    if (this.failure) throw unavailable(`eventstoredb index: ${this.failure.message}`, this.failure);
  }

  private end(error: Error): void {
    this.failure ??= error;
  }
}
