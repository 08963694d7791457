/**
 * The WorkflowRecord: the projection of an instance's stream. `foldWorkflow` rebuilds it from the
 * stored transitions; the executor applies exactly the same `applyWorkflow` to each transition it
 * commits, so the live record and the replayed one cannot drift apart (tests compare them).
 *
 * Guard-on-fold stores (JetStream, EventStoreDB) may hold void transitions: one whose stamp
 * misses its guard changes nothing, as for operations (events/guard.ts appliesOnFold).
 */
import { AssertionFailure } from '../../contract/errors.js';
import { isObject, type JsonValue } from '../../contract/json.js';
import { appliesOnFold } from '../../events/guard.js';
import type { Stored } from '../../kernel/types.js';
import type {
  ChildBound,
  ChildDisposed,
  ChildDisposition,
  EventSender,
  ListenEventReceived,
  ListenStarted,
  LeaseAcquired,
  LeaseReleased,
  LeaseRenewed,
  StepResult,
  SubworkflowBound,
  SubworkflowDisposed,
  SubworkflowDisposition,
  TimerPurpose,
  ValueRef,
  WorkflowCancelled,
  WorkflowCancelledBeforeStart,
  WorkflowCompleted,
  WorkflowError,
  WorkflowEvent,
  WorkflowFaulted,
  WorkflowStarted,
  WorkflowTransition,
} from './events.js';
import { instanceEventOf, stepInstance, stepLease, stepTask, stepTimer, type InstanceState, type TaskState, type TimerState } from './machines.js';

export interface TaskRecord {
  ref: string;
  name: string;
  state: TaskState;
  input: JsonValue;
  output: JsonValue | null;
  error: WorkflowError | null;
  startedAtMs: number;
  /** Order of the task's start and end among every task of the instance (for "ran before"). */
  startedSeq: number;
  endedSeq: number | null;
}

export interface TimerRecord {
  dueAtMs: number;
  purpose: TimerPurpose;
  state: TimerState;
}

export interface ChildRecord {
  ref: string;
  iterations: number[];
  operationId: string;
  invocationKey: string;
  attempt: number;
  /** Set when a competing fork's win released it (the child was in a losing branch). */
  disposition?: { fork: string; disposition: ChildDisposition; detail: string };
}

/** A `run: workflow` task's child instance, bound before it was started. */
export interface SubworkflowRecord {
  ref: string;
  iterations: number[];
  instanceId: string;
  invocationKey: string;
  workflow: string;
  attempt: number;
  /** Set when the task awaiting it stopped waiting (a timeout, a lost fork) and the parent released it. */
  disposition?: { by: string; disposition: SubworkflowDisposition; detail: string };
}

export interface ListenRecord {
  to: JsonValue;
  read: 'data' | 'envelope' | 'raw';
  /**
   * The events taken, in log order; `position` counts the events every listen of the instance took
   * before it; `from`, who could have sent it (absent in logs written before it was recorded).
   */
  events: { event: JsonValue; group: 'to' | 'until'; filter: number; correlation: Readonly<Record<string, JsonValue>>; position: number; from?: EventSender }[];
  /**
   * How many events the instance's listens had taken when this one started: one taken before
   * (`position` below it) arrived before this listen waited, and a publisher's retry of it is not
   * taken again here (listen-match.ts).
   */
  since: number;
  /** Each correlation's first value taken (a declared `expect`, in `to`, takes precedence: listen-match.ts). */
  expected: Readonly<Record<string, JsonValue>>;
}

/** The worker that drives the instance (lease.ts): it alone makes external calls while it holds the lease. */
export interface LeaseRecord {
  worker: string;
  epoch: number;
  untilMs: number;
}

/** An external call recorded as started (call-started): under which lease epoch, how many times. */
export interface CallRecord {
  epoch: number;
  starts: number;
}

