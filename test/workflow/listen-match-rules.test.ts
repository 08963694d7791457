/**
 * The listen task's rules (src/workflow/exec/listen-match.ts) on records and events built here,
 * without an executor: the consumption strategies (`one`, `all`, `any`, `any` + `until`), when a
 * listen is closed or waits for its `until` verdict, how an event is matched against a filter
 * (`with`: predicates, anchored regular expressions, constants; `correlate.<name>.from`), which
 * candidate is taken (an `all` filter once, correlation against `expect` or the first value
 * taken), the guard of the take, and how an event is read. listen.test.ts runs the same rules
 * through the executor; this file pins each of them alone, and runs first in the mutation run.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import {
  declaredExpectations,
  decideListenEvent,
  expectsOf,
  filtersOf,
  listenClosed,
  listenOutlivesTimeout,
  listenSatisfied,
  listenTimedOut,
  listenWaitEnded,
  listenTook,
  identityTakenOtherwise,
  matchFilters,
  filterArgumentsKey,
  filterVariables,
  takenBeforeListening,
  untilKey,
  untilPending,
  withExpects,
  type Candidate,
} from '../../src/workflow/exec/listen-match.js';
import { readEvent, type ListenRecord, type WorkflowRecord } from '../../src/workflow/exec/record.js';

const at = '/do/0/wait';

const cloudEvent = (id: string, extra: JsonObject = {}): CloudEvent => ({
  specversion: '1.0',
  id,
  source: 'https://convoke.dev/test',
  type: 'com.example.order',
  ...extra,
});

type Taken = ListenRecord['events'][number];
const taken = (group: 'to' | 'until', filter: number, event: JsonValue = cloudEvent(`t-${group}-${filter}`), position = 0): Taken => ({
  event,
  group,
  filter,
  correlation: {},
  position,
});

const listenOf = (to: JsonValue, events: Taken[] = [], more: Partial<ListenRecord> = {}): ListenRecord => ({
  to,
  read: 'data',
  events,
  since: 0,
  expected: {},
  ...more,
});

/** A running instance whose task `at` runs and listens as `listen` says (only what the rules read is filled in). */
function recordOf(listen: ListenRecord | undefined, more: Partial<WorkflowRecord> = {}): WorkflowRecord {
  return {
    status: 'running',
    tasks: { [at]: { state: 'running' } },
    listens: listen ? { [at]: listen } : {},
    steps: {},
    timers: {},
    started: { deadlineMs: null },
    ...more,
  } as unknown as WorkflowRecord;
}

const filter = (type: string, extra: JsonObject = {}): JsonObject => ({ with: { type }, ...extra });

test('filtersOf: one is a list of one, all and any their lists (objects only), anything else none', () => {
  const a = filter('a');
  const b = filter('b');
  assert.deepEqual(filtersOf({ one: a }), [a]);
  assert.deepEqual(filtersOf({ all: [a, b] }), [a, b]);
  assert.deepEqual(filtersOf({ any: [a, 'x', b, null] }), [a, b]);
  assert.deepEqual(filtersOf({ any: [] }), []);
  assert.deepEqual(filtersOf({ one: 'x', any: [b] }), [b]);
  assert.deepEqual(filtersOf({ all: [a], any: [b] }), [a]);
  assert.deepEqual(filtersOf({ all: 'x', any: [b] }), [b]);
  assert.deepEqual(filtersOf({}), []);
  assert.deepEqual(filtersOf(undefined), []);
  assert.deepEqual(filtersOf([a]), []);
});

test('expectsOf, withExpects, declaredExpectations: every declared expect keyed by group, filter and name; evaluated values put back; the first filter declaring a name wins', () => {
  const any: JsonValue[] = [
    { with: { type: 'a' }, correlate: { order: { from: '.data.order', expect: '${ .order }' }, free: { from: '.data.x' } } },
    { with: { type: 'b' }, correlate: 'not an object' },
    { with: { type: 'c' }, correlate: { 'of/slash': { from: '.data.y', expect: 'y' }, order: { from: '.data.o', expect: 'second' }, odd: 3 } },
  ];
  const until: JsonValue = { one: { with: { type: 'stop' }, correlate: { order: { from: '.data.order', expect: 'u' } } } };
  const to: JsonObject = { any, until };
  assert.deepEqual(expectsOf(to), { 'to/0/order': '${ .order }', 'to/2/of/slash': 'y', 'to/2/order': 'second', 'until/0/order': 'u' });
  // `until` counts only beside `any`.
  assert.deepEqual(expectsOf({ all: any, until }), { 'to/0/order': '${ .order }', 'to/2/of/slash': 'y', 'to/2/order': 'second' });
  assert.deepEqual(expectsOf({ any: [], until: '${ true }' }), {});
  assert.deepEqual(expectsOf(null), {});

  const replaced = withExpects(to, { 'to/0/order': 42, 'until/0/order': 'U', 'to/9/none': 1, 'to/2/odd': 1 });
  assert.deepEqual(expectsOf(replaced), { 'to/0/order': 42, 'to/2/of/slash': 'y', 'to/2/order': 'second', 'until/0/order': 'U' });
  assert.equal(expectsOf(to)['to/0/order'], '${ .order }', 'the strategy given is not changed');
  assert.equal(JSON.stringify(withExpects(to, {})), JSON.stringify(to));

  assert.deepEqual(declaredExpectations(replaced), { order: 42, 'of/slash': 'y' });
  assert.deepEqual(declaredExpectations({ one: filter('a') }), {});
});

