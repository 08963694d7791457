/**
 * `call: http`'s endpoint as a URI template (DSL 1.0.3 "URI Template"): RFC 6570 simple string
 * expansion from the task input's top-level members. A variable with no value (absent, or null)
 * expands to the empty string; one that is an object or an array is the DSL's expression error
 * (400), raised before any request; a scalar is encoded as simple expansion encodes it (every
 * character outside the unreserved set percent-encoded).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonValue } from '../../src/contract/json.js';
import { runToEnd, withPathService, yaml } from './support.js';

const expression = 'https://serverlessworkflow.io/spec/1.0.0/errors/expression';

const getting = (endpoint: string): JsonValue =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: template, version: '1.0.0' }
do:
  - get:
      call: http
      with: { method: get, endpoint: '${endpoint}' }
`);

test('a URI template variable with no value in the task input, absent or null, expands to the empty string', () =>
  withPathService(async (base, paths, h) => {
    const document = getting(`${base}/pets/{petId}/owner?tag={tag}`);
    const absent = await runToEnd(h, document, {}, 'absent');
    assert.equal(absent.status, 'completed', JSON.stringify(absent.error));
    const nulls = await runToEnd(h, document, { petId: null, tag: null }, 'null');
    assert.equal(nulls.status, 'completed', JSON.stringify(nulls.error));
    assert.deepEqual(paths, ['/pets//owner?tag=', '/pets//owner?tag=']);
  }));

test('a URI template variable that is an object or an array is an expression error (400) at the task, and nothing is sent', () =>
  withPathService(async (base, paths, h) => {
    const document = getting(`${base}/pets/{petId}`);
    const values: [string, JsonValue][] = [
      ['object', { id: 1 }],
      ['array', [1, 2]],
    ];
    for (const [key, petId] of values) {
      const record = await runToEnd(h, document, { petId }, key);
      assert.equal(record.status, 'faulted', key);
      assert.equal(record.error?.type, expression, key);
      assert.equal(record.error?.status, 400, key);
      assert.equal(record.error?.instance, '/do/0/get', key);
      assert.match(record.error?.detail ?? '', /\{petId\}/, key);
    }
    assert.deepEqual(paths, [], 'no request was made');
  }));

test('a URI template variable that is a string, a number or a boolean is percent-encoded outside the unreserved characters', () =>
  withPathService(async (base, paths, h) => {
    const document = getting(`${base}/things/{a}/{b}/{c}`);
    const record = await runToEnd(h, document, { a: "it's (a/b)*!~.-_", b: 1.5, c: true }, 'scalars');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(paths, ['/things/it%27s%20%28a%2Fb%29%2A%21~.-_/1.5/true']);
  }));
