/**
 * checkDocument answers a document object it already accepted from a WeakMap: the same name as
 * the whole check, and a refused document is refused again every time (refusals are not kept).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isAdapterError } from '../../src/contract/errors.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { validateDslDocument } from '../../src/workflow/dsl/dsl-schema.js';
import { limits } from '../../src/contract/limits.js';
import { checkDocument } from '../../src/workflow/exec/document.js';
import { refused, yaml } from './support.js';

const head = { dsl: '1.0.3', namespace: 'test', name: 'greet', version: '1.0.0' };

/** A document whose one try retries a failing task under `retry` (inline, or a name `use` declares). */
const retrying = (retry: string, use = '') =>
  yaml(`
document: { dsl: '1.0.3', namespace: t, name: retrying, version: '1.0.0' }
${use}
do:
  - attempt:
      try:
        - fail: { raise: { error: { type: 'https://e.example/x', status: 503 } } }
      catch:
        retry: ${retry}
`);

test('a document checked again answers what the whole check answered; a copy is checked afresh', () => {
  const document: JsonValue = { document: head, do: [{ hello: { set: { greeting: '${ .name }' } } }] };
  const first = checkDocument(document);
  assert.equal(first, 'greet');
  assert.equal(checkDocument(document), first);
  assert.equal(checkDocument(structuredClone(document)), first);
});

test('a refused document is refused each time it is checked', () => {
  const document: JsonValue = { document: head, do: [{ clock: { set: { at: '${ now }' } } }] };
  for (let i = 0; i < 3; i++)
    assert.throws(
      () => checkDocument(document),
      (e: unknown) => isAdapterError(e) && e.kind === 'unsupported' && (e.description ?? '').includes('now'),
    );
});

test("the executor's check refuses what the bundle's refuses: non-deterministic jq inside string interpolation, module loading, the program's arguments", () => {
  const refused: [string, string][] = [
    ['${ "at \\(now)" }', 'now'],
    ['${ "\\(env.HOME)" }', 'env'],
    ['${ import "m" as m; 1 }', 'import'],
    ['${ include "m"; 1 }', 'include'],
    ['${ $__prog_args }', '$__prog_args'],
    ['${ get_jq_origin }', 'get_jq_origin'],
    ['${ [limit(1; inputs)] }', 'inputs'],
  ];
  for (const [expression, name] of refused) {
    const document: JsonValue = { document: head, do: [{ stamp: { set: { at: expression } } }] };
    assert.throws(
      () => checkDocument(document),
      (e: unknown) =>
        isAdapterError(e) &&
        e.kind === 'unsupported' &&
        (e.description ?? '').startsWith('/do/0/stamp/set/at: ') &&
        (e.description ?? '').includes(`"${name}"`),
      expression,
    );
  }
  // Names that only look like the builtins run: a field, an object key, text in a string.
  for (const expression of ['${ .now }', '${ {now: .a} }', '${ "now or never" }', '${ . as $now | $now }'])
    assert.equal(checkDocument({ document: head, do: [{ stamp: { set: { at: expression } } }] }), 'greet', expression);
});

