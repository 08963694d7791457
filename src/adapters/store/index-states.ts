/**
 * What a store needs to maintain the operations index at append: the operation's record after the
 * transition it stores, from which the row is `indexRow` (projections/operation-index.ts).
 *
 * Where the record comes from, in order:
 * 1. The committing side's (RecordAfter, src/kernel/types.ts): the kernel hands the store a
 *    function that applies the stored transition to the record it holds at the expected revision
 *    — the fold it does anyway — so nothing folds twice. The store has just checked that revision
 *    (the CAS), and uses the answer only when it names this operation at the revision it wrote;
 *    anything else falls through to 2.
 * 2. The record this store client remembers at the previous revision, with the transition applied.
 * 3. The fold of the log read back.
 * So the row is always the projection of the log the store holds, given that the committing
 * side's record is the fold of that log up to its expected revision (the kernel's invariant:
 * its record is exactly the fold of what it read and appended); `convoke replay` folds each log
 * again and compares, and `index.rebuild` (`replay --fix-index`) rewrites a row from the log.
 */
import { BoundedMap } from '../../contract/bounded-map.js';
import type { OperationIndexRow } from '../../events/operation-index.js';
import type { StoredTransition } from '../../events/types.js';
import { unavailable } from '../../contract/errors.js';
import type { IndexAfter, ReadOutcome } from './types.js';
import { indexRow } from '../../projections/operation-index.js';
import { applyStored, fold, type OperationRecord } from '../../projections/record.js';
import { isSettled } from '../../machines/index.js';
import { limits } from '../../contract/limits.js';

/**
 * Held per operation: its record, or `none` — the log has no row and never will (nothing applied
 * after its first transition, or a lifecycle the fold refuses: an admission only ever begins a
 * stream, and a refused fold stays refused), so later appends need no read.
 */
type Held = OperationRecord | 'none';

export class IndexStates {
  private readonly states = new BoundedMap<string, Held>(limits.indexStatesKeptMax);

  /**
   * The row after `stored`, appended at `previousRevision` (undefined for a create). `after` is
   * the committing side's record (see the header); `log` reads the transitions before `stored`
   * when neither it nor a held record serves.
   */
  rowAfter(
    operationId: string,
    previousRevision: string | undefined,
    stored: StoredTransition,
    log: () => readonly StoredTransition[],
    after?: IndexAfter,
  ): OperationIndexRow | undefined {
    const held = this.states.get(operationId);
    if (held === 'none' && previousRevision !== undefined) return undefined;
    return this.remembered(operationId, () => {
      const given = committed(operationId, stored, after);
      if (given !== undefined) return given;
      const before = previousRevision === undefined ? undefined : held !== 'none' && held?.revision === previousRevision ? held : fold(log());
      return applyStored(before, stored);
    });
  }

  /**
   * The row after `stored`, for a store that writes its index after the append (JetStream,
   * EventStoreDB): from the committing side's record, else the record held at `previousRevision`,
   * else the log read back up to `stored` (`logOf` answers undefined when the stream is gone: no
   * row). Revisions are decimal strings, compared as integers of any size.
   */
  async rowAfterStored(
    operationId: string,
    previousRevision: string | undefined,
    stored: StoredTransition,
    logOf: () => Promise<readonly StoredTransition[] | undefined>,
    after?: IndexAfter,
  ): Promise<OperationIndexRow | undefined> {
    if (previousRevision === undefined || this.holds(operationId, previousRevision) || committed(operationId, stored, after) !== undefined)
      return this.rowAfter(operationId, previousRevision, stored, () => [], after);
    const log = await logOf();
    if (log === undefined) return undefined;
    const upTo = BigInt(stored.revision);
    return this.rowOfLog(
      operationId,
      log.filter((t) => BigInt(t.revision) <= upTo),
    );
  }

  /** Whether the record at `revision` is held, or the log is known to have no row (an append after it needs no read). */
  holds(operationId: string, revision: string): boolean {
    const held = this.states.get(operationId);
    return held === 'none' || (held !== undefined && held.revision === revision);
  }

  /** The row of a whole log (rebuilds), remembered for the next append. */
  rowOfLog(operationId: string, transitions: readonly StoredTransition[]): OperationIndexRow | undefined {
    return this.remembered(operationId, () => fold(transitions));
  }

  /**
   * The row of the record `fold` answers, which is remembered. A log that is not an operation's
   * (its first transition no admission: a store's own tests write opaque ones) or that breaks the
   * lifecycle has no row: the index then says nothing of it rather than something the log does
   * not, and `convoke replay` reports the log itself.
   */
  private remembered(operationId: string, fold: () => OperationRecord | undefined): OperationIndexRow | undefined {
    let record: OperationRecord | undefined;
    try {
      record = fold();
    } catch {
      record = undefined;
    }
    if (record === undefined) {
      this.states.set(operationId, 'none');
      return undefined;
    }
    this.states.set(operationId, record);
    return indexRow(record);
  }

  forget(operationId: string): void {
    this.states.delete(operationId);
  }
}

/**
 * The committing side's record after `stored`, when it is one of this operation at exactly the
 * revision stored; undefined otherwise (no record given, a void creation, or one that does not
 * match what was written — never trusted over the log).
 */
function committed(operationId: string, stored: StoredTransition, after: IndexAfter | undefined): OperationRecord | undefined {
  if (after === undefined) return undefined;
  let record: ReturnType<IndexAfter>;
  try {
    record = after(stored);
  } catch {
    return undefined; // the log decides: the store folds it itself
  }
  return record !== undefined && 'operationId' in record && record.operationId === operationId && record.revision === stored.revision ? record : undefined;
}

/** A store's log for its index writer, as read() answers it: transitions, undefined when it has none, a throw when unreadable. */
export function logOfRead(read: (operationId: string) => Promise<ReadOutcome>): (operationId: string) => Promise<StoredTransition[] | undefined> {
  return async (operationId) => {
    const outcome = await read(operationId);
    if (outcome.kind === 'unavailable') throw unavailable(outcome.description);
    return outcome.kind === 'ok' ? outcome.transitions : undefined;
  };
}

/**
 * Of the live operations `ids`, those that may be open (OperationIndexStore.openOperationIds):
 * no row, or a row not settled. For a store that writes its rows apart from its logs.
 */
export async function* mayBeOpen(ids: AsyncIterable<string>, rows: Iterable<OperationIndexRow>): AsyncIterable<string> {
  const settled = new Set<string>();
  for (const row of rows) if (isSettled(row.phase)) settled.add(row.operationId);
  for await (const id of ids) if (!settled.has(id)) yield id;
}
