/**
 * The non-deterministic jq refusal: the hand-written lexer finds refused builtins in code and in
 * string interpolations, and ignores them in string literals, comments, field names and object keys.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { isAdapterError } from '../../src/contract/errors.js';
import { JqWorkerEvaluator, pathValue } from '../../src/workflow/exec/jq.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { checkDocument } from '../../src/workflow/exec/document.js';
import { evaluateValue, expressionResults, withResults } from '../../src/workflow/exec/expressions.js';
import { checkDeterministicJq, checkDeterministicText, embeddedExpressions, nondeterministicJq, refusedInJq } from '../../src/workflow/jq-determinism.js';

test('each refused builtin is found in code, alone or in a pipe', () => {
  for (const name of ['now', 'env', 'input', 'inputs', 'debug', 'stderr', 'halt', 'halt_error', 'input_filename', 'input_line_number']) {
    assert.ok(nondeterministicJq.has(name), `${name} is in the refused set`);
    assert.deepEqual(refusedInJq(name), [name]);
    assert.deepEqual(refusedInJq(`.a | ${name} | .b`), [name]);
    assert.deepEqual(refusedInJq(`[.x, (${name})]`), [name]);
  }
  assert.deepEqual(refusedInJq('halt_error(1)'), ['halt_error']);
  assert.deepEqual(refusedInJq('debug("x")'), ['debug']);
  assert.deepEqual(refusedInJq('now | todate'), ['now']);
});

test('$ENV and env are refused; other variables are not', () => {
  assert.deepEqual(refusedInJq('$ENV.HOME'), ['$ENV']);
  assert.deepEqual(refusedInJq('env.HOME'), ['env']);
  assert.deepEqual(refusedInJq('$input + $context + $workflow.input'), []);
  assert.deepEqual(refusedInJq('. as $now | $now'), []);
});

test('field names, object keys, string literals and comments are not calls', () => {
  assert.deepEqual(refusedInJq('.now'), []);
  assert.deepEqual(refusedInJq('.task.input | .a.env'), []);
  assert.deepEqual(refusedInJq('{now: .a, input: 1, "env": 2}'), []);
  assert.deepEqual(refusedInJq('{input, env}'), [], 'the shorthand {input} is {input: .input}');
  assert.deepEqual(refusedInJq('{a: now, b: (input)}'), ['now', 'input'], 'values are code');
  assert.deepEqual(refusedInJq('[now, input]'), ['now', 'input'], 'array elements are code');
  assert.deepEqual(refusedInJq('"it is now or never: input, env, halt"'), []);
  assert.deepEqual(refusedInJq('.a # now\n| .b'), []);
  assert.deepEqual(refusedInJq('"escaped \\" now"'), []);
  assert.deepEqual(refusedInJq('nowhere | inputs_x | my_input'), []);
});

test("a name a slice's `:` follows is code, not an object key", () => {
  // path(.[now:]) is [{start: <the clock>, end: null}]: the slice's bounds are values.
  assert.deepEqual(refusedInJq('path(.[now:])[0].start'), ['now']);
  assert.deepEqual(refusedInJq('path(.[env :])'), ['env']);
  assert.deepEqual(refusedInJq('{a: .[input:]}'), ['input']);
  assert.deepEqual(refusedInJq('"\\(.[now:])"'), ['now']);
  assert.deepEqual(refusedInJq('. as {now: $x} | {a: 1, env: 2, input : 3} | .[1:2]'), [], 'keys, in a construction or a pattern');
});

test('string interpolations are code', () => {
  assert.deepEqual(refusedInJq('"at \\(now) by \\(.user)"'), ['now']);
  assert.deepEqual(refusedInJq('"a \\("nested \\(env.X)") b"'), ['env']);
  assert.deepEqual(refusedInJq('"\\({a: 1} | .a) now"'), []);
});

test('every ${ … } of a string is scanned, and its end found through braces and strings', () => {
  const found = embeddedExpressions('Hello ${ .name }, it is ${ now | todate } and ${ {a: "}"} | .a }');
  assert.deepEqual(
    found.map((f) => f.source.trim()),
    ['.name', 'now | todate', '{a: "}"} | .a'],
  );
  assert.deepEqual(
    found.map((f) => f.refused),
    [[], ['now'], []],
  );
  assert.deepEqual(embeddedExpressions('no expression, just now'), []);
});

test('a refusal is unsupported naming the pointer and the builtin', () => {
  assert.throws(
    () => checkDeterministicText('${ .a + (now | floor) }', '/do/0/stamp/set/at'),
    (e: unknown) => isAdapterError(e) && e.kind === 'unsupported' && /^\/do\/0\/stamp\/set\/at: the expression uses "now"/.test(e.description ?? ''),
  );
  assert.throws(
    () => checkDeterministicJq('input', '/if'),
    (e: unknown) => isAdapterError(e) && (e.description ?? '').includes('"input"'),
  );
  assert.doesNotThrow(() => checkDeterministicJq('.customer.age < 18', '/if'));
});

test('a plain path program is answered without the worker, exactly as jq answers it; anything else goes to jq', async () => {
  const jq = new JqWorkerEvaluator({ deadlineMs: 5000 });
  try {
    const answered: [string, JsonValue][] = [
      [' .doc ', { doc: 'x' }],
      ['.a.b', { a: { b: [1, 2] } }],
      ['.a.b', { a: null }],
      ['.missing', { a: 1 }],
      ['.a', null],
      ['.a.b.c', { a: {} }],
      ['.__proto__', {}],
    ];
    for (const [query, input] of answered) {
      const direct = pathValue(query, input);
      assert.notEqual(direct, undefined, `${query} is answered directly`);
      assert.deepEqual(direct, await jq.evaluate(`${query} | . as $x | $x`, input, {}, 'test'), `${query} on ${JSON.stringify(input)} as jq answers it`);
    }
    for (const [query, input] of [
      ['.a', [1]],
      ['.a', 'text'],
      ['.a.b', { a: 3 }],
      ['.a | .b', { a: { b: 1 } }],
      ['.[0]', [1]],
      ['.a?', 1],
      ['$x', {}],
      ['$__loc__', {}],
      ['"null"', {}],
      ['.a // 1', {}],
    ] as [string, JsonValue][])
      assert.equal(pathValue(query, input), undefined, `${query} on ${JSON.stringify(input)} goes to jq`);
  } finally {
    await jq.close();
  }
});

/** Field and variable names for generated paths: plain ones, and jq's keywords and builtins as names. */
const names = ['a', 'b', 'doc', 'operationId', '_x1', 'if', 'then', 'and', 'or', 'not', 'as', 'def', 'reduce', 'null', 'true', 'empty', 'input', '__proto__'];