test('a document whose forks run more than workflowConcurrentTasksMax tasks at once is refused before it starts, naming the bound', () => {
  const max = limits.workflowConcurrentTasksMax;
  const fork = (branches: JsonValue[]): JsonValue => ({ fork: { branches: branches.map((task, index) => ({ [`b${index}`]: task })) } });
  const leaves = (n: number): JsonValue[] => Array.from({ length: n }, () => ({ set: { ok: true } }));
  const side = Math.sqrt(max);
  assert.ok(Number.isInteger(side), 'the bound is a square: forks of side × side reach it exactly');
  const accepted: JsonValue[] = [
    fork(leaves(max)),
    // Nested forks add their branches up: side forks of side branches each.
    fork(Array.from({ length: side }, () => fork(leaves(side)))),
    // One fork after another runs one at a time; a for runs its body one iteration at a time.
    { do: [{ a: fork(leaves(max)) }, { b: fork(leaves(max)) }] },
    { for: { in: '${ .items }' }, do: [{ f: fork(leaves(max)) }] },
  ];
  for (const task of accepted) assert.equal(checkDocument({ document: head, do: [{ t: task }] }), 'greet');
  const refused: [JsonValue, number][] = [
    [fork(leaves(max + 1)), max + 1],
    [fork([...Array.from({ length: side }, () => fork(leaves(side))), { set: {} }]), max + 1],
    [{ try: [{ f: fork(leaves(max + 1)) }], catch: { do: [] } }, max + 1],
    [{ for: { in: '${ .items }' }, do: [{ f: fork(Array.from({ length: side + 1 }, () => fork(leaves(side)))) }] }, max + side],
    [{ listen: { to: { one: { with: { type: 'x.y' } } } }, foreach: { do: [{ f: fork(leaves(max + 1)) }] } }, max + 1],
  ];
  for (const [task, count] of refused)
    assert.throws(
      () => checkDocument({ document: head, do: [{ t: task }] }),
      (e: unknown) =>
        isAdapterError(e) &&
        e.kind === 'invalid-input' &&
        (e.description ?? '').includes(`run ${count} tasks at once`) &&
        (e.description ?? '').includes(`at most ${max} at once`),
    );
});

test("a document declaring more than workflowTasksMax tasks, in whatever lists, is refused before it starts, as the bundle's check refuses it", () => {
  const max = limits.workflowTasksMax;
  const sets = (n: number, prefix: string): JsonValue[] => Array.from({ length: n }, (_, index) => ({ [`${prefix}${index}`]: { set: { ok: true } } }));
  assert.equal(checkDocument({ document: head, do: sets(max, 't') }), 'greet');
  // max tasks in all: a try (1), its list (half) and its catch's (the rest).
  const half = max / 2;
  const nested = (extra: number): JsonValue => ({
    document: head,
    do: [{ guarded: { try: sets(half, 'a'), catch: { do: sets(half - 1 + extra, 'c') } } }],
  });
  assert.equal(checkDocument(nested(0)), 'greet');
  refused(() => checkDocument({ document: head, do: sets(max + 1, 't') }), 'invalid-input', `/do/${max}/t${max}`, new RegExp(`at most ${max} tasks`));
  refused(() => checkDocument(nested(1)), 'invalid-input', `/do/0/guarded/catch/do/${half - 1}/c${half - 1}`, new RegExp(`at most ${max} tasks`));
});

