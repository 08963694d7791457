/**
 * The workflow interpreter: walks the document as the DSL says (data flow, flow directives,
 * composite tasks) and records, through the journal, every fact and value it depends on — task
 * starts and ends, every expression's result, every call's answer, every timer. It is a pure
 * function of the document, the input and what the log holds: run again on the same log (after
 * a crash, on another worker) it takes every recorded value from the log instead of computing it,
 * and so walks the same path to the same point, then carries on from there.
 *
 * What is recorded, and when: a fact nothing outside the instance depends on yet — a task's start,
 * an expression's result, the answer of a call that may safely be made again, a task's completion
 * without a timeout — is held and carried by the next transition that must commit before the
 * interpreter goes on: a call's start (before the call is made), a child binding, a timer, a
 * listen, a fork's win, a fault, the end. So every value an external call or a wait depends on is
 * in the log before the call or the wait, as when each fact had a transition of its own, and a
 * pipeline stage costs one append before its call instead of five (the first stage's goes with
 * the instance's start: executor.ts create). A worker that dies holding
 * facts has made no call that depended on them: its successor computes them again (jq is
 * deterministic) or makes the call again under the same identity, as after a death just before
 * the fact's own append.
 *
 * Task kinds are in tasks.ts; calls in calls.ts.
 */
import { AdapterError, AssertionFailure, isAdapterError } from '../../contract/errors.js';
import { asLogged, nestingProblem } from '../../contract/ijson.js';
import { cutText, jsonBytesBound, setMember, type JsonObject, type JsonValue } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';
import { cancelledWithInstance, taskTimeoutKey, timedOutReason, timeoutError, type Proposal } from './decide.js';
import { entriesOf, isObject, kindOf, timeoutMsOf, transformOf, type TaskEntry, type TaskKind } from './document.js';
import { WorkflowRaise, errorTypes, raise } from './dsl-errors.js';
import type { StepResult, TaskCancelled, TaskCompleted, ValueRef, WorkflowError, WorkflowEvent } from './events.js';
import { evaluateValue, expressionResults, hasExpression, programOf, stringsOf, withResults } from './expressions.js';
import { ExpressionFailure, pathValue } from './jq.js';
import { listenWaitEnded } from './listen-match.js';
import { Halted, logBudgetExhausted, replayed } from './journal.js';
import { pointerOfKey, ranInside, schemeOf, taskKey } from './keys.js';
import type { WorkflowRecord } from './record.js';
import { documentSchemas, type DocumentSchemas } from '../schemas.js';
import { secretNames } from '../secrets.js';
import { runKind } from './tasks.js';
import { releaseSubworkflows } from './subworkflows.js';
import type { Frame, Interpreting, InterpreterDeps, Outcome, TaskRun } from './run.js';
import { outputLevels } from './calls.js';

export type { Frame, InterpreterDeps, Outcome, TaskRun } from './run.js';

/** The levels a step recording a call's `with` adds above each expression's result: they are an array. */
const expressionResultsLevels = 1;

const leafKinds: ReadonlySet<TaskKind> = new Set(['set', 'raise', 'call', 'wait', 'emit', 'listen', 'run']);

/** The facts the interpreter may hold until the next transition that must commit (see above). */
export type Held = Extract<WorkflowEvent, { type: 'task-started' | 'task-completed' | 'expression-evaluated' | 'call-answered' }>;

export class Interpreter implements Interpreting {
  private context: JsonValue = {};
  private tasksRun = 0;
  /** Facts held for the next transition, in the order they happened. */
  private held: Held[] = [];
  private fixedVars: { workflow: JsonValue; runtime: JsonValue } | undefined;
  /**
   * Where each object value this run holds was recorded first (a step's result, a task's output):
   * an event carrying the same value names the place too, and the decider writes the reference
   * instead of the value when the record holds that very value there (decide.ts).
   */
  private readonly origins = new WeakMap<object, ValueRef>();

  constructor(readonly deps: InterpreterDeps) {}

  get record(): WorkflowRecord {
    return this.deps.journal.record();
  }

  /** Runs the instance to its end (or until it halts); records its completion or fault. */
  async run(signal: AbortSignal): Promise<void> {
    const document = this.record.started.document as JsonObject;
    const frame: Frame = { suffix: '', iterations: [], vars: {}, signal };
    try {
      const raw = this.record.started.input;
      this.noteOrigin(raw, { input: true });
      // The raw input is validated before anything runs: an invalid one faults the instance before its first task.
      this.validate('/input/schema', raw, '/', 'the workflow input');
      const inputFrom = transformOf(document.input, 'from');
      const input = inputFrom !== undefined ? await this.transform('/input/from', inputFrom, raw, frame, {}, '/') : raw;
      const { output } = await this.runList(document.do, '/do', input, frame);
      const outputAs = transformOf(document.output, 'as');
      const final = outputAs !== undefined ? await this.transform('/output/as', outputAs, output, frame, {}, '/') : output;
      this.validate('/output/schema', final, '/', 'the workflow output');
      // The end: a record that is no longer running afterwards is what this proposal asked for (nothing to unwind).
      const from = this.originOf(final);
      const completed: WorkflowEvent = from
        ? { type: 'workflow-completed', v: 1, output: final, outputFrom: from }
        : { type: 'workflow-completed', v: 1, output: final };
      await this.commit({ command: 'complete', events: [completed] });
    } catch (error) {
      const fault = faultOf(error);
      if (fault === undefined) throw error;
      const events: WorkflowEvent[] = [...this.stillRunning('the instance faulted'), { type: 'workflow-faulted', v: 1, error: fault }];
      await this.commit({ command: 'fault', events }).catch((again: unknown) => {
        if (!(again instanceof Halted)) throw again;
      });
    }
  }

