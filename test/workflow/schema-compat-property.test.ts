/**
 * Schema compatibility against the validator itself (src/workflow/dsl/schema-compat.ts): over
 * generated pairs of schemas — types (lists of them, `integer` beside `number`, `nullable`),
 * objects (properties named like Object.prototype's members, `required`, `additionalProperties`
 * as a boolean or a schema, `patternProperties`), arrays (`items` as a schema or draft-07's
 * tuple), `enum`/`const` (objects, -0 and 0), bounds of both forms, `multipleOf`, `pattern`,
 * `format`, boolean schemas, combinators, `$ref` into `definitions`, `examples` and the root —
 * whenever compatibility is proven, every generated value the producing schema accepts is
 * accepted by the consuming one, both compiled by the shared ajv that validates stage values at
 * run time (draft-07, no formats checked). The consuming schema is the producing one weakened
 * (keywords dropped, bounds moved), now and then with a property or a reference's target taken
 * from another schema, so that proofs are common. Then the keywords of other drafts and the
 * bounds' two forms by hand: each pair proven is checked on sample values, each refused is meant.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { ValidateFunction } from 'ajv';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { ajv } from '../../src/contract/validation.js';
import { schemaIncompatibility } from '../../src/workflow/dsl/schema-compat.js';

const names = fc.constantFrom('a', 'b', 'ab', 'toString', 'constructor');
const scalar = fc.constantFrom<JsonValue>(null, true, false, -0, 0, 0.5, 1, 2, 3, -1, 10, '', 'a', 'ab', 'abc', 'b', 'ba', '2026-01-01');
const types = fc.constantFrom('string', 'number', 'integer', 'object', 'array', 'null', 'boolean');
const bound = fc.constantFrom(-1, 0, 0.5, 1, 2, 3);
const count = fc.nat(3);

const { value } = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { maxDepth: 3, depthIdentifier: 'value' },
    scalar,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(names, tie('value'), { maxKeys: 3, noNullPrototype: true }),
  ),
}));

const { schema } = fc.letrec<{ schema: JsonValue }>((tie) => ({
  schema: fc.oneof(
    { maxDepth: 3, depthIdentifier: 'schema' },
    fc.constantFrom<JsonValue>(true, false, {}),
    fc.record({ type: fc.oneof(types, fc.uniqueArray(types, { minLength: 1, maxLength: 3 })), nullable: fc.constant(true) }, { requiredKeys: ['type'] }),
    fc.record(
      {
        type: fc.constantFrom<JsonValue>('number', 'integer', ['integer', 'string']),
        minimum: bound,
        maximum: bound,
        exclusiveMinimum: bound,
        exclusiveMaximum: bound,
        multipleOf: fc.constantFrom(1, 2, 0.5),
      },
      { requiredKeys: [] },
    ),
    fc.record(
      {
        type: fc.constantFrom<JsonValue>('string', ['string', 'null']),
        minLength: count,
        maxLength: count,
        pattern: fc.constantFrom('^a', 'b$'),
        format: fc.constantFrom('date', 'email'),
      },
      { requiredKeys: [] },
    ),
    fc.record({ enum: fc.array(value, { minLength: 1, maxLength: 3 }), type: types }, { requiredKeys: ['enum'] }),
    fc.record({ const: value }),
    fc.record(
      {
        type: fc.constant('object'),
        properties: fc.dictionary(names, tie('schema'), { maxKeys: 2, noNullPrototype: true }),
        required: fc.uniqueArray(names, { maxLength: 2 }),
        additionalProperties: fc.oneof(fc.boolean(), tie('schema')),
        patternProperties: fc.record({ '^a': tie('schema') }),
        minProperties: count,
        maxProperties: count,
      },
      { requiredKeys: [] },
    ),
    fc.record(
      {
        type: fc.constant('array'),
        items: fc.oneof(tie('schema'), fc.array(tie('schema'), { minLength: 1, maxLength: 2 })),
        minItems: count,
        maxItems: count,
      },
      { requiredKeys: [] },
    ),
    fc.record(
      { type: types, anyOf: fc.array(tie('schema'), { minLength: 1, maxLength: 2 }), not: tie('schema'), if: tie('schema'), then: tie('schema') },
      { requiredKeys: [] },
    ),
    fc.record({ $ref: fc.constantFrom('#', '#/definitions/d', '#/examples/0'), type: types }, { requiredKeys: ['$ref'] }),
  ),
}));

/** A whole document: a schema with the targets its references may name, when it has references. */
const documentOf = (root: JsonValue, d: JsonValue, example: JsonValue): JsonValue =>
  typeof root === 'object' && root !== null && !Array.isArray(root) && JSON.stringify(root).includes('"$ref"')
    ? { ...root, definitions: { d }, examples: [example] }
    : root;

