/**
 * The EventStoreDB event store (@eventstore/db-client 6.x): one stream per operation
 * (`convoke-op-<operationId>`), one event per Transition (type `convoke.transition`, JSON data).
 *
 * Compare-and-swap: `appendToStream(..., {expectedRevision})` — NO_STREAM for create, the event
 * revision of the stream's last event for append; WrongExpectedVersionError writes nothing and
 * answers `conflict`. The opaque revision handed out is that event revision (0-based, decimal).
 *
 * Guard-on-fold, exactly as the JetStream adapter, through the same base (replay-stamped.ts): the
 * server stamps each event (`RecordedEvent.created`, its own clock, in stream order); the adapter
 * reads the stored event back after the append and answers what the fold decides.
 *
 * Tombstones: a key record on `convoke-tomb-<operationId>` plus a line in `convoke-tombstones`,
 * then the operation stream is hard-deleted (`tombstoneStream`), which EventStoreDB itself never
 * lets anyone recreate: later appends and reads fail with StreamDeletedError → `expired`.
 *
 * Indexes (EventStoreDB 6.x's client cannot filter a $all *read*): `convoke-admissions` gets one
 * event per created operation (its revision + 1 is the operation count for `operationsMax`) and
 * `convoke-tombstones` one per tombstone; operationIds() is admissions minus tombstones. Both are
 * appended after the fact with expectedRevision ANY, so the capacity check is best-effort under
 * concurrent creates (it can overshoot by the number of racing creators) — documented.
 *
 * No EventStoreDB server can run on the development machines (docs/design.md §8); this adapter is
 * type-checked against the client's declarations and its conformance run needs CONVOKE_ESDB_URL.
 */
import { hash } from 'node:crypto';
import {
  ANY,
  BACKWARDS,
  END,
  EventStoreDBClient,
  MaxAppendSizeExceededError,
  NO_STREAM,
  START,
  StreamDeletedError,
  StreamNotFoundError,
  WrongExpectedVersionError,
  jsonEvent,
  streamNameFilter,
  type AllStreamResolvedEvent,
  type AppendExpectedRevision,
  type JSONType,
  type RecordedEvent,
} from '@eventstore/db-client';
import type { StoredTransition } from '../../events/types.js';
import { AssertionFailure, unavailable } from '../../contract/errors.js';
import { limits as contractLimits } from '../../contract/limits.js';
import { decodeStored, isStoreFailure, notifyAll, revisionsOnly } from './codec.js';
import { capacityReached, resolveStoreLimits } from './limits.js';
import { EventStoreDbOperationIndex } from './eventstoredb-index.js';
import { ReplayStampedStore, closedFailure, expiredOf, notFoundOf, streamFamily, type LogState, type TailState, type WriteOutcome } from './replay-stamped.js';
import type { AppendListener, AppendOutcome, RevisionListener, StoreFailure, StoreLimits } from './types.js';

export interface EventStoreDbOptions {
  /** `esdb://host:2113?tls=false` (the client's own connection-string syntax), or a client. */
  connectionString?: string;
  /** An existing client (left open on close). */
  client?: EventStoreDBClient;
  /** Default 'convoke': streams `<prefix>-op-<id>`, `<prefix>-wf-<instanceId>`, `<prefix>-tomb-<id>`, `<prefix>-admissions`. */
  streamPrefix?: string;
  limits?: Partial<StoreLimits>;
  /** gRPC deadline per call before answering `unavailable`. */
  requestTimeoutMs?: number;
}

const transitionType = 'convoke.transition';

export function esdbFailure(error: unknown): StoreFailure {
  if (error instanceof AssertionFailure) throw error;
  if (error instanceof MaxAppendSizeExceededError) return { kind: 'invalid-input', description: `eventstoredb: ${error.message}` };
  // Timeouts, deadlines, unavailable, not-leader, cancelled, unknown: the write may or may not
  // have happened, so the answer is `unavailable`, never a guess.
  const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return { kind: 'unavailable', description: `eventstoredb: ${detail}` };
}

/** Canonical decimal event revision (0-based, a safe integer); undefined for anything else. */
export function parseEsdbRevision(revision: string): number | undefined {
  if (!/^(0|[1-9][0-9]{0,15})$/.test(revision)) return undefined;
  const value = Number(revision);
  return Number.isSafeInteger(value) ? value : undefined;
}

