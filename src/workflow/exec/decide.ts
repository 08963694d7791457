/**
 * The workflow deciders: pure functions from the current record (and a command) to the transition
 * to append, or undefined when there is nothing to append. They never run an expression or call
 * anything: the executor brings the values, the decider decides whether and how they are recorded.
 *
 * - A proposal is idempotent: events the record already reflects (a step already recorded, a task
 *   already ended, a timer already set) are dropped, so a recovered executor that proposes a step
 *   again appends nothing.
 * - A finished instance takes nothing but the dispositions of its children (decideDisposals).
 * - Guards: every step commits before the workflow's deadline (notAfterMs); a task's completion
 *   commits before its own timeout; a timer fires no earlier than its due instant (notBeforeMs).
 *   When the store answers that a proposal came too late, its `late` alternative (if any) is
 *   decided instead — a timed-out task's completion becomes its timeout fault.
 */
import { openEndedMs } from '../../events/guard.js';
import { errorTypes } from './dsl-errors.js';
import { jsonEquals, type JsonValue } from '../../contract/json.js';
import type { ChildDisposed, SubworkflowDisposed, TaskCancelled, ValueRef, WorkflowError, WorkflowEvent, WorkflowTransition } from './events.js';
import { listenOutlivesTimeout } from './listen-match.js';
import { ranInside, schemeOf } from './keys.js';
import { isTaskEnded } from './machines.js';
import { listenOutput, type WorkflowRecord } from './record.js';

export interface Proposal {
  command: string;
  events: WorkflowEvent[];
  notBeforeMs?: number;
  notAfterMs?: number;
  /** Decided instead when the store serialized the proposal after its notAfterMs. */
  late?: Proposal;
}

/** Whether the record already reflects an event (then proposing it again appends nothing). */
function reflected(record: WorkflowRecord, event: WorkflowEvent): boolean {
  switch (event.type) {
    case 'task-started':
      return Object.hasOwn(record.tasks, event.at);
    case 'task-completed':
    case 'task-faulted':
    case 'task-cancelled': {
      const task = record.tasks[event.at];
      return task === undefined ? false : isTaskEnded(task.state);
    }
    case 'expression-evaluated':
    case 'call-answered':
      return Object.hasOwn(record.steps, event.at);
    case 'child-bound':
      return Object.hasOwn(record.children, event.at);
    case 'subworkflow-bound':
      return Object.hasOwn(record.subworkflows, event.at);
    case 'subworkflow-disposed':
      return record.subworkflows[event.at]?.disposition !== undefined;
    case 'timer-set':
      return Object.hasOwn(record.timers, event.at);
    case 'timer-fired':
      return record.timers[event.at]?.state !== 'armed';
    case 'fork-won':
      return Object.hasOwn(record.winners, event.at);
    case 'listen-started':
      return Object.hasOwn(record.listens, event.at);
    case 'child-disposed':
      return record.children[event.at]?.disposition !== undefined;
    case 'call-started':
      return record.calls[event.at]?.epoch === event.epoch;
    default:
      return false;
  }
}

export function decideProposal(record: WorkflowRecord, proposal: Proposal, retryAsLate: boolean): WorkflowTransition | undefined {
  if (record.status !== 'running') return undefined;
  if (retryAsLate) return proposal.late ? decideProposal(record, proposal.late, false) : undefined;
  const events = withReferences(
    record,
    proposal.events.filter((event) => !reflected(record, event)),
  );
  if (events.length === 0) return undefined;
  const deadline = record.started.deadlineMs ?? openEndedMs;
  const notAfterMs = Math.min(proposal.notAfterMs ?? openEndedMs, deadline);
  const notBeforeMs = proposal.notBeforeMs ?? Number.MIN_SAFE_INTEGER;
  // A window closed by the deadline before it opens: nothing to append; the deadline's timer ends the instance.
  if (notBeforeMs >= notAfterMs) return undefined;
  return { events, timeGuard: { notBeforeMs, notAfterMs }, causation: { command: proposal.command } };
}

/**
 * The events as they are written: an event that carries a value and names where it was recorded
 * (`inputFrom`/`outputFrom`, events.ts ValueRef) keeps the reference alone when the record, or an
 * earlier event of the same transition, holds that very value there — the fold then puts the same
 * value in the record — and the value alone otherwise.
 */
function withReferences(record: WorkflowRecord, events: WorkflowEvent[]): WorkflowEvent[] {
  let written: WorkflowEvent[] | undefined;
  for (let index = 0; index < events.length; index++) {
    const event = events[index] as WorkflowEvent;
    const decided = writtenValue(record, written ?? events, index, event);
    if (decided !== event) (written ??= events.slice())[index] = decided;
  }
  return written ?? events;
}