test('listenSatisfied: one and any end at the first event, all at one of each filter, an until strategy at its own events, an until expression never (the interpreter decides)', () => {
  assert.equal(listenSatisfied(listenOf({ one: filter('a') }), 0), false);
  assert.equal(listenSatisfied(listenOf({ one: filter('a') }, [taken('to', 0)]), 1), true);
  assert.equal(listenSatisfied(listenOf({ any: [filter('a'), filter('b')] }, [taken('to', 1)]), 1), true);
  assert.equal(listenSatisfied(listenOf({ any: [] }, [taken('to', 0)]), 0), false, 'only the first `count` events count');

  const all = { all: [filter('a'), filter('b'), filter('c')] };
  assert.equal(listenSatisfied(listenOf(all, [taken('to', 0), taken('to', 2)]), 2), false);
  assert.equal(listenSatisfied(listenOf(all, [taken('to', 0), taken('to', 2), taken('to', 1)]), 3), true);
  assert.equal(listenSatisfied(listenOf(all, [taken('to', 0), taken('to', 2), taken('to', 1)]), 2), false);
  assert.equal(listenSatisfied(listenOf(all, [taken('to', 0), taken('until', 1), taken('to', 2)]), 3), false, 'an until event is no event of `to`');
  assert.equal(listenSatisfied(listenOf('not a strategy', [taken('to', 0)]), 1), false);

  const untilAll = { any: [filter('a')], until: { all: [filter('x'), filter('y')] } };
  assert.equal(listenSatisfied(listenOf(untilAll, [taken('to', 0), taken('to', 0), taken('until', 0)]), 3), false, 'events of `to` do not end an any-until');
  assert.equal(listenSatisfied(listenOf(untilAll, [taken('until', 0), taken('to', 0), taken('until', 1)]), 3), true);
  assert.equal(listenSatisfied(listenOf({ any: [filter('a')], until: { one: filter('x') } }, [taken('until', 0)]), 1), true);
  assert.equal(listenSatisfied(listenOf({ any: [filter('a')], until: { one: filter('x') } }, [taken('to', 0)]), 1), false);
  assert.equal(listenSatisfied(listenOf({ any: [filter('a')], until: '${ true }' }, [taken('to', 0), taken('to', 0)]), 2), false);
  // `until` beside `all` or `one` is not read: the strategy alone decides.
  assert.equal(listenSatisfied(listenOf({ one: filter('a'), until: '${ false }' }, [taken('to', 0)]), 1), true);
  assert.equal(listenSatisfied(listenOf({ all: [filter('a')], until: { one: filter('x') } }, [taken('to', 0)]), 1), true);
});

test('untilKey: the step an until verdict is recorded under', () => {
  assert.equal(untilKey('/do/1/l[2]', 3), '/do/1/l[2]>until[3]');
});

