/**
 * The compile check of a document's jq (src/workflow/exec/jq-compile.ts): every expression found,
 * the bare fields and the variables a document names included; jq's compile errors refused naming
 * the pointer, in the expression's own lines and columns; runtime errors not; and an expression that
 * closes the branch it is compiled in is compiled alone, never run as the branch's code.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createWorkflowHost } from '../../src/cli/workflow-host.js';
import { BundleRegistry } from '../../src/contract/bundle.js';
import { SystemClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { repoRoot } from '../support/assertions.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { JqWorkerEvaluator, type ExpressionEvaluator } from '../../src/workflow/exec/jq.js';
import { balanced, checkExpressionsCompile, documentExpressions } from '../../src/workflow/exec/jq-compile.js';

const evaluator = new JqWorkerEvaluator({ deadlineMs: 2000, workers: 1 });
after(() => evaluator.close());

const head = { dsl: '1.0.3', namespace: 'test', name: 'jq', version: '1.0.0' };
const withTasks = (...tasks: JsonObject[]): JsonObject => ({ document: head, do: tasks });

/** The description of the check's refusal, or undefined when the document compiles. */
async function refusal(document: JsonObject, prefix?: string, jq: ExpressionEvaluator = evaluator): Promise<string | undefined> {
  try {
    await checkExpressionsCompile(document, jq, prefix);
    return undefined;
  } catch (error) {
    assert.ok(isAdapterError(error), String(error));
    assert.equal(error.kind, 'invalid-input');
    return error.description;
  }
}

test('every expression is found: enclosed anywhere the executor evaluates, and each field read as bare jq, with the variables a document names', () => {
  const document: JsonObject = {
    document: { ...head, metadata: { note: '${ not jq, never evaluated }' } },
    input: { from: '.in', schema: { format: 'json', document: { description: '${ nor this }' } } },
    output: { as: '.out' },
    use: { retries: { again: { when: '.retry', exceptWhen: '.stop', delay: { seconds: 1 } } } },
    do: [
      { a: { if: '.go', set: { x: '${ .x }' }, export: { as: '$context + .' } } },
      { b: { for: { each: 'pet', at: 'n', in: '.pets' }, while: '.more', do: [{ c: { set: { y: '${ $pet }' } } }] } },
      { d: { switch: [{ yes: { when: '.ok', then: 'continue' } }, { no: { then: 'end' } }] } },
      {
        e: {
          try: [{ f: { set: { z: 1 } } }],
          catch: { as: 'oops', when: '.w', exceptWhen: '.x', retry: { when: '.r', delay: { seconds: 1 } }, do: [{ g: { set: { h: '${ $oops }' } } }] },
        },
      },
      {
        i: {
          listen: { to: { any: [{ with: { type: 'a' }, correlate: { k: { from: '.data.k' } } }], until: '.done' } },
          foreach: { item: 'ev', output: { as: '.shaped' }, do: [{ j: { set: { e: '${ $ev }' } } }] },
        },
      },
      { k: { fork: { branches: [{ l: { set: { m: '${ .m }' } } }] } } },
    ],
  };
  const { expressions, variables } = documentExpressions(document);
  assert.deepEqual(Object.fromEntries(expressions), {
    '/input/from': '.in',
    '/output/as': '.out',
    '/use/retries/again/when': '.retry',
    '/use/retries/again/exceptWhen': '.stop',
    '/do/0/a/if': '.go',
    '/do/0/a/set/x': ' .x ',
    '/do/0/a/export/as': '$context + .',
    '/do/1/b/for/in': '.pets',
    '/do/1/b/while': '.more',
    '/do/1/b/do/0/c/set/y': ' $pet ',
    '/do/2/d/switch/0/yes/when': '.ok',
    '/do/3/e/catch/when': '.w',
    '/do/3/e/catch/exceptWhen': '.x',
    '/do/3/e/catch/retry/when': '.r',
    '/do/3/e/catch/do/0/g/set/h': ' $oops ',
    '/do/4/i/listen/to/any/0/correlate/k/from': '.data.k',
    '/do/4/i/listen/to/until': '.done',
    '/do/4/i/foreach/output/as': '.shaped',
    '/do/4/i/foreach/do/0/j/set/e': ' $ev ',
    '/do/5/k/fork/branches/0/l/set/m': ' .m ',
  });
  for (const name of ['context', 'workflow', 'runtime', 'task', 'input', 'output', 'secrets', 'event', 'pet', 'n', 'oops', 'ev', 'index'])
    assert.ok(variables.has(name), name);
});

test('what jq compiles passes, whatever it would do when run; every variable the executor binds is known', async () => {
  const document = withTasks(
    { a: { set: { x: '${ error("only at run time") }', y: '${ .a.b.c | tonumber }', z: '${ def f: . + 1; [range(3)] | map(f) }' } } },
    { b: { for: { in: '${ [1] }' }, do: [{ c: { set: { v: '${ [$item, $index, $input, $context, $workflow, $runtime, $task, $secrets] }' } } }] } },
    // A comment at the end, and one continued onto the next line by a backslash, as jq 1.8 reads it.
    { d: { set: { c: '${ .a # the end }', k: '${ .a # continued \\\n .b \n}' } } },
    { e: { try: [{ f: { set: { g: 1 } } }], catch: { when: '${ $error.status == 400 }' } } },
  );
  assert.equal(await refusal(document), undefined);
});

