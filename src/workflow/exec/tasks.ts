/**
 * The task kinds the executor runs (first wave): do, set, switch, raise, try/catch with retry,
 * wait, for, fork, and calls (calls.ts). Each takes the task's transformed input and answers its
 * raw output, and for switch the flow directive it chose.
 */
import { sha256Hex } from '../../contract/canonical.js';
import { cloudEventProblem, type CloudEvent, type CloudEventSink, type EmitOrigin } from '../../contract/cloudevents.js';
import { AdapterError } from '../../contract/errors.js';
import type { JsonObject, JsonValue } from '../../contract/json.js';
import { isExpression, isObject, resolveNamed, type TaskEntry } from './document.js';
import { durationForm, durationMs } from './duration.js';
import { WorkflowRaise, errorFrom, errorMatches, errorValue, raise } from './dsl-errors.js';
import type { WorkflowError, WorkflowEvent } from './events.js';
import { runListen } from './listen.js';
import { attemptFrame, attemptStepKey, branchFrame, iterationFrame, ranInside, schemeOf, taskKey } from './keys.js';
import { dispose, openChildrenOf } from './losers.js';
import { Halted } from './journal.js';
import { runCall } from './calls.js';
import { releaseSubworkflows, runSubworkflow } from './subworkflows.js';
import { entriesOf } from './document.js';
import { escapePointer } from './expressions.js';
import type { Frame, Interpreting as Interpreter, TaskRun } from './run.js';

export interface KindOutcome {
  output: JsonValue;
  then?: string;
  ended: boolean;
}

const truthy = (value: JsonValue): boolean => value !== false && value !== null;

export async function runKind(interpreter: Interpreter, run: TaskRun): Promise<KindOutcome> {
  const task = run.entry.task;
  if (task.for !== undefined) return runFor(interpreter, run);
  if (task.call !== undefined) return { output: await runCall(interpreter, run), ended: false };
  if (task.fork !== undefined) return runFork(interpreter, run);
  if (task.try !== undefined) return runTry(interpreter, run);
  if (task.set !== undefined)
    return { output: await interpreter.evaluateValue(`${run.at}>set`, task.set, run.input, run.frame, { input: run.input }, run.entry.pointer), ended: false };
  if (task.switch !== undefined) return runSwitch(interpreter, run);
  if (task.raise !== undefined) return runRaise(interpreter, run);
  if (task.wait !== undefined) return runWait(interpreter, run);
  if (task.emit !== undefined) return { output: await runEmit(interpreter, run), ended: false };
  if (task.listen !== undefined) return { output: await runListen(interpreter, run), ended: false };
  if (task.run !== undefined) return { output: await runSubworkflow(interpreter, run), ended: false };
  if (task.do !== undefined) return interpreter.runList(task.do, `${run.entry.pointer}/do`, run.input, run.frame);
  throw raise('configuration', 400, 'Unsupported task', run.entry.pointer, 'this task kind is not supported');
}

/**
 * The first case whose `when` holds, in the order listed; else the case without `when`, wherever
 * it is listed: the DSL's default case "will be matched by default if no other case match"
 * (dsl-reference Switch Case). No case matched: the task's own `then`.
 */
async function runSwitch(interpreter: Interpreter, run: TaskRun): Promise<KindOutcome> {
  const cases = run.entry.task.switch as JsonValue[];
  let fallback: JsonObject | undefined;
  for (const [index, item] of cases.entries()) {
    const [name] = Object.keys(item as JsonObject);
    const branch = (item as JsonObject)[name as string] as JsonObject;
    if (typeof branch.when !== 'string') {
      fallback ??= branch;
      continue;
    }
    if (truthy(await interpreter.evaluate(`${run.at}>switch/${index}`, branch.when, run.input, run.frame, { input: run.input }, run.entry.pointer)))
      return { output: run.input, then: thenOf(branch), ended: false };
  }
  return { output: run.input, then: fallback && thenOf(fallback), ended: false };
}

const thenOf = (branch: JsonObject): string | undefined => (typeof branch.then === 'string' ? branch.then : undefined);

