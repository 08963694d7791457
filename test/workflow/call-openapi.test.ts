/**
 * `call: openapi` beyond the conformance kit, against loopback services that serve their own
 * OpenAPI documents: an OpenAPI 3 document (YAML) with servers, parameters and a requestBody; a
 * Swagger 2.0 one and the percent-encoding of path parameters; an unknown operationId and a
 * document that cannot be fetched or used as the DSL's errors; a worker resuming a call, and the
 * replay, without fetching the document again; the documents kept between calls; secrets in the
 * operation's and the document's authentication. Every finished instance is checked against its
 * replay.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { checkDocument } from '../../src/workflow/exec/document.js';
import { assertReplayEqual, harness, runToEnd, yaml, type Harness, type HarnessOptions } from './support.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A loopback service: `handle` answers each request (after its body is read); every request is kept in `seen`. */
async function service(handle: (seen: Seen, res: ServerResponse) => void) {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      seen.push(request);
      handle(request, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    seen,
    /** The requests for a path (query and all). */
    to: (prefix: string) => seen.filter((request) => request.url.startsWith(prefix)),
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

/** Runs `fn` with a loopback service answering as `handle` and a harness (with `options`), both closed after. */
async function withService(
  handle: (seen: Seen, res: ServerResponse) => void,
  fn: (svc: Awaited<ReturnType<typeof service>>, h: Harness) => Promise<void>,
  options?: HarnessOptions,
): Promise<void> {
  const svc = await service(handle);
  const h = harness(options);
  try {
    await fn(svc, h);
  } finally {
    await h.close();
    await svc.close();
  }
}

function send(res: ServerResponse, status: number, body: JsonValue | string, type = 'application/json'): void {
  res.writeHead(status, { 'content-type': type });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;
const communication = 'https://serverlessworkflow.io/spec/1.0.0/errors/communication';
const validation = 'https://serverlessworkflow.io/spec/1.0.0/errors/validation';

const ordersYaml = `openapi: 3.0.3
info: { title: orders, version: '1' }
servers:
  - url: /api/{version}
    variables: { version: { default: v2 } }
paths:
  /shops/{shopId}/orders:
    parameters:
      - { $ref: '#/components/parameters/Shop' }
    post:
      operationId: createOrder
      parameters:
        - { name: tags, in: query, schema: { type: array, items: { type: string } } }
        - { name: X-Request-Id, in: header, schema: { type: string } }
      requestBody:
        required: true
        content:
          application/json: { schema: { type: object } }
      responses:
        '201': { description: created, content: { application/json: { schema: { type: object } } } }
  /things:
    put:
      operationId: putThing
      requestBody: { $ref: '#/components/requestBodies/Thing' }
      responses: { '200': { $ref: '#/components/responses/Ok' } }
components:
  parameters:
    Shop: { name: shopId, in: path, required: true, schema: { type: string } }
  requestBodies:
    Thing: { required: true, content: { application/json: { schema: { type: object } } } }
  responses:
    Ok: { description: ok, content: { application/json: { schema: { type: object } } } }
`;

test('an OpenAPI 3 document: its server (relative, variables at their defaults), path, query and header parameters, and the requestBody from the remaining parameters or `body`', async () => {
  await withService(
    (request, res) => {
      if (request.url === '/specs/orders.yaml') return send(res, 200, ordersYaml, 'application/yaml');
      return send(res, request.method === 'POST' ? 201 : 200, { got: JSON.parse(request.body) as JsonValue });
    },
    async (svc, h) => {
      const document = yaml(`${head('orders')}do:
  - create:
      call: openapi
      with:
        document: { endpoint: '${svc.base}/specs/orders.yaml' }
        operationId: createOrder
        parameters:
          shopId: \${ .shop }
          tags: [a, b c]
          X-Request-Id: r-1
          item: \${ .item }
          quantity: 2
  - put:
      call: openapi
      with:
        document: { endpoint: '${svc.base}/specs/orders.yaml' }
        operationId: putThing
        parameters:
          body: { whole: '\${ .got.item }' }
        output: response
`);
      const record = await runToEnd(h, document, { shop: 'east', item: 'pen' });
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      const [create, put] = svc.seen.filter((request) => !request.url.startsWith('/specs/'));
      assert.equal(create?.method, 'POST');
      assert.equal(create?.url, '/api/v2/shops/east/orders?tags=a&tags=b%20c');
      assert.equal(create?.headers['x-request-id'], 'r-1');
      assert.equal(create?.headers['content-type'], 'application/json');
      assert.equal(create?.headers.accept, 'application/json');
      assert.deepEqual(JSON.parse(create?.body ?? ''), { item: 'pen', quantity: 2 }, 'the parameters no other location takes are the body');
      assert.equal(put?.method, 'PUT');
      assert.equal(put?.url, '/api/v2/things');
      assert.deepEqual(JSON.parse(put?.body ?? ''), { whole: 'pen' }, 'a parameter named body is the whole body');
      const output = record.output as JsonObject;
      assert.equal(output.statusCode, 200);
      assert.deepEqual(output.content, { got: { whole: 'pen' } });
      assert.deepEqual((output.request as JsonObject).method, 'put');
      assert.equal((output.request as JsonObject).uri, `${svc.base}/api/v2/things`);
      assert.equal(svc.to('/specs/').length, 1, 'the document was fetched once for both calls (kept by the executor)');
    },
  );
});

const swagger = (basePath: string): JsonObject => ({
  swagger: '2.0',
  info: { title: 'pets', version: '1' },
  basePath,
  paths: {
    '/pets/{petId}/photos/{name}': {
      get: {
        operationId: 'getPhoto',
        produces: ['application/json'],
        parameters: [
          { name: 'petId', in: 'path', required: true, type: 'string' },
          { name: 'name', in: 'path', required: true, type: 'string' },
          { name: 'sizes', in: 'query', type: 'array', items: { type: 'integer' } },
        ],
        responses: { '200': { description: 'ok' } },
      },
    },
    '/pets': {
      post: {
        operationId: 'addPet',
        consumes: ['application/json'],
        parameters: [{ name: 'pet', in: 'body', required: true, schema: { type: 'object' } }],
        responses: { '200': { description: 'ok' } },
      },
    },
  },
});

/** A document whose one task `photo` calls getPhoto (petId p1, name n1) from the Swagger document at `swaggerUrl`. */
const photoDocument = (name: string, swaggerUrl: string) =>
  yaml(`${head(name)}do:
  - photo:
      call: openapi
      with:
        document: { endpoint: '${swaggerUrl}' }
        operationId: getPhoto
        parameters: { petId: p1, name: n1 }
`);

test('a Swagger 2.0 document: path parameters percent-encoded into the path, arrays as csv, the body parameter as JSON; host and scheme from the document’s URI', async () => {
  await withService(
    (request, res) => {
      if (request.url === '/swagger.json') return send(res, 200, swagger('/v1'));
      return send(res, 200, { url: request.url });
    },
    async (svc, h) => {
      const document = yaml(`${head('pets')}do:
  - photo:
      call: openapi
      with:
        document: { endpoint: '${svc.base}/swagger.json' }
        operationId: getPhoto
        parameters: { petId: '\${ .id }', name: 'ünï cödé.png', sizes: [1, 2] }
  - add:
      call: openapi
      with:
        document: { endpoint: '${svc.base}/swagger.json' }
        operationId: addPet
        parameters: { pet: { name: rex } }
`);
      const record = await runToEnd(h, document, { id: 'a b/c?d#e%f' });
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      const [photo, add] = svc.seen.filter((request) => request.url !== '/swagger.json');
      assert.equal(photo?.url, '/v1/pets/a%20b%2Fc%3Fd%23e%25f/photos/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9.png?sizes=1,2');
      assert.equal(add?.method, 'POST');
      assert.equal(add?.url, '/v1/pets');
      assert.deepEqual(JSON.parse(add?.body ?? ''), { name: 'rex' });
      assert.deepEqual(record.steps['/do/0/photo>http'], { ok: { url: '/v1/pets/a%20b%2Fc%3Fd%23e%25f/photos/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9.png?sizes=1,2' } });
    },
  );
});

test('an unknown operationId faults the task with a validation error (400) naming it; no operation is called', async () => {
  await withService(
    (request, res) => (request.url === '/swagger.json' ? send(res, 200, swagger('/')) : send(res, 200, {})),
    async (svc, h) => {
      const document = yaml(`${head('unknown')}do:
  - find:
      call: openapi
      with:
        document: { endpoint: '${svc.base}/swagger.json' }
        operationId: findPetsByColour
`);
      const record = await runToEnd(h, document);
      assert.equal(record.status, 'faulted');
      assert.equal(record.error?.type, validation);
      assert.equal(record.error?.status, 400);
      assert.equal(record.error?.instance, '/do/0/find');
      assert.match(record.error?.detail ?? '', /no operation with operationId "findPetsByColour"/);
      assert.deepEqual(
        svc.seen.map((request) => request.url),
        ['/swagger.json'],
      );
    },
  );
});

test('a missing required parameter, or one the operation does not declare, is a validation error (400) before any request', async () => {
  await withService(
    (request, res) => (request.url === '/swagger.json' ? send(res, 200, swagger('/')) : send(res, 200, {})),
    async (svc, h) => {
      const call = (parameters: string) =>
        yaml(
          `${head('params')}do:\n  - photo:\n      call: openapi\n      with:\n        document: { endpoint: '${svc.base}/swagger.json' }\n        operationId: getPhoto\n        parameters: ${parameters}\n`,
        );
      const missing = await runToEnd(h, call('{ petId: p1 }'), {}, 'missing');
      assert.equal(missing.error?.type, validation);
      assert.match(missing.error?.detail ?? '', /needs the path parameter name/);
      const unknown = await runToEnd(h, call('{ petId: p1, name: n, colour: red }'), {}, 'unknown');
      assert.equal(unknown.error?.type, validation);
      assert.match(unknown.error?.detail ?? '', /has no parameter "colour"/);
      assert.deepEqual(
        svc.seen.map((request) => request.url),
        ['/swagger.json'],
        'only the document was fetched (once: kept for the second instance)',
      );
    },
  );
});

test('a document that cannot be fetched or used faults the task with a communication error: its status, 503 unreachable, 502 not OpenAPI or too large', async () => {
  const big = Buffer.alloc(limits.openApiDocumentBytesMax + 1, 0x20);
  const closed = await service(() => undefined);
  const unreachable = closed.base;
  await closed.close();
  await withService(
    (request, res) => {
      if (request.url === '/missing.json') return send(res, 404, { message: 'no such document' });
      if (request.url === '/not-openapi.json') return send(res, 200, { hello: 'world' });
      if (request.url === '/broken.json') return send(res, 200, '{"openapi": "3.0.0", "paths": {');
      if (request.url === '/big.yaml') {
        // Chunked, without a content-length: the bound is counted as the content arrives.
        res.writeHead(200, { 'content-type': 'application/yaml' });
        res.write('openapi: 3.0.0\npaths: {}\n');
        for (let at = 0; at < big.length; at += 64 * 1024) res.write(big.subarray(at, at + 64 * 1024));
        return res.end();
      }
      return send(res, 200, {});
    },
    async (svc, h) => {
      const faultOf = async (endpoint: string, key: string) => {
        const document = yaml(
          `${head('failing')}do:\n  - find:\n      call: openapi\n      with:\n        document: { endpoint: '${endpoint}' }\n        operationId: any\n`,
        );
        const record = await runToEnd(h, document, {}, key);
        assert.equal(record.status, 'faulted', key);
        assert.equal(record.error?.type, communication, key);
        assert.equal(record.error?.instance, '/do/0/find', key);
        return record.error;
      };
      assert.equal((await faultOf(`${svc.base}/missing.json`, 'missing'))?.status, 404);
      assert.equal((await faultOf(`${unreachable}/gone.json`, 'unreachable'))?.status, 503);
      const notOpenApi = await faultOf(`${svc.base}/not-openapi.json`, 'not-openapi');
      assert.equal(notOpenApi?.status, 502);
      assert.match(notOpenApi?.detail ?? '', /neither a Swagger 2\.0 document .* nor an OpenAPI 3 one/);
      const broken = await faultOf(`${svc.base}/broken.json`, 'broken');
      assert.equal(broken?.status, 502);
      assert.match(broken?.detail ?? '', /not valid JSON/);
      const tooLarge = await faultOf(`${svc.base}/big.yaml`, 'big');
      assert.equal(tooLarge?.status, 502);
      assert.match(tooLarge?.detail ?? '', new RegExp(`larger than ${limits.openApiDocumentBytesMax} bytes`));

      // The DSL's error shape: a try/catch on the communication type catches it.
      const caught = yaml(`${head('caught')}do:
  - attempt:
      try:
        - find:
            call: openapi
            with:
              document: { endpoint: '${svc.base}/missing.json' }
              operationId: any
      catch:
        errors: { with: { type: ${communication} } }
        as: problem
        do:
          - note: { set: { caught: '\${ $problem.status }' } }
`);
      const record = await runToEnd(h, caught, {}, 'caught');
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      assert.deepEqual(record.output, { caught: 404 });
    },
  );
});

test('a $ref with a malformed % escape is an invalid document (502), not a failure that leaves the instance running', async () => {
  const malformed = { openapi: '3.0.3', paths: { '/a': { get: { operationId: 'op', parameters: [{ $ref: '#/paths/%E0' }] } } } };
  await withService(
    (_request, res) => send(res, 200, malformed),
    async (svc, h) => {
      const document = yaml(
        `${head('malformed')}do:\n  - find:\n      call: openapi\n      with:\n        document: { endpoint: '${svc.base}/doc.json' }\n        operationId: op\n`,
      );
      const record = await runToEnd(h, document, {}, 'malformed', 5_000);
      assert.equal(record.status, 'faulted');
      assert.equal(record.error?.type, communication);
      assert.equal(record.error?.status, 502);
      assert.equal(record.error?.title, 'Invalid OpenAPI document');
      assert.match(record.error?.detail ?? '', /\$ref #\/paths\/%E0 is not a JSON Pointer/);
      assert.deepEqual(h.executor.failures, []);
      assert.equal(svc.seen.length, 1, 'the document was fetched once');
    },
  );
});

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) assert.fail('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('a worker stopped during the operation’s request: the next one resumes from the recorded operation without fetching the document, and the replay fetches nothing', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-openapi-'));
  const path = join(dir, 'wf.db');
  const served = JSON.stringify(swagger('/v1'));
  let hold = true;
  const svc = await service((request, res) => {
    if (request.url === '/swagger.json') return send(res, 200, served);
    if (hold) return; // the first worker's request gets no answer
    send(res, 200, { photo: request.url });
  });
  const clock = new SystemClock();
  const document = photoDocument('resumed', `${svc.base}/swagger.json`);
  const storeA = new SqliteEventStore({ path, clock });
  const a = harness({ store: storeA, clock, worker: 'worker-a', leaseMs: 600 });
  const { instanceId } = await a.executor.start({ principalId: 'alice', invocationKey: 'resume', document, input: {} });
  await until(() => svc.to('/v1/').length === 1);
  await a.close();
  await storeA.close();
  hold = false;

  const storeB = new SqliteEventStore({ path, clock });
  const b = harness({ store: storeB, clock, worker: 'worker-b', leaseMs: 600, openApiDocumentKeepMs: 0 });
  try {
    const record = await b.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { photo: '/v1/pets/p1/photos/n1' });
    assert.equal(svc.to('/swagger.json').length, 1, 'the document was fetched once, by the first worker');
    assert.equal(svc.to('/v1/').length, 2, 'the idempotent GET was made again');
    const used = record.steps['/do/0/photo>openapi'] as { ok: JsonObject };
    assert.deepEqual(used.ok.document, {
      uri: `${svc.base}/swagger.json`,
      bytes: Buffer.byteLength(served),
      sha256: createHash('sha256').update(served).digest('hex'),
    });
    assert.equal((used.ok.operation as JsonObject).uri, `${svc.base}/v1/pets/{petId}/photos/{name}`);
    const requests = svc.seen.length;
    await assertReplayEqual(b, instanceId);
    assert.equal(svc.seen.length, requests, 'the replay made no request');
  } finally {
    await b.close();
    await storeB.close();
    await svc.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an executor keeps a fetched document for later calls (per URI, for openApiDocumentKeepMs); with 0 each call fetches its own', async () => {
  const svc = await service((request, res) => (request.url === '/swagger.json' ? send(res, 200, swagger('/')) : send(res, 200, { ok: true })));
  const document = photoDocument('kept', `${svc.base}/swagger.json`);
  const keeping = harness();
  const fetching = harness({ openApiDocumentKeepMs: 0 });
  try {
    const first = await runToEnd(keeping, document, {}, 'one');
    const second = await runToEnd(keeping, document, {}, 'two');
    assert.equal(svc.to('/swagger.json').length, 1);
    assert.deepEqual(second.steps['/do/0/photo>openapi'], first.steps['/do/0/photo>openapi'], 'each instance records what it used');
    await runToEnd(fetching, document, {}, 'three');
    await runToEnd(fetching, document, {}, 'four');
    assert.equal(svc.to('/swagger.json').length, 3);
  } finally {
    await keeping.close();
    await fetching.close();
    await svc.close();
  }
});