  /**
   * The task executions still running when the instance faults: none after an error that unwound
   * through its tasks (each recorded its fault), but a log that refused those ends (its running
   * budget spent) leaves them running. Each is cancelled with the fault, as an instance's other ends
   * cancel theirs (decide.ts cancelledWithInstance): the held starts (the latest) first, then the
   * record's, none whose end is held. A task another commit ends meanwhile (its timeout) is dropped
   * as already reflected when the fault is decided.
   */
  private stillRunning(reason: string): TaskCancelled[] {
    const ended = new Set<string>();
    for (const event of this.held) if (event.type === 'task-completed') ended.add(event.at);
    const open: TaskCancelled[] = [];
    for (const event of this.held) if (event.type === 'task-started' && !ended.has(event.at)) open.push({ type: 'task-cancelled', v: 1, at: event.at, reason });
    open.reverse();
    for (const event of cancelledWithInstance(this.record, reason)) if (!ended.has(event.at)) open.push(event);
    return open;
  }

  // ── recording ──────────────────────────────────────────────────────────

  /** Commits the proposal with the facts held before it; Halted when the instance is no longer running afterwards. */
  async propose(proposal: Proposal): Promise<WorkflowRecord> {
    const record = await this.commit(proposal);
    if (record.status !== 'running') throw new Halted(`workflow instance ${record.instanceId} is ${record.status}`);
    return record;
  }

  /** Commits the proposal, carrying the facts held before it (in its `late` alternative too). */
  private commit(proposal: Proposal): Promise<WorkflowRecord> {
    const carried = this.held;
    this.held = [];
    return carried.length === 0 ? this.deps.journal.propose(proposal) : this.carrying(carried, proposal);
  }

  /** Commits what is held, if anything (before reading what only the log knows: a task's start instant). */
  async flush(): Promise<void> {
    if (this.held.length > 0) await this.propose({ command: 'steps', events: [] });
  }

  /**
   * Holds a fact for the next transition; at limits.workflowHeldFactsMax held, commits them (the log
   * budgets then count them). A task's start or a step carrying a value first recorded here that is
   * large, or that the store could not take in a transition by itself (aloneValueBytes), is committed
   * now, alone (recordAlone): a store refusing it faults the task that made it.
   */
  async hold(event: Held): Promise<void> {
    if (await this.recordedAlone(event)) return;
    this.held.push(event);
    if (this.held.length >= limits.workflowHeldFactsMax) await this.flush();
  }

  /** Whether the fact went alone (aloneValueBytes), committed now by recordAlone; false when it may go with others. */
  private async recordedAlone(event: Held): Promise<boolean> {
    const bytes = this.aloneValueBytes(event, madeValue(event));
    if (bytes === 0) return false;
    const made = event.type === 'task-started' ? { pointer: event.ref, what: `the input of task ${event.name}` } : this.stepMadeBy(event.at);
    await this.recordAlone({ command: event.type, events: [event] }, bytes, made.pointer, 'Value too large', made.what);
    return true;
  }

  /**
   * The JSON bytes of `value`, first recorded here by the fact, when the fact is committed at once,
   * alone (recordAlone), instead of held; 0 when it may be held (no value, or one surelySmall
   * clears without serializing it). A fact goes alone when its value is over
   * limits.workflowHeldOutputBytesMax, or its transition by itself would be past the store's limit
   * (deps.transitionBytesMax, which may be far below it: JetStream under a small max_payload). A
   * fact held always commits — with the rest, or alone when the rest is too large with it
   * (carrying) — so a value the store cannot take is refused with the task that made it, never
   * with whichever transition would carry it.
   */
  private aloneValueBytes(event: Held, value: JsonValue | undefined): number {
    if (value === undefined || surelySmall(event, value, this.deps.transitionBytesMax)) return 0;
    const bytes = jsonBytes(value);
    return bytes > limits.workflowHeldOutputBytesMax || aloneBytes(event, bytes) > this.deps.transitionBytesMax ? bytes : 0;
  }

  /** The task whose step `at` is (its pointer), and what the step's value is called in an error. */
  private stepMadeBy(at: string): { pointer: string; what: string } {
    return { pointer: taskPointerOf(at, this.record) ?? '/', what: `the value of step ${at}` };
  }

  /**
   * Commits a fact whose value was first recorded here and is large (over
   * limits.workflowHeldOutputBytesMax): what is held first, then the fact alone — not with what
   * another branch holds meanwhile — so that a store refusing it as past its transition size faults
   * the task that made the value, at its pointer (a runtime error, 500, catchable around it), and
   * not whichever later transition would have carried it, at `/`, with the task left running.
   */
  private async recordAlone(proposal: Proposal, bytes: number, pointer: string, title: string, what: string): Promise<void> {
    await this.flush();
    let record: WorkflowRecord;
    try {
      record = await this.deps.journal.propose(proposal);
    } catch (error) {
      if (!(error instanceof AdapterError) || error.kind !== 'invalid-input') throw error;
      throw raise('runtime', 500, title, pointer, `${what} is ${bytes} bytes of JSON, more than the log records in one transition (${error.message})`);
    }
    if (record.status !== 'running') throw new Halted(`workflow instance ${record.instanceId} is ${record.status}`);
  }

