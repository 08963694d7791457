import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { canonicalJson, digestOf, sha256Hex } from '../../src/contract/canonical.js';
import { isAmbiguousInteger, parseStrict, parseStrictBytes } from '../../src/contract/ijson.js';
import type { JsonValue } from '../../src/contract/json.js';
import { repoRoot, assertInvalid } from '../support/assertions.js';

const rfc8785Dir = join(repoRoot(), 'test', 'vectors', 'rfc8785');

for (const name of ['arrays', 'french', 'structures', 'unicode', 'values', 'weird']) {
  test(`RFC 8785 example set "${name}" canonicalizes byte-for-byte`, () => {
    const input = readFileSync(join(rfc8785Dir, `${name}.input.json`));
    const expected = readFileSync(join(rfc8785Dir, `${name}.expected.json`));
    const actual = Buffer.from(canonicalJson(parseStrictBytes(input, name)), 'utf8');
    assert.equal(actual.toString('utf8'), expected.toString('utf8'));
    assert.ok(actual.equals(expected), 'bytes differ');
  });
}

test('RFC 8785 number examples serialize in the ECMAScript form', () => {
  const cases: [string, string][] = [
    ['1E30', '1e+30'],
    ['4.50', '4.5'],
    ['2e-3', '0.002'],
    ['0.000001', '0.000001'],
    ['1e-7', '1e-7'],
    ['-0', '0'],
    ['333333333.33333329', '333333333.3333333'],
    ['0.000000000000000000000000001', '1e-27'],
    ['1e21', '1e+21'],
    ['100', '100'],
    ['-1.5E-10', '-1.5e-10'],
    ['-0.0e-400', '0'],
    ['5e-324', '5e-324'],
  ];
  for (const [text, expected] of cases) {
    assert.equal(canonicalJson(parseStrict(text)), expected, text);
  }
});

function fromIeee754(hex: string): number {
  return Buffer.from(hex, 'hex').readDoubleBE(0);
}

test('RFC 8785 Appendix B samples serialize as published', () => {
  const samples: [string, string][] = [
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ];
  for (const [hex, expected] of samples) {
    assert.equal(canonicalJson(fromIeee754(hex)), expected, hex);
    // What canonicalizes also re-parses strictly to the same number.
    assert.equal(parseStrict(expected), fromIeee754(hex) || 0, hex);
  }
});

test('Appendix B integers beyond 2^53−1 that RFC 8785 prints as digit strings are invalid-input', () => {
  // 9007199254740992, -9007199254740992, 295147905179352830000, 999999999999999700000, 999999999999999900000
  for (const hex of ['4340000000000000', 'c340000000000000', '4430000000000000', '444b1ae4d6e2ef4e', '444b1ae4d6e2ef4f']) {
    assertInvalid(() => canonicalJson(fromIeee754(hex)), 'beyond ±(2^53−1)', 'at root');
  }
  assertInvalid(() => canonicalJson({ a: [1, 2 ** 53] }), 'integer 9007199254740992 beyond ±(2^53−1) at /a/1');
  assert.equal(canonicalJson(2 ** 53 - 1), '9007199254740991');
});

test('non-finite numbers are invalid-input (RFC 8785 §3.2.2.2)', () => {
  assertInvalid(() => canonicalJson(fromIeee754('7fffffffffffffff')), 'non-finite number NaN at root');
  assertInvalid(() => canonicalJson(fromIeee754('7ff0000000000000')), 'non-finite number Infinity at root');
  assertInvalid(() => canonicalJson({ x: [-Infinity] }), 'non-finite number -Infinity at /x/0');
});

test('lone surrogates are invalid-input in strings and keys', () => {
  assertInvalid(() => canonicalJson({ s: 'a\ud800' }), 'lone surrogate in string at /s');
  assertInvalid(() => canonicalJson(['\udc00']), 'lone surrogate in string at /0');
  assertInvalid(() => canonicalJson({ 'a/b': { '\ud83d': 1 } }), 'lone surrogate in key', 'at /a~1b');
  assert.equal(canonicalJson('\ud83d\ude02'), '"\u{1f602}"');
});

test('values that are not plain JSON are invalid-input', () => {
  const cases: [unknown, string][] = [
    [undefined, 'not a JSON value (undefined) at root'],
    [{ a: undefined }, 'not a JSON value (undefined) at /a'],
    [[1, () => 1], 'not a JSON value (function) at /1'],
    [{ n: 10n }, 'not a JSON value (bigint) at /n'],
    [[Symbol('s')], 'not a JSON value (symbol) at /0'],
    [{ d: new Date(0) }, 'not a plain object (Date) at /d'],
    [new Map(), 'not a plain object (Map) at root'],
    [{ b: Buffer.from('x') }, 'not a plain object (Buffer) at /b'],
    [
      [
        new (class Point {
          x = 1;
        })(),
      ],
      'not a plain object (Point) at /0',
    ],
    // eslint-disable-next-line no-sparse-arrays -- the hole is the input under test
    [[1, , 3], 'hole at index 1 in array at root'],
  ];
  for (const [value, fragment] of cases) {
    assertInvalid(() => canonicalJson(value as JsonValue), fragment);
  }
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  assertInvalid(() => canonicalJson(cycle as JsonValue), 'nesting deeper than');
  assert.equal(canonicalJson(Object.assign(Object.create(null) as object, { b: 1, a: 2 }) as JsonValue), '{"a":2,"b":1}');
});

test('keys sort by UTF-16 code units, not code points or locale (RFC 8785 §3.2.3)', () => {
  // U+E000 is one unit 0xE000; U+1F600 is 0xD83D 0xDE00, so it sorts first.
  assert.equal(canonicalJson({ '\ue000': 1, '\u{1f600}': 2, b: 3, B: 4, '10': 5, '9': 6 }), '{"10":5,"9":6,"B":4,"b":3,"\u{1f600}":2,"\ue000":1}');
});

test('-0 canonicalizes to 0', () => {
  assert.equal(canonicalJson(-0), '0');
  assert.equal(canonicalJson(parseStrict('{"z":-0}')), '{"z":0}');
});

test('canonical output re-parses strictly and is a fixed point (fast-check)', () => {
  const values = fc.jsonValue({ maxDepth: 6, stringUnit: 'grapheme' }).filter((v) => {
    let ok = true;
    JSON.stringify(v, (_k, x: unknown) => {
      if (typeof x === 'number' && isAmbiguousInteger(x)) ok = false;
      return x;
    });
    return ok;
  });
  fc.assert(
    fc.property(values, (v) => {
      const canonical = canonicalJson(v as JsonValue);
      assert.equal(canonicalJson(parseStrict(canonical)), canonical);
      assert.equal(canonicalJson(parseStrict(JSON.stringify(v, null, 2))), canonical);
    }),
    { numRuns: 300 },
  );
});

test('sha256Hex is lowercase hex and hashes strings as UTF-8', () => {
  assert.equal(sha256Hex(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(sha256Hex('é'), sha256Hex(Uint8Array.from([0xc3, 0xa9])));
});

test('digestOf is sha256: + hex of the canonical form', () => {
  const digest = digestOf(parseStrict('{ "b": [1, 2.50], "a": "x" }'));
  assert.equal(digest, 'sha256:' + sha256Hex('{"a":"x","b":[1,2.5]}'));
  assert.match(digest, /^sha256:[0-9a-f]{64}$/);
  assert.equal(digestOf({ a: 'x', b: [1, 2.5] }), digest);
});