test('every duration the interpreter reads as written is checked before anything runs: a timeout, a retry policy, a constant wait', () => {
  const check = (document: Record<string, JsonValue>) => () => checkDocument({ document: head, ...document });
  const task = (definition: Record<string, JsonValue>) => ({ do: [{ t: { wait: 'PT1S', ...definition } }] });
  const tried = (retry: JsonValue) => ({ do: [{ t: { try: [{ x: { set: {} } }], catch: { retry } } }] });
  const accepted: Record<string, JsonValue>[] = [
    task({ timeout: { after: 'PT0.5S' } }),
    task({ timeout: { after: { days: 1, milliseconds: 1 } } }),
    { use: { timeouts: { short: { after: 'P2DT3H' } } }, ...task({ timeout: 'short' }) },
    task({ wait: '${ .d }' }),
    task({ wait: 'PT0S' }),
    tried({ delay: 'PT1S', backoff: { exponential: {} }, limit: { duration: 'PT1M', attempt: { count: 3 } }, jitter: { from: 'PT0S', to: 'PT1S' } }),
    { use: { retries: { again: { delay: { seconds: 1 } } } }, ...tried('again') },
    { timeout: { after: 'PT1H' }, do: [{ t: { set: {} } }] },
  ];
  for (const document of accepted) assert.equal(check(document)(), 'greet', JSON.stringify(document));
  const refused: [Record<string, JsonValue>, 'invalid-input' | 'unsupported', string][] = [
    // Durations the DSL allows and this executor does not read: before, the timeout was none.
    [task({ timeout: { after: 'P1Y' } }), 'unsupported', '/do/0/t/timeout/after'],
    [task({ timeout: { after: 'P1M' } }), 'unsupported', '/do/0/t/timeout/after'],
    [task({ wait: 'P2W' }), 'unsupported', '/do/0/t/wait'],
    // Not durations, or none a timer records: before, no timeout, no delay, no limit.
    [task({ timeout: { after: '${ .t }' } }), 'unsupported', '/do/0/t/timeout/after'],
    [task({ timeout: { after: { milliseconds: -1 } } }), 'invalid-input', '/do/0/t/timeout/after'],
    // Outside the schema's inline duration (integers, lowercase keys, at least one): before, read as 1.5 ms, 1 s and 0 ms.
    [task({ timeout: { after: { days: 1, milliseconds: 1.5 } } }), 'invalid-input', '/do/0/t/timeout/after'],
    [task({ wait: { Seconds: 1 } }), 'invalid-input', '/do/0/t/wait'],
    [{ use: { retries: { again: { delay: {} } } }, ...tried('again') }, 'invalid-input', '/use/retries/again/delay'],
    [task({ timeout: { after: 'P999999999999D' } }), 'invalid-input', '/do/0/t/timeout/after'],
    [task({ timeout: 'missing' }), 'invalid-input', '/do/0/t/timeout'],
    [task({ wait: { minutes: 'ten' } }), 'invalid-input', '/do/0/t/wait'],
    [tried({ delay: 'soon' }), 'invalid-input', '/do/0/t/catch/retry/delay'],
    [tried({ delay: 'PT1S', limit: { duration: 'P1W' } }), 'unsupported', '/do/0/t/catch/retry/limit/duration'],
    [tried({ jitter: { from: 'PT0S', to: 'P1Y' } }), 'unsupported', '/do/0/t/catch/retry/jitter/to'],
    [tried('missing'), 'invalid-input', '/do/0/t/catch/retry'],
    // A name Object.prototype has is declared only by use itself.
    [{ use: { timeouts: { short: { after: 'PT1S' } } }, ...task({ timeout: 'constructor' }) }, 'invalid-input', '/do/0/t/timeout'],
    [{ use: { retries: { again: { delay: { seconds: 1 } } } }, ...tried('toString') }, 'invalid-input', '/do/0/t/catch/retry'],
    [{ use: { retries: { again: { delay: 'P1W' } } }, ...tried('again') }, 'unsupported', '/use/retries/again/delay'],
    [{ use: { timeouts: { long: { after: 'P1Y' } } }, ...task({}) }, 'unsupported', '/use/timeouts/long/after'],
    [{ timeout: { after: 'P1Y' }, do: [{ t: { set: {} } }] }, 'unsupported', '/timeout/after'],
  ];
  for (const [document, kind, pointer] of refused)
    assert.throws(check(document), (e: unknown) => {
      assert.ok(isAdapterError(e), String(e));
      assert.equal(e.kind, kind, e.message);
      assert.ok(e.description?.startsWith(`${pointer}:`), `names ${pointer}: ${e.message}`);
      return true;
    });
});

