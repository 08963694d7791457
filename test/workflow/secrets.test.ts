/**
 * $secrets: read only where its value goes into an outgoing request and never into the log; the
 * stored transitions never hold a secret's value (nor the authorization built from it); the
 * deployment's secrets come from the environment or an owner-only file; a request carrying a
 * secret goes only to that secret's origins (every way a request carries one, and under `serve`),
 * and serve warns of a secret without them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { loadBundle } from '../../src/contract/bundle.js';
import { SystemClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { readWorkflowSecrets, unboundSecrets, workflowSecretOrigins } from '../../src/cli/workflow-secrets.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { checkBundleWorkflows } from '../../src/workflow/dsl/bundle.js';
import { scrubEchoes } from '../../src/workflow/exec/echoes.js';
import { WorkflowExecutor } from '../../src/workflow/exec/executor.js';
import { checkDocument } from '../../src/workflow/exec/document.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { seededRandom } from '../../src/runtime/random.js';
import { readFileSync } from 'node:fs';
import { repoRoot } from '../support/assertions.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import { captureIo } from '../support/cli-io.js';
import { serveCommand } from '../../src/cli/commands/serve.js';
import type { WorkflowInstance } from '../../src/runtime/workflow-service.js';
import { writeWorkflowFixture } from './instances-fixture.js';
import { assertReplayEqual, headerEchoServer, yaml, refused } from './support.js';

const token = 'tok-3f9a1c77e2';
const password = 'pw-81d0b4';
const secrets = new Map<string, JsonValue>([
  ['api', { token }],
  ['creds', { username: 'svc', password }],
]);

/** A loopback service that echoes the headers it got (as a careless service might). */
const echoServer = () => headerEchoServer((headers) => ({ youSent: headers.authorization ?? null, key: headers['x-api-key'] ?? null }));

