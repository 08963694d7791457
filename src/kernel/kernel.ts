/**
 * The commit pipeline of an event-sourced aggregate (docs/design.md §2). It owns no truth of its
 * own: every change is a transition appended to the instance's stream at the expected revision
 * (the CAS), and the cached record is exactly the fold of what was appended.
 *
 * - Work on one instance runs through its serial queue; instances are independent.
 * - A command is decided on the current record and appended at its revision; a conflict reloads
 *   and decides again; an `expired` answer (the guard failed at the serialization point) is
 *   decided once more as late.
 * - Timers are data: the record says its next due instant (Aggregate.nextDueMs); the kernel arms
 *   one timer per instance and, when it fires, turns it into a command in the queue.
 * - A store notice of a revision this process did not apply reloads the record, so waiters and
 *   timers follow other processes' appends as they follow this one's. Where the store reads what
 *   was stored after a revision (StreamStore.readAfter), a reload reads only that tail and
 *   applies it to the record held; a log that no longer continues the record is read whole. A
 *   notice of a tombstone (the instance pruned, by any process) reads `expired`: the instance
 *   leaves the cache, and what reads it next meets the tombstone, never the pruned payload.
 * - Waiters are answered when the record reaches what they wait for.
 *
 * What an aggregate adds around this (an outbox, log budgets, batching) comes in through hooks;
 * the kernel never looks inside a record or an event.
 */
import { BoundedMap } from '../contract/bounded-map.js';
import { doublingDelayMs, toldInARow, type Clock, type TimerHandle } from '../contract/clock.js';
import { AdapterError, AssertionFailure, expired } from '../contract/errors.js';
import { limits } from '../contract/limits.js';
import type { Aggregate, AppendOutcome, Decide, GuardedTransition, ReadOutcome, RecordAfter, Stored, StoreFailure, StreamStore, Waiter } from './types.js';

/**
 * When a due command could not be committed, it is tried again after this long, doubling after
 * each failure in a row up to dueRetryMaxMs; a success starts again from dueRetryMs.
 */
export const dueRetryMs = 100;
export const dueRetryMaxMs = 60_000;
/** How long after a notice's reload failed (the store unavailable) it is tried again, doubling after each failure up to reloadRetryMaxMs. */
export const reloadRetryMs = 1000;
export const reloadRetryMaxMs = 30_000;

/** One aggregate instance in memory: the fold of its stream, its serial queue, waiters and due timer. */
export interface Stream<R> {
  readonly id: string;
  record: R;
  queue: Promise<unknown>;
  waiters: Set<Waiter<R>>;
  dueTimer: TimerHandle | undefined;
  dueAtMs: number | undefined;
  /**
   * Revisions of the stream this process has applied or read. A store notice of any other
   * revision means another process appended: the record is read again.
   */
  known: Set<string>;
  /** Set once its log was tombstoned (pruned): it left the cache, and its waiters are answered `expired`. */
  pruned?: true;
  /** Due commands that failed in a row (reset when one succeeds): the 1st, 2nd, 4th, 8th… are told (onDue). */
  dueFailures?: number;
  /** Finished, and passed over for eviction while waiters held it (noteFinished): it leaves the cache with its last waiter. */
  evictWhenIdle?: true;
}

export function newStream<R>(id: string, record: R, revision: string): Stream<R> {
  return { id, record, queue: Promise.resolve(), waiters: new Set(), dueTimer: undefined, dueAtMs: undefined, known: new Set([revision]) };
}

/** What an aggregate's runtime adds around the pipeline. Every hook is optional but `due`. */
export interface KernelHooks<R, T, S extends Stream<R>> {
  /**
   * The command a due instant turns into: its asynchronous preparation (authorization answers
   * and the like) runs in the instance's queue, then the returned decider is committed.
   */
  due(stream: S): Promise<Decide<R, T> | undefined>;
  /**
   * Before an append, after the aggregate's check: a failure answered without a write (the
   * transition does not fit), or a throw. Undefined lets the append go to the store.
   */
  beforeAppend?(stream: S, transition: T): StoreFailure | undefined | Promise<StoreFailure | undefined>;
  /** A transition this process appended was applied to the record (a creation is `make`'s to note). */
  committed?(stream: S, before: R, stored: Stored<T>): void;
  /** An instance read from the store is about to be held: work queued here runs before its timers and effects. */
  loaded?(stream: S, log: readonly Stored<T>[]): void;
  /** The log was read again (a reload, or a stream loaded from the store). */
  reread?(stream: S, log: readonly Stored<T>[]): void;
  /**
   * A reload read only the tail of the log, what was stored after `after` (the revision the
   * record held), and applied it: `tail` is what the log holds past what this process had.
   */
  extended?(stream: S, tail: readonly Stored<T>[], after: string): void;
  /** The record moved (a commit, a reload, a load): effects follow here. `loaded` on a first load. */
  moved?(stream: S, loaded: boolean): void;
  /** Work that failed where nobody awaits it (a reload after a notice, a due command), counted by stage. */
  failed?(stage: string, error: unknown): void;
  /**
   * A reread log no longer holds revisions this process saw stored (`lost`): the store lost
   * writes it had acknowledged. The record is already the reread one; the command being decided
   * fails (unavailable) and is tried again, so work queued here runs before it.
   */
  lostWrites?(stream: S, lost: readonly string[]): void;
}

