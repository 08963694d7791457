/**
 * The base of every replay-stamped store (jetstream, eventstoredb): a server that cannot check a
 * time guard inside its write, but stamps each stored transition with its own clock, in stream
 * order (`StoreCapabilities.guard` 'on-fold', docs/design.md §2). Everything of that protocol
 * that does not depend on the backend lives here, once:
 *
 * - create and append as a compare-and-swap on the log's own revision, with the transition
 *   limit checked against the fold point the CAS makes exact, and a create retried over a log
 *   that holds only void transitions (classifyRejection);
 * - the answer of a stored write: the server's stamp of it, folded after the point before it
 *   (on-fold.ts), so the append answers exactly what the fold will decide — ok, `expired`
 *   (guard) or `unavailable` (the stamp went back);
 * - reading a log back with its stamps, remembering its fold point;
 * - the index row after each stored transition (an operation's from its record, a workflow
 *   instance's from the committing side's row), and the followers closed with the store.
 *
 * A backend writes only its client calls: the log's state, the CAS write, the stamp of a stored
 * revision, what a create checks first (capacity, tombstones), its errors, and its tombstones,
 * listing and following.
 */
import { unavailable } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import type { StoredTransition, TimeGuard, Transition } from '../../events/types.js';
import { checkGuardShape } from '../../events/guard.js';
import { bodyBytes, checkTransitionShape, encodeTransition, isStoreFailure, logFullFailure, sizeFailure } from './codec.js';
import { IndexStates, logOfRead } from './index-states.js';
import { endsWorkflow, streamFamily } from './workflow-running.js';
import { FoldTracker, advance, answerOnFold, foldPoint, noAppliedYetMs, type FoldPoint } from './on-fold.js';
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

/** What the backend's log says about one stream. `lastRevision` is the backend's own position. */
export type LogState = { kind: 'missing' } | { kind: 'tombstoned' } | LiveLog | StoreFailure;

/**
 * What the backend's log holds after a revision (ReplayStampedStore.logTail): the transitions
 * after it and the log's last position, or `diverged` when the log no longer holds that revision.
 */
export type TailState = { kind: 'missing' } | { kind: 'tombstoned' } | { kind: 'diverged'; description: string } | LiveLog | StoreFailure;

type LiveLog = { kind: 'live'; lastRevision: number; transitions: StoredTransition[] };

/** One attempted write, carried through CAS retries. */
export interface PendingWrite {
  transition: Transition;
  body: string;
  mode: 'create' | 'append';
  /** CAS retries so far (a create over a log holding only void transitions retries). */
  attempt: number;
  /** The committing side's record (or instance row) after the transition, for the index row (index-states.ts, workflow-rows.ts). */
  after?: IndexAfter;
}

/** A CAS write's answer from the backend: the revision it stored at, a wrong expected revision (nothing written), or a failure. */
export type WriteOutcome = { kind: 'stored'; revision: number } | { kind: 'rejected' } | StoreFailure;

/** The index a replay-stamped store keeps: written after each stored transition, since no transaction spans the log and the row. */
export interface StampedIndex extends OperationIndexStore {
  appended(operationId: string, previousRevision: string | undefined, stored: StoredTransition, after?: IndexAfter): Promise<void>;
  remove(operationId: string): Promise<void>;
  /** The workflow instances index kept beside the operations'. */
  readonly workflow: WorkflowIndexStore;
  /** After a workflow instance's transition was stored: its row from the committing side (workflow-rows.ts), when it gave one. */
  workflowAppended(instanceId: string, stored: StoredTransition, after?: IndexAfter): Promise<void>;
}

/** What an index over a replay-stamped store reads of it (each index's host adds its client). */
export interface StampedIndexHost {
  states: IndexStates;
  closed(): boolean;
  /** The operation's log, or undefined when it has none (missing, tombstoned). */
  logOf(operationId: string): Promise<StoredTransition[] | undefined>;
  operationIds(): AsyncIterable<string>;
}

export const expiredOf = (operationId: string) => ({ kind: 'expired' as const, description: `operation ${operationId} is tombstoned` });
export const notFoundOf = (operationId: string) => ({ kind: 'not-found' as const, description: `operation ${operationId} does not exist` });
export const closedFailure: { kind: 'unavailable'; description: string } = { kind: 'unavailable', description: 'store is closed' };

export { streamFamily };

