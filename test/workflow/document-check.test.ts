/**
 * checkDocument answers a document object it already accepted from a WeakMap: the same name as
 * the whole check, and a refused document is refused again every time (refusals are not kept).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isAdapterError } from '../../src/contract/errors.js';
import type { JsonValue } from '../../src/contract/json.js';
import { checkDocument } from '../../src/workflow/exec/document.js';

const head = { dsl: '1.0.3', namespace: 'test', name: 'greet', version: '1.0.0' };

test('a document checked again answers what the whole check answered; a copy is checked afresh', () => {
  const document: JsonValue = { document: head, do: [{ hello: { set: { greeting: '${ .name }' } } }] };
  const first = checkDocument(document);
  assert.equal(first, 'greet');
  assert.equal(checkDocument(document), first);
  assert.equal(checkDocument(structuredClone(document)), first);
});

test('a refused document is refused each time it is checked', () => {
  const document: JsonValue = { document: head, do: [{ clock: { set: { at: '${ now }' } } }] };
  for (let i = 0; i < 3; i++)
    assert.throws(
      () => checkDocument(document),
      (e: unknown) => isAdapterError(e) && e.kind === 'unsupported' && (e.description ?? '').includes('now'),
    );
});
