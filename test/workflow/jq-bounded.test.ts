/**
 * jq-bounded.ts runs jq-wasm with its own write and heap-growth imports in place of jq-wasm's
 * (jq's output is captured as it is printed, not collected by jq-wasm). What it answers must be
 * what jq-wasm's own `json()` answers — the first output, parsed as JSON — or an error where that
 * throws one: every recorded expression result comes through it, and a replay never runs jq again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { loadJq } from 'jq-wasm';
import { loadBoundedJq } from '../../src/workflow/exec/jq-bounded.js';

/** Programs over any input: one output, several (only the first counts), none, errors, strings printed with escapes. */
const programs = [
  '.',
  '.[]?',
  '[.[]?]',
  'tostring',
  'tojson',
  'keys?',
  'length',
  '.. | numbers',
  'paths',
  'empty',
  'error',
  'error("x\\(.)")',
  '.a',
  'type',
  '[.] | .[0] | tostring | explode | implode',
  'if type == "string" then ascii_downcase else . end',
  '(.[]? | strings), "after"',
  '. as $v | [$v, $v]',
  '., error("late")',
  '(.[]? | numbers), error',
  '"a", "b", "c"',
];

test('property: the bounded jq answers what jq-wasm answers (the first output, or an error), on any JSON input', async () => {
  const plain = await loadJq();
  const bounded = await loadBoundedJq({ memoryBytesMax: 128 * 1024 * 1024, resultBytesMax: 1024 * 1024, errorBytesMax: 16 * 1024 });
  const input = fc.jsonValue({ maxDepth: 3 });
  let errors = 0;
  await fc.assert(
    fc.property(input, fc.constantFrom(...programs), (value, program) => {
      const text = JSON.stringify(value);
      let expected: { ok: string } | { error: true };
      try {
        const outputs = plain.json(text, program, ['-c']) as unknown[];
        expected = { ok: JSON.stringify(outputs.length === 0 ? null : outputs[0]) };
      } catch {
        expected = { error: true };
      }
      const outcome = bounded.run(text, program, []);
      const actual =
        outcome.kind === 'error'
          ? { error: true as const }
          : outcome.kind === 'output'
            ? { ok: outcome.text === undefined ? 'null' : JSON.stringify(JSON.parse(outcome.text)) }
            : assert.fail(`oversized: ${program} on ${text}`);
      if ('error' in expected) errors++;
      assert.deepEqual(actual, expected, `${program} on ${text}`);
    }),
    { numRuns: 600, seed: 20261206 },
  );
  assert.ok(errors > 20 && errors < 500, `errors and answers both generated (${errors} errors of 600)`);
});
