/**
 * Payload expiry (the specification's retention rule): an operation settled longer ago than the
 * declared replay/recovery period keeps its key and loses its payload. The store's tombstone does
 * it — the log goes, a minimal tombstone of the key stays, and a read or a new admission under the
 * same key answers `expired`, never recreating the operation. Capacity is never freed by deleting
 * key history: tombstones still count against `operationsMax`.
 *
 * Only operations whose record is settled with a complete settlement are pruned: an open one is
 * in-flight work, and an indeterminate settlement is kept for an operator to look at. The index
 * says which operations may qualify; each one's log is read and folded, and only the fold decides.
 * A settled record never changes phase again and its settlement instant never moves, so what the
 * fold proved still holds at the tombstone: a late result recorded in between is lost with the
 * rest of the payload, as it would be a moment later.
 *
 * A candidate the index still lists but whose read answers `expired` is a tombstone left
 * half-done: a store that tombstones in several writes (JetStream: its marker, then the purge of
 * the payload, then the index row's removal) may fail after the marker, and from then on reads
 * answer `expired`. Its tombstone is done again — every store's tombstone is idempotent and
 * finishes what is left — so running a prune again finishes what a failed one left.
 */
import type { EventStore } from '../adapters/store/types.js';
import type { Clock, TimerHandle } from '../contract/clock.js';
import { AdapterError, invalidInput } from '../contract/errors.js';
import type { IndexPosition, OperationIndexRow } from '../events/operation-index.js';
import type { StoredTransition } from '../events/types.js';
import { fold } from '../projections/record.js';

/** The shortest replay/recovery period a prune accepts: an hour. */
export const retentionKeepMsMin = 3_600_000;
/** The longest: ten years (beyond it, nothing is pruned in practice and a typo is likelier). */
export const retentionKeepMsMax = 10 * 366 * 86_400_000;

/** How a prune went, by what became of each operation the index listed as admitted before the cutoff. */
export interface PruneTally {
  /** The cutoff: settled before this instant is pruned. */
  cutoffMs: number;
  /** Rows listed (admitted before the cutoff). */
  examined: number;
  /** Tombstoned; under a dry run, would be. */
  pruned: number;
  /**
   * Of those pruned, found tombstoned already while the index still listed them (a tombstone an
   * earlier prune left half-done, or one another prune was doing meanwhile): tombstoned again,
   * which finished it.
   */
  finished: number;
  /** Not settled yet (in flight, or decided with branches still settling). */
  open: number;
  /** Settled with an indeterminate settlement: kept for an operator. */
  indeterminate: number;
  /** Settled at or after the cutoff. */
  recent: number;
  /** Listed, but already gone when read or tombstoned (removed meanwhile). */
  gone: number;
  /** A read or tombstone that failed; the next prune tries them again. */
  failures: { operationId: string; kind: string; description: string }[];
}

/** How a prune of workflow instances went (src/workflow/exec/retention.ts), as PruneTally is for operations. */
export interface InstancePruneTally {
  cutoffMs: number;
  /** Rows listed (started before the cutoff). */
  examined: number;
  /** Tombstoned; under a dry run, would be. */
  pruned: number;
  /** Of those pruned, found tombstoned already while the index still listed them (as PruneTally's). */
  finished: number;
  running: number;
  /** Ended at or after the cutoff. */
  recent: number;
  /** Ended before the cutoff, but a parent or a child of it still runs. */
  needed: number;
  gone: number;
  failures: { instanceId: string; kind: string; description: string }[];
}

export interface PruneRequest<T = PruneTally> {
  store: EventStore;
  nowMs: number;
  /** The replay/recovery period: operations settled at least this long before `nowMs` (and before the store's clock: storeCutoffOf) are pruned. */
  keepMs: number;
  /** Count what would be pruned, change nothing. */
  dryRun?: boolean;
  /** Rows per index page (1..500, default 500). */
  pageSize?: number;
  /** Told after each page with the tally so far. */
  progress?: (tally: T) => void;
  /** Checked between operations: a stop asked for ends the prune after the ones under way. */
  stopped?: () => boolean;
  /** Operations (or instances) read and tombstoned at once (default 8). */
  concurrency?: number;
  /** Told each stream this prune tombstoned (never under a dry run): a process holding it in memory lets it go, and reads the tombstone next. */
  pruned?: (id: string) => void;
}