export interface WorkflowRecord {
  instanceId: string;
  revision: string;
  status: InstanceState;
  /**
   * The start; `deadlineMs` is startedAtMs + timeoutMs (the store's commit instant of the start), or
   * null. `cancelledBeforeStart`: the stream began with workflow-cancelled-before-start — a child
   * its parent cancelled before its start was stored, which never ran (its document and input
   * null: the start was never made; status cancelled, no tasks, startedAtMs and endedAtMs the
   * instant of that event).
   */
  started: Omit<WorkflowStarted, 'type' | 'v' | 'deadlineMs'> & { deadlineMs: number | null; cancelledBeforeStart?: true };
  startedAtMs: number;
  /** committedAtMs of the last applied transition (the guard-on-fold rule). */
  lastAppliedAtMs: number;
  tasks: Readonly<Record<string, TaskRecord>>;
  /** Recorded results of expressions and calls, by step key. */
  steps: Readonly<Record<string, StepResult>>;
  children: Readonly<Record<string, ChildRecord>>;
  /** Child workflow instances (`run: workflow`), by task execution. */
  subworkflows: Readonly<Record<string, SubworkflowRecord>>;
  timers: Readonly<Record<string, TimerRecord>>;
  winners: Readonly<Record<string, number>>;
  /** Listen tasks that waited or wait, by task execution. */
  listens: Readonly<Record<string, ListenRecord>>;
  /** The current lease, null when none was taken or it was released. */
  lease: LeaseRecord | null;
  /** The epoch of the last lease acquired (0 before any). */
  leaseEpoch: number;
  /** External calls recorded as started, by step key: one without a recorded answer may have happened. */
  calls: Readonly<Record<string, CallRecord>>;
  /** Task starts and ends counted in log order. */
  seq: number;
  output: JsonValue | null;
  error: WorkflowError | null;
  /**
   * Why it was cancelled: the reason its `workflow-cancelled` (or `workflow-cancelled-before-start`)
   * carries, written by whoever cancelled it (its caller, its parent); null unless cancelled. Its
   * parent reads it to tell its own cancel from an earlier one (subworkflows.ts disposeSubworkflow).
   */
  cancelReason: string | null;
  endedAtMs: number | null;
}

/** The workflow timeout's timer: armed by the start itself, at startedAtMs + timeoutMs. */
export const workflowTimeoutKey = '@workflow-timeout';

/** A task execution's timeout timer. */
export const taskTimeoutKey = (at: string): string => `${at}@timeout`;

/** The record's maps, by name. */
type MapName = 'tasks' | 'steps' | 'children' | 'subworkflows' | 'timers' | 'winners' | 'listens' | 'calls';
type Mutable<T extends WorkflowRecord> = Omit<T, MapName> & { [M in MapName]: Record<string, T[M][string]> };

/**
 * The record one transition is changing: copied once when the transition starts, each of its maps
 * copied on its first change. A record handed out is never changed again (the fold stays pure);
 * a transition of several events costs one copy, not one per event.
 */
interface Draft {
  record: Mutable<WorkflowRecord>;
  copied: Set<MapName>;
}

const draftOf = (record: WorkflowRecord): Draft => ({ record: copyOfRecord(record), copied: new Set() });

/**
 * A shallow copy of the record, field by field in the order `created` makes them (so every record
 * shares one shape): a spread of a record takes the engine's generic copy, several times slower,
 * and a record is copied at every application. Every field of WorkflowRecord is required, so one
 * left out here does not compile.
 */
function copyOfRecord(record: WorkflowRecord): Mutable<WorkflowRecord> {
  return {
    instanceId: record.instanceId,
    revision: record.revision,
    status: record.status,
    started: record.started,
    startedAtMs: record.startedAtMs,
    lastAppliedAtMs: record.lastAppliedAtMs,
    tasks: record.tasks,
    steps: record.steps,
    children: record.children,
    subworkflows: record.subworkflows,
    timers: record.timers,
    winners: record.winners,
    listens: record.listens,
    lease: record.lease,
    leaseEpoch: record.leaseEpoch,
    calls: record.calls,
    seq: record.seq,
    output: record.output,
    error: record.error,
    cancelReason: record.cancelReason,
    endedAtMs: record.endedAtMs,
  };
}

/** Sets `map[key]` in the draft, copying the map the first time this transition changes it. */
function put<M extends MapName>(draft: Draft, map: M, key: string, value: WorkflowRecord[M][string]): void {
  if (!draft.copied.has(map)) {
    (draft.record[map] as Record<string, unknown>) = { ...draft.record[map] };
    draft.copied.add(map);
  }
  (draft.record[map] as Record<string, unknown>)[key] = value;
}

function task(record: Mutable<WorkflowRecord>, at: string): TaskRecord {
  const found = record.tasks[at];
  if (!found) throw new AssertionFailure(`workflow ${record.instanceId}: no task ${at}`);
  return found;
}

