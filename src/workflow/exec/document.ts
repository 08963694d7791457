/**
 * What the executor reads of a Serverless Workflow document, and the check that runs before
 * anything does: every task is of a type this executor runs, every function call resolves, every
 * expression is deterministic jq. Anything else is refused with `unsupported` (or `invalid-input`)
 * naming the task and its JSON Pointer — an instance never starts to fail half-way for it.
 */
import { invalidInput, unsupported } from '../../contract/errors.js';
import { isObject, ownMember, type JsonObject, type JsonValue } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';
import { documentSchemas } from '../schemas.js';
import { checkAuthenticationPolicy, checkCallAuthentication } from '../authentication.js';
import { authenticationPlaces, checkSecretUses, valueAt } from '../secrets.js';
import { checkFlowDirective, namesWorkflow, refusedCallTypes, type WorkflowRef } from '../refs.js';
import { workflowDslVersion } from '../version.js';
import { durationForm, durationMs } from './duration.js';
import { checkDeterministicJq } from '../jq-determinism.js';
import { escapePointer, forEachExpression, isExpression, pointerOf, programOf } from './expressions.js';

export type TaskKind = 'call' | 'do' | 'fork' | 'for' | 'raise' | 'set' | 'switch' | 'try' | 'wait' | 'emit' | 'listen' | 'run';

/** One entry of a task list: its name, definition and JSON Pointer. */
export interface TaskEntry {
  name: string;
  task: JsonObject;
  pointer: string;
}

export { isObject };

/**
 * A reusable component: `value` itself, or — when it is a string — the component of that name in
 * the document's `use.<kind>` (undefined when there is none).
 */
export function resolveNamed(document: JsonValue, kind: 'errors' | 'retries' | 'timeouts', value: JsonValue | undefined): JsonValue | undefined {
  if (typeof value !== 'string') return value;
  const components = isObject(document) && isObject(document.use) ? document.use[kind] : undefined;
  return isObject(components) ? ownMember(components, value) : undefined;
}

/** A timeout definition (`{after}` or the name of one in use.timeouts) in milliseconds; undefined when none or not a timeout. */
export function timeoutMsOf(document: JsonValue, value: JsonValue | undefined): number | undefined {
  const timeout = resolveNamed(document, 'timeouts', value);
  return isObject(timeout) ? durationMs(timeout.after) : undefined;
}

/**
 * The workflow's timeout in milliseconds (undefined without one), refused (invalid-input) when it
 * is not a timeout, or — naming its duration's pointer — when it ends past the latest instant a
 * timer records (2^53 − 1 ms) counted from `nowMs`: such a deadline is no instant, and an
 * instance holding one is refused by the instances index (so unlisted and uncounted by the
 * running bound).
 */
export function workflowTimeoutMs(document: JsonValue, nowMs: number): number | undefined {
  const declared = isObject(document) ? document.timeout : undefined;
  if (declared === undefined) return undefined;
  const timeoutMs = timeoutMsOf(document, declared);
  if (timeoutMs === undefined) throw invalidInput('/timeout: not a timeout ({after: duration} or a name in use.timeouts)');
  if (Number.isSafeInteger(nowMs + timeoutMs)) return timeoutMs;
  const pointer = typeof declared === 'string' ? `/use/timeouts/${escapePointer(declared)}/after` : '/timeout/after';
  throw invalidInput(`${pointer}: the workflow's timeout (${timeoutMs} ms) ends past the latest instant a timer records (2^53 − 1 ms since 1970)`);
}

/** A transform (`input.from`, `output.as`, `export.as`) as the DSL writes one, a string or an object; undefined when there is none. */
export function transformOf(holder: JsonValue | undefined, key: 'from' | 'as'): JsonValue | undefined {
  const transform = isObject(holder) ? holder[key] : undefined;
  return typeof transform === 'string' || isObject(transform) ? transform : undefined;
}

/** The kind of a task definition (`for` before `do`: a for task has both). */
export function kindOf(task: JsonObject): TaskKind | undefined {
  const kinds: TaskKind[] = ['for', 'call', 'fork', 'raise', 'set', 'switch', 'try', 'wait', 'emit', 'listen', 'run', 'do'];
  return kinds.find((kind) => Object.hasOwn(task, kind));
}

