/**
 * $secrets: read only where its value goes into an outgoing request and never into the log; the
 * stored transitions never hold a secret's value (nor the authorization built from it); the
 * deployment's secrets come from the environment or an owner-only file.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { loadBundle } from '../../src/contract/bundle.js';
import { SystemClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { readWorkflowSecrets } from '../../src/cli/workflow-secrets.js';
import { checkBundleWorkflows } from '../../src/workflow/dsl/bundle.js';
import { WorkflowExecutor } from '../../src/workflow/exec/executor.js';
import { checkDocument } from '../../src/workflow/exec/document.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { seededRandom } from '../../src/runtime/random.js';
import { readFileSync } from 'node:fs';
import { repoRoot } from '../support/assertions.js';
import { assertReplayEqual, headerEchoServer, yaml, refused } from './support.js';

const token = 'tok-3f9a1c77e2';
const password = 'pw-81d0b4';
const secrets = new Map<string, JsonValue>([
  ['api', { token }],
  ['creds', { username: 'svc', password }],
]);

/** A loopback service that echoes the headers it got (as a careless service might). */
const echoServer = () => headerEchoServer((headers) => ({ youSent: headers.authorization ?? null, key: headers['x-api-key'] ?? null }));

function executorWith(store: MemoryEventStore, clock: SystemClock, provided: ReadonlyMap<string, JsonValue>) {
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const executor = new WorkflowExecutor({ store: workflowStreams(store), clock, random: seededRandom(1), evaluator, secrets: provided });
  return { executor, evaluator, close: async () => (await executor.close(), await evaluator.close()) };
}

const document = (url: string) =>
  yaml(`
document: { dsl: '1.0.3', namespace: t, name: secret-call, version: '1.0.0' }
use:
  secrets: [ api, creds ]
do:
  - bearer:
      call: http
      with:
        method: get
        endpoint:
          uri: ${url}/one
          authentication:
            bearer:
              token: \${ $secrets.api.token }
        headers:
          x-api-key: \${ "k-" + $secrets.api.token }
        output: response
  - basic:
      call: http
      with:
        method: get
        endpoint:
          uri: ${url}/two
          authentication:
            basic: { use: creds }
`);

test('a secret reaches the request and never the log: the recorded with, request and echoed answer show [redacted]', async () => {
  const server = await echoServer();
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const h = executorWith(store, clock, secrets);
  try {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'k', document: document(server.url), input: {} });
    const record = await h.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(server.seen[0]?.authorization, `Bearer ${token}`);
    assert.equal(server.seen[0]?.['x-api-key'], `k-${token}`);
    assert.equal(server.seen[1]?.authorization, `Basic ${Buffer.from(`svc:${password}`).toString('base64')}`);
    const read = await store.read(instanceId);
    assert.equal(read.kind, 'ok');
    const log = JSON.stringify(read.kind === 'ok' ? read.transitions : []);
    for (const value of [token, password, Buffer.from(`svc:${password}`).toString('base64')]) assert.ok(!log.includes(value), `the log holds no ${value}`);
    const answer = record.steps['/do/0/bearer>http'] as { ok: JsonObject };
    assert.deepEqual((answer.ok.request as JsonObject).headers, { authorization: '[redacted]', 'x-api-key': '[redacted]' });
    assert.deepEqual(answer.ok.content, { youSent: '[redacted]', key: '[redacted]' });
    assert.deepEqual(record.output, { youSent: '[redacted]', key: null });
    // The replay folds the log alone: it needs no secret.
    await assertReplayEqual({ executor: h.executor } as never, instanceId);
  } finally {
    await h.close();
    await server.close();
  }
});

test("an answer echoing a secret is scrubbed before it is cut or encoded: an error's detail (its first 2048 bytes) and base64 content", async () => {
  // A careless service that echoes the authorization after padding sized by the caller (the request's query), in an error or in binary content.
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    const echo = `${'x'.repeat(Number(url.searchParams.get('pad') ?? 0))}${request.headers.authorization ?? ''}`;
    response.statusCode = url.pathname === '/error' ? 400 : 200;
    response.setHeader('content-type', url.pathname === '/error' ? 'text/plain' : 'application/octet-stream');
    response.end(echo);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // "Bearer " is 7 bytes: the detail's 2048 bytes end 8 bytes into the token.
  const pad = 2048 - 7 - 8;
  const call = (name: string, path: string, output: string) => `
  - ${name}:
      call: http
      with:
        method: get
        endpoint:
          uri: ${url}${path}
          authentication: { bearer: { use: api } }
        query: { pad: "${pad}" }
        output: ${output}`;
  const doc = yaml(`
document: { dsl: '1.0.3', namespace: t, name: secret-echo, version: '1.0.0' }
use:
  secrets: [ api ]
do:${call('raw', '/raw', 'raw')}${call('binary', '/raw', 'content')}${call('error', '/error', 'content')}
`);
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const h = executorWith(store, clock, secrets);
  try {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'k', document: doc, input: {} });
    const record = await h.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.status, 400);
    const detail = record.error?.detail ?? '';
    assert.ok(!detail.includes(token.slice(0, 8)), `the detail holds no part of the token: …${detail.slice(-24)}`);
    assert.ok(detail.startsWith('x'.repeat(pad)));
    for (const at of ['/do/0/raw>http', '/do/1/binary>http']) {
      const content = Buffer.from((record.steps[at] as { ok: string }).ok, 'base64').toString('utf8');
      assert.ok(!content.includes(token), `${at}'s content holds no token`);
      assert.equal(content, `${'x'.repeat(pad)}[redacted]`, at);
    }
    const read = await store.read(instanceId);
    const log = JSON.stringify(read.kind === 'ok' ? read.transitions : []);
    assert.ok(!log.includes(token.slice(0, 8)), 'the log holds no part of the token');
  } finally {
    await h.close();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a secret the deployment does not provide faults the call with an authorization error (403)', async () => {
  const server = await echoServer();
  const clock = new SystemClock();
  const h = executorWith(new MemoryEventStore({ clock }), clock, new Map([['creds', secrets.get('creds')!]]));
  try {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'k', document: document(server.url), input: {} });
    const record = await h.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.status, 403);
    assert.equal(record.error?.instance, '/do/0/bearer');
    assert.match(record.error?.detail ?? '', /"api" is not provided/);
    assert.equal(server.seen.length, 0, 'no request was made');
  } finally {
    await h.close();
    await server.close();
  }
});

