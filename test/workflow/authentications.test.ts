/**
 * use.authentications: named basic and bearer policies, referenced by `authentication: {use}`,
 * whose credentials come from the deployment's secrets and reach the request — never the log; a
 * literal credential, a named policy computed from the workflow's data, and the schemes convoke
 * does not apply (oauth2, oidc, digest, certificate) are refused before anything is recorded.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { loadBundle } from '../../src/contract/bundle.js';
import { SystemClock } from '../../src/contract/clock.js';
import { isAdapterError, type AdapterErrorKind } from '../../src/contract/errors.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { checkBundleWorkflows } from '../../src/workflow/dsl/bundle.js';
import { checkWorkflowDocument } from '../../src/workflow/dsl/document.js';
import { checkDocument } from '../../src/workflow/exec/document.js';
import { WorkflowExecutor } from '../../src/workflow/exec/executor.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { seededRandom } from '../../src/runtime/random.js';
import { repoRoot } from '../support/assertions.js';
import { assertReplayEqual, headerEchoServer, yaml, refused } from './support.js';

const token = 'tok-named-5be0c1';
const password = 'pw-named-7e2a90';
const secrets = new Map<string, JsonValue>([
  ['api', { token }],
  ['creds', { username: 'svc', password }],
]);

/** A loopback service that echoes the Authorization header it got. */
const echoServer = () => headerEchoServer((headers) => ({ authorization: headers.authorization ?? null }));

const document = (url: string) =>
  yaml(`
document: { dsl: '1.0.3', namespace: t, name: named-auth, version: '1.0.0' }
use:
  secrets: [ api, creds ]
  authentications:
    service:
      basic:
        username: \${ $secrets.creds.username }
        password: \${ $secrets.creds.password }
    partner:
      bearer: { use: api }
do:
  - basic:
      call: http
      with:
        method: get
        endpoint: { uri: '${url}/one', authentication: { use: service } }
  - bearer:
      call: http
      with:
        method: get
        endpoint: { uri: '${url}/two', authentication: { use: partner } }
        output: response
`);

test('named policies: the request carries the credential from the secrets; the log and the echoed answer show [redacted]', async () => {
  const server = await echoServer();
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const executor = new WorkflowExecutor({ store: workflowStreams(store), clock, random: seededRandom(1), evaluator, secrets });
  try {
    const { instanceId } = await executor.start({ principalId: 'alice', invocationKey: 'k', document: document(server.url), input: {} });
    const record = await executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const basic = `Basic ${Buffer.from(`svc:${password}`).toString('base64')}`;
    assert.equal(server.seen[0]?.authorization, basic);
    assert.equal(server.seen[1]?.authorization, `Bearer ${token}`);
    const read = await store.read(instanceId);
    assert.equal(read.kind, 'ok');
    const log = JSON.stringify(read.kind === 'ok' ? read.transitions : []);
    for (const value of [token, password, basic]) assert.ok(!log.includes(value), `the log holds no ${value}`);
    assert.deepEqual(record.steps['/do/0/basic>http'], { ok: { authorization: '[redacted]' } });
    const answer = record.steps['/do/1/bearer>http'] as { ok: JsonObject };
    assert.deepEqual((answer.ok.request as JsonObject).headers, { authorization: '[redacted]' });
    assert.deepEqual(answer.ok.content, { authorization: '[redacted]' });
    // The recorded arguments show the policy with its credentials redacted, never the values.
    const recordedWith = record.steps['/do/0/basic>with'];
    if (recordedWith !== undefined) assert.ok(!JSON.stringify(recordedWith).includes(password));
    await assertReplayEqual({ executor } as never, instanceId);
  } finally {
    await executor.close();
    await evaluator.close();
    await server.close();
  }
});

const withPolicy = (authentications: string, authentication = '{ use: p }') =>
  yaml(`
document: { dsl: '1.0.3', namespace: t, name: a, version: '1.0.0' }
use:
  secrets: [ api ]
  authentications:
${authentications}
do:
  - t:
      call: http
      with: { method: get, endpoint: { uri: 'https://x.example', authentication: ${authentication} } }
`);

test('a literal credential, a named policy from data, an unknown name and the schemes convoke does not apply are refused, in both checks', () => {
  const cases: [JsonValue, AdapterErrorKind, string, RegExp][] = [
    [withPolicy('    p: { basic: { username: svc, password: hunter2 } }'), 'invalid-input', '/use/authentications/p/basic/username', /literal credential/],
    [withPolicy('    p: { bearer: { token: "${ .token }" } }'), 'unsupported', '/use/authentications/p/bearer/token', /must come from \$secrets/],
    [withPolicy('    p: { oauth2: { use: api } }'), 'unsupported', '/use/authentications/p/oauth2', /token request/],
    [withPolicy('    p: { bearer: { use: api } }', '{ use: q }'), 'invalid-input', '/do/0/t/with/endpoint/authentication/use', /names no entry/],
    [
      withPolicy('    p: { bearer: { use: api } }', '{ bearer: { token: abc123 } }'),
      'invalid-input',
      '/do/0/t/with/endpoint/authentication/bearer/token',
      /literal credential/,
    ],
    [
      withPolicy('    p: { bearer: { use: api } }', '{ digest: { username: a, password: b } }'),
      'unsupported',
      '/do/0/t/with/endpoint/authentication/digest',
      /challenge/,
    ],
  ];
  for (const [doc, kind, pointer, says] of cases) {
    refused(() => checkDocument(doc), kind, pointer, says);
    refused(() => checkWorkflowDocument(doc as JsonObject), kind, pointer, says);
  }
  // Inline, a credential may still come from the caller's data (the conformance kit's basic call).
  checkDocument(withPolicy('    p: { bearer: { use: api } }', '{ basic: { username: "${ .user }", password: "${ .password }" } }'));
  checkDocument(withPolicy('    p: { bearer: { token: "${ $secrets.api.token }" } }'));
});

test('in a bundle, a literal credential in use.authentications is refused naming its pointer in the bundle', async () => {
  const bundle = parseStrict(readFileSync(join(repoRoot(), 'test', 'workflow', 'fixtures', 'review-publish.bundle.json'), 'utf8')) as JsonObject;
  const workflow = (bundle.workflows as JsonObject)['review-or-escalate'] as JsonObject;
  workflow.use = { authentications: { shop: { bearer: { token: 'raw-token' } } } };
  await assert.rejects(checkBundleWorkflows(loadBundle(bundle)), (error) => {
    assert.ok(isAdapterError(error));
    assert.equal(error.kind, 'invalid-input', error.message);
    assert.match(error.description ?? '', /^\/workflows\/review-or-escalate\/use\/authentications\/shop\/bearer\/token: a literal credential/);
    return true;
  });
});