/** A task list (`[{name: task}, …]`) with each entry's pointer under `base` (`/do`, `/fork/branches`…). */
export function entriesOf(list: JsonValue | undefined, base: string): TaskEntry[] {
  if (!Array.isArray(list)) throw invalidInput(`${base} must be a list of tasks`);
  return list.map((item, index) => {
    const keys = isObject(item) ? Object.keys(item) : [];
    const name = keys[0];
    const task = name === undefined || !isObject(item) ? undefined : item[name];
    if (keys.length !== 1 || name === undefined || !isObject(task)) throw invalidInput(`${base}/${index} must be an object with exactly one task name`);
    return { name, task, pointer: `${base}/${index}/${escapePointer(name)}` };
  });
}

/** What a `run: workflow` task names: the workflow (`version` absent or `latest`: whichever version the bundle pins). */
/** A `run: workflow` reference (refs.ts). */
export type SubworkflowRef = WorkflowRef;

/** Whether a `run: workflow` reference names a workflow the instance can run (the bundle's, or the document itself). */
export type ResolvesWorkflow = (ref: SubworkflowRef) => boolean;

/** The workflow a `run` task names, or undefined when its `run` is not a well-formed `workflow`. */
export function subworkflowRefOf(task: JsonObject): SubworkflowRef | undefined {
  const run = isObject(task.run) ? task.run : undefined;
  const workflow = run && isObject(run.workflow) ? run.workflow : undefined;
  if (!workflow || typeof workflow.namespace !== 'string' || typeof workflow.name !== 'string') return undefined;
  if (workflow.version !== undefined && typeof workflow.version !== 'string') return undefined;
  return { namespace: workflow.namespace, name: workflow.name, version: workflow.version === 'latest' ? undefined : workflow.version };
}

/** Whether a document is the workflow a reference names (its header's namespace, name and, unless `latest`, version). */
export function isWorkflowNamed(document: JsonValue, ref: SubworkflowRef): boolean {
  return namesWorkflow(document, ref);
}

const contractFunction = 'invoke-contract';
const expressionFields = ['if'];

/** Documents already checked against themselves alone, with their workflow's name: kept per document object, as its compiled schemas are (schemas.ts). */
const checked = new WeakMap<object, string>();

/**
 * Refuses (throws) a document this executor cannot run; answers the workflow's name. `resolves`
 * says which `run: workflow` references resolve (by default: the document itself only). Checked
 * against itself alone, a document object passes the check once: starting the same (unchanged:
 * documents are never modified once handed over) document again answers from a WeakMap. With
 * `resolves`, the caller keeps what it checked (the executor: per bundle digest).
 */
export function checkDocument(document: JsonValue, resolves?: ResolvesWorkflow): string {
  if (!isObject(document)) throw invalidInput('a workflow document must be an object');
  if (resolves !== undefined) return checkWhole(document, resolves);
  const known = checked.get(document);
  if (known !== undefined) return known;
  const name = checkWhole(document, undefined);
  checked.set(document, name);
  return name;
}

