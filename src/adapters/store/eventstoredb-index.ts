/**
 * The EventStoreDB store's operations index: one stream per operation, `<prefix>-idx-<id>`, whose
 * last event (type `convoke.index-row`) is its row; the stream's metadata keeps only that one
 * (maxCount 1). As on JetStream (jetstream-index.ts) the row is written right after the append it
 * follows is stored and its fold outcome known, with the stream's revision as a compare-and-swap
 * and never over a row of a later log revision; a crash in between leaves it behind until the
 * next append or `convoke replay --fix-index`.
 *
 * Listing reads the live operation ids (the admissions index) and each one's row: O(n) reads in
 * the operations stored. No EventStoreDB server runs on the development machines; this module is
 * type-checked and its conformance run (test/conformance/store-eventstoredb.test.ts) needs
 * CONVOKE_ESDB_URL.
 */
import {
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
import { unavailable } from '../../contract/errors.js';
import { limits as contractLimits } from '../../contract/limits.js';
import {
  countStuck,
  pageOf,
  type IndexPage,
  type IndexQuery,
  type OperationIndexRow,
  type StuckBounds,
  type StuckCounts,
} from '../../events/operation-index.js';
import type { StoredTransition } from '../../events/types.js';
import type { IndexStates } from './index-states.js';
import type { OperationIndexStore, RecordAfter } from './types.js';

const rowType = 'convoke.index-row';

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

  constructor(private readonly host: EventStoreDbIndexHost) {}

  private stream(operationId: string): string {
    return `${this.host.prefix}-idx-${operationId}`;
  }

  /** After an append was stored: the row from the held state, or from the log read back. Failures leave the row behind. */
  async appended(operationId: string, previousRevision: string | undefined, stored: StoredTransition, after?: RecordAfter): Promise<void> {
    try {
      const row = await this.host.states.rowAfterStored(operationId, previousRevision, stored, () => this.host.logOf(operationId), after);
      if (row) await this.publish(operationId, row, false);
    } catch {
      // Behind, never wrong: see the header.
    }
  }

  private async publish(operationId: string, row: OperationIndexRow, replace: boolean): Promise<void> {
    const revision = Number(row.revision);
    let known = this.written.get(operationId) ?? (await this.last(operationId));
    for (let attempt = 0; attempt < contractLimits.storeCasAttemptsMax; attempt++) {
      if (known && known.revision >= revision && !replace) return;
      try {
        const result = await this.host.client.appendToStream(this.stream(operationId), jsonEvent({ type: rowType, data: row as unknown as JSONType }), {
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

  private async last(operationId: string): Promise<{ eventRevision: bigint; revision: number; row: OperationIndexRow } | undefined> {
    try {
      for await (const resolved of this.host.client.readStream(this.stream(operationId), {
        direction: BACKWARDS,
        fromRevision: END,
        maxCount: 1,
        deadline: this.host.deadline,
      })) {
        const event = resolved.event;
        const row = event?.type === rowType ? (event.data as unknown as OperationIndexRow) : undefined;
        if (event && row && typeof row.revision === 'string') return { eventRevision: event.revision, revision: Number(row.revision), row };
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError || error instanceof StreamDeletedError) return undefined;
      throw error;
    }
    return undefined;
  }

  async remove(operationId: string): Promise<void> {
    this.host.states.forget(operationId);
    this.written.delete(operationId);
    try {
      await this.host.client.deleteStream(this.stream(operationId), { deadline: this.host.deadline });
    } catch (error) {
      if (!(error instanceof StreamNotFoundError || error instanceof StreamDeletedError)) throw error;
    }
  }

  async list(query: IndexQuery): Promise<IndexPage> {
    return pageOf(await this.allRows(), query);
  }

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

  async countStuck(nowMs: number, bounds: StuckBounds): Promise<StuckCounts> {
    return countStuck(await this.allRows(), nowMs, bounds);
  }

  /** Every live operation: a row here costs a read per operation, as the operation's own log does. */
  openOperationIds(): AsyncIterable<string> {
    return this.host.operationIds();
  }

  private async allRows(): Promise<OperationIndexRow[]> {
    return this.guarded(async () => {
      const rows: OperationIndexRow[] = [];
      let batch: string[] = [];
      const flush = async () => {
        const read = await Promise.all(batch.map(async (id) => (await this.last(id))?.row));
        for (const row of read) if (row) rows.push(row);
        batch = [];
      };
      for await (const id of this.host.operationIds()) {
        batch.push(id);
        if (batch.length >= contractLimits.eventStoreDbListReadsInFlightMax) await flush();
      }
      await flush();
      return rows;
    });
  }

  private async guarded<T>(work: () => Promise<T>): Promise<T> {
    if (this.host.closed()) throw unavailable('store is closed');
    try {
      return await work();
    } catch (error) {
      throw unavailable(`eventstoredb index: ${error instanceof Error ? error.message : String(error)}`, error);
    }
  }
}
