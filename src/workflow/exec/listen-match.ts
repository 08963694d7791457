/**
 * listen: the consumption strategy (DSL 1.0.3 `listen.to`: `one`, `any`, `all`, `any` + `until`)
 * and how a delivered CloudEvent is matched against a waiting listen.
 *
 * - Matching a filter (`with`): every attribute it names must be on the event; a runtime
 *   expression is a predicate over the attribute's value (`.`; `$event` is the whole event), a
 *   string is a regular expression the whole attribute must match (jq's `test`, so it runs under
 *   the evaluator's deadline), any other value must be equal.
 * - Correlation: `correlate.<name>.from` extracts a value from the event (`.` is the event); it
 *   must equal the expectation — the filter's own `expect` (evaluated against the task's input
 *   when the listen started, and recorded with it), or else the name's: the `expect` of the first
 *   filter declaring that name, or else the first value the listen took under that name.
 * - The jq work happens where the event arrives (`matchFilters`), queued under the listening
 *   instance's principal (jq.ts shares the workers between principals); the decision to take it is pure
 *   (`decideListenEvent`) and is made on the record at its revision under the kernel's guarded
 *   append, so two deliveries of one event (two workers, a publisher's retry) take it once.
 * - Until: events matching an `until` strategy count for it and are left out of the output; an
 *   `until` expression is evaluated by the interpreter after each event (recorded), and once one
 *   is true — or the strategy is satisfied — the listen takes nothing more. With an expression, an
 *   event is taken only once the verdict on the events before it is recorded (`untilPending`): the
 *   log never holds an event after the one that ended the listen.
 */
import { openEndedMs } from '../../events/guard.js';
import { jsonEquals, ownMember, setMember, type JsonObject, type JsonValue } from '../../contract/json.js';
import type { CloudEvent } from '../../contract/cloudevents.js';
import { valueAt } from '../../contract/bundle.js';
import { isObject } from './document.js';
import { isExpression, programOf, stringsOf } from './expressions.js';
import { ExpressionNotAnswered, type ExpressionEvaluator } from './jq.js';
import type { EventSender, WorkflowTransition } from './events.js';
import { lostFork, ranInside, schemeOf } from './keys.js';
import { taskTimeoutKey, type ListenRecord, type TaskRecord, type WorkflowRecord } from './record.js';

export type ListenGroup = 'to' | 'until';

/** The filters of a strategy, in order (`one` is a list of one). */
export function filtersOf(strategy: JsonValue | undefined): JsonObject[] {
  if (!isObject(strategy)) return [];
  if (isObject(strategy.one)) return [strategy.one];
  const list = Array.isArray(strategy.all) ? strategy.all : Array.isArray(strategy.any) ? strategy.any : [];
  return list.filter(isObject);
}

const untilOf = (to: JsonValue): JsonValue | undefined => (isObject(to) && Array.isArray(to.any) ? to.until : undefined);

/** `correlate.<name>.expect` of every filter, keyed `<group>/<filter>/<name>` (the value recorded when the listen starts). */
export function expectsOf(to: JsonValue): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const { key, spec } of correlations(to)) if (spec.expect !== undefined) out[key] = spec.expect;
  return out;
}

/** Every `correlate.<name>` object of the strategy's filters and of its `until`, with its key `<group>/<filter>/<name>`. */
function* correlations(to: JsonValue): Generator<{ key: string; spec: JsonObject }> {
  const groups: [ListenGroup, JsonValue | undefined][] = [
    ['to', to],
    ['until', untilOf(to)],
  ];
  for (const [group, strategy] of groups) {
    const filters = filtersOf(strategy);
    for (let index = 0; index < filters.length; index++) {
      const correlate = filters[index]?.correlate;
      if (!isObject(correlate)) continue;
      for (const [name, spec] of Object.entries(correlate)) if (isObject(spec)) yield { key: `${group}/${index}/${name}`, spec };
    }
  }
}

/** The strategy with its expectations replaced by their evaluated values. */
export function withExpects(to: JsonValue, values: Readonly<Record<string, JsonValue>>): JsonValue {
  const copy = structuredClone(to) as JsonObject;
  for (const { key, spec } of correlations(copy)) if (Object.hasOwn(values, key)) spec.expect = values[key] as JsonValue;
  return copy;
}

/** The step that records, when the listen starts, the runtime arguments its filters' expressions read (listen.ts). */
export const filterArgumentsKey = (at: string): string => `${at}>listen.arguments`;