function checkWhole(document: JsonObject, resolves: ResolvesWorkflow | undefined): string {
  const head = document.document;
  if (!isObject(head) || head.dsl === undefined) throw invalidInput('the workflow needs document.dsl and document.name');
  // Any other version is refused as what it is, a number too (YAML reads `dsl: 1.0` as 1), as a bundle's is.
  if (head.dsl !== workflowDslVersion) throw unsupported(`document.dsl is ${JSON.stringify(head.dsl)}; this executor runs DSL ${workflowDslVersion}`);
  if (typeof head.name !== 'string') throw invalidInput('the workflow needs document.name');
  // Recorded as the instance's name, and as a child's where another document runs this one.
  if (head.name.length > limits.workflowNameCharsMax) throw invalidInput(`/document/name: longer than ${limits.workflowNameCharsMax} characters`);
  const use = isObject(document.use) ? document.use : {};
  for (const refused of ['catalogs', 'extensions', 'functions']) {
    if (use[refused] !== undefined) throw unsupported(`/use/${refused}: ${refused} are not supported by this executor`);
  }
  if (use.authentications !== undefined) {
    if (!isObject(use.authentications)) throw invalidInput('/use/authentications must map names to authentication policies');
    for (const [name, policy] of Object.entries(use.authentications)) checkAuthenticationPolicy(policy, `/use/authentications/${escapePointer(name)}`, true);
  }
  if (
    use.secrets !== undefined &&
    (!Array.isArray(use.secrets) || use.secrets.length > limits.workflowSecretsMax || !use.secrets.every((name) => typeof name === 'string'))
  )
    throw invalidInput(`/use/secrets: a list of at most ${limits.workflowSecretsMax} secret names`);
  // $secrets only where its value is never recorded (src/workflow/secrets.ts).
  checkSecretUses(document);
  if (document.schedule !== undefined) throw unsupported('/schedule: scheduled workflows are not supported by this executor');
  const evaluate = isObject(document.evaluate) ? document.evaluate : {};
  if ((evaluate.language ?? 'jq') !== 'jq' || (evaluate.mode ?? 'strict') !== 'strict')
    throw unsupported('/evaluate: only strict jq expressions are supported');
  checkDeclaredTimings(use);
  if (typeof document.timeout === 'string') mustBeDeclared(document, 'timeouts', document.timeout, '/timeout');
  else if (document.timeout !== undefined) checkTimeout(document.timeout, '/timeout');
  const self = document;
  checkList(document.do, '/do', { document, resolves: resolves ?? ((ref) => isWorkflowNamed(self, ref)), declared: { tasks: 0 } });
  const concurrent = concurrency(document.do);
  if (concurrent > limits.workflowConcurrentTasksMax)
    throw invalidInput(
      `/do: its forks run ${concurrent} tasks at once (nested forks adding their branches); an instance runs at most ${limits.workflowConcurrentTasksMax} at once`,
    );
  // A pointer is built only to name a refused expression.
  forEachExpression(document, (program, path) => checkDeterministicJq(program, () => pointerOf(path)));
  for (const field of ['input', 'output', 'export']) checkTransforms(document[field], `/${field}`);
  // Every data schema compiles now (once for this document), or the document is refused naming it.
  documentSchemas(document);
  return head.name;
}

function checkTransforms(value: JsonValue | undefined, pointer: string): void {
  if (!isObject(value)) return;
  for (const key of ['from', 'as']) {
    const expression = value[key];
    if (typeof expression === 'string') checkDeterministicJq(programOf(expression), `${pointer}/${key}`);
  }
}

/** What a task's check needs beyond the task: the document (its named policies) and which workflows resolve. */
interface Checking {
  document: JsonObject;
  resolves: ResolvesWorkflow;
  /** The tasks met so far, in every list: at most limits.workflowTasksMax, as the bundle's check counts them. */
  declared: { tasks: number };
}

function checkList(list: JsonValue | undefined, base: string, checking: Checking): void {
  const entries = entriesOf(list, base);
  const siblings = new Set(entries.map((entry) => entry.name));
  for (const entry of entries) {
    if (++checking.declared.tasks > limits.workflowTasksMax)
      throw invalidInput(`${entry.pointer}: a document may declare at most ${limits.workflowTasksMax} tasks`);
    checkRecordable(entry);
    checkTask(entry, checking);
    checkFlowDirectives(entry, siblings);
  }
}

/**
 * A task's `then`, and each of its switch cases' `then` (refs.ts checkFlowDirective, as the
 * bundle's check): refused before anything runs, or the instance would fault only on reaching it,
 * after the tasks before it had acted.
 */
function checkFlowDirectives({ task, pointer }: TaskEntry, siblings: ReadonlySet<string>): void {
  checkFlowDirective(task.then, siblings, `${pointer}/then`);
  if (!Array.isArray(task.switch)) return;
  task.switch.forEach((item, index) => {
    for (const [name, branch] of Object.entries(isObject(item) ? item : {}))
      if (isObject(branch)) checkFlowDirective(branch.then, siblings, `${pointer}/switch/${index}/${escapePointer(name)}/then`);
  });
}

