/**
 * The egress policy of workflow HTTP calls (src/workflow/exec/egress.ts), over real loopback
 * sockets: an endpoint taken from the instance's input cannot reach loopback — by address, by
 * name, by an IP literal in another form, or through a redirect (none is followed) — unless the
 * policy allows private networks, and with an allow list only the origins listed. A refusal is
 * the DSL's authorization error (403), recorded like any answer (the instance replays to the same
 * record); the stub is never reached; a `try` that retries communication errors does not retry it.
 *
 * This machine has no external network, so names are resolved by a lookup the test injects
 * (`*.test` → 127.0.0.1; every other name by the system's resolver): a name that resolves to
 * loopback, and the names of allow entries.
 */
import assert from 'node:assert/strict';
import { lookup as dnsLookup } from 'node:dns';
import { createServer } from 'node:http';
import type { AddressInfo, LookupFunction } from 'node:net';
import { test } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { harness, runToEnd, yaml, type HarnessOptions } from './support.js';

const authorization = 'https://serverlessworkflow.io/spec/1.0.0/errors/authorization';

/** TEST ONLY: `*.test` names resolve to 127.0.0.1, everything else as the system resolves it. */
const testLookup: LookupFunction = (hostname, options, callback) => {
  if (!hostname.endsWith('.test')) return dnsLookup(hostname, options, callback);
  if (options.all) callback(null, [{ address: '127.0.0.1', family: 4 }]);
  else callback(null, '127.0.0.1', 4);
};

interface Stub {
  port: number;
  paths: string[];
  close(): Promise<void>;
}

