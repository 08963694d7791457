/**
 * The memory event store: the embedded default. A first-class mode, not a mock: the time guard
 * is checked at the store's serialization point (each call runs to completion on the event loop
 * before any other), against the injected clock, and committedAtMs is that same reading.
 * Idempotency is process-local: after the process ends, every operation is unknown.
 *
 * The store keeps any stream of transitions of the stored shape (codec.ts): workflow instances
 * (`wf…` ids) live beside operations; operationIds() lists operations only.
 */
import type { StoredTransition, Transition } from '../../events/types.js';
import type { Clock } from '../../contract/clock.js';
import { checkGuardShape, guardAdmits, guardFailure, rollbackFailure } from '../../events/guard.js';
import { bodyBytes, checkTransitionShape, encodeTransition, logFullFailure, notifyAll, parseRevision, sizeFailure } from './codec.js';
import type {
  AppendListener,
  AppendOutcome,
  EventStore,
  IndexAfter,
  OperationIndexStore,
  ReadOutcome,
  RevisionListener,
  StoreFailure,
  StoreLimits,
  TailOutcome,
  WorkflowIndexStore,
} from './types.js';
import { capacityReached, resolveStoreLimits } from './limits.js';
import { unavailable } from '../../contract/errors.js';
import type { OperationIndexRow } from '../../events/operation-index.js';
import { IndexStates } from './index-states.js';
import { IndexView } from './index-view.js';
import { isOperationId } from '../../contract/ids.js';
import { isSettled } from '../../machines/index.js';
import { endsWorkflow, startsWorkflow, streamFamily } from './workflow-running.js';
import { WorkflowIndexView } from './workflow-index-view.js';
import { committedWorkflowRow, detachedRow, isWorkflowStream } from './workflow-rows.js';

/**
 * A stored transition is kept as its serialized body, as a durable store keeps bytes: reads decode
 * a fresh copy (JSON-faithful, isolated from every caller), and a long-lived store of many
 * operations is a heap of strings that the garbage collector marks in O(1) each, not a graph of
 * millions of small objects.
 */
interface StoredBody {
  committedAtMs: number;
  body: string;
}

interface Stream {
  transitions: StoredBody[];
  tombstoned: boolean;
  /** What the stream id names, told once at its creation rather than at every write. */
  family: StreamKind;
}

/** A workflow instance, an operation (which has an index row), or an opaque stream (the store's own tests): no row. */
type StreamKind = 'workflow' | 'operation' | 'opaque';

function streamKindOf(streamId: string): StreamKind {
  if (isWorkflowStream(streamId)) return 'workflow';
  return isOperationId(streamId) ? 'operation' : 'opaque';
}

function decode(stored: StoredBody, index: number): StoredTransition {
  return { revision: String(index + 1), committedAtMs: stored.committedAtMs, transition: JSON.parse(stored.body) as Transition };
}

export interface MemoryStoreOptions {
  clock: Clock;
  limits?: Partial<StoreLimits>;
}

export class MemoryEventStore implements EventStore {
  readonly name = 'memory';
  readonly capabilities = { durable: false, guard: 'in-write' } as const;
  private readonly streams = new Map<string, Stream>();
  private readonly listeners = new Set<AppendListener>();
  /** Told only the revision: no transition is decoded for them. */
  private readonly watchers = new Set<RevisionListener>();
  private readonly clock: Clock;
  readonly limits: Readonly<StoreLimits>;
  private lastCommittedAtMs = Number.MIN_SAFE_INTEGER;
  private closed = false;
  /** The operations index: one row per live operation, written with each append. */
  private readonly rows = new Map<string, OperationIndexRow>();
  /** The same rows sorted every way a list narrows (index-view.ts): a page walks only its own rows. */
  private readonly view = new IndexView();
  private readonly indexStates = new IndexStates();
  /** Workflow instances started and not ended (workflow-running.ts), kept with each write. */
  private readonly runningWorkflows = new Set<string>();
  readonly index: OperationIndexStore = {
    list: async (query) => {
      this.assertOpen();
      return this.view.page(query);
    },
    get: async (operationId) => {
      this.assertOpen();
      return this.view.get(operationId);
    },
    rebuild: async (operationId) => {
      this.assertOpen();
      const stream = this.streams.get(operationId);
      const row = stream && !stream.tombstoned ? this.indexStates.rowOfLog(operationId, stream.transitions.map(decode)) : undefined;
      this.setRow(operationId, row);
      return row;
    },
    countStuck: async (nowMs, bounds) => {
      this.assertOpen();
      return this.view.countStuck(nowMs, bounds);
    },
    // Rows are written with their transition: an operation has a row from its admission on.
    openOperationIds: () => this.openOperationIds(),
  };
  /** The workflow instances index: one row per instance, from the committing side's row at each append. */
  private readonly workflowRows = new WorkflowIndexView();
  readonly workflowIndex: WorkflowIndexStore = {
    list: async (query) => {
      this.assertOpen();
      return this.workflowRows.page(query);
    },
    get: async (instanceId) => {
      this.assertOpen();
      return this.workflowRows.get(instanceId);
    },
    countRunning: async (principalId, atMost) => {
      this.assertOpen();
      return this.workflowRows.countRunning(principalId, atMost);
    },
    put: async (instanceId, row) => {
      this.assertOpen();
      if (row && row.instanceId === instanceId && this.streams.get(instanceId)?.tombstoned === false) this.workflowRows.apply(detachedRow(row));
      else this.workflowRows.remove(instanceId);
    },
  };

