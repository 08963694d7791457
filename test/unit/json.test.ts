import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { cutText, deepFrozen, jsonBytesBound, jsonEquals, type JsonValue } from '../../src/contract/json.js';

function everyObjectFrozen(value: JsonValue): boolean {
  if (value === null || typeof value !== 'object') return true;
  if (!Object.isFrozen(value)) return false;
  return (Array.isArray(value) ? value : Object.values(value)).every(everyObjectFrozen);
}

test('deepFrozen answers an equal value, frozen at every depth, that later changes to its source do not reach', () => {
  fc.assert(
    fc.property(fc.jsonValue() as fc.Arbitrary<JsonValue>, (value) => {
      const source = structuredClone(value);
      const frozen = deepFrozen(source);
      assert.ok(jsonEquals(frozen, value));
      assert.ok(everyObjectFrozen(frozen));
      if (source !== null && typeof source === 'object') {
        if (Array.isArray(source)) source.push('changed');
        else source['changed'] = true;
        assert.ok(jsonEquals(frozen, value), 'a change to the source showed through');
      }
    }),
  );
  // An own "__proto__" member (as JSON.parse makes it) stays an own member, never the prototype.
  const tricky = JSON.parse('{"__proto__":{"x":1},"y":[{"__proto__":""}]}') as JsonValue;
  const frozenTricky = deepFrozen(tricky) as Record<string, JsonValue>;
  assert.deepEqual(Object.keys(frozenTricky), ['__proto__', 'y']);
  assert.equal(Object.getPrototypeOf(frozenTricky), Object.prototype);
  assert.ok(jsonEquals(frozenTricky, tricky));
  const nested = deepFrozen({ verdict: 'approve', notes: [{ by: 'alfa' }] }) as { notes: { by: string }[] };
  assert.throws(() => {
    'use strict';
    nested.notes[0]!.by = 'mallory';
  }, TypeError);
});

/** Strings of every kind of UTF-16 unit: controls and quotes (escaped), DEL, non-ASCII, astral pairs, lone surrogates. */
const anyText = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('"', '\\', '\u0000', '\u001f', '\u007f', 'é', '\ud800', '\udfff', '\ud83d\ude00') }),
);
const anyJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    anyText,
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 6 }),
    fc.dictionary(anyText, tie('value'), { maxKeys: 6 }),
  ),
})).value as fc.Arbitrary<JsonValue>;

test('jsonBytesBound is never below the bytes JSON.stringify writes, and passes stopAbove only when they might', () => {
  fc.assert(
    fc.property(anyJson, fc.nat({ max: 400 }), (value, stopAbove) => {
      const exact = Buffer.byteLength(JSON.stringify(value));
      const bound = jsonBytesBound(value, Number.MAX_SAFE_INTEGER);
      assert.ok(bound >= exact, `bound ${bound} below ${exact} for ${JSON.stringify(value)}`);
      const stopped = jsonBytesBound(value, stopAbove);
      // Stopped early or not, the answer says the same about stopAbove as the whole bound does.
      assert.equal(stopped > stopAbove, bound > stopAbove);
    }),
    { numRuns: 2000 },
  );
});

test('jsonBytesBound counts a skipped top-level member as null', () => {
  fc.assert(
    fc.property(fc.dictionary(anyText, anyJson, { minKeys: 1, maxKeys: 5 }), (object) => {
      const [key] = Object.keys(object) as [string];
      const exact = Buffer.byteLength(JSON.stringify({ ...object, [key]: null }));
      assert.ok(jsonBytesBound(object, Number.MAX_SAFE_INTEGER, key) >= exact);
    }),
  );
});

test('jsonBytesBound of the longest escapes and numbers', () => {
  // Each DEL is one byte of UTF-8 that JSON.stringify keeps; a control is the six of \u001f.
  assert.ok(jsonBytesBound('\u001f'.repeat(100), Infinity) >= Buffer.byteLength(JSON.stringify('\u001f'.repeat(100))));
  for (const n of [-1.2345678901234567e-308, -0.0000010331418833746061, -0.0000012345678901234567, -Number.MAX_VALUE, -Number.MIN_VALUE, -9007199254740991])
    assert.ok(jsonBytesBound(n, Infinity) >= JSON.stringify(n).length, String(n));
});

test('cutText keeps at most max UTF-16 units and never half of a surrogate pair', () => {
  assert.equal(cutText('abc', 5), 'abc');
  assert.equal(cutText('abcdef', 3), 'abc');
  assert.equal(cutText('a\u{1F600}b', 2), 'a', 'the pair is left out whole');
  assert.equal(cutText('a\u{1F600}b', 3), 'a\u{1F600}');
  assert.equal(cutText('\u{1F600}', 1), '');
});
