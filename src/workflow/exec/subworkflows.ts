/**
 * `run: workflow`: a task that runs another workflow pinned beside this one (the same bundle, or
 * the document itself) as a child instance — its own aggregate, its own stream and id.
 *
 * - Identity: the child's invocation key is derived like a stage's (src/workflow/ids.ts
 *   stageInvocationKey: the parent's key, the task's JSON Pointer, the loop indexes, the attempt),
 *   and its id is the workflow instance id of (the parent's principal, the parent's bundle digest,
 *   the child's name, that key). Both are recorded (`subworkflow-bound`, with the call's start)
 *   before the child is started, so a worker that dies in between starts the same child on
 *   recovery, and one that dies after finds it (the start is create-if-absent under the id).
 * - The parent waits for the child's end in memory (no step is recorded while it waits; a parent
 *   that only waits parks its lease, and the child's end drives it again); the child's output is
 *   the task's raw output, a faulted child's error is raised at the task (catchable), a cancelled
 *   child raises a runtime error. With `run.await: false` the child is started and the task's
 *   output is its input.
 * - A DSL retry of the task is a new logical invocation: a new attempt, a new child.
 * - Depth: the child records its parent (instance, task execution, depth); a child deeper than
 *   limits.workflowDepthMax is refused with a runtime error at the task, before it is bound.
 * - The principal's bound of running instances (running-bound.ts): a child counts against its
 *   parent's principal (its root's); a start refused by it is a runtime error (503, "Workflow
 *   instances bound reached") at the task, recorded as the call's answer, never retried as a
 *   store failure is (which would leave the task waiting for as long as the principal stays at it).
 *   So is its start rate (workflows.startRate): a child takes a token of its root's principal as a
 *   caller's start does, and a start past it is a runtime error (503, "Workflow start rate reached").
 * - Any other refusal of the start but an unavailable store (invalid-input, unsupported, denied,
 *   expired, protocol-conflict, conflict) is definite — a later start meets it again — and is the
 *   DSL error of its kind at the task (adapterErrorProblems: "Child workflow refused"), recorded as
 *   the call's answer, catchable. An unavailable store is thrown: the parent is driven again, its
 *   task's or its workflow's timeout still ending the wait.
 * - The workflows resolver failing before the child is bound: a definite AdapterError is the DSL
 *   error of its kind at the task ("Child workflow not resolved"), the task's fault recorded; an
 *   unavailable one or any other exception is thrown and retried as an unavailable store is.
 * - Abandoned children: when the task awaiting a child stops waiting without its answer — its own
 *   timeout or an enclosing task's fired, or it was in a competing fork's losing branch — the
 *   child is no longer awaited, and its parent (which owns it) cancels it, then records what
 *   became of it (`subworkflow-disposed`: cancelled, already closed, not started) while still
 *   running. The decision is the end already recorded (the timeout's fault, the fork's win): a
 *   worker that stops before the disposition is recorded leaves it to the next, which meets the
 *   ended task again on its way and cancels again (cancelling an ended instance changes nothing,
 *   and the disposition is read from the child as it is). A child started with `await: false` was
 *   never awaited and is not released with its task (it is cancelled with its parent, as every
 *   child is when the parent faults or is cancelled).
 * - A start in flight: a child bound but not created yet when its parent cancels it is created
 *   cancelled before its start (workflow-cancelled-before-start, under the start's own
 *   create-if-absent: disposeSubworkflow), so the start, stored later on whichever worker, finds it
 *   and never runs it, and `not-started` is true once recorded; a start stored first is cancelled.
 * - After the parent's end: a child it still owes a disposition — the parent ended (faulted,
 *   cancelled) while awaiting it or with it started `await: false`, or a worker stopped between
 *   a task's timeout and the child's cancel and the parent ended before another drove it — is
 *   cancelled, and its disposition recorded in the ended parent's log: the one event an ended
 *   instance takes (its machine's DISPOSE), under the same CAS, once per child (owedDisposals,
 *   disposeOwed; the executor asks when the parent ends, when it is cancelled, and when it loads
 *   the parent or a running child of it).
 */