async function runRaise(interpreter: Interpreter, run: TaskRun): Promise<never> {
  const spec = run.entry.task.raise as JsonObject;
  const named = resolveNamed(interpreter.record.started.document, 'errors', spec.error);
  if (named === undefined) throw raise('configuration', 400, 'Unknown error', run.entry.pointer, `raise.error ${JSON.stringify(spec.error)} does not resolve`);
  const value = await interpreter.evaluateValue(`${run.at}>raise`, named, run.input, run.frame, { input: run.input }, run.entry.pointer);
  throw new WorkflowRaise(errorFrom(value, run.entry.pointer));
}

/** Waits for a timer due at the task's recorded start + the duration. */
async function runWait(interpreter: Interpreter, run: TaskRun): Promise<KindOutcome> {
  const wait = run.entry.task.wait as JsonValue;
  const ms = durationMs(
    isExpression(wait) ? await interpreter.evaluate(`${run.at}>wait`, wait, run.input, run.frame, { input: run.input }, run.entry.pointer) : wait,
  );
  if (ms === undefined) throw raise('validation', 400, 'Invalid duration', run.entry.pointer, `wait must be a duration: ${durationForm}`);
  // The wait counts from the committed start.
  await interpreter.flush();
  const started = interpreter.record.tasks[run.at];
  const dueAtMs = (started?.startedAtMs ?? interpreter.deps.journal.nowMs()) + ms;
  // An instant past what a timer records (a duration read from the input) is the DSL's error, not an invalid transition.
  if (!Number.isSafeInteger(dueAtMs))
    throw raise('validation', 400, 'Invalid duration', run.entry.pointer, 'the wait ends past the latest instant a timer records');
  await sleepUntil(interpreter, `${run.at}>wait`, dueAtMs, 'wait', run.frame);
  return { output: run.input, ended: false };
}

/** Records a timer (once) and waits until the kernel has fired it through a guarded append. */
export async function sleepUntil(interpreter: Interpreter, key: string, dueAtMs: number, purpose: 'wait' | 'retry', frame: Frame): Promise<void> {
  await interpreter.propose({ command: 'timer-set', events: [{ type: 'timer-set', v: 1, at: key, dueAtMs, purpose }] });
  await interpreter.deps.journal.until((record) => record.timers[key]?.state === 'fired' || record.status !== 'running', frame.signal);
  interpreter.alive(frame);
}

async function runFor(interpreter: Interpreter, run: TaskRun): Promise<KindOutcome> {
  const task = run.entry.task;
  const spec = task.for as JsonObject;
  const items = await interpreter.evaluate(`${run.at}>for.in`, spec.in as string, run.input, run.frame, { input: run.input }, run.entry.pointer);
  const list = Array.isArray(items) ? items : isObject(items) ? Object.values(items) : items === null ? [] : undefined;
  if (list === undefined) throw raise('validation', 400, 'Not a collection', run.entry.pointer, 'for.in must evaluate to an array');
  const each = typeof spec.each === 'string' ? spec.each : 'item';
  const atName = typeof spec.at === 'string' ? spec.at : 'index';
  let data = run.input;
  // An iteration that runs no task (an empty `do`) counts as one task execution: the loop and its `while` stay within the task budget.
  const idle = !Array.isArray(task.do) || task.do.length === 0;
  for (const [index, item] of list.entries()) {
    if (idle) interpreter.spend(run.entry.pointer);
    const frame: Frame = {
      ...iterationFrame(run.frame, index),
      iterations: [...run.frame.iterations, index],
      vars: { ...run.frame.vars, [each]: item, [atName]: index },
    };
    if (
      typeof task.while === 'string' &&
      !truthy(await interpreter.evaluate(`${run.at}[${index}]>while`, task.while, data, frame, { input: run.input }, run.entry.pointer))
    )
      break;
    const result = await interpreter.runList(task.do, `${run.entry.pointer}/do`, data, frame);
    data = result.output;
    if (result.ended) return { output: data, ended: true };
  }
  return { output: data, ended: false };
}