/** A small seeded generator, so that weakening is a function of the case. */
function draws(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const lower = new Set(['minimum', 'exclusiveMinimum', 'minLength', 'minItems', 'minProperties']);
const upper = new Set(['maximum', 'exclusiveMaximum', 'maxLength', 'maxItems', 'maxProperties']);

const propertyNames = ['a', 'b', 'ab', 'toString', 'constructor'];

/**
 * `schema` with keywords dropped, bounds loosened (or tightened) and subschemas weakened in turn;
 * now and then a property constrained, or a reference's target replaced, by a schema of `pool`.
 */
function weaken(schema: JsonValue, next: () => number, pool: JsonValue[]): JsonValue {
  if (typeof schema === 'boolean') return next() < 0.3 ? true : schema;
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return schema;
  const pick = (): JsonValue => pool[Math.floor(next() * pool.length)] ?? {};
  const out: JsonObject = {};
  for (const [key, kept] of Object.entries(schema)) {
    const roll = next();
    if (roll < 0.25 && key !== 'definitions' && key !== 'examples') continue;
    let v = kept;
    if (typeof v === 'number' && (lower.has(key) || upper.has(key))) v = roll < 0.5 ? v : v + (lower.has(key) ? -1 : 1) * (roll < 0.9 ? 1 : -1);
    else if (key === 'properties' || key === 'definitions' || key === 'patternProperties') {
      v = Object.fromEntries(Object.entries(v as JsonObject).map(([k, s]) => [k, next() < 0.2 ? pick() : weaken(s, next, pool)]));
    } else if (key === 'items' || key === 'additionalProperties' || key === 'not' || key === 'if' || key === 'then') {
      v = Array.isArray(v) ? v.map((s) => weaken(s, next, pool)) : weaken(v, next, pool);
    } else if (key === 'examples' || key === 'anyOf') {
      v = (v as JsonValue[]).map((s) => (next() < 0.3 ? pick() : weaken(s, next, pool)));
    } else if (key === 'required') {
      v = (v as string[]).filter(() => next() < 0.7);
    }
    out[key] = v;
  }
  if (next() < 0.2) {
    const properties = typeof out.properties === 'object' && out.properties !== null && !Array.isArray(out.properties) ? out.properties : {};
    out.properties = { ...properties, [propertyNames[Math.floor(next() * propertyNames.length)]!]: pick() };
  }
  return out;
}

const compiled = (s: JsonValue): ValidateFunction | undefined => {
  try {
    return ajv.compile(s as object);
  } catch {
    return undefined; // not a schema the bundle would have been accepted with
  }
};

/**
 * The values among `values` that `from` accepts and `to` refuses, when compatibility is proven
 * (undefined when it is not, or a schema does not compile); `exercised` counts the pairs where
 * some value passed `from`, so that the property is known to test something.
 */
function counterexamples(from: JsonValue, to: JsonValue, values: JsonValue[], tally: { exercised: number }): JsonValue[] {
  if (schemaIncompatibility(from, to, '', true) !== undefined) return [];
  const vf = compiled(from);
  const vt = compiled(to);
  if (!vf || !vt) return [];
  const produced = values.filter((v) => accepts(vf, v));
  if (produced.length > 0) tally.exercised++;
  return produced.filter((v) => !accepts(vt, v));
}

/** A schema that refers to itself without consuming data (`{"$ref": "#"}`) overflows the stack: that is no acceptance. */
function accepts(validate: ValidateFunction, v: JsonValue): boolean {
  try {
    return validate(v) === true;
  } catch {
    return false;
  }
}

test('a proven-compatible pair: every value the producing schema accepts, the consuming schema accepts', () => {
  const tally = { exercised: 0 };
  fc.assert(
    fc.property(schema, schema, schema, schema, fc.integer(), fc.array(value, { minLength: 20, maxLength: 40 }), (root, d, example, other, seed, values) => {
      const from = documentOf(root, d, example);
      const to = weaken(from, draws(seed), [other, d, example]);
      assert.deepEqual(counterexamples(from, to, values, tally), [], `proven compatible: ${JSON.stringify(from)} → ${JSON.stringify(to)}`);
    }),
    { seed: 20261207, numRuns: 2500 },
  );
  assert.ok(tally.exercised > 300, `only ${tally.exercised} proven pairs had a value to check: the property would test little`);
});

const samples: JsonValue[] = [
  null,
  true,
  -0,
  0,
  0.5,
  1,
  2,
  3,
  -1,
  '',
  'a',
  'ab',
  '2026-01-01',
  'not a date',
  [],
  [1, 1],
  ['a'],
  [1, 'a'],
  {},
  { a: 1 },
  { a: 'x', b: 1 },
];

test('keywords by hand: what is proven holds for the validator, what is refused is refused on purpose', () => {
  const proven: [JsonValue, JsonValue][] = [
    // Equal formats (the shared ajv checks none; equal ones would agree if it did).
    [
      { type: 'string', format: 'date' },
      { type: 'string', format: 'date' },
    ],
    // The same multipleOf, a narrower type.
    [
      { type: 'integer', multipleOf: 2 },
      { type: 'number', multipleOf: 2 },
    ],
    // Keywords in the producer narrow it (draft-07 applies a $ref's siblings; unknown ones are ignored).
    [{ $ref: '#/definitions/a', type: 'string', definitions: { a: {} } }, { type: 'string' }],
    [{ type: 'string', anyOf: [{ type: 'number' }, { minLength: 1 }] }, { type: 'string' }],
    [{ type: 'string', not: { const: 'a' }, if: { minLength: 1 }, then: { maxLength: 1 }, else: { type: 'number' } }, { type: 'string' }],
    [{ type: 'array', uniqueItems: true, contains: { type: 'number' }, prefixItems: [{ type: 'string' }] }, { type: 'array' }],
    [{ type: 'object', dependentRequired: { a: ['b'] }, propertyNames: { maxLength: 1 }, unevaluatedProperties: false }, { type: 'object' }],
    // -0 is 0, 1.0 is 1, for JSON and for ajv.
    [{ enum: [-0, 1.0] }, { enum: [0, 1] }],
    [{ const: 1.0 }, { type: 'integer' }],
  ];
  for (const [from, to] of proven) {
    assert.equal(schemaIncompatibility(from, to, '', true), undefined, JSON.stringify([from, to]));
    assert.deepEqual(counterexamples(from, to, samples, { exercised: 0 }), [], JSON.stringify([from, to]));
  }
  const refused: [JsonValue, JsonValue][] = [
    [{ type: 'string' }, { type: 'string', format: 'date' }],
    // Every integer above 0 is at least 1, but the rules compare each bound with its own kind.
    [
      { type: 'integer', exclusiveMinimum: 0 },
      { type: 'integer', minimum: 1 },
    ],
    [
      { type: 'number', multipleOf: 2 },
      { type: 'integer', multipleOf: 2 },
    ],
    [{ type: 'array' }, { type: 'array', uniqueItems: true }],
    [{ type: 'array' }, { type: 'array', contains: { type: 'number' } }],
    [{ type: 'array' }, { type: 'array', prefixItems: [{ type: 'string' }] }],
    [
      { type: 'array', items: [{ type: 'string' }] },
      { type: 'array', items: { type: 'string' } },
    ],
    [{ type: 'object' }, { type: 'object', dependentRequired: { a: ['b'] } }],
    [{ type: 'object' }, { type: 'object', propertyNames: { maxLength: 1 } }],
    [{ type: 'object' }, { type: 'object', unevaluatedProperties: false }],
    [{ type: 'string' }, { $ref: '#/definitions/s', definitions: { s: { type: 'string' } } }],
    [{ enum: ['a', 1] }, { type: 'string' }],
  ];
  for (const [from, to] of refused) assert.notEqual(schemaIncompatibility(from, to, '', true), undefined, JSON.stringify([from, to]));
});