  private async carrying(carried: Held[], proposal: Proposal): Promise<WorkflowRecord> {
    const late = proposal.late && { ...proposal.late, events: [...carried, ...proposal.late.events] };
    try {
      return await this.deps.journal.propose({ ...proposal, events: [...carried, ...proposal.events], late });
    } catch (error) {
      // Together too large for one transition (or one of them refused), or past the log's running
      // budget together: each as it would be alone, as far as the budget goes.
      const refused = error instanceof WorkflowRaise && error.error.title === logBudgetExhausted;
      if (!refused && (!(error instanceof AdapterError) || error.kind !== 'invalid-input')) throw error;
      for (const event of carried) await this.deps.journal.propose({ command: event.type, events: [event] });
      return proposal.events.length === 0 ? this.record : this.deps.journal.propose(proposal);
    }
  }

  /** A step's result held for the next transition, if any. */
  private heldStep(at: string): StepResult | undefined {
    for (const event of this.held) if ((event.type === 'expression-evaluated' || event.type === 'call-answered') && event.at === at) return event.result;
    return undefined;
  }

  alive(frame: Frame): void {
    if (frame.signal.aborted) throw new Halted('the branch was stopped');
    if (this.record.status !== 'running') throw new Halted(`workflow instance is ${this.record.status}`);
  }

  /**
   * A step's value: recorded already, or computed now and recorded before anything outside
   * depends on it. A call is recorded as started (under the lease's epoch) before it is made,
   * carrying the facts held so far: a call found started without an answer may have happened,
   * and is made again only when `rerun` says that is safe (a contract call under its recorded
   * key, an emitted event under its id, an idempotent HTTP request); otherwise its answer is an
   * `uncertain` communication error. An expression's result, and the answer of a call that may
   * be made again, are held for the next transition; the answer of one that may not is
   * recorded at once. `levels` are those the step's value adds above the values it holds, each
   * held to limits.jsonDepthMax on its own (logged).
   */
  async step(at: string, frame: Frame, kind: 'expression' | 'call', compute: () => Promise<JsonValue>, rerun = true, levels = 0): Promise<JsonValue> {
    const recorded = this.record.steps[at] ?? this.heldStep(at);
    if (recorded) return this.replayedAt(at, recorded);
    this.alive(frame);
    let result: StepResult;
    if (kind === 'call' && !rerun && this.record.calls[at]) result = { error: uncertainCall(at, this.record) };
    else {
      const epoch = this.record.lease?.epoch ?? 0;
      // Started already under this epoch (a contract call's start goes with its binding): nothing to propose.
      if (kind === 'call' && this.record.calls[at]?.epoch !== epoch)
        await this.propose({ command: 'call-started', events: [{ type: 'call-started', v: 1, at, epoch }] });
      try {
        result = { ok: this.logged(at, kind, await compute(), levels) };
      } catch (error) {
        if (!(error instanceof WorkflowRaise)) throw error;
        result = { error: error.error };
      }
    }
    const type = kind === 'call' ? 'call-answered' : 'expression-evaluated';
    const answered: Held = { type, v: 1, at, result };
    if (kind === 'expression' || rerun) {
      await this.hold(answered);
      return this.replayedAt(at, result);
    }
    if (!(await this.recordedAlone(answered))) await this.propose({ command: type, events: [answered] });
    const stored = this.record.steps[at];
    if (!stored) throw new Halted(`step ${at} was not recorded`);
    return this.replayedAt(at, stored);
  }

  /**
   * A computed step value as the log will hold it (asLogged), so the live run and every replay or
   * resumption of it see one value: a -0 is kept as the 0 the log reads back, and a number JSON
   * cannot write (a service answering `1e400`, read as Infinity), or a value nested deeper than
   * limits.jsonDepthMax (a jq result), is the step's error, recorded as its answer, where a `try`
   * can catch it. A value the step holds `levels` below its root (each expression's result in a
   * call's `with`) is held to limits.jsonDepthMax on its own: the levels the record adds are not
   * counted against it.
   */
  private logged(at: string, kind: 'expression' | 'call', value: JsonValue, levels: number): JsonValue {
    try {
      return asLogged(value, kind === 'call' ? `the answer of ${at}` : `the result of ${at}`, levels);
    } catch (error) {
      if (!isAdapterError(error) || error.kind !== 'invalid-input') throw error;
      const instance = taskPointerOf(at, this.record);
      throw new WorkflowRaise({
        type: kind === 'call' ? errorTypes.communication : errorTypes.expression,
        status: kind === 'call' ? 502 : 400,
        title: 'Value not recordable',
        detail: error.description ?? error.message,
        ...(instance === undefined ? {} : { instance }),
      });
    }
  }

  /**
   * A list of other outputs the task answers as its own (run.ts Interpreting.heldOutput): each is
   * held to limits.jsonDepthMax + outputLevels on its own, and the list adds a level above them, so
   * a fork of forks around a contract call's answer, or a listen iterating into one, could nest
   * past what a reader of the instance's output reads. A completion in a log written before keeps
   * its output as recorded: the run that resumes it walks the same path.
   */
  heldOutput(run: TaskRun, output: JsonValue[]): JsonValue[] {
    if (this.record.tasks[run.at]?.state === 'completed') return output;
    const depthMax = limits.jsonDepthMax + outputLevels;
    if (nestingProblem(output, 'output', depthMax) === undefined) return output;
    throw raise(
      'runtime',
      500,
      'Value not recordable',
      run.entry.pointer,
      `the output of task ${run.entry.name} nests deeper than ${depthMax} levels, the most an instance's output is read back with (a value of ${limits.jsonDepthMax} held ${outputLevels} levels down, as a contract call's answer holds a peer's result)`,
    );
  }

