/**
 * What the kernel needs of an event-sourced aggregate and of the store it lives in. Nothing here
 * names operations: an aggregate is its transitions (events under a time guard), its record (the
 * fold of them), and the instant its record says something next falls due.
 */
import type { TimeGuard } from '../events/types.js';

/** A transition as the kernel sees it: whatever the aggregate's events are, under a time guard. */
export interface GuardedTransition {
  timeGuard: TimeGuard;
}

/** One transition as the store returned it, at its revision and serialization instant. */
export interface Stored<T> {
  revision: string;
  committedAtMs: number;
  transition: T;
}

export type StoreFailureKind = 'conflict' | 'expired' | 'unavailable' | 'not-found' | 'invalid-input';
export type StoreFailure = { kind: StoreFailureKind; description: string };
export type AppendOutcome = { kind: 'ok'; revision: string; committedAtMs: number } | StoreFailure;
export type ReadOutcome<T> =
  | { kind: 'ok'; revision: string; transitions: Stored<T>[] }
  | { kind: 'not-found'; description: string }
  | { kind: 'expired'; description: string }
  | { kind: 'unavailable'; description: string };
/** The transitions stored after a revision (StreamStore.readAfter), or that the log no longer continues from it. */
export type TailOutcome<T> =
  { kind: 'ok'; revision: string; transitions: Stored<T>[] } | { kind: 'diverged'; description: string } | Exclude<ReadOutcome<T>, { kind: 'ok' }>;

/**
 * The record after the transition being written, as the committing side derives it: its record at
 * the expected revision with `stored` applied (the aggregate's apply). A store that keeps a
 * projection beside its log (the operations index) calls it with what it stored instead of
 * folding the transition again; the kernel applies each committed transition once, whether the
 * store asked first or not. A store must not trust it further than the log: it uses the answer
 * only for the stream and revision it just wrote.
 */
export type RecordAfter<T, R> = (stored: Stored<T>) => R | undefined;

/**
 * One stream per aggregate instance, create-if-absent, append at an expected revision (the CAS),
 * the time guard checked at the store's serialization point. Every EventStore is one. `after`
 * is optional for a store to use (RecordAfter).
 */
export interface StreamStore<T, R = unknown> {
  create(streamId: string, transition: T, after?: RecordAfter<T, R>): Promise<AppendOutcome>;
  append(streamId: string, expectedRevision: string, transition: T, after?: RecordAfter<T, R>): Promise<AppendOutcome>;
  read(streamId: string): Promise<ReadOutcome<T>>;
  /**
   * The transitions stored after `revision` (one the caller saw stored), in order; `diverged` when
   * the log no longer holds it where the caller saw it. Optional: without it a reload reads the
   * whole log (EventStore.readAfter).
   */
  readAfter?(streamId: string, revision: string): Promise<TailOutcome<T>>;
  /** Notice of the revision each append reached, by any client of the store. */
  watch(listener: (streamId: string, revision: string) => void): Promise<{ close(): Promise<void> }>;
}

/**
 * An aggregate: its projection (apply one stored transition, fold a log), where its record keeps
 * the revision of its stream, and its timers as data. Deciders stay outside: the kernel is given
 * a decide function per command and never knows what the events mean.
 */
export interface Aggregate<R, T extends GuardedTransition> {
  /** What an instance is called in messages ("operation", "workflow instance"). */
  readonly name: string;
  /** The record after one stored transition; undefined when the stream has nothing applied yet. */
  apply(record: R | undefined, stored: Stored<T>): R | undefined;
  /** The record of a whole log (the same apply, in order). */
  fold(log: readonly Stored<T>[]): R | undefined;
  /** The stream revision the record was folded to: the expected revision of the next append. */
  revision(record: R): string;
  /** The next instant at which a due command may have something to do; undefined when none. */
  nextDueMs(record: R): number | undefined;
  /**
   * The first of those instants later than `afterMs`; undefined when none. A due command that
   * failed is tried again backing off (kernel.ts onDue), but never later than this: an instant
   * behind the one that keeps failing (a deadline behind a retry a policy outage holds up) is
   * kept. Without it the backoff alone decides when the next due command runs.
   */
  nextDueAfterMs?(record: R, afterMs: number): number | undefined;
  /** The command a transition was decided for, to name it in errors. */
  commandOf(transition: T): string;
  /** Whether nothing more will happen to it (a finished instance may leave the cache). */
  finished(record: R): boolean;
  /**
   * A decided transition that breaks the aggregate's rules (schema, machines): throws an assertion.
   * An aggregate that checks by applying the transition (at `atMs`, the instant the kernel expects
   * the store to stamp) may answer how to derive the record after it from that work: the kernel
   * then asks it, not `apply`, for the committed record (RecordAfter), and it must answer exactly
   * what `apply` would for the stamp the store gave.
   */
  check?(record: R, transition: T, atMs: number): RecordAfter<T, R> | void;
  /** A log read back from the store that fails its schema: throws (corruption is never folded). */
  checkLog?(streamId: string, log: readonly Stored<T>[]): void;
}

/**
 * Decides one command against the current record: the transition to append, or undefined when
 * nothing is to be appended. `retryAsLate`: the store answered that the previous attempt was
 * serialized outside its guard (the decider may record the rejection instead).
 */
export type Decide<R, T> = (record: R, retryAsLate: boolean) => T | undefined;

export interface Waiter<R> {
  until(record: R): boolean;
  resolve(): void;
}
