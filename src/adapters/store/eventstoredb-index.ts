/**
 * The EventStoreDB store's operations index: one stream per operation, `<prefix>-idx-<id>`, whose
 * last event is its row (type `convoke.index-row`), or once the operation is tombstoned a removal
 * marker (type `convoke.index-removed`) that no later row replaces; the stream's metadata keeps
 * only the last event (maxCount 1). As on JetStream (jetstream-index.ts) the row is written right
 * after the append it follows is stored and its fold outcome known, with the stream's revision as
 * a compare-and-swap and never over a row of a later log revision; a crash in between leaves it
 * behind until the next append or `convoke replay --fix-index`.
 *
 * Workflow instances' rows (workflow-rows.ts) are index streams too, `<prefix>-idx-<instanceId>`
 * (`wf…` ids), written from the committing side's row under the same compare-and-swap and held
 * by the same feed in a view of their own (workflow-index-view.ts).
 *
 * Listing and the stuck counts read an in-memory view of the index streams, kept by a filtered
 * subscription to `$all` and made current before each read (eventstoredb-index-feed.ts): a page
 * costs one read of `$all`'s last position (and, when the subscription lags, a bounded read of
 * the gap) plus the rows it walks in memory. No EventStoreDB server runs on the development
 * machines; this module is type-checked and its conformance run
 * (test/conformance/store-eventstoredb.test.ts) needs CONVOKE_ESDB_URL.
 */
import {
  ANY,
  BACKWARDS,
  END,
  NO_STREAM,
  StreamDeletedError,
  StreamNotFoundError,
  WrongExpectedVersionError,
  jsonEvent,
  type EventStoreDBClient,
  type JSONType,
} from '@eventstore/db-client';
import { BoundedMap } from '../../contract/bounded-map.js';
import { AdapterError, unavailable } from '../../contract/errors.js';
import { limits as contractLimits } from '../../contract/limits.js';
import { type IndexPage, type IndexQuery, type OperationIndexRow, type StuckBounds, type StuckCounts } from '../../events/operation-index.js';
import type { StoredTransition } from '../../events/types.js';
import type { IndexStates } from './index-states.js';
import { indexRowOf } from './index-row.js';
import type { IndexView } from './index-view.js';
import { EventStoreDbIndexFeed, indexRemovedType, indexRowType } from './eventstoredb-index-feed.js';
import type { IndexAfter, OperationIndexStore, WorkflowIndexStore } from './types.js';
import type { WorkflowIndexRow } from '../../events/workflow-index.js';
import type { WorkflowIndexView } from './workflow-index-view.js';
import { committedWorkflowRow, workflowIndexRowOf } from './workflow-rows.js';

export interface EventStoreDbIndexHost {
  client: EventStoreDBClient;
  prefix: string;
  deadline: number;
  states: IndexStates;
  closed(): boolean;
  /** The operation's log, or undefined when it has none (missing, tombstoned). */
  logOf(operationId: string): Promise<StoredTransition[] | undefined>;
  /** The live operation ids. */
  operationIds(): AsyncIterable<string>;
}

export class EventStoreDbOperationIndex implements OperationIndexStore {
  /** The index stream's last event revision and that row's log revision, per operation, as this client knows them. */
  private readonly written = new BoundedMap<string, { eventRevision: bigint; revision: number }>(4096);
  /** The view's feed, from the first list or stuck count on. */
  private feed: EventStoreDbIndexFeed | undefined;

  constructor(private readonly host: EventStoreDbIndexHost) {}

  private stream(operationId: string): string {
    return `${this.host.prefix}-idx-${operationId}`;
  }

  /** After an append was stored: the row from the held state, or from the log read back. Failures leave the row behind. */
  async appended(operationId: string, previousRevision: string | undefined, stored: StoredTransition, after?: IndexAfter): Promise<void> {
    try {
      const row = await this.host.states.rowAfterStored(operationId, previousRevision, stored, () => this.host.logOf(operationId), after);
      if (row) await this.publish(operationId, row, false);
    } catch {
      // Behind, never wrong: see the header.
    }
  }

  private async publish(operationId: string, row: OperationIndexRow | WorkflowIndexRow, replace: boolean): Promise<void> {
    const revision = Number(row.revision);
    let known = this.written.get(operationId) ?? (await this.last(operationId));
    for (let attempt = 0; attempt < contractLimits.storeCasAttemptsMax; attempt++) {
      if (known && known.revision >= revision && !replace) return;
      try {
        const result = await this.host.client.appendToStream(this.stream(operationId), jsonEvent({ type: indexRowType, data: row as unknown as JSONType }), {
          expectedRevision: known ? known.eventRevision : NO_STREAM,
          deadline: this.host.deadline,
        });
        if (!known) await this.host.client.setStreamMetadata(this.stream(operationId), { maxCount: 1 }, { deadline: this.host.deadline });
        this.written.set(operationId, { eventRevision: result.nextExpectedRevision, revision });
        return;
      } catch (error) {
        if (!(error instanceof WrongExpectedVersionError)) throw error;
      }
      known = await this.last(operationId);
    }
  }