import { cutText, type JsonObject, type JsonValue } from '../../contract/json.js';
import { AdapterError, AssertionFailure } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import { valueAt } from '../../contract/bundle.js';
import { stageInvocationKey, workflowInstanceId } from '../ids.js';
import { outputLevels } from './calls.js';
import { isObject, subworkflowRefOf, type SubworkflowRef } from './document.js';
import { WorkflowRaise, raise, raiseAdapterError } from './dsl-errors.js';
import type { SubworkflowDisposed, SubworkflowDisposition, WorkflowCancelledBeforeStart } from './events.js';
import { Halted } from './journal.js';
import { ranInside, schemeOf, type KeyScheme } from './keys.js';
import { RunningBoundReached } from './running-bound.js';
import { RateLimited } from '../../runtime/admission-rate.js';
import type { SubworkflowRecord, TaskRecord, WorkflowRecord } from './record.js';
import type { ChildStart, Interpreting as Interpreter, SubworkflowHost, TaskRun } from './run.js';

const headerName = (document: JsonValue): string =>
  isObject(document) && isObject(document.document) && typeof document.document.name === 'string' ? document.document.name : '';

/** Runs the task's child workflow; answers the task's raw output. */
export async function runSubworkflow(interpreter: Interpreter, run: TaskRun): Promise<JsonValue> {
  const ref = run.entry.pointer;
  const spec = run.entry.task.run as JsonObject;
  const target = subworkflowRefOf(run.entry.task);
  const host = interpreter.deps.subworkflows;
  if (!target || !host) throw raise('configuration', 400, 'No workflow runtime', ref, 'this executor cannot run child workflows');
  const document = resolveChild(host, interpreter.record, target, ref);
  if (document === undefined)
    throw raise('configuration', 400, 'Unknown workflow', ref, `the workflow ${target.namespace}/${target.name} is not pinned beside this one`);
  const depth = (interpreter.record.started.parent?.depth ?? 0) + 1;
  if (depth > limits.workflowDepthMax)
    throw raise(
      'runtime',
      500,
      'Workflow nesting too deep',
      ref,
      `a child workflow would run at depth ${depth}; at most ${limits.workflowDepthMax} are nested`,
    );
  const workflow = spec.workflow as JsonObject;
  const input =
    workflow.input === undefined
      ? run.input
      : await interpreter.evaluateValue(`${run.at}>run.input`, workflow.input, run.input, run.frame, { input: run.input }, ref);
  await bind(interpreter, run, headerName(document));
  const child = interpreter.record.subworkflows[run.at];
  if (!child) throw new Halted(`child workflow of ${run.at} was not recorded`);
  const started = interpreter.record.started;
  const request: ChildStart = {
    principalId: started.principalId,
    bundleDigest: started.bundleDigest,
    invocationKey: child.invocationKey,
    document,
    input,
    parent: { instanceId: interpreter.record.instanceId, at: run.at, depth },
  };
  const awaited = spec.await !== false;
  // The child's output is a task's output (its contract call's answer, a fork's list), held to outputLevels: allowed as there.
  const wait = () => startAndWait(interpreter, run, host, request, child.instanceId, awaited);
  const answer = await interpreter.step(`${run.at}>run`, run.frame, 'call', wait, true, outputLevels);
  return awaited ? answer : run.input;
}

/**
 * The child's document, as the host's workflows resolve it. A resolver's definite refusal (an
 * AdapterError of any kind but unavailable: the look-up would meet it again) is the DSL error of
 * its kind at the task (adapterErrorProblems), as a refused start is: nothing is bound yet, so the
 * task's fault is what is recorded, and a try catches it. An unavailable resolver, or one that
 * fails otherwise, is thrown: the parent is driven again, its task's or workflow's timeout still
 * ending the wait.
 */
