/**
 * A retry whose backoff ends past the latest instant a timer records (2^53 − 1 ms) is the DSL's
 * validation error (400, "Invalid duration") at the try, naming the retry policy's pointer — never
 * a retry left out in silence, which let the try complete as if its error had been handled.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonValue } from '../../src/contract/json.js';
import { harness, runToEnd, yaml } from './support.js';

const validation = 'https://serverlessworkflow.io/spec/1.0.0/errors/validation';
/** A constant delay that, added to any instant after 1970-01-02, ends past 2^53 − 1 ms. */
const tooLate = `{ milliseconds: ${Number.MAX_SAFE_INTEGER - 86_400_000} }`;

/** A workflow whose try `t` raises a 503, caught and retried by `retry` (a YAML flow value or a name), with `handler` as its catch.do. */
const retrying = (retry: string, extra = '', handler = ''): JsonValue =>
  yaml(`document: { dsl: '1.0.3', namespace: t, name: late, version: '1.0.0' }
${extra}do:
  - t:
      try:
        - fail:
            raise:
              error: { type: 'https://example.com/busy', status: 503 }
      catch:
        retry: ${retry}${handler}
`);

/** A catch.do that answers `{handled: true}`, as `retrying`'s handler. */
const handledDo = `\n        do:\n          - handled:\n              set: { handled: true }`;

test("a retry backoff past what a timer records faults the try with a validation error naming the policy's pointer, inline and named", async () => {
  const h = harness();
  try {
    const cases: [string, JsonValue, string][] = [
      ['inline', retrying(`{ delay: ${tooLate} }`), '/do/0/t/catch/retry'],
      ['named', retrying('late', `use: { retries: { late: { delay: ${tooLate} } } }\n`), '/use/retries/late'],
      ['with a catch.do', retrying(`{ delay: ${tooLate} }`, '', handledDo), '/do/0/t/catch/retry'],
    ];
    for (const [name, document, pointer] of cases) {
      const record = await runToEnd(h, document, {}, name, 10_000);
      assert.equal(record.status, 'faulted', `${name}: ${JSON.stringify(record.output)}`);
      assert.equal(record.error?.type, validation, name);
      assert.equal(record.error?.status, 400, name);
      assert.equal(record.error?.title, 'Invalid duration', name);
      assert.equal(record.error?.instance, '/do/0/t', name);
      assert.ok(record.error?.detail?.startsWith(`${pointer}: `), `${name}: ${record.error?.detail}`);
      assert.match(record.error?.detail ?? '', /past the latest instant a timer records/, name);
      assert.match(record.error?.detail ?? '', /https:\/\/example\.com\/busy \(503\)/, `${name}: the caught error is named`);
      assert.equal(record.tasks['/do/0/t']?.state, 'faulted', name);
      assert.equal(Object.keys(record.timers).length, 0, `${name}: no retry timer was set`);
    }
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test('the backoff fault is caught by an enclosing try like any validation error', async () => {
  const h = harness();
  try {
    const document = yaml(`document: { dsl: '1.0.3', namespace: t, name: outer, version: '1.0.0' }
do:
  - outer:
      try:
        - t:
            try:
              - fail:
                  raise:
                    error: { type: 'https://example.com/busy', status: 503 }
            catch:
              retry: { delay: ${tooLate} }
      catch:
        errors: { with: { type: '${validation}' } }
        as: problem
        do:
          - report:
              set: '\${ { caught: $problem.title, at: $problem.instance } }'
`);
    const record = await runToEnd(h, document, {}, 'outer', 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { caught: 'Invalid duration', at: '/do/0/outer/try/0/t' });
  } finally {
    await h.close();
  }
});

test("a backoff past what a timer records that the policy's limit.duration ends first leaves no retry, as the limit does", async () => {
  const h = harness();
  try {
    const limited = retrying(`{ delay: ${tooLate}, limit: { duration: { minutes: 1 } } }`, '', handledDo);
    const record = await runToEnd(h, limited, {}, 'limited', 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { handled: true });
  } finally {
    await h.close();
  }
});

test('a retry within what a timer records still retries, and one past its count still goes to catch.do', async () => {
  const h = harness();
  try {
    const within = retrying(`{ delay: { milliseconds: 5 }, limit: { attempt: { count: 2 } } }`, '', handledDo);
    const record = await runToEnd(h, within, {}, 'within', 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { handled: true });
    assert.equal(Object.keys(record.timers).length, 2, 'two retries');
  } finally {
    await h.close();
  }
});