test('listenClosed: no listen, an instance or a task no longer running, a satisfied strategy, an until verdict that held or failed', () => {
  const anyUntil = { any: [filter('a')], until: '${ length > 1 }' };
  const open = listenOf(anyUntil, [taken('to', 0), taken('to', 0)]);
  assert.equal(listenClosed(recordOf(open), at), false);
  assert.equal(listenClosed(recordOf(undefined), at), true);
  assert.equal(listenClosed(recordOf(open, { status: 'faulted' } as Partial<WorkflowRecord>), at), true);
  assert.equal(listenClosed(recordOf(open, { tasks: { [at]: { state: 'completed' } } } as unknown as Partial<WorkflowRecord>), at), true);
  assert.equal(listenClosed(recordOf(open, { tasks: {} }), at), true);
  assert.equal(listenClosed(recordOf(listenOf({ one: filter('a') }, [taken('to', 0)])), at), true);
  assert.equal(listenClosed(recordOf(listenOf({ one: filter('a') })), at), false);

  const steps = (s: Record<string, JsonValue>) => recordOf(open, { steps: s } as unknown as Partial<WorkflowRecord>);
  assert.equal(listenClosed(steps({ '/do/0/wait>until[0]': { ok: false }, '/do/0/wait>until[1]': { ok: null } }), at), false);
  assert.equal(listenClosed(steps({ '/do/0/wait>until[0]': { ok: false }, '/do/0/wait>until[1]': { ok: 0 } }), at), true, 'any value but false and null holds');
  assert.equal(listenClosed(steps({ '/do/0/wait>until[0]': { ok: '' } }), at), true);
  assert.equal(
    listenClosed(steps({ '/do/0/wait>until[1]': { error: { type: 'x', status: 400 } } }), at),
    true,
    'a failed verdict ends the listen (the task faults on it)',
  );
  assert.equal(listenClosed(steps({ '/do/0/wait>until[2]': { ok: true } }), at), false, 'only the verdicts on events taken count');
  assert.equal(listenClosed(steps({ '/do/1/wait>until[0]': { ok: true } }), at), false, 'another listen’s verdict is not this one’s');
});

test('listenTimedOut, listenWaitEnded, listenOutlivesTimeout: a fired timeout closes the listen; it faults the task unless the events taken ended the wait, or a foreach listen took events to iterate', () => {
  const anyUntil = { any: [filter('a')], until: '${ false }' };
  const timer = (state: 'armed' | 'fired') => ({ timers: { [`${at}@timeout`]: { state, dueAtMs: 10, purpose: 'task-timeout' } } });
  const task = (definition: JsonObject) => ({
    tasks: { [at]: { state: 'running', ref: '/do/0/wait' } },
    started: { deadlineMs: null, document: { do: [{ wait: definition }] } },
  });
  const listening = { listen: { to: anyUntil } };
  const iterating = { listen: { to: anyUntil }, foreach: { do: [] } };
  const record = (listen: ListenRecord | undefined, more: object) => recordOf(listen, more as Partial<WorkflowRecord>);
  const one = listenOf(anyUntil, [taken('to', 0)]);

  assert.equal(listenTimedOut(record(one, timer('fired')), at), true);
  assert.equal(listenTimedOut(record(one, timer('armed')), at), false);
  assert.equal(listenTimedOut(record(one, {}), at), false);
  assert.equal(listenClosed(record(one, timer('fired')), at), true, 'a fired timeout closes a listen still running');
  assert.equal(listenClosed(record(one, timer('armed')), at), false);

  assert.equal(listenWaitEnded(record(listenOf({ one: filter('a') }, [taken('to', 0)]), task(iterating)), at), true, 'with foreach too');
  assert.equal(listenWaitEnded(record(one, { ...task(iterating), steps: { [untilKey(at, 0)]: { ok: true } } }), at), true);
  assert.equal(listenWaitEnded(record(one, { ...task(iterating), steps: { [untilKey(at, 0)]: { ok: false } } }), at), false);
  assert.equal(listenWaitEnded(record(one, task(iterating)), at), false);
  assert.equal(listenWaitEnded(record(undefined, task(iterating)), at), false);

  assert.equal(listenOutlivesTimeout(record(one, task(iterating)), at), true, 'a foreach listen iterates what it took');
  assert.equal(listenOutlivesTimeout(record(listenOf(anyUntil), task(iterating)), at), false, 'one that took nothing faults');
  assert.equal(listenOutlivesTimeout(record(one, task(listening)), at), false, 'without foreach an open wait faults');
  assert.equal(listenOutlivesTimeout(record(listenOf({ one: filter('a') }, [taken('to', 0)]), task(listening)), at), true);
  assert.equal(listenOutlivesTimeout(record(undefined, task(iterating)), at), false);
});