  /** A step's value (its error raised again), noted as recorded by that step. */
  private replayedAt(at: string, result: StepResult): JsonValue {
    if ('ok' in result) this.noteOrigin(result.ok, { step: at });
    return replayed(result);
  }

  /** Notes where an object value was recorded first (a later place does not replace it). */
  noteOrigin(value: JsonValue, from: ValueRef): void {
    if (typeof value === 'object' && value !== null && !this.origins.has(value)) this.origins.set(value, from);
  }

  private originOf(value: JsonValue): ValueRef | undefined {
    return typeof value === 'object' && value !== null ? this.origins.get(value) : undefined;
  }

  /**
   * The variables every expression sees: $context, $workflow, $runtime, $task (the frame's task, in
   * its definition; `extra` gives it where the task's transforms and `if` are evaluated), the
   * frame's own and `extra`.
   */
  vars(frame: Frame, extra: Readonly<Record<string, JsonValue>>): Record<string, JsonValue> {
    const task = frame.task === undefined || 'task' in extra ? undefined : this.taskDescriptor(frame.task.entry, frame.task.at, frame.task.rawInput);
    return { context: this.context, ...this.constants(), ...(task === undefined ? {} : { task }), ...frame.vars, ...extra };
  }

  /**
   * $workflow and $runtime: the same for the whole run (the start and the runtime do not change),
   * kept once the start has committed (before, its instant is not the store's: jq settles it
   * first for a program that can read $workflow).
   */
  private constants(): { workflow: JsonValue; runtime: JsonValue } {
    if (this.fixedVars) return this.fixedVars;
    const started = this.record.started;
    const workflow = { id: started.instanceId, definition: started.document, input: started.input, startedAt: dateTime(this.record.startedAtMs) };
    const constants = { workflow, runtime: { ...this.deps.runtime, metadata: {} } };
    if (!this.deps.journal.pending()) this.fixedVars = constants;
    return constants;
  }

  /**
   * A call's arguments: its `with` with the enclosed expressions evaluated, recorded under `at` as
   * the expressions' results alone (log format 2: the rest is the document's, which the start
   * holds) — or, in a log written before, the whole value as it was recorded. Each result is held
   * to limits.jsonDepthMax on its own, one level below the array that records them: a `with.input`
   * one expression builds 64 levels deep is a contract's input, as admission takes it.
   */
  async evaluateArgs(
    at: string,
    value: JsonValue,
    input: JsonValue,
    frame: Frame,
    extra: Readonly<Record<string, JsonValue>>,
    ref: string,
  ): Promise<JsonValue> {
    if (this.record.started.format !== 2) return this.evaluateValue(at, value, input, frame, extra, ref);
    if (!hasExpression(value)) return value;
    const results = await this.step(
      at,
      frame,
      'expression',
      () => {
        let vars: Record<string, JsonValue> | undefined;
        return expressionResults(value, (program) => this.jq(program, input, () => (vars ??= this.vars(frame, extra)), ref));
      },
      true,
      expressionResultsLevels,
    );
    const args = Array.isArray(results) ? withResults(value, results) : undefined;
    if (args === undefined)
      throw new AssertionFailure(`workflow ${this.record.instanceId}: step ${at} does not hold one result per expression of its arguments`);
    return args;
  }

  /**
   * A transform's result (input.from, output.as, export.as), recorded under `at`: the DSL writes one
   * as a `string`, an expression (with or without `${ }`), or an `object`, whose enclosed
   * expressions are evaluated (dsl-reference Input, Output, Export).
   */
  transform(at: string, transform: JsonValue, input: JsonValue, frame: Frame, extra: Readonly<Record<string, JsonValue>>, ref: string): Promise<JsonValue> {
    return typeof transform === 'string' ? this.evaluate(at, transform, input, frame, extra, ref) : this.evaluateValue(at, transform, input, frame, extra, ref);
  }

  /** An expression field's value (with or without `${ }`), recorded under `at`. */
  evaluate(at: string, expression: string, input: JsonValue, frame: Frame, extra: Readonly<Record<string, JsonValue>>, ref: string): Promise<JsonValue> {
    return this.step(at, frame, 'expression', () => this.jq(programOf(expression), input, () => this.vars(frame, extra), ref));
  }

  /** A value with its enclosed expressions evaluated, recorded under `at` as one step (a constant is no step). */
  evaluateValue(at: string, value: JsonValue, input: JsonValue, frame: Frame, extra: Readonly<Record<string, JsonValue>>, ref: string): Promise<JsonValue> {
    if (!hasExpression(value)) return Promise.resolve(value);
    return this.step(at, frame, 'expression', () => {
      let vars: Record<string, JsonValue> | undefined;
      return evaluateValue(value, (program) => this.jq(program, input, () => (vars ??= this.vars(frame, extra)), ref));
    });
  }