test("a flow directive or a raised error's name that names nothing is refused before anything runs, as the bundle's check refuses it", () => {
  const document = (tasks: string, use = '') =>
    yaml(`
document: { dsl: '1.0.3', namespace: t, name: flow, version: '1.0.0' }
${use}
do:
${tasks}
`);
  refused(
    () => checkDocument(document(`  - a: { set: { x: 1 }, then: b }\n  - c: { set: { y: 2 } }`)),
    'invalid-input',
    '/do/0/a/then',
    /"b" names no task of its own list/,
  );
  // A case's target is a task of the list that holds the switch, never one nested elsewhere.
  refused(
    () =>
      checkDocument(
        document(`  - pick:
      switch:
        - big: { when: '\${ .n > 1 }', then: inner }
        - other: { then: end }
  - outer:
      do:
        - inner: { set: { z: 3 } }`),
      ),
    'invalid-input',
    '/do/0/pick/switch/0/big/then',
  );
  refused(
    () => checkDocument(document(`  - fail: { raise: { error: missing } }`, `use: { errors: { known: { type: 'https://e.example/x', status: 400 } } }`)),
    'invalid-input',
    '/do/0/fail/raise/error',
    /"missing" names no entry of use.errors/,
  );
  refused(
    () => checkDocument(document(`  - fail: { raise: { error: constructor } }`, `use: { errors: { known: { type: 'https://e.example/x', status: 400 } } }`)),
    'invalid-input',
    '/do/0/fail/raise/error',
    /"constructor" names no entry of use.errors/,
  );
  refused(() => checkDocument(document(`  - a: { set: { x: 1 }, then: constructor }`)), 'invalid-input', '/do/0/a/then', /"constructor" names no task/);
  // What they may name: a task of the same list (itself included), continue, exit, end; a declared error.
  checkDocument(
    document(
      `  - a: { set: { x: 1 }, then: c }
  - b: { set: { y: 2 }, then: exit }
  - c:
      switch:
        - again: { when: '\${ .x < 1 }', then: c }
        - done: { then: end }
  - d: { raise: { error: known } }`,
      `use: { errors: { known: { type: 'https://e.example/x', status: 400 } } }`,
    ),
  );
});

test("a retry policy's limit.attempt.duration, which the executor does not run, is refused unsupported rather than ignored", () => {
  refused(
    () => checkDocument(retrying(`{ limit: { attempt: { count: 3, duration: PT1S } } }`)),
    'unsupported',
    '/do/0/attempt/catch/retry/limit/attempt/duration',
  );
  refused(
    () => checkDocument(retrying('again', `use: { retries: { again: { limit: { attempt: { duration: { seconds: 1 } } } } } }`)),
    'unsupported',
    '/use/retries/again/limit/attempt/duration',
  );
  checkDocument(retrying(`{ limit: { attempt: { count: 3 }, duration: PT1S } }`));
});

test("a retry policy's limit.attempt.count that is no integer, or a limit the DSL's schema refuses, is refused naming its pointer before anything runs, as the DSL's schema refuses it", async () => {
  const inline = '/do/0/attempt/catch/retry/limit';
  for (const count of ['1.5', "'3'", 'null', 'true', '[3]', '{ n: 3 }']) {
    refused(() => checkDocument(retrying(`{ limit: { attempt: { count: ${count} } } }`)), 'invalid-input', `${inline}/attempt/count`, /an integer/);
    await assert.rejects(validateDslDocument(retrying(`{ limit: { attempt: { count: ${count} } } }`) as JsonObject, ''), count);
  }
  refused(
    () => checkDocument(retrying('again', `use: { retries: { again: { limit: { attempt: { count: 2.5 } } } } }`)),
    'invalid-input',
    '/use/retries/again/limit/attempt/count',
    /an integer/,
  );
  // A limit, or its attempt, that is no object or holds a key the DSL does not define would be no limit at all.
  refused(() => checkDocument(retrying(`{ limit: 3 }`)), 'invalid-input', inline);
  refused(() => checkDocument(retrying(`{ limit: { attempt: 3 } }`)), 'invalid-input', `${inline}/attempt`);
  refused(() => checkDocument(retrying(`{ limit: { attempts: { count: 3 } } }`)), 'invalid-input', `${inline}/attempts`);
  refused(() => checkDocument(retrying(`{ limit: { attempt: { max: 3 } } }`)), 'invalid-input', `${inline}/attempt/max`);
  // An attempt.duration that is no duration is invalid before it is unsupported.
  refused(() => checkDocument(retrying(`{ limit: { attempt: { duration: 5 } } }`)), 'invalid-input', `${inline}/attempt/duration`);
  // What the schema allows and convoke runs: an integer from 0, written as 3 or 3.0.
  for (const count of ['0', '3', '3.0', '9007199254740993']) {
    assert.equal(checkDocument(retrying(`{ limit: { attempt: { count: ${count} } } }`)), 'retrying', count);
    await validateDslDocument(retrying(`{ limit: { attempt: { count: ${count} } } }`) as JsonObject, '');
  }
  assert.equal(checkDocument(retrying('again', `use: { retries: { again: { limit: { attempt: { count: 2 } } } } }`)), 'retrying');
});