/**
 * The variables among `bound` that the filters of the strategy (and of its `until` strategy) name:
 * every one when they read `$ARGS`. Never `$event` (bound where the event is matched) nor
 * `$secrets` (never recorded).
 */
export function filterVariables(to: JsonValue, bound: readonly string[]): string[] {
  const named = new Set<string>();
  for (const text of stringsOf([...filtersOf(to), ...filtersOf(untilOf(to))]))
    for (const [, name] of text.matchAll(/\$([A-Za-z_][A-Za-z0-9_]*)/g)) named.add(name as string);
  return bound.filter((name) => name !== 'event' && name !== 'secrets' && (named.has(name) || named.has('ARGS')));
}

/** The runtime arguments the listen's filters read, as recorded when it started (none in a log written before they were). */
function filterArguments(record: WorkflowRecord, at: string): Readonly<Record<string, JsonValue>> {
  const step = record.steps[filterArgumentsKey(at)];
  return step !== undefined && 'ok' in step && isObject(step.ok) ? step.ok : {};
}

/** Declared expectations by correlation name (the first filter declaring a name wins). */
export function declaredExpectations(to: JsonValue): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const [key, value] of Object.entries(expectsOf(to))) {
    const name = key.split('/').slice(2).join('/');
    if (!Object.hasOwn(out, name)) setMember(out, name, value);
  }
  return out;
}

/** Whether a strategy is satisfied by the filters (of its group) that events matched. */
function strategySatisfied(strategy: JsonValue | undefined, matched: readonly number[]): boolean {
  if (!isObject(strategy)) return false;
  if (Array.isArray(strategy.all)) return strategy.all.every((_filter, index) => matched.includes(index));
  return matched.length > 0;
}

/** Whether the first `count` events taken end the listen (an `until` expression is the interpreter's to decide). */
export function listenSatisfied(listen: ListenRecord, count: number): boolean {
  const taken = listen.events.slice(0, count);
  const until = untilOf(listen.to);
  const matched = (group: ListenGroup) => taken.filter((e) => e.group === group).map((e) => e.filter);
  if (typeof until === 'string') return false;
  if (until !== undefined) return strategySatisfied(until, matched('until'));
  return strategySatisfied(listen.to, matched('to'));
}

const truthy = (value: JsonValue): boolean => value !== false && value !== null;

export const untilKey = (at: string, index: number): string => `${at}>until[${index}]`;

/**
 * Whether the listen takes no more events: its task ended, its timeout fired (a `foreach` listen
 * runs on past it through the events it took before), its strategy is satisfied, an `until`
 * expression held (or failed: the task faults on it), a task execution it runs inside ended
 * (enclosingEnded), or it runs in a competing fork's losing branch (inLosingBranch).
 */
export function listenClosed(record: WorkflowRecord, at: string): boolean {
  const listen = record.listens[at];
  if (!listen || record.status !== 'running' || record.tasks[at]?.state !== 'running') return true;
  if (listenTimedOut(record, at) || listenSatisfied(listen, listen.events.length)) return true;
  const held = listen.events.some((_e, index) => {
    const step = record.steps[untilKey(at, index)];
    return step !== undefined && (!('ok' in step) || truthy(step.ok));
  });
  return held || enclosingEnded(record, at) || inLosingBranch(record, at);
}

/**
 * Whether the listen at `at` runs in a losing branch of a competing fork whose winner the log
 * records: the losers are stopped, then recorded cancelled (tasks.ts releaseLosers) — after they
 * unwound and their child operations were disposed, or by the next worker when this one died in
 * between — and nothing reads what the listen takes meanwhile. Keys of scheme 3 only, as
 * enclosingEnded.
 */
function inLosingBranch(record: WorkflowRecord, at: string): boolean {
  const ref = record.tasks[at]?.ref;
  return ref !== undefined && schemeOf(record.started) === 3 && lostFork(record, 3, ref, at) !== undefined;
}

/**
 * The instants the timeouts of the task executions the listen at `at` runs inside are due: each
 * ends the listen's wait as its own timeout does (enclosingEnded, once it has committed). Not a
 * listen's (the listen at `at` then runs in its `foreach`): its timeout ends its own wait, never
 * the iterations of the events it took, which run on past it (listenOutlivesTimeout). Keys of
 * scheme 3 only (enclosing).
 */
function enclosingTimeoutsMs(record: WorkflowRecord, at: string): number[] {
  return enclosing(record, at).flatMap(([outer]) => {
    const timer = record.timers[taskTimeoutKey(outer)];
    return timer === undefined || record.listens[outer] !== undefined ? [] : [timer.dueAtMs];
  });
}