test('untilPending: an open listen with an until expression waits for the verdict on the last event it took, and on nothing else', () => {
  const anyUntil = { any: [filter('a')], until: '${ false }' };
  const two = listenOf(anyUntil, [taken('to', 0), taken('to', 0)]);
  const withSteps = (listen: ListenRecord, s: Record<string, JsonValue>, more: Partial<WorkflowRecord> = {}) =>
    recordOf(listen, { steps: s, ...more } as unknown as Partial<WorkflowRecord>);
  assert.equal(untilPending(withSteps(two, { '/do/0/wait>until[0]': { ok: false } }), at), true);
  assert.equal(untilPending(withSteps(two, { '/do/0/wait>until[0]': { ok: false }, '/do/0/wait>until[1]': { ok: false } }), at), false);
  assert.equal(untilPending(withSteps(listenOf(anyUntil), {}), at), false, 'no event taken: no verdict to wait for');
  assert.equal(untilPending(withSteps(two, { '/do/0/wait>until[0]': { ok: true } }), at), false, 'a closed listen waits for nothing');
  assert.equal(untilPending(withSteps(two, {}, { status: 'cancelled' } as Partial<WorkflowRecord>), at), false);
  assert.equal(untilPending(recordOf(undefined), at), false);
  const strategyUntil = listenOf({ any: [filter('a')], until: { one: filter('x') } }, [taken('to', 0)]);
  assert.equal(untilPending(withSteps(strategyUntil, {}), at), false, 'an until strategy has no verdict');
  assert.equal(untilPending(withSteps(listenOf({ any: [filter('a')] }, []), {}), at), false);
});

test('listenTook, takenBeforeListening, identityTakenOtherwise: the same event is the same type, source, id and content; another content under the identity conflicts; an event another listen took before this one started is a retry', () => {
  const e = cloudEvent('e1', { data: 1 });
  const record = recordOf(listenOf({ any: [] }, [taken('to', 0, e, 3)], { since: 3 }));
  assert.equal(listenTook(record, at, e), true);
  assert.equal(listenTook(record, at, { ...e, data: 2 }), false, 'other data under the identity is another event');
  assert.equal(identityTakenOtherwise(record, { ...e, data: 2 }, 'outside'), true, '…which conflicts with the one taken');
  assert.equal(identityTakenOtherwise(record, { ...e, time: '2024-01-01T00:00:00Z' }, 'outside'), true, 'an attribute too');
  assert.equal(
    identityTakenOtherwise(record, { data: 1, type: e.type, id: e.id, specversion: '1.0', source: e.source }, 'outside'),
    false,
    'the order of members is not content',
  );
  assert.equal(identityTakenOtherwise(record, e, 'outside'), false);
  assert.equal(identityTakenOtherwise(record, { ...e, id: 'e2', data: 2 }, 'outside'), false);
  assert.equal(identityTakenOtherwise(record, { ...e, source: 'https://other.example', data: 2 }, 'outside'), false, 'another source is another identity');
  assert.equal(identityTakenOtherwise(record, { ...e, type: 'com.example.other', data: 2 }, 'outside'), false, 'another type too');
  assert.equal(listenTook(record, at, { ...e, id: 'e2' }), false);
  assert.equal(listenTook(record, at, { ...e, source: 'other' }), false);
  assert.equal(listenTook(record, at, { ...e, type: 'com.example.other' }), false);
  assert.equal(listenTook(record, '/do/1/wait', e), false);
  assert.equal(listenTook(recordOf(listenOf({ any: [] }, [taken('to', 0, 'not an event')])), at, e), false);

  const other = '/do/1/other';
  const two = (position: number, since: number) =>
    ({
      ...recordOf(listenOf({ any: [] }, [], { since })),
      listens: { [other]: listenOf({ any: [] }, [taken('to', 0, e, position)]), [at]: listenOf({ any: [] }, [], { since }) },
    }) as WorkflowRecord;
  assert.equal(takenBeforeListening(two(0, 1), at, e), true);
  assert.equal(takenBeforeListening(two(1, 1), at, e), false, 'taken since this listen started: offered to it too');
  assert.equal(takenBeforeListening(two(0, 1), at, { ...e, id: 'e9' }), false);
  assert.equal(takenBeforeListening(two(0, 1), '/do/9/none', e), false, 'a listen not recorded started at 0');
  // The identity is the instance's, whichever of its listens took the event: another listen that took none does not clear it.
  assert.equal(identityTakenOtherwise(two(0, 1), { ...e, data: 2 }, 'outside'), true, 'taken by another listen of the instance');

  // The identity is its senders': an event publisher's under the identity of the principal's own event is another event, and the reverse.
  const from = (sender: 'outside' | 'principal') => recordOf(listenOf({ any: [] }, [{ ...taken('to', 0, e), from: sender }]));
  assert.equal(identityTakenOtherwise(from('principal'), { ...e, data: 2 }, 'outside'), false, 'the principal’s event, a publisher’s claim');
  assert.equal(identityTakenOtherwise(from('outside'), { ...e, data: 2 }, 'principal'), false, 'a publisher’s event, the principal’s claim');
  assert.equal(identityTakenOtherwise(from('outside'), { ...e, data: 2 }, 'outside'), true, 'the same senders: a conflicting claim');
  assert.equal(identityTakenOtherwise(from('principal'), { ...e, data: 2 }, 'principal'), true);
  assert.equal(identityTakenOtherwise(record, { ...e, data: 2 }, 'principal'), true, 'taken before senders were recorded: either may have sent it');
  assert.equal(listenTook(from('outside'), at, e), true, 'the same content is the same event, whoever sends it again');
});