  evaluateSecret(expression: string, input: JsonValue, frame: Frame, extra: Readonly<Record<string, JsonValue>>, ref: string): Promise<JsonValue> {
    const secrets: Record<string, JsonValue> = {};
    for (const name of secretNames(expression)) setMember(secrets, name, this.secret(name, ref));
    return this.jq(programOf(expression), input, () => this.vars(frame, { ...extra, secrets }), ref).catch((error: unknown) => {
      if (!(error instanceof WorkflowRaise)) throw error;
      throw raise(
        'expression',
        400,
        'Expression evaluation failed',
        ref,
        'an expression reading $secrets failed (its message is not kept: it could hold a secret)',
      );
    });
  }

  secret(name: string, ref: string): JsonValue {
    const document = this.record.started.document;
    const use = isObject(document) && isObject(document.use) ? document.use : {};
    const declared = Array.isArray(use.secrets) && use.secrets.includes(name);
    const value = this.deps.secrets.get(name);
    if (!declared || value === undefined)
      throw raise(
        'authorization',
        403,
        'Secret not available',
        ref,
        `the secret "${name}" is ${declared ? 'not provided by this deployment' : 'not declared in use.secrets'}`,
      );
    return value;
  }

  /**
   * One jq program's first output. A plain path of identifiers from the input or a variable (or
   * `null`, `true`, `false`) is answered in-process, exactly as jq answers it (pathValue); the
   * variables are built only when the program names one or goes to jq.
   */
  private async jq(program: string, input: JsonValue, vars: () => Record<string, JsonValue>, ref: string): Promise<JsonValue> {
    // $workflow.startedAt is the start's commit instant: a program that can read it runs once the start has committed.
    if (readsWorkflow(program) && this.deps.journal.pending()) await this.deps.journal.settle();
    let built: Record<string, JsonValue> | undefined;
    const bound = () => (built ??= vars());
    const direct = pathValue(program, input, bound);
    if (direct !== undefined) return direct;
    try {
      // Queued under the instance's principal: the evaluator shares its workers between principals (jq.ts).
      return await this.deps.evaluator.evaluate(program, input, bound(), this.record.started.principalId);
    } catch (error) {
      if (error instanceof ExpressionFailure) throw raise('expression', 400, 'Expression evaluation failed', ref, error.message);
      throw error;
    }
  }

  // ── data schemas ──────────────────────────────────────────────────────

  private schemas: DocumentSchemas | undefined;

  /**
   * Validates a value against the document's data schema at `pointer` (if it declares one there):
   * a value that fails it raises the DSL's validation error (400) at `instance`. The schemas were
   * compiled when the document was checked; validation is a function of the value and the
   * schema, so a replay reaches the same verdict without recording it.
   */
  validate(pointer: string, value: JsonValue, instance: string, what: string): void {
    if (this.schemas === undefined) {
      try {
        this.schemas = documentSchemas(this.record.started.document);
      } catch (error) {
        if (!(error instanceof AdapterError)) throw error;
        throw raise('configuration', 400, 'Invalid data schema', instance, error.message);
      }
    }
    const problem = this.schemas.problem(pointer, value);
    if (problem !== undefined)
      throw raise('validation', 400, 'Schema validation failed', instance, `${what} does not match the schema at ${pointer}: ${problem}`);
  }

  // ── task lists and tasks ───────────────────────────────────────────────

  /** Runs a task list with its flow directives; `ended` when a task said `end`. */
  async runList(list: JsonValue | undefined, base: string, input: JsonValue, frame: Frame): Promise<{ output: JsonValue; ended: boolean }> {
    const entries = entriesOf(list, base);
    const visits = new Map<number, number>();
    let data = input;
    let index = 0;
    while (index < entries.length) {
      const entry = entries[index] as TaskEntry;
      const visit = visits.get(index) ?? 0;
      visits.set(index, visit + 1);
      const outcome = await this.runTask(entry, data, frame, visit);
      data = outcome.output;
      if (outcome.ended) return { output: data, ended: true };
      const directive = outcome.then ?? 'continue';
      if (directive === 'continue') index++;
      else if (directive === 'exit') return { output: data, ended: false };
      else if (directive === 'end') return { output: data, ended: true };
      else {
        index = entries.findIndex((candidate) => candidate.name === directive);
        if (index < 0) throw raise('configuration', 400, 'Unknown flow directive', entry.pointer, `then: ${directive} names no task of this list`);
      }
    }
    return { output: data, ended: false };
  }

  async runTask(entry: TaskEntry, rawInput: JsonValue, outer: Frame, visit = 0): Promise<Outcome> {
    this.alive(outer);
    // The execution's key, and the frame its body runs in (keys.ts).
    const { at, frame } = taskKey(schemeOf(this.record.started), entry.pointer, outer, visit);
    this.spend(entry.pointer);
    const task = entry.task;
    const kind = kindOf(task) as TaskKind;
    if (typeof task.if === 'string') {
      const go = await this.evaluate(`${at}>if`, task.if, rawInput, frame, { task: this.taskDescriptor(entry, at, rawInput) }, entry.pointer);
      if (go === false || go === null) return { output: rawInput, then: undefined, ended: false };
    }
    const existing = this.record.tasks[at];
    if (existing?.state === 'cancelled') throw new Halted(`task ${at} was cancelled`);
    if (existing?.state === 'faulted' && existing.error) {
      // Faulted while a child it awaited ran on (its timeout fired): a worker that stopped before releasing it releases it now.
      await this.releaseChildren(entry.pointer, at);
      throw new WorkflowRaise(existing.error);
    }
    if (existing?.state === 'completed' && leafKinds.has(kind) && !this.exports(task)) {
      this.noteOrigin(existing.output, { task: at });
      return { output: existing.output, then: typeof task.then === 'string' ? task.then : undefined, ended: false };
    }
    const from = this.originOf(rawInput);
    await this.hold(
      from
        ? { type: 'task-started', v: 1, at, ref: entry.pointer, name: entry.name, input: rawInput, inputFrom: from }
        : { type: 'task-started', v: 1, at, ref: entry.pointer, name: entry.name, input: rawInput },
    );
    try {
      const outcome = await this.withTimeout(entry, at, frame, (inner) => this.body(entry, at, rawInput, inner));
      await this.complete(entry, at, outcome.output);
      return outcome;
    } catch (error) {
      if (error instanceof WorkflowRaise) await this.fault(at, error.error);
      throw error;
    }
  }