  /** The index stream's last event: its row, or (a removal marker) a revision no row passes. */
  private async last(
    operationId: string,
  ): Promise<{ eventRevision: bigint; revision: number; row?: OperationIndexRow; instanceRow?: WorkflowIndexRow } | undefined> {
    try {
      for await (const resolved of this.host.client.readStream(this.stream(operationId), {
        direction: BACKWARDS,
        fromRevision: END,
        maxCount: 1,
        deadline: this.host.deadline,
      })) {
        const event = resolved.event;
        if (!event) continue;
        if (event.type === indexRemovedType) return { eventRevision: event.revision, revision: Number.POSITIVE_INFINITY };
        const row = event.type === indexRowType && event.isJson ? indexRowOf(event.data) : undefined;
        const instanceRow = event.type === indexRowType && event.isJson ? workflowIndexRowOf(event.data) : undefined;
        return {
          eventRevision: event.revision,
          revision: Number(row?.revision ?? instanceRow?.revision ?? 0),
          ...(row && row.operationId === operationId ? { row } : {}),
          ...(instanceRow && instanceRow.instanceId === operationId ? { instanceRow } : {}),
        };
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError || error instanceof StreamDeletedError) return undefined;
      throw error;
    }
    return undefined;
  }

  /**
   * Removes the operation's row (a tombstone, or a log that has none): a removal marker follows
   * it, so every process's view sees it go, and no row is written after it.
   */
  async remove(operationId: string): Promise<void> {
    this.host.states.forget(operationId);
    this.written.delete(operationId);
    const stream = this.stream(operationId);
    const existed = (await this.last(operationId)) !== undefined;
    await this.host.client.appendToStream(stream, jsonEvent({ type: indexRemovedType, data: { operationId } }), {
      expectedRevision: ANY,
      deadline: this.host.deadline,
    });
    if (!existed) await this.host.client.setStreamMetadata(stream, { maxCount: 1 }, { deadline: this.host.deadline });
  }

  /** One page from the view, made current first (docs/design.md §11). */
  async list(query: IndexQuery): Promise<IndexPage> {
    return (await this.view()).view.page(query);
  }

  /** After a workflow instance's transition was stored: the committing side's row, when it gave one. Behind, never wrong. */
  async workflowAppended(instanceId: string, stored: StoredTransition, after?: IndexAfter): Promise<void> {
    const row = committedWorkflowRow(instanceId, stored, after);
    if (row) await this.publish(instanceId, row, false).catch(() => undefined);
  }

  readonly workflow: WorkflowIndexStore = {
    list: async (query) => (await this.view()).workflowView.page(query),
    countRunning: async (principalId, atMost) => (await this.view()).workflowView.countRunning(principalId, atMost),
    get: async (instanceId) => this.guarded(async () => (await this.last(instanceId))?.instanceRow),
    put: async (instanceId, row) =>
      this.guarded(async () => {
        if (row?.instanceId === instanceId) await this.publish(instanceId, row, true);
        else await this.remove(instanceId);
      }),
  };

  async get(operationId: string): Promise<OperationIndexRow | undefined> {
    return this.guarded(async () => (await this.last(operationId))?.row);
  }

  async rebuild(operationId: string): Promise<OperationIndexRow | undefined> {
    return this.guarded(async () => {
      const log = await this.host.logOf(operationId);
      const row = log === undefined ? undefined : this.host.states.rowOfLog(operationId, log);
      if (row === undefined) await this.remove(operationId);
      else await this.publish(operationId, row, true);
      return row;
    });
  }

  /** Counted in the view: a seek per reason (index-view.ts). */
  async countStuck(nowMs: number, bounds: StuckBounds): Promise<StuckCounts> {
    return (await this.view()).view.countStuck(nowMs, bounds);
  }

  /** Stops the view's subscription (the store is closing). */
  async close(): Promise<void> {
    const feed = this.feed;
    this.feed = undefined;
    await feed?.close();
  }

  /**
   * The view, holding every row stored before this call; started by the first call, again after
   * its subscription ended. A read that failed (the server unreachable, a wait that timed out)
   * leaves the feed running.
   */
  private async view(): Promise<{ view: IndexView; workflowView: WorkflowIndexView }> {
    return this.guarded(async () => {
      const feed = (this.feed ??= EventStoreDbIndexFeed.start({
        client: this.host.client,
        streamPrefix: `${this.host.prefix}-idx-`,
        deadline: this.host.deadline,
      }));
      try {
        await feed.current();
        return feed;
      } catch (error) {
        if (feed.ended && this.feed === feed) {
          this.feed = undefined;
          await feed.close();
        }
        throw error;
      }
    });
  }

  /** Every live operation: a row here costs a read per operation, as the operation's own log does. */
  openOperationIds(): AsyncIterable<string> {
    return this.host.operationIds();
  }

  private async guarded<T>(work: () => Promise<T>): Promise<T> {
    if (this.host.closed()) throw unavailable('store is closed');
    try {
      return await work();
    } catch (error) {
      if (error instanceof AdapterError) throw error;
      throw unavailable(`eventstoredb index: ${error instanceof Error ? error.message : String(error)}`, error);
    }
  }
}