/** Non-compete: every branch's output, in declaration order. Compete: the first branch to complete wins. */
async function runFork(interpreter: Interpreter, run: TaskRun): Promise<KindOutcome> {
  const spec = run.entry.task.fork as JsonObject;
  const branches = entriesOf(spec.branches ?? [], `${run.entry.pointer}/fork/branches`);
  const frameOf = (index: number, signal: AbortSignal): Frame => ({ ...branchFrame(run.frame, index), signal });
  if (spec.compete !== true) {
    const settled = await Promise.allSettled(branches.map((branch, index) => interpreter.runTask(branch, run.input, frameOf(index, run.frame.signal))));
    const failed = settled.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    const outputs = settled.map((result) => (result as PromiseFulfilledResult<{ output: JsonValue }>).value.output);
    return { output: interpreter.heldOutput(run, outputs), ended: false };
  }
  return compete(interpreter, run, branches, frameOf);
}

async function compete(
  interpreter: Interpreter,
  run: TaskRun,
  branches: TaskEntry[],
  frameOf: (index: number, signal: AbortSignal) => Frame,
): Promise<KindOutcome> {
  const controllers = branches.map(() => new AbortController());
  const watching = new AbortController();
  const stopAll = () => {
    controllers.forEach((controller) => controller.abort());
    watching.abort();
  };
  run.frame.signal.addEventListener('abort', stopAll);
  const runs = branches.map(async (branch, index) => {
    const controller = controllers[index] as AbortController;
    await interpreter.runTask(branch, run.input, frameOf(index, controller.signal));
    await interpreter.propose({ command: 'fork-won', events: [{ type: 'fork-won', v: 1, at: run.at, branch: index }] });
  });
  // The winner is the first branch whose win the log records; the others are stopped and recorded cancelled.
  const settled = await Promise.race([
    interpreter.deps.journal.until((record) => record.winners[run.at] !== undefined, watching.signal).then(() => 'won' as const),
    Promise.allSettled(runs).then((results) => results),
  ]);
  const winner = interpreter.record.winners[run.at];
  try {
    if (winner === undefined) {
      const results = settled === 'won' ? [] : settled;
      const failure = results.find((result) => result.status === 'rejected' && !(result.reason instanceof Halted));
      throw failure?.status === 'rejected' ? failure.reason : new Halted('no branch of the fork completed');
    }
    controllers.forEach((controller, index) => index !== winner && controller.abort());
    // The stopped branches unwind first, so no contract call of theirs is still on its way in.
    await Promise.allSettled(runs.filter((_run, index) => index !== winner));
    await releaseLosers(interpreter, run, branches, winner, frameOf);
    const winning = branches[winner] as TaskEntry;
    const winningAt = taskKey(schemeOf(interpreter.record.started), winning.pointer, frameOf(winner, run.frame.signal), 0).at;
    const output = interpreter.record.tasks[winningAt]?.output ?? null;
    return { output, ended: false };
  } finally {
    run.frame.signal.removeEventListener('abort', stopAll);
    watching.abort();
    void Promise.allSettled(runs);
  }
}

/**
 * Records the losing branches cancelled and, with them, what became of each child operation they
 * bound (losers.ts) and of each child workflow instance they awaited (subworkflows.ts): one
 * transition, before the fork task completes.
 */