/**
 * The task executions the listen at `at` runs inside (its own task's excepted). Keys of scheme 3
 * only: under the older schemes two executions may share a key (keys.ts), so one that ended could
 * pass for the one the listen runs in.
 */
function enclosing(record: WorkflowRecord, at: string): [string, TaskRecord][] {
  const ref = record.tasks[at]?.ref;
  if (ref === undefined || schemeOf(record.started) !== 3) return [];
  return Object.entries(record.tasks).filter(([outer, task]) => ref.startsWith(`${task.ref}/`) && ranInside(3, { pointer: task.ref, at: outer }, ref, at));
}

/** enclosingEnded's answers, per tasks map (the fold replaces the map whenever a task starts or ends) and listen. */
const enclosingAnswers = new WeakMap<WorkflowRecord['tasks'], Map<string, boolean>>();

/**
 * Whether a task execution the listen at `at` runs inside has ended while the listen is still
 * recorded running: an enclosing task's timeout faulted it (a `try` may catch that, and the
 * instance goes on), and the listen's work stopped with it. Nothing will read what that listen
 * takes, nor record an `until` verdict on it (on which every later event it matched would wait,
 * untilPending): it takes nothing more. Keys of scheme 3 only (enclosing).
 */
function enclosingEnded(record: WorkflowRecord, at: string): boolean {
  const tasks = record.tasks;
  let answers = enclosingAnswers.get(tasks);
  if (answers === undefined) enclosingAnswers.set(tasks, (answers = new Map()));
  let ended = answers.get(at);
  if (ended === undefined) {
    ended = enclosing(record, at).some(([, task]) => task.state !== 'running');
    answers.set(at, ended);
  }
  return ended;
}

/** Whether the timeout of the listen's task has fired. */
export const listenTimedOut = (record: WorkflowRecord, at: string): boolean => record.timers[taskTimeoutKey(at)]?.state === 'fired';

/** Whether the task at `at` is a listen with `foreach`. */
function iterates(record: WorkflowRecord, at: string): boolean {
  const task = record.tasks[at];
  const definition = task && valueAt(record.started.document, task.ref);
  return isObject(definition) && isObject(definition.listen) && definition.foreach !== undefined;
}

/**
 * Whether the task at `at` is a listen whose wait is over: the events it took satisfy its
 * strategy, or its `until` expression held on them. Each was taken before the task's timeout
 * (decideListenEvent's guard) and answered to its publisher as taken, so the timeout no longer
 * faults the task: its completion, however late it commits, carries the events — with `foreach`,
 * after their iterations (decideDue, and the interpreter's completion).
 */
export function listenWaitEnded(record: WorkflowRecord, at: string): boolean {
  const listen = record.listens[at];
  if (!listen || !record.tasks[at]) return false;
  if (listenSatisfied(listen, listen.events.length)) return true;
  return listen.events.some((_e, index) => {
    const step = record.steps[untilKey(at, index)];
    return step !== undefined && 'ok' in step && truthy(step.ok);
  });
}

/**
 * Whether the task at `at` is a listen its timeout does not fault when it fires: its wait is over
 * (listenWaitEnded), or it iterates (`foreach`) events it took before the timeout. Each of those
 * was answered to its publisher as taken, and a taken event is iterated: the timeout ends the
 * wait, and the interpreter faults the task with it once the events taken before it are iterated
 * (listen.ts). A `foreach` listen that took nothing faults at the timeout like any listen.
 */
export function listenOutlivesTimeout(record: WorkflowRecord, at: string): boolean {
  if (listenWaitEnded(record, at)) return true;
  return (record.listens[at]?.events.length ?? 0) > 0 && iterates(record, at);
}

/**
 * Whether the open listen waits for its `until` expression's verdict on the events it took: the
 * last one taken has no recorded verdict yet. Each take waits for the verdict before it, so the
 * last one's is the only one that can be missing. While it is, the listen takes nothing: the
 * verdict may end it.
 */
export function untilPending(record: WorkflowRecord, at: string): boolean {
  const listen = record.listens[at];
  if (!listen || typeof untilOf(listen.to) !== 'string' || listen.events.length === 0 || listenClosed(record, at)) return false;
  return record.steps[untilKey(at, listen.events.length - 1)] === undefined;
}

/** A filter an event matched, with the correlation values it extracted. */
export interface Candidate {
  group: ListenGroup;
  filter: number;
  correlation: Record<string, JsonValue>;
}