function resolveChild(host: SubworkflowHost, record: WorkflowRecord, target: SubworkflowRef, ref: string): JsonValue | undefined {
  try {
    return host.resolve(record, target);
  } catch (error) {
    if (!(error instanceof AdapterError) || error.kind === 'unavailable') throw error;
    const workflow = `${target.namespace}/${target.name}@${target.version ?? 'latest'}`;
    const detail = `the workflow ${workflow} could not be resolved (${error.kind}): ${error.description ?? error.message}`;
    throw raiseAdapterError(error, 'Child workflow not resolved', ref, detail);
  }
}

/** Records the child's key and id (with the call's start) before it is started: one transition. */
async function bind(interpreter: Interpreter, run: TaskRun, workflow: string): Promise<void> {
  const record = interpreter.record;
  if (record.subworkflows[run.at]) return;
  const ref = run.entry.pointer;
  const iterations = run.frame.iterations.join('/');
  const attempt = Object.values(record.subworkflows).filter((bound) => bound.ref === ref && bound.iterations.join('/') === iterations).length + 1;
  const { started } = record;
  const invocationKey = stageInvocationKey(started.invocationKey, { pointer: ref, iterations: run.frame.iterations, attempt });
  const instanceId = workflowInstanceId(started.principalId, started.bundleDigest, workflow, invocationKey);
  await interpreter.propose({
    command: 'subworkflow-bound',
    events: [
      { type: 'subworkflow-bound', v: 1, at: run.at, ref, instanceId, invocationKey, workflow, iterations: [...run.frame.iterations], attempt },
      { type: 'call-started', v: 1, at: `${run.at}>run`, epoch: record.lease?.epoch ?? 0 },
    ],
  });
}

async function startAndWait(
  interpreter: Interpreter,
  run: TaskRun,
  host: SubworkflowHost,
  request: ChildStart,
  expectedId: string,
  awaited: boolean,
): Promise<JsonValue> {
  const ref = run.entry.pointer;
  const { instanceId } = await host.start(request).catch((error: unknown) => {
    // Refused by the principal's bound of running instances (running-bound.ts): a runtime error at the task, recorded
    // as the call's answer (catchable: a retry with a backoff waits for one of the principal's instances to end).
    if (error instanceof RunningBoundReached) throw raise('runtime', 503, 'Workflow instances bound reached', ref, error.description ?? error.message);
    // Past the principal's start rate (workflows.startRate): the same, a retry with a backoff waits for a token.
    if (error instanceof RateLimited) throw raise('runtime', 503, 'Workflow start rate reached', ref, error.description ?? error.message);
    // A definite refusal (its workflow's timeout ends past what a timer records, its document no longer checks beside
    // its bundle, its key pruned or taken by another start): every later start meets it again, so it is the DSL's error
    // at the task, of its kind (as a contract call's refusal is), recorded as the call's answer and catchable. Only an
    // unavailable store is thrown, for the parent to be driven again; its task's or its workflow's timeout still ends it.
    if (error instanceof AdapterError && error.kind !== 'unavailable') throw childRefused(error, request, ref);
    throw error;
  });
  if (instanceId !== expectedId) throw raise('runtime', 500, 'Child workflow mismatch', ref, `started ${instanceId}, expected ${expectedId}`);
  // Cancelled while the child was being started: the cancellation found no child to cancel, so cancel it here.
  if (interpreter.record.status !== 'running') {
    await host.cancel(instanceId, parentReason(interpreter.record.instanceId, `is ${interpreter.record.status}`));
    throw new Halted(`workflow instance is ${interpreter.record.status}`);
  }
  if (!awaited) return { instanceId };
  for (;;) {
    const child = await host.wait(instanceId, interpreter.deps.contractWaitChunkMs, run.frame.signal);
    if (run.frame.signal.aborted) throw new Halted('the child workflow wait was stopped');
    if (!child) throw raise('runtime', 500, 'Child workflow missing', ref, `workflow instance ${instanceId} is not in the store`);
    if (child.status === 'completed') return child.output;
    if (child.status === 'faulted') throw new WorkflowRaise(childError(child, ref));
    if (child.status === 'cancelled')
      throw raise(
        'runtime',
        500,
        'Child workflow cancelled',
        ref,
        `workflow instance ${instanceId} was cancelled${child.started.cancelledBeforeStart === true ? ' before its start' : ''}`,
      );
  }
}