function executorWith(
  store: MemoryEventStore,
  clock: SystemClock,
  provided: ReadonlyMap<string, JsonValue>,
  secretOrigins?: ReadonlyMap<string, readonly string[]>,
) {
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const executor = new WorkflowExecutor({ store: workflowStreams(store), clock, random: seededRandom(1), evaluator, secrets: provided, secretOrigins });
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
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Each form a careless service may echo a value in (echoes.ts): percent, form, JSON as PHP and Python write it, hex, base64 and base64url at each alignment. */
function echoForms(value: string): Record<string, string> {
  const bytes = Buffer.from(value, 'utf8');
  const asciiJson = JSON.stringify(value)
    .slice(1, -1)
    .replace(/\//g, '\\/')
    .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return {
    percent: encodeURIComponent(value),
    percentLower: encodeURIComponent(value).replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()),
    everyBytePercent: [...bytes].map((b) => `%${b.toString(16).padStart(2, '0')}`).join(''),
    form: new URLSearchParams({ v: value }).toString().slice(2),
    jsonEscaped: JSON.stringify(value).slice(1, -1),
    jsonAscii: asciiJson,
    jsonUpper: asciiJson.replace(/\\u([0-9a-f]{4})/g, (_m, hex: string) => `\\u${hex.toUpperCase()}`),
    hex: bytes.toString('hex'),
    hexUpper: bytes.toString('hex').toUpperCase(),
    base64: bytes.toString('base64'),
    base64url: bytes.toString('base64url'),
    base64Shift1: Buffer.concat([Buffer.from('x'), bytes]).toString('base64'),
    base64Shift2: Buffer.concat([Buffer.from('xy'), bytes]).toString('base64'),
    base64urlShift1: Buffer.concat([Buffer.from('x'), bytes]).toString('base64url'),
    base64urlShift2: Buffer.concat([Buffer.from('xy'), bytes]).toString('base64url'),
  };
}

/** Every string `value` holds (an answer's, an error's detail), each also decoded from base64 (raw content), one a line. */
function logStrings(value: unknown): string {
  const strings: string[] = [];
  const walk = (item: unknown): void => {
    if (typeof item === 'string') strings.push(item, Buffer.from(item, 'base64').toString('latin1'));
    else if (Array.isArray(item)) item.forEach(walk);
    else if (item !== null && typeof item === 'object') Object.values(item).forEach(walk);
  };
  walk(value);
  return strings.join('\n');
}

/**
 * A loopback service that echoes what it got in every form of echoForms: the authorization, its
 * credential, that decoded, the password in it and the x-api-key header; under /json as a JSON body
 * written as PHP writes one, else as text lines (an error's under /…/error).
 */
async function formsEchoServer(): Promise<{ server: Server; url: string }> {
  const echoed = (request: IncomingMessage): Record<string, string> => {
    const authorization = request.headers.authorization ?? '';
    const credential = authorization.slice(authorization.indexOf(' ') + 1);
    const decoded = authorization.startsWith('Basic ') ? Buffer.from(credential, 'base64').toString('utf8') : credential;
    const values = { authorization, credential, decoded, password: decoded.slice(decoded.indexOf(':') + 1), key: String(request.headers['x-api-key'] ?? '') };
    return Object.fromEntries(
      Object.entries(values).flatMap(([name, value]) => Object.entries(echoForms(value)).map(([form, text]) => [`${name}.${form}`, text])),
    );
  };
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://x').pathname;
    // A JSON body written as PHP writes one: "/" and non-ASCII escaped.
    const json = JSON.stringify({ ...echoed(request), kept: 'svc ok €' })
      .replace(/\//g, '\\/')
      .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    response.statusCode = path.endsWith('/error') ? 400 : 200;
    response.setHeader('content-type', path.startsWith('/json') ? 'application/json' : 'text/plain');
    response.end(path.startsWith('/json') ? json : Object.values(echoed(request)).join('\n'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

test('an answer echoing a secret in another form (percent, JSON escapes, hex, base64/base64url at any alignment) has each form scrubbed, in content, raw content and an error', async () => {
  // Values with what JSON escapes (", \\, /, non-ASCII), what percent-encoding escapes, and bytes whose base64 has + and / at every alignment.
  const awkward = new Map<string, JsonValue>([
    ['api', { token: 'tok/"q\\+3f9a?>~1c77e2' }],
    ['creds', { username: 'svc', password: 'pw-\u00e9\u20ac-81d0b4 x' }],
  ]);
  const { server, url } = await formsEchoServer();
  const call = (name: string, path: string, auth: string, output: string) => `
      - ${name}:
          call: http
          with:
            method: get
            endpoint:
              uri: ${url}${path}
              authentication: ${auth}
            headers:
              x-api-key: \${ $secrets.api.token }
            output: ${output}`;
  const doc = yaml(`
document: { dsl: '1.0.3', namespace: t, name: secret-forms, version: '1.0.0' }
use:
  secrets: [ api, creds ]
do:
  - all:
      do:${call('bearerJson', '/json', '{ bearer: { use: api } }', 'response')}${call('basicJson', '/json', '{ basic: { use: creds } }', 'content')}${call('basicText', '/text', '{ basic: { use: creds } }', 'raw')}
  - failing:
      try:${call('basicError', '/text/error', '{ basic: { use: creds } }', 'content')}
      catch:
        as: failure
        do:
          - keep: { set: { failure: "\${ $failure }" } }
`);
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const h = executorWith(store, clock, awkward);
  try {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'k', document: doc, input: {} });
    const record = await h.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const read = await store.read(instanceId);
    assert.equal(read.kind, 'ok');
    const log = logStrings(read.kind === 'ok' ? read.transitions : []);
    const { token } = awkward.get('api') as { token: string };
    const { password } = awkward.get('creds') as { password: string };
    const basicCredential = Buffer.from(`svc:${password}`, 'utf8').toString('base64');
    for (const [what, value] of Object.entries({ token, password, basicCredential }))
      for (const [form, text] of Object.entries({ raw: value, ...echoForms(value) }))
        assert.ok(!log.includes(text), `the log holds no ${what} as ${form}: ${text}`);
    assert.ok(log.includes('svc ok €'), 'what does not hold a secret is kept');
    const bearer = record.steps['/do/0/all/do/0/bearerJson>http'] as { ok: { content: Record<string, string> } };
    assert.equal(bearer.ok.content['key.base64Shift1'], 'e[redacted]==', "the character that is the prefix's alone is kept, and the padding");
    assert.equal(record.output && (record.output as JsonObject).failure !== undefined, true);
  } finally {
    await h.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a secret as long as the bound (16 KiB) is scrubbed in every form as well, whole', () => {
  const secret = `${randomBytes(12285).toString('base64')}é"x`;
  assert.equal(Buffer.byteLength(secret), 16 * 1024);
  for (const [form, text] of Object.entries({ raw: secret, ...echoForms(secret) })) {
    const out = scrubEchoes(Buffer.from(`<${text}>`, 'utf8'), [secret]).toString('latin1');
    assert.match(out, /^<.{0,3}(\[redacted\])+.{0,3}>$/, `${form} is replaced whole: ${out.slice(0, 80)}`);
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

test('$authorization (the resolved credential) is refused as unsupported wherever it is read, naming the pointer and why', () => {
  const base = (task: string) =>
    yaml(`
document: { dsl: '1.0.3', namespace: t, name: a, version: '1.0.0' }
use: { secrets: [ api ] }
do:
  - t:
${task}
`);
  const bearer = 'endpoint: { uri: "https://x.example", authentication: { bearer: { token: "${ $secrets.api.token }" } } }';
  const cases: [string, string][] = [
    [`      call: http\n      with: { method: get, ${bearer}, headers: { a: "\${ $authorization.parameter }" } }`, '/do/0/t/with/headers/a'],
    [`      call: http\n      with: { method: get, ${bearer} }\n      output: { as: "\${ $authorization }" }`, '/do/0/t/output/as'],
    ['      set: { s: "${ $authorization.scheme }" }', '/do/0/t/set/s'],
  ];
  for (const [task, pointer] of cases) {
    refused(() => checkDocument(base(task)), 'unsupported', pointer);
    assert.throws(
      () => checkDocument(base(task)),
      (error) => isAdapterError(error) && /\$authorization is not bound.*recorded in the instance's log/.test(error.description ?? ''),
    );
  }
  // A document that names no $authorization is accepted with the same credential.
  checkDocument(base(`      call: http\n      with: { method: get, ${bearer} }`));
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
  await writeFile(file, '{"username":"svc","password":"pw-4e01aa"}\n');
  await chmod(file, 0o600);
  const read = await readWorkflowSecrets({ api: { env: 'API_TOKEN' }, creds: { file } }, { API_TOKEN: 'plain-text' });
  assert.deepEqual(
    [...read],
    [
      ['api', 'plain-text'],
      ['creds', { username: 'svc', password: 'pw-4e01aa' }],
    ],
  );
  await chmod(file, 0o644);
  await assert.rejects(readWorkflowSecrets({ creds: { file } }, {}), /readable or writable by group or others/);
  await assert.rejects(readWorkflowSecrets({ api: { env: 'MISSING' } }, {}), /MISSING is not set/);
  await assert.rejects(readWorkflowSecrets({ api: { env: 'BIG' } }, { BIG: 'x'.repeat(16 * 1024 + 1) }), /more than 16384 bytes/);
});

test('a secret shorter than 8 bytes is refused where secrets are loaded, naming the secret and the member, never the value', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-secrets-'));
  const file = join(dir, 'creds.json');
  await writeFile(file, '{"username":"svc","password":"p-7"}\n');
  await chmod(file, 0o600);
  const refusedLoad = async (sources: Parameters<typeof readWorkflowSecrets>[0], env: NodeJS.ProcessEnv, says: RegExp) => {
    const error = await readWorkflowSecrets(sources, env).then(
      () => assert.fail('accepted'),
      (caught: unknown) => caught,
    );
    assert.ok(isAdapterError(error) && error.kind === 'invalid-input', String(error));
    assert.match(error.message, says);
    return error.message;
  };
  const plain = await refusedLoad(
    { api: { env: 'API_TOKEN' } },
    { API_TOKEN: 'a' },
    /workflow secret api \(environment variable API_TOKEN\): its value is shorter than 8 bytes/,
  );
  assert.ok(!plain.includes("'a'") && !plain.includes('"a"'));
  await refusedLoad({ creds: { file } }, {}, /workflow secret creds \(file .*creds\.json\): its password is shorter than 8 bytes/);
  await refusedLoad({ api: { env: 'T' } }, { T: '{"token":"abc"}' }, /its token is shorter than 8 bytes/);
  await refusedLoad({ api: { env: 'T' } }, { T: '{"keys":["long-enough-1","k2"]}' }, /its \/keys\/1 is shorter than 8 bytes/);
  await refusedLoad({ api: { env: 'T' } }, { T: '{"token":"long-enough","pin":1234}' }, /its pin is shorter than 8 bytes/);
  // Seven bytes of UTF-8 are too few however few characters; eight are enough, and a username need not be.
  await refusedLoad({ api: { env: 'T' } }, { T: 'ab-\u00e9-c' }, /shorter than 8 bytes/);
  const read = await readWorkflowSecrets({ api: { env: 'T' }, creds: { env: 'C' } }, { T: 'abc-\u00e9-c', C: '{"username":"a","password":"pw-8bytes"}' });
  assert.deepEqual(read.get('creds'), { username: 'a', password: 'pw-8bytes' });
  // The executor refuses the same, given its secrets directly.
  assert.throws(
    () =>
      new WorkflowExecutor({
        store: workflowStreams(new MemoryEventStore({ clock: new SystemClock() })),
        secrets: new Map([['api', { token: 'abc' }]]),
      } as never),
    (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input' && /secrets\.api: its token is shorter than 8 bytes/.test(error.message),
  );
});

test("a username shorter than 8 bytes is sent but not scrubbed (an answer's data holding it is kept); a value built from a secret shorter than 8 bytes is refused before any request", async () => {
  const server = await headerEchoServer(() => ({ service: 'svc-billing', owner: 'svc' }));
  const clock = new SystemClock();
  const h = executorWith(new MemoryEventStore({ clock }), clock, secrets);
  const call = (name: string, how: string) => `
  - ${name}:
      call: http
      with:
        method: get
        endpoint:
          uri: ${server.url}/${name}
${how}`;
  const doc = (how: string) =>
    yaml(`
document: { dsl: '1.0.3', namespace: t, name: short-secret, version: '1.0.0' }
use:
  secrets: [ api, creds ]
do:${how}
`);
  try {
    const basic = await h.executor.start({
      principalId: 'alice',
      invocationKey: 'basic',
      document: doc(call('basic', '          authentication: { basic: { use: creds } }')),
      input: {},
    });
    const answered = await h.executor.wait(basic.instanceId, 10_000);
    assert.equal(answered.status, 'completed', JSON.stringify(answered.error));
    assert.deepEqual(answered.output, { service: 'svc-billing', owner: 'svc' });
    const sliced = await h.executor.start({
      principalId: 'alice',
      invocationKey: 'sliced',
      document: doc(call('sliced', '        headers: { x-part: "${ $secrets.api.token[0:1] }" }')),
      input: {},
    });
    const record = await h.executor.wait(sliced.instanceId, 10_000);
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.status, 403);
    assert.match(record.error?.detail ?? '', /built from a secret is shorter than 8 bytes/);
    assert.equal(server.seen.length, 1, 'the sliced value was never sent');
  } finally {
    await h.close();
    await server.close();
  }
});

/** One call to `http://127.0.0.1:{port}/x` (the port from the task input) carrying secrets the way `how` says. */
const originDocument = (how: string) =>
  yaml(`
document: { dsl: '1.0.3', namespace: t, name: secret-origins, version: '1.0.0' }
use:
  secrets: [ api, creds, open ]
  authentications:
    partner:
      bearer:
        token: \${ $secrets.api.token }
do:
  - send:
      call: http
      with:
        method: get
        endpoint:
          uri: http://127.0.0.1:{port}/x
${how}
`);

const bearer = `Bearer ${token}`;
const basic = `Basic ${Buffer.from(`svc:${password}`).toString('base64')}`;

/** Each place a request carries a secret from: the secret it reads, the `with` lines that read it, and the header the service gets. */
const carriers: { what: string; secret: string; how: string; header: string; value: string }[] = [
  { what: 'a header expression', secret: 'api', how: '        headers: { x-api-key: "${ $secrets.api.token }" }', header: 'x-api-key', value: token },
  {
    what: 'a bearer token expression',
    secret: 'api',
    how: '          authentication: { bearer: { token: "${ $secrets.api.token }" } }',
    header: 'authorization',
    value: bearer,
  },
  { what: 'bearer: {use}', secret: 'api', how: '          authentication: { bearer: { use: api } }', header: 'authorization', value: bearer },
  { what: 'basic: {use}', secret: 'creds', how: '          authentication: { basic: { use: creds } }', header: 'authorization', value: basic },
  {
    what: 'basic credential expressions',
    secret: 'creds',
    how: '          authentication: { basic: { username: "${ $secrets.creds.username }", password: "${ $secrets.creds.password }" } }',
    header: 'authorization',
    value: basic,
  },
  { what: 'a named policy', secret: 'api', how: '          authentication: { use: partner }', header: 'authorization', value: bearer },
];

test("a request carrying a secret to an origin outside the secret's origins is refused before it is made (403 naming the secret and the origin); to one of them it is made", async () => {
  const allowed = await echoServer();
  const other = await echoServer();
  const port = (url: string) => Number(new URL(url).port);
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const provided = new Map([...secrets, ['open', 'open-9d01']]);
  // api and creds may go to `allowed` only; open names no origins: it may go anywhere calls may.
  const origins = new Map([
    ['api', ['https://api.example.com', allowed.url]],
    ['creds', [allowed.url]],
  ]);
  const h = executorWith(store, clock, provided, origins);
  const run = async (how: string, to: string, key: string) => {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: key, document: originDocument(how), input: { port: port(to) } });
    return h.executor.wait(instanceId, 10_000);
  };
  try {
    for (const { what, secret, how, header, value } of carriers) {
      const refusedRecord = await run(how, other.url, `${what}/other`);
      assert.equal(refusedRecord.status, 'faulted', what);
      assert.equal(refusedRecord.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/authorization', what);
      assert.equal(refusedRecord.error?.status, 403, what);
      assert.equal(refusedRecord.error?.instance, '/do/0/send', what);
      assert.equal(refusedRecord.error?.detail, `the secret "${secret}" may not be sent to ${other.url}: it is not among the secret's origins`, what);
      assert.equal(other.seen.length, 0, `${what}: the other origin got nothing`);
      const sentRecord = await run(how, allowed.url, `${what}/allowed`);
      assert.equal(sentRecord.status, 'completed', `${what}: ${JSON.stringify(sentRecord.error)}`);
      assert.equal(allowed.seen.at(-1)?.[header], value, what);
    }
    assert.equal(allowed.seen.length, carriers.length);
    // A secret that names no origins goes wherever calls may.
    const open = await run('        headers: { x-open: "${ $secrets.open }" }', other.url, 'open');
    assert.equal(open.status, 'completed', JSON.stringify(open.error));
    assert.equal(other.seen[0]?.['x-open'], 'open-9d01');
  } finally {
    await h.close();
    await allowed.close();
    await other.close();
  }
});

test("the executor refuses a secret's origins that are not origins, or that name a secret it is not given", async () => {
  const make = (secretOrigins: ReadonlyMap<string, readonly string[]>) => {
    const clock = new SystemClock();
    return new WorkflowExecutor({
      store: workflowStreams(new MemoryEventStore({ clock })),
      clock,
      random: seededRandom(1),
      evaluator: null as never,
      secrets,
      secretOrigins,
    });
  };
  assert.throws(
    () => make(new Map([['api', ['https://ok.example.com', 'https://api.example.com/v1']]])),
    (error: unknown) =>
      isAdapterError(error) && error.kind === 'invalid-input' && /secretOrigins\.api\[1\] "https:\/\/api\.example\.com\/v1"/.test(error.message),
  );
  assert.throws(
    () => make(new Map([['nope', ['https://api.example.com']]])),
    (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input' && /"nope", which is not among the secrets/.test(error.message),
  );
});

test("the config's workflowSecrets origins are read as the egress allow list is: each bad entry refused at load with its reason, an empty list refused", () => {
  const parse = (workflowSecrets: unknown) =>
    parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(minimalServeConfig({ workflowSecrets }))), '/etc/convoke').workflowSecrets;
  // A file source keeps its origins when its path is resolved.
  assert.deepEqual(
    parse({ api: { env: 'API', origins: ['https://api.example.com', 'https://*.example.org'] }, creds: { file: 'c.json', origins: ['http://10.1.2.3:8080'] } }),
    {
      api: { env: 'API', origins: ['https://api.example.com', 'https://*.example.org'] },
      creds: { file: '/etc/convoke/c.json', origins: ['http://10.1.2.3:8080'] },
    },
  );
  assert.throws(
    () =>
      parse({ api: { env: 'API', origins: ['https://ok.example.com', 'https://api.example.com/v1'] }, creds: { file: 'c.json', origins: ['https://*.com'] } }),
    (error: unknown) =>
      isAdapterError(error) &&
      error.kind === 'invalid-input' &&
      /workflowSecrets\.api\.origins\[1\] "https:\/\/api\.example\.com\/v1": an entry is an origin/.test(error.message) &&
      /workflowSecrets\.creds\.origins\[0\] "https:\/\/\*\.com": \*\.com is too wide/.test(error.message) &&
      !/origins\[0\] "https:\/\/ok/.test(error.message),
  );
  for (const origins of [[], 'https://api.example.com', ['https://a.example.com', 'https://a.example.com'], [7]])
    assert.throws(
      () => parse({ api: { env: 'API', origins } }),
      (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input',
      JSON.stringify(origins),
    );
});

test('a secret confined neither by its origins nor by an egress allow list stops the config at load, naming it and what to add', () => {
  const parse = (config: Record<string, unknown>) =>
    parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(minimalServeConfig(config))), '/etc/convoke').workflowSecrets;
  const secrets = { api: { env: 'API', origins: ['https://api.example.com'] }, open: { env: 'OPEN' }, creds: { file: 'c.json' } };
  for (const http of [undefined, { privateNetworks: true }])
    assert.throws(
      () => parse({ workflowSecrets: secrets, ...(http ? { workflows: { http } } : {}) }),
      (error: unknown) =>
        isAdapterError(error) &&
        error.kind === 'invalid-input' &&
        error.message.includes(
          `workflowSecrets.open names no origins and workflows.http has no allow list: a workflow that declares it could send it to any ${http ? '' : 'public '}origin; give it "origins"`,
        ) &&
        error.message.includes('workflowSecrets.creds names no origins') &&
        !error.message.includes('workflowSecrets.api'),
      JSON.stringify(http),
    );
  // Confined by the allow list (serve warns of them), or each by its own origins: loaded.
  assert.deepEqual(Object.keys(parse({ workflowSecrets: secrets, workflows: { http: { allow: ['https://a.example.com'] } } }) ?? {}), ['api', 'open', 'creds']);
  assert.deepEqual(Object.keys(parse({ workflowSecrets: { api: secrets.api } }) ?? {}), ['api']);
});

test('serve is given each secret origins names, and says which secrets name none, with where they may go', () => {
  const sources = { api: { env: 'API', origins: ['https://api.example.com'] }, creds: { file: '/c.json' } };
  assert.deepEqual([...workflowSecretOrigins(sources)], [['api', ['https://api.example.com']]]);
  assert.deepEqual(unboundSecrets(sources, undefined), [{ secret: 'creds', reach: 'any public origin (workflows.http has no allow list)' }]);
  assert.deepEqual(unboundSecrets(sources, { privateNetworks: true }), [{ secret: 'creds', reach: 'any origin (workflows.http has no allow list)' }]);
  assert.deepEqual(unboundSecrets(sources, { allow: ['https://a.example.com', 'https://b.example.com'] }), [
    { secret: 'creds', reach: 'any of the 2 origins of workflows.http.allow' },
  ]);
  assert.deepEqual(unboundSecrets({ api: sources.api }, undefined), []);
});

test('convoke serve: a secret goes only to its configured origins, and a secret that names none (confined by the allow list alone) is warned of at start-up', async () => {
  const allowed = await echoServer();
  const other = await echoServer();
  const notify = {
    document: { dsl: '1.0.3', namespace: 'lab', name: 'notify', version: '1.0.0' },
    use: { secrets: ['api', 'open'] },
    do: [
      {
        notify: {
          call: 'http',
          with: { method: 'get', endpoint: '${ .url }', headers: { 'x-api-key': '${ $secrets.api }', 'x-open': '${ $secrets.open }' } },
        },
      },
    ],
  };
  const fixture = await writeWorkflowFixture({ bundleWorkflows: { notify }, workflows: { http: { privateNetworks: true, allow: [allowed.url, other.url] } } });
  const config = JSON.parse(await readFile(fixture.configPath, 'utf8')) as JsonObject;
  config.workflowSecrets = { api: { env: 'API_KEY', origins: [allowed.url] }, open: { env: 'OPEN_KEY' } };
  await writeFile(fixture.configPath, JSON.stringify(config));
  const io = captureIo();
  const stop = new AbortController();
  const serving = serveCommand({ config: fixture.configPath, env: { API_KEY: token, OPEN_KEY: 'open-5e0c1d' }, signal: stop.signal, logLevel: 'warn' }, io);
  try {
    let url: string | undefined;
    for (let waited = 0; url === undefined && waited < 10_000; waited += 20) {
      url = /listening on (\S+)/.exec(io.out())?.[1];
      if (url === undefined) await Promise.race([serving, new Promise((resolve) => setTimeout(resolve, 20))]);
    }
    assert.ok(url, `serve listens: ${io.err()}`);
    const start = async (to: string) => {
      const response = await fetch(`${url}/workflow-instances`, {
        method: 'POST',
        headers: { authorization: `Bearer ${fixture.tokens.alice}`, 'content-type': 'application/json' },
        body: JSON.stringify({ bundle: { ...fixture.bundle }, workflow: 'notify', invocationKey: to, input: { url: `${to}/x` }, waitMs: 10_000 }),
      });
      assert.equal(response.status, 200);
      return (await response.json()) as WorkflowInstance;
    };
    const refusedInstance = await start(other.url);
    assert.equal(refusedInstance.status, 'faulted', JSON.stringify(refusedInstance));
    assert.equal(refusedInstance.error?.status, 403);
    assert.equal(refusedInstance.error?.detail, `the secret "api" may not be sent to ${other.url}: it is not among the secret's origins`);
    assert.equal(other.seen.length, 0, 'the other origin got nothing');
    const sent = await start(allowed.url);
    assert.equal(sent.status, 'completed', JSON.stringify(sent.error));
    assert.equal(allowed.seen[0]?.['x-api-key'], token);
    const warnings = io
      .err()
      .split('\n')
      .filter((line) => line.includes('workflow-secret-unbound'))
      .map((line) => JSON.parse(line) as JsonObject);
    assert.deepEqual(
      warnings.map(({ secret, reach }) => ({ secret, reach })),
      [{ secret: 'open', reach: 'any of the 2 origins of workflows.http.allow' }],
    );
    assert.ok(!io.err().includes(token) && !io.err().includes('open-5e'), 'the log holds no secret');
  } finally {
    stop.abort();
    await serving.catch(() => undefined);
    await fixture.dispose();
    await allowed.close();
    await other.close();
  }
});