export const pruneConcurrencyDefault = 8;
/** Index rows a prune lists at a time (the most a list page holds). */
export const prunePageSizeDefault = 500;

/** Why `keepMs` is no replay/recovery period, or undefined when it is one. */
export function keepMsProblem(keepMs: number): string | undefined {
  if (!Number.isSafeInteger(keepMs)) return 'the retention period must be a whole number of milliseconds';
  if (keepMs < retentionKeepMsMin) return `the retention period must be at least an hour (${retentionKeepMsMin} ms); it was ${keepMs} ms`;
  if (keepMs > retentionKeepMsMax) return `the retention period must be at most ten years (${retentionKeepMsMax} ms); it was ${keepMs} ms`;
  return undefined;
}

/**
 * Tombstones every operation settled (complete) more than `keepMs` before `nowMs`, walking the
 * operations index from the cutoff back, one page at a time. Read and tombstone failures are
 * counted, not thrown: one unreadable operation does not stop the rest. An index that cannot be
 * listed throws (`unavailable`).
 */
export async function pruneOperations(request: PruneRequest): Promise<PruneTally> {
  const cutoffMs = await storeCutoffOf(request);
  const tally: PruneTally = { cutoffMs, examined: 0, pruned: 0, finished: 0, open: 0, indeterminate: 0, recent: 0, gone: 0, failures: [] };
  const list = (after: IndexPosition | undefined, limit: number) => request.store.index.list({ untilMs: cutoffMs, limit, ...(after ? { after } : {}) });
  return walkPages(request, tally, list, (row) => pruneOne(request, row, tally));
}

/**
 * A prune stopped part-way by a page its index could not list: what it had done by then (its
 * tally), with the failure's kind (an unavailable store stays unavailable: exit 4, retried on
 * schedule). Running it again finishes the rest.
 */
export class PruneStopped<T extends { examined: number } = { examined: number }> extends AdapterError {
  constructor(
    readonly tally: T,
    cause: unknown,
  ) {
    const failure = cause instanceof AdapterError ? cause : undefined;
    const detail = failure?.description ?? (cause instanceof Error ? cause.message : String(cause));
    super(failure?.kind ?? 'unavailable', `the index could not be listed past ${tally.examined} rows examined (${detail}); run the prune again for the rest`, {
      cause,
    });
  }
}

/**
 * The cutoff of a prune on its store: `keepMs` before the earlier of `nowMs` and the store's own
 * clock, where the store stamps with one (EventStore.nowMs: a JetStream server's). committedAtMs
 * is that clock's, so a pruning process whose clock runs ahead of it never takes a record younger
 * than `keepMs` by it; a clock behind only keeps more.
 */
export async function storeCutoffOf(request: Pick<PruneRequest<unknown>, 'store' | 'nowMs' | 'keepMs'>): Promise<number> {
  const cutoffMs = cutoffOf(request);
  if (request.store.nowMs === undefined) return cutoffMs;
  return Math.min(cutoffMs, (await request.store.nowMs()) - request.keepMs);
}

/** The cutoff of a prune (`nowMs` − `keepMs`), its period checked first. */
export function cutoffOf(request: Pick<PruneRequest<unknown>, 'nowMs' | 'keepMs'>): number {
  const problem = keepMsProblem(request.keepMs);
  if (problem !== undefined) throw invalidInput(problem);
  return request.nowMs - request.keepMs;
}

/**
 * An index's pages from the cutoff back, each row counted as examined and handed to `each`, at
 * most `concurrency` at a time (a remote store's tombstone is several round trips), until the last
 * page or a stop asked for (no row is started after it; those under way finish); progress told
 * after each page, once its rows are done.
 */
