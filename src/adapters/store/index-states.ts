/**
 * What a store needs to maintain the operations index at append: the index state of recently
 * written operations (so an append applies one transition instead of folding the whole log), and
 * the fold of a log when it holds none. A state is used only at the revision it was folded to;
 * anything else folds the log again, so a stale cache can cost time, never a wrong row.
 */
import { BoundedMap } from '../../contract/bounded-map.js';
import type { OperationIndexRow } from '../../events/operation-index.js';
import type { StoredTransition } from '../../events/types.js';
import { unavailable } from '../../contract/errors.js';
import type { ReadOutcome } from './types.js';
import { indexRow, indexStateOfLog, indexStep, type OperationIndexState } from '../../projections/operation-index.js';

/** Index states kept per store client. */
const statesKeptMax = 1024;

/**
 * Held per operation: its index state, or `none` — the log has no row and never will (nothing
 * applied after its first transition, or a lifecycle the fold refuses: an admission only ever
 * begins a stream, and a refused fold stays refused), so later appends need no read.
 */
type Held = OperationIndexState | 'none';

export class IndexStates {
  private readonly states = new BoundedMap<string, Held>(statesKeptMax);

  /**
   * The row after `stored`, appended at `previousRevision` (undefined for a create). `log` reads
   * the transitions before it when the state at that revision is not held.
   */
  rowAfter(
    operationId: string,
    previousRevision: string | undefined,
    stored: StoredTransition,
    log: () => readonly StoredTransition[],
  ): OperationIndexRow | undefined {
    const held = this.states.get(operationId);
    if (held === 'none' && previousRevision !== undefined) return undefined;
    return this.remembered(operationId, () => {
      const before = previousRevision === undefined ? undefined : held !== 'none' && held?.record.revision === previousRevision ? held : indexStateOfLog(log());
      return indexStep(before, stored);
    });
  }

  /**
   * The row after `stored`, for a store that writes its index after the append (JetStream,
   * EventStoreDB): from the state held at `previousRevision`, else from the log read back up to
   * `stored` (`logOf` answers undefined when the stream is gone: no row). Revisions are decimal
   * strings, compared as integers of any size.
   */
  async rowAfterStored(
    operationId: string,
    previousRevision: string | undefined,
    stored: StoredTransition,
    logOf: () => Promise<readonly StoredTransition[] | undefined>,
  ): Promise<OperationIndexRow | undefined> {
    if (previousRevision === undefined || this.holds(operationId, previousRevision)) return this.rowAfter(operationId, previousRevision, stored, () => []);
    const log = await logOf();
    if (log === undefined) return undefined;
    const upTo = BigInt(stored.revision);
    return this.rowOfLog(
      operationId,
      log.filter((t) => BigInt(t.revision) <= upTo),
    );
  }

  /** Whether the state at `revision` is held, or the log is known to have no row (an append after it needs no read). */
  holds(operationId: string, revision: string): boolean {
    const held = this.states.get(operationId);
    return held === 'none' || held?.record.revision === revision;
  }

  /** The row of a whole log (rebuilds), remembered for the next append. */
  rowOfLog(operationId: string, transitions: readonly StoredTransition[]): OperationIndexRow | undefined {
    return this.remembered(operationId, () => indexStateOfLog(transitions));
  }

  /**
   * The row of the state `fold` answers, which is remembered. A log that is not an operation's
   * (its first transition no admission: a store's own tests write opaque ones) or that breaks the
   * lifecycle has no row: the index then says nothing of it rather than something the log does
   * not, and `convoke replay` reports the log itself.
   */
  private remembered(operationId: string, fold: () => OperationIndexState | undefined): OperationIndexRow | undefined {
    let state: OperationIndexState | undefined;
    try {
      state = fold();
    } catch {
      state = undefined;
    }
    if (state === undefined) {
      this.states.set(operationId, 'none');
      return undefined;
    }
    this.states.set(operationId, state);
    return indexRow(state);
  }

  forget(operationId: string): void {
    this.states.delete(operationId);
  }
}

/** A store's log for its index writer, as read() answers it: transitions, undefined when it has none, a throw when unreadable. */
export function logOfRead(read: (operationId: string) => Promise<ReadOutcome>): (operationId: string) => Promise<StoredTransition[] | undefined> {
  return async (operationId) => {
    const outcome = await read(operationId);
    if (outcome.kind === 'unavailable') throw unavailable(outcome.description);
    return outcome.kind === 'ok' ? outcome.transitions : undefined;
  };
}
