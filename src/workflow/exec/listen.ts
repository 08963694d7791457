/**
 * listen (interpreter side): the task records that it waits (`listen-started`, with its strategy
 * and each correlation's expectation evaluated against its input), then follows its record as
 * delivered events are appended (intake.ts, under the kernel's guarded append) until the strategy
 * is satisfied — or an `until` expression, evaluated after each event and recorded, holds. Its
 * output is the events of `to` it took, in log order, read as `read` says (`data` by default,
 * `envelope`, `raw`). The task's `timeout` ends the wait like any task's; with `foreach`, the
 * events taken before it are iterated first (each was answered to its publisher as taken), then the
 * task faults with it, unless they ended the wait. Replay reads every event and every `until`
 * result from the log.
 */
import type { JsonObject, JsonValue } from '../../contract/json.js';
import { outputLevels } from './calls.js';
import { isObject, transformOf } from './document.js';
import { timeoutError } from './decide.js';
import { WorkflowRaise, raise } from './dsl-errors.js';
import { hasExpression } from './expressions.js';
import { Halted } from './journal.js';
import { iterationFrame } from './keys.js';
import { expectsOf, filterArgumentsKey, filterVariables, listenSatisfied, listenTimedOut, untilKey, withExpects } from './listen-match.js';
import { listenOutput, readEvent, type ListenRecord, type WorkflowRecord } from './record.js';
import type { Interpreting as Interpreter, TaskRun } from './run.js';

const reads = new Set(['data', 'envelope', 'raw']);

/**
 * The levels a listen's recorded filter arguments add above the values they hold: each argument is
 * one level down (`input`, `context`) and a member of one two (`$workflow.input`,
 * `$workflow.definition`, `$task.input`), and such a value may be a task's output, allowed its own
 * outputLevels. An input as deep as a caller may give, read by a filter through `$workflow`, is
 * recorded as the filter reads it.
 */
const filterArgumentsLevels = 2 + outputLevels;

export async function runListen(interpreter: Interpreter, run: TaskRun): Promise<JsonValue> {
  const at = run.at;
  const spec = run.entry.task.listen as JsonObject;
  const read = spec.read ?? 'data';
  if (typeof read !== 'string' || !reads.has(read)) throw raise('validation', 400, 'Invalid listen', run.entry.pointer, 'listen.read is data, envelope or raw');
  if (!interpreter.record.listens[at]) {
    const expects = expectsOf(spec.to ?? null);
    const values = hasExpression(expects)
      ? await interpreter.evaluateValue(`${at}>listen.expect`, expects, run.input, run.frame, { input: run.input }, run.entry.pointer)
      : expects;
    const to = withExpects(spec.to ?? null, isObject(values) ? values : {});
    // The filters are matched where an event arrives: the runtime arguments they read are recorded with the start, as they are now.
    let vars = interpreter.vars(run.frame, { input: run.input });
    const names = filterVariables(to, Object.keys(vars));
    // $workflow.startedAt is the start's commit instant: the arguments are read once the start has committed.
    if (names.includes('workflow') && interpreter.deps.journal.pending()) {
      await interpreter.deps.journal.settle();
      vars = interpreter.vars(run.frame, { input: run.input });
    }
    if (names.length > 0)
      await interpreter.step(
        filterArgumentsKey(at),
        run.frame,
        'expression',
        () => Promise.resolve(Object.fromEntries(names.map((name) => [name, vars[name] as JsonValue]))),
        true,
        filterArgumentsLevels,
      );
    await interpreter.propose({ command: 'listen-started', events: [{ type: 'listen-started', v: 1, at, to, read: read as ListenRecord['read'] }] });
  }
  const foreach = isObject(run.entry.task.foreach) ? run.entry.task.foreach : undefined;
  const outputs: JsonValue[] = [];
  for (let count = 1; ; count++) {
    // What the listen evaluated so far (its `until` results) is in the log before it waits.
    await interpreter.flush();
    const record = await interpreter.deps.journal.until(
      (r) => taken(r, at) >= count || r.tasks[at]?.state !== 'running' || listenTimedOut(r, at),
      run.frame.signal,
    );
    interpreter.alive(run.frame);
    if (taken(record, at) < count) {
      // Its timeout fired with the wait open and every event taken before it iterated (decideDue left it running for them).
      if (record.tasks[at]?.state === 'running') throw new WorkflowRaise(timeoutError(run.entry.pointer, `task ${run.entry.name}`));
      throw new Halted(`listen ${at} ended while waiting`);
    }
    const listen = record.listens[at] as ListenRecord;
    const took = listen.events[count - 1];
    if (foreach && took?.group === 'to') outputs.push(await iterate(interpreter, run, foreach, readEvent(took.event, listen.read), outputs.length));
    if (await ends(interpreter, run, listen, count)) return interpreter.heldOutput(run, foreach ? outputs : outputOf(interpreter, at, count));
  }
}

