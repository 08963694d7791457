/**
 * Names a document, a caller or a service chooses are read and written as own members only. A
 * parameter, a URI template variable or a style named as a member of Object.prototype
 * (`constructor`, `toString`) that nobody gave is missing, not the prototype's function sent as
 * its text.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { harness, runToEnd, yaml, type Harness } from './support.js';

interface Seen {
  url: string;
  /** The header names and values as they came on the wire. */
  rawHeaders: string[];
  body: string;
}

/** A loopback service answering `document` at /openapi.json and `{}` to anything else; every other request is kept. */
async function withService(document: JsonValue, fn: (base: string, seen: Seen[], h: Harness) => Promise<void>): Promise<void> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      response.setHeader('content-type', 'application/json');
      if (request.url === '/openapi.json') return void response.end(JSON.stringify(document));
      seen.push({ url: request.url ?? '', rawHeaders: request.rawHeaders, body: Buffer.concat(chunks).toString('utf8') });
      response.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const h = harness();
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
  await withService(prototypeNamed, async (base, seen, h) => {
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
    const unresolved = await runToEnd(h, document, {}, 'unresolved');
    assert.equal(unresolved.status, 'faulted');
    assert.equal(unresolved.error?.type, validation);
    assert.match(unresolved.error?.detail ?? '', /\{constructor\} has no value in the task input/);
    const given = await runToEnd(h, document, { constructor: 'c1', toString: 't 2' }, 'given');
    assert.equal(given.status, 'completed', JSON.stringify(given.error));
    assert.deepEqual(
      seen.map((request) => request.url),
      ['/things/c1/t%202'],
    );
  });
});