async function attributeMatches(
  evaluator: ExpressionEvaluator,
  principal: string,
  expected: JsonValue,
  actual: JsonValue | undefined,
  vars: Readonly<Record<string, JsonValue>>,
): Promise<boolean> {
  if (actual === undefined) return false;
  if (isExpression(expected)) return truthy(await evaluator.evaluate(programOf(expected), actual, vars, principal));
  if (typeof expected === 'string') {
    if (actual === expected) return true;
    if (typeof actual !== 'string') return false;
    return truthy(await evaluator.evaluate('test("^(?:" + $re + ")$")', actual, { re: expected }, principal));
  }
  return jsonEquals(expected, actual);
}

/** The filter's correlation values, or undefined when it does not match the event. */
async function matchFilter(
  evaluator: ExpressionEvaluator,
  principal: string,
  filter: JsonObject,
  event: CloudEvent,
  args: Readonly<Record<string, JsonValue>>,
): Promise<Record<string, JsonValue> | undefined> {
  const attributes = isObject(filter.with) ? filter.with : {};
  const vars = { ...args, event };
  try {
    for (const [name, expected] of Object.entries(attributes))
      if (!(await attributeMatches(evaluator, principal, expected, ownMember(event, name), vars))) return undefined;
    const correlation: Record<string, JsonValue> = {};
    const correlate = isObject(filter.correlate) ? filter.correlate : {};
    for (const [name, spec] of Object.entries(correlate)) {
      if (!isObject(spec) || typeof spec.from !== 'string') return undefined;
      // An own member whatever the name (`__proto__` too): the log records it, and the expectations read it.
      setMember(correlation, name, await evaluator.evaluate(programOf(spec.from), event, vars, principal));
    }
    return correlation;
  } catch (error) {
    // Not answered (its worker stopped at the wall-time cap): nothing is known of this event yet, and the delivery says so (intake.ts).
    if (error instanceof ExpressionNotAnswered) throw error;
    // A predicate or an extraction that fails on this event (a bad regex, a type error) does not match it.
    return undefined;
  }
}

/**
 * Every filter of the listen waiting at `at` the event matches (until's first), with what each
 * extracted. The filters' expressions see `$event` and the runtime arguments they read, as they
 * were when the listen started (filterArgumentsKey). An expression the evaluator did not answer
 * (ExpressionNotAnswered) is thrown: whether the event matches is not known.
 */
export async function matchFilters(
  evaluator: ExpressionEvaluator,
  principal: string,
  record: WorkflowRecord,
  at: string,
  event: CloudEvent,
): Promise<Candidate[]> {
  const listen = record.listens[at] as ListenRecord;
  const args = filterArguments(record, at);
  const candidates: Candidate[] = [];
  const until = untilOf(listen.to);
  const groups: [ListenGroup, JsonValue | undefined][] = [
    ['until', typeof until === 'string' ? undefined : until],
    ['to', listen.to],
  ];
  for (const [group, strategy] of groups) {
    const filters = filtersOf(strategy);
    // `any: []` listens to every event.
    if (isObject(strategy) && Array.isArray(strategy.any) && filters.length === 0) candidates.push({ group, filter: 0, correlation: {} });
    for (const [index, filter] of filters.entries()) {
      const correlation = await matchFilter(evaluator, principal, filter, event, args);
      if (correlation) candidates.push({ group, filter: index, correlation });
    }
  }
  return candidates;
}

/**
 * Whether two events claim one identity: CloudEvents' (`source` and `id`) within a type. Those two
 * are the sender's claims; the type is what the broker let it send (its subject), so a publisher
 * claiming another's source and id under its own type sends another event, and cannot have the
 * other's answered as taken while the log holds only its own.
 */
const sameIdentity = (a: JsonValue, b: CloudEvent): boolean => isObject(a) && a.id === b.id && a.source === b.source && a.type === b.type;

/**
 * Whether an event taken `from` a sender claims the identity of one arriving from `sender`: only
 * when the same senders could have sent both. The way in is what the broker (or the HTTP
 * facade's authentication) proves, like the type: an event publisher allowed the type claiming
 * the source and id the instance's own workflow's event will carry (computable: tasks.ts) sends
 * another event, and cannot have that one refused as a conflicting claim; nor the reverse. An
 * event taken in a log written before its sender was recorded may have come from either.
 */
const claimsOf = (from: EventSender | undefined, sender: EventSender): boolean => from === undefined || from === sender;

