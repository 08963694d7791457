/**
 * An instance's inspection (GET /workflow-instances/{id}/transitions) and the live form of it
 * (GET /workflow-instances/{id}/events): the whole record and log once, then, after each append,
 * only what changed. A live inspection holds the record folded so far and reads only the
 * transitions stored after its revision (the store's readAfter, as the kernel extends a cached
 * record); it folds them onto the record and projects only the task executions, timers and
 * children the fold replaced (it replaces an entry it changes, never edits one), so an update
 * costs what was appended, not the whole log. The instance view is built again (its stages'
 * decisions and settlements are read now, as GET reads them) and only its changed fields are sent.
 */
import { AssertionFailure } from '../../contract/errors.js';
import type { JsonValue } from '../../contract/json.js';
import { appliesOnFold } from '../../events/guard.js';
import type { Stored } from '../../kernel/types.js';
import { changedFields, replacedKeys } from '../../projections/delta.js';
import { readNewer, readWholeLog, type LiveInspection, type LogReading, type LogSource } from '../../runtime/live-inspection.js';
import { WorkflowInstanceNotFound } from '../../runtime/errors.js';
import type { WorkflowInspection, WorkflowInspectionUpdate, WorkflowInstance, WorkflowTimelineEntry } from '../../runtime/workflow-service.js';
import { checkedWorkflowLog } from './aggregate.js';
import type { WorkflowTransition } from './events.js';
import { applyWorkflow, type WorkflowRecord } from './record.js';

export interface InspectionSource {
  store: LogSource<WorkflowTransition>;
  /** The instance view of a record (stages and child instances as they are now). */
  view(record: WorkflowRecord): Promise<WorkflowInstance>;
  /** Whether this principal may read the instance (its own, or an operator). */
  visible(record: WorkflowRecord): boolean;
}

type Tasks = WorkflowInspection['tasks'];
type Children = WorkflowInspection['children'];

/** What a live inspection has sent: the record it was projected from, the log's length then, and the instance view. */
interface Sent {
  record: WorkflowRecord;
  length: number;
  instance: WorkflowInstance;
}

/** The inspection of the instance's whole log, then what each append changed. */
export async function liveInspection(source: InspectionSource, instanceId: string): Promise<LiveInspection<WorkflowInspection, WorkflowInspectionUpdate>> {
  let { sent, inspection } = await inspectWhole(source, instanceId);
  return {
    first: inspection,
    next: async () => {
      const tail = await readNewer(source.store, instanceId, { revision: sent.record.revision, length: sent.length }, reading(instanceId));
      if (tail === 'diverged') {
        ({ sent, inspection } = await inspectWhole(source, instanceId));
        return { kind: 'snapshot', inspection };
      }
      if (tail.length === 0) return undefined;
      const { record, timeline } = foldTimeline(sent.record, tail, sent.length);
      if (!record) throw new AssertionFailure('a workflow record folds to a record after more of its log');
      const instance = await source.view(record);
      const update = changesSince(sent, record, instance, timeline);
      sent = { record, length: sent.length + tail.length, instance };
      return { kind: 'update', update };
    },
  };
}

async function inspectWhole(source: InspectionSource, instanceId: string): Promise<{ sent: Sent; inspection: WorkflowInspection }> {
  const log = await readWholeLog(source.store, instanceId, reading(instanceId));
  const { record, timeline } = foldTimeline(undefined, log, 0);
  if (!record || !source.visible(record)) throw new WorkflowInstanceNotFound(instanceId);
  const instance = await source.view(record);
  const inspection: WorkflowInspection = {
    instance,
    principalId: record.started.principalId,
    input: record.started.input,
    deadlineMs: record.started.deadlineMs,
    lease: leaseOf(record),
    tasks: taskViews(record, Object.keys(record.tasks)),
    timers: timerViews(record, Object.keys(record.timers)),
    children: childViews(record, Object.keys(record.children)),
    timeline,
  };
  return { sent: { record, length: log.length, instance }, inspection };
}