/** The encoded body of a transition this store may write, or why nothing may be written. */
export function precheckWrite(closed: boolean, transition: Transition, transitionBytesMax: number): string | StoreFailure {
  if (closed) return closedFailure;
  const shape = checkTransitionShape(transition) ?? checkGuardShape(transition.timeGuard);
  if (shape) return shape;
  const body = encodeTransition(transition);
  const bytes = bodyBytes(body);
  if (bytes > transitionBytesMax) return sizeFailure(bytes, transitionBytesMax);
  return body;
}

/** A read's answer from the log's state; a live log's fold point is remembered. */
export function readAnswer(operationId: string, state: LogState, fold: FoldTracker): ReadOutcome {
  if (state.kind !== 'live') return absentAnswer(operationId, state);
  fold.remember(operationId, foldPoint(state.transitions, state.lastRevision));
  return { kind: 'ok', revision: String(state.lastRevision), transitions: state.transitions };
}

/** What a read (or a tail's read) answers for a log that holds no live stream, or could not be read. */
function absentAnswer(operationId: string, state: Exclude<LogState, LiveLog>): Exclude<ReadOutcome, { kind: 'ok' }> {
  if (state.kind === 'missing') return notFoundOf(operationId);
  if (state.kind === 'tombstoned') return expiredOf(operationId);
  return { kind: 'unavailable', description: state.description };
}

/**
 * A CAS rejection (or an unusable revision) wrote nothing; says why, precisely, from the log's
 * state. A log holding only void transitions (an expired admission) is absent to the fold, so a
 * create may write after them, still as a CAS: the answer is then where to retry.
 */
export function classifyRejection(
  operationId: string,
  expectedRevision: string,
  write: PendingWrite,
  state: LogState,
  fold: FoldTracker,
): AppendOutcome | { retryAt: number; point: FoldPoint } {
  switch (state.kind) {
    case 'tombstoned':
      return expiredOf(operationId);
    case 'missing':
      return write.mode === 'append'
        ? notFoundOf(operationId)
        : { kind: 'unavailable', description: `create of ${operationId} was refused but its log reads empty` };
    case 'live':
      break;
    default:
      return { kind: 'unavailable', description: state.description };
  }
  const point = foldPoint(state.transitions, state.lastRevision);
  fold.remember(operationId, point);
  if (write.mode === 'create' && !point.anyApplied && write.attempt < limits.storeCasAttemptsMax) return { retryAt: state.lastRevision, point };
  return write.mode === 'create'
    ? { kind: 'conflict', description: `operation ${operationId} already exists` }
    : { kind: 'conflict', description: `expected revision ${expectedRevision}, stream is at ${state.lastRevision}` };
}

/** The answer for a write stored at `revision` with the server's `committedAtMs`; the fold point moves on. */
export function answerStoredAt(
  fold: FoldTracker,
  operationId: string,
  revision: number,
  committedAtMs: number,
  before: FoldPoint,
  guard: TimeGuard,
): AppendOutcome {
  const outcome = answerOnFold(guard, String(revision), committedAtMs, before);
  fold.remember(operationId, advance(before, revision, guard, committedAtMs));
  return outcome;
}

export abstract class ReplayStampedStore implements EventStore {
  abstract readonly name: string;
  readonly capabilities = { durable: true, guard: 'on-fold' } as const;
  abstract readonly index: StampedIndex;

  get workflowIndex(): WorkflowIndexStore {
    return this.index.workflow;
  }
  /** The fold point this client last saw per stream: the common single-writer path needs no read before its write. */
  protected readonly fold = new FoldTracker();
  protected closed = false;
  private readonly followers = new Set<() => Promise<void>>();

  /**
   * `emptyRevision`: the backend's position of a stream with nothing in it, which a create
   * expects (JetStream: subject sequence 0; EventStoreDB: no stream, -1 here).
   */
  protected constructor(
    readonly limits: Readonly<StoreLimits>,
    private readonly emptyRevision: number,
  ) {}

  // ── the backend's client calls ─────────────────────────────────────────────────────────────

  /** The whole log of a stream with its server stamps, validated; at most limits.transitionsStoredMax transitions. */
  protected abstract logState(streamId: string): Promise<LogState>;
  /**
   * The log's transitions after `after`, with their server stamps, validated as logState's; `diverged` unless the
   * message at `after` is still this stream's (a log that came back shorter, or whose position `after` now holds
   * another stream's message, does not continue what the caller folded).
   */
  protected abstract logTail(streamId: string, after: number): Promise<TailState>;
  /** The CAS write of `body` at `expected` (emptyRevision: the stream must not exist). */
  protected abstract writeAt(streamId: string, expected: number, body: string): Promise<WriteOutcome>;
  /** The server's stamp of the transition stored at `revision` of this stream, or why it cannot be learned. */
  protected abstract stampAt(streamId: string, revision: number): Promise<number | StoreFailure>;
  /** What a create checks before writing (capacity; tombstones, where the CAS alone does not refuse them). */
  protected abstract beforeCreate(streamId: string): Promise<StoreFailure | undefined>;
  /** After a create that beforeCreate let through has ended, however it ended (a capacity count may let it go). */
  protected createEnded(_streamId: string): void {}
  /** The backend's revision string as a number, or undefined when it can never match. */
  protected abstract parseRevision(revision: string): number | undefined;
  /** A thrown client error as a store failure (an assertion is rethrown). */
  protected abstract failure(error: unknown): StoreFailure;
  /** Closes the client after the followers are stopped. */
  protected abstract closeClient(): Promise<void>;

