/** Conservative schema compatibility: what it proves, and what it refuses to assume. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { JsonValue } from '../../src/contract/json.js';
import { schemaAt, schemaIncompatibility } from '../../src/workflow/dsl/schema-compat.js';

const text = { type: 'object', required: ['text'], properties: { text: { type: 'string' } } };

test('equal schemas, schemas differing in annotations, and an accept-anything target are compatible', () => {
  assert.equal(schemaIncompatibility(text, text), undefined);
  assert.equal(schemaIncompatibility({ ...text, description: 'a' }, { ...text, title: 'b' }), undefined);
  assert.equal(schemaIncompatibility({ type: 'integer' }, {}), undefined);
  assert.equal(schemaIncompatibility({ anyOf: [{ type: 'string' }] }, { description: 'anything' }), undefined);
});

test('types: integer is a number, a wider producer is not accepted, an untyped producer is anything', () => {
  assert.equal(schemaIncompatibility({ type: 'integer' }, { type: 'number' }), undefined);
  assert.match(schemaIncompatibility({ type: 'number' }, { type: 'integer' })?.reason ?? '', /may be number/);
  assert.match(schemaIncompatibility({ type: ['string', 'null'] }, { type: 'string' })?.reason ?? '', /may be null/);
  assert.match(schemaIncompatibility({}, { type: 'string' })?.reason ?? '', /any type/);
  assert.equal(schemaIncompatibility({ enum: ['a', 'b'] }, { type: 'string' }), undefined);
});

test('objects: required properties must be required by the producer, declared ones compatible', () => {
  const extra = { type: 'object', required: ['text', 'lang'], properties: { text: { type: 'string', maxLength: 10 }, lang: { enum: ['en', 'fr'] } } };
  assert.equal(schemaIncompatibility(extra, text), undefined);
  assert.deepEqual(schemaIncompatibility({ type: 'object', properties: { text: { type: 'string' } } }, text), {
    at: '/text',
    reason: 'required, but the producing schema does not require it',
  });
  assert.equal(schemaIncompatibility(extra, { type: 'object', properties: { lang: { enum: ['en', 'fr', 'de'] } } }), undefined);
  assert.match(schemaIncompatibility(extra, { type: 'object', properties: { lang: { enum: ['en'] } } })?.reason ?? '', /"fr"/);
  // An optional property the producer may carry with any value.
  assert.equal(schemaIncompatibility(text, { type: 'object', properties: { n: { type: 'integer' } } })?.at, '/n');
  // ...unless the producer is closed.
  assert.equal(schemaIncompatibility({ ...text, additionalProperties: false }, { type: 'object', properties: { n: { type: 'integer' } } }), undefined);
});

test('closed targets need closed producers with declared properties', () => {
  const closed = { ...text, additionalProperties: false };
  assert.match(schemaIncompatibility(text, closed)?.reason ?? '', /allows no other properties/);
  assert.equal(schemaIncompatibility(closed, closed), undefined);
  const wider = { type: 'object', required: ['text'], properties: { text: { type: 'string' }, n: { type: 'integer' } }, additionalProperties: false };
  assert.equal(schemaIncompatibility(wider, closed)?.at, '/n');
  assert.equal(
    schemaIncompatibility({ type: 'object', additionalProperties: { type: 'integer' } }, { type: 'object', additionalProperties: { type: 'number' } }),
    undefined,
  );
  assert.equal(
    schemaIncompatibility({ type: 'object', additionalProperties: { type: 'number' } }, { type: 'object', additionalProperties: { type: 'integer' } })?.at,
    '/*',
  );
});

test('bounds, arrays and keywords compared only by equality', () => {
  assert.equal(schemaIncompatibility({ type: 'integer', minimum: 1, maximum: 5 }, { type: 'integer', minimum: 0, maximum: 10 }), undefined);
  assert.match(schemaIncompatibility({ type: 'integer', minimum: 0 }, { type: 'integer', minimum: 1 })?.reason ?? '', /"minimum" 1/);
  assert.match(schemaIncompatibility({ type: 'string' }, { type: 'string', maxLength: 5 })?.reason ?? '', /"maxLength" 5/);
  assert.match(schemaIncompatibility({ type: 'string' }, { type: 'string', pattern: '^a' })?.reason ?? '', /"pattern"/);
  assert.equal(
    schemaIncompatibility({ type: 'array', items: { type: 'integer' }, minItems: 2 }, { type: 'array', items: { type: 'number' }, minItems: 1 }),
    undefined,
  );
  assert.equal(schemaIncompatibility({ type: 'array', items: { type: 'string' } }, { type: 'array', items: { type: 'number' } })?.at, '/*');
  assert.match(schemaIncompatibility({ type: 'string' }, { anyOf: [{ type: 'string' }, { type: 'null' }] })?.reason ?? '', /"anyOf"/);
  assert.equal(schemaIncompatibility({ anyOf: [{ type: 'string' }] }, { anyOf: [{ type: 'string' }] }), undefined);
});

test('schemaAt follows required properties and guaranteed array items only', () => {
  const doc = {
    type: 'object',
    required: ['a'],
    properties: {
      a: { type: 'array', minItems: 2, items: { type: 'object', required: ['b/c'], properties: { 'b/c': { type: 'string' } } } },
      z: { type: 'string' },
    },
  };
  assert.deepEqual(schemaAt(doc, '/a/1/b~1c'), { schema: { type: 'string' }, path: ['a', 1, 'b/c'] });
  assert.deepEqual(schemaAt(doc, ''), { schema: doc, path: [] });
  assert.match((schemaAt(doc, '/z') as { problem: string }).problem, /not a required property/);
  assert.match((schemaAt(doc, '/a/2') as { problem: string }).problem, /may be absent/);
  assert.match((schemaAt({}, '/a') as { problem: string }).problem, /no single type/);
});

test('"nullable: true" (read by the shared ajv) lets the producer be null: not proven, nor followed', () => {
  assert.match(schemaIncompatibility({ type: 'string', nullable: true }, { type: 'string' })?.reason ?? '', /may be null/);
  assert.equal(schemaIncompatibility({ type: 'string', nullable: true }, { type: ['string', 'null'] }), undefined);
  const maybe = { type: 'object', nullable: true, required: ['a'], properties: { a: { type: 'string' } } };
  assert.match((schemaAt(maybe, '/a') as { problem: string }).problem, /no single type/);
});

test('a producer with patternProperties: a property a pattern matches is not governed by additionalProperties', () => {
  const patterned = { type: 'object', additionalProperties: { const: [] }, patternProperties: { '^a': {} } };
  // {"a": [null]} is a value of the producer (the pattern's schema, not additionalProperties, holds "a").
  assert.equal(schemaIncompatibility(patterned, { type: 'object', additionalProperties: { const: [] } })?.at, '/*');
  const closed = { type: 'object', additionalProperties: false, patternProperties: { '^a': { type: 'number' } } };
  // {"ab": 1} is a value of the producer: not closed to "ab".
  assert.equal(schemaIncompatibility(closed, { type: 'object', properties: { ab: { type: 'string' } } })?.at, '/ab');
  assert.match(schemaIncompatibility(closed, { type: 'object', additionalProperties: false })?.reason ?? '', /does not close its own/);
  const selected = { type: 'object', required: ['ab'], additionalProperties: { type: 'string' }, patternProperties: { '^a': { type: 'number' } } };
  assert.deepEqual(schemaAt(selected, '/ab'), { schema: {}, path: ['ab'] });
});

test('properties named like Object.prototype members are properties like any other', () => {
  const closed = { type: 'object', properties: { toString: { type: 'number' } }, additionalProperties: false };
  assert.equal(schemaIncompatibility(closed, { type: 'object', additionalProperties: false })?.at, '/toString');
  const constructed = { type: 'object', properties: { constructor: { type: 'number' } }, additionalProperties: false };
  assert.equal(schemaIncompatibility(constructed, { type: 'object', additionalProperties: { type: 'string' } })?.at, '/constructor');
  assert.equal(
    schemaIncompatibility({ type: 'object', additionalProperties: { type: 'string' } }, { type: 'object', properties: { toString: { type: 'string' } } }),
    undefined,
  );
  const open = { type: 'object', required: ['toString'], additionalProperties: { type: 'string' } };
  assert.deepEqual(schemaAt(open, '/toString'), { schema: { type: 'string' }, path: ['toString'] });
});

test('a "__proto__" keyword is a keyword like any other, never the prototype of what the rules read', () => {
  // As a bundle's JSON gives it: an own "__proto__" member, which ajv ignores (the producer is open).
  const producer = JSON.parse('{"type":"object","__proto__":{"additionalProperties":false}}') as JsonValue;
  assert.equal(schemaIncompatibility(producer, { type: 'object', properties: { a: { type: 'string' } } })?.at, '/a');
});

test('equal schemas with references prove nothing unless they are the same whole document', () => {
  // A reference resolves against its own document: here into an annotation the rules set aside.
  const numbers = { type: 'object', properties: { a: { $ref: '#/examples/0' } }, examples: [{ type: 'number' }] };
  const strings = { type: 'object', properties: { a: { $ref: '#/examples/0' } }, examples: [{ type: 'string' }] };
  assert.match(schemaIncompatibility(numbers, strings)?.reason ?? '', /equal, but a reference/);
  assert.match(schemaIncompatibility(numbers, strings, '', true)?.reason ?? '', /equal, but a reference/);
  // A part selected out of its document ("/x" of {properties: {x: …, b: {type: number}}}) still refers into it.
  const selected = { type: 'object', properties: { a: { $ref: '#/properties/b' } }, additionalProperties: false };
  const consumer = { type: 'object', properties: { a: { $ref: '#/properties/b' }, b: { type: 'string' } } };
  assert.equal(schemaIncompatibility(selected, consumer)?.at, '/a');
  // The same whole document, compared as one, is the same schema.
  const defined = { $ref: '#/definitions/t', definitions: { t: { type: 'string' } } };
  assert.equal(schemaIncompatibility(defined, structuredClone(defined), '', true), undefined);
  assert.match(schemaIncompatibility(defined, structuredClone(defined))?.reason ?? '', /equal, but a reference/);
});
