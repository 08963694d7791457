/**
 * The interpreter holds a fact without serializing its value when bounds alone say it is small
 * (surelySmall): that must never hold a fact the exact measure would send alone (a value over
 * limits.workflowHeldOutputBytesMax, or a transition by itself over the store's limit).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { limits } from '../../src/contract/limits.js';
import type { JsonValue } from '../../src/contract/json.js';
import { aloneBytes, surelySmall, type Held } from '../../src/workflow/exec/interpreter.js';

const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.constantFrom('"', '\u0000', '\u007f', 'é', '\ud800', '😀'), maxLength: 40 }),
);
/** Values of every size around the held-output limit: small trees, and long strings of one- to six-byte escapes. */
const value: fc.Arbitrary<JsonValue> = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }) as fc.Arbitrary<JsonValue>,
  fc.tuple(fc.constantFrom('a', '\u0001', 'é', '😀'), fc.integer({ min: 0, max: 12_000 })).map(([unit, n]) => unit.repeat(n)),
  fc.array(fc.double({ noNaN: true, noDefaultInfinity: true }), { maxLength: 2000 }),
);
const event: fc.Arbitrary<Held> = fc.oneof(
  fc.record({ type: fc.constant('task-started' as const), v: fc.constant(1), at: text, ref: text, name: text, input: value }),
  fc.record({ type: fc.constant('expression-evaluated' as const), v: fc.constant(1), at: text, result: fc.record({ ok: value }) }),
  fc.record({ type: fc.constant('call-answered' as const), v: fc.constant(1), at: text, result: fc.record({ ok: value }) }),
  fc.record({ type: fc.constant('task-completed' as const), v: fc.constant(1), at: text, output: value }),
) as fc.Arbitrary<Held>;

const valueOf = (e: Held): JsonValue => (e.type === 'task-started' ? e.input : e.type === 'task-completed' ? e.output : e.result) as JsonValue;

test('a fact surelySmall calls small is small by the exact measure: its value within the held limit, its transition alone within the store limit', () => {
  let fast = 0;
  fc.assert(
    // The store's limit anywhere, or just around the fact's own transition (where a bound that forgot a part would show).
    fc.property(
      event,
      fc.oneof(
        fc.integer({ min: 0, max: 200_000 }),
        fc.integer({ min: -300, max: 300 }).map((d) => ({ around: d })),
      ),
      (held, limit) => {
        const v = valueOf(held);
        const transitionBytesMax = typeof limit === 'number' ? limit : aloneBytes(held, Buffer.byteLength(JSON.stringify(v))) + limit.around;
        if (!surelySmall(held, v, transitionBytesMax)) return;
        fast++;
        const bytes = Buffer.byteLength(JSON.stringify(v));
        assert.ok(bytes <= limits.workflowHeldOutputBytesMax, `value of ${bytes} bytes held`);
        assert.ok(aloneBytes(held, bytes) <= transitionBytesMax, `alone ${aloneBytes(held, bytes)} > ${transitionBytesMax}`);
        // aloneBytes is the transition itself, with the widest guard.
        const transition = {
          events: [held],
          timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER },
          causation: { command: held.type },
        };
        assert.ok(Buffer.byteLength(JSON.stringify(transition)) <= transitionBytesMax);
      },
    ),
    { numRuns: 3000 },
  );
  assert.ok(fast > 100, `the bound took the fast path in only ${fast} cases`);
});

test('a small step answer under a store of the default size is surely small, so it is never serialized to be measured', () => {
  const answered: Held = {
    type: 'call-answered',
    v: 1,
    at: '/do/0/review>invoke',
    result: { ok: { operationId: 'op' + 'a'.repeat(64), decision: { outcome: 'success' } } },
  };
  assert.equal(surelySmall(answered, valueOf(answered), limits.transitionBytesMax), true);
  // …and one too large for a small store is not.
  assert.equal(surelySmall(answered, valueOf(answered), 200), false);
});