const evaluator = new JqWorkerEvaluator({ workers: 1, deadlineMs: 5000 });
after(() => evaluator.close());

const match = (to: JsonValue, event: CloudEvent, args?: JsonObject) =>
  matchFilters(evaluator, 'alice', recordOf(listenOf(to), args ? { steps: { [filterArgumentsKey(at)]: { ok: args } } } : {}), at, event);

test('filterVariables: the bound variables the filters of `to` and of an `until` strategy name, every one for $ARGS; never $event or $secrets', () => {
  const bound = ['context', 'workflow', 'runtime', 'task', 'input', 'item', 'event', 'secrets'];
  const to = {
    any: [{ with: { type: 'a', data: '${ .id == $input.id and $event.type == "a" }' }, correlate: { k: { from: '.data.k + $item' } } }],
    until: { one: { with: { type: 'b', subject: '${ . == $context.subject and $secrets.x == 1 }' } } },
  };
  assert.deepEqual(filterVariables(to, bound), ['context', 'input', 'item']);
  assert.deepEqual(filterVariables({ one: { with: { type: 'a' } } }, bound), []);
  assert.deepEqual(filterVariables({ one: { with: { data: '${ $ARGS.named.input }' } } }, bound), ['context', 'workflow', 'runtime', 'task', 'input', 'item']);
});

test('matchFilters: the runtime arguments recorded when the listen started are bound for its predicates and correlations, beside $event', async () => {
  const e = cloudEvent('e1', { data: { order: 7 } });
  const to = { one: { with: { data: '${ .order == $input.order and $event.id == "e1" }' }, correlate: { k: { from: '.data.order + $input.offset' } } } };
  assert.deepEqual(await match(to, e, { input: { order: 7, offset: 1 } }), [{ group: 'to', filter: 0, correlation: { k: 8 } }]);
  assert.deepEqual(await match(to, e, { input: { order: 8, offset: 1 } }), []);
  assert.deepEqual(await match(to, e), [], 'none recorded (a log written before they were): $input is not bound, and the filter matches nothing');
});

test('matchFilters: every attribute a filter names must be on the event; a string is an anchored regular expression or the same text, an expression a predicate, anything else equal', async () => {
  const e = cloudEvent('e1', { subject: 'orders/7', priority: 3, urgent: true, data: { order: 7, region: 'eu' } });
  const one = async (w: JsonObject) => (await match({ one: { with: w } }, e)).length === 1;
  assert.equal(await one({ type: 'com.example.order' }), true);
  assert.equal(await one({ type: 'com.example.order', subject: 'orders/7' }), true);
  assert.equal(await one({ type: 'com.example.order', subject: 'orders/8' }), false, 'every attribute named must match');
  assert.equal(await one({ missing: 'x' }), false);
  assert.equal(await one({ missing: '${ true }' }), false, 'an attribute the event lacks matches nothing, not even a predicate that always holds');
  for (const name of ['constructor', 'toString', '__proto__'])
    assert.equal(await one(JSON.parse(`{"${name}": "\${ true }"}`) as JsonObject), false, `an attribute named ${name} is one the event lacks`);
  assert.equal(await match({ one: { with: { constructor: '${ . == "c" }' } } }, cloudEvent('e3', { constructor: 'c' })).then((c) => c.length), 1);
  assert.equal(await one({ type: 'com\\.example\\..*' }), true);
  assert.equal(await one({ type: 'example' }), false, 'a regular expression matches the whole attribute');
  assert.equal(await one({ type: 'com.example.order|x' }), true);
  assert.equal(await one({ type: 'com.example.ord|x' }), false, 'alternatives are anchored as a group');
  assert.equal(await one({ subject: 'orders/[0-9]+' }), true);
  assert.equal(await one({ subject: 'orders/[' }), false, 'a bad regular expression matches nothing');
  assert.equal(await one({ priority: '3' }), false, 'a string never matches a number');
  assert.equal(await one({ priority: 3 }), true);
  assert.equal(await one({ priority: 4 }), false);
  assert.equal(await one({ urgent: true }), true);
  assert.equal(await one({ data: { order: 7, region: 'eu' } }), true);
  assert.equal(await one({ data: { order: 7 } }), false);
  assert.equal(await one({ priority: '${ . > 2 }' }), true);
  assert.equal(await one({ priority: '${ . > 3 }' }), false);
  assert.equal(await one({ priority: '${ null }' }), false);
  assert.equal(await one({ priority: '${ 0 }' }), true, 'any value but false and null holds');
  assert.equal(await one({ subject: '${ $event.data.region == "eu" }' }), true, '`$event` is the whole event');
  assert.equal(await one({ subject: '${ error("no") }' }), false, 'a predicate that fails matches nothing');
  assert.equal(await one({ subject: 'orders/(' }), false);
  assert.equal(await match({ one: { with: 'x' } }, e).then((c) => c.length), 1, 'a filter without attributes matches every event');
  // A string equal to the attribute matches even when it is no valid regular expression.
  assert.equal(await one({ subject: 'orders/(' }), false);
  const paren = cloudEvent('e2', { subject: 'a(b' });
  assert.equal((await match({ one: { with: { subject: 'a(b' } } }, paren)).length, 1);
});