test("a retry policy's count below zero, which the DSL's schema allows, is refused naming its pointer before anything runs, inline and in use.retries; so is every negative duration in a policy", async () => {
  const inline = '/do/0/attempt/catch/retry';
  for (const count of ['-1', '-3.0', '-9007199254740993']) {
    refused(() => checkDocument(retrying(`{ limit: { attempt: { count: ${count} } } }`)), 'invalid-input', `${inline}/limit/attempt/count`, /at least 0/);
    refused(
      () => checkDocument(retrying('again', `use: { retries: { again: { limit: { attempt: { count: ${count} } } } } }`)),
      'invalid-input',
      '/use/retries/again/limit/attempt/count',
      /at least 0/,
    );
    // The schema's count is any integer: the refusal is convoke's own.
    await validateDslDocument(retrying(`{ limit: { attempt: { count: ${count} } } }`) as JsonObject, '');
  }
  // A duration below zero is no duration (the schema's inline amounts are any integer, its ISO 8601 form has no sign).
  const negative: [string, string][] = [
    ['{ delay: { seconds: -1 } }', '/delay'],
    ['{ delay: { seconds: 2, milliseconds: -1 } }', '/delay'],
    ['{ delay: PT1S, backoff: { exponential: {} }, limit: { duration: { minutes: -1 } } }', '/limit/duration'],
    ['{ limit: { duration: -PT1M } }', '/limit/duration'],
    ['{ jitter: { from: { seconds: -1 }, to: PT1S } }', '/jitter/from'],
    ['{ jitter: { from: PT0S, to: { milliseconds: -5 } } }', '/jitter/to'],
  ];
  for (const [policy, at] of negative) {
    refused(() => checkDocument(retrying(policy)), 'invalid-input', `${inline}${at}`, /not a duration/);
    refused(() => checkDocument(retrying('again', `use: { retries: { again: ${policy} } }`)), 'invalid-input', `/use/retries/again${at}`, /not a duration/);
  }
});