function endTask(draft: Draft, at: string, change: Pick<Partial<TaskRecord>, 'output' | 'error'>, event: 'COMPLETE' | 'FAULT' | 'CANCEL'): void {
  const record = draft.record;
  const current = task(record, at);
  // Field by field, in the order task-started makes them (a spread takes the engine's generic copy).
  put(draft, 'tasks', at, {
    ref: current.ref,
    name: current.name,
    state: stepTask(current.state, event),
    input: current.input,
    output: 'output' in change ? (change.output as JsonValue | null) : current.output,
    error: 'error' in change ? (change.error as WorkflowError | null) : current.error,
    startedAtMs: current.startedAtMs,
    startedSeq: current.startedSeq,
    endedSeq: record.seq,
  });
  record.seq += 1;
}

/**
 * A value an event names by reference (events.ts ValueRef): a recorded step's `ok` result, a
 * completed task's output, or the workflow's input. A reference to nothing recorded is a log this
 * fold cannot trust.
 */
function referred(record: Mutable<WorkflowRecord>, ref: ValueRef): JsonValue {
  if ('input' in ref) return record.started.input;
  if ('listen' in ref) {
    const listen = record.listens[ref.listen];
    if (listen === undefined) throw new AssertionFailure(`workflow ${record.instanceId}: no listen ${ref.listen}`);
    return listenOutput(listen);
  }
  if ('step' in ref) {
    const result = record.steps[ref.step];
    if (result === undefined || !('ok' in result)) throw new AssertionFailure(`workflow ${record.instanceId}: no value recorded by step ${ref.step}`);
    return result.ok;
  }
  const found = record.tasks[ref.task];
  if (found?.state !== 'completed') throw new AssertionFailure(`workflow ${record.instanceId}: no output of a completed task ${ref.task}`);
  return found.output;
}

/** An event as the listen reads it (`read`): binary data (`data_base64`) is read as its base64 text, as an HTTP call's `raw` output is. */
export function readEvent(event: JsonValue, read: ListenRecord['read']): JsonValue {
  if (read === 'envelope') return event;
  if (!isObject(event)) return null;
  return event.data ?? event.data_base64 ?? null;
}

/**
 * What a listen took for `to` among its first `count` events (all of them by default), in log
 * order, as it reads them: the output of a listen without `foreach`, which its completion names
 * (`{listen}`, events.ts ValueRef) rather than writes again.
 */
export function listenOutput(listen: ListenRecord, count = listen.events.length): JsonValue[] {
  return listen.events
    .slice(0, count)
    .filter((taken) => taken.group === 'to')
    .map((taken) => readEvent(taken.event, listen.read));
}

/** The value an event carries in full (`value`) or by reference (`from`). */
const valueOf = (record: Mutable<WorkflowRecord>, value: JsonValue | undefined, from: ValueRef | undefined): JsonValue =>
  from === undefined ? (value as JsonValue) : referred(record, from);

/** Sets `map[key]` in the draft, as put does, for an entry recorded once: a second record of the key is an assertion naming `what`. */
function putOnce<M extends MapName>(draft: Draft, map: M, key: string, value: WorkflowRecord[M][string], what: string): void {
  if (Object.hasOwn(draft.record[map], key)) throw new AssertionFailure(`${what} ${key} recorded twice`);
  put(draft, map, key, value);
}

/** A stream's first event anywhere else (created applies it): the instance machine refuses it, as an assertion. */
function notFirst(record: Mutable<WorkflowRecord>, type: 'workflow-started' | 'workflow-cancelled-before-start'): never {
  stepInstance(record.status, instanceEventOf(type));
  throw new AssertionFailure(`${type} is only the first event of a stream`);
}