/** A task's name and pointer fit what each of its executions records (limits.workflowNameCharsMax, workflowTaskPointerCharsMax). */
function checkRecordable({ name, pointer }: TaskEntry): void {
  if (name.length > limits.workflowNameCharsMax)
    throw invalidInput(`${pointer.slice(0, pointer.lastIndexOf('/'))}: a task's name is at most ${limits.workflowNameCharsMax} characters`);
  if (pointer.length > limits.workflowTaskPointerCharsMax)
    throw invalidInput(
      `${pointer.slice(0, limits.workflowTaskPointerCharsMax)}…: a task's JSON Pointer is at most ${limits.workflowTaskPointerCharsMax} characters (its tasks nest too deep under names too long)`,
    );
}

function checkTask({ task, pointer }: TaskEntry, checking: Checking): void {
  const kind = kindOf(task);
  if (kind === undefined) throw invalidInput(`${pointer}: not a task (none of call, do, fork, for, raise, set, switch, try, wait, emit, listen, run)`);
  for (const field of expressionFields) if (typeof task[field] === 'string') checkDeterministicJq(programOf(task[field]), `${pointer}/${field}`);
  for (const field of ['input', 'output', 'export']) checkTransforms(task[field], `${pointer}/${field}`);
  checkTimings(task, pointer, checking.document);
  switch (kind) {
    case 'emit':
      if (!isObject(task.emit) || !isObject(task.emit.event) || !isObject(task.emit.event.with)) throw invalidInput(`${pointer}/emit/event/with is required`);
      return;
    case 'listen':
      return checkListen(task, pointer, checking);
    case 'run':
      return checkRun(task, pointer, checking);
    case 'call':
      return checkCall(task, pointer, checking);
    case 'do':
      return checkList(task.do, `${pointer}/do`, checking);
    case 'for':
      if (!isObject(task.for) || typeof task.for.in !== 'string') throw invalidInput(`${pointer}/for/in must be an expression`);
      checkDeterministicJq(programOf(task.for.in), `${pointer}/for/in`);
      if (typeof task.while === 'string') checkDeterministicJq(programOf(task.while), `${pointer}/while`);
      return checkList(task.do, `${pointer}/do`, checking);
    case 'fork':
      if (!isObject(task.fork)) throw invalidInput(`${pointer}/fork must be an object`);
      return checkList(task.fork.branches ?? [], `${pointer}/fork/branches`, checking);
    case 'try':
      checkList(task.try, `${pointer}/try`, checking);
      checkCatch(task.catch, `${pointer}/catch`);
      if (isObject(task.catch) && task.catch.do !== undefined) checkList(task.catch.do, `${pointer}/catch/do`, checking);
      return;
    case 'switch':
      return checkSwitch(task, pointer);
    case 'raise':
      // A named error must be declared (use.errors): otherwise it would fault only when raised.
      if (isObject(task.raise) && typeof task.raise.error === 'string' && resolveNamed(checking.document, 'errors', task.raise.error) === undefined)
        throw invalidInput(`${pointer}/raise/error: "${task.raise.error}" names no entry of use.errors`);
      return;
    default:
      return;
  }
}

/**
 * Every duration the interpreter reads as it is written: a task's timeout and its retry policy
 * (inline, or named in use.timeouts / use.retries, which must then hold it), a constant wait. The
 * interpreter reads no expression there (but a wait's) and takes a duration it cannot read as none
 * — no timeout, no delay, no retry limit — so one is refused here, before anything runs.
 */
function checkTimings(task: JsonObject, pointer: string, document: JsonObject): void {
  if (task.timeout !== undefined) {
    if (typeof task.timeout === 'string') mustBeDeclared(document, 'timeouts', task.timeout, `${pointer}/timeout`);
    else checkTimeout(task.timeout, `${pointer}/timeout`);
  }
  // A wait may be an expression (its result is read when it runs); any other wait is its duration.
  const wait = task.wait;
  if (wait !== undefined && !isExpression(wait)) checkDuration(wait, `${pointer}/wait`);
  const retry = isObject(task.catch) ? task.catch.retry : undefined;
  if (typeof retry === 'string') mustBeDeclared(document, 'retries', retry, `${pointer}/catch/retry`);
  else if (retry !== undefined) checkRetry(retry, `${pointer}/catch/retry`);
}