  abstract operationIds(): AsyncIterable<string>;
  /** The instances marked running (workflow-running.ts): marked before their creation is written, unmarked after their end. */
  abstract runningWorkflowIds(): AsyncIterable<string>;
  abstract workflowInstanceIds(): AsyncIterable<string>;
  /** Removes the instance's running mark, if any. */
  abstract workflowEnded(instanceId: string): Promise<void>;
  /** Marks a workflow instance running; throws (its creation must not be written) when it cannot. */
  protected abstract markWorkflowRunning(instanceId: string): Promise<void>;
  abstract tombstone(operationId: string): Promise<AppendOutcome | StoreFailure>;
  abstract follow(listener: AppendListener): Promise<{ close(): Promise<void> }>;
  abstract watch(listener: RevisionListener): Promise<{ close(): Promise<void> }>;

  // ── the protocol ───────────────────────────────────────────────────────────────────────────

  async create(operationId: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome> {
    const body = precheckWrite(this.closed, transition, this.limits.transitionBytesMax);
    if (typeof body !== 'string') return body;
    try {
      const refused = await this.beforeCreate(operationId);
      if (refused) return refused;
      try {
        // Marked before it is written: a stored creation is listed even if its writer dies now.
        if (streamFamily(operationId) === 'wf') await this.markWorkflowRunning(operationId);
        // An empty stream has nothing applied: the point before a create needs no read.
        const empty: FoldPoint = { revision: this.emptyRevision, lastAppliedAtMs: noAppliedYetMs, anyApplied: false, count: 0 };
        return await this.writeFrom(operationId, empty, { transition, body, mode: 'create', attempt: 0, after });
      } finally {
        this.createEnded(operationId);
      }
    } catch (error) {
      return this.failure(error);
    }
  }

  async append(operationId: string, expectedRevision: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome> {
    const body = precheckWrite(this.closed, transition, this.limits.transitionBytesMax);
    if (typeof body !== 'string') return body;
    try {
      const expected = this.parseRevision(expectedRevision);
      const write: PendingWrite = { transition, body, mode: 'append', attempt: 0, after };
      // A revision that is not one of the backend's can never match: classify without writing.
      if (expected === undefined) return await this.rejected(operationId, expectedRevision, write);
      const known = this.fold.at(operationId, expected);
      if (known) return await this.writeFrom(operationId, known, write);
      // This client has not seen the log at `expected`: read it first, for the fold point and
      // the transition count the limit is checked against. When `expected` is one of its
      // transitions the write still runs (a retried append dedupes to what it stored);
      // otherwise no write could match and the log says why.
      const state = await this.logState(operationId);
      const index = state.kind === 'live' ? state.transitions.findIndex((t) => t.revision === String(expected)) : -1;
      if (state.kind !== 'live' || index < 0) return await this.classified(operationId, expectedRevision, write, state);
      return await this.writeFrom(operationId, foldPoint(state.transitions.slice(0, index + 1), expected), write);
    } catch (error) {
      return this.failure(error);
    }
  }

  async read(operationId: string): Promise<ReadOutcome> {
    if (this.closed) return closedFailure;
    try {
      return readAnswer(operationId, await this.logState(operationId), this.fold);
    } catch (error) {
      return { kind: 'unavailable', description: this.failure(error).description };
    }
  }

  async readAfter(operationId: string, revision: string): Promise<TailOutcome> {
    if (this.closed) return closedFailure;
    const after = this.parseRevision(revision);
    if (after === undefined) return { kind: 'diverged', description: `operation ${operationId} never held revision ${JSON.stringify(revision)}` };
    try {
      const state = await this.logTail(operationId, after);
      if (state.kind === 'diverged') return state;
      if (state.kind !== 'live') return absentAnswer(operationId, state);
      this.followFold(operationId, after, state.transitions);
      return { kind: 'ok', revision: String(state.lastRevision), transitions: state.transitions };
    } catch (error) {
      return { kind: 'unavailable', description: this.failure(error).description };
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const stops = [...this.followers];
    this.followers.clear();
    await Promise.all(stops.map((stop) => stop().catch(() => undefined)));
    await this.closeClient();
  }

  /**
   * A fold point this client holds at `after` moves over the tail read after it, exactly as a
   * whole read would have set it (advance is foldPoint's step); without one the memo stays as
   * it is, and an append at the tail's end reads the log first.
   */
  private followFold(operationId: string, after: number, tail: readonly StoredTransition[]): void {
    let point = this.fold.at(operationId, after);
    if (point === undefined || tail.length === 0) return;
    for (const stored of tail) point = advance(point, Number(stored.revision), stored.transition.timeGuard, stored.committedAtMs);
    this.fold.remember(operationId, point);
  }

  /** A follower stopped by its handle or when the store closes. */
  protected followed(stop: () => Promise<void>): { close(): Promise<void> } {
    this.followers.add(stop);
    return {
      close: async () => {
        if (this.followers.delete(stop)) await stop();
      },
    };
  }

  /** What an index over this store reads of it. */
  protected indexHost(): StampedIndexHost {
    return {
      states: new IndexStates(),
      closed: () => this.closed,
      logOf: logOfRead((operationId) => this.read(operationId)),
      operationIds: () => this.operationIds(),
    };
  }

  protected throwIfClosed(): void {
    if (this.closed) throw unavailable('store is closed');
  }

  /** The CAS write at the fold point `before` (the log at the expected revision). */
  private async writeFrom(operationId: string, before: FoldPoint, write: PendingWrite): Promise<AppendOutcome> {
    // The CAS makes this check exact: the write lands only on the log this count describes.
    if (before.count >= this.limits.transitionsMax) return logFullFailure(operationId, before.count, this.limits.transitionsMax);
    const written = await this.writeAt(operationId, before.revision, write.body);
    if (written.kind === 'rejected') return this.rejected(operationId, String(before.revision), write);
    if (written.kind !== 'stored') return written;
    return this.answerStored(operationId, written.revision, before, write);
  }

  /** Learns the stored transition's server stamp and answers what the fold will decide; the index row follows. */
  private async answerStored(operationId: string, revision: number, before: FoldPoint, write: PendingWrite): Promise<AppendOutcome> {
    const { transition } = write;
    const committedAtMs = await this.stampAt(operationId, revision);
    if (isStoreFailure(committedAtMs)) return committedAtMs;
    const outcome = answerStoredAt(this.fold, operationId, revision, committedAtMs, before, transition.timeGuard);
    // An applied end unmarks its instance; a failure leaves the mark for the executor to remove when it finds the instance ended.
    if (outcome.kind === 'ok' && streamFamily(operationId) === 'wf' && endsWorkflow(transition)) await this.workflowEnded(operationId).catch(() => undefined);
    // Stored either way (applied, or void on fold): the index row follows the log.
    if (outcome.kind === 'ok' || outcome.kind === 'expired') {
      // The written transition itself beside the stored instant: the committing side folds that object.
      const stored = { revision: String(revision), committedAtMs, transition };
      if (streamFamily(operationId) === 'op')
        await this.index.appended(operationId, before.count === 0 ? undefined : String(before.revision), stored, write.after);
      else await this.index.workflowAppended(operationId, stored, write.after);
    }
    return outcome;
  }

  /** A CAS rejection (or an unusable revision): nothing was written; say why, precisely. */
  private async rejected(operationId: string, expectedRevision: string, write: PendingWrite): Promise<AppendOutcome> {
    return this.classified(operationId, expectedRevision, write, await this.logState(operationId));
  }

  private async classified(operationId: string, expectedRevision: string, write: PendingWrite, state: LogState): Promise<AppendOutcome> {
    const answer = classifyRejection(operationId, expectedRevision, write, state, this.fold);
    if ('retryAt' in answer) return this.writeFrom(operationId, answer.point, { ...write, attempt: write.attempt + 1 });
    // A workflow creation refused by an instance that exists (a start repeated under its key): the mark this create
    // wrote goes when that instance has ended, whose own mark its end removed; a running one keeps it. Quiet: a mark
    // left behind lists an instance too many, never too few.
    const refusedCreate = answer.kind === 'conflict' && write.mode === 'create' && state.kind === 'live' && streamFamily(operationId) === 'wf';
    if (refusedCreate && state.transitions.some((stored) => endsWorkflow(stored.transition))) await this.workflowEnded(operationId).catch(() => undefined);
    return answer;
  }
}