  private async *openOperationIds(): AsyncIterable<string> {
    this.assertOpen();
    const open = [...this.rows.values()].filter((row) => !isSettled(row.phase)).map((row) => row.operationId);
    yield* open;
  }

  constructor(options: MemoryStoreOptions) {
    this.clock = options.clock;
    this.limits = resolveStoreLimits(options.limits);
  }

  async create(operationId: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome> {
    if (this.closed) return closedFailure;
    const existing = this.streams.get(operationId);
    if (existing) {
      return existing.tombstoned
        ? { kind: 'expired', description: `operation ${operationId} is tombstoned; its key is never recreated` }
        : { kind: 'conflict', description: `operation ${operationId} already exists` };
    }
    if (this.streams.size >= this.limits.operationsMax) return capacityReached(this.limits.operationsMax, operationId);
    return this.write(operationId, undefined, transition, undefined, after);
  }

  async append(operationId: string, expectedRevision: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome> {
    if (this.closed) return closedFailure;
    const stream = this.streams.get(operationId);
    if (!stream) return { kind: 'not-found', description: `operation ${operationId} does not exist` };
    if (stream.tombstoned) return { kind: 'expired', description: `operation ${operationId} is tombstoned` };
    return this.write(operationId, stream, transition, expectedRevision, after);
  }

  async read(operationId: string): Promise<ReadOutcome> {
    const read = this.readable(operationId);
    if (read.kind !== 'ok') return read;
    const { transitions } = read.stream;
    return { kind: 'ok', revision: String(transitions.length), transitions: transitions.map(decode) };
  }

  /** Revisions are positions ("1", "2", …): the tail is the slice after one, which a log that only grows still holds. */
  async readAfter(operationId: string, revision: string): Promise<TailOutcome> {
    const read = this.readable(operationId);
    if (read.kind !== 'ok') return read;
    const { transitions } = read.stream;
    const position = parseRevision(revision);
    if (position === undefined || position > transitions.length) {
      return { kind: 'diverged', description: `operation ${operationId} holds ${transitions.length} transitions, not revision ${revision}` };
    }
    const tail: StoredTransition[] = [];
    for (let index = position; index < transitions.length; index++) tail.push(decode(transitions[index] as StoredBody, index));
    return { kind: 'ok', revision: String(transitions.length), transitions: tail };
  }

  private readable(operationId: string): { kind: 'ok'; stream: Stream } | Exclude<ReadOutcome, { kind: 'ok' }> {
    if (this.closed) return closedFailure;
    const stream = this.streams.get(operationId);
    if (!stream) return { kind: 'not-found', description: `operation ${operationId} does not exist` };
    if (stream.tombstoned) return { kind: 'expired', description: `operation ${operationId} is tombstoned` };
    return { kind: 'ok', stream };
  }

  async *operationIds(): AsyncIterable<string> {
    if (this.closed) throw unavailable('store is closed');
    // A snapshot of the keys, so a create/tombstone during iteration cannot skip or repeat ids.
    const ids = [...this.streams.keys()];
    for (const id of ids) if (isOperationId(id) && this.streams.get(id)?.tombstoned === false) yield id;
  }

  async *runningWorkflowIds(): AsyncIterable<string> {
    this.assertOpen();
    yield* [...this.runningWorkflows];
  }

  async *workflowInstanceIds(): AsyncIterable<string> {
    this.assertOpen();
    yield* [...this.streams.entries()].filter(([id, stream]) => streamFamily(id) === 'wf' && !stream.tombstoned).map(([id]) => id);
  }

  /** The set is exact: nothing is left to remove. */
  async workflowEnded(_instanceId: string): Promise<void> {}

  async tombstone(operationId: string): Promise<AppendOutcome | StoreFailure> {
    if (this.closed) return closedFailure;
    const stream = this.streams.get(operationId);
    if (!stream) return { kind: 'not-found', description: `operation ${operationId} does not exist` };
    // The tombstone takes the revision after the last append, told to the watchers as an append is.
    const revision = stream.tombstoned ? undefined : String(stream.transitions.length + 1);
    stream.tombstoned = true;
    stream.transitions = [];
    this.setRow(operationId, undefined);
    this.workflowRows.remove(operationId);
    this.indexStates.forget(operationId);
    if (revision !== undefined) notifyAll(this.watchers, operationId, revision);
    return { kind: 'ok', revision: revision ?? '0', committedAtMs: this.clock.nowMs() };
  }

  async follow(listener: AppendListener): Promise<{ close(): Promise<void> }> {
    if (this.closed) throw unavailable('store is closed');
    this.listeners.add(listener);
    return { close: async () => void this.listeners.delete(listener) };
  }

  async watch(listener: RevisionListener): Promise<{ close(): Promise<void> }> {
    if (this.closed) throw unavailable('store is closed');
    this.watchers.add(listener);
    return { close: async () => void this.watchers.delete(listener) };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.watchers.clear();
  }

  private assertOpen(): void {
    if (this.closed) throw unavailable('store is closed');
  }

  /** The operation's row after the transition just stored. */
  private indexAppended(operationId: string, stream: Stream, previous: number, stored: StoredTransition, after: IndexAfter | undefined): void {
    if (stream.family === 'workflow') {
      const row = committedWorkflowRow(operationId, stored, after);
      if (row) this.workflowRows.apply(row);
      return;
    }
    if (stream.family === 'opaque') return; // the store's own tests: no row
    const row = this.indexStates.rowAfter(
      operationId,
      previous === 0 ? undefined : String(previous),
      stored,
      () => stream.transitions.slice(0, previous).map(decode),
      after,
    );
    this.setRow(operationId, row);
  }

  private noteWorkflow(instanceId: string, transition: Transition): void {
    if (endsWorkflow(transition)) this.runningWorkflows.delete(instanceId);
    else if (startsWorkflow(transition)) this.runningWorkflows.add(instanceId);
  }

  private setRow(operationId: string, row: OperationIndexRow | undefined): void {
    if (row) {
      this.rows.set(operationId, row);
      this.view.apply(row);
    } else {
      this.rows.delete(operationId);
      this.view.remove(operationId);
    }
  }

  /** The serialized write: checks, then commits with the one clock reading it checked against. */
  private write(operationId: string, stream: Stream | undefined, transition: Transition, expectedRevision?: string, after?: IndexAfter): AppendOutcome {
    const shape = checkTransitionShape(transition) ?? checkGuardShape(transition.timeGuard);
    if (shape) return shape;
    const body = encodeTransition(transition);
    // UTF-8 takes at most 3 bytes per UTF-16 unit: a body that short cannot pass the limit, and is not measured.
    if (body.length * 3 > this.limits.transitionBytesMax) {
      const bytes = bodyBytes(body);
      if (bytes > this.limits.transitionBytesMax) return sizeFailure(bytes, this.limits.transitionBytesMax);
    }
    const currentRevision = String(stream?.transitions.length ?? 0);
    if (expectedRevision !== undefined && expectedRevision !== currentRevision) {
      return { kind: 'conflict', description: `expected revision ${expectedRevision}, stream is at ${currentRevision}` };
    }
    if (stream && stream.transitions.length >= this.limits.transitionsMax)
      return logFullFailure(operationId, stream.transitions.length, this.limits.transitionsMax);
    const nowMs = this.clock.nowMs();
    if (nowMs < this.lastCommittedAtMs) return rollbackFailure(nowMs, this.lastCommittedAtMs);
    if (!guardAdmits(transition.timeGuard, nowMs)) return guardFailure(transition.timeGuard, nowMs);
    const target = stream ?? { transitions: [], tombstoned: false, family: streamKindOf(operationId) };
    if (!stream) this.streams.set(operationId, target);
    const stored: StoredBody = { committedAtMs: nowMs, body };
    const previous = target.transitions.length;
    target.transitions.push(stored);
    this.lastCommittedAtMs = nowMs;
    const revision = String(target.transitions.length);
    // The caller's transition itself (as the SQLite store): transitions are never changed once decided.
    this.indexAppended(operationId, target, previous, { revision, committedAtMs: nowMs, transition }, after);
    if (target.family === 'workflow') this.noteWorkflow(operationId, transition);
    if (this.listeners.size > 0) notifyAll(this.listeners, operationId, decode(stored, target.transitions.length - 1));
    if (this.watchers.size > 0) notifyAll(this.watchers, operationId, revision);
    return { kind: 'ok', revision, committedAtMs: nowMs };
  }
}

const closedFailure: { kind: 'unavailable'; description: string } = { kind: 'unavailable', description: 'store is closed' };