/** The timeouts and retry policies use declares, each checked where it is declared. */
function checkDeclaredTimings(use: JsonObject): void {
  for (const [kind, check] of [
    ['timeouts', checkTimeout],
    ['retries', checkRetry],
  ] as const) {
    const declared = use[kind];
    if (declared === undefined) continue;
    if (!isObject(declared)) throw invalidInput(`/use/${kind} must map names to ${kind}`);
    for (const [name, value] of Object.entries(declared)) check(value, `/use/${kind}/${escapePointer(name)}`);
  }
}

function mustBeDeclared(document: JsonObject, kind: 'timeouts' | 'retries', name: string, pointer: string): void {
  if (resolveNamed(document, kind, name) === undefined) throw invalidInput(`${pointer}: "${name}" names no entry of use.${kind}`);
}

function checkTimeout(timeout: JsonValue, pointer: string): void {
  if (!isObject(timeout)) throw invalidInput(`${pointer}: a timeout is {after: duration}`);
  checkDuration(timeout.after, `${pointer}/after`);
}

/** A catch's or a retry policy's `when` and `exceptWhen`: jq, with or without its `${ }`, deterministic as every expression. */
function checkWhens(holder: JsonObject, pointer: string): void {
  for (const field of ['when', 'exceptWhen']) {
    const expression = holder[field];
    if (typeof expression === 'string') checkDeterministicJq(programOf(expression), `${pointer}/${field}`);
  }
}

/**
 * A catch as the DSL 1.0.3 schema's TryTaskCatch has it, and nothing else: the interpreter ignored
 * a misspelt key, a when or exceptWhen that was no string and errors that were no {with}, so such a
 * catch took every error. Its retry and do are checked where they are read.
 */
function checkCatch(value: JsonValue | undefined, pointer: string): void {
  if (!isObject(value)) throw invalidInput(`${pointer}: a catch is an object`);
  onlyKeys(value, ['errors', 'as', 'when', 'exceptWhen', 'retry', 'do'], pointer, 'a catch');
  checkExpressionFields(value, pointer);
  const as = ownMember(value, 'as');
  if (as !== undefined && typeof as !== 'string') throw invalidInput(`${pointer}/as: a name (a string), got ${JSON.stringify(as)}`);
  const errors = ownMember(value, 'errors');
  if (errors !== undefined && !isObject(errors)) throw invalidInput(`${pointer}/errors: an object ({with: filter})`);
  const filter = isObject(errors) ? ownMember(errors, 'with') : undefined;
  if (filter !== undefined && !isObject(filter)) throw invalidInput(`${pointer}/errors/with: an object (the error's fields to match)`);
}

/** `when` and `exceptWhen`, where present, are runtime expressions (strings), checked as every expression. */
function checkExpressionFields(holder: JsonObject, pointer: string): void {
  for (const field of ['when', 'exceptWhen']) {
    const expression = ownMember(holder, field);
    if (expression !== undefined && typeof expression !== 'string')
      throw invalidInput(`${pointer}/${field}: a runtime expression (a string), got ${JSON.stringify(expression)}`);
  }
  checkWhens(holder, pointer);
}

/**
 * A retry policy as the DSL 1.0.3 schema's retryPolicy has it, and nothing else: the interpreter
 * reads what it finds and ignores the rest, so a misspelt key (`limits`) was no limit (the try
 * retried for good), a when that was no string no condition, and a backoff holding two kinds the
 * first it looked for. Each is refused here instead.
 */
function checkRetry(policy: JsonValue, pointer: string): void {
  if (!isObject(policy)) throw invalidInput(`${pointer}: a retry policy is an object`);
  onlyKeys(policy, ['when', 'exceptWhen', 'delay', 'backoff', 'limit', 'jitter'], pointer, 'a retry policy');
  checkExpressionFields(policy, pointer);
  if (policy.delay !== undefined) checkDuration(policy.delay, `${pointer}/delay`);
  if (policy.backoff !== undefined) checkBackoff(policy.backoff, `${pointer}/backoff`);
  if (policy.limit !== undefined) checkRetryLimit(policy.limit, `${pointer}/limit`);
  if (policy.jitter !== undefined) checkJitter(policy.jitter, `${pointer}/jitter`);
}

const backoffKinds = ['constant', 'linear', 'exponential'] as const;

