/**
 * Durations held to the DSL 1.0.3 schema's `duration`: an inline object of at least one of the
 * lowercase keys days, hours, minutes, seconds and milliseconds, each an integer (non-negative
 * here), or an ISO 8601 string — whether written in the document (checked before anything is
 * recorded) or computed by a runtime expression (a `wait` from the input: the DSL's validation
 * error at the task otherwise).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonValue } from '../../src/contract/json.js';
import { checkDocument } from '../../src/workflow/exec/document.js';
import { durationMs } from '../../src/workflow/exec/duration.js';
import { harness, refused, runToEnd, yaml } from './support.js';

const head = { dsl: '1.0.3', namespace: 't', name: 'nap', version: '1.0.0' };

/** Values the schema does not take as a duration, and that an earlier reading summed or read as zero. */
const outside: [string, JsonValue][] = [
  ['empty', {}],
  ['capitalised', { Seconds: 1 }],
  ['upper case', { MILLISECONDS: 5 }],
  ['keys differing in case', { seconds: 1, Seconds: 1 }],
  ['a fraction', { seconds: 1.5 }],
  ['a fraction of a millisecond', { days: 1, milliseconds: 1.5 }],
  ['a prototype name', { constructor: 1 }],
  ['an unknown key beside a known one', { seconds: 1, weeks: 1 }],
  ['a negative amount', { milliseconds: -1 }],
  ['a string amount', { seconds: '1' }],
];

test('a duration is only what the schema allows: lowercase keys, integers, at least one', () => {
  for (const [name, value] of outside) assert.equal(durationMs(value), undefined, name);
  assert.equal(durationMs({ seconds: 1 }), 1000);
  assert.equal(durationMs({ seconds: 0 }), 0);
  assert.equal(durationMs({ days: 1, hours: 1, minutes: 1, seconds: 1, milliseconds: 1 }), 90_061_001);
  assert.equal(durationMs('PT1.5S'), 1500);
  assert.equal(durationMs('P1DT2H'), 93_600_000);
});

test('a written duration outside the schema is refused before anything is recorded, naming its pointer', () => {
  for (const [, value] of outside) {
    refused(() => checkDocument({ document: head, do: [{ nap: { wait: value } }] }), 'invalid-input', '/do/0/nap/wait');
    refused(() => checkDocument({ document: head, do: [{ nap: { wait: 'PT1S', timeout: { after: value } } }] }), 'invalid-input', '/do/0/nap/timeout/after');
  }
});

test('a wait whose duration is computed outside the schema faults its task with the DSL validation error; one inside it waits', async () => {
  const h = harness();
  try {
    const document = yaml(`document: { dsl: '1.0.3', namespace: t, name: nap, version: '1.0.0' }
do:
  - nap:
      wait: '\${ .d }'
`);
    for (const [name, d] of outside) {
      const record = await runToEnd(h, document, { d }, name, 10_000);
      assert.equal(record.status, 'faulted', name);
      assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/validation', name);
      assert.equal(record.error?.status, 400, name);
      assert.equal(record.error?.title, 'Invalid duration', name);
      assert.equal(record.error?.instance, '/do/0/nap', name);
      assert.equal(Object.keys(record.timers).length, 0, `${name}: no timer was set`);
    }
    const waited = await runToEnd(h, document, { d: { milliseconds: 20 } }, 'within', 10_000);
    assert.equal(waited.status, 'completed', JSON.stringify(waited.error));
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});
