/**
 * A `call: http` request that cannot be made as written — a GET or HEAD with a body, a method
 * that is not an HTTP token or that fetch forbids (CONNECT, TRACE, TRACK), an endpoint whose scheme
 * is not http or https, a header name that is not a token or a value (from the input) holding CR,
 * LF, NUL or a character past U+00FF — is the DSL's validation error (400) at the task, raised before anything
 * is sent: the document is at fault, not the service, and a `try` that retries communication
 * errors (the DSL's own example retries 503) must not send it again and again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonValue } from '../../src/contract/json.js';
import { runToEnd, withPathService, yaml } from './support.js';

const validation = 'https://serverlessworkflow.io/spec/1.0.0/errors/validation';

const calling = (withs: string): JsonValue =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: validity, version: '1.0.0' }
do:
  - attempt:
      try:
        - send:
            call: http
            with: ${withs}
      catch:
        errors: { with: { type: 'https://serverlessworkflow.io/spec/1.0.0/errors/communication' } }
        retry: { limit: { attempt: { count: 2 } } }
`);

test('a request that cannot be made as written is a validation error (400) at the call, never sent, and not retried as a communication error', () =>
  withPathService(async (base, paths, h) => {
    const cases: [string, string, RegExp][] = [
      ['get-body', `{ method: get, endpoint: '${base}/a', body: { a: 1 } }`, /GET request cannot have a body/],
      ['head-body', `{ method: head, endpoint: '${base}/a', body: text }`, /HEAD request cannot have a body/],
      ['not-a-token', `{ method: 'bad method', endpoint: '${base}/a' }`, /"bad method" is not an HTTP method/],
      ['forbidden', `{ method: trace, endpoint: '${base}/a' }`, /TRACE/],
      ['scheme', `{ method: get, endpoint: 'ftp://127.0.0.1/a' }`, /http or https/],
    ];
    for (const [key, withs, detail] of cases) {
      const record = await runToEnd(h, calling(withs), {}, key);
      assert.equal(record.status, 'faulted', key);
      assert.equal(record.error?.type, validation, `${key}: ${JSON.stringify(record.error)}`);
      assert.equal(record.error?.status, 400, key);
      assert.equal(record.error?.instance, '/do/0/attempt/try/0/send', key);
      assert.match(record.error?.detail ?? '', detail, key);
      const attempts = Object.keys(record.tasks).filter((at) => at.includes('/send'));
      assert.equal(attempts.length, 1, `${key}: tried once (${attempts.join(', ')})`);
    }
    const sent = await runToEnd(h, calling(`{ method: post, endpoint: '${base}/b', body: { a: 1 } }`), {}, 'post');
    assert.equal(sent.status, 'completed', JSON.stringify(sent.error));
    assert.deepEqual(paths, ['/b'], 'only the request that could be made was sent');
  }));

test('a header a request cannot carry — a value from the input with CR, LF or NUL, or past U+00FF; a name that is not a token — is a validation error (400), never sent nor retried', () =>
  withPathService(async (base, paths, h) => {
    const headers = (entries: string) => calling(`{ method: get, endpoint: '${base}/a', headers: { ${entries} } }`);
    const fromInput = headers(`x-user: '\${ .name }'`);
    const cases: [string, ReturnType<typeof calling>, string, RegExp][] = [
      ['crlf', fromInput, 'a\r\nHost: elsewhere', /the header x-user: its value holds U\+000D at character 1 \(/],
      ['nul', fromInput, 'a\u0000b', /the header x-user: its value holds U\+0000 at character 1 \(/],
      ['wide', fromInput, 'caf\u00e9 \u{1F600}', /the header x-user: its value holds U\+1F600 at character 5 \(/],
      ['name', headers(`'bad name': x`), '', /the header name "bad name" is not an HTTP token/],
    ];
    for (const [key, document, name, detail] of cases) {
      const record = await runToEnd(h, document, { name }, key);
      assert.equal(record.status, 'faulted', key);
      assert.equal(record.error?.type, validation, `${key}: ${JSON.stringify(record.error)}`);
      assert.equal(record.error?.status, 400, key);
      assert.match(record.error?.detail ?? '', detail, key);
      assert.equal(Object.keys(record.tasks).filter((at) => at.includes('/send')).length, 1, `${key}: tried once`);
    }
    const sent = await runToEnd(h, fromInput, { name: 'caf\u00e9' }, 'latin-1');
    assert.equal(sent.status, 'completed', JSON.stringify(sent.error));
    assert.deepEqual(paths, ['/a'], 'only the request that could be made was sent');
  }));