  spend(pointer: string): void {
    if (++this.tasksRun > this.deps.tasksMax)
      throw raise('runtime', 500, 'Task budget exhausted', pointer, `an instance runs at most ${this.deps.tasksMax} tasks`);
  }

  private exports(task: JsonObject): boolean {
    return transformOf(task.export, 'as') !== undefined;
  }

  /** `$task` (the DSL's task descriptor); its raw output once there is one (output.as, export.as). */
  private taskDescriptor(entry: TaskEntry, at: string, rawInput: JsonValue, rawOutput?: JsonValue): JsonValue {
    const started = this.record.tasks[at];
    return {
      name: entry.name,
      reference: entry.pointer,
      definition: entry.task,
      input: rawInput,
      ...(rawOutput === undefined ? {} : { output: rawOutput }),
      ...(started ? { startedAt: dateTime(started.startedAtMs) } : {}),
    };
  }

  /** input.from, the kind's work, output.as, export.as (the DSL's data flow). */
  private async body(entry: TaskEntry, at: string, rawInput: JsonValue, frame: Frame): Promise<Outcome> {
    const task = entry.task;
    const from = transformOf(task.input, 'from');
    const as = transformOf(task.output, 'as');
    const exported = transformOf(task.export, 'as');
    // The raw input is validated before it is transformed (DSL data flow: validate, then input.from).
    this.validate(`${entry.pointer}/input/schema`, rawInput, entry.pointer, `the input of task ${entry.name}`);
    const transforms = from !== undefined || as !== undefined || exported !== undefined;
    // $task.startedAt is the instant the store committed the task's start: commit it first where an expression may read it.
    if (transforms || readsTaskArgument(task)) await this.flush();
    const taskVar: Record<string, JsonValue> = transforms ? { task: this.taskDescriptor(entry, at, rawInput) } : {};
    const input = from !== undefined ? await this.transform(`${at}>input.from`, from, rawInput, frame, taskVar, entry.pointer) : rawInput;
    const result = await runKind(this, { entry, at, input, frame: { ...frame, task: { entry, at, rawInput } } });
    const outputVar: Record<string, JsonValue> =
      as !== undefined || exported !== undefined ? { task: this.taskDescriptor(entry, at, rawInput, result.output) } : {};
    const output = as !== undefined ? await this.transform(`${at}>output.as`, as, result.output, frame, { ...outputVar, input }, entry.pointer) : result.output;
    this.validate(`${entry.pointer}/output/schema`, output, entry.pointer, `the output of task ${entry.name}`);
    if (exported !== undefined) {
      const context = await this.transform(`${at}>export.as`, exported, output, frame, { ...outputVar, input, output }, entry.pointer);
      this.validate(`${entry.pointer}/export/schema`, context, entry.pointer, `the context exported by task ${entry.name}`);
      this.context = context;
    }
    return { output, then: result.then ?? (typeof task.then === 'string' ? task.then : undefined), ended: result.ended };
  }

  /**
   * Records the completion: without a timeout it is held for the next transition; under one it
   * commits before the timeout, and a completion too late becomes the timeout's fault — except a
   * listen's whose wait the events it took ended before the timeout (listenWaitEnded): those events
   * were answered to their publishers as taken, and the timeout no longer faults it.
   */
  private async complete(entry: TaskEntry, at: string, output: JsonValue): Promise<void> {
    const timer = this.record.timers[taskTimeoutKey(at)];
    const from = this.originOf(output);
    const completed: TaskCompleted = from ? { type: 'task-completed', v: 1, at, output, outputFrom: from } : { type: 'task-completed', v: 1, at, output };
    this.noteOrigin(output, { task: at });
    // An output first recorded here that goes alone (aloneValueBytes): committed now, alone (recordAlone), so that a store refusing it faults this task.
    const bytes = this.aloneValueBytes(completed, from === undefined ? output : undefined);
    const alone = bytes > 0;
    if (!timer && !alone) return this.hold(completed);
    const late: Proposal | undefined =
      timer && !listenWaitEnded(this.record, at)
        ? {
            command: 'task-timed-out',
            events: [
              { type: 'timer-fired', v: 1, at: taskTimeoutKey(at) },
              { type: 'task-faulted', v: 1, at, error: timeoutError(entry.pointer, `task ${entry.name}`) },
            ],
            notBeforeMs: timer.dueAtMs,
          }
        : undefined;
    const proposal: Proposal = { command: 'task-completed', events: [completed], ...(late ? { notAfterMs: timer?.dueAtMs, late } : {}) };
    if (alone) await this.recordAlone(proposal, bytes, entry.pointer, 'Output too large', `the output of task ${entry.name}`);
    else await this.propose(proposal);
    this.ended(at);
  }