/**
 * The events of `to` the listen took, as read: its output. Each is in the log already (its own
 * listen-event-received, within one transition); together they may be more than one transition
 * holds, so the output is noted as the listen's (`{listen}`), and its completion names them
 * instead of writing them again: the senders were answered that the instance took their events,
 * and it uses them. The listen took nothing after the event that ended it (listen-match.ts).
 */
function outputOf(interpreter: Interpreter, at: string, count: number): JsonValue[] {
  const listen = interpreter.record.listens[at] as ListenRecord;
  const output = listenOutput(listen, count);
  if (count === listen.events.length) interpreter.noteOrigin(output, { listen: at });
  return output;
}

/**
 * One iteration of `foreach` over an event the listen took for `to`, as it is taken: its tasks run
 * on the event (as read) under the frame `[k]`, with the event as `$<item>` (default `$item`) and
 * k as `$<at>` (default `$index`); `foreach.output.as` shapes the iteration's output, validated
 * against `foreach.output.schema`. The listen's output is then the iterations' outputs in log order.
 */
async function iterate(interpreter: Interpreter, run: TaskRun, foreach: JsonObject, item: JsonValue, index: number): Promise<JsonValue> {
  const ref = run.entry.pointer;
  const frame = {
    ...iterationFrame(run.frame, index),
    iterations: [...run.frame.iterations, index],
    vars: {
      ...run.frame.vars,
      [typeof foreach.item === 'string' ? foreach.item : 'item']: item,
      [typeof foreach.at === 'string' ? foreach.at : 'index']: index,
    },
  };
  const { output } = await interpreter.runList(foreach.do ?? [], `${ref}/foreach/do`, item, frame);
  // A string (an expression, with or without its `${ }`) or an object whose enclosed expressions are filled in, as every output.as.
  const as = transformOf(foreach.output, 'as');
  const shaped = as === undefined ? output : await interpreter.transform(`${run.at}[${index}]>foreach.output.as`, as, output, frame, { input: run.input }, ref);
  interpreter.validate(`${ref}/foreach/output/schema`, shaped, ref, `the output of iteration ${index} of task ${run.entry.name}`);
  return shaped;
}

const taken = (record: WorkflowRecord, at: string): number => record.listens[at]?.events.length ?? 0;

/** Whether the first `count` events end the listen: the strategy, or the `until` expression over the events of `to` read so far. */
async function ends(interpreter: Interpreter, run: TaskRun, listen: ListenRecord, count: number): Promise<boolean> {
  const until = isObject(listen.to) ? listen.to.until : undefined;
  if (typeof until !== 'string' || !isObject(listen.to) || !Array.isArray(listen.to.any)) return listenSatisfied(listen, count);
  const consumed = listenOutput(listen, count);
  const value = await interpreter.evaluate(untilKey(run.at, count - 1), until, consumed, run.frame, { input: run.input }, run.entry.pointer);
  return value !== false && value !== null;
}