/** A backoff is exactly one of constant, linear, exponential, its value an object (the schema says no more of what it holds). */
function checkBackoff(backoff: JsonValue, pointer: string): void {
  const exactlyOne = `a backoff is exactly one of ${backoffKinds.join(', ')}, each an object`;
  if (!isObject(backoff)) throw invalidInput(`${pointer}: ${exactlyOne}, got ${JSON.stringify(backoff)}`);
  onlyKeys(backoff, backoffKinds, pointer, 'a backoff');
  const kinds = Object.keys(backoff);
  if (kinds.length !== 1) throw invalidInput(`${pointer}: ${exactlyOne}, got ${kinds.length === 0 ? 'none' : kinds.join(' and ')}`);
  const kind = kinds[0] as string;
  if (!isObject(backoff[kind])) throw invalidInput(`${pointer}/${kind}: a ${kind} backoff is an object, got ${JSON.stringify(backoff[kind])}`);
}

/** A jitter is {from, to}, both durations and nothing else. */
function checkJitter(jitter: JsonValue, pointer: string): void {
  if (!isObject(jitter)) throw invalidInput(`${pointer}: a jitter is {from, to}`);
  onlyKeys(jitter, ['from', 'to'], pointer, 'a jitter');
  for (const end of ['from', 'to']) {
    if (jitter[end] === undefined) throw invalidInput(`${pointer}/${end}: a jitter has both ends, from and to`);
    checkDuration(jitter[end], `${pointer}/${end}`);
  }
}

/**
 * A retry policy's limit as the DSL's schema has it: {attempt: {count: integer, duration}, duration}
 * and nothing else. The interpreter reads a count that is no number, or a limit it does not find, as
 * no limit (retries for good), and a count of 1.5 as written; each is refused here instead. The
 * schema's count is any integer, but one below zero says no number of retries: the interpreter read
 * it as 0, a value the document did not write, so it is refused too.
 */
function checkRetryLimit(limit: JsonValue, pointer: string): void {
  if (!isObject(limit)) throw invalidInput(`${pointer}: a retry limit is {attempt: {count}, duration}`);
  onlyKeys(limit, ['attempt', 'duration'], pointer, 'a retry limit');
  if (limit.duration !== undefined) checkDuration(limit.duration, `${pointer}/duration`);
  const attempt = limit.attempt;
  if (attempt === undefined) return;
  if (!isObject(attempt)) throw invalidInput(`${pointer}/attempt: a retry limit's attempt is {count}`);
  onlyKeys(attempt, ['count', 'duration'], `${pointer}/attempt`, "a retry limit's attempt");
  if (attempt.count !== undefined && !(typeof attempt.count === 'number' && Number.isInteger(attempt.count)))
    throw invalidInput(`${pointer}/attempt/count: the most retries is an integer, got ${JSON.stringify(attempt.count)}`);
  if (typeof attempt.count === 'number' && attempt.count < 0)
    throw invalidInput(`${pointer}/attempt/count: the most retries is at least 0 (0 allows none), got ${attempt.count}`);
  if (attempt.duration === undefined) return;
  checkDuration(attempt.duration, `${pointer}/attempt/duration`);
  // The DSL says only "the duration limit, if any, for all retry attempts": not run, so refused rather than ignored.
  throw unsupported(`${pointer}/attempt/duration: not supported by this executor (limit.duration bounds the retries, limit.attempt.count their number)`);
}

function onlyKeys(holder: JsonObject, known: readonly string[], pointer: string, what: string): void {
  for (const key of Object.keys(holder))
    if (!known.includes(key)) throw invalidInput(`${pointer}/${escapePointer(key)}: not a key of ${what} (${known.join(', ')})`);
}

/** The DSL's ISO 8601 durations with years, months or weeks: lengths that depend on the calendar (or, for weeks, not read here). */
const calendarDuration =
  /^P(?!$)(\d+(?:\.\d+)?Y)?(\d+(?:\.\d+)?M)?(\d+(?:\.\d+)?W)?(\d+(?:\.\d+)?D)?(T(?=\d)(\d+(?:\.\d+)?H)?(\d+(?:\.\d+)?M)?(\d+(?:\.\d+)?S)?)?$/;

