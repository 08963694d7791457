/**
 * `call: http`'s `redirect` (DSL 1.0.3): whether a 3xx answer is an error. A redirect is never
 * followed: with `redirect: false` (the default) a 3xx is a communication error with its status;
 * with `redirect: true` the 3xx answer itself is the call's answer (status, headers, content, as
 * `output` asks). The OpenAPI document fetch follows none either. Over a real loopback server,
 * through the global fetch (an executor given no egress policy) and through the egress policy's
 * undici fetch; the target a redirect points to is never requested.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { harness, runToEnd, yaml, type HarnessOptions } from './support.js';

const communication = 'https://serverlessworkflow.io/spec/1.0.0/errors/communication';

interface Stub {
  url: string;
  paths: string[];
  close(): Promise<void>;
}

/**
 * `/moved` answers 302 to `/target` with no content, `/moved-with-content` 301 to `/target` with
 * JSON content, `/openapi.json` 302 to `/target`; `/target` and anything else answer 200
 * `{"reached": path}`. Every request's path is noted.
 */
async function stub(): Promise<Stub> {
  const paths: string[] = [];
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://stub').pathname;
    paths.push(path);
    if (path === '/moved' || path === '/openapi.json') {
      response.writeHead(302, { location: '/target', 'x-moved': 'yes' });
      return void response.end();
    }
    if (path === '/moved-with-content') {
      response.writeHead(301, { location: '/target', 'content-type': 'application/json' });
      return void response.end(JSON.stringify({ movedTo: '/target' }));
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ reached: path }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, paths, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** One `call: http` GET of `.url`, with `redirect` and `output` when given. */
function callDocument(extra: { redirect?: boolean; output?: string }): JsonValue {
  const withs = [`method: get`, `endpoint: '\${ .url }'`];
  if (extra.redirect !== undefined) withs.push(`redirect: ${extra.redirect}`);
  if (extra.output !== undefined) withs.push(`output: ${extra.output}`);
  return yaml(`document: { dsl: '1.0.3', namespace: test, name: redirect, version: '1.0.0' }
do:
  - fetch:
      call: http
      with: { ${withs.join(', ')} }
`);
}

/** The two fetches an executor may use: the global one (no egress policy) and the egress policy's undici fetch. */
const fetches: [string, HarnessOptions][] = [
  ['global fetch', {}],
  ['egress fetch', { egress: { privateNetworks: true } }],
];

async function run(options: HarnessOptions, document: JsonValue, url: string): Promise<WorkflowRecord> {
  const h = harness(options);
  try {
    return await runToEnd(h, document, { url });
  } finally {
    await h.close();
  }
}

for (const [name, options] of fetches) {
  test(`${name}: without redirect (default false) a 302 is a communication error with status 302; its target is never requested`, async () => {
    const s = await stub();
    try {
      for (const document of [callDocument({}), callDocument({ redirect: false })]) {
        const record = await run(options, document, `${s.url}/moved`);
        assert.equal(record.status, 'faulted', JSON.stringify(record.output));
        assert.equal(record.error?.type, communication, JSON.stringify(record.error));
        assert.equal(record.error?.status, 302);
        assert.match(record.error?.title ?? '', /^HTTP 302\b/);
      }
      assert.deepEqual(s.paths, ['/moved', '/moved'], 'the redirect target was never requested');
    } finally {
      await s.close();
    }
  });

  test(`${name}: with redirect: true the 302 is the call's answer (output: response, content, raw); its target is never requested`, async () => {
    const s = await stub();
    try {
      const response = await run(options, callDocument({ redirect: true, output: 'response' }), `${s.url}/moved`);
      assert.equal(response.status, 'completed', JSON.stringify(response.error));
      const answer = response.output as JsonObject;
      assert.equal(answer.statusCode, 302);
      assert.equal((answer.headers as JsonObject).location, '/target');
      assert.equal((answer.headers as JsonObject)['x-moved'], 'yes');
      assert.equal(answer.content, null, 'an empty answer is null content');
      assert.deepEqual(answer.request, { method: 'get', uri: `${s.url}/moved`, headers: {} });
      // The default output is the content: none here.
      const content = await run(options, callDocument({ redirect: true }), `${s.url}/moved`);
      assert.equal(content.status, 'completed', JSON.stringify(content.error));
      assert.equal(content.output, null);
      // A 3xx with content: its own content, not the target's.
      const moved = await run(options, callDocument({ redirect: true }), `${s.url}/moved-with-content`);
      assert.equal(moved.status, 'completed', JSON.stringify(moved.error));
      assert.deepEqual(moved.output, { movedTo: '/target' });
      const raw = await run(options, callDocument({ redirect: true, output: 'raw' }), `${s.url}/moved-with-content`);
      assert.equal(raw.status, 'completed', JSON.stringify(raw.error));
      assert.equal(Buffer.from(raw.output as string, 'base64').toString('utf8'), JSON.stringify({ movedTo: '/target' }));
      assert.deepEqual(s.paths, ['/moved', '/moved', '/moved-with-content', '/moved-with-content'], 'the redirect target was never requested');
    } finally {
      await s.close();
    }
  });

  test(`${name}: a 200 is the answer with redirect unset or true`, async () => {
    const s = await stub();
    try {
      for (const document of [callDocument({}), callDocument({ redirect: true })]) {
        const record = await run(options, document, `${s.url}/target`);
        assert.equal(record.status, 'completed', JSON.stringify(record.error));
        assert.deepEqual(record.output, { reached: '/target' });
      }
      assert.deepEqual(s.paths, ['/target', '/target']);
    } finally {
      await s.close();
    }
  });

  test(`${name}: the OpenAPI document fetch follows no redirect: a 302 is a communication error, its target never requested`, async () => {
    const s = await stub();
    try {
      const openapi = yaml(`document: { dsl: '1.0.3', namespace: test, name: operation, version: '1.0.0' }
do:
  - op:
      call: openapi
      with: { document: { endpoint: '\${ .url }' }, operationId: ping, redirect: true }
`);
      const record = await run(options, openapi, `${s.url}/openapi.json`);
      assert.equal(record.status, 'faulted', JSON.stringify(record.output));
      assert.equal(record.error?.type, communication, JSON.stringify(record.error));
      assert.equal(record.error?.status, 302);
      assert.deepEqual(s.paths, ['/openapi.json'], 'the redirect target was never requested');
    } finally {
      await s.close();
    }
  });
}