export async function walkPages<T extends { examined: number }, R, P>(
  request: Pick<PruneRequest<T>, 'stopped' | 'progress' | 'concurrency' | 'pageSize'>,
  tally: T,
  list: (after: P | undefined, limit: number) => Promise<{ rows: R[]; next?: P }>,
  each: (row: R) => Promise<void>,
): Promise<T> {
  const concurrency = request.concurrency ?? pruneConcurrencyDefault;
  const limit = request.pageSize ?? prunePageSizeDefault;
  let after: P | undefined;
  do {
    let page: { rows: R[]; next?: P };
    try {
      page = await list(after, limit);
    } catch (error) {
      // What was done before is not lost with the page: the tally goes with the failure.
      if (tally.examined === 0) throw error;
      throw new PruneStopped(tally, error);
    }
    const underWay = new Set<Promise<void>>();
    let failed: unknown;
    for (const row of page.rows) {
      if (request.stopped?.() || failed !== undefined) break;
      tally.examined++;
      const done: Promise<void> = each(row)
        .catch((error: unknown) => void (failed ??= error))
        .finally(() => underWay.delete(done));
      underWay.add(done);
      if (underWay.size >= concurrency) await Promise.race(underWay);
    }
    await Promise.all(underWay);
    if (failed !== undefined) throw failed;
    request.progress?.(tally);
    if (request.stopped?.()) return tally;
    after = page.next;
  } while (after !== undefined);
  return tally;
}

/** What the index row says of an operation, before its log is read: only a candidate is read. */
function rowVerdict(row: OperationIndexRow, cutoffMs: number): 'candidate' | 'open' | 'indeterminate' | 'recent' {
  if (row.phase !== 'settled') return 'open';
  if (row.settlement === 'indeterminate') return 'indeterminate';
  if (row.settlement !== 'complete' || row.settledAtMs === null) return 'open';
  return row.settledAtMs < cutoffMs ? 'candidate' : 'recent';
}

async function pruneOne(request: PruneRequest, row: OperationIndexRow, tally: PruneTally): Promise<void> {
  const cutoffMs = tally.cutoffMs;
  const verdict = rowVerdict(row, cutoffMs);
  if (verdict !== 'candidate') {
    tally[verdict]++;
    return;
  }
  const id = row.operationId;
  const failed = (failure: { kind: string; description: string }) => tally.failures.push({ operationId: id, ...failure });
  const log = await logToPrune(request, id, tally, failed);
  if (log === undefined) return;
  // The log decides: an index row may lag it, never lead it (phases only advance).
  const record = fold(log);
  const completedAtMs = record?.settlement.completedAtMs ?? null;
  if (record === undefined || record.phase !== 'settled' || record.settlement.status !== 'complete' || completedAtMs === null) {
    tally[record?.settlement.status === 'indeterminate' ? 'indeterminate' : 'open']++;
    return;
  }
  if (completedAtMs >= cutoffMs) {
    tally.recent++;
    return;
  }
  await pruneProved(request, id, tally, failed);
}

/** The last step of a candidate its log proved prunable: counted under a dry run, else tombstoned (gone already, or a failure told); answers which. */
export async function pruneProved(
  request: Pick<PruneRequest<unknown>, 'store' | 'dryRun' | 'pruned'>,
  id: string,
  tally: { pruned: number; gone: number },
  failed: (failure: { kind: string; description: string }) => void,
): Promise<'pruned' | 'gone' | 'failed'> {
  const failure = request.dryRun === true ? undefined : await tombstoneOf(request.store, id);
  if (failure === undefined) {
    if (request.dryRun !== true) request.pruned?.(id);
    tally.pruned++;
    return 'pruned';
  }
  if (failure.kind === 'not-found') {
    tally.gone++;
    return 'gone';
  }
  failed(failure);
  return 'failed';
}

/**
 * A candidate's log; undefined when there is none to decide on: gone (counted), tombstoned
 * already (its tombstone done again and counted: the index still listing it means it may be
 * half-done), or unreadable (told to `failed`).
 */
export async function logToPrune(
  request: Pick<PruneRequest<unknown>, 'store' | 'dryRun' | 'pruned'>,
  id: string,
  tally: { pruned: number; finished: number; gone: number },
  failed: (failure: { kind: string; description: string }) => void,
): Promise<StoredTransition[] | undefined> {
  const read = await request.store.read(id);
  if (read.kind === 'ok') return read.transitions;
  if (read.kind === 'not-found') tally.gone++;
  else if (read.kind === 'expired') {
    if ((await pruneProved(request, id, tally, failed)) === 'pruned') tally.finished++;
  } else failed({ kind: read.kind, description: read.description });
  return undefined;
}

/** The store's tombstone: undefined when done, else its failure (an AdapterError a store throws answered as one). */
async function tombstoneOf(store: EventStore, id: string): Promise<{ kind: string; description: string } | undefined> {
  try {
    const outcome = await store.tombstone(id);
    return outcome.kind === 'ok' ? undefined : outcome;
  } catch (error) {
    if (error instanceof AdapterError) return { kind: error.kind, description: error.description ?? error.kind };
    throw error;
  }
}