function checkDuration(value: JsonValue | undefined, pointer: string): void {
  if (durationMs(value) !== undefined) return;
  // The DSL's duration may be "a runtime expression that is evaluated to an ISO 8601 string": valid, but read here only in a wait.
  if (isExpression(value))
    throw unsupported(
      `${pointer}: a duration written as a runtime expression is evaluated only in a wait (a timeout's and a retry policy's durations are read as written)`,
    );
  if (typeof value === 'string' && calendarDuration.test(value) && /[YW]|^P[^T]*M/.test(value))
    throw unsupported(`${pointer}: ${JSON.stringify(value)}: years, months and weeks are not supported (a duration is days, hours, minutes and seconds)`);
  throw invalidInput(`${pointer}: not a duration (${durationForm}) of at most 2^53 − 1 ms`);
}

/** How many tasks a (checked) task list may run at once: the most any of its tasks runs, one after another. */
function concurrency(list: JsonValue | undefined): number {
  let most = 1;
  for (const { task } of entriesOf(list ?? [], '')) most = Math.max(most, taskConcurrency(task));
  return most;
}

/** A fork runs its branches side by side, each with what it runs at once; every other task runs its lists one task at a time. */
function taskConcurrency(task: JsonObject): number {
  switch (kindOf(task)) {
    case 'fork':
      return entriesOf(isObject(task.fork) ? (task.fork.branches ?? []) : [], '').reduce((sum, { task: branch }) => sum + taskConcurrency(branch), 0);
    case 'do':
    case 'for':
      return concurrency(task.do);
    case 'try':
      return Math.max(concurrency(task.try), isObject(task.catch) ? concurrency(task.catch.do) : 1);
    case 'listen':
      return isObject(task.foreach) ? concurrency(task.foreach.do) : 1;
    default:
      return 1;
  }
}

/** listen.to: exactly one of one, any, all (until only with any); filters with `with`; `foreach`: its tasks, no export. */
function checkListen(task: JsonObject, pointer: string, checking: Checking): void {
  const listen = task.listen;
  if (!isObject(listen) || !isObject(listen.to)) throw invalidInput(`${pointer}/listen/to is required`);
  if (listen.foreach !== undefined) throw invalidInput(`${pointer}/listen/foreach: foreach sits beside listen in the task, not inside it`);
  const foreach = task.foreach;
  if (foreach !== undefined) {
    if (!isObject(foreach)) throw invalidInput(`${pointer}/foreach must be an object`);
    if (foreach.export !== undefined) throw unsupported(`${pointer}/foreach/export: exporting from a listen's iterations is not supported by this executor`);
    if (isObject(foreach.output) && typeof foreach.output.as === 'string') checkDeterministicJq(programOf(foreach.output.as), `${pointer}/foreach/output/as`);
    checkList(foreach.do ?? [], `${pointer}/foreach/do`, checking);
  }
  checkStrategy(listen.to, `${pointer}/listen/to`);
  const until = listen.to.until;
  if (until !== undefined && typeof until !== 'string') {
    if (!Array.isArray(listen.to.any)) throw invalidInput(`${pointer}/listen/to/until applies only with any`);
    if (!isObject(until) || until.until !== undefined) throw invalidInput(`${pointer}/listen/to/until is an expression or a strategy without until`);
    checkStrategy(until, `${pointer}/listen/to/until`);
  }
  if (typeof until === 'string') checkDeterministicJq(programOf(until), `${pointer}/listen/to/until`);
}

function checkStrategy(strategy: JsonObject, pointer: string): void {
  const present = ['one', 'any', 'all'].filter((key) => strategy[key] !== undefined);
  if (present.length !== 1) throw invalidInput(`${pointer} needs exactly one of one, any, all`);
  const filters = strategy.one !== undefined ? [strategy.one] : (strategy.any ?? strategy.all);
  if (!Array.isArray(filters) || (strategy.all !== undefined && filters.length === 0))
    throw invalidInput(`${pointer}: any and all are lists of event filters (all needs at least one)`);
  filters.forEach((filter, index) => {
    const at = strategy.one !== undefined ? `${pointer}/one` : `${pointer}/${present[0]}/${index}`;
    if (!isObject(filter) || !isObject(filter.with) || Object.keys(filter.with).length === 0)
      throw invalidInput(`${at}/with must name at least one event attribute`);
    const correlate = filter.correlate ?? {};
    if (!isObject(correlate)) throw invalidInput(`${at}/correlate must be a map of correlations`);
    for (const [name, spec] of Object.entries(correlate)) {
      if (!isObject(spec) || typeof spec.from !== 'string') throw invalidInput(`${at}/correlate/${name}/from must be an expression`);
      checkDeterministicJq(programOf(spec.from), `${at}/correlate/${name}/from`);
    }
  });
}