/** A deterministic event id per attempted write, so a retry is idempotent on the server. */
function eventIdOf(operationId: string, expected: string, body: string): string {
  const hex = hash('sha256', `${operationId}\u0000${expected}\u0000${body}`, 'hex');
  const variant = ((parseInt(hex[16] ?? '0', 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** One recorded event as a StoredTransition (validated), or why it cannot be trusted. */
function storedOf(event: RecordedEvent): StoredTransition | StoreFailure {
  const committedAtMs = event.created.getTime();
  // The client substitutes the epoch when the server sent no stamp: never fold on a made-up time.
  if (committedAtMs <= 0) return { kind: 'unavailable', description: `event ${event.revision} has no server timestamp` };
  if (event.type !== transitionType || !event.isJson) return { kind: 'unavailable', description: `event ${event.revision} is not a ${transitionType}` };
  return decodeStored(String(event.revision), committedAtMs, JSON.stringify(event.data));
}

export class EventStoreDbStore extends ReplayStampedStore {
  readonly name = 'eventstoredb';
  private readonly client: EventStoreDBClient;
  private readonly ownsClient: boolean;
  private readonly prefix: string;
  private readonly deadline: number;
  /** The operations index (eventstoredb-index.ts): a row per operation, written after each stored append. */
  readonly index: EventStoreDbOperationIndex;

  constructor(options: EventStoreDbOptions) {
    // Event revisions are 0-based: a stream with no event is at -1 (NO_STREAM to the client).
    super(resolveStoreLimits(options.limits), -1);
    if (options.client) this.client = options.client;
    else if (options.connectionString) this.client = EventStoreDBClient.connectionString(options.connectionString);
    else throw unavailable('an EventStoreDB store needs `client` or `connectionString`');
    this.ownsClient = !options.client;
    this.prefix = options.streamPrefix ?? 'convoke';
    this.deadline = options.requestTimeoutMs ?? 5000;
    this.index = new EventStoreDbOperationIndex({ client: this.client, prefix: this.prefix, deadline: this.deadline, ...this.indexHost() });
  }

  async *operationIds(): AsyncIterable<string> {
    this.throwIfClosed();
    let admitted: string[];
    let tombstoned: Set<string>;
    try {
      admitted = await this.indexIds(`${this.prefix}-admissions`);
      tombstoned = new Set(await this.indexIds(`${this.prefix}-tombstones`));
    } catch (error) {
      throw unavailable(esdbFailure(error).description, error);
    }
    for (const id of new Set(admitted)) if (!tombstoned.has(id)) yield id;
  }

  /**
   * `<prefix>-wf-running` gets one event per instance marked before its creation is written,
   * `<prefix>-wf-ended` one per instance whose end was stored: the first less the second, as
   * operationIds() reads admissions less tombstones.
   */
  async *runningWorkflowIds(): AsyncIterable<string> {
    this.throwIfClosed();
    let marked: string[];
    let ended: Set<string>;
    try {
      marked = await this.indexIds(`${this.prefix}-wf-running`, 'instanceId');
      ended = new Set(await this.indexIds(`${this.prefix}-wf-ended`, 'instanceId'));
    } catch (error) {
      throw unavailable(esdbFailure(error).description, error);
    }
    for (const id of new Set(marked)) if (!ended.has(id)) yield id;
  }

  /**
   * Every instance was marked running before its creation was written: the marks are the
   * instances (one listed whose creation failed reads not-found), less the tombstoned ones.
   */
  async *workflowInstanceIds(): AsyncIterable<string> {
    this.throwIfClosed();
    let marked: string[];
    let tombstoned: Set<string>;
    try {
      marked = await this.indexIds(`${this.prefix}-wf-running`, 'instanceId');
      tombstoned = new Set(await this.indexIds(`${this.prefix}-tombstones`));
    } catch (error) {
      throw unavailable(esdbFailure(error).description, error);
    }
    for (const id of new Set(marked)) if (!tombstoned.has(id)) yield id;
  }

  async workflowEnded(instanceId: string): Promise<void> {
    this.throwIfClosed();
    try {
      await this.client.appendToStream(`${this.prefix}-wf-ended`, jsonEvent({ type: 'convoke.workflow-ended', data: { instanceId } }), {
        expectedRevision: ANY,
        deadline: this.deadline,
      });
    } catch (error) {
      throw unavailable(esdbFailure(error).description, error);
    }
  }

  protected async markWorkflowRunning(instanceId: string): Promise<void> {
    await this.client.appendToStream(`${this.prefix}-wf-running`, jsonEvent({ type: 'convoke.workflow-running', data: { instanceId } }), {
      expectedRevision: ANY,
      deadline: this.deadline,
    });
  }

  async tombstone(operationId: string): Promise<AppendOutcome | StoreFailure> {
    if (this.closed) return closedFailure;
    try {
      const state = await this.logState(operationId);
      if (state.kind === 'missing') return notFoundOf(operationId);
      if (state.kind !== 'live' && state.kind !== 'tombstoned') return state;
      // Key record first: from here on a create answers expired even if we stop half-way.
      await this.appendIfAbsent(this.tombStream(operationId), { operationId });
      if (state.kind === 'live') {
        try {
          await this.client.tombstoneStream(this.opStream(operationId), { expectedRevision: ANY, deadline: this.deadline });
        } catch (error) {
          if (!(error instanceof StreamDeletedError)) throw error;
        }
        // The revision the tombstone took (past the last event's): what watch tells of it.
        const data = { operationId, revision: String(state.lastRevision + 1) };
        await this.client.appendToStream(`${this.prefix}-tombstones`, jsonEvent({ type: 'convoke.tombstoned', data }), {
          expectedRevision: ANY,
          deadline: this.deadline,
        });
      }
      this.fold.forget(operationId);
      await this.index.remove(operationId);
      const last = state.kind === 'live' ? String(state.lastRevision) : '0';
      const stamp = state.kind === 'live' ? (state.transitions.at(-1)?.committedAtMs ?? 0) : 0;
      return { kind: 'ok', revision: last, committedAtMs: stamp };
    } catch (error) {
      return esdbFailure(error);
    }
  }

  /** The revisions follow tells, and each tombstone (its line in `<prefix>-tombstones`) by the revision it took. */
  watch(listener: RevisionListener): Promise<{ close(): Promise<void> }> {
    const tombstones = `${this.prefix}-tombstones`;
    const told = revisionsOnly(listener);
    return this.subscribe([`${this.prefix}-op-`, `${this.prefix}-wf-`, tombstones], (streamId, event) => {
      if (streamId !== tombstones) return this.tellStored(streamId, event, told);
      const data = event.isJson ? (event.data as { operationId?: unknown; revision?: unknown }) : {};
      if (event.type === 'convoke.tombstoned' && typeof data.operationId === 'string' && typeof data.revision === 'string')
        notifyAll([listener], data.operationId, data.revision);
    });
  }

  follow(listener: AppendListener): Promise<{ close(): Promise<void> }> {
    return this.subscribe([`${this.prefix}-op-`, `${this.prefix}-wf-`], (streamId, event) => this.tellStored(streamId, event, listener));
  }

  /** A transition of an operation's or instance's stream, told to `listener` by the id its stream names. */
  private tellStored(streamId: string, event: RecordedEvent, listener: AppendListener): void {
    const prefix = [`${this.prefix}-op-`, `${this.prefix}-wf-`].find((candidate) => streamId.startsWith(candidate));
    if (prefix === undefined) return;
    const stored = storedOf(event);
    if (!isStoreFailure(stored)) notifyAll([listener], streamId.slice(prefix.length), stored);
  }

  /** Each event written from now on to a stream whose name starts with one of `prefixes`, handed to `each`. */
  private async subscribe(prefixes: string[], each: (streamId: string, event: RecordedEvent) => void): Promise<{ close(): Promise<void> }> {
    this.throwIfClosed();
    const subscription = this.client.subscribeToAll({ fromPosition: END, filter: streamNameFilter({ prefixes }) });
    subscription.on('data', (resolved: AllStreamResolvedEvent) => {
      const event = resolved.event;
      if (event) each(event.streamId, event as RecordedEvent);
    });
    subscription.on('error', () => undefined); // A dropped subscription ends the follow; tail re-follows.
    // Resolve only once the server confirmed the subscription: an append made after follow()
    // returns is then after the subscription's END position, so it is delivered.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(unavailable('eventstoredb subscription was not confirmed in time')), this.deadline);
      subscription.once('confirmation', () => {
        clearTimeout(timer);
        resolve();
      });
      subscription.once('error', (error: Error) => {
        clearTimeout(timer);
        reject(unavailable(esdbFailure(error).description, error));
      });
    }).catch(async (error: unknown) => {
      await subscription.unsubscribe().catch(() => undefined);
      throw error;
    });
    return this.followed(async () => {
      await subscription.unsubscribe().catch(() => undefined);
    });
  }

  protected async closeClient(): Promise<void> {
    await this.index.close();
    if (this.ownsClient) await this.client.dispose().catch(() => undefined);
  }

  // -------------------------------------------------------------------------------------------

  /** An operation's stream, or a workflow instance's (`wf…` ids): `<prefix>-wf-<instanceId>`, beside operations. */
  private opStream(operationId: string): string {
    return `${this.prefix}-${streamFamily(operationId)}-${operationId}`;
  }

  private tombStream(operationId: string): string {
    return `${this.prefix}-tomb-${operationId}`;
  }

  protected parseRevision(revision: string): number | undefined {
    return parseEsdbRevision(revision);
  }

  protected failure(error: unknown): StoreFailure {
    return esdbFailure(error);
  }

  /** A deleted stream refuses every later write, but a create checks the key record first (the admission count is the capacity). */
  protected async beforeCreate(operationId: string): Promise<StoreFailure | undefined> {
    const [tombstoned, full] = await Promise.all([this.exists(this.tombStream(operationId)), this.capacityFailure(operationId)]);
    if (tombstoned) return { kind: 'expired', description: `operation ${operationId} is tombstoned; its key is never recreated` };
    return full;
  }

  /** The CAS append: NO_STREAM for a create, else the event revision of the stream's last event. */
  protected async writeAt(operationId: string, expected: number, body: string): Promise<WriteOutcome> {
    const expectedRevision: AppendExpectedRevision = expected < 0 ? NO_STREAM : BigInt(expected);
    let revision: bigint;
    try {
      const event = jsonEvent({ id: eventIdOf(operationId, String(expectedRevision), body), type: transitionType, data: JSON.parse(body) as JSONType });
      const result = await this.client.appendToStream(this.opStream(operationId), event, { expectedRevision, deadline: this.deadline });
      revision = result.nextExpectedRevision;
    } catch (error) {
      if (error instanceof StreamDeletedError) return expiredOf(operationId);
      if (!(error instanceof WrongExpectedVersionError)) throw error;
      return { kind: 'rejected' };
    }
    // The admissions index lists operations only (operationIds()); workflow instances are not counted in it.
    if (expectedRevision === NO_STREAM && streamFamily(operationId) === 'op') await this.countAdmission(operationId);
    return { kind: 'stored', revision: Number(revision) };
  }

  /** Reads the stored event back for its server stamp. */
  protected async stampAt(operationId: string, revision: number): Promise<number | StoreFailure> {
    const events = await this.readEvents(this.opStream(operationId), BigInt(revision), 1);
    if (events.kind !== 'events')
      return events.kind === 'tombstoned' ? expiredOf(operationId) : { kind: 'unavailable', description: 'stored event could not be read back' };
    const event = events.events[0];
    if (!event || event.revision !== BigInt(revision)) return { kind: 'unavailable', description: `stored event ${revision} could not be read back` };
    const stored = storedOf(event);
    return isStoreFailure(stored) ? { kind: 'unavailable', description: stored.description } : stored.committedAtMs;
  }

  /**
   * The stream's transitions from the start, validated, read
   * in pages of contractLimits.eventStoreDbReadPageMax events (one server-streamed read each). At most
   * limits.transitionsStoredMax: a longer stream (written before that limit) answers unavailable,
   * never a silently shortened log.
   */
  protected async logState(operationId: string): Promise<LogState> {
    const readMax = contractLimits.transitionsStoredMax;
    const countMax = readMax + 1;
    const transitions: StoredTransition[] = [];
    let last: bigint | undefined;
    while (transitions.length < countMax) {
      const pageMax = Math.min(contractLimits.eventStoreDbReadPageMax, countMax - transitions.length);
      const page = await this.readEvents(this.opStream(operationId), last === undefined ? START : last + 1n, pageMax);
      if (page.kind === 'missing' && last === undefined)
        return (await this.exists(this.tombStream(operationId))) ? { kind: 'tombstoned' } : { kind: 'missing' };
      if (page.kind === 'tombstoned') return page;
      if (page.kind !== 'events') return { kind: 'unavailable', description: `operation ${operationId} vanished while being read` };
      for (const event of page.events) {
        const stored = storedOf(event);
        if (isStoreFailure(stored)) return stored;
        transitions.push(stored);
        last = event.revision;
      }
      if (page.events.length < pageMax) break;
    }
    if (transitions.length > readMax)
      return { kind: 'unavailable', description: `operation ${operationId} holds more than ${readMax} transitions, more than a store reads back` };
    if (last === undefined) return { kind: 'missing' };
    return { kind: 'live', lastRevision: Number(last), transitions };
  }

  /**
   * The events after `after`, read as logState reads the whole log (pages from `after` on): the
   * first event read must be the one at `after`, else the stream no longer holds it (a stream
   * that came back shorter, or was truncated before it) and nothing after it continues what the
   * caller folded.
   */
  protected async logTail(operationId: string, after: number): Promise<TailState> {
    const readMax = contractLimits.transitionsStoredMax;
    const transitions: StoredTransition[] = [];
    let next = BigInt(after);
    let last: bigint | undefined;
    while (transitions.length <= readMax) {
      const pageMax = Math.min(contractLimits.eventStoreDbReadPageMax, readMax + 2 - transitions.length);
      const page = await this.readEvents(this.opStream(operationId), next, pageMax);
      if (page.kind === 'missing' && last === undefined)
        return (await this.exists(this.tombStream(operationId))) ? { kind: 'tombstoned' } : { kind: 'missing' };
      if (page.kind === 'tombstoned') return page;
      if (page.kind !== 'events') return { kind: 'unavailable', description: `operation ${operationId} vanished while being read` };
      for (const event of page.events) {
        if (event.revision !== next)
          return last === undefined
            ? { kind: 'diverged', description: `operation ${operationId} no longer holds event ${after}` }
            : { kind: 'unavailable', description: `operation ${operationId} has a gap at event ${next}` };
        next += 1n;
        // The first is the event the tail follows: the caller holds it.
        if (last !== undefined) {
          const stored = storedOf(event);
          if (isStoreFailure(stored)) return stored;
          transitions.push(stored);
        }
        last = event.revision;
      }
      if (page.events.length < pageMax) break;
    }
    if (last === undefined) return { kind: 'diverged', description: `operation ${operationId} no longer holds event ${after}` };
    if (transitions.length > readMax)
      return { kind: 'unavailable', description: `operation ${operationId} holds more than ${readMax} transitions, more than a store reads back` };
    return { kind: 'live', lastRevision: Number(last), transitions };
  }

  private async readEvents(stream: string, fromRevision: bigint | typeof START, maxCount: number) {
    const events: RecordedEvent[] = [];
    try {
      const read = this.client.readStream(stream, { fromRevision, maxCount, deadline: this.deadline });
      for await (const resolved of read) if (resolved.event) events.push(resolved.event as RecordedEvent);
    } catch (error) {
      if (error instanceof StreamNotFoundError) return { kind: 'missing' as const };
      if (error instanceof StreamDeletedError) return { kind: 'tombstoned' as const };
      throw error;
    }
    return { kind: 'events' as const, events };
  }

  private async exists(stream: string): Promise<boolean> {
    const read = await this.readEvents(stream, START, 1);
    return read.kind !== 'missing';
  }

  private async appendIfAbsent(stream: string, data: JSONType): Promise<void> {
    try {
      await this.client.appendToStream(stream, jsonEvent({ type: 'convoke.tombstone', data }), { expectedRevision: NO_STREAM, deadline: this.deadline });
    } catch (error) {
      if (!(error instanceof WrongExpectedVersionError)) throw error; // Written by an earlier, partial tombstone.
    }
  }

  /** One index line per created stream; failure here cannot undo the create, so it is swallowed. */
  private async countAdmission(operationId: string): Promise<void> {
    await this.client
      .appendToStream(`${this.prefix}-admissions`, jsonEvent({ type: 'convoke.admitted', data: { operationId } }), {
        expectedRevision: ANY,
        deadline: this.deadline,
      })
      .catch(() => undefined);
  }

  private async capacityFailure(operationId: string): Promise<StoreFailure | undefined> {
    const read = this.client.readStream(`${this.prefix}-admissions`, { direction: BACKWARDS, fromRevision: END, maxCount: 1, deadline: this.deadline });
    let count = 0;
    try {
      for await (const resolved of read) if (resolved.event) count = Number(resolved.event.revision) + 1;
    } catch (error) {
      if (!(error instanceof StreamNotFoundError)) throw error;
    }
    return count < this.limits.operationsMax ? undefined : capacityReached(this.limits.operationsMax, operationId);
  }

  private async indexIds(stream: string, field: 'operationId' | 'instanceId' = 'operationId'): Promise<string[]> {
    const ids: string[] = [];
    try {
      for await (const resolved of this.client.readStream(stream, { fromRevision: START, deadline: this.deadline })) {
        const data = resolved.event?.data as Record<string, unknown> | undefined;
        const id = data?.[field];
        if (typeof id === 'string') ids.push(id);
      }
    } catch (error) {
      if (!(error instanceof StreamNotFoundError)) throw error;
    }
    return ids;
  }
}