async function releaseLosers(
  interpreter: Interpreter,
  run: TaskRun,
  branches: TaskEntry[],
  winner: number,
  frameOf: (index: number, signal: AbortSignal) => Frame,
): Promise<void> {
  // The losers' last facts first: a task a loser started is in the record, and recorded cancelled below.
  await interpreter.flush();
  const scheme = schemeOf(interpreter.record.started);
  const losing = branches.flatMap((branch, index) =>
    index === winner ? [] : [{ pointer: branch.pointer, at: taskKey(scheme, branch.pointer, frameOf(index, run.frame.signal), 0).at }],
  );
  // Each loser's execution and every task still running inside it, in the order they started (the branch's first).
  const cancelled = Object.entries(interpreter.record.tasks).flatMap(([at, task]) =>
    task.state === 'running' && losing.some((branch) => ranInside(scheme, branch, task.ref, at))
      ? [{ type: 'task-cancelled' as const, v: 1 as const, at, reason: `branch ${winner} won the fork` }]
      : [],
  );
  const principalId = interpreter.record.started.principalId;
  const disposed: WorkflowEvent[] = [];
  const nowMs = () => interpreter.deps.journal.nowMs();
  for (const [at, child] of openChildrenOf(interpreter.record, losing))
    disposed.push(await dispose(interpreter.deps.invocations, principalId, run.at, at, child, nowMs, run.frame.signal));
  // Stopped meanwhile (a timeout, the instance's end): nothing is recorded. The child workflows the
  // losers awaited are released with the timed-out task or the ended instance; a bound child
  // operation is asked again by the next drive that comes to the release.
  if (run.frame.signal.aborted) throw new Halted('the release of the losing branches was stopped');
  // The child workflow instances the losers awaited: cancelled by this parent, which owns them.
  const released = await releaseSubworkflows(
    interpreter,
    run.at,
    losing.map(({ pointer, at }) => ({ pointer, at, endedSeq: interpreter.record.tasks[at]?.endedSeq ?? null })),
  );
  const events = [...cancelled, ...disposed, ...released];
  if (events.length > 0) await interpreter.propose({ command: 'fork-cancel-losers', events });
}

/** try/catch with retry: a caught error is retried (after a recorded delay), handled by catch.do, or swallowed. */
async function runTry(interpreter: Interpreter, run: TaskRun): Promise<KindOutcome> {
  const task = run.entry.task;
  const spec = isObject(task.catch) ? task.catch : {};
  const scheme = schemeOf(interpreter.record.started);
  for (let attempt = 1; ; attempt++) {
    const frame = attemptFrame(scheme, run.frame, attempt);
    const handling = attemptStepKey(scheme, run.at, frame, attempt);
    try {
      return await interpreter.runList(task.try, `${run.entry.pointer}/try`, run.input, frame);
    } catch (error) {
      if (!(error instanceof WorkflowRaise)) throw error;
      const caught = await catches(interpreter, run, frame, handling, spec, error.error);
      if (!caught) throw error;
      const retryAtMs = await retryDelay(interpreter, run, frame, handling, spec, attempt, error.error);
      if (retryAtMs !== undefined) {
        await sleepUntil(interpreter, `${run.at}(${attempt})>retry`, retryAtMs, 'retry', run.frame);
        continue;
      }
      if (spec.do === undefined) return { output: run.input, ended: false };
      const handler: Frame = { ...frame, vars: { ...frame.vars, ...caughtVar(spec, error.error) } };
      return interpreter.runList(spec.do, `${run.entry.pointer}/catch/do`, run.input, handler);
    }
  }
}

/** The caught error as the catch names it (`catch.as`, by default `error`): what its when, exceptWhen, retry and do read. */
function caughtVar(spec: JsonObject, error: WorkflowError): Record<string, JsonValue> {
  return { [typeof spec.as === 'string' ? spec.as : 'error']: errorValue(error) };
}

async function catches(interpreter: Interpreter, run: TaskRun, frame: Frame, handling: string, spec: JsonObject, error: WorkflowError): Promise<boolean> {
  const filter = isObject(spec.errors) && isObject(spec.errors.with) ? spec.errors.with : undefined;
  if (!errorMatches(error, filter)) return false;
  const vars = { ...caughtVar(spec, error), input: run.input };
  const withVars: Frame = { ...frame, vars: { ...frame.vars, ...vars } };
  if (typeof spec.when === 'string' && !truthy(await interpreter.evaluate(`${handling}>catch.when`, spec.when, run.input, withVars, {}, run.entry.pointer)))
    return false;
  if (
    typeof spec.exceptWhen === 'string' &&
    truthy(await interpreter.evaluate(`${handling}>catch.exceptWhen`, spec.exceptWhen, run.input, withVars, {}, run.entry.pointer))
  )
    return false;
  return true;
}