test('property: whatever pathValue answers without the worker, jq answers the same (as recorded: JSON)', async () => {
  const jq = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const name = fc.constantFrom(...names);
  // Values that paths walk into and out of: objects keyed by the same names, arrays, strings, numbers, null.
  const value: fc.Arbitrary<JsonValue> = fc.letrec<{ value: JsonValue }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.constantFrom<JsonValue>(null, true, false, 0, -1.5, 1e21, 'text', ''),
      fc.array(tie('value'), { maxLength: 2 }),
      fc.dictionary(name, tie('value'), { maxKeys: 4 }),
    ),
  })).value;
  const path = fc.array(name, { maxLength: 3 }).map((parts) => parts.map((part) => `.${part}`).join(''));
  // Variables: the bound ones mostly, an unbound one ($b) and one jq defines itself ($__loc__).
  const root = fc.oneof(fc.constant('.'), fc.constantFrom('$a', '$doc', '$input', '$context', '$if', '$b', '$__loc__'));
  const query = fc.oneof(
    { weight: 6, arbitrary: fc.tuple(root, path).map(([r, p]) => (r === '.' && p !== '' ? p : `${r}${p}`)) },
    { weight: 1, arbitrary: fc.constantFrom('null', 'true', 'false', ' . ', '.a.b ') },
  );
  // Variables bound as the interpreter binds them, under names jq also uses as builtins or keywords.
  const vars = fc.dictionary(fc.constantFrom('a', 'doc', 'input', 'context', 'if'), value, { maxKeys: 3 });
  let answered = 0;
  try {
    await fc.assert(
      fc.asyncProperty(query, value, vars, async (program, input, bound) => {
        const direct = pathValue(program, input, () => bound);
        if (direct === undefined) return;
        answered++;
        const byJq = await jq.evaluate(`${program} | . as $result | $result`, input, bound, 'test');
        assert.equal(JSON.stringify(direct), JSON.stringify(byJq), `${program} on ${JSON.stringify(input)} with ${JSON.stringify(bound)}`);
      }),
      { numRuns: 400, seed: 20261205 },
    );
  } finally {
    await jq.close();
  }
  assert.ok(answered > 150, `most generated programs are answered directly (${answered} of 400)`);
});