  private async fault(at: string, error: WorkflowError): Promise<void> {
    // A start refused with the transition carrying it (past the log's budget) was never recorded: the error goes up alone.
    if (!this.record.tasks[at] && !this.held.some((event) => event.type === 'task-started' && event.at === at)) return;
    await this.propose({ command: 'task-faulted', events: [{ type: 'task-faulted', v: 1, at, error }] });
    this.ended(at);
  }

  /** What the record says of a task that should have ended: its recorded fault wins over what this run saw. */
  private ended(at: string): void {
    const task = this.record.tasks[at];
    if (task?.state === 'faulted' && task.error) throw new WorkflowRaise(task.error);
    if (task?.state === 'cancelled') throw new Halted(`task ${at} was cancelled`);
  }

  /**
   * The awaited child instances still open inside the ended task execution (its task's pointer,
   * its key) cancelled, and what became of each recorded (subworkflows.ts).
   */
  private async releaseChildren(pointer: string, at: string): Promise<void> {
    if (Object.keys(this.record.subworkflows).length === 0) return;
    const endedSeq = this.record.tasks[at]?.endedSeq ?? null;
    const disposed = await releaseSubworkflows(this, at, [{ pointer, at, endedSeq }]);
    if (disposed.length > 0) await this.propose({ command: 'subworkflows-released', events: disposed });
  }

  /**
   * The task executions started inside the timed-out execution `at` whose starts were still held
   * when its timeout's fault committed (decide.ts cancelledInside cancels those the record held):
   * committed with their cancels, so that none is recorded running after the task that held them
   * ended.
   */
  private async cancelHeldInside(pointer: string, at: string): Promise<void> {
    const timed = this.record.tasks[at];
    if (timed === undefined) return;
    const scheme = schemeOf(this.record.started);
    const ended = new Set<string>();
    for (const event of this.held) if (event.type === 'task-completed') ended.add(event.at);
    const open: TaskCancelled[] = [];
    for (const event of this.held)
      if (event.type === 'task-started' && !ended.has(event.at) && ranInside(scheme, { pointer, at }, event.ref, event.at))
        open.push({ type: 'task-cancelled', v: 1, at: event.at, reason: timedOutReason(timed.name, at) });
    if (open.length > 0) await this.propose({ command: 'task-timed-out-inside', events: open.reverse() });
  }

  /** Runs `work` against the task's timeout, if it has one. */
  private withTimeout(entry: TaskEntry, at: string, frame: Frame, work: (frame: Frame) => Promise<Outcome>): Promise<Outcome> {
    const afterMs = timeoutMsOf(this.record.started.document, entry.task.timeout);
    return afterMs === undefined ? work(frame) : this.timed(entry.pointer, at, afterMs, frame, work);
  }

  /** Runs `work` against a timer recorded at the task's start instant + afterMs. */
  private async timed(pointer: string, at: string, afterMs: number, frame: Frame, work: (frame: Frame) => Promise<Outcome>): Promise<Outcome> {
    // The timeout counts from the committed start.
    await this.flush();
    const started = this.record.tasks[at];
    if (!started) return work(frame);
    const key = taskTimeoutKey(at);
    const dueAtMs = started.startedAtMs + afterMs;
    // A timeout past what a timer records is the DSL's error (as a wait's is), not an invalid transition.
    if (!Number.isSafeInteger(dueAtMs))
      throw raise('validation', 400, 'Invalid timeout', pointer, "the task's timeout ends past the latest instant a timer records");
    await this.propose({ command: 'timer-set', events: [{ type: 'timer-set', v: 1, at: key, dueAtMs, purpose: 'task-timeout' }] });
    const controller = new AbortController();
    const stop = () => controller.abort();
    frame.signal.addEventListener('abort', stop);
    const timedOut = this.deps.journal
      .until((record) => record.tasks[at]?.state !== 'running', controller.signal)
      .then(
        () => 'ended' as const,
        () => 'stopped' as const,
      );
    try {
      const working = work({ ...frame, signal: controller.signal }).then((outcome) => ({ outcome }));
      const first = await Promise.race([working, timedOut]);
      if (first !== 'ended' && first !== 'stopped') return first.outcome;
      if (first === 'ended' && this.record.tasks[at]?.state === 'faulted') {
        // Timed out: its work stops (a child being started is started or not before it is released), and the children it awaited are released.
        controller.abort(taskEnded);
        await working.catch(() => undefined);
        await this.cancelHeldInside(pointer, at);
        await this.releaseChildren(pointer, at);
      }
      this.ended(at);
      throw new Halted(`task ${at} ended elsewhere`);
    } finally {
      controller.abort(taskEnded);
      frame.signal.removeEventListener('abort', stop);
    }
  }
}

/** Whether a jq program can read $workflow: by its name, or through $ARGS (every variable is bound as a named argument). */
const readsWorkflow = (program: string): boolean => program.includes('$workflow') || program.includes('$ARGS');

/** Whether any string of a task's definition (its nested tasks' too) could name $task, by its name or through $ARGS; kept per definition. */
const readsTask = new WeakMap<object, boolean>();