test('matchFilters: correlate.<name>.from extracts from the event; a correlation without from, or one that fails, refuses the filter', async () => {
  const e = cloudEvent('e1', { data: { order: 7, region: 'eu' } });
  assert.deepEqual(
    await match(
      { one: { with: { type: 'com.example.order' }, correlate: { order: { from: '.data.order' }, both: { from: '${ .data.region + $event.id }' } } } },
      e,
    ),
    [{ group: 'to', filter: 0, correlation: { order: 7, both: 'eue1' } }],
  );
  assert.deepEqual(await match({ one: { correlate: { order: { expect: 7 } } } }, e), []);
  assert.deepEqual(await match({ one: { correlate: { order: 'x' } } }, e), []);
  assert.deepEqual(await match({ one: { correlate: { order: { from: '${ error("no") }' } } } }, e), []);
  assert.deepEqual(await match({ one: { correlate: 'x' } }, e), [{ group: 'to', filter: 0, correlation: {} }]);
});

test('matchFilters: until’s filters first, then to’s, each that matches with its index; any: [] matches every event; an until expression has no filters', async () => {
  const e = cloudEvent('e1', { subject: 's' });
  const other = cloudEvent('e2', { type: 'com.example.other' });
  const to = {
    any: [filter('com.example.other'), filter('com.example.order'), { with: { subject: 's' } }],
    until: { any: [filter('x'), filter('com.example.order')] },
  };
  assert.deepEqual(await match(to, e), [
    { group: 'until', filter: 1, correlation: {} },
    { group: 'to', filter: 1, correlation: {} },
    { group: 'to', filter: 2, correlation: {} },
  ]);
  assert.deepEqual(await match(to, other), [{ group: 'to', filter: 0, correlation: {} }]);
  assert.deepEqual(await match({ any: [], until: { any: [] } }, e), [
    { group: 'until', filter: 0, correlation: {} },
    { group: 'to', filter: 0, correlation: {} },
  ]);
  assert.deepEqual(await match({ any: [], until: '${ true }' }, e), [{ group: 'to', filter: 0, correlation: {} }]);
  assert.deepEqual(await match({ all: [] }, e), [], 'only any: [] listens to every event');
  assert.deepEqual(await match({ all: [filter('com.example.order')], until: { one: filter('com.example.order') } }, e), [
    { group: 'to', filter: 0, correlation: {} },
  ]);
});

const candidate = (group: 'to' | 'until', filter: number, correlation: Record<string, JsonValue> = {}): Candidate => ({ group, filter, correlation });

test('decideListenEvent: the first candidate that fits is taken, before the deadline and the task’s timeout, as listen-event', () => {
  const e = cloudEvent('e1');
  const record = recordOf(listenOf({ any: [filter('a'), filter('b')] }));
  assert.deepEqual(decideListenEvent(record, at, e, 'principal', [candidate('to', 1, { k: 1 }), candidate('to', 0)]), {
    events: [{ type: 'listen-event-received', v: 1, at, event: e, group: 'to', filter: 1, correlation: { k: 1 }, from: 'principal' }],
    timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER },
    causation: { command: 'listen-event' },
  });
  assert.equal(decideListenEvent(record, at, e, 'outside', []), undefined);

  const guard = (deadlineMs: number | null, timeoutAtMs: number | undefined) =>
    decideListenEvent(
      recordOf(listenOf({ any: [] }), {
        started: { deadlineMs },
        timers: timeoutAtMs === undefined ? {} : { [`${at}@timeout`]: { dueAtMs: timeoutAtMs, purpose: 'task-timeout', state: 'armed' } },
      } as unknown as Partial<WorkflowRecord>),
      at,
      e,
      'outside',
      [candidate('to', 0)],
    )?.timeGuard.notAfterMs;
  assert.equal(guard(5000, undefined), 5000);
  assert.equal(guard(null, 3000), 3000);
  assert.equal(guard(5000, 3000), 3000);
  assert.equal(guard(2000, 3000), 2000);
  assert.equal(guard(null, undefined), Number.MAX_SAFE_INTEGER);
});