export interface KernelOptions<R, T extends GuardedTransition, S extends Stream<R>> {
  aggregate: Aggregate<R, T>;
  /** Read on every call, so a deployment (or a test) may swap the store it points at. */
  store: () => StreamStore<T, R>;
  clock: Clock;
  hooks: KernelHooks<R, T, S>;
  /** Finished instances kept in memory for fast reads; older ones are read again on demand. */
  finishedCacheMax: number;
}

export type LoadedLog<R, T> = { kind: 'ok'; record: R; log: Stored<T>[] } | { kind: 'empty' } | Exclude<ReadOutcome<T>, { kind: 'ok' }>;

export class Kernel<R, T extends GuardedTransition, S extends Stream<R> = Stream<R>> {
  private readonly streams = new Map<string, S>();
  /** Finished instance ids in finishing order, for eviction. */
  private readonly finished: BoundedMap<string, true>;
  private readonly committedListeners = new Set<(record: R, stored: Stored<T>) => void>();
  private watching: { close(): Promise<void> } | undefined;
  /** Reloads after a notice that failed, waiting to be tried again: one per instance. */
  private readonly reloadRetries = new Map<string, TimerHandle>();
  private closed = false;
  private readonly aggregate: Aggregate<R, T>;
  private readonly hooks: KernelHooks<R, T, S>;
  private readonly clock: Clock;
  private readonly store: () => StreamStore<T, R>;

  constructor(options: KernelOptions<R, T, S>) {
    this.aggregate = options.aggregate;
    this.hooks = options.hooks;
    this.clock = options.clock;
    this.store = options.store;
    this.finished = new BoundedMap(options.finishedCacheMax);
  }

  // ── the cache ────────────────────────────────────────────────────────────

  /** The instance held in memory, if any. */
  cached(id: string): S | undefined {
    return this.streams.get(id);
  }

  /** Every instance held in memory. */
  held(): S[] {
    return [...this.streams.values()];
  }

  /** Drops an instance from memory (the store keeps it); it is read again when next needed. */
  forget(id: string): void {
    this.streams.delete(id);
    this.finished.delete(id);
  }

  /**
   * The instance's log was tombstoned (pruned, by this process or another): it leaves the cache,
   * its timer stops, and each of its waiters is answered at once (wait throws `expired`), never
   * left until its timeout to answer the pruned payload.
   */
  letGoPruned(id: string): void {
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    this.streams.delete(id);
    this.finished.delete(id);
    stream.pruned = true;
    stream.dueTimer?.cancel();
    stream.dueTimer = undefined;
    stream.dueAtMs = undefined;
    for (const waiter of [...stream.waiters]) waiter.resolve();
  }

  /** Drops every instance from memory: the next access of each reads the store again. */
  clear(): void {
    this.streams.clear();
  }

  // ── reading ──────────────────────────────────────────────────────────────

  /** The stream's log, checked and folded; `empty` when nothing of it ever applied. */
  async readLog(id: string): Promise<LoadedLog<R, T>> {
    const read = await this.store().read(id);
    if (read.kind !== 'ok') return read;
    this.aggregate.checkLog?.(id, read.transitions);
    const record = this.aggregate.fold(read.transitions);
    return record === undefined ? { kind: 'empty' } : { kind: 'ok', record, log: read.transitions };
  }