/** Named cases, at most one without `when`: "there can be only one default case, all others MUST set a condition" (dsl-reference Switch Case). */
function checkSwitch(task: JsonObject, pointer: string): void {
  if (!Array.isArray(task.switch)) throw invalidInput(`${pointer}/switch must be a list of cases`);
  let defaults = 0;
  task.switch.forEach((item, index) => {
    const [name] = isObject(item) ? Object.keys(item) : [];
    const branch = name !== undefined && isObject(item) ? item[name] : undefined;
    if (!isObject(branch)) throw invalidInput(`${pointer}/switch/${index} must be one named case`);
    if (typeof branch.when === 'string') checkDeterministicJq(programOf(branch.when), `${pointer}/switch/${index}/${escapePointer(name as string)}/when`);
    else if (++defaults > 1)
      throw invalidInput(`${pointer}/switch/${index}/${escapePointer(name as string)}: a second case without when (a switch has at most one default case)`);
  });
}

/** `run: workflow` only (no processes), naming a workflow that resolves; `await` a boolean. */
function checkRun(task: JsonObject, pointer: string, checking: Checking): void {
  const run = isObject(task.run) ? task.run : {};
  const kind = ['container', 'shell', 'script'].find((key) => run[key] !== undefined);
  if (kind !== undefined) throw unsupported(`${pointer}: run (${kind}) is not supported by this executor: it runs no processes, containers or scripts`);
  const ref = subworkflowRefOf(task);
  if (!ref) throw invalidInput(`${pointer}/run/workflow: needs namespace, name and version (strings)`);
  if (run.await !== undefined && typeof run.await !== 'boolean') throw invalidInput(`${pointer}/run/await must be a boolean`);
  const workflow = run.workflow as JsonObject;
  if (workflow.input !== undefined && !isObject(workflow.input)) throw invalidInput(`${pointer}/run/workflow/input must be an object`);
  if (!checking.resolves(ref))
    throw unsupported(
      `${pointer}/run/workflow: the workflow ${ref.namespace}/${ref.name}@${ref.version ?? 'latest'} is not pinned beside this one (a child workflow runs from the same bundle)`,
    );
}

function checkCall(task: JsonObject, pointer: string, checking: Checking): void {
  const call = task.call;
  if (call === 'http' || call === contractFunction) {
    if (!isObject(task.with)) throw invalidInput(`${pointer}/with: a ${call} call needs its arguments`);
    const endpoint = task.with.endpoint;
    if (call === 'http' && isObject(endpoint) && endpoint.authentication !== undefined)
      checkCallAuthentication(checking.document, endpoint.authentication, `${pointer}/with/endpoint/authentication`);
    return;
  }
  if (call === 'openapi') {
    const args = task.with;
    if (!isObject(args) || !isObject(args.document) || args.document.endpoint === undefined || typeof args.operationId !== 'string')
      throw invalidInput(`${pointer}/with: an openapi call needs document.endpoint and operationId`);
    for (const place of authenticationPlaces(call)) {
      const policy = valueAt(args, place);
      if (policy !== undefined) checkCallAuthentication(checking.document, policy, `${pointer}/with/${place.join('/')}`);
    }
    return;
  }
  if (typeof call === 'string' && refusedCallTypes.has(call)) throw unsupported(`${pointer}: call ${call} is not supported by this executor`);
  throw unsupported(`${pointer}: call ${JSON.stringify(call)} does not resolve (this executor calls http, openapi and ${contractFunction})`);
}

/** The JSON Pointer of a task entry is what errors name; `isExpression` decides what a value evaluates. */
export { isExpression };