/**
 * The instant of the next attempt, or undefined when the policy allows none: `limit.attempt.count`
 * retries at most, within `limit.duration` of the try's start; delay × 1 (constant), × n (linear)
 * or × 2^(n−1) (exponential), plus a jitter drawn from the injected seeded source. The instant is
 * recorded with the timer, so the draw never needs replaying. A backoff ending past the latest
 * instant a timer records is the DSL's validation error at the try (backoffPastTimers): the retry
 * the policy asks for cannot be kept, and the caught error is not taken as handled.
 */
async function retryDelay(
  interpreter: Interpreter,
  run: TaskRun,
  frame: Frame,
  handling: string,
  spec: JsonObject,
  attempt: number,
  caught: WorkflowError,
): Promise<number | undefined> {
  const policy = resolveNamed(interpreter.record.started.document, 'retries', spec.retry);
  if (!isObject(policy)) return undefined;
  // The retry's duration limit counts from the try's committed start.
  await interpreter.flush();
  const timer = interpreter.record.timers[`${run.at}(${attempt})>retry`];
  if (timer) return timer.dueAtMs;
  const limit = isObject(policy.limit) ? policy.limit : {};
  const count = isObject(limit.attempt) && typeof limit.attempt.count === 'number' ? limit.attempt.count : Number.POSITIVE_INFINITY;
  if (attempt > count) return undefined;
  const withVars: Frame = { ...frame, vars: { ...frame.vars, ...caughtVar(spec, caught) } };
  if (typeof policy.when === 'string' && !truthy(await interpreter.evaluate(`${handling}>retry.when`, policy.when, run.input, withVars, {}, run.entry.pointer)))
    return undefined;
  if (
    typeof policy.exceptWhen === 'string' &&
    truthy(await interpreter.evaluate(`${handling}>retry.exceptWhen`, policy.exceptWhen, run.input, withVars, {}, run.entry.pointer))
  )
    return undefined;
  const nowMs = interpreter.deps.journal.nowMs();
  const startedAtMs = interpreter.record.tasks[run.at]?.startedAtMs ?? nowMs;
  const durationLimit = durationMs(limit.duration);
  const baseMs = durationMs(policy.delay) ?? 0;
  const backoff = isObject(policy.backoff) ? policy.backoff : {};
  const factor = backoff.exponential !== undefined ? 2 ** (attempt - 1) : backoff.linear !== undefined ? attempt : 1;
  const jitter = isObject(policy.jitter) ? policy.jitter : undefined;
  const fromMs = durationMs(jitter?.from) ?? 0;
  const toMs = durationMs(jitter?.to) ?? fromMs;
  const jitterMs = jitter ? fromMs + Math.floor(interpreter.deps.random.next() * Math.max(0, toMs - fromMs)) : 0;
  // No delay grows no backoff: past 2^1024 the factor is Infinity, and 0 × Infinity is NaN (no retry at all).
  const dueAtMs = nowMs + (baseMs === 0 ? 0 : baseMs * factor) + jitterMs;
  // Past the policy's own duration limit the retries are over, however far the backoff grew; a backoff no limit ends
  // that ends past what a timer records is a retry asked for and impossible, never a retry left out in silence.
  if (durationLimit !== undefined && dueAtMs > startedAtMs + durationLimit) return undefined;
  if (!Number.isSafeInteger(dueAtMs)) throw backoffPastTimers(run, spec, attempt, caught);
  return dueAtMs;
}

/** The try's validation error for a retry whose backoff ends past 2^53 − 1 ms: the policy's pointer first, the error it caught named. */
function backoffPastTimers(run: TaskRun, spec: JsonObject, attempt: number, caught: WorkflowError): WorkflowRaise {
  const policy = typeof spec.retry === 'string' ? `/use/retries/${escapePointer(spec.retry)}` : `${run.entry.pointer}/catch/retry`;
  const what = `${caught.type} (${caught.status})${caught.instance === undefined ? '' : ` at ${caught.instance}`}`;
  return raise(
    'validation',
    400,
    'Invalid duration',
    run.entry.pointer,
    `${policy}: the backoff of retry ${attempt} ends past the latest instant a timer records (2^53 − 1 ms); the error it caught: ${what}`,
  );
}