test("a retry policy the DSL's schema refuses (an unknown key, a backoff not exactly one of constant, linear, exponential, a when that is no string, a jitter without both ends) is refused naming its pointer before anything runs, inline and in use.retries, as the schema refuses it", async () => {
  const cases: [string, string, RegExp][] = [
    // A misspelt limit was no limit at all: the try retried for good.
    ['{ limits: { attempt: { count: 3 } } }', '/limits', /not a key of a retry policy/],
    ['{ delay: PT1S, Backoff: { linear: {} } }', '/Backoff', /not a key of a retry policy/],
    ['{ backoff: 3 }', '/backoff', /exactly one of constant, linear, exponential/],
    ['{ backoff: null }', '/backoff', /exactly one of/],
    ['{ backoff: {} }', '/backoff', /exactly one of/],
    ['{ backoff: { constant: {}, linear: {} } }', '/backoff', /exactly one of/],
    ['{ backoff: { linear: {}, exponential: {} } }', '/backoff', /exactly one of/],
    ['{ backoff: { exponential: {}, factor: 2 } }', '/backoff/factor', /not a key of a backoff/],
    ['{ backoff: { Exponential: {} } }', '/backoff/Exponential', /not a key of a backoff/],
    ['{ backoff: { constant: 1 } }', '/backoff/constant', /an object/],
    ['{ backoff: { linear: true } }', '/backoff/linear', /an object/],
    ['{ backoff: { exponential: null } }', '/backoff/exponential', /an object/],
    ['{ backoff: { exponential: [] } }', '/backoff/exponential', /an object/],
    ['{ when: true }', '/when', /a runtime expression/],
    ['{ when: null }', '/when', /a runtime expression/],
    ['{ exceptWhen: 1 }', '/exceptWhen', /a runtime expression/],
    ['{ delay: 5 }', '/delay', /not a duration/],
    ['{ delay: null }', '/delay', /not a duration/],
    ['{ jitter: { from: PT1S } }', '/jitter/to', /both/],
    ['{ jitter: { to: PT1S } }', '/jitter/from', /both/],
    ['{ jitter: {} }', '/jitter/from', /both/],
    ['{ jitter: { from: PT0S, to: PT1S, max: PT2S } }', '/jitter/max', /not a key of a jitter/],
    ['{ jitter: [] }', '/jitter', /from, to/],
  ];
  for (const [policy, at, says] of cases) {
    refused(() => checkDocument(retrying(policy)), 'invalid-input', `/do/0/attempt/catch/retry${at}`, says);
    refused(() => checkDocument(retrying('again', `use: { retries: { again: ${policy} } }`)), 'invalid-input', `/use/retries/again${at}`, says);
    await assert.rejects(validateDslDocument(retrying(policy) as JsonObject, ''), policy);
  }
  // What the schema accepts is accepted: each backoff alone, whatever its object holds; a when with or without `${ }`.
  for (const policy of [
    '{}',
    '{ backoff: { constant: {} } }',
    '{ backoff: { linear: { anything: 1 } } }',
    '{ delay: PT1S, backoff: { exponential: {} }, limit: { attempt: { count: 3 }, duration: PT1M }, jitter: { from: PT0S, to: { seconds: 1 } } }',
    "{ when: '${ .status == 503 }', exceptWhen: '.status == 400' }",
    '{ jitter: { from: PT2S, to: PT1S } }',
  ]) {
    assert.equal(checkDocument(retrying(policy)), 'retrying', policy);
    assert.equal(checkDocument(retrying('again', `use: { retries: { again: ${policy} } }`)), 'retrying', policy);
    await validateDslDocument(retrying(policy) as JsonObject, '');
  }
});

test("a catch the DSL's schema refuses (an unknown key, a when, exceptWhen or as that is no string, errors that are no object) is refused naming its pointer before anything runs, as the schema refuses it", async () => {
  const catching = (catchPart: string) =>
    yaml(`
document: { dsl: '1.0.3', namespace: t, name: catching, version: '1.0.0' }
do:
  - attempt:
      try:
        - fail: { raise: { error: { type: 'https://e.example/x', status: 503 } } }
      catch: ${catchPart}
`);
  const cases: [string, string, RegExp][] = [
    // Each was ignored, so the catch took every error.
    ['{ whne: .status == 503 }', '/whne', /not a key of a catch/],
    ['{ when: true }', '/when', /a runtime expression/],
    ['{ exceptWhen: 1 }', '/exceptWhen', /a runtime expression/],
    ['{ as: 3 }', '/as', /a name \(a string\)/],
    ['{ errors: 3 }', '/errors', /an object/],
    ['{ errors: { with: 3 } }', '/errors/with', /an object/],
    ['3', '', /a catch is an object/],
  ];
  for (const [part, at, says] of cases) {
    refused(() => checkDocument(catching(part)), 'invalid-input', `/do/0/attempt/catch${at}`, says);
    await assert.rejects(validateDslDocument(catching(part) as JsonObject, ''), part);
  }
  for (const part of [
    '{}',
    "{ errors: { with: { status: 503 } }, as: failure, when: '${ .status == 503 }', exceptWhen: '.status == 400', do: [ { ok: { set: { ok: true } } } ] }",
  ]) {
    assert.equal(checkDocument(catching(part)), 'catching', part);
    await validateDslDocument(catching(part) as JsonObject, '');
  }
});