test("property: a value's expression results put back into it give what evaluating it whole gives, built alike; a wrong count gives nothing", async () => {
  const expression = fc.constantFrom('${ .a }', '${ .b }', ' ${ [.a, .b] } ', '${ . }');
  const template = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      expression,
      fc.jsonValue({ maxDepth: 1 }),
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(fc.string({ maxLength: 4 }), tie('value'), { maxKeys: 4 }),
    ),
  })).value as fc.Arbitrary<JsonValue>;
  await fc.assert(
    fc.asyncProperty(template, fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<JsonValue>, async (value, input) => {
      // Each evaluation answers a value of its own (its program and a count), so an order or a count that differs shows.
      let calls = 0;
      const evaluate = async (program: string): Promise<JsonValue> => ({ program, n: calls++, input });
      const whole = await evaluateValue(value, evaluate);
      calls = 0;
      const results = await expressionResults(value, evaluate);
      const filled = withResults(value, results);
      // A value without any expression is kept as it is (a call's arguments without one are no step at all).
      if (results.length === 0) assert.equal(filled, value);
      else {
        assert.equal(JSON.stringify(filled), JSON.stringify(whole));
        assert.deepEqual(filled, whole);
      }
      if (results.length > 0) assert.equal(withResults(value, results.slice(1)), undefined);
      assert.equal(withResults(value, [...results, null]), undefined);
    }),
    { numRuns: 500 },
  );
});

test("a catch's and a retry policy's when and exceptWhen, bare jq or ${ }, are refused at the check when not deterministic, wherever the policy is written", () => {
  const tryTask = (katch: JsonValue): JsonValue => ({
    document: { dsl: '1.0.3', namespace: 'test', name: 'whens', version: '1.0.0' },
    do: [{ guarded: { try: [{ fail: { raise: { error: { type: 'https://example.com/x', status: 500 } } } }], catch: katch } }],
  });
  const refused = (document: JsonValue, pointer: string) =>
    assert.throws(
      () => checkDocument(document),
      (e: unknown) => isAdapterError(e) && e.kind === 'unsupported' && (e.description ?? '').startsWith(`${pointer}: the expression uses "now"`),
      pointer,
    );
  refused(tryTask({ when: 'now > 0' }), '/do/0/guarded/catch/when');
  refused(tryTask({ exceptWhen: '${ now > 0 }' }), '/do/0/guarded/catch/exceptWhen');
  refused(tryTask({ retry: { when: 'now > 0', limit: { attempt: { count: 2 } } } }), '/do/0/guarded/catch/retry/when');
  refused(tryTask({ retry: { exceptWhen: 'now > 0', limit: { attempt: { count: 2 } } } }), '/do/0/guarded/catch/retry/exceptWhen');
  const declared = { ...(tryTask({ retry: 'again' }) as JsonObject), use: { retries: { again: { when: 'now > 0', limit: { attempt: { count: 2 } } } } } };
  refused(declared, '/use/retries/again/when');
  assert.doesNotThrow(() => checkDocument(tryTask({ when: '.status == 500', retry: { exceptWhen: '${ .status == 400 }', limit: { attempt: { count: 2 } } } })));
});