/** A log that fails the workflow schema is refused (unavailable), as the kernel refuses it: never folded, never shown. */
const reading = (instanceId: string): LogReading<WorkflowTransition> => ({
  notFound: () => new WorkflowInstanceNotFound(instanceId),
  checkLog: checkedWorkflowLog,
});

/** The record after `log` (the transitions from position `from` on), and their timeline entries. */
function foldTimeline(
  record: WorkflowRecord | undefined,
  log: readonly Stored<WorkflowTransition>[],
  from: number,
): { record: WorkflowRecord | undefined; timeline: WorkflowTimelineEntry[] } {
  const timeline: WorkflowTimelineEntry[] = [];
  for (const [offset, stored] of log.entries()) {
    const applied = appliesOnFold(stored, record?.lastAppliedAtMs ?? Number.MIN_SAFE_INTEGER);
    record = applyWorkflow(record, stored);
    const { transition } = stored;
    timeline.push({
      index: from + offset,
      revision: stored.revision,
      committedAtMs: stored.committedAtMs,
      command: transition.causation.command,
      applied,
      events: transition.events as unknown as JsonValue[],
    });
  }
  return { record, timeline };
}

/** The update from what was sent to `record`: the entries its fold replaced, the instance's changed fields, the new transitions. */
function changesSince(sent: Sent, record: WorkflowRecord, instance: WorkflowInstance, timeline: WorkflowTimelineEntry[]): WorkflowInspectionUpdate {
  const before = sent.record;
  const update: WorkflowInspectionUpdate = {
    revision: record.revision,
    tasks: taskViews(record, replacedKeys(before.tasks, record.tasks)),
    timers: timerViews(record, replacedKeys(before.timers, record.timers)),
    children: childViews(record, replacedKeys(before.children, record.children)),
    timeline,
  };
  const changed = changedFields(sent.instance, instance, { stages: (stage) => stage.at, childInstances: (child) => child.at });
  if (Object.keys(changed).length > 0) update.instance = changed;
  if (before.lease !== record.lease) update.lease = leaseOf(record);
  return update;
}

const leaseOf = (record: WorkflowRecord): WorkflowInspection['lease'] => record.lease && { ...record.lease };

/** The start order of the task at `at`; after every task when there is none. */
const startOrder = (record: WorkflowRecord) => (at: string) =>
  (Object.hasOwn(record.tasks, at) ? record.tasks[at]?.startedSeq : undefined) ?? Number.MAX_SAFE_INTEGER;

/** These task executions, in the order they started. */
function taskViews(record: WorkflowRecord, keys: readonly string[]): Tasks {
  const views: Tasks = [];
  for (const at of keys) {
    const task = record.tasks[at];
    if (!task) continue;
    views.push({
      at,
      name: task.name,
      state: task.state === 'idle' ? 'running' : task.state,
      startedAtMs: task.startedAtMs,
      startedSeq: task.startedSeq,
      endedSeq: task.endedSeq,
      input: task.input,
      output: task.output,
      error: task.error,
    });
  }
  return views.sort((a, b) => a.startedSeq - b.startedSeq);
}

/** These timers, in the order the record holds them (the order they were first armed). */
function timerViews(record: WorkflowRecord, keys: readonly string[]): WorkflowInspection['timers'] {
  return keys.flatMap((key) => {
    const timer = record.timers[key];
    return timer ? [{ key, purpose: timer.purpose, dueAtMs: timer.dueAtMs, state: timer.state }] : [];
  });
}

/** These child operations, in the order their calling tasks started. */
function childViews(record: WorkflowRecord, keys: readonly string[]): Children {
  const order = startOrder(record);
  const views: Children = [];
  for (const at of [...keys].sort((a, b) => order(a) - order(b))) {
    const child = record.children[at];
    if (child)
      views.push({
        at,
        operationId: child.operationId,
        invocationKey: child.invocationKey,
        attempt: child.attempt,
        disposition: child.disposition?.disposition ?? null,
      });
  }
  return views;
}