/**
 * emit: the CloudEvent (specversion 1.0) built from `emit.event.with` is recorded first (step
 * `>emitted`), then published through the executor's sink (step `>published`, recorded once the
 * sink has it). Its id is derived from the instance and the task execution (pointer and frame:
 * loop iteration, retry attempt, branch), so a worker that dies between the two publishes the
 * same event — the same id — again on recovery, and consumers drop the duplicate. Its time is the
 * instant it was recorded. The sink is told whose instance and which execution emitted it (the
 * subject it goes on, the JetStream message id). The task's output is the event. An event the
 * sink says beforehand it can never publish (`CloudEventSink.refusal`: past the NATS server's
 * max_payload) faults the task at `>emitted`, a validation error (400): the log never records as
 * emitted an event that cannot go out.
 */
async function runEmit(interpreter: Interpreter, run: TaskRun): Promise<JsonValue> {
  const ref = run.entry.pointer;
  const spec = run.entry.task.emit as JsonObject;
  const attributes = isObject(spec.event) && isObject(spec.event.with) ? spec.event.with : undefined;
  if (!attributes) throw raise('validation', 400, 'Invalid emit', ref, 'emit.event.with is required');
  const values = await interpreter.evaluateValue(`${run.at}>emit`, attributes, run.input, run.frame, { input: run.input }, ref);
  if (!isObject(values) || typeof values.source !== 'string' || typeof values.type !== 'string')
    throw raise('validation', 400, 'Invalid event', ref, 'an emitted event needs a string source and type');
  const sink = interpreter.deps.events;
  const origin = { principalId: interpreter.record.started.principalId, instanceId: interpreter.record.instanceId, at: run.at };
  const event = await interpreter.step(`${run.at}>emitted`, run.frame, 'call', async () => {
    const digest = sha256Hex(`${interpreter.record.instanceId}\u0000${run.at}`);
    const id = `${digest.slice(0, 8)}-${digest.slice(8, 12)}-${digest.slice(12, 16)}-${digest.slice(16, 20)}-${digest.slice(20, 32)}`;
    const built: JsonObject = {
      specversion: '1.0',
      id,
      time: new Date(interpreter.deps.journal.nowMs()).toISOString(),
      datacontenttype: 'application/json',
      ...values,
    };
    const problem = cloudEventProblem(built);
    if (problem !== undefined) throw raise('validation', 400, 'Invalid event', ref, problem);
    const refusal = sink?.refusal?.(built as CloudEvent, origin);
    if (refusal !== undefined) throw raise('validation', 400, 'Invalid event', ref, refusal);
    return built;
  });
  if (sink) await interpreter.step(`${run.at}>published`, run.frame, 'call', () => publish(sink, event as CloudEvent, origin, ref));
  return event;
}

/**
 * The sink's refusals as DSL errors: `denied` an authorization error (403), `invalid-input` — an
 * event the broker will never take, such as one past a JetStream stream's max_msg_size, which
 * only its answer tells — a validation error (400), recorded as the publication's answer. Driving
 * the instance again would publish the same event again and be refused again, for ever, with
 * nothing in the log to say why the task never ends; faulted, the task says it at its pointer and
 * a `try` decides. An unavailable sink is thrown as it is (the instance is driven again, the same
 * event published again).
 */
async function publish(sink: CloudEventSink, event: CloudEvent, origin: EmitOrigin, ref: string): Promise<JsonValue> {
  try {
    await sink.publish(event, origin);
    return { id: event.id };
  } catch (error) {
    if (error instanceof AdapterError && error.kind === 'denied')
      throw raise('authorization', 403, 'Event publication denied', ref, error.description ?? error.message);
    if (error instanceof AdapterError && error.kind === 'invalid-input')
      throw raise('validation', 400, 'Invalid event', ref, error.description ?? error.message);
    throw error;
  }
}
