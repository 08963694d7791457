import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { test } from 'node:test';
import fc from 'fast-check';
import { isAdapterError } from '../../src/contract/errors.js';
import { asLogged, hasLoneSurrogate, isAmbiguousInteger, parseStrict, parseStrictBody, parseStrictBytes } from '../../src/contract/ijson.js';
import type { JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { assertInvalid } from '../support/assertions.js';

test('duplicate keys fail (admission step 1)', () => {
  const description = assertInvalid(() => parseStrict('{"items":[{"a":1,"a":2}]}'));
  assert.equal(description, 'input: duplicate key "a" at /items/0 (offset 17)');
});

test('duplicate keys are compared after unescaping', () => {
  assertInvalid(() => parseStrict('{"a":1,"\\u0061":2}'), 'duplicate key "a"', 'at root (offset 7)');
  assertInvalid(() => parseStrict('{"\\/":1,"/":2}'), 'duplicate key "/"', '(offset 8)');
  assertInvalid(() => parseStrict('{"x":{"__proto__":1,"__proto__":2}}'), 'duplicate key "__proto__"', 'at /x (offset 20)');
});

test('the pointer escapes ~ and / as RFC 6901 says', () => {
  assertInvalid(() => parseStrict('{"a/b~":{"c":tru}}'), 'at /a~1b~0/c (offset 13)');
});

test('the what label prefixes the description', () => {
  const description = assertInvalid(() => parseStrict('[1,1e999]', 'request body'));
  assert.equal(description, 'request body: number overflows to infinity at /1 (offset 3)');
});

test('integers beyond ±(2^53−1) written without fraction or exponent fail', () => {
  assertInvalid(() => parseStrict('{"x":[1,9007199254740992]}'), 'integer beyond', 'at /x/1 (offset 8)');
  assertInvalid(() => parseStrict('-9007199254740992'), 'integer beyond', 'at root (offset 0)');
  assertInvalid(() => parseStrict('9007199254740993'), 'integer beyond');
  // Even where RFC 8785 would print an exponent: the literal claims a precision it does not have.
  assertInvalid(() => parseStrict('100000000000000000000000'), 'integer beyond');
  assert.equal(parseStrict('9007199254740991'), Number.MAX_SAFE_INTEGER);
  assert.equal(parseStrict('-9007199254740991'), Number.MIN_SAFE_INTEGER);
});

test('integer values in 2^53 ≤ |n| < 1e21 fail however they are written (they would canonicalize to a rejected literal)', () => {
  assertInvalid(() => parseStrict('[1e16]'), 'integer beyond', 'at /0 (offset 1)');
  assertInvalid(() => parseStrict('9007199254740992.0'), 'integer beyond');
  assertInvalid(() => parseStrict('-1.5E17'), 'integer beyond');
  assert.equal(parseStrict('1e21'), 1e21);
  assert.equal(parseStrict('1E30'), 1e30);
  assert.equal(parseStrict('1.5e15'), 1.5e15);
});

test('numbers that overflow to ±Infinity fail', () => {
  assertInvalid(() => parseStrict('{"n":1e400}'), 'overflows to infinity', 'at /n (offset 5)');
  assertInvalid(() => parseStrict('-1e400'), 'overflows to infinity', 'at root (offset 0)');
  assertInvalid(() => parseStrict('1.8e308'), 'overflows to infinity');
  assert.equal(parseStrict('1.7976931348623157e308'), Number.MAX_VALUE);
});

test('a nonzero number that underflows to 0 fails (I-JSON: the value read would not be the value written); zero written any way is 0', () => {
  assertInvalid(() => parseStrict('{"n":1e-400}'), 'nonzero number underflows to 0', 'at /n (offset 5)');
  assertInvalid(() => parseStrict('[0,-2.4e-324]'), 'nonzero number underflows to 0', 'at /1 (offset 3)');
  assertInvalid(() => parseStrict('0.00001e-320'), 'nonzero number underflows to 0', 'at root (offset 0)');
  assertInvalid(() => parseStrict('1E-99999'), 'nonzero number underflows to 0');
  assertInvalid(
    () => parseStrictBytes(Buffer.from('{"a":[0.0000000000000000000000000000000000000001e-300]}'), 'body'),
    'body: nonzero number underflows to 0 at /a/0',
  );
  // The smallest subnormal is not 0, and neither is what rounds to it.
  assert.equal(parseStrict('5e-324'), Number.MIN_VALUE);
  assert.equal(parseStrict('3e-324'), Number.MIN_VALUE);
  for (const zero of ['0', '-0', '0.0', '-0.000', '0e5', '0E-400', '0.000e+99999', '-0.0e-1']) assert.ok(Object.is(parseStrict(zero), 0), zero);
});

test('lone surrogates fail in strings', () => {
  assertInvalid(() => parseStrict('{"s":"\\ud800"}'), 'lone surrogate in string', 'at /s (offset 5)');
  assertInvalid(() => parseStrict('["ok","x\\ud800y"]'), 'lone surrogate in string', 'at /1 (offset 6)');
  assertInvalid(() => parseStrict('"\\udc00"'), 'lone surrogate in string', 'at root (offset 0)');
  assertInvalid(() => parseStrict('"\\ude02\\ud83d"'), 'lone surrogate in string');
  assertInvalid(() => parseStrict('"\\ud83d\\u0041"'), 'lone surrogate in string');
  // A JS string handed in directly can carry a raw lone surrogate.
  assertInvalid(() => parseStrict('"\ud800"'), 'lone surrogate in string');
});

test('lone surrogates fail in keys', () => {
  assertInvalid(() => parseStrict('{"a":{"\\ud800":1}}'), 'lone surrogate in key', 'at /a (offset 6)');
  assertInvalid(() => parseStrict('{"\\udfff":1}'), 'lone surrogate in key', 'at root (offset 1)');
});

test('surrogate pairs, escaped or raw, are one character', () => {
  assert.equal(parseStrict('"\\ud83d\\ude02"'), '\u{1f602}');
  assert.equal(parseStrict('"\\uD83D\\uDE02"'), '\u{1f602}');
  assert.equal(parseStrict('"\u{1f602}"'), '\u{1f602}');
  assert.deepEqual(parseStrict('{"\\ud83d\\ude02":1}'), { '\u{1f602}': 1 });
});

test(`nesting deeper than limits.jsonDepthMax (${limits.jsonDepthMax}) fails`, () => {
  const depth = limits.jsonDepthMax;
  const ok = '['.repeat(depth) + ']'.repeat(depth);
  let value = parseStrict(ok);
  for (let d = 1; d < depth; d++) value = (value as JsonValue[])[0] as JsonValue;
  assert.deepEqual(value, []);
  const tooDeep = '['.repeat(depth + 1) + ']'.repeat(depth + 1);
  assertInvalid(() => parseStrict(tooDeep), `nesting deeper than ${depth}`, `at ${'/0'.repeat(depth)} (offset ${depth})`);
  const objects = '{"k":'.repeat(depth) + '{}' + '}'.repeat(depth);
  assertInvalid(() => parseStrict(objects), `nesting deeper than ${depth}`, `(offset ${5 * depth})`);
});

test('a body read to the depth of the values it holds one level down takes a value at the limit; one deeper is refused naming the value and the limit', () => {
  const depth = limits.jsonDepthMax;
  const body = (levels: number) => Buffer.from(`{"input":${'['.repeat(levels)}${']'.repeat(levels)}}`, 'utf8');
  assert.deepEqual(Object.keys(parseStrictBody(body(depth), 'request body', 1) as object), ['input']);
  assertInvalid(
    () => parseStrictBody(body(depth + 1), 'request body', 1),
    `request body: the value at /input nests deeper than ${depth} at /input${'/0'.repeat(depth)} (offset ${9 + depth})`,
  );
  // Read as any other document, the body's own levels count against the limit.
  assertInvalid(() => parseStrictBytes(body(depth), 'request body'), `request body: nesting deeper than ${depth}`);
});

test('syntax errors fail with the pointer and offset of the offending character', () => {
  const cases: [string, string][] = [
    ['', 'unexpected end of input, expected a value at root (offset 0)'],
    ['  ', 'unexpected end of input, expected a value at root (offset 2)'],
    ['{', 'expected a string key at root (offset 1)'],
    ['[', 'expected a value at /0 (offset 1)'],
    ['[1,]', 'unexpected character "]", expected a value at /1 (offset 3)'],
    ['{"a":1,}', 'unexpected character "}", expected a string key at root (offset 7)'],
    ['{"a" 1}', `unexpected character "1", expected ':' at root (offset 5)`],
    ['{"a":}', 'unexpected character "}", expected a value at /a (offset 5)'],
    ['[1 2]', `expected ',' or ']' at root (offset 3)`],
    ['{"a":[1}', `expected ',' or ']' at /a (offset 7)`],
    ['{a:1}', 'unexpected character "a", expected a string key at root (offset 1)'],
    ["['a']", `unexpected character "'", expected a value at /0 (offset 1)`],
    ['[1]x', 'expected end of input at root (offset 3)'],
    ['{"a":1}}', 'expected end of input at root (offset 7)'],
    ['01', 'expected end of input at root (offset 1)'],
    ['-', 'invalid number: a digit must follow at root (offset 1)'],
    ['-a', 'invalid number: a digit must follow at root (offset 1)'],
    ['1.', 'a digit must follow the decimal point at root (offset 2)'],
    ['1.e5', 'a digit must follow the decimal point at root (offset 2)'],
    ['1e', 'a digit must follow the exponent at root (offset 2)'],
    ['1e+', 'a digit must follow the exponent at root (offset 3)'],
    ['.5', 'unexpected character ".", expected a value at root (offset 0)'],
    ['+1', 'unexpected character "+"'],
    ['NaN', 'unexpected character "N"'],
    ['Infinity', 'unexpected character "I"'],
    ['[tru]', 'expected a value at /0 (offset 1)'],
    ['nul', 'expected a value at root (offset 0)'],
    ['"abc', 'unterminated string at root (offset 0)'],
    ['{"ab', 'unterminated key at root (offset 1)'],
    ['["a\tb"]', 'unescaped control character in string at /0 (offset 3)'],
    ['"\\x"', 'invalid escape at root (offset 1)'],
    ['"\\u12g4"', 'four hex digits must follow at root (offset 5)'],
    ['"\\u12"', 'four hex digits must follow at root (offset 5)'],
    ['\u00a01', 'unexpected character "\u00a0"'],
    ['/* */1', 'unexpected character "/"'],
    ['\ufeff{}', 'byte order mark at root (offset 0)'],
  ];
  for (const [text, fragment] of cases) {
    assertInvalid(() => parseStrict(text), `input: `, fragment);
  }
});

test('a byte order mark and invalid UTF-8 fail in parseStrictBytes', () => {
  assertInvalid(() => parseStrictBytes(Uint8Array.from([0xef, 0xbb, 0xbf, 0x31])), 'byte order mark');
  const invalid = [
    [0x22, 0xff, 0x22], // never valid
    [0x22, 0xc0, 0xaf, 0x22], // overlong '/'
    [0x22, 0xed, 0xa0, 0x80, 0x22], // an encoded surrogate (CESU-8)
    [0x22, 0xe2, 0x82, 0x22], // truncated sequence
  ];
  for (const bytes of invalid) {
    assertInvalid(() => parseStrictBytes(Uint8Array.from(bytes), 'body'), 'body: not valid UTF-8');
  }
});

test('all valid JSON forms parse', () => {
  const cases: [string, JsonValue][] = [
    ['null', null],
    ['true', true],
    ['false', false],
    ['0', 0],
    ['-1', -1],
    ['1.5', 1.5],
    ['-1.5e-3', -0.0015],
    ['1E+2', 100],
    ['1e-2', 0.01],
    ['0.1', 0.1],
    ['1E30', 1e30],
    ['0.0e-400', 0],
    ['""', ''],
    ['"\\"\\\\\\/\\b\\f\\n\\r\\t"', '"\\/\b\f\n\r\t'],
    ['"\\u0000\\u00e9\\u00E9\\u20ac"', '\u0000éé€'],
    ['"héllo wörld ✓ \u{1f600}"', 'héllo wörld ✓ \u{1f600}'],
    ['"\u007f\u0080"', '\u007f\u0080'],
    ['[]', []],
    ['{}', {}],
    [' \t\r\n[ 1 , "a" , { } , [ ] ]\n', [1, 'a', {}, []]],
    ['{"":0,"a":{"b":[null,{"c":false}]}}', { '': 0, a: { b: [null, { c: false }] } }],
    ['{"a":1,"b":1}', { a: 1, b: 1 }],
  ];
  for (const [text, expected] of cases) {
    assert.deepEqual(parseStrict(text), expected, text);
  }
});

test('-0 parses to 0: one JSON value, so live and replayed state cannot differ', () => {
  assert.ok(Object.is(parseStrict('-0'), 0));
  assert.ok(Object.is(parseStrict('-0.0e5'), 0));
});

test('__proto__ becomes an own key, never the prototype', () => {
  const value = parseStrict('{"__proto__":{"polluted":true}}') as Record<string, JsonValue>;
  assert.equal(Object.getPrototypeOf(value), Object.prototype);
  assert.ok(Object.hasOwn(value, '__proto__'));
  assert.deepEqual(Object.keys(value), ['__proto__']);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.deepEqual(value, JSON.parse('{"__proto__":{"polluted":true}}'));
});

test('parseStrictBytes decodes UTF-8 before parsing', () => {
  const bytes = new TextEncoder().encode('{"clé":"€ \u{1f600}"}');
  assert.deepEqual(parseStrictBytes(bytes), { clé: '€ \u{1f600}' });
});

/** Whether JSON.stringify(v) holds a number parseStrict rejects or reads differently (-0). */
function hasExcludedNumber(value: JsonValue): boolean {
  let found = false;
  JSON.stringify(value, (_key, x: unknown) => {
    if (typeof x === 'number' && (Object.is(x, -0) || isAmbiguousInteger(x))) found = true;
    return x;
  });
  return found;
}

test('parseStrict(JSON.stringify(v)) deep-equals v (fast-check)', () => {
  const values = fc.jsonValue({ maxDepth: 8, stringUnit: 'grapheme' }).filter((v) => !hasExcludedNumber(v as JsonValue));
  fc.assert(
    fc.property(values, (v) => {
      assert.deepStrictEqual(parseStrict(JSON.stringify(v)), v);
    }),
    { numRuns: 500 },
  );
});

test('hasLoneSurrogate answers whether UTF-8 would change the string (fast-check)', () => {
  // Independent of its definition: encoding to UTF-8 replaces each lone surrogate with U+FFFD and keeps pairs.
  const unit = fc.oneof(
    fc.integer({ min: 0, max: 0x7f }),
    fc.integer({ min: 0x80, max: 0xffff }),
    fc.integer({ min: 0xd800, max: 0xdbff }),
    fc.integer({ min: 0xdc00, max: 0xdfff }),
  );
  fc.assert(
    fc.property(fc.array(unit, { maxLength: 40 }), fc.string({ maxLength: 80 }), (codes, ascii) => {
      const s = String.fromCharCode(...codes);
      for (const text of [s, ascii + s, s + ascii, ascii])
        assert.equal(hasLoneSurrogate(text), Buffer.from(text, 'utf8').toString('utf8') !== text, JSON.stringify(text));
    }),
    { numRuns: 3000 },
  );
  for (const [text, lone] of [
    ['', false],
    ['\ud800', true],
    ['\udc00', true],
    ['\ud800\udc00', false],
    ['\udc00\ud800', true],
    ['\ud800\ud800\udc00', true],
    ['\ud800\udc00\udc00', true],
    ['a\udbff\udfffb', false],
  ] as const)
    assert.equal(hasLoneSurrogate(text), lone, JSON.stringify(text));
});

test('a string parses exactly when it has no lone surrogate (fast-check)', () => {
  const units = fc.array(fc.oneof(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0xd800, max: 0xdfff })), { maxLength: 12 });
  fc.assert(
    fc.property(units, (codes) => {
      const s = String.fromCharCode(...codes);
      // JSON.stringify escapes lone surrogates as \udXXX (well-formed JSON.stringify).
      for (const text of [JSON.stringify(s), JSON.stringify({ [s]: 0 })]) {
        if (hasLoneSurrogate(s)) assertInvalid(() => parseStrict(text), 'lone surrogate');
        else assert.deepEqual(parseStrict(text), JSON.parse(text));
      }
    }),
    { numRuns: 1000 },
  );
});