/** One event applied to the draft; the machines assert legality. */
function applyEvent(draft: Draft, event: WorkflowEvent, atMs: number): void {
  const record = draft.record;
  switch (event.type) {
    case 'workflow-started':
    case 'workflow-cancelled-before-start':
      return notFirst(record, event.type);
    case 'task-started': {
      const previous = record.tasks[event.at];
      const state = stepTask(previous?.state ?? 'idle', 'START');
      const entry: TaskRecord = {
        ref: event.ref,
        name: event.name,
        state,
        input: valueOf(record, event.input, event.inputFrom),
        output: null,
        error: null,
        startedAtMs: atMs,
        startedSeq: record.seq,
        endedSeq: null,
      };
      put(draft, 'tasks', event.at, entry);
      record.seq += 1;
      return;
    }
    case 'task-completed':
      return endTask(draft, event.at, { output: valueOf(record, event.output, event.outputFrom) }, 'COMPLETE');
    case 'task-faulted':
      return endTask(draft, event.at, { error: event.error }, 'FAULT');
    case 'task-cancelled':
      return endTask(draft, event.at, {}, 'CANCEL');
    case 'expression-evaluated':
    case 'call-answered':
      return putOnce(draft, 'steps', event.at, event.result, 'step');
    case 'child-bound':
    case 'child-disposed':
      return applyChild(draft, event);
    case 'subworkflow-bound':
    case 'subworkflow-disposed':
      return applySubworkflow(draft, event);
    case 'timer-set': {
      const state = stepTimer(record.timers[event.at]?.state ?? 'idle', 'SET');
      return put(draft, 'timers', event.at, { dueAtMs: event.dueAtMs, purpose: event.purpose, state });
    }
    case 'timer-fired': {
      const timer = record.timers[event.at];
      if (!timer) throw new AssertionFailure(`timer ${event.at} fired without being set`);
      return put(draft, 'timers', event.at, { ...timer, state: stepTimer(timer.state, 'FIRE') });
    }
    case 'fork-won':
      return putOnce(draft, 'winners', event.at, event.branch, 'fork winner');
    case 'listen-started':
    case 'listen-event-received':
      return applyListen(draft, event);
    case 'lease-acquired':
    case 'lease-renewed':
    case 'lease-released':
      return applyLease(record, event);
    case 'call-started': {
      const starts = (record.calls[event.at]?.starts ?? 0) + 1;
      return put(draft, 'calls', event.at, { epoch: event.epoch, starts });
    }
    case 'workflow-completed':
    case 'workflow-faulted':
    case 'workflow-cancelled':
      return endInstance(record, event, atMs);
  }
}

/** The instance's end: completed with its output, faulted with its error, or cancelled with its reason. */
function endInstance(record: Mutable<WorkflowRecord>, event: WorkflowCompleted | WorkflowFaulted | WorkflowCancelled, atMs: number): void {
  if (event.type === 'workflow-completed') {
    record.status = stepInstance(record.status, 'COMPLETE');
    record.output = valueOf(record, event.output, event.outputFrom);
  } else if (event.type === 'workflow-faulted') {
    record.status = stepInstance(record.status, 'FAULT');
    record.error = event.error;
  } else {
    record.status = stepInstance(record.status, 'CANCEL');
    record.cancelReason = event.reason;
  }
  record.endedAtMs = atMs;
}

/** A contract call's child operation: bound before the call, disposed when a competing fork's win released it. */
function applyChild(draft: Draft, event: ChildBound | ChildDisposed): void {
  const record = draft.record;
  if (event.type === 'child-bound') {
    const { ref, iterations, operationId, invocationKey, attempt } = event;
    return putOnce(draft, 'children', event.at, { ref, iterations, operationId, invocationKey, attempt }, 'child operation');
  }
  const child = record.children[event.at];
  if (!child || child.operationId !== event.operationId)
    throw new AssertionFailure(`child operation ${event.operationId} at ${event.at} disposed without being bound`);
  if (child.disposition) throw new AssertionFailure(`child operation ${event.operationId} disposed twice`);
  const disposition = { fork: event.fork, disposition: event.disposition, detail: event.detail };
  put(draft, 'children', event.at, { ...child, disposition });
}

/** A child workflow instance: bound before it is started, disposed when the task awaiting it stopped waiting. */
function applySubworkflow(draft: Draft, event: SubworkflowBound | SubworkflowDisposed): void {
  const record = draft.record;
  if (event.type === 'subworkflow-bound') {
    const { ref, iterations, instanceId, invocationKey, workflow, attempt } = event;
    return putOnce(draft, 'subworkflows', event.at, { ref, iterations, instanceId, invocationKey, workflow, attempt }, 'child workflow instance');
  }
  const child = record.subworkflows[event.at];
  if (!child || child.instanceId !== event.instanceId)
    throw new AssertionFailure(`child workflow instance ${event.instanceId} at ${event.at} disposed without being bound`);
  if (child.disposition) throw new AssertionFailure(`child workflow instance ${event.instanceId} disposed twice`);
  put(draft, 'subworkflows', event.at, { ...child, disposition: { by: event.by, disposition: event.disposition, detail: event.detail } });
}