/** The event with its value or its reference (each event spelled out: object rest would copy it the engine's slow way). */
function writtenValue(record: WorkflowRecord, events: readonly WorkflowEvent[], index: number, event: WorkflowEvent): WorkflowEvent {
  switch (event.type) {
    case 'task-started': {
      const { at, ref, name, input, inputFrom } = event;
      if (inputFrom === undefined || input === undefined) return event;
      return refersTo(record, events, index, inputFrom, input)
        ? { type: 'task-started', v: 1, at, ref, name, inputFrom }
        : { type: 'task-started', v: 1, at, ref, name, input };
    }
    case 'task-completed': {
      const { at, output, outputFrom } = event;
      if (outputFrom === undefined || output === undefined) return event;
      return refersTo(record, events, index, outputFrom, output)
        ? { type: 'task-completed', v: 1, at, outputFrom }
        : { type: 'task-completed', v: 1, at, output };
    }
    case 'workflow-completed': {
      const { output, outputFrom } = event;
      if (outputFrom === undefined || output === undefined) return event;
      return refersTo(record, events, index, outputFrom, output)
        ? { type: 'workflow-completed', v: 1, outputFrom }
        : { type: 'workflow-completed', v: 1, output };
    }
    default:
      return event;
  }
}

/**
 * Whether `ref` names `value` once the events before `index` are applied to the record: that very
 * object — or, for a listen's events (`{listen}`), a list the fold builds anew from them, equal to
 * it as JSON (a list built anew is never the same object; its items are the record's own only
 * while the record was not read again, so they are compared as values).
 */
function refersTo(record: WorkflowRecord, events: readonly WorkflowEvent[], index: number, ref: ValueRef, value: JsonValue): boolean {
  if (!('listen' in ref)) return referredValue(record, events, index, ref) === value;
  // An event taken in this very transition would be folded before the reference: the record does not hold it yet.
  if (events.slice(0, index).some((event) => event.type === 'listen-event-received' && event.at === ref.listen)) return false;
  const listen = record.listens[ref.listen];
  return listen !== undefined && jsonEquals(listenOutput(listen), value);
}

/** The value `ref` names once the events before `index` are applied to the record; undefined when it names none. */
function referredValue(record: WorkflowRecord, events: readonly WorkflowEvent[], index: number, ref: ValueRef): JsonValue | undefined {
  if ('input' in ref) return record.started.input;
  if ('listen' in ref) {
    const listen = record.listens[ref.listen];
    return listen === undefined ? undefined : listenOutput(listen);
  }
  for (let at = index - 1; at >= 0; at--) {
    const event = events[at] as WorkflowEvent;
    if ('step' in ref && (event.type === 'expression-evaluated' || event.type === 'call-answered') && event.at === ref.step)
      return 'ok' in event.result ? event.result.ok : undefined;
    if ('task' in ref && event.type === 'task-completed' && event.at === ref.task)
      return event.outputFrom === undefined ? event.output : referredValue(record, events, at, event.outputFrom);
  }
  if ('step' in ref) {
    const result = record.steps[ref.step];
    return result !== undefined && 'ok' in result ? result.ok : undefined;
  }
  const task = record.tasks[ref.task];
  return task?.state === 'completed' ? task.output : undefined;
}

export { taskTimeoutKey, workflowTimeoutKey } from './record.js';

export function timeoutError(instance: string, what: string): WorkflowError {
  return { type: errorTypes.timeout, status: 408, title: 'Timeout', detail: `${what} timed out`, instance };
}

/**
 * The due command: every armed timer whose instant has come fires; a task still running when its
 * timeout fires faults with a timeout error — unless it is a listen whose wait the events it took
 * before the timeout ended (an event taken, and answered so, is the wait's end, however late the
 * task's completion commits), or one that iterates events it took before the timeout (its
 * interpreter faults it once they are iterated): listenOutlivesTimeout. The workflow's own timeout
 * faults the instance.
 */
export function decideDue(record: WorkflowRecord, nowMs: number): WorkflowTransition | undefined {
  if (record.status !== 'running') return undefined;
  const events: WorkflowEvent[] = [];
  let notBeforeMs = Number.MIN_SAFE_INTEGER;
  let workflowTimedOut = false;
  const timedOut: string[] = [];
  for (const [at, timer] of Object.entries(record.timers)) {
    if (timer.state !== 'armed' || timer.dueAtMs > nowMs) continue;
    events.push({ type: 'timer-fired', v: 1, at });
    notBeforeMs = Math.max(notBeforeMs, timer.dueAtMs);
    if (timer.purpose === 'workflow-timeout') workflowTimedOut = true;
    if (timer.purpose === 'task-timeout') {
      const taskAt = at.slice(0, -'@timeout'.length);
      const task = record.tasks[taskAt];
      if (task?.state === 'running' && !listenOutlivesTimeout(record, taskAt)) {
        events.push({ type: 'task-faulted', v: 1, at: taskAt, error: timeoutError(task.ref, `task ${task.name}`) });
        timedOut.push(taskAt);
      }
    }
  }
  if (events.length === 0) return undefined;
  // A task this transition faults (its own timeout, due too) is not cancelled by another's, nor with the instance.
  const ended = new Set(timedOut);
  for (const taskAt of timedOut)
    for (const event of cancelledInside(record, taskAt))
      if (!ended.has(event.at)) {
        ended.add(event.at);
        events.push(event);
      }
  if (workflowTimedOut) {
    const open = cancelledWithInstance(record, 'the workflow timed out').filter((event) => !ended.has(event.at));
    events.push(...open, { type: 'workflow-faulted', v: 1, error: timeoutError('/', `workflow ${record.started.workflowName}`) });
  }
  return { events, timeGuard: { notBeforeMs, notAfterMs: openEndedMs }, causation: { command: 'timers-due' } };
}

