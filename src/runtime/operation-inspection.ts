/**
 * An operation's inspection as GET /contract-invocations/{id}/events follows it: the whole log
 * once, then after each append only what changed. It holds the record folded so far and reads
 * only the transitions stored after its revision where the store reads tails (readAfter), folding
 * them onto the record; the result and branches are projected again (the manifest bounds them) and
 * only what differs from what was sent goes out.
 */
import type { CompiledInteraction } from '../contract/bundle.js';
import { AssertionFailure } from '../contract/errors.js';
import type { StoredTransition } from '../events/types.js';
import { readNewer, readWholeLog, type LiveInspection, type LogReading, type LogSource } from './live-inspection.js';
import { checkedLog } from './operation-aggregate.js';
import { foldTimeline, inspectionChanges, inspectionOf, type OperationInspection, type OperationInspectionUpdate } from '../projections/inspection.js';
import type { OperationRecord } from '../projections/record.js';
import { OperationNotFound } from './errors.js';

export interface OperationInspectionSource {
  store: LogSource<StoredTransition['transition']>;
  interactionOf(record: OperationRecord): CompiledInteraction | undefined;
  /** Whether this principal may read the operation (its own, or an operator). */
  visible(record: OperationRecord): boolean;
}

/** What a live inspection has sent: the inspection (its timeline aside), the record it came from, the log's length then. */
interface Sent {
  inspection: OperationInspection;
  record: OperationRecord;
  length: number;
}

export async function liveOperationInspection(
  source: OperationInspectionSource,
  operationId: string,
): Promise<LiveInspection<OperationInspection, OperationInspectionUpdate>> {
  let sent = await inspectWhole(source, operationId);
  return {
    first: sent.inspection,
    next: async () => {
      const tail = await readNewer(source.store, operationId, { revision: sent.record.revision, length: sent.length }, reading(operationId));
      if (tail === 'diverged') {
        sent = await inspectWhole(source, operationId);
        return { kind: 'snapshot', inspection: sent.inspection };
      }
      if (tail.length === 0) return undefined;
      const { record, timeline } = foldTimeline(sent.record, tail, sent.length);
      if (!record) throw new AssertionFailure('an operation record folds to a record after more of its log');
      const inspection = inspectionOf(record, source.interactionOf(record), timeline);
      const update = inspectionChanges(sent.inspection, inspection, record.revision);
      sent = { inspection, record, length: sent.length + tail.length };
      return { kind: 'update', update };
    },
  };
}

async function inspectWhole(source: OperationInspectionSource, operationId: string): Promise<Sent> {
  const log = await readWholeLog(source.store, operationId, reading(operationId));
  const { record, timeline } = foldTimeline(undefined, log, 0);
  if (!record || !source.visible(record)) throw new OperationNotFound(operationId);
  return { inspection: inspectionOf(record, source.interactionOf(record), timeline), record, length: log.length };
}

/** A log that fails the operation schema is refused (unavailable), as the kernel refuses it: never folded, never shown. */
const reading = (operationId: string): LogReading<StoredTransition['transition']> => ({
  notFound: () => new OperationNotFound(operationId),
  checkLog: (log, id) => checkedLog(log as readonly StoredTransition[], id),
});
