/**
 * Contract calls over HTTP (workflow/exec/http-contracts.ts): a workflow executor with no contract
 * runtime of its own calls `convoke serve`'s facade over a real socket, with the credential read
 * from the environment variable it names. A lost answer is looked up again under the same key —
 * one operation, never a success taken on trust; definite refusals become distinct DSL errors; a
 * jq-built input as deep as admission takes is admitted over HTTP as it is in-process.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonObject } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { main } from '../../src/cli/main.js';
import { captureIo } from '../support/cli-io.js';
import { HttpContracts } from '../../src/workflow/exec/http-contracts.js';
import { harness, runToEnd, yaml } from './support.js';
import { serveWorkflowFixture, writeWorkflowFixture, type HostedWorkflows, type WorkflowFixture } from './instances-fixture.js';

let fixture: WorkflowFixture;
let hosted: HostedWorkflows;
const clock = new SystemClock();

before(async () => {
  fixture = await writeWorkflowFixture();
  hosted = await serveWorkflowFixture(fixture);
});

after(async () => {
  await hosted?.close();
  await fixture?.dispose();
});

const document = (digest: string) =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: remote-review, version: '1.0.0' }
do:
  - review:
      call: invoke-contract
      with:
        contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
        interaction: review
        input:
          document: \${ .doc }
        waitFor: settled
  - done:
      set:
        outcome: \${ .decision.outcome }
        operation: \${ .operationId }
`);

const contracts = (token: string | undefined, fetchVia?: typeof fetch) =>
  new HttpContracts({
    endpoint: hosted.server.url,
    credential: { env: 'CONVOKE_WF_TOKEN' },
    env: token === undefined ? {} : { CONVOKE_WF_TOKEN: token },
    clock,
    retryBudgetMs: 5_000,
    ...(fetchVia ? { fetch: fetchVia } : {}),
  });

test('a workflow calls a contract over HTTP: admitted under the stage key, long-polled to the boundary, the log replays', async () => {
  const h = harness({ clock, invocations: contracts(fixture.tokens.alice) });
  try {
    const record = await runToEnd(h, document(fixture.bundle.digest), { doc: 'RFC 11' }, 'remote-1');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const output = record.output as JsonObject;
    assert.equal(output.outcome, 'success');
    const remote = await hosted.deployment.coordinator.get('alice', output.operation as string);
    assert.equal(remote.settlement.status, 'complete');
    assert.equal(remote.invocationKey, record.children['/do/0/review']?.invocationKey);
  } finally {
    await h.close();
  }
});

test('a lost answer is looked up with the same key: one operation, and the stage succeeds only on the runtime’s answer', async () => {
  let lost = 0;
  const calls: string[] = [];
  // The first POST reaches the facade over the socket, but its answer never comes back.
  const losing: typeof fetch = async (input, init) => {
    calls.push(`${init?.method ?? 'GET'} ${String(input)}`);
    const response = await fetch(input, init);
    if (init?.method === 'POST' && lost === 0) {
      lost += 1;
      await response.arrayBuffer();
      throw new TypeError('fetch failed: the connection was reset');
    }
    return response;
  };
  const h = harness({ clock, invocations: contracts(fixture.tokens.alice, losing) });
  try {
    const record = await runToEnd(h, document(fixture.bundle.digest), { doc: 'RFC 12' }, 'remote-2');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(calls.filter((c) => c.startsWith('POST')).length, 2, 'the POST was sent again');
    const operationId = (record.output as JsonObject).operation as string;
    const ids: string[] = [];
    for await (const id of hosted.deployment.store.operationIds()) ids.push(id);
    const key = record.children['/do/0/review']?.invocationKey;
    const same = [];
    for (const id of ids) if ((await hosted.deployment.coordinator.get('alice', id).catch(() => undefined))?.invocationKey === key) same.push(id);
    assert.deepEqual(same, [operationId], 'one operation for the stage');
  } finally {
    await h.close();
  }
});

test('no definite answer within the retry budget is unavailable (a communication error), never success', async () => {
  const down: typeof fetch = async () => {
    throw new TypeError('fetch failed: connection refused');
  };
  const h = harness({ clock, invocations: contracts(fixture.tokens.alice, down) });
  try {
    const record = await runToEnd(h, document(fixture.bundle.digest), { doc: 'RFC 13' }, 'remote-3');
    assert.equal(record.status, 'faulted');
    assert.deepEqual([record.error?.type, record.error?.status], ['https://serverlessworkflow.io/spec/1.0.0/errors/communication', 503]);
  } finally {
    await h.close();
  }
});

test('definite refusals map to distinct DSL errors: a wrong credential is authorization, an undeployed digest configuration', async () => {
  const wrong = harness({ clock, invocations: contracts('not-a-token') });
  const missing = harness({ clock, invocations: contracts(undefined) });
  const right = harness({ clock, invocations: contracts(fixture.tokens.alice) });
  try {
    const denied = await runToEnd(wrong, document(fixture.bundle.digest), { doc: 'x' }, 'remote-4');
    assert.deepEqual([denied.error?.type, denied.error?.status], ['https://serverlessworkflow.io/spec/1.0.0/errors/authorization', 403]);
    const unset = await runToEnd(missing, document(fixture.bundle.digest), { doc: 'x' }, 'remote-5');
    assert.deepEqual([unset.error?.type, unset.error?.status], ['https://serverlessworkflow.io/spec/1.0.0/errors/authorization', 403]);
    assert.match(unset.error?.detail ?? '', /CONVOKE_WF_TOKEN is not set/);
    // The title names the kind; the detail is the refusal's own description, not prefixed with the kind again.
    assert.equal(unset.error?.title, 'Contract call denied');
    assert.doesNotMatch(unset.error?.detail ?? '', /^denied: /);
    const undeployed = await runToEnd(right, document(`sha256:${'2'.repeat(64)}`), { doc: 'x' }, 'remote-6');
    assert.deepEqual([undeployed.error?.type, undeployed.error?.status], ['https://serverlessworkflow.io/spec/1.0.0/errors/configuration', 400]);
  } finally {
    await Promise.all([wrong.close(), missing.close(), right.close()]);
  }
});

test('convoke workflow run --endpoint --token-env: the contract calls of a document run without a server go to the facade', async () => {
  const file = join(fixture.dir, 'remote.yaml');
  await writeFile(file, stringify(document(fixture.bundle.digest)));
  process.env.CONVOKE_WF_CLI_TOKEN = fixture.tokens.alice;
  let stdout = '';
  let stderr = '';
  const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, readStdin: async () => new Uint8Array() };
  const args = ['workflow', 'run', file, '--input', '{"doc":"RFC 14"}', '--key', 'cli-remote', '--principal', 'alice'];
  try {
    const code = await main(['node', 'convoke', ...args, '--endpoint', hosted.server.url, '--token-env', 'CONVOKE_WF_CLI_TOKEN'], io);
    assert.equal(code, 0, stderr);
    assert.equal((JSON.parse(stdout) as JsonObject).outcome, 'success');
    const without = await main(['node', 'convoke', ...args, '--token-env', 'CONVOKE_WF_CLI_TOKEN'], io);
    assert.equal(without, 2, 'a credential reference without an endpoint is refused');
  } finally {
    delete process.env.CONVOKE_WF_CLI_TOKEN;
  }
});

test("convoke workflow run --context: the context's endpoint, token file and principal; a token file others may read is refused", async () => {
  const file = join(fixture.dir, 'remote-context.yaml');
  await writeFile(file, stringify(document(fixture.bundle.digest)));
  const token = join(fixture.dir, 'alice.token');
  await writeFile(token, `${fixture.tokens.alice}\n`, { mode: 0o600 });
  const contexts = join(fixture.dir, 'contexts.json');
  const remote = { endpoint: hosted.server.url, tokenFile: token, principal: 'alice', store: `sqlite:${join(fixture.dir, 'remote-context.db')}` };
  await writeFile(contexts, JSON.stringify({ contexts: { remote } }), { mode: 0o600 });
  const run = async (...args: string[]) => {
    const io = captureIo();
    const named = args.includes('--context') ? ['--contexts', contexts] : [];
    const code = await main(['node', 'convoke', 'workflow', 'run', file, '--input', '{"doc":"RFC 15"}', ...named, ...args], io);
    return { code, out: io.out(), err: io.err() };
  };
  const done = await run('--context', 'remote', '--key', 'ctx-remote');
  assert.equal(done.code, 0, done.err);
  assert.equal((JSON.parse(done.out) as JsonObject).outcome, 'success');
  // The context's store holds the instance: the same key runs nothing again.
  const again = await run('--context', 'remote', '--key', 'ctx-remote', '--json');
  assert.equal(again.code, 0, again.err);
  assert.equal((JSON.parse(again.out) as JsonObject).status, 'completed');
  // A flag wins over the context: bob's token is not the principal alice's.
  process.env.CONVOKE_WF_BOB_TOKEN = fixture.tokens.bob;
  try {
    const flagged = await run('--context', 'remote', '--key', 'ctx-remote-bob', '--token-env', 'CONVOKE_WF_BOB_TOKEN', '--json');
    assert.equal(flagged.code, 11, flagged.err);
    // The facade answered as bob (the flag's token), not as the context's principal alice.
    assert.match(flagged.out, /the runtime answered operation op[0-9a-f]{64}, expected op[0-9a-f]{64}/);
  } finally {
    delete process.env.CONVOKE_WF_BOB_TOKEN;
  }
  await chmod(token, 0o644);
  const readable = await run('--context', 'remote', '--key', 'ctx-remote-2');
  assert.equal(readable.code, 2, readable.err);
  assert.match(readable.err, /token file .*alice\.token is readable or writable by group or others \(mode 0644\)/);
  // Without --context the context is not used, even as $CONVOKE_CONTEXT: no endpoint, so the contract call faults.
  process.env.CONVOKE_CONTEXTS = contexts;
  process.env.CONVOKE_CONTEXT = 'remote';
  try {
    const unnamed = await run('--key', 'ctx-remote-3', '--json');
    assert.equal(unnamed.code, 11, unnamed.err);
    assert.match(unnamed.out, /configuration/);
  } finally {
    delete process.env.CONVOKE_CONTEXTS;
    delete process.env.CONVOKE_CONTEXT;
  }
});

test('a call naming no waitFor waits for the interaction’s boundary, which the facade names; a weaker one is refused before admission', async () => {
  const calls = contracts(fixture.tokens.alice);
  const caller = { principalId: 'alice', senderPeerId: null };
  const request = { contract: fixture.bundle, interaction: 'publish', input: { approvals: 2 } };
  const invoked = await calls.invoke(caller, { ...request, invocationKey: 'remote-boundary-1' });
  assert.equal(invoked.boundary, 'settled', 'publish waits for settled: the facade says so');
  const review = await calls.invoke(caller, {
    contract: fixture.bundle,
    interaction: 'review',
    input: { document: 'RFC 13' },
    invocationKey: 'remote-boundary-2',
  });
  assert.equal(review.boundary, 'decision');
  await assert.rejects(
    calls.invoke(caller, { ...request, invocationKey: 'remote-boundary-3', waitFor: 'decision' }),
    (error: Error & { kind?: string }) => error.kind === 'invalid-input' && /weaken/.test(error.message),
  );
  const h = harness({ clock, invocations: calls });
  try {
    const publish = yaml(`document: { dsl: '1.0.3', namespace: test, name: remote-publish, version: '1.0.0' }
do:
  - publish:
      call: invoke-contract
      with:
        contract: { id: lab.review, version: '1.0.0', digest: '${fixture.bundle.digest}' }
        interaction: publish
        input: { approvals: 2 }
`);
    const record = await runToEnd(h, publish, {}, 'remote-3');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(((record.output as JsonObject).settlement as JsonObject).status, 'complete', 'the call waited for the settlement');
  } finally {
    await h.close();
  }
});

test('a contract call whose jq-built input is as deep as admission takes is admitted over HTTP as in-process; one level more is refused naming the depth', async () => {
  // {approvals, deep} is one level, and `deep` is .n + 1 levels: .n = 62 builds a 64-level input.
  const deepDocument = yaml(`document: { dsl: '1.0.3', namespace: test, name: deep-input, version: '1.0.0' }
do:
  - publish:
      call: invoke-contract
      with:
        contract: { id: lab.review, version: '1.0.0', digest: '${fixture.bundle.digest}' }
        interaction: publish
        input:
          approvals: 2
          deep: "\${ reduce range(.n) as $i ({}; {a: .}) }"
  - done:
      set:
        outcome: \${ .decision.outcome }
`);
  const h = harness({ clock, invocations: contracts(fixture.tokens.alice) });
  try {
    const deepest = await runToEnd(h, deepDocument, { n: limits.jsonDepthMax - 2 }, 'remote-deepest');
    assert.equal(deepest.status, 'completed', JSON.stringify(deepest.error));
    assert.equal((deepest.output as JsonObject).outcome, 'success');
    const tooDeep = await runToEnd(h, deepDocument, { n: limits.jsonDepthMax - 1 }, 'remote-too-deep');
    assert.equal(tooDeep.status, 'faulted');
    // The workflow holds a contract's input to admission's depth: the call is refused before a key is bound or a request sent.
    assert.match(JSON.stringify(tooDeep.error), /with\.input: nesting deeper than 64/);
    assert.equal(tooDeep.error?.title, 'Invalid contract call');
    assert.deepEqual(tooDeep.children, {}, 'no operation bound');
  } finally {
    await h.close();
  }
});

test("a refusal is definite only when its HTTP status is the one the facade gives its kind: any other pairing is uncertain, looked up again, never the body's kind", async () => {
  const answering =
    (status: number, body: unknown): typeof fetch =>
    async () =>
      new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  const lookup = (status: number, kind: string) =>
    new HttpContracts({
      endpoint: 'http://127.0.0.1:9',
      credential: { env: 'T' },
      env: { T: 'token' },
      clock,
      retryBudgetMs: 250,
      fetch: answering(status, { kind, description: 'as the server says' }),
    }).get('alice', 'op1');
  const rejection = async (status: number, kind: string) => {
    const error = await lookup(status, kind).then(
      () => assert.fail('a refusal answered success'),
      (caught: Error & { kind?: string }) => caught,
    );
    return error.kind;
  };
  // The facade's own pairings (src/contract/errors.ts httpStatusByKind, src/http/errors.ts) are taken as they say.
  for (const [status, kind] of [
    [400, 'invalid-input'],
    [401, 'denied'],
    [403, 'denied'],
    [404, 'invalid-input'],
    [409, 'conflict'],
    [409, 'protocol-conflict'],
    [410, 'expired'],
    [413, 'invalid-input'],
    [415, 'invalid-input'],
    [422, 'unsupported'],
  ] as const)
    assert.equal(await rejection(status, kind), kind, `${status} ${kind}`);
  // Any other pairing is not the facade speaking: no definite answer, so the call ends unavailable once the budget is spent.
  for (const [status, kind] of [
    [410, 'denied'],
    [400, 'unsupported'],
    [403, 'expired'],
    [409, 'denied'],
    [422, 'conflict'],
    [404, 'denied'],
  ] as const)
    assert.equal(await rejection(status, kind), 'unavailable', `${status} ${kind}`);
});