test('decideListenEvent: nothing is taken by a closed listen, one waiting for its until verdict, or an event taken already', () => {
  const e = cloudEvent('e1');
  const c = [candidate('to', 0)];
  assert.equal(decideListenEvent(recordOf(listenOf({ one: filter('a') }, [taken('to', 0)])), at, e, 'outside', c), undefined, 'satisfied');
  assert.equal(decideListenEvent(recordOf(listenOf({ one: filter('a') }), { status: 'completed' } as Partial<WorkflowRecord>), at, e, 'outside', c), undefined);
  const anyUntil = listenOf({ any: [filter('a')], until: '${ false }' }, [taken('to', 0)]);
  assert.equal(decideListenEvent(recordOf(anyUntil), at, e, 'outside', c), undefined, 'the verdict on the last event is not recorded');
  assert.ok(decideListenEvent(recordOf(anyUntil, { steps: { [`${at}>until[0]`]: { ok: false } } } as unknown as Partial<WorkflowRecord>), at, e, 'outside', c));
  assert.equal(decideListenEvent(recordOf(listenOf({ any: [] }, [taken('to', 0, e)])), at, e, 'outside', c), undefined, 'taken by this listen');
  const before = {
    ...recordOf(undefined),
    listens: { '/do/0/first': listenOf({ any: [] }, [taken('to', 0, e, 0)]), [at]: listenOf({ any: [] }, [], { since: 1 }) },
  } as WorkflowRecord;
  assert.equal(decideListenEvent(before, at, e, 'outside', c), undefined, 'taken by another listen before this one started');
  const since = { ...before, listens: { ...before.listens, [at]: listenOf({ any: [] }, [], { since: 0 }) } } as WorkflowRecord;
  assert.ok(decideListenEvent(since, at, e, 'outside', c), 'taken by another listen since this one started');
});

test('decideListenEvent: an all filter already satisfied is passed over (per group); an any filter takes again', () => {
  const e = cloudEvent('e9');
  const chosen = (listen: ListenRecord, candidates: Candidate[]) => {
    const events = decideListenEvent(recordOf(listen), at, e, 'outside', candidates)?.events[0] as { group: string; filter: number } | undefined;
    return events && `${events.group}/${events.filter}`;
  };
  const all = { all: [filter('a'), filter('b'), filter('c')] };
  assert.equal(chosen(listenOf(all, [taken('to', 0)]), [candidate('to', 0), candidate('to', 2)]), 'to/2');
  assert.equal(chosen(listenOf(all, [taken('to', 0)]), [candidate('to', 0)]), undefined);
  assert.equal(chosen(listenOf(all, [taken('to', 1)]), [candidate('to', 0)]), 'to/0', 'another filter taken does not pass this one over');
  const anyUntilAll = { any: [filter('a')], until: { all: [filter('x'), filter('y')] } };
  assert.equal(chosen(listenOf(anyUntilAll, [taken('to', 0), taken('until', 0)]), [candidate('to', 0)]), 'to/0', 'an any filter takes any number of events');
  assert.equal(chosen(listenOf(anyUntilAll, [taken('to', 0), taken('until', 0)]), [candidate('until', 0), candidate('until', 1)]), 'until/1');
  assert.equal(chosen(listenOf(anyUntilAll, [taken('until', 0)]), [candidate('until', 0), candidate('to', 0)]), 'to/0');
  const anyUntilAny = { any: [filter('a')], until: { any: [filter('x'), filter('y')] } };
  assert.equal(
    chosen(listenOf({ ...anyUntilAny, until: { all: [filter('x'), filter('y')] } }, [taken('to', 0)]), [candidate('until', 0)]),
    'until/0',
    'a `to` event does not satisfy an until filter',
  );
  assert.equal(
    chosen(listenOf({ any: [filter('a'), filter('b')], until: '${ false }' }, [taken('to', 1)], {}), [candidate('to', 1)]),
    undefined,
    'waits for the verdict',
  );
});