test('secrets in the operation’s and the document’s authentication reach the requests and never the log', async () => {
  const token = 'tok-9b1e22c4';
  const password = 'pw-5a77f0';
  const store = new MemoryEventStore({ clock: new SystemClock() });
  await withService(
    (request, res) => {
      if (request.url === '/swagger.json')
        return request.headers.authorization === `Basic ${Buffer.from(`docs:${password}`).toString('base64')}`
          ? send(res, 200, swagger('/'))
          : send(res, 401, { message: 'who are you' });
      send(res, 200, { youSent: request.headers.authorization ?? null });
    },
    async (svc, h) => {
      const document = yaml(`${head('secret-openapi')}use:
  secrets: [ api, docs ]
do:
  - photo:
      call: openapi
      with:
        document:
          endpoint:
            uri: '${svc.base}/swagger.json'
            authentication: { basic: { use: docs } }
        operationId: getPhoto
        parameters: { petId: p1, name: n1 }
        authentication:
          bearer:
            token: \${ $secrets.api.token }
        output: response
`);
      const record = await runToEnd(h, document, {}, 'k');
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      assert.equal(svc.to('/pets/')[0]?.headers.authorization, `Bearer ${token}`);
      const output = record.output as JsonObject;
      assert.deepEqual(output.content, { youSent: '[redacted]' });
      assert.equal(((output.request as JsonObject).headers as JsonObject).authorization, '[redacted]');
      const read = await store.read(record.instanceId);
      assert.equal(read.kind, 'ok');
      const log = JSON.stringify(read.kind === 'ok' ? read.transitions : []);
      for (const value of [token, password]) assert.ok(!log.includes(value), `the log holds no ${value}`);
    },
    {
      store,
      secrets: new Map<string, JsonValue>([
        ['api', { token }],
        ['docs', { username: 'docs', password }],
      ]),
    },
  );
});

