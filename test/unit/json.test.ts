import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { deepFrozen, jsonEquals, type JsonValue } from '../../src/contract/json.js';

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