/**
 * The tombstone of a pruned stream (its reads answer expired) done again: what `replay
 * --fix-index` does for an index row left by a tombstone that stopped before its last step (on
 * JetStream the row's removal comes last), as the next prune would have done it from that row. A
 * tombstone done again is a no-op on a finished one, on every store.
 */
export async function finishTombstone(store: EventStore, id: string): Promise<void> {
  const failure = await tombstoneOf(store, id);
  if (failure !== undefined) throw new AdapterError('unavailable', `finishing the tombstone of ${id}: ${failure.kind}: ${failure.description}`);
}

/** The shortest and longest interval between a deployment's scheduled prunes, and its default. */
export const retentionEveryMsMin = 60_000;
export const retentionEveryMsMax = 86_400_000;
export const retentionEveryMsDefault = 3_600_000;

export interface RetentionScheduleOptions {
  store: EventStore;
  clock: Clock;
  keepMs: number;
  /** Between the end of one prune and the start of the next; the first starts this long after the schedule (default an hour). */
  everyMs?: number;
  /** Prunes the workflow instances too, after the operations (src/workflow/exec/retention.ts, as the deployment's workflow service runs it). */
  instances?(request: Omit<PruneRequest<InstancePruneTally>, 'store'>): Promise<InstancePruneTally>;
  /**
   * Told each prune's tallies when it ended: it ran through, it was stopped (`stopped`), or it
   * failed part-way (`error`: an index page could not be listed, or the workflow instances' prune
   * failed after the operations'), with what it had done by then.
   */
  onPrune?(tallies: { operations: PruneTally; instances?: InstancePruneTally }, stopped: boolean, error?: unknown): void;
  /** Told a prune that could not run at all (the first page of the index could not be listed); the next goes on schedule. */
  onError?(error: unknown): void;
  /** Told each operation or instance a prune tombstoned (PruneRequest.pruned): the deployment's caches let it go. */
  onPruned?(kind: 'operation' | 'workflow-instance', id: string): void;
}

/**
 * A deployment's own payload expiry (config `retention`): a prune every `everyMs`, one at a time,
 * on the injected clock. `close()` cancels the next and stops one under way after the operation
 * or instance it is at, and resolves when it has stopped: the store can then be closed under it.
 */
export function scheduleRetention(options: RetentionScheduleOptions): { close(): Promise<void> } {
  const problem = keepMsProblem(options.keepMs);
  if (problem !== undefined) throw invalidInput(problem);
  const everyMs = options.everyMs ?? retentionEveryMsDefault;
  let closed = false;
  let timer: TimerHandle | undefined;
  let running: Promise<void> | undefined;
  const next = () => {
    if (!closed) timer = options.clock.at(options.clock.nowMs() + everyMs, run);
  };
  const prune = async () => {
    const request = { nowMs: options.clock.nowMs(), keepMs: options.keepMs, stopped: () => closed };
    const told = (kind: 'operation' | 'workflow-instance') => (options.onPruned ? { pruned: (id: string) => options.onPruned?.(kind, id) } : {});
    let operations: PruneTally | undefined;
    let instances: InstancePruneTally | undefined;
    let failure: unknown;
    try {
      operations = await pruneOperations({ store: options.store, ...request, ...told('operation') });
      if (options.instances && !closed) instances = await options.instances({ ...request, ...told('workflow-instance') });
    } catch (error) {
      // Stopped part-way: what it did is told with the failure (its tombstones counted), not lost with it.
      if (!(error instanceof PruneStopped) && operations === undefined) throw error;
      if (operations === undefined) operations = (error as PruneStopped<PruneTally>).tally;
      else if (error instanceof PruneStopped) instances = (error as PruneStopped<InstancePruneTally>).tally;
      failure = error;
    }
    const tallies = instances === undefined ? { operations } : { operations, instances };
    if (failure === undefined) options.onPrune?.(tallies, closed);
    else options.onPrune?.(tallies, closed, failure);
  };
  const run = () => {
    timer = undefined;
    running = prune()
      .catch((error: unknown) => options.onError?.(error))
      .finally(() => {
        running = undefined;
        next();
      });
  };
  next();
  return {
    close: async () => {
      closed = true;
      timer?.cancel();
      await running;
    },
  };
}