test('decideListenEvent: a correlation value must equal the declared expect, else the first value taken under that name; names without an expectation take any value', () => {
  const e = cloudEvent('e9');
  const fits = (listen: ListenRecord, correlation: Record<string, JsonValue>) =>
    decideListenEvent(recordOf(listen), at, e, 'outside', [candidate('to', 0, correlation)]) !== undefined;
  const declared = { any: [{ correlate: { order: { from: '.data.order', expect: { id: 7 } } } }] };
  assert.equal(fits(listenOf(declared), { order: { id: 7 } }), true);
  assert.equal(fits(listenOf(declared), { order: { id: 8 } }), false);
  assert.equal(fits(listenOf(declared), { order: { id: 7 }, other: 'x' }), true);
  assert.equal(
    fits(listenOf(declared, [], { expected: { order: { id: 8 } } }), { order: { id: 7 } }),
    true,
    'a declared expect, not a value taken, is the expectation',
  );
  assert.equal(fits(listenOf({ any: [filter('a')] }, [], { expected: { order: 'A' } }), { order: 'A' }), true);
  assert.equal(fits(listenOf({ any: [filter('a')] }, [], { expected: { order: 'A' } }), { order: 'B' }), false);
  assert.equal(fits(listenOf({ any: [filter('a')] }, [], { expected: { order: 'A' } }), { region: 'B' }), true);
  assert.equal(
    fits(listenOf({ any: [filter('a')] }, [], { expected: { order: 'A', region: 'eu' } }), { order: 'A', region: 'us' }),
    false,
    'every correlation must fit',
  );
  // A correlation named like an Object.prototype property is no expectation unless one was recorded.
  assert.equal(fits(listenOf({ any: [filter('a')] }), { toString: 'x', constructor: 1 }), true);
  // The first candidate that fits is taken: a later one that fits too is not.
  const two = decideListenEvent(recordOf(listenOf({ any: [filter('a'), filter('b')] }, [], { expected: { k: 1 } })), at, e, 'outside', [
    candidate('to', 0, { k: 2 }),
    candidate('to', 1, { k: 1 }),
  ]);
  assert.equal((two?.events[0] as { filter: number }).filter, 1);
});

test('readEvent: envelope is the event, data and raw its data, else its base64 text, else null', () => {
  const e = cloudEvent('e1', { data: { a: 1 }, data_base64: 'AA==' });
  assert.deepEqual(readEvent(e, 'envelope'), e);
  assert.deepEqual(readEvent(e, 'data'), { a: 1 });
  assert.deepEqual(readEvent(e, 'raw'), { a: 1 });
  assert.equal(readEvent(cloudEvent('e2', { data_base64: 'AA==' }), 'raw'), 'AA==');
  assert.equal(readEvent(cloudEvent('e2', { data: false, data_base64: 'AA==' }), 'data'), false);
  assert.equal(readEvent(cloudEvent('e3'), 'data'), null);
  assert.equal(readEvent('text', 'data'), null);
  assert.equal(readEvent(null, 'raw'), null);
  assert.equal(readEvent('text', 'envelope'), 'text');
});

test('decideListenEvent: a filter’s own expect is its expectation, even where an earlier filter declares another for the same name; a filter without one takes the name’s', () => {
  const correlate = (expect?: string): JsonObject => ({ k: expect === undefined ? { from: '.data.k' } : { from: '.data.k', expect } });
  const to: JsonObject = {
    any: [
      { with: { type: 'a' }, correlate: correlate('1') },
      { with: { type: 'b' }, correlate: correlate('2') },
      { with: { type: 'c' }, correlate: correlate() },
    ],
    until: { one: { with: { type: 'stop' }, correlate: correlate('3') } },
  };
  const fits = (group: 'to' | 'until', index: number, k: string) =>
    decideListenEvent(recordOf(listenOf(to)), at, cloudEvent('e1'), 'outside', [candidate(group, index, { k })]) !== undefined;
  assert.equal(fits('to', 1, '2'), true, 'the second filter’s own expect');
  assert.equal(fits('to', 1, '1'), false);
  assert.equal(fits('to', 0, '1'), true);
  assert.equal(fits('to', 0, '2'), false);
  assert.equal(fits('until', 0, '3'), true, 'until’s filter 0 is not to’s');
  assert.equal(fits('until', 0, '1'), false);
  assert.equal(fits('to', 2, '1'), true, 'without its own expect: the first filter declaring the name');
  assert.equal(fits('to', 2, '2'), false);
});
