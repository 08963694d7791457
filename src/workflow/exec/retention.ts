/**
 * Payload expiry of workflow instances, as src/runtime/retention.ts is for operations: an
 * instance that ended longer ago than the retention period is tombstoned (its log and index row
 * go; a start under the same key, a read and a lookup answer `expired`, never a new instance).
 *
 * The index says which instances may qualify; each one's log is read and replayed through the
 * machines (replay.ts), and only that replay decides. Beside its own end, an instance is kept
 * while another still needs its log:
 *  - its parent (`run: workflow`) still runs: the parent learns of its child's end by reading it;
 *  - a child it started still runs, or it still owes the record of what became of one (an ended
 *    parent records subworkflow-disposed for its children, an append the tombstone would refuse);
 *  - it still owes the release of a contract call a timeout cancelled or a fork's win stopped
 *    (losers.ts owedReleases: child-disposed, appended after its end as well).
 * An ended instance never runs again and its end instant never moves, so what the replay proved
 * still holds at the tombstone; the two checks beside it are made from the index as it is then,
 * and a parent or child that changes under them changes only towards ended.
 */
import type { EventStore } from '../../adapters/store/types.js';
import type { WorkflowIndexPosition, WorkflowIndexRow } from '../../events/workflow-index.js';
import type { Stored } from '../../kernel/types.js';
import { logToPrune, storeCutoffOf, pruneProved, walkPages, type InstancePruneTally, type PruneRequest } from '../../runtime/retention.js';
import type { WorkflowTransition } from './events.js';
import { replayWorkflowLog } from './replay.js';
import { owedReleases } from './losers.js';
import { owedDisposals } from './subworkflows.js';

/**
 * Tombstones every workflow instance that ended more than `keepMs` before `nowMs` and that no
 * running parent or child needs, walking the workflow instances index from the cutoff back. Read
 * and tombstone failures are counted, not thrown; an index that cannot be listed throws.
 */
export async function pruneWorkflowInstances(request: PruneRequest<InstancePruneTally>): Promise<InstancePruneTally> {
  const cutoffMs = await storeCutoffOf(request);
  const tally: InstancePruneTally = { cutoffMs, examined: 0, pruned: 0, finished: 0, running: 0, recent: 0, needed: 0, gone: 0, failures: [] };
  const list = (after: WorkflowIndexPosition | undefined, limit: number) =>
    request.store.workflowIndex.list({ untilMs: cutoffMs, limit, ...(after ? { after } : {}) });
  return walkPages(request, tally, list, (row) => pruneOne(request, row, tally));
}

async function pruneOne(request: PruneRequest<InstancePruneTally>, row: WorkflowIndexRow, tally: InstancePruneTally): Promise<void> {
  if (row.status === 'running' || row.endedAtMs === null) {
    tally.running++;
    return;
  }
  if (row.endedAtMs >= tally.cutoffMs) {
    tally.recent++;
    return;
  }
  const id = row.instanceId;
  const failed = (failure: { kind: string; description: string }) => tally.failures.push({ instanceId: id, ...failure });
  const log = await logToPrune(request, id, tally, failed);
  if (log === undefined) return;
  // The stores keep a workflow transition in the operations' shape (streams.ts); the replay checks each against the workflow schema.
  const replayed = replayWorkflowLog(log as unknown as Stored<WorkflowTransition>[]);
  const record = replayed.record;
  if (record === undefined || replayed.problem !== null) {
    tally.failures.push({ instanceId: id, kind: 'invalid-input', description: `its log does not replay: ${replayed.problem ?? 'no record'}` });
    return;
  }
  if (record.status === 'running' || record.endedAtMs === null) {
    tally.running++;
    return;
  }
  if (record.endedAtMs >= tally.cutoffMs) {
    tally.recent++;
    return;
  }
  // It still owes what became of a child it ran (subworkflow-disposed) or of a contract call it released (child-disposed): the
  // append its worker will make, which a tombstone would refuse.
  if (owedDisposals(record).length > 0 || owedReleases(record).length > 0) {
    tally.needed++;
    return;
  }
  if (await neededElsewhere(request.store, [record.started.parent?.instanceId, ...Object.values(record.subworkflows).map((s) => s.instanceId)])) {
    tally.needed++;
    return;
  }
  await pruneProved(request, id, tally, failed);
}

/**
 * Whether any of these instances (a parent, the children) still runs: by its index row, or, with
 * none (a child bound but never started, or a row its writer never wrote), by its log. What cannot
 * be read counts as running: an instance is never pruned on a guess.
 */
async function neededElsewhere(store: EventStore, ids: readonly (string | undefined)[]): Promise<boolean> {
  for (const id of ids) {
    if (id === undefined) continue;
    const row = await store.workflowIndex.get(id);
    if (row !== undefined) {
      if (row.status === 'running') return true;
      continue;
    }
    const read = await store.read(id);
    if (read.kind === 'not-found' || read.kind === 'expired') continue;
    if (read.kind !== 'ok') return true;
    const record = replayWorkflowLog(read.transitions as unknown as Stored<WorkflowTransition>[]).record;
    if (record === undefined || record.status === 'running') return true;
  }
  return false;
}