  /**
   * Holds an instance read from the store (a restart, another process's instance): its timers
   * resume from the recorded instants and its effects (`moved`, loaded) run. When another load
   * raced this one, the instance already held is answered instead.
   */
  adopt(stream: S, log: readonly Stored<T>[]): S {
    const raced = this.streams.get(stream.id);
    if (raced) return raced;
    for (const stored of log) stream.known.add(stored.revision);
    this.hooks.reread?.(stream, log);
    this.streams.set(stream.id, stream);
    // One that finished before it was read (another process's, or from before a restart) is held
    // under the same bound as one that finished here: otherwise every finished instance a reader
    // or a peer's message names would stay in memory for good.
    if (this.aggregate.finished(stream.record)) this.noteFinished(stream.id);
    this.hooks.loaded?.(stream, log);
    this.armDue(stream);
    this.hooks.moved?.(stream, true);
    return stream;
  }

  /**
   * The cached instance, or one read from the store and made by `make`; undefined when there is
   * none. One read from the store is held (adopted: cached, its timers armed) unless `keep` refuses
   * its record; then it is answered without being held.
   */
  async load(id: string, make: (record: R) => S, keep?: (record: R) => boolean): Promise<S | undefined> {
    const cached = this.streams.get(id);
    if (cached) return cached;
    const read = await this.readLog(id);
    if (read.kind === 'not-found' || read.kind === 'empty') return undefined;
    if (read.kind !== 'ok') throw storeError(read, 'read');
    const made = make(read.record);
    return keep !== undefined && !keep(read.record) ? made : this.adopt(made, read.log);
  }

  // ── creating and committing ──────────────────────────────────────────────

  /**
   * Creates the stream with its first transition (create-if-absent). `ok` holds the new instance;
   * anything else is the store's answer (a conflict: the stream exists).
   */
  async create(id: string, transition: T, make: (record: R, stored: Stored<T>) => S): Promise<{ kind: 'ok'; stream: S } | StoreFailure> {
    const after = this.applyOnce(undefined);
    const outcome = await this.store().create(id, transition, after);
    if (outcome.kind !== 'ok') return outcome;
    const stored: Stored<T> = { revision: outcome.revision, committedAtMs: outcome.committedAtMs, transition };
    const record = after(stored);
    if (record === undefined) throw new AdapterError('expired', `creation of ${this.aggregate.name} ${id} committed outside its time guard`);
    const stream = make(record, stored);
    this.streams.set(id, stream);
    // One created finished (a workflow child cancelled before its start) is held under the bound too: nothing else would let it go.
    if (this.aggregate.finished(record)) this.noteFinished(id);
    for (const listener of this.committedListeners) listener(record, stored);
    this.armDue(stream);
    this.hooks.moved?.(stream, false);
    return { kind: 'ok', stream };
  }