function readsTaskArgument(definition: JsonObject): boolean {
  let reads = readsTask.get(definition);
  if (reads === undefined) {
    reads = false;
    for (const text of stringsOf(definition))
      if (text.includes('$task') || text.includes('$ARGS')) {
        reads = true;
        break;
      }
    readsTask.set(definition, reads);
  }
  return reads;
}

/** Why a task's timeout watch stops once the task's work is over (an abort reason made once: none is built per task). */
const taskEnded = new Halted('the task ended');

/** What ends an instance as faulted: a DSL error, or a transition the store refuses as invalid (too large). */
function faultOf(error: unknown): WorkflowError | undefined {
  if (error instanceof WorkflowRaise) return error.error;
  if (error instanceof AdapterError && error.kind === 'invalid-input')
    return {
      type: 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime',
      status: 500,
      title: 'Runtime error',
      detail: cutText(error.message, 4000),
      instance: '/',
    };
  return undefined;
}

/**
 * The error of a call recorded as started, never answered, and not safe to make again: a worker
 * stopped before its answer was recorded, so it may or may not have happened. Its `instance` is the pointer of the task whose step `at` is: its recorded `ref` (the step key's
 * task execution is the key before its phase, `>call`, `>run`…), or else the pointer the key
 * names, read with the document (keys.ts pointerOfKey: a task name may hold `~`, `(`, `[`, `{`,
 * `/`, even `>`); none when the key names no task of the document.
 */
export function uncertainCall(at: string, record: WorkflowRecord): WorkflowError {
  const instance = taskPointerOf(at, record);
  return {
    type: 'https://serverlessworkflow.io/spec/1.0.0/errors/communication',
    status: 503,
    title: 'Call outcome unknown',
    detail: `the call ${at} was started by a worker that stopped before its answer was recorded; it is not idempotent (no Idempotency-Key, method not idempotent), so it is not made again`,
    ...(instance === undefined ? {} : { instance }),
  };
}

/** The pointer of the task whose step `at` is (see uncertainCall); undefined when the key names no task of the document. */
function taskPointerOf(at: string, record: WorkflowRecord): string | undefined {
  const execution = at.slice(0, Math.max(0, at.lastIndexOf('>'))) || at;
  return record.tasks[execution]?.ref ?? pointerOfKey(schemeOf(record.started), record.started.document, at);
}

const jsonBytes = (value: JsonValue): number => Buffer.byteLength(JSON.stringify(value));

/**
 * The value a held fact records first: a task's input given as a value (not named by where it was
 * recorded), a step's result; undefined for a completion (complete measures its own).
 */
function madeValue(event: Held): JsonValue | undefined {
  switch (event.type) {
    case 'task-started':
      return event.inputFrom === undefined ? event.input : undefined;
    case 'expression-evaluated':
    case 'call-answered':
      return event.result as JsonValue;
    default:
      return undefined;
  }
}

/** Where each held fact carries the value it records first. */
const valueField = { 'task-started': 'input', 'task-completed': 'output', 'expression-evaluated': 'result', 'call-answered': 'result' } as const;

/** The widest time guard a transition records (its bounds take the most digits). */
const widestGuard = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };

/**
 * Whether a fact carrying `value`, first recorded here, certainly does not go alone
 * (Interpreter.aloneValueBytes 0), by bounds alone, without serializing it: the value within
 * limits.workflowHeldOutputBytesMax by jsonBytesBound, and the fact's transition alone within the
 * store's `transitionBytesMax` by the bound of the whole fact and the widest envelope. Most values
 * are small: only one near a limit is measured exactly (jsonBytes, aloneBytes).
 */
export function surelySmall(event: Held, value: JsonValue, transitionBytesMax: number): boolean {
  const valueBound = jsonBytesBound(value, limits.workflowHeldOutputBytesMax);
  if (valueBound > limits.workflowHeldOutputBytesMax) return false;
  const room = transitionBytesMax - valueBound - envelopes[event.type];
  return room >= 0 && jsonBytesBound(event as unknown as JsonValue, room, valueField[event.type]) <= room;
}

/** The JSON bytes of the transition recording `event` (or null) alone, with the widest time guard and the fact's type as its command. */
const aloneJsonBytes = (event: object | null, command: Held['type']): number =>
  Buffer.byteLength(JSON.stringify({ events: [event], timeGuard: widestGuard, causation: { command } }));

/** The bytes a transition recording one fact alone adds around the fact: what surelySmall adds to the fact's own bound. */
const envelopes: Readonly<Record<Held['type'], number>> = {
  'task-started': aloneJsonBytes(null, 'task-started') - 'null'.length,
  'task-completed': aloneJsonBytes(null, 'task-completed') - 'null'.length,
  'expression-evaluated': aloneJsonBytes(null, 'expression-evaluated') - 'null'.length,
  'call-answered': aloneJsonBytes(null, 'call-answered') - 'null'.length,
};

/**
 * The bytes of the transition recording `event` alone, whose value is `valueBytes` of JSON: the
 * event's other fields (its key, a task's pointer and name) and the transition's own (the widest
 * time guard, the event's type as its command) measured around a null, the value's bytes added.
 */
export function aloneBytes(event: Held, valueBytes: number): number {
  return aloneJsonBytes({ ...event, [valueField[event.type]]: null }, event.type) - 'null'.length + valueBytes;
}

export function dateTime(ms: number): JsonValue {
  return { iso8601: new Date(ms).toISOString(), epoch: { seconds: Math.floor(ms / 1000), milliseconds: ms } };
}