test('a secret goes only to its origins: the document’s fetch and the operation’s request (to the host the document names) are refused before they are made', async () => {
  const token = 'tok-4c1d9e70';
  const password = 'pw-e03b6a';
  const docs = await service((_request, res) => send(res, 200, { ...swagger('/'), host: `127.0.0.1:${new URL(operations.base).port}` }));
  const operations = await service((request, res) => send(res, 200, { youSent: request.headers.authorization ?? null }));
  const secrets = new Map<string, JsonValue>([
    ['api', { token }],
    ['docs', { username: 'reader', password }],
  ]);
  const document = yaml(`${head('secret-origins')}use:
  secrets: [ api, docs ]
do:
  - photo:
      call: openapi
      with:
        document:
          endpoint:
            uri: '${docs.base}/swagger.json'
            authentication: { basic: { use: docs } }
        operationId: getPhoto
        parameters: { petId: p1, name: n1 }
        authentication: { bearer: { use: api } }
`);
  const run = async (origins: Record<string, string[]>) => {
    const h = harness({ secrets, secretOrigins: new Map(Object.entries(origins)) });
    try {
      return await runToEnd(h, document, {}, 'k');
    } finally {
      await h.close();
    }
  };
  try {
    const unfetched = await run({ docs: ['https://docs.example.com'], api: [operations.base] });
    assert.equal(unfetched.status, 'faulted');
    assert.equal(unfetched.error?.status, 403);
    assert.equal(unfetched.error?.detail, `the secret "docs" may not be sent to ${docs.base}: it is not among the secret's origins`);
    assert.equal(docs.seen.length, 0, 'the document was not fetched');
    // The operation's server is the document's to say: the origin checked is the one it resolves to.
    const uncalled = await run({ docs: [docs.base], api: [docs.base] });
    assert.equal(uncalled.status, 'faulted');
    assert.equal(uncalled.error?.status, 403);
    assert.equal(uncalled.error?.detail, `the secret "api" may not be sent to ${operations.base}: it is not among the secret's origins`);
    assert.equal(docs.seen.length, 1);
    assert.equal(operations.seen.length, 0, 'the operation was not called');
    const called = await run({ docs: [docs.base], api: [operations.base] });
    assert.equal(called.status, 'completed', JSON.stringify(called.error));
    assert.equal(operations.seen[0]?.headers.authorization, `Bearer ${token}`);
    assert.deepEqual(called.output, { youSent: '[redacted]' });
  } finally {
    await docs.close();
    await operations.close();
  }
});

test('the checks: call openapi is accepted with its document and operationId; $secrets in its parameters is refused', () => {
  const call = (args: string) => yaml(`${head('checked')}use: { secrets: [ api ] }\ndo:\n  - find:\n      call: openapi\n      with: ${args}\n`);
  assert.equal(checkDocument(call(`{ document: { endpoint: 'https://x.example/o.json' }, operationId: find }`)), 'checked');
  assert.throws(() => checkDocument(call('{ operationId: find }')), /\/do\/0\/find\/with: an openapi call needs document\.endpoint and operationId/);
  assert.throws(
    () => checkDocument(call(`{ document: { endpoint: 'https://x.example/o.json' }, operationId: find, parameters: { key: '\${ $secrets.api.key }' } }`)),
    /\/do\/0\/find\/with\/parameters\/key: \$secrets is read only/,
  );
});
