/**
 * What a store keeps of workflow instances beyond their logs: which ones may still be running, so
 * that a restarted worker resumes them at start-up without reading every instance's history.
 *
 * An instance is running from the transition that records `workflow-started` until one that
 * records its end (`workflow-completed`, `workflow-faulted`, `workflow-cancelled`); one created by
 * `workflow-cancelled-before-start` (a child cancelled before its start) never runs. A store reads
 * only those event types of a transition it stores under a `wf…` id; nothing else of the
 * workflow's events is interpreted here.
 *
 * Memory and SQLite keep the set exactly, in the write that stores the transition. A
 * replay-stamped store (JetStream, EventStoreDB) marks an instance before its creation is written
 * and unmarks it after its end is stored: a writer that dies between the two leaves a mark too
 * many, never one too few. The executor reads every listed instance and tells the store of those
 * it finds ended (`EventStore.workflowEnded`), which removes what is left.
 */
import type { StoredTransition, Transition } from '../../events/types.js';

/** Workflow instance streams (`wf…` ids) have their own name family beside operations'; every other stream is an operation's. */
export function streamFamily(streamId: string): 'op' | 'wf' {
  return /^wf[0-9a-f]{64}$/.test(streamId) ? 'wf' : 'op';
}

/** An instance's end — and the first event of one cancelled before its start, which is never running. */
export const workflowEndTypes: ReadonlySet<string> = new Set([
  'workflow-completed',
  'workflow-faulted',
  'workflow-cancelled',
  'workflow-cancelled-before-start',
]);

/** A stored transition's event types: the store's interface names the operation's, whose shape ({type, v}) a workflow's shares. */
const typesOf = (transition: Transition): string[] => transition.events.map((event) => event.type as string);

/** The transition creates a running instance. */
export function startsWorkflow(transition: Transition): boolean {
  return typesOf(transition).includes('workflow-started');
}

/** The transition ends its instance. */
export function endsWorkflow(transition: Transition): boolean {
  return typesOf(transition).some((type) => workflowEndTypes.has(type));
}

/** Whether a log (every transition applied: an in-write store's) is of an instance still running. */
export function runningOfLog(log: readonly StoredTransition[]): boolean {
  return log.some((stored) => startsWorkflow(stored.transition)) && !log.some((stored) => endsWorkflow(stored.transition));
}