function applyListen(draft: Draft, event: ListenStarted | ListenEventReceived): void {
  const record = draft.record;
  if (event.type === 'listen-started') {
    return putOnce(draft, 'listens', event.at, { to: event.to, read: event.read, events: [], expected: {}, since: eventsTaken(record) }, 'listen');
  }
  const listen = record.listens[event.at];
  if (!listen || task(record, event.at).state !== 'running') throw new AssertionFailure(`listen ${event.at} took an event while not waiting`);
  const taken = {
    event: event.event,
    group: event.group,
    filter: event.filter,
    correlation: event.correlation,
    position: eventsTaken(record),
    ...(event.from === undefined ? {} : { from: event.from }),
  };
  const next: ListenRecord = { ...listen, events: [...listen.events, taken], expected: { ...event.correlation, ...listen.expected } };
  put(draft, 'listens', event.at, next);
}

/** How many events the instance's listens took, in all. */
function eventsTaken(record: Mutable<WorkflowRecord>): number {
  let count = 0;
  for (const listen of Object.values(record.listens)) count += listen.events.length;
  return count;
}

/** The lease machine asserts the step; the epochs assert the fence (a takeover is the next epoch, a renewal or release the holder's). */
function applyLease(record: Mutable<WorkflowRecord>, event: LeaseAcquired | LeaseRenewed | LeaseReleased): void {
  const lease = record.lease;
  if (event.type === 'lease-acquired') {
    stepLease(lease ? 'held' : 'free', 'ACQUIRE');
    if (event.epoch !== record.leaseEpoch + 1) throw new AssertionFailure(`lease epoch ${event.epoch} acquired after epoch ${record.leaseEpoch}`);
    record.lease = { worker: event.worker, epoch: event.epoch, untilMs: event.untilMs };
    record.leaseEpoch = event.epoch;
    return;
  }
  const state = stepLease(lease ? 'held' : 'free', event.type === 'lease-renewed' ? 'RENEW' : 'RELEASE');
  if (!lease || event.epoch !== lease.epoch) throw new AssertionFailure(`${event.type} for epoch ${event.epoch}, the lease is at ${lease?.epoch ?? 'none'}`);
  record.lease = state === 'held' && event.type === 'lease-renewed' ? { ...lease, untilMs: event.untilMs } : null;
}

function created(stored: Stored<WorkflowTransition>): WorkflowRecord {
  const [first, ...rest] = stored.transition.events;
  if (first?.type === 'workflow-cancelled-before-start') return cancelledBeforeStart(stored, first, rest);
  if (first?.type !== 'workflow-started') throw new AssertionFailure('a workflow stream begins with workflow-started');
  // The deadline counts from the commit instant, the instance's startedAtMs (older logs: as recorded). The start
  // refuses a timeout ending past 2^53 − 1 ms from its clock; a commit instant later than that clock's is held to it.
  const deadlineMs =
    typeof first.timeoutMs === 'number' ? Math.min(stored.committedAtMs + first.timeoutMs, Number.MAX_SAFE_INTEGER) : (first.deadlineMs ?? null);
  // Named field by field: object rest over the event takes the engine's generic (slow) copy.
  const started: WorkflowRecord['started'] = {
    instanceId: first.instanceId,
    principalId: first.principalId,
    invocationKey: first.invocationKey,
    workflowName: first.workflowName,
    bundleDigest: first.bundleDigest,
    document: first.document,
    input: first.input,
    deadlineMs,
  };
  // Older logs have no timeoutMs (their deadlineMs is the one above).
  if (first.timeoutMs !== undefined) started.timeoutMs = first.timeoutMs;
  if (first.parent !== undefined) started.parent = first.parent;
  if (first.keys !== undefined) started.keys = first.keys;
  if (first.format !== undefined) started.format = first.format;
  const timers: Record<string, TimerRecord> =
    typeof first.timeoutMs === 'number' && deadlineMs !== null
      ? { [workflowTimeoutKey]: { dueAtMs: deadlineMs, purpose: 'workflow-timeout', state: stepTimer('idle', 'SET') } }
      : {};
  return newRecord(stored, stepInstance('unstarted', 'START'), started, timers, { cancelReason: null, endedAtMs: null }, rest);
}

/**
 * The record of a stream that began with workflow-cancelled-before-start: cancelled from its first
 * event on (the machine's CANCEL_BEFORE_START), no document, no input, nothing run. What the same
 * transition carries after it steps the instance machine from there (only DISPOSE is legal, and
 * it has no children to dispose: the fold asserts that too).
 */