  /** Runs work after everything already queued for this instance. */
  enqueue<X>(stream: S, work: () => Promise<X>): Promise<X> {
    const run = stream.queue.then(work, work);
    stream.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Decides against the current record and appends at its revision. On conflict the record is
   * reloaded and the command decided again; on `expired` the decider is asked once more with
   * `retryAsLate`. Unavailable is thrown: the caller must not treat uncertainty as success.
   */
  async commit(stream: S, decide: Decide<R, T>): Promise<void> {
    let retryAsLate = false;
    for (let tries = 0; tries < limits.conflictRetriesMax; tries++) {
      const transition = decide(stream.record, retryAsLate);
      if (!transition) return;
      const outcome = await this.append(stream, transition);
      if (outcome.kind === 'ok') return;
      if (outcome.kind === 'conflict') continue;
      if (outcome.kind === 'expired' && !retryAsLate) {
        // Guard-on-fold stores still stored a void transition: the revision moved.
        await this.reload(stream);
        retryAsLate = true;
        continue;
      }
      throw storeError(outcome, this.aggregate.commandOf(transition));
    }
    throw new AdapterError('unavailable', `${this.aggregate.name} ${stream.id}: too many concurrent writers`);
  }

  /**
   * Checks the transition, lets the aggregate's runtime refuse it (beforeAppend), and appends at
   * the record's revision (the CAS): applied when ok, the record reloaded on conflict.
   */
  async append(stream: S, transition: T): Promise<AppendOutcome> {
    const checked = stream.record;
    const prepared = this.aggregate.check?.(checked, transition, this.clock.nowMs());
    // Awaited only when the hook has asynchronous work: the common append takes no extra turn.
    const answer = this.hooks.beforeAppend?.(stream, transition);
    const refused = answer instanceof Promise ? await answer : answer;
    if (refused !== undefined) return refused;
    const before = stream.record;
    // The check's own application is reused when the record it checked is still the one appended to.
    const applied = this.applyOnce(before, prepared && before === checked ? prepared : undefined);
    const outcome = await this.store().append(stream.id, this.aggregate.revision(before), transition, applied);
    if (outcome.kind === 'ok') {
      const stored: Stored<T> = { revision: outcome.revision, committedAtMs: outcome.committedAtMs, transition };
      this.applyCommitted(stream, before, stored, applied(stored));
    } else if (outcome.kind === 'conflict') await this.reload(stream);
    return outcome;
  }

  /**
   * `before` with a stored transition applied, computed once per stored revision and instant: the
   * store may ask for it inside its write (RecordAfter) and the kernel asks after the store
   * answers; the second asking of the same stored transition (the same object at the same
   * revision and instant) costs nothing. `prepared`: what the aggregate's check answered, asked
   * instead of `apply` (it reuses the application the check made).
   */
  private applyOnce(before: R | undefined, prepared?: RecordAfter<T, R>): RecordAfter<T, R> {
    let last: { stored: Stored<T>; record: R | undefined } | undefined;
    return (stored) => {
      const held = last?.stored;
      if (last && held?.transition === stored.transition && held.revision === stored.revision && held.committedAtMs === stored.committedAtMs)
        return last.record;
      const record = prepared ? prepared(stored) : this.aggregate.apply(before, stored);
      last = { stored, record };
      return record;
    };
  }

  private applyCommitted(stream: S, before: R, stored: Stored<T>, after: R | undefined): void {
    if (after === undefined) throw new AssertionFailure('a committed transition yields a record');
    stream.record = after;
    stream.known.add(stored.revision);
    this.hooks.committed?.(stream, before, stored);
    for (const listener of this.committedListeners) listener(after, stored);
    this.recordMoved(stream, before);
  }

  /**
   * Reads the record again: after a conflict, a void append, or a notice that another process
   * appended. What another wrote reaches this process's waiters and timers as its own commits do.
   * Only what was stored after the record's revision is read where the store can say it; the
   * whole log where it cannot, or where the log no longer continues the record.
   */
  async reload(stream: S): Promise<void> {
    const store = this.store();
    if (store.readAfter !== undefined && (await this.readTail(stream, store.readAfter.bind(store)))) return;
    await this.rereadWhole(stream);
  }

  /**
   * The store answered a read of a held instance: `expired` means its log was tombstoned (pruned,
   * by this process or another), so its payload must not be answered from memory any longer. It
   * leaves the cache and its timers stop; what reads it next meets the tombstone. Throws the
   * store's answer as the typed error it is.
   */
  private readFailed(stream: S, failure: StoreFailure | { kind: string; description: string }): never {
    if (failure.kind === 'expired' && this.streams.get(stream.id) === stream) this.letGoPruned(stream.id);
    throw storeError(failure, 'reload');
  }

  /**
   * Applies to the record what its log holds after the record's revision; false when the log no
   * longer holds that revision where this process saw it (`diverged`: the whole log is read).
   */
  private async readTail(stream: S, readAfter: NonNullable<StreamStore<T, R>['readAfter']>): Promise<boolean> {
    const before = stream.record;
    const after = this.aggregate.revision(before);
    const read = await readAfter(stream.id, after);
    if (read.kind === 'diverged') return false;
    if (read.kind !== 'ok') this.readFailed(stream, read);
    if (read.transitions.length === 0) return true;
    this.aggregate.checkLog?.(stream.id, read.transitions);
    // Every aggregate's fold is apply, in order: the held record is the fold up to `after`.
    let record: R | undefined = before;
    for (const stored of read.transitions) {
      record = this.aggregate.apply(record, stored);
      stream.known.add(stored.revision);
    }
    if (record === undefined) throw new AssertionFailure(`a stored ${this.aggregate.name} folds to a record`);
    this.hooks.extended?.(stream, read.transitions, after);
    stream.record = record;
    this.recordMoved(stream, before);
    return true;
  }

  /** Reads the whole log again: every revision this process saw stored must still be in it. */
  private async rereadWhole(stream: S): Promise<void> {
    const read = await this.readLog(stream.id);
    if (read.kind === 'empty') throw new AssertionFailure(`a stored ${this.aggregate.name} folds to a record`);
    if (read.kind !== 'ok') this.readFailed(stream, read);
    // A log only grows: every revision this process saw stored must still be in it.
    const stored = new Set(read.log.map((s) => s.revision));
    const lost = [...stream.known].filter((revision) => !stored.has(revision));
    stream.known = stored;
    this.hooks.reread?.(stream, read.log);
    const before = stream.record;
    stream.record = read.record;
    if (this.aggregate.revision(read.record) !== this.aggregate.revision(before)) this.recordMoved(stream, before);
    if (lost.length > 0) {
      this.hooks.lostWrites?.(stream, lost);
      throw new AdapterError(
        'unavailable',
        `${this.aggregate.name} ${stream.id}: the store lost acknowledged writes (revision(s) ${lost.join(', ')} are gone from its log)`,
      );
    }
  }

  /** What follows any change of a held record: waiters answered, the finished cache, the due timer, effects. */
  private recordMoved(stream: S, before: R): void {
    const after = stream.record;
    for (const waiter of stream.waiters) {
      if (waiter.until(after)) {
        stream.waiters.delete(waiter);
        waiter.resolve();
      }
    }
    if (!this.aggregate.finished(before) && this.aggregate.finished(after)) this.noteFinished(stream.id);
    this.armDue(stream);
    this.hooks.moved?.(stream, false);
  }

  /** Keeps memory bounded: the oldest finished, idle instances leave the cache (the store keeps them). */
  private noteFinished(id: string): void {
    const evicted = this.finished.set(id, true);
    if (evicted === undefined) return;
    const stream = this.streams.get(evicted);
    if (stream === undefined) return;
    // One a waiter holds leaves with its last waiter (wait): no longer among the finished, it was held for good.
    if (stream.waiters.size === 0) this.streams.delete(evicted);
    else stream.evictWhenIdle = true;
  }

  onCommitted(listener: (record: R, stored: Stored<T>) => void): () => void {
    this.committedListeners.add(listener);
    return () => this.committedListeners.delete(listener);
  }

  // ── timers as data ───────────────────────────────────────────────────────

  /** One timer per instance, at the next instant its record says something may fall due. */
  armDue(stream: S): void {
    const dueMs = this.aggregate.nextDueMs(stream.record);
    if (dueMs === stream.dueAtMs) return;
    this.armAt(stream, dueMs);
  }

  /**
   * The instance's one timer, at `atMs` (none when undefined): whatever was armed before is
   * cancelled, and `dueAtMs` is always the instant of the timer `dueTimer` holds.
   */
  private armAt(stream: S, atMs: number | undefined): void {
    stream.dueTimer?.cancel();
    stream.dueAtMs = atMs;
    stream.dueTimer = atMs === undefined ? undefined : this.clock.at(atMs, () => this.onDue(stream));
  }

  private onDue(stream: S): void {
    // The timer that fired is armed no longer: a commit while the due work runs arms afresh.
    stream.dueTimer = undefined;
    stream.dueAtMs = undefined;
    void this.enqueue(stream, async () => {
      const decide = await this.hooks.due(stream);
      if (decide) await this.commit(stream, decide);
      stream.dueFailures = undefined;
      this.armDue(stream);
    }).catch((error: unknown) => {
      // The store refused (unavailable, or its clock not yet at the due instant), or what the command
      // needed could not be had (a policy that could not answer): told (`failed`: counted and logged),
      // and tried again, backing off. The first retry comes after dueRetryMs, so a store blip
      // recovers at once; each failure in a row doubles the wait up to dueRetryMaxMs, but never past
      // the record's next due instant after now (nextDueAfterMs: a deadline behind a retry that a
      // policy outage holds up still falls due on time). A refusal that will not pass
      // (invalid-input: a log with no room left) was tried every dueRetryMs for ever, a store round
      // trip ten times a second for each such instance. Only the 1st, 2nd, 4th, 8th… failure in a
      // row is told: a store down for a minute under thousands of instances past their deadlines
      // must not log a line per retry for each. The retry replaces a timer a commit armed while the
      // work ran, so one timer is armed, never two; none once the instance was pruned or the kernel
      // closed, or when its record asks for none.
      if (this.closed || stream.pruned) return;
      const failures = (stream.dueFailures ?? 0) + 1;
      stream.dueFailures = failures;
      if (toldInARow(failures)) this.hooks.failed?.('due', error);
      if (this.aggregate.nextDueMs(stream.record) === undefined) return;
      const nowMs = this.clock.nowMs();
      const retryAtMs = nowMs + doublingDelayMs(dueRetryMs, dueRetryMaxMs, failures - 1);
      const laterMs = this.aggregate.nextDueAfterMs?.(stream.record, nowMs);
      this.armAt(stream, laterMs !== undefined && laterMs < retryAtMs ? laterMs : retryAtMs);
    });
  }

  // ── other processes' appends ─────────────────────────────────────────────

  /**
   * Listens for appends to the store by any client: a notice of a revision this process has not
   * applied makes it read that instance again. Alone on its store, a process is told only of its
   * own revisions, which it recognizes with a set lookup.
   */
  async watch(): Promise<void> {
    if (this.watching) return;
    this.watching = await this.store().watch((id, revision) => this.onRevision(id, revision));
  }

  private onRevision(id: string, revision: string): void {
    const stream = this.streams.get(id);
    if (!stream || stream.known.has(revision)) return;
    // A notice of this process's own append can come before the append's answer (a store may
    // tell its watchers inside the write): look again once that answer has been applied.
    setImmediate(() => this.follow(stream, revision));
  }

  /**
   * Reads what a notice told of, unless it is applied already or the instance left the cache.
   * A read that fails (the store unavailable) is tried again, one retry per instance at a time,
   * after reloadRetryMs doubling up to reloadRetryMaxMs (each failure is told to `failed`, which
   * logs it): the notice may have been of the instance's last append, and no other would come to
   * bring its waiters and timers up to date.
   */
  private follow(stream: S, revision: string, retries = 0): void {
    // Nothing to read once the revision is applied here, or the instance left the cache.
    const settled = () => this.closed || stream.known.has(revision) || this.streams.get(stream.id) !== stream;
    if (settled()) return;
    // Queued behind this process's own append in flight, which may be the one the notice is of.
    void this.enqueue(stream, async () => {
      if (!settled()) await this.reload(stream);
    }).catch((error: unknown) => {
      // A tombstone (another process pruned it) let it go: nothing failed, and nothing is left to follow.
      if (settled() && error instanceof AdapterError && error.kind === 'expired') return;
      this.hooks.failed?.('reload', error);
      if (settled() || this.reloadRetries.has(stream.id)) return;
      const delayMs = doublingDelayMs(reloadRetryMs, reloadRetryMaxMs, retries);
      const retry = this.clock.at(this.clock.nowMs() + delayMs, () => {
        this.reloadRetries.delete(stream.id);
        this.follow(stream, revision, retries + 1);
      });
      this.reloadRetries.set(stream.id, retry);
    });
  }

  // ── waiters ──────────────────────────────────────────────────────────────

  /**
   * Waits until the record satisfies `until`, waitMs passes or the signal aborts. Waiting only
   * waits: a timeout or an abort never cancels work. Throws `expired` (AdapterError) when the
   * instance is pruned (letGoPruned), before or while it waits.
   */
  async wait(stream: S, until: (record: R) => boolean, waitMs: number, signal?: AbortSignal): Promise<boolean> {
    if (!until(stream.record) && waitMs > 0 && !signal?.aborted) {
      await new Promise<void>((resolve) => {
        const stop = () => {
          timer.cancel();
          stream.waiters.delete(waiter);
          signal?.removeEventListener('abort', stop);
          if (stream.evictWhenIdle === true && stream.waiters.size === 0 && this.streams.get(stream.id) === stream) this.streams.delete(stream.id);
          resolve();
        };
        const waiter: Waiter<R> = { until, resolve: stop };
        const timer = this.clock.at(this.clock.nowMs() + waitMs, stop);
        stream.waiters.add(waiter);
        signal?.addEventListener('abort', stop);
      });
    }
    if (stream.pruned) throw expired(`${this.aggregate.name} ${stream.id} was pruned: its payload is gone`);
    return until(stream.record);
  }

  /** Stops watching, lets queued work finish and cancels the timers. */
  async close(): Promise<void> {
    this.closed = true;
    await this.watching?.close().catch(() => undefined);
    await Promise.all([...this.streams.values()].map((s) => s.queue));
    for (const stream of this.streams.values()) stream.dueTimer?.cancel();
    for (const retry of this.reloadRetries.values()) retry.cancel();
    this.reloadRetries.clear();
  }
}

/** A store's failure as the typed error callers see; a missing stream is an unavailable store here. */
export function storeError(failure: StoreFailure | { kind: string; description: string }, stage: string): AdapterError {
  const kind = failure.kind === 'not-found' ? 'unavailable' : failure.kind;
  return new AdapterError(kind as AdapterError['kind'], `${stage}: ${failure.description}`);
}
