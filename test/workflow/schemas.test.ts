/**
 * The data schemas of a workflow document (src/workflow/schemas.ts): found wherever the DSL puts
 * them, compiled once per document, bounded, refused with their JSON Pointer when they cannot
 * compile (in a bundle too); a value that fails one is described, in at most 2 048 characters never ending in half a surrogate pair.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadBundle } from '../../src/contract/bundle.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { hasLoneSurrogate, parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { checkBundleWorkflows } from '../../src/workflow/dsl/bundle.js';
import { checkDocument } from '../../src/workflow/exec/document.js';
import { documentSchemas } from '../../src/workflow/schemas.js';
import { repoRoot } from '../support/assertions.js';
import { harness, runToEnd, yaml, refused } from './support.js';

const schema = (document: JsonValue): JsonObject => ({ format: 'json', document });

const everywhere = yaml(`
document: { dsl: '1.0.3', namespace: t, name: everywhere, version: '1.0.0' }
input: { schema: { format: json, document: { type: object } } }
output: { schema: { format: json, document: { type: object } } }
do:
  - outer:
      input: { schema: { format: json, document: { required: [a] } } }
      do:
        - inner:
            output: { schema: { format: json, document: { type: string } } }
            export: { as: '.', schema: { format: json, document: { type: number } } }
            set: { x: 1 }
  - loop:
      for: { in: '.items' }
      do:
        - each: { output: { schema: { format: json, document: { const: 1 } } }, set: { x: 1 } }
  - guarded:
      try:
        - risky: { input: { schema: { format: json, document: { type: array } } }, set: { x: 1 } }
      catch:
        do:
          - handler: { output: { schema: { format: json, document: { type: boolean } } }, set: { x: 1 } }
  - both:
      fork:
        branches:
          - left: { output: { schema: { format: json, document: { type: 'null' } } }, set: { x: 1 } }
  - hear:
      listen: { to: { any: [] } }
      foreach:
        output: { schema: { format: json, document: { type: integer } } }
        do:
          - item: { input: { schema: { format: json, document: { minimum: 2 } } }, set: { x: 1 } }
`);

test('every data schema is found under its JSON Pointer, and a value is checked against the one there', () => {
  const schemas = documentSchemas(everywhere);
  const where: [string, JsonValue, JsonValue][] = [
    ['/input/schema', {}, 1],
    ['/output/schema', {}, []],
    ['/do/0/outer/input/schema', { a: 1 }, {}],
    ['/do/0/outer/do/0/inner/output/schema', 's', 1],
    ['/do/0/outer/do/0/inner/export/schema', 1, 's'],
    ['/do/1/loop/do/0/each/output/schema', 1, 2],
    ['/do/2/guarded/try/0/risky/input/schema', [], {}],
    ['/do/2/guarded/catch/do/0/handler/output/schema', true, 1],
    ['/do/3/both/fork/branches/0/left/output/schema', null, 1],
    ['/do/4/hear/foreach/output/schema', 3, 1.5],
    ['/do/4/hear/foreach/do/0/item/input/schema', 2, 1],
  ];
  assert.equal(schemas.size, where.length);
  for (const [pointer, good, bad] of where) {
    assert.equal(schemas.problem(pointer, good), undefined, `${pointer} accepts ${JSON.stringify(good)}`);
    assert.ok(schemas.problem(pointer, bad), `${pointer} refuses ${JSON.stringify(bad)}`);
  }
  assert.equal(schemas.problem('/do/0/outer/output/schema', 'anything'), undefined, 'no schema there: nothing to refuse');
  assert.match(schemas.problem('/do/0/outer/input/schema', {}) ?? '', /must have required property 'a'/);
});

test('schemas are compiled once per document object', () => {
  assert.equal(documentSchemas(everywhere), documentSchemas(everywhere));
  assert.notEqual(documentSchemas(structuredClone(everywhere)), documentSchemas(everywhere));
});

test('two documents may use the same $id without colliding', () => {
  const withId = (type: string) =>
    yaml(`
document: { dsl: '1.0.3', namespace: t, name: ids, version: '1.0.0' }
input: { schema: { format: json, document: { $id: 'https://example.com/s', type: ${type} } } }
do: [ { a: { set: { x: 1 } } } ]
`);
  assert.equal(documentSchemas(withId('string')).problem('/input/schema', 's'), undefined);
  assert.equal(documentSchemas(withId('number')).problem('/input/schema', 1), undefined);
  assert.ok(documentSchemas(withId('number')).problem('/input/schema', 's'));
});

const single = (input: JsonObject): JsonObject => ({
  document: { dsl: '1.0.3', namespace: 't', name: 'single', version: '1.0.0' },
  do: [{ greet: { input, set: { x: 1 } } }],
});

test('a schema that cannot compile, an external one, another format, or too many or too large, is refused with its pointer', () => {
  refused(() => checkDocument(single({ schema: schema({ type: 12 }) })), 'invalid-input', '/do/0/greet/input/schema/document');
  refused(() => checkDocument(single({ schema: schema({ $ref: '#/definitions/missing' }) })), 'invalid-input', '/do/0/greet/input/schema/document');
  refused(() => checkDocument(single({ schema: schema(7) })), 'invalid-input', '/do/0/greet/input/schema/document');
  refused(
    () => checkDocument(single({ schema: { format: 'json', resource: { endpoint: 'https://example.com/s.json' } } })),
    'unsupported',
    '/do/0/greet/input/schema/resource',
  );
  refused(() => checkDocument(single({ schema: { format: 'avro', document: {} } })), 'unsupported', '/do/0/greet/input/schema/format');
  const big = schema({ enum: [Array.from({ length: limits.workflowSchemaBytesMax }, () => 'x').join('')] });
  refused(() => checkDocument(single({ schema: big })), 'invalid-input', '/do/0/greet/input/schema/document');
  const many: JsonObject = {
    document: { dsl: '1.0.3', namespace: 't', name: 'many', version: '1.0.0' },
    do: Array.from({ length: limits.workflowSchemasMax + 1 }, (_v, i) => ({ [`t${i}`]: { input: { schema: schema({}) }, set: {} } })),
  };
  assert.match(
    refused(() => checkDocument(many), 'invalid-input', '/'),
    /at most 256 data schemas/,
  );
});

test('in a bundle, a schema that cannot compile is refused naming its pointer in the bundle', async () => {
  const bundle = parseStrict(readFileSync(join(repoRoot(), 'test', 'workflow', 'fixtures', 'review-publish.bundle.json'), 'utf8')) as JsonObject;
  const workflow = (bundle.workflows as JsonObject)['review-or-escalate'] as JsonObject;
  workflow.output = { schema: schema({ type: 'object', properties: { a: { minimum: 'one' } } }) };
  await assert.rejects(checkBundleWorkflows(loadBundle(bundle)), (error) => {
    assert.ok(isAdapterError(error));
    assert.equal(error.kind, 'invalid-input');
    assert.ok(error.description?.startsWith('/workflows/review-or-escalate/output/schema/document: not a valid JSON Schema'), error.message);
    return true;
  });
});

test('a failing value is described in at most 2 048 characters, never ending in half of a surrogate pair: a caller’s key of emoji is cut before the pair, and the recorded error reads back strictly', async () => {
  const typed = yaml(`
document: { dsl: '1.0.3', namespace: t, name: typed, version: '1.0.0' }
input: { schema: { format: json, document: { type: object, additionalProperties: { type: string } } } }
do:
  - done: { set: { ok: true } }
`);
  // "/" then pairs: the 2 048th character is the high half of a pair.
  const input = { ['\u{1F600}'.repeat(2000)]: 1 };
  const problem = documentSchemas(typed).problem('/input/schema', input) ?? '';
  assert.ok(problem.length > 2000 && problem.length <= 2048, String(problem.length));
  assert.ok(!hasLoneSurrogate(problem), 'no half of a pair');
  const h = harness();
  try {
    const record = await runToEnd(h, typed, input, 'emoji-key');
    assert.equal(record.status, 'faulted');
    assert.match(record.error?.detail ?? '', /^the workflow input does not match the schema at \/input\/schema: \/😀/);
    // What a NATS reply carries and its client parses strictly.
    assert.deepEqual(parseStrict(JSON.stringify(record.error)), record.error);
  } finally {
    await h.close();
  }
});