/**
 * A document of `n` items, each in an array, in one wide object under its id, and in one long
 * string with escapes and surrogate pairs: its members, keys and string length all grow with `n`.
 */
function documentOf(n: number): string {
  const items = [];
  const byId: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    const item = { id: `item-${i}`, price: i * 1.25, tags: ['a', 'b\\n', '\u00e9\u{1f600}'], ok: i % 2 === 0, note: null };
    items.push(item);
    byId[item.id] = item;
  }
  return JSON.stringify({ items, byId, text: 'line "\u00e9\u{1f600}"\n'.repeat(n) });
}

/** The least CPU time, in microseconds, one `parse` of `text` took over `runs` parses. */
function leastCpuMicros(parse: (text: string) => unknown, text: string, runs: number): number {
  let least = Infinity;
  for (let i = 0; i < runs; i++) {
    const before = process.cpuUsage();
    parse(text);
    const used = process.cpuUsage(before);
    least = Math.min(least, used.user + used.system);
  }
  return least;
}

// How fast a 100 KB document parses is measured by `npm run bench -- json`; this proves the shape
// of the cost. A parse whose work grows with the square of the document (a duplicate-key check
// that scans the object's keys, a surrogate check over the whole text per string) costs 256 times
// as much for a document 16 times as large; a linear one about 16 times. V8's own costs do not grow
// quite linearly (a wide object's dictionary, the collector), so the growth is compared with
// JSON.parse's over the same two documents in the same run; and the least CPU time of several
// runs is taken, which other processes' load does not add to. Linear parsing grows within about
// 1.5 times JSON.parse's growth; the square within about 14 times: the bound of 4 sits between.
test('parse work grows as JSON.parse does: 16 times the members, keys and text do not cost 16 times more again', () => {
  const small = documentOf(1_000);
  const large = documentOf(16_000);
  assert.ok(small.length >= 100_000, `the small document is ${small.length} chars`);
  assert.deepEqual(parseStrict(large), JSON.parse(large));
  const least = { strictSmall: Infinity, strictLarge: Infinity, nativeSmall: Infinity, nativeLarge: Infinity };
  for (let i = 0; i < 3; i++) leastCpuMicros(parseStrict, small, 5); // warm-up
  // Interleaved, so a slow spell of the machine falls on every measure alike.
  for (let round = 0; round < 5; round++) {
    least.strictSmall = Math.min(least.strictSmall, leastCpuMicros(parseStrict, small, 8));
    least.strictLarge = Math.min(least.strictLarge, leastCpuMicros(parseStrict, large, 1));
    least.nativeSmall = Math.min(least.nativeSmall, leastCpuMicros(JSON.parse, small, 8));
    least.nativeLarge = Math.min(least.nativeLarge, leastCpuMicros(JSON.parse, large, 1));
  }
  const growth = (largeMicros: number, smallMicros: number) => largeMicros / Math.max(smallMicros, 1);
  const strict = growth(least.strictLarge, least.strictSmall);
  const native = growth(least.nativeLarge, least.nativeSmall);
  assert.ok(strict / native < 4, `parseStrict grew ${strict.toFixed(1)} times, JSON.parse ${native.toFixed(1)} times (least CPU µs: ${JSON.stringify(least)})`);
});

