/**
 * What a live event stream of one operation or instance reads (src/http/live.ts): the whole
 * inspection once, then what each append changed, from the transitions stored after the last one
 * read (the store's readAfter, as the kernel extends a cached record) rather than the whole log.
 */
import { AdapterError } from '../contract/errors.js';
import type { ReadOutcome, Stored, TailOutcome } from '../kernel/types.js';

/**
 * An inspection a live stream follows: the whole of it once, then, each time it is asked, what
 * changed since the last answer. `undefined`: nothing was stored since; `snapshot`: the log no
 * longer continues what was sent (a store that lost writes), so the client starts again from it.
 */
export interface LiveInspection<S, U> {
  readonly first: S;
  next(): Promise<{ kind: 'update'; update: U } | { kind: 'snapshot'; inspection: S } | undefined>;
}

/** Where a live inspection reads its stream: the whole log, and where the store can say it, only what was stored after a revision. */
export interface LogSource<T> {
  read(streamId: string): Promise<ReadOutcome<T>>;
  readAfter?(streamId: string, revision: string): Promise<TailOutcome<T>>;
}

/**
 * The transitions stored after the first `length` of the log, the last of them at `revision`, as
 * the caller saw it; `diverged` when the log no longer continues that. Only that tail is read
 * where the store reads tails; elsewhere the whole log, checked to hold `revision` where it was.
 */
export async function readTail<T>(
  store: LogSource<T>,
  streamId: string,
  seen: { revision: string; length: number },
): Promise<{ kind: 'ok'; transitions: Stored<T>[] } | Exclude<TailOutcome<T>, { kind: 'ok' }>> {
  if (store.readAfter) return store.readAfter(streamId, seen.revision);
  const read = await store.read(streamId);
  if (read.kind !== 'ok') return read;
  if (read.transitions[seen.length - 1]?.revision !== seen.revision)
    return { kind: 'diverged', description: `stream ${streamId} no longer holds revision ${seen.revision} at position ${seen.length}` };
  return { kind: 'ok', transitions: read.transitions.slice(seen.length) };
}

/**
 * How a live inspection takes what it read: `notFound` is its answer for a missing or pruned
 * stream; `checkLog` is the aggregate's check of a log read back (its schema), which throws
 * `unavailable` for a transition that fails it, as the kernel does, so corruption is never folded.
 */
export interface LogReading<T> {
  notFound(): Error;
  checkLog(log: readonly Stored<T>[], streamId: string): void;
}

/** The whole log, for a live inspection's snapshot: an unavailable store throws `unavailable`, any other failure (unknown, pruned) `notFound`. */
export async function readWholeLog<T>(store: LogSource<T>, streamId: string, reading: LogReading<T>): Promise<Stored<T>[]> {
  return checked(transitionsOf(await store.read(streamId), reading), streamId, reading);
}

/** The transitions stored after `seen` (readTail), `diverged` when the log no longer continues it; failures as readWholeLog. */
export async function readNewer<T>(
  store: LogSource<T>,
  streamId: string,
  seen: { revision: string; length: number },
  reading: LogReading<T>,
): Promise<Stored<T>[] | 'diverged'> {
  const read = await readTail(store, streamId, seen);
  return read.kind === 'diverged' ? 'diverged' : checked(transitionsOf(read, reading), streamId, reading);
}

function transitionsOf<T>(read: Exclude<ReadOutcome<T>, { kind: 'ok' }> | { kind: 'ok'; transitions: Stored<T>[] }, reading: LogReading<T>): Stored<T>[] {
  if (read.kind === 'unavailable') throw new AdapterError('unavailable', read.description);
  if (read.kind !== 'ok') throw reading.notFound();
  return read.transitions;
}

function checked<T>(log: Stored<T>[], streamId: string, reading: LogReading<T>): Stored<T>[] {
  reading.checkLog(log, streamId);
  return log;
}