test('$secrets anywhere its result would be recorded is refused as unsupported; an undeclared name is invalid', () => {
  const base = (task: string) =>
    yaml(`
document: { dsl: '1.0.3', namespace: t, name: s, version: '1.0.0' }
use: { secrets: [ api ] }
do:
  - t:
${task}
`);
  const cases: [string, string][] = [
    ['      set: { token: "${ $secrets.api.token }" }', '/do/0/t/set/token'],
    ['      input: { from: "${ $secrets.api }" }\n      set: {}', '/do/0/t/input/from'],
    ['      call: http\n      with: { method: get, endpoint: "https://x.example/${ $secrets.api.token }" }', '/do/0/t/with/endpoint'],
    ['      call: http\n      with: { method: post, endpoint: "https://x.example", body: { t: "${ $secrets.api.token }" } }', '/do/0/t/with/body/t'],
    [
      '      call: http\n      with: { method: get, endpoint: "https://x.example", headers: { a: "Bearer ${ $secrets.api.token }" } }',
      '/do/0/t/with/headers/a',
    ],
    ['      call: http\n      with: { method: get, endpoint: "https://x.example" }\n      output: { as: "${ $secrets.api }" }', '/do/0/t/output/as'],
  ];
  for (const [task, pointer] of cases) refused(() => checkDocument(base(task)), 'unsupported', pointer);
  refused(
    () => checkDocument(base('      call: http\n      with: { method: get, endpoint: "https://x.example", headers: { a: "${ $secrets.other }" } }')),
    'invalid-input',
    '/do/0/t/with/headers/a',
  );
  checkDocument(base('      call: http\n      with: { method: get, endpoint: "https://x.example", headers: { a: "${ $secrets.api.token }" } }'));
});

test('in a bundle, $secrets outside a request is refused naming its pointer in the bundle', async () => {
  const bundle = parseStrict(readFileSync(join(repoRoot(), 'test', 'workflow', 'fixtures', 'review-publish.bundle.json'), 'utf8')) as JsonObject;
  const workflow = (bundle.workflows as JsonObject)['review-or-escalate'] as JsonObject & { do: JsonObject[] };
  workflow.use = { secrets: ['api'] };
  workflow.do.push({ leak: { set: { t: '${ $secrets.api }' } } });
  await assert.rejects(checkBundleWorkflows(loadBundle(bundle)), (error) => {
    assert.ok(isAdapterError(error));
    assert.equal(error.kind, 'unsupported', error.message);
    assert.match(error.description ?? '', /^\/workflows\/review-or-escalate\/do\/\d+\/leak\/set\/t: \$secrets is read only/);
    return true;
  });
});

test('deployment secrets come from the environment or an owner-only file, bounded; JSON text is its value', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-secrets-'));
  const file = join(dir, 'creds.json');
  await writeFile(file, '{"username":"svc","password":"p"}\n');
  await chmod(file, 0o600);
  const read = await readWorkflowSecrets({ api: { env: 'API_TOKEN' }, creds: { file } }, { API_TOKEN: 'plain-text' });
  assert.deepEqual(
    [...read],
    [
      ['api', 'plain-text'],
      ['creds', { username: 'svc', password: 'p' }],
    ],
  );
  await chmod(file, 0o644);
  await assert.rejects(readWorkflowSecrets({ creds: { file } }, {}), /readable or writable by group or others/);
  await assert.rejects(readWorkflowSecrets({ api: { env: 'MISSING' } }, {}), /MISSING is not set/);
  await assert.rejects(readWorkflowSecrets({ api: { env: 'BIG' } }, { BIG: 'x'.repeat(16 * 1024 + 1) }), /more than 16384 bytes/);
});