function cancelledBeforeStart(stored: Stored<WorkflowTransition>, first: WorkflowCancelledBeforeStart, rest: readonly WorkflowEvent[]): WorkflowRecord {
  const status = stepInstance('unstarted', 'CANCEL_BEFORE_START');
  for (const event of rest) stepInstance(status, instanceEventOf(event.type));
  const started: WorkflowRecord['started'] = {
    instanceId: first.instanceId,
    principalId: first.principalId,
    invocationKey: first.invocationKey,
    workflowName: first.workflowName,
    bundleDigest: first.bundleDigest,
    document: null,
    input: null,
    deadlineMs: null,
    parent: first.parent,
    cancelledBeforeStart: true,
  };
  return newRecord(stored, status, started, {}, { cancelReason: first.reason, endedAtMs: stored.committedAtMs }, rest);
}

/** A stream's first record: nothing run yet but what the rest of its first transition applies. */
function newRecord(
  stored: Stored<WorkflowTransition>,
  status: WorkflowRecord['status'],
  started: WorkflowRecord['started'],
  timers: Record<string, TimerRecord>,
  end: Pick<WorkflowRecord, 'cancelReason' | 'endedAtMs'>,
  rest: readonly WorkflowEvent[],
): WorkflowRecord {
  const record: Mutable<WorkflowRecord> = {
    instanceId: started.instanceId,
    revision: stored.revision,
    status,
    started,
    startedAtMs: stored.committedAtMs,
    lastAppliedAtMs: stored.committedAtMs,
    tasks: {},
    steps: {},
    children: {},
    subworkflows: {},
    timers,
    winners: {},
    listens: {},
    lease: null,
    leaseEpoch: 0,
    calls: {},
    seq: 0,
    output: null,
    error: null,
    cancelReason: end.cancelReason,
    endedAtMs: end.endedAtMs,
  };
  // A new record: its own draft, its maps its own.
  const draft: Draft = { record, copied: new Set(['tasks', 'steps', 'children', 'subworkflows', 'timers', 'winners', 'listens', 'calls']) };
  for (const event of rest) applyEvent(draft, event, stored.committedAtMs);
  return record;
}

/** The record after one stored transition (undefined while nothing has applied). */
export function applyWorkflow(record: WorkflowRecord | undefined, stored: Stored<WorkflowTransition>): WorkflowRecord | undefined {
  const lastAppliedAtMs = record?.lastAppliedAtMs ?? Number.MIN_SAFE_INTEGER;
  if (!appliesOnFold(stored, lastAppliedAtMs)) return record === undefined ? undefined : { ...record, revision: stored.revision };
  if (record === undefined) return created(stored);
  if (record.status !== 'running') {
    // Only the instance machine's STEP (running) admits most events; a finished instance takes only DISPOSE: what
    // became of a child workflow it started (its disposition, recorded after the end when the end came first).
    for (const event of stored.transition.events) stepInstance(record.status, instanceEventOf(event.type));
  }
  const draft = draftOf(record);
  for (const event of stored.transition.events) applyEvent(draft, event, stored.committedAtMs);
  draft.record.revision = stored.revision;
  draft.record.lastAppliedAtMs = stored.committedAtMs;
  return draft.record;
}

export function foldWorkflow(log: readonly Stored<WorkflowTransition>[]): WorkflowRecord | undefined {
  let record: WorkflowRecord | undefined;
  for (const stored of log) record = applyWorkflow(record, stored);
  return record;
}

/** The earliest armed timer: the instant the kernel's due timer is set for. */
export function nextWorkflowDueMs(record: WorkflowRecord): number | undefined {
  return nextWorkflowDueAfterMs(record, Number.NEGATIVE_INFINITY);
}

/** The first armed timer's instant later than `afterMs`; undefined when none. */
export function nextWorkflowDueAfterMs(record: WorkflowRecord, afterMs: number): number | undefined {
  if (record.status !== 'running') return undefined;
  let due: number | undefined;
  for (const timer of Object.values(record.timers)) {
    if (timer.state === 'armed' && timer.dueAtMs > afterMs && (due === undefined || timer.dueAtMs < due)) due = timer.dueAtMs;
  }
  return due;
}

export const isWorkflowFinished = (record: WorkflowRecord): boolean => record.status !== 'running';