/**
 * Whether two events are the same one: the same identity and the same content. A send again after
 * a lost answer is the same event; another event under that identity (a sender allowed the type
 * claiming the identity of one another sender will send) is not, and is never answered as taken
 * while the log holds the other (identityTakenOtherwise).
 */
const sameEvent = (a: JsonValue, b: CloudEvent): boolean => sameIdentity(a, b) && jsonEquals(a, b);

/** Whether the listen already took this event (type, source, id and content): delivering it again appends nothing. */
export function listenTook(record: WorkflowRecord, at: string, event: CloudEvent): boolean {
  return record.listens[at]?.events.some((taken) => sameEvent(taken.event, event)) ?? false;
}

/**
 * Whether a listen of the instance took another event under this event's identity (type, source
 * and id, other content) from the same senders (`sender`: claimsOf): this one is then a
 * conflicting claim to an identity the instance holds. It is not taken (the log never holds two
 * events under one identity of one sender), nor answered as taken (its sender would be told the
 * instance has an event it does not): it is refused, `conflict`.
 */
export function identityTakenOtherwise(record: WorkflowRecord, event: CloudEvent, sender: EventSender): boolean {
  return Object.values(record.listens).some((listen) =>
    listen.events.some((taken) => claimsOf(taken.from, sender) && sameIdentity(taken.event, event) && !jsonEquals(taken.event, event)),
  );
}

/**
 * Whether another listen of the instance took the event before this one started: the event
 * arrived before this listen waited, and a publisher's retry of it (after a lost answer) is the
 * same event, not a new one for this listen. One taken since this listen started was offered to
 * it too (a retry may still take it here: this listen's take may have been the part left undone).
 */
export function takenBeforeListening(record: WorkflowRecord, at: string, event: CloudEvent): boolean {
  const since = record.listens[at]?.since ?? 0;
  return Object.values(record.listens).some((listen) => listen.events.some((taken) => taken.position < since && sameEvent(taken.event, event)));
}

/**
 * The transition taking an event, or undefined: the listen is closed, its `until` expression's
 * verdict on the last event it took is not recorded yet (the intake waits for it and decides
 * again), the event was taken already (by this listen, or by another before this one started),
 * another event was taken under its identity from the same senders (identityTakenOtherwise), or no candidate fits — an `all` filter already satisfied
 * is passed over, a correlation value that differs from its expectation refuses the filter. The
 * event is recorded with who could have sent it (`from`).
 */
export function decideListenEvent(
  record: WorkflowRecord,
  at: string,
  event: CloudEvent,
  sender: EventSender,
  candidates: readonly Candidate[],
): WorkflowTransition | undefined {
  if (
    listenClosed(record, at) ||
    untilPending(record, at) ||
    listenTook(record, at, event) ||
    takenBeforeListening(record, at, event) ||
    identityTakenOtherwise(record, event, sender)
  )
    return undefined;
  const listen = record.listens[at] as ListenRecord;
  const strategyOf = (group: ListenGroup) => (group === 'to' ? listen.to : untilOf(listen.to));
  const declared = expectsOf(listen.to);
  const expected = { ...listen.expected, ...declaredExpectations(listen.to) };
  const fits = (candidate: Candidate): boolean => {
    const strategy = strategyOf(candidate.group);
    const all = isObject(strategy) && Array.isArray(strategy.all);
    if (all && listen.events.some((e) => e.group === candidate.group && e.filter === candidate.filter)) return false;
    return Object.entries(candidate.correlation).every(([name, value]) => {
      // The filter's own `expect`, else the name's: another filter's `expect`, else the first value taken.
      const own = `${candidate.group}/${candidate.filter}/${name}`;
      if (Object.hasOwn(declared, own)) return jsonEquals(declared[own], value);
      return !Object.hasOwn(expected, name) || jsonEquals(expected[name], value);
    });
  };
  const chosen = candidates.find(fits);
  if (!chosen) return undefined;
  // Taken before the workflow's deadline, the task's own timeout and those of the tasks it runs inside, like any step of the task.
  const notAfterMs = Math.min(
    record.started.deadlineMs ?? openEndedMs,
    record.timers[taskTimeoutKey(at)]?.dueAtMs ?? openEndedMs,
    ...enclosingTimeoutsMs(record, at),
  );
  return {
    events: [{ type: 'listen-event-received', v: 1, at, event, group: chosen.group, filter: chosen.filter, correlation: chosen.correlation, from: sender }],
    timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs },
    causation: { command: 'listen-event' },
  };
}