/** A definite refusal of the child's start, raised at the parent's task: the DSL error of its kind, the refusal as its detail. */
function childRefused(error: AdapterError, request: ChildStart, ref: string): WorkflowRaise {
  const detail = `the start of workflow ${headerName(request.document)} was refused (${error.kind}): ${error.description ?? error.message}`;
  return raiseAdapterError(error, 'Child workflow refused', ref, detail);
}

/** The child's error, raised at the parent's task: its type, status and title kept (a catch filters on them), the child named in the detail. */
function childError(child: WorkflowRecord, ref: string): WorkflowRaise['error'] {
  const error = child.error ?? { type: 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime', status: 500 };
  const where = `workflow ${child.started.workflowName} (instance ${child.instanceId}) faulted at ${error.instance ?? '/'}`;
  return { ...error, detail: `${where}${error.detail ? `: ${error.detail}` : ''}`, instance: ref };
}

/** A task execution that stopped waiting: its task's pointer, its key, and its endedSeq once its end is recorded. */
export interface Released {
  pointer: string;
  at: string;
  endedSeq: number | null;
}

/** Whether the `run: workflow` task at `ref` awaits its child (`run.await` is not false). */
export function awaitsChild(document: JsonValue, ref: string): boolean {
  const task = valueAt(document, ref);
  return !(isObject(task) && isObject(task.run) && task.run.await === false);
}

/**
 * The awaited children bound inside the task executions `within` and still open: no answer
 * recorded for the task's run, no disposition yet. A child counts as inside an execution when its
 * task is the execution's task or one nested in it, in the execution's frame, and started before
 * the execution ended (a later visit of the same task is another execution).
 */
export function openSubworkflowsOf(record: WorkflowRecord, within: readonly Released[]): [string, SubworkflowRecord][] {
  const document = record.started.document;
  const scheme = schemeOf(record.started);
  return Object.entries(record.subworkflows).filter(
    ([at, child]) =>
      child.disposition === undefined &&
      record.steps[`${at}>run`] === undefined &&
      awaitsChild(document, child.ref) &&
      within.some(
        (execution) =>
          ranInside(scheme, execution, child.ref, at) &&
          (execution.endedSeq === null || (record.tasks[at]?.startedSeq ?? Number.MAX_SAFE_INTEGER) < execution.endedSeq),
      ),
  );
}

/**
 * The reason a parent gives when it cancels its child (the child's `workflow-cancelled` and
 * `workflow-cancelled-before-start` carry it): it names the parent first, and only the parent
 * writes it (a caller's cancel gives its own fixed reason, instances.ts), so the child's record
 * tells a cancel by its parent from any other (cancelledByParent).
 */
const parentReason = (parentId: string, why: string): string => `its parent ${parentId} ${why}`;

/** Whether a cancel's reason is one this parent gave (parentReason). */
const cancelledByParent = (reason: string | null, parentId: string): boolean => reason?.startsWith(parentReason(parentId, '')) === true;

/**
 * Cancels one abandoned child (the only I/O) and answers its disposition as the child's log now
 * says, and nothing the log does not: cancelled by its parent (by this release: the child's cancel
 * reason is the one it sent; or by the parent earlier — another release of it, or its cancel of a
 * child whose start it met after its own end — the reason that one gave), already closed (it had
 * completed, faulted, or been cancelled by someone else, such as its caller, before its parent's
 * cancel reached it: the reason its log holds), or not started. A child with no instance under its
 * id yet — its start not stored, maybe in flight on this worker or another — is created cancelled
 * before its start (workflow-cancelled-before-start, under the create-if-absent the start uses),
 * so `not-started` is recorded only once no start of that id can succeed; a start stored first is
 * cancelled as it is. An unavailable store is thrown: the parent is driven again and releases it
 * then.
 *
 * "before its parent's cancel", never "before X ended": the cancel comes after the end that
 * decided it (the timeout's fault, the fork's win, the parent's own end), and a child that ended
 * in between — on its own or by its caller — ended after X did.
 */
export async function disposeSubworkflow(
  host: SubworkflowHost,
  parent: WorkflowRecord,
  by: string,
  at: string,
  child: SubworkflowRecord,
  what = by,
): Promise<SubworkflowDisposed> {
  const parentId = parent.instanceId;
  const event = (disposition: SubworkflowDisposition, detail: string): SubworkflowDisposed => ({
    type: 'subworkflow-disposed',
    v: 1,
    at,
    instanceId: child.instanceId,
    by,
    disposition,
    detail: cutText(detail, 4000),
  });
  const reason = parentReason(parentId, `no longer awaits it: ${what} ended`);
  const after = await host.cancel(child.instanceId, reason, unstartedChild(parent, at, child, reason));
  if (after === undefined) throw new AdapterError('unavailable', `child workflow instance ${child.instanceId} was neither found nor created`);
  if (after.started.cancelledBeforeStart === true)
    return event('not-started', `${what} ended before the child instance was started; it was cancelled before its start`);
  if (after.status === 'running') throw new AdapterError('unavailable', `child workflow instance ${child.instanceId} is still running after its cancel`);
  if (after.status === 'cancelled') {
    const why = after.cancelReason ?? 'no reason recorded';
    if (after.cancelReason === reason) return event('cancelled', `cancelled by its parent when ${what} ended`);
    if (cancelledByParent(after.cancelReason, parentId))
      return event('cancelled', `cancelled by its parent earlier, before its cancel when ${what} ended: ${why}`);
    return event('already-closed', `it had been cancelled before its parent's cancel when ${what} ended: ${why}`);
  }
  return event('already-closed', `it had ${after.status} before its parent's cancel when ${what} ended`);
}

/** The first event of the bound child's stream when its parent cancels it before its start was stored. */
function unstartedChild(parent: WorkflowRecord, at: string, child: SubworkflowRecord, reason: string): WorkflowCancelledBeforeStart {
  const { principalId, bundleDigest } = parent.started;
  if (workflowInstanceId(principalId, bundleDigest, child.workflow, child.invocationKey) !== child.instanceId)
    throw new AssertionFailure(`child workflow instance ${child.instanceId} at ${at} is not the one its binding names`);
  return {
    type: 'workflow-cancelled-before-start',
    v: 1,
    instanceId: child.instanceId,
    principalId,
    invocationKey: child.invocationKey,
    workflowName: child.workflow,
    bundleDigest,
    parent: { instanceId: parent.instanceId, at, depth: (parent.started.parent?.depth ?? 0) + 1 },
    reason: cutText(reason, 4000),
  };
}

/** A child an ended instance still owes a disposition: its task execution, its record, and what stopped awaiting it. */
export interface OwedChild {
  at: string;
  child: SubworkflowRecord;
  /** The ended task execution that stopped awaiting it, or '/' (the instance's own end). */
  by: string;
}

/**
 * The children an ended instance still owes a disposition (pure): every bound child with none
 * recorded whose end the parent did not see — an awaited one with no answer recorded for its
 * run, and, when the instance faulted or was cancelled, one started with `await: false` (it is
 * cancelled with its parent). A completed instance leaves its `await: false` children running:
 * they were never awaited, and owe nothing. `by` is the decision the log already holds: the
 * first to end of the faulted or cancelled task executions the child ran inside (a timeout's
 * fault, a losing branch's cancel) when it was awaited, else the instance's end ('/').
 */
export function owedDisposals(record: WorkflowRecord): OwedChild[] {
  if (record.status === 'running' || Object.keys(record.subworkflows).length === 0) return [];
  const document = record.started.document;
  const scheme = schemeOf(record.started);
  const withEnd = cancelledWithEnd(record);
  const ended = Object.entries(record.tasks).filter(([execution, task]) => task.state === 'faulted' || (task.state === 'cancelled' && !withEnd.has(execution)));
  const owed: OwedChild[] = [];
  for (const [at, child] of Object.entries(record.subworkflows)) {
    if (child.disposition !== undefined) continue;
    const awaited = awaitsChild(document, child.ref);
    if (awaited ? record.steps[`${at}>run`] !== undefined : record.status === 'completed') continue;
    owed.push({ at, child, by: (awaited ? firstEndedAround(record, scheme, ended, child.ref, at) : undefined) ?? '/' });
  }
  return owed;
}

/**
 * The first to end of the task executions `among` that the execution `at` of the task at `ref`
 * ran inside and that ended after it started (the fault or cancel that stopped it); undefined
 * when none did.
 */
export function firstEndedAround(
  record: WorkflowRecord,
  scheme: KeyScheme,
  among: Iterable<[string, TaskRecord]>,
  ref: string,
  at: string,
): string | undefined {
  const startedSeq = record.tasks[at]?.startedSeq ?? Number.MAX_SAFE_INTEGER;
  let first: string | undefined;
  let firstEndedSeq = Number.MAX_SAFE_INTEGER;
  for (const [execution, task] of among) {
    const endedSeq = task.endedSeq ?? Number.MAX_SAFE_INTEGER;
    if (startedSeq < endedSeq && endedSeq < firstEndedSeq && ranInside(scheme, { pointer: task.ref, at: execution }, ref, at)) {
      first = execution;
      firstEndedSeq = endedSeq;
    }
  }
  return first;
}

/**
 * The task executions cancelled with the instance's end (decide.ts cancelledWithInstance): the
 * last task events of its log, each a cancel. The end released what they awaited, not they.
 */
export function cancelledWithEnd(record: WorkflowRecord): Set<string> {
  const endedAt = new Map<number, string>();
  for (const [execution, task] of Object.entries(record.tasks)) if (task.endedSeq !== null) endedAt.set(task.endedSeq, execution);
  const withEnd = new Set<string>();
  for (let seq = record.seq - 1; ; seq--) {
    const execution = endedAt.get(seq);
    if (execution === undefined || record.tasks[execution]?.state !== 'cancelled') return withEnd;
    withEnd.add(execution);
  }
}

/**
 * Cancels each child an ended instance still owes a disposition (owedDisposals) and answers the
 * dispositions, for the caller to record after the end (decideDisposals). An unavailable store is
 * thrown: the dispositions are asked again (by this worker later, or by the next to load the
 * parent or one of its running children).
 */
export async function disposeOwed(host: SubworkflowHost, record: WorkflowRecord): Promise<SubworkflowDisposed[]> {
  const disposed: SubworkflowDisposed[] = [];
  for (const { at, child, by } of owedDisposals(record))
    disposed.push(await disposeSubworkflow(host, record, by, at, child, by === '/' ? `the instance (${record.status})` : by));
  return disposed;
}

/**
 * Releases the awaited children still open inside the task executions `within` (which ended, or
 * are being recorded as cancelled with the answer): each is cancelled, and its disposition
 * answered, for the caller to record.
 */
export async function releaseSubworkflows(interpreter: Interpreter, by: string, within: readonly Released[]): Promise<SubworkflowDisposed[]> {
  const host = interpreter.deps.subworkflows;
  if (!host) return [];
  const disposed: SubworkflowDisposed[] = [];
  for (const [at, child] of openSubworkflowsOf(interpreter.record, within)) disposed.push(await disposeSubworkflow(host, interpreter.record, by, at, child));
  return disposed;
}
