/**
 * Names a document, a caller or a service chooses are read and written as own members only. A
 * parameter, a URI template variable or a style named as a member of Object.prototype
 * (`constructor`, `toString`) that nobody gave is missing, not the prototype's function sent as
 * its text. A member named `__proto__` (a header a service answers, a form field) stays a member
 * where an assignment would have dropped it; a request header of that name, which the HTTP client
 * drops, is refused, a secret read into one as well.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { harness, runToEnd, yaml, type Harness, type HarnessOptions } from './support.js';

interface Seen {
  url: string;
  /** The header names and values as they came on the wire. */
  rawHeaders: string[];
  body: string;
}

/**
 * A loopback service answering `documents` at their paths and `{}` to anything else, each answer
 * with a `__proto__` header; every other request is kept.
 */
async function withService(
  documents: Record<string, JsonValue>,
  fn: (base: string, seen: Seen[], h: Harness) => Promise<void>,
  options?: HarnessOptions,
): Promise<void> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      response.setHeader('content-type', 'application/json');
      response.setHeader('__proto__', 'from-service');
      const document = Object.hasOwn(documents, request.url ?? '') ? documents[request.url ?? ''] : undefined;
      if (document !== undefined) return void response.end(JSON.stringify(document));
      seen.push({ url: request.url ?? '', rawHeaders: request.rawHeaders, body: Buffer.concat(chunks).toString('utf8') });
      response.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const h = harness(options);
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, h);
  } finally {
    await h.close();
    await new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));
  }
}

const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;
const validation = 'https://serverlessworkflow.io/spec/1.0.0/errors/validation';

const prototypeNamed: JsonObject = {
  openapi: '3.0.3',
  info: { title: 'names', version: '1' },
  paths: {
    '/things/{constructor}': {
      get: {
        operationId: 'byPath',
        parameters: [{ name: 'constructor', in: 'path', required: true }],
        responses: { '200': { description: 'ok' } },
      },
    },
    '/things': {
      get: {
        operationId: 'optional',
        parameters: [
          { name: 'toString', in: 'query' },
          { name: 'valueOf', in: 'header' },
          { name: 'hasOwnProperty', in: 'cookie' },
          { name: 'tags', in: 'query', style: 'constructor', explode: false },
        ],
        responses: { '200': { description: 'ok' } },
      },
    },
  },
};

const openApiCall = (base: string, operationId: string, parameters: string) =>
  yaml(`${head(operationId)}do:
  - call:
      call: openapi
      with:
        document: { endpoint: '${base}/openapi.json' }
        operationId: ${operationId}
        parameters: ${parameters}
`);

test('an OpenAPI parameter named as an Object.prototype member that the call does not give is missing, not the prototype’s function; a style so named is the default', async () => {
  await withService({ '/openapi.json': prototypeNamed }, async (base, seen, h) => {
    const missing = await runToEnd(h, openApiCall(base, 'byPath', '{}'), {}, 'missing');
    assert.equal(missing.status, 'faulted');
    assert.equal(missing.error?.type, validation);
    assert.match(missing.error?.detail ?? '', /needs the path parameter constructor/);
    const given = await runToEnd(h, openApiCall(base, 'byPath', '{ constructor: c1 }'), {}, 'given');
    assert.equal(given.status, 'completed', JSON.stringify(given.error));
    const optional = await runToEnd(h, openApiCall(base, 'optional', '{ tags: [a, b] }'), {}, 'optional');
    assert.equal(optional.status, 'completed', JSON.stringify(optional.error));
    assert.deepEqual(
      seen.map((request) => request.url),
      ['/things/c1', '/things?tags=a,b'],
      'nothing sent for the parameters not given; an unknown style delimited as form',
    );
    const sent = seen[1]?.rawHeaders.filter((_, index) => index % 2 === 0).map((name) => name.toLowerCase());
    assert.ok(!sent?.includes('valueof') && !sent?.includes('cookie'), `no header for the parameters not given: ${sent?.join(', ')}`);
  });
});

test('a call: http URI template variable named as an Object.prototype member is read from the task input’s own members only', async () => {
  await withService({}, async (base, seen, h) => {
    const document = yaml(`${head('template')}do:
  - get:
      call: http
      with: { method: get, endpoint: '${base}/things/{constructor}/{toString}' }
`);
    // No own member: no value, which the DSL expands to the empty string (not the prototype's function as its text).
    const unresolved = await runToEnd(h, document, {}, 'unresolved');
    assert.equal(unresolved.status, 'completed', JSON.stringify(unresolved.error));
    const given = await runToEnd(h, document, { constructor: 'c1', toString: 't 2' }, 'given');
    assert.equal(given.status, 'completed', JSON.stringify(given.error));
    assert.deepEqual(
      seen.map((request) => request.url),
      ['/things//', '/things/c1/t%202'],
    );
  });
});