/** Why a task execution inside a timed-out one is cancelled: that timeout, named. */
export const timedOutReason = (name: string, at: string): string => `task ${name} (${at}) timed out`;

/**
 * The task executions still running inside the execution `at` when its timeout faults it: each
 * recorded cancelled in the transition that faults it, the last started first (as an instance's
 * end cancels its own), so that nothing inside a timed-out task is still running once it has
 * ended — the branches of a fork, a loop's iteration, a nested list. Logs written before left them
 * running until the instance ended; they fold as recorded.
 */
export function cancelledInside(record: WorkflowRecord, at: string): TaskCancelled[] {
  const timed = record.tasks[at];
  if (timed === undefined) return [];
  const scheme = schemeOf(record.started);
  const execution = { pointer: timed.ref, at };
  const reason = timedOutReason(timed.name, at);
  const open: TaskCancelled[] = [];
  for (const [inner, task] of Object.entries(record.tasks))
    if (inner !== at && task.state === 'running' && task.startedSeq > timed.startedSeq && ranInside(scheme, execution, task.ref, inner))
      open.push({ type: 'task-cancelled', v: 1, at: inner, reason });
  return open.reverse();
}

/**
 * The task executions still running when the instance ends from outside them (its timeout, a
 * cancel, a defect): each recorded cancelled with the end, in the transition that ends it, the
 * last started first, so that an ended instance holds no task still running.
 */
export function cancelledWithInstance(record: WorkflowRecord, reason: string): TaskCancelled[] {
  const open: TaskCancelled[] = [];
  for (const [at, task] of Object.entries(record.tasks)) if (task.state === 'running') open.push({ type: 'task-cancelled', v: 1, at, reason });
  return open.reverse();
}

/**
 * The dispositions of child workflow instances found after their parent's end (subworkflows.ts
 * owedDisposals), and of child operations released after the task that bound them was cancelled
 * by a timeout or lost a fork (losers.ts owedReleases): the only events an ended instance takes
 * (its machine's DISPOSE). Each is dropped when the record already holds that child's disposition
 * — another worker, or the run, recorded it first, under the same CAS — so every child is
 * disposed once. Unfenced: an ended instance has no lease driving it, and a running one's release
 * decides nothing its run decides; the time guard is open (a disposition is no step of the run).
 */
export function decideDisposals(record: WorkflowRecord, disposed: readonly (SubworkflowDisposed | ChildDisposed)[]): WorkflowTransition | undefined {
  const events = disposed.filter(
    (event) =>
      !reflected(record, event) &&
      (event.type === 'subworkflow-disposed'
        ? record.subworkflows[event.at]?.instanceId === event.instanceId
        : record.children[event.at]?.operationId === event.operationId),
  );
  if (events.length === 0) return undefined;
  return {
    events,
    timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: openEndedMs },
    causation: { command: 'subworkflows-disposed' },
  };
}

/**
 * The end of an instance this runtime cannot drive: its next step failed the runtime's own check
 * (a defect) at limits.workflowDefectiveDrivesMax drives in a row, each deciding the same
 * transition again. Faulted with a runtime error (500) rather than retried for ever; what failed is
 * in the executor's failures (its log), not in the instance's error, which its principal reads.
 * Unfenced and unguarded, as a cancel: whoever holds the lease could only decide the same again.
 */
export function decideDefectFault(record: WorkflowRecord): WorkflowTransition | undefined {
  if (record.status !== 'running') return undefined;
  const error: WorkflowError = {
    type: errorTypes.runtime,
    status: 500,
    title: 'Internal error',
    detail: "the runtime could not record this instance's next step (it failed an internal check, a defect the runtime's log names) and stopped it",
    instance: '/',
  };
  return {
    events: [...cancelledWithInstance(record, 'the runtime stopped the instance'), { type: 'workflow-faulted', v: 1, error }],
    timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: openEndedMs },
    causation: { command: 'defect-fault' },
  };
}

export function decideCancel(record: WorkflowRecord, reason: string): WorkflowTransition | undefined {
  if (record.status !== 'running') return undefined;
  return {
    events: [...cancelledWithInstance(record, 'the instance was cancelled'), { type: 'workflow-cancelled', v: 1, reason }],
    timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: openEndedMs },
    causation: { command: 'cancel' },
  };
}