/** A loopback service noting each request's path: `/redirect?to=URL` answers 302 to URL, `/openapi` a document, anything else `{"reached": path}`. */
async function stub(): Promise<Stub> {
  const paths: string[] = [];
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://stub');
    paths.push(url.pathname);
    if (url.pathname === '/redirect') {
      response.writeHead(302, { location: url.searchParams.get('to') ?? '/' });
      return void response.end();
    }
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify({ reached: url.pathname }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { port, paths, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** One HTTP call to the endpoint the input names. */
const callback = yaml(`document: { dsl: '1.0.3', namespace: test, name: callback, version: '1.0.0' }
do:
  - notify:
      call: http
      with: { method: get, endpoint: '\${ .callbackUrl }' }
`);

async function run(egress: HarnessOptions['egress'], callbackUrl: string, document = callback): Promise<WorkflowRecord> {
  const h = harness({ egress });
  try {
    return await runToEnd(h, document, { callbackUrl });
  } finally {
    await h.close();
  }
}

function assertRefused(record: WorkflowRecord, names: string, rule: RegExp): void {
  assert.equal(record.status, 'faulted', JSON.stringify(record.output));
  assert.equal(record.error?.type, authorization, JSON.stringify(record.error));
  assert.equal(record.error?.status, 403);
  assert.ok(record.error?.detail?.includes(names), `the detail names ${names}: ${record.error?.detail}`);
  assert.match(record.error?.detail ?? '', rule);
}

const privateRule = /private or special-purpose address.*privateNetworks is off/;

test('by default a call from input reaches no loopback address: by address, by name, by a name resolving there, by another IP form', async () => {
  const s = await stub();
  try {
    const base = { lookup: testLookup };
    const cases: [string, string][] = [
      [`http://127.0.0.1:${s.port}/a`, `http://127.0.0.1:${s.port}`],
      [`http://localhost:${s.port}/b`, 'localhost resolves to'],
      [`http://loopback.test:${s.port}/c`, 'loopback.test resolves to'],
      // The decimal form of 127.0.0.1, its short hex form, and its IPv4-mapped IPv6 form.
      [`http://2130706433:${s.port}/d`, `http://127.0.0.1:${s.port}`],
      [`http://0x7f.1:${s.port}/e`, `http://127.0.0.1:${s.port}`],
      [`http://[::ffff:127.0.0.1]:${s.port}/f`, `http://[::ffff:7f00:1]:${s.port}`],
    ];
    for (const [url, names] of cases) {
      const record = await run(base, url);
      assertRefused(record, names, privateRule);
      // A name's resolved address is not told (a caller may not know it).
      if (names.includes('resolves')) assert.ok(!record.error?.detail?.includes('127.0.0.1'), record.error?.detail);
    }
    assert.deepEqual(s.paths, [], 'the stub received no request');
  } finally {
    await s.close();
  }
});

test('privateNetworks: true reaches loopback; the answer is the task output', async () => {
  const s = await stub();
  try {
    for (const url of [`http://127.0.0.1:${s.port}/a`, `http://loopback.test:${s.port}/b`]) {
      const record = await run({ privateNetworks: true, lookup: testLookup }, url);
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      assert.deepEqual(record.output, { reached: new URL(url).pathname });
    }
    assert.deepEqual(s.paths, ['/a', '/b']);
  } finally {
    await s.close();
  }
});

test('allow: only the origins listed (scheme, host or *.domain, port), and private addresses still only with privateNetworks', async () => {
  const s = await stub();
  try {
    const p = s.port;
    const listed = { allow: [`http://127.0.0.1:${p}`, `http://*.stub.test:${p}`], privateNetworks: true, lookup: testLookup };
    for (const url of [`http://127.0.0.1:${p}/listed`, `http://a.stub.test:${p}/wildcard`, `http://a.b.stub.test:${p}/deeper`]) {
      const record = await run(listed, url);
      assert.equal(record.status, 'completed', `${url}: ${JSON.stringify(record.error)}`);
    }
    const unlisted: [string, string][] = [
      [`http://localhost:${p}/name`, `http://localhost:${p}`],
      [`http://stub.test:${p}/apex`, `http://stub.test:${p}`],
      [`https://a.stub.test:${p}/scheme`, `https://a.stub.test:${p}`],
      [`http://other.test:${p}/host`, `http://other.test:${p}`],
    ];
    for (const [url, names] of unlisted) assertRefused(await run(listed, url), names, /not in the egress policy's allow list/);
    // Listed, but loopback: the address rule holds beside the allow list.
    assertRefused(await run({ allow: [`http://127.0.0.1:${p}`], lookup: testLookup }, `http://127.0.0.1:${p}/private`), `http://127.0.0.1:${p}`, privateRule);
    assert.deepEqual(s.paths, ['/listed', '/wildcard', '/deeper'], 'only the allowed calls reached the stub');
  } finally {
    await s.close();
  }
});

test('a redirect is never followed: from an allowed origin, its target (inside the policy or not) is never reached; the 3xx is the error or, with redirect: true, the answer', async () => {
  const s = await stub();
  try {
    const p = s.port;
    const policy = { allow: [`http://allowed.test:${p}`], privateNetworks: true, lookup: testLookup };
    const redirecting = yaml(`document: { dsl: '1.0.3', namespace: test, name: redirecting, version: '1.0.0' }
do:
  - notify:
      call: http
      with: { method: get, endpoint: '\${ .callbackUrl }', redirect: true, output: response }
`);
    const targets = [
      `http://allowed.test:${p}/inside`,
      `http://127.0.0.1:${p}/outside`,
      `http://[::ffff:127.0.0.1]:${p}/outside`,
      `http://localhost:${p}/outside`,
    ];
    for (const target of targets) {
      const url = `http://allowed.test:${p}/redirect?to=${encodeURIComponent(target)}`;
      const record = await run(policy, url);
      assert.equal(record.status, 'faulted', JSON.stringify(record.output));
      assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/communication', JSON.stringify(record.error));
      assert.equal(record.error?.status, 302);
      const answered = await run(policy, url, redirecting);
      assert.equal(answered.status, 'completed', JSON.stringify(answered.error));
      assert.equal((answered.output as JsonObject).statusCode, 302);
      assert.equal(((answered.output as JsonObject).headers as JsonObject).location, target);
    }
    assert.deepEqual(s.paths, Array<string>(targets.length * 2).fill('/redirect'), 'no redirect target was reached');
  } finally {
    await s.close();
  }
});

test('a refusal is not a communication error: a try retrying those does not retry it; the OpenAPI document fetch is refused the same way', async () => {
  const s = await stub();
  try {
    const retrying = yaml(`document: { dsl: '1.0.3', namespace: test, name: retrying, version: '1.0.0' }
do:
  - attempt:
      try:
        - notify:
            call: http
            with: { method: get, endpoint: '\${ .callbackUrl }' }
      catch:
        errors: { with: { type: https://serverlessworkflow.io/spec/1.0.0/errors/communication } }
        retry: { delay: { milliseconds: 1 }, limit: { attempt: { count: 3 } } }
`);
    const retried = await run({}, `http://127.0.0.1:${s.port}/retried`, retrying);
    assertRefused(retried, `http://127.0.0.1:${s.port}`, privateRule);
    assert.equal(Object.keys(retried.timers).length, 0, 'no retry was scheduled');
    const openapi = yaml(`document: { dsl: '1.0.3', namespace: test, name: operation, version: '1.0.0' }
do:
  - op:
      call: openapi
      with: { document: { endpoint: '\${ .callbackUrl }' }, operationId: ping }
`);
    assertRefused(await run({}, `http://127.0.0.1:${s.port}/openapi.json`, openapi), `http://127.0.0.1:${s.port}`, privateRule);
    assert.deepEqual(s.paths, []);
  } finally {
    await s.close();
  }
});

test('without an egress policy (an executor given none) calls go anywhere, as before', async () => {
  const s = await stub();
  try {
    const record = await run(undefined, `http://127.0.0.1:${s.port}/open`);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output as JsonObject, { reached: '/open' });
  } finally {
    await s.close();
  }
});