test('a string value does not keep the text it was parsed from alive', () => {
  // V8 makes a long substring a view of its parent; kept ids (a peer's caches keep one per
  // request) would each pin a whole message. Keep 2 000 ids of 64 KB messages: as views they
  // would hold 128 MB; as copies, well under a megabyte.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const filler = 'x'.repeat(64 * 1024);
  const count = 2000;
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept: string[] = [];
  for (let i = 0; i < count; i++) {
    const parsed = parseStrict(`{"operationId":"op${String(i).padStart(64, '0')}","filler":"${filler}"}`) as { operationId: string };
    kept.push(parsed.operationId);
  }
  gc();
  const perId = (process.memoryUsage().heapUsed - before) / count;
  assert.equal(kept.length, count);
  assert.ok(perId < 4096, `each kept id costs ${perId.toFixed(0)} bytes of heap`);
  assert.equal(kept[7], `op${String(7).padStart(64, '0')}`);
});

test('asLogged: a value as a JSON log holds it — itself, a copy with each -0 as 0, or invalid-input naming the first number JSON cannot write', () => {
  const clean = { a: [1, 0, 'x'], b: { c: null } };
  assert.equal(asLogged(clean), clean, 'nothing to change: the same object, no copy');
  const zeroed = asLogged({ a: [-0, 2], b: { c: -0 } }) as { a: number[]; b: { c: number } };
  assert.ok(Object.is(zeroed.a[0], 0) && Object.is(zeroed.b.c, 0));
  assert.deepEqual(zeroed, JSON.parse(JSON.stringify({ a: [-0, 2], b: { c: -0 } })));
  assert.throws(
    () => asLogged({ a: [1, { 'x/y': Number.NaN }], b: Number.POSITIVE_INFINITY }, 'the answer'),
    (error: unknown) =>
      isAdapterError(error) && error.kind === 'invalid-input' && /the answer: the number NaN at \/a\/1\/x~1y has no JSON form/.test(error.message),
  );
  assert.throws(() => asLogged(Number.NEGATIVE_INFINITY), /the number -Infinity at root/);
});

test('asLogged: a value nested deeper than the strict parser reads (limits.jsonDepthMax) is invalid-input; one at the bound is itself', () => {
  let value: JsonValue = 0;
  for (let depth = 0; depth < limits.jsonDepthMax; depth++) value = depth % 2 === 0 ? [value] : { a: value };
  assert.equal(asLogged(value), value);
  assert.deepEqual(parseStrict(JSON.stringify(value)), value, 'the parser reads it back');
  assert.throws(() => asLogged([value], 'the result'), /the result: nesting deeper than 64/);
});