test('a response header named __proto__ is a member of the output: response headers, live and in the log', async () => {
  await withService({}, async (base, _seen, h) => {
    const document = yaml(`${head('answered')}do:
  - get:
      call: http
      with: { method: get, endpoint: '${base}/things', output: response }
`);
    const record = await runToEnd(h, document, {}, 'answered');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const headers = (record.output as JsonObject).headers as JsonObject;
    assert.ok(Object.hasOwn(headers, '__proto__'), `the headers: ${JSON.stringify(headers)}`);
    assert.equal(headers.__proto__, 'from-service');
  });
});

test('a request header named __proto__, which the HTTP client would drop, is refused (400) before any request, from call: http and from an OpenAPI header parameter', async () => {
  const headerNamed: JsonObject = {
    openapi: '3.0.3',
    info: { title: 'names', version: '1' },
    paths: { '/things': { get: { operationId: 'header', parameters: [{ name: '__proto__', in: 'header' }], responses: { '200': { description: 'ok' } } } } },
  };
  await withService({ '/openapi.json': headerNamed }, async (base, seen, h) => {
    const http = yaml(`${head('header')}do:
  - get:
      call: http
      with: { method: get, endpoint: '${base}/things', headers: { __PROTO__: sent } }
`);
    const refused = await runToEnd(h, http, {}, 'http');
    assert.equal(refused.status, 'faulted');
    assert.equal(refused.error?.type, validation);
    assert.equal(refused.error?.status, 400);
    assert.match(refused.error?.detail ?? '', /header __PROTO__/);
    const openApi = await runToEnd(h, openApiCall(base, 'header', '{ __proto__: sent }'), {}, 'openapi');
    assert.equal(openApi.status, 'faulted');
    assert.equal(openApi.error?.type, validation);
    assert.match(openApi.error?.detail ?? '', /header __proto__/);
    assert.deepEqual(seen, [], 'no request was made');
  });
});

test('an OpenAPI form field named __proto__ is sent in the form body', async () => {
  const form: JsonObject = {
    swagger: '2.0',
    info: { title: 'form', version: '1' },
    paths: {
      '/things': {
        post: {
          operationId: 'form',
          consumes: ['application/x-www-form-urlencoded'],
          parameters: [
            { name: '__proto__', in: 'formData', type: 'string' },
            { name: 'a', in: 'formData', type: 'string' },
          ],
          responses: { '200': { description: 'ok' } },
        },
      },
    },
  };
  await withService({ '/openapi.json': form }, async (base, seen, h) => {
    const record = await runToEnd(h, openApiCall(base, 'form', '{ __proto__: p, a: b }'), {}, 'form');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(seen[0]?.body, '__proto__=p&a=b');
  });
});

/** A document `name` whose one task GETs `${base}/things` with the header `header` reading the token of the secret `secret`. */
const secretInHeader = (name: string, base: string, secret: string, header: string) =>
  yaml(`${head(name)}use: { secrets: [${secret}] }
do:
  - get:
      call: http
      with:
        method: get
        endpoint: '${base}/things'
        headers: { ${header}: '\${ $secrets.${secret}.token }' }
`);

test('a header named __proto__ that reads a secret is refused as any such header; the secret is never in the log', async () => {
  const token = 'tok-5e0c9d21a7';
  await withService(
    {},
    async (base, seen, h) => {
      const document = secretInHeader('secret', base, 'api', '__proto__');
      const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'secret', document, input: {} });
      const record = await h.executor.wait(instanceId, 10_000);
      assert.equal(record.status, 'faulted');
      assert.equal(record.error?.type, validation, JSON.stringify(record.error));
      assert.deepEqual(seen, []);
      const read = await h.store.read(instanceId);
      assert.equal(read.kind, 'ok');
      assert.ok(!JSON.stringify(read.kind === 'ok' ? read.transitions : []).includes(token), 'the log holds no secret');
    },
    { secrets: new Map([['api', { token }]]) },
  );
});

test('a secret named __proto__ is read by an expression as any other secret', async () => {
  const token = 'tok-71b2e0c4d9';
  await withService(
    {},
    async (base, seen, h) => {
      const document = secretInHeader('secret-named', base, '__proto__', 'x-key');
      const record = await runToEnd(h, document, {}, 'secret-named');
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      const sent = seen[0]?.rawHeaders ?? [];
      assert.equal(sent[sent.findIndex((name) => name.toLowerCase() === 'x-key') + 1], token);
    },
    { secrets: new Map([['__proto__', { token }]]) },
  );
});