test('a compile error is refused naming the pointer and what jq says, at its line and column in the expression', async () => {
  assert.equal(
    await refusal(withTasks({ a: { set: { x: '${ .a | }' } } })),
    '/do/0/a/set/x: not a valid jq expression: syntax error: unexpected end of the expression',
  );
  assert.equal(
    await refusal(withTasks({ a: { set: { x: '${ .a | frobnicate(1) }' } } }), '/workflows/w'),
    '/workflows/w/do/0/a/set/x: not a valid jq expression: frobnicate/1 is not defined at line 1, column 7',
  );
  assert.equal(
    await refusal(withTasks({ a: { set: { x: '${ .a\n| $nope }' } } })),
    '/do/0/a/set/x: not a valid jq expression: $nope is not defined at line 2, column 3',
  );
  // $item is a for's: a task elsewhere naming it is refused only when no for of the document names it.
  assert.match((await refusal(withTasks({ a: { set: { x: '${ $item }' } } }))) ?? '', /\$item is not defined/);
  assert.equal(
    await refusal(withTasks({ a: { if: '.a ==', set: { x: 1 } } })),
    '/do/0/a/if: not a valid jq expression: syntax error: unexpected end of the expression',
  );
});

test('an expression closing the branch it is compiled in is compiled alone: refused with jq’s message, its code never run', async () => {
  // Were it put in the branch, `(range(1e9) | empty)` would be code of the branch's else, and run.
  const breakout = '1) else (range(1e9) | empty) end | if false then (2';
  assert.equal(balanced(breakout), false);
  const started = performance.now();
  const described = await refusal(withTasks({ a: { set: { x: `\${ ${breakout} }` } } }));
  assert.match(described ?? '', /^\/do\/0\/a\/set\/x: not a valid jq expression: syntax error, unexpected .* at line 1, column 3$/);
  assert.ok(performance.now() - started < 1000, 'refused at once, nothing evaluated');
});

test('balanced: brackets in strings, interpolations and comments are not code; a closing bracket with nothing open is', () => {
  for (const program of ['.a', '[.a, {b: (1)}]', '"a)b"', '"\\(.a) and \\("]" + ")")"', '.a # )]}', '.a # \\\n)', '"\\"("', '{(.k): 1', '('])
    assert.ok(balanced(program), program);
  for (const program of [')', '.a]', '(.a]', '"\\(1]"', '.a # \n)', '1) else 2 end | (3']) assert.equal(balanced(program), false, program);
});

test('a document’s expressions are compiled together in one evaluation, each alone only to name one that does not compile; what compiled is not compiled again', async () => {
  const queries: string[] = [];
  const counting: ExpressionEvaluator = {
    evaluate: (query: string, input: JsonValue, vars: Readonly<Record<string, JsonValue>>, principal: string) => (
      queries.push(query),
      evaluator.evaluate(query, input, vars, principal)
    ),
    close: async () => undefined,
  };
  const set: JsonObject = {};
  for (let i = 0; i < 200; i++) set[`k${i}`] = `\${ .a${i} + ${i} | tostring }`;
  await checkExpressionsCompile(withTasks({ many: { set } }), counting);
  assert.equal(queries.length, 1, 'one evaluation for the 200');
  await checkExpressionsCompile(withTasks({ many: { set } }), counting);
  assert.equal(queries.length, 1, 'none for the same expressions again');
  set.k150 = '${ .b | }';
  set.k199 = '${ .c | }';
  queries.length = 0;
  assert.equal(
    await refusal(withTasks({ many: { set } }), '', counting),
    '/do/0/many/set/k150: not a valid jq expression: syntax error: unexpected end of the expression',
    'the first of the two',
  );
  assert.equal(queries.length, 2, 'the batch, then alone the one not compiled before, refused');
});

test('a deployment refuses, as it starts, a bundle workflow whose jq does not compile, naming it in the bundle', async () => {
  const bundle = JSON.parse(readFileSync(join(repoRoot(), 'test', 'workflow', 'fixtures', 'review-publish.bundle.json'), 'utf8')) as JsonObject;
  ((bundle.workflows as JsonObject)['review-or-escalate'] as { do: JsonObject[] }).do.push({ odd: { set: { x: '${ .a | frobnicate }' } } });
  const clock = new SystemClock();
  const embedded = await createEmbedded({ clock, bundle });
  try {
    const bundles = new BundleRegistry();
    bundles.add(embedded.bundle);
    await assert.rejects(createWorkflowHost({ coordinator: embedded.coordinator, bundles, store: embedded.store, clock }), (error: unknown) => {
      assert.ok(isAdapterError(error), String(error));
      assert.equal(error.kind, 'invalid-input');
      assert.equal(
        error.description,
        '/workflows/review-or-escalate/do/4/odd/set/x: not a valid jq expression: frobnicate/0 is not defined at line 1, column 7',
      );
      return true;
    });
  } finally {
    await embedded.close();
  }
});
