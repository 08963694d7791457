/**
 * /workflow-instances over a real socket, against a deployment hosting workflow instances on its
 * store (contract calls in-process): start (200 when finished within the wait, 202 while running),
 * the same key and input find the same instance, a different input is 409, another principal gets
 * 404, cancel is 422 unless the bundle declares caller cancellation; each instance rebuilt from its
 * log gives the same view as the live one; the routes are in the OpenAPI document, and every route's
 * refusals of its headers or body are statuses its operation there documents (an HTTP/1.1 request
 * without a host header, or with two, among them: a 400 AdapterError, nothing started); an event stream
 * whose client left before it opened holds none of the principal's streams, and one whose refresh
 * failed with a bug tells its client "internal error", never the bug's message; one following an
 * instance of many steps sends updates whose size does not grow with the steps before them, and
 * what a client rebuilds from them is /transitions; one whose client does not read holds at most
 * one undelivered event and sends the rest once the client reads. A start and a contract invocation
 * take an input as deep as admission does (their bodies one level deeper), one level more a 400
 * naming the depth, and every other body is read to the limit itself.
 */
import { sseBlocks, sseEvent } from '../support/sse.js';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { get, request, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { Ajv } from 'ajv';
import type { JsonObject } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { workflowInstanceSchema, type WorkflowInspection, type WorkflowInspectionUpdate, type WorkflowInstance } from '../../src/runtime/workflow-service.js';
import { followWorkflow, type Followed } from '../support/inspection-updates.js';
import { renderInstance } from '../../src/cli/commands/workflow-facade.js';
import { eventStreamsPerPrincipalDefault } from '../../src/deployment/config.js';
import { serveWorkflowFixture, writeWorkflowFixture, type HostedWorkflows, type WorkflowFixture } from './instances-fixture.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';

let fixture: WorkflowFixture;
let hosted: HostedWorkflows;
const checkInstance = new Ajv({ strict: false, allowUnionTypes: true }).compile(workflowInstanceSchema);

before(async () => {
  fixture = await writeWorkflowFixture();
  hosted = await serveWorkflowFixture(fixture);
});

after(async () => {
  await hosted?.close();
  await fixture?.dispose();
});

async function call(
  method: string,
  path: string,
  token: string | undefined,
  body?: JsonObject,
): Promise<{ status: number; body: JsonObject; headers: Headers }> {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${hosted.server.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: response.status, body: (await response.json()) as JsonObject, headers: response.headers };
}

const start = (token: string, workflow: string, invocationKey: string, input: JsonObject, waitMs?: number) =>
  call('POST', '/workflow-instances', token, { bundle: { ...fixture.bundle }, workflow, invocationKey, input, ...(waitMs === undefined ? {} : { waitMs }) });

/** The view of the instance rebuilt from its stored log equals the live view. */
async function assertReplayEqual(instanceId: string): Promise<void> {
  const replayed = await hosted.host.executor.replay(instanceId);
  assert.ok(replayed);
  const live = await hosted.host.service.get('alice', instanceId);
  assert.deepEqual(await hosted.host.service.view(replayed), live, 'the instance rebuilt from its log equals the live one');
}

test('a pipeline runs to the end within the wait: 200, each stage with its operation, decision and settlement; the log replays', async () => {
  const answer = await start(fixture.tokens.alice, 'review-then-publish', 'release-1', { document: 'RFC 1' }, 10_000);
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  const instance = answer.body as unknown as WorkflowInstance;
  assert.ok(checkInstance(instance), JSON.stringify(checkInstance.errors));
  assert.equal(instance.status, 'completed', JSON.stringify(instance.error));
  assert.equal(instance.workflow, 'review-then-publish');
  assert.deepEqual(instance.bundle, fixture.bundle);
  assert.deepEqual(
    instance.stages.map((s) => [s.stage, s.task, s.decision?.outcome, s.settlement?.status]),
    [
      ['review', 'invoke', 'success', 'complete'],
      ['publish', 'invoke', 'success', 'complete'],
    ],
  );
  assert.deepEqual(
    instance.stages.map((s) => s.at),
    ['/do/0/review/do/0/invoke', '/do/1/publish/do/1/invoke'],
  );
  assert.equal(instance.currentTask, null);
  assert.deepEqual((instance.output as JsonObject).result, { status: 'published', url: 'https://lab.example/p/1' });
  await assertReplayEqual(instance.instanceId);
});

test('the same key and input find the same instance; a different input under the key is 409 conflict', async () => {
  const first = await start(fixture.tokens.alice, 'review-then-publish', 'release-2', { document: 'RFC 2' }, 10_000);
  assert.equal(first.status, 200);
  const again = await start(fixture.tokens.alice, 'review-then-publish', 'release-2', { document: 'RFC 2' });
  assert.equal(again.status, 200);
  assert.equal(again.body.instanceId, first.body.instanceId);
  assert.deepEqual(again.body.stages, first.body.stages);
  const different = await start(fixture.tokens.alice, 'review-then-publish', 'release-2', { document: 'RFC 2, amended' });
  assert.equal(different.status, 409, JSON.stringify(different.body));
  assert.equal(different.body.kind, 'conflict');
});

test("GET answers the original principal only: another principal's instance is 404, exactly like an unknown one", async () => {
  const started = await start(fixture.tokens.alice, 'review-then-publish', 'release-3', { document: 'RFC 3' }, 10_000);
  const id = started.body.instanceId as string;
  const own = await call('GET', `/workflow-instances/${id}`, fixture.tokens.alice);
  assert.equal(own.status, 200);
  assert.deepEqual(own.body, started.body);
  const other = await call('GET', `/workflow-instances/${id}`, fixture.tokens.bob);
  const unknown = await call('GET', `/workflow-instances/wf${'0'.repeat(64)}`, fixture.tokens.bob);
  assert.equal(other.status, 404);
  assert.equal(unknown.status, 404);
  assert.equal(other.body.kind, unknown.body.kind);
  assert.equal((other.body.description as string).replace(id, 'X'), (unknown.body.description as string).replace(`wf${'0'.repeat(64)}`, 'X'));
  const cancelled = await call('POST', `/workflow-instances/${id}/cancel`, fixture.tokens.bob);
  assert.equal(cancelled.status, 404);
  const anonymous = await call('GET', `/workflow-instances/${id}`, undefined);
  assert.equal(anonymous.status, 401);
});

test('an invocation key is at most invocationKeyBytesMax bytes of UTF-8, as an operation’s: 257 bytes in 129 characters is 400', async () => {
  const fits = await start(fixture.tokens.alice, 'slow', '\u{1F600}'.repeat(64), {}, 0);
  assert.equal(fits.status, 202, JSON.stringify(fits.body));
  const over = await start(fixture.tokens.alice, 'slow', `${'\u{1F600}'.repeat(64)}x`, {}, 0);
  assert.equal(over.status, 400, JSON.stringify(over.body));
  assert.equal(over.body.kind, 'invalid-input');
  assert.match(over.body.description as string, /invocationKey must be 1\.\.256 bytes \(got 257\)/);
  const operation = await call('POST', '/contract-invocations', fixture.tokens.alice, {
    contract: { ...fixture.bundle },
    interaction: 'review',
    invocationKey: `${'\u{1F600}'.repeat(64)}x`,
    input: { document: 'RFC 9' },
  });
  assert.equal(operation.status, 400, 'the same key is refused for an operation');
  assert.equal(operation.body.description, over.body.description);
});

test('an id that is not an instance id is 404 on get, wait and cancel, exactly like an unknown one', async () => {
  const unknown = await call('GET', `/workflow-instances/wf${'0'.repeat(64)}`, fixture.tokens.alice);
  assert.equal(unknown.status, 404);
  for (const id of ['abc', `WF${'A'.repeat(64)}`, `wf${'0'.repeat(63)}`, `wf${'0'.repeat(64)}0`, 'constructor', '__proto__']) {
    for (const [method, path] of [
      ['GET', `/workflow-instances/${encodeURIComponent(id)}`],
      ['GET', `/workflow-instances/${encodeURIComponent(id)}?waitMs=50`],
      ['POST', `/workflow-instances/${encodeURIComponent(id)}/cancel`],
    ] as const) {
      const answer = await call(method, path, fixture.tokens.alice);
      assert.equal(answer.status, 404, `${method} ${path}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.kind, unknown.body.kind, `${method} ${path}`);
    }
  }
});

test('a running instance is 202 with its current task; GET ?waitMs= waits; cancel where declared ends it cancelled', async () => {
  const started = await start(fixture.tokens.alice, 'slow', 'slow-1', {}, 0);
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const id = started.body.instanceId as string;
  assert.equal(started.headers.get('location'), `/workflow-instances/${id}`);
  const before = Date.now();
  const polled = await call('GET', `/workflow-instances/${id}?waitMs=300`, fixture.tokens.alice);
  assert.equal(polled.status, 202);
  assert.ok(Date.now() - before >= 250, 'the GET waited');
  assert.deepEqual(polled.body.currentTask, { at: '/do/0/pause', name: 'pause' });
  const cancelled = await call('POST', `/workflow-instances/${id}/cancel`, fixture.tokens.alice);
  assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
  assert.equal(cancelled.body.status, 'cancelled');
  const read = await call('GET', `/workflow-instances/${id}`, fixture.tokens.alice);
  assert.equal(read.body.status, 'cancelled');
  await assertReplayEqual(id);
});

test('a start under the key of a pruned instance is 410 expired, naming the instance, as the OpenAPI document says it may be', async () => {
  const started = await start(fixture.tokens.alice, 'slow', 'pruned-1', {}, 0);
  const id = started.body.instanceId as string;
  assert.equal((await call('POST', `/workflow-instances/${id}/cancel`, fixture.tokens.alice)).status, 200);
  // Retention tombstones the ended instance; the process holding it lets it go (as a prune's `pruned` hook does).
  assert.equal((await hosted.deployment.store.tombstone(id)).kind, 'ok');
  hosted.host.service.forget?.(id);
  const again = await start(fixture.tokens.alice, 'slow', 'pruned-1', {}, 0);
  assert.equal(again.status, 410, JSON.stringify(again.body));
  assert.equal(again.body.kind, 'expired');
  assert.equal(again.body.description, `workflow instance ${id} was pruned: its invocation key "pruned-1" starts no instance again`);
  assert.equal((await call('GET', `/workflow-instances/${id}`, fixture.tokens.alice)).status, 404);
  const document = await call('GET', '/openapi.json', undefined);
  const responses = (((document.body.paths as JsonObject)['/workflow-instances'] as JsonObject).post as JsonObject).responses as JsonObject;
  assert.ok(responses['410'], `startWorkflow documents ${Object.keys(responses).join(', ')}`);
});

test('cancelling an instance cancels its open contract call where the interaction declares caller cancellation', async () => {
  const started = await start(fixture.tokens.alice, 'held', 'held-1', { document: 'RFC 5' }, 0);
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const id = started.body.instanceId as string;
  let stages: WorkflowInstance['stages'] = [];
  for (let i = 0; i < 100 && stages.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    stages = ((await call('GET', `/workflow-instances/${id}`, fixture.tokens.alice)).body as unknown as WorkflowInstance).stages;
  }
  const operationId = stages[0]?.operationId;
  assert.ok(operationId, 'the contract call was bound');
  await hosted.deployment.coordinator.wait('alice', operationId, 'decision', 200);
  const cancelled = await call('POST', `/workflow-instances/${id}/cancel`, fixture.tokens.alice);
  assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
  assert.equal(cancelled.body.status, 'cancelled');
  const operation = await hosted.deployment.coordinator.get('alice', operationId);
  assert.deepEqual([operation.decision?.outcome, operation.decision?.reason], ['failed', 'cancelled']);
  await assertReplayEqual(id);
});

test('cancel of a workflow without caller cancellation is 422 unsupported, and the instance carries on', async () => {
  const started = await start(fixture.tokens.alice, 'review-then-publish', 'release-4', { document: 'RFC 4' }, 0);
  const id = started.body.instanceId as string;
  const refused = await call('POST', `/workflow-instances/${id}/cancel`, fixture.tokens.alice);
  assert.equal(refused.status, 422, JSON.stringify(refused.body));
  assert.equal(refused.body.kind, 'unsupported');
  assert.match(refused.body.description as string, /caller cancellation/);
  const finished = await call('GET', `/workflow-instances/${id}?waitMs=10000`, fixture.tokens.alice);
  assert.equal(finished.status, 200);
  assert.equal(finished.body.status, 'completed');
  await assertReplayEqual(id);
});

test('bad requests: an unknown workflow is 400, an undeployed digest 422, a malformed body 400', async () => {
  const unknown = await start(fixture.tokens.alice, 'no-such-flow', 'k', {});
  assert.equal(unknown.status, 400);
  assert.match(unknown.body.description as string, /no pipeline or workflow "no-such-flow"/);
  const undeployed = await call('POST', '/workflow-instances', fixture.tokens.alice, {
    bundle: { ...fixture.bundle, digest: `sha256:${'1'.repeat(64)}` },
    workflow: 'slow',
    invocationKey: 'k',
    input: {},
  });
  assert.equal(undeployed.status, 422);
  const malformed = await call('POST', '/workflow-instances', fixture.tokens.alice, { workflow: 'slow' });
  assert.equal(malformed.status, 400);
});

test('the OpenAPI document lists the workflow instance routes, the console’s included', async () => {
  const document = await call('GET', '/openapi.json', undefined);
  const paths = document.body.paths as JsonObject;
  const routes = [
    '/workflow-instances',
    '/workflow-instances/{instanceId}',
    '/workflow-instances/{instanceId}/cancel',
    '/workflow-instances/{instanceId}/transitions',
    '/workflow-instances/{instanceId}/events',
    '/workflow-instances/events',
  ];
  for (const path of routes) assert.ok(paths[path], path);
  assert.ok(((document.body.components as JsonObject).schemas as JsonObject).WorkflowInstance);
});

/** One request over the socket with headers as written (a header may be named twice), and its host; its status and body. */
function rawRequest(method: string, path: string, headers: string[], body = ''): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(hosted.server.url);
  return new Promise((resolve, reject) => {
    const sent = request(
      { host: hostname, port, method, path, headers: ['host', `${hostname}:${port}`, ...headers, 'content-length', String(Buffer.byteLength(body))] },
      (answer) => {
        let text = '';
        answer.setEncoding('utf8');
        answer.on('data', (chunk: string) => (text += chunk));
        answer.on('end', () => resolve({ status: answer.statusCode ?? 0, body: text }));
      },
    );
    sent.on('error', reject);
    sent.end(body);
  });
}

test('an HTTP/1.1 start without a host header, or with two, is 400 with an AdapterError body and the protective headers; nothing is started', async () => {
  const { hostname, port } = new URL(hosted.server.url);
  const body = JSON.stringify({ bundle: { ...fixture.bundle }, workflow: 'slow', invocationKey: 'hostless', input: {}, waitMs: 0 });
  /** One request written as raw bytes (a client library adds the host header, and refuses two); its status, headers and body. */
  const raw = (version: string, hostLines: string[]) =>
    new Promise<{ status: number; head: string; body: string }>((resolve, reject) => {
      const socket = connect(Number(port), hostname);
      let answer = '';
      socket.on('data', (chunk) => (answer += chunk.toString('utf8')));
      socket.on('error', reject);
      socket.on('close', () => {
        const split = answer.indexOf('\r\n\r\n');
        resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]), head: answer.slice(0, split).toLowerCase(), body: answer.slice(split + 4) });
      });
      const lines = [
        `POST /workflow-instances HTTP/${version}`,
        ...hostLines,
        `authorization: Bearer ${fixture.tokens.alice}`,
        'connection: close',
        'content-type: application/json',
        `content-length: ${Buffer.byteLength(body)}`,
      ];
      socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
    });
  // RFC 9112 §3.2: a server answers 400 to an HTTP/1.1 request without a host header, and to any with two.
  for (const [hostLines, description] of [
    [[], 'an HTTP/1.1 request carries a host header (RFC 9112 §3.2)'],
    [[`host: ${hostname}`, 'host: elsewhere.example'], 'a request carries one host header, not 2 (RFC 9112 §3.2)'],
  ] as const) {
    const answer = await raw('1.1', [...hostLines]);
    assert.equal(answer.status, 400, `${answer.head}\n${answer.body}`);
    assert.deepEqual(JSON.parse(answer.body), { kind: 'invalid-input', description });
    assert.match(answer.head, /\r\nx-content-type-options: nosniff\r\n/);
  }
  const instanceId = workflowInstanceId('alice', fixture.bundle.digest, 'slow', 'hostless');
  assert.equal((await call('GET', `/workflow-instances/${instanceId}`, fixture.tokens.alice)).status, 404, 'nothing was started');
  // HTTP/1.0 has no host header to require.
  const older = await raw('1.0', []);
  assert.equal(older.status, 202, older.body);
});

test('every route answers a refusal of its headers or of its body with a status its OpenAPI operation documents', async () => {
  const document = (await call('GET', '/openapi.json', undefined)).body as { paths: Record<string, Record<string, { responses: JsonObject }>> };
  const id = (await start(fixture.tokens.alice, 'slow', 'documented-refusals', {}, 0)).body.instanceId as string;
  const bearer = ['authorization', `Bearer ${fixture.tokens.alice}`];
  // What every route refuses before it reads anything (two readings of the caller, a body it would not read as sent),
  // and what a route that reads a JSON body refuses of the body: a cancel's too, which needs none but reads one sent.
  const refusals: { what: string; headers: string[]; body?: string; applies(method: string, path: string): boolean }[] = [
    { what: 'two authorization headers', headers: ['authorization', 'Bearer one', 'authorization', 'Bearer two'], applies: () => true },
    { what: 'a content-encoding other than identity', headers: [...bearer, 'content-encoding', 'gzip'], applies: () => true },
    {
      what: 'a body that is not JSON',
      headers: [...bearer, 'content-type', 'text/plain'],
      body: 'cancel',
      applies: (method, path) => method === 'post' && path !== '/workflow-events',
    },
    {
      what: 'a body over http.bodyLimitBytes',
      headers: [...bearer, 'content-type', 'application/json'],
      body: JSON.stringify({ pad: 'x'.repeat(64 * 1024) }),
      applies: (method, path) => method === 'post' && path !== '/workflow-events',
    },
  ];
  const problems: string[] = [];
  for (const [template, operations] of Object.entries(document.paths)) {
    const path = template.replace('{instanceId}', id).replace('{operationId}', `op${'0'.repeat(64)}`);
    for (const [method, operation] of Object.entries(operations)) {
      for (const refusal of refusals.filter((r) => r.applies(method, template))) {
        const answer = await rawRequest(method.toUpperCase(), path, refusal.headers, refusal.body);
        assert.ok(answer.status >= 400 && answer.status < 500, `${method} ${template}, ${refusal.what}: ${answer.status} ${answer.body}`);
        if (!operation.responses[String(answer.status)])
          problems.push(`${method} ${template} answers ${refusal.what} ${answer.status}; it documents ${Object.keys(operation.responses).join(', ')}`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

test('GET /workflow-instances lists the caller its own instances and an operator every one; filters, cursor, stuck; /transitions shows the record and log to its principal or an operator', async () => {
  const mine = await start(fixture.tokens.alice, 'review-then-publish', 'listed-1', { document: 'RFC 30' }, 10_000);
  const theirs = await start(fixture.tokens.bob, 'review-then-publish', 'listed-2', { document: 'RFC 31' }, 10_000);
  assert.equal(mine.status, 200);
  assert.equal(theirs.status, 200);
  const mineId = (mine.body as unknown as WorkflowInstance).instanceId;
  const theirsId = (theirs.body as unknown as WorkflowInstance).instanceId;

  const alice = await call('GET', '/workflow-instances?limit=500', fixture.tokens.alice);
  assert.equal(alice.status, 200, JSON.stringify(alice.body));
  const aliceRows = alice.body.instances as JsonObject[];
  assert.ok(aliceRows.length >= 1 && aliceRows.every((row) => row.principalId === 'alice'), 'a caller sees only its own');
  assert.equal(aliceRows[0]?.instanceId, mineId, 'newest start first');
  assert.equal(aliceRows[0]?.status, 'completed');
  assert.equal(aliceRows[0]?.workflowName, 'review-then-publish');
  assert.equal((aliceRows[0]?.childOperationIds as string[]).length, 2, 'the two stages are its child operations');
  assert.deepEqual(aliceRows[0]?.stuck, []);

  const ops = await call('GET', '/workflow-instances?limit=500', fixture.tokens.ops);
  const opsIds = (ops.body.instances as JsonObject[]).map((row) => row.instanceId);
  assert.ok(opsIds.includes(mineId) && opsIds.includes(theirsId), 'an operator sees every principal');

  const firstPage = await call('GET', '/workflow-instances?limit=1&status=completed', fixture.tokens.ops);
  assert.equal((firstPage.body.instances as JsonObject[])[0]?.instanceId, theirsId);
  const cursor = firstPage.body.nextCursor as string;
  const secondPage = await call('GET', `/workflow-instances?limit=1&status=completed&cursor=${cursor}`, fixture.tokens.ops);
  assert.equal((secondPage.body.instances as JsonObject[])[0]?.instanceId, mineId, 'the cursor continues after the last row');

  assert.deepEqual((await call('GET', '/workflow-instances?stuck=true', fixture.tokens.ops)).body.instances, []);
  const bad = await call('GET', '/workflow-instances?status=done&color=red', fixture.tokens.alice);
  assert.equal(bad.status, 400);
  assert.match(String(bad.body.description), /status must be one of/);
  assert.match(String(bad.body.description), /unknown parameter "color"/);
  // What a refusal echoes is bounded, whatever a caller sends: each value to 256 characters, as the operations list's.
  const long = await call('GET', `/workflow-instances?limit=${'9'.repeat(4000)}&${'q'.repeat(4000)}=1`, fixture.tokens.alice);
  assert.equal(long.status, 400);
  assert.ok(String(long.body.description).length < 1024, `a ${String(long.body.description).length}-character description`);
  assert.equal((await call('GET', '/workflow-instances', undefined)).status, 401);

  assert.equal((await call('GET', `/workflow-instances/${mineId}/transitions`, fixture.tokens.bob)).status, 404, "another principal's instance is not found");
  for (const token of [fixture.tokens.alice, fixture.tokens.ops]) {
    const inspection = await call('GET', `/workflow-instances/${mineId}/transitions`, token);
    assert.equal(inspection.status, 200);
    assert.equal((inspection.body.instance as JsonObject).status, 'completed');
    assert.deepEqual(
      (inspection.body.children as JsonObject[]).map((c) => c.at),
      ['/do/0/review/do/0/invoke', '/do/1/publish/do/1/invoke'],
    );
    const timeline = inspection.body.timeline as JsonObject[];
    assert.equal((timeline[0]?.events as JsonObject[])[0]?.type, 'workflow-started');
    assert.ok((inspection.body.tasks as JsonObject[]).some((t) => t.name === 'review' && t.state === 'completed'));
  }
});

test('a child instance names its parent (view and index row), and the parent lists its children with their status; cancelling the parent cancels the child', async () => {
  const started = await start(fixture.tokens.alice, 'delegating', 'delegating-1', {}, 0);
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const parentId = started.body.instanceId as string;
  let parent = started.body as unknown as WorkflowInstance;
  for (let tries = 0; tries < 400 && parent.childInstances[0]?.status !== 'running'; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    parent = (await call('GET', `/workflow-instances/${parentId}`, fixture.tokens.alice)).body as unknown as WorkflowInstance;
  }
  assert.ok(checkInstance(parent), JSON.stringify(checkInstance.errors));
  assert.equal(parent.parent, null, 'a top-level instance has no parent');
  const [child] = parent.childInstances;
  assert.ok(child);
  assert.deepEqual({ ...child, instanceId: '' }, { at: '/do/0/delegate', instanceId: '', workflow: 'slow', status: 'running', disposition: null });

  const read = await call('GET', `/workflow-instances/${child.instanceId}`, fixture.tokens.alice);
  assert.equal(read.status, 202);
  assert.ok(checkInstance(read.body), JSON.stringify(checkInstance.errors));
  assert.deepEqual(read.body.parent, { instanceId: parentId, at: '/do/0/delegate' });
  assert.deepEqual(read.body.childInstances, []);
  // convoke workflow get draws the same links.
  assert.match(renderInstance(parent), new RegExp(`\\nchild +/do/0/delegate: ${child.instanceId} \\(slow\\) running\\n`));
  assert.match(renderInstance(read.body as unknown as WorkflowInstance), new RegExp(`\\nparent +${parentId} at /do/0/delegate\\n`));
  const rows = (await call('GET', '/workflow-instances?workflow=slow&status=running&limit=500', fixture.tokens.alice)).body.instances as JsonObject[];
  assert.deepEqual(
    rows.find((row) => row.instanceId === child.instanceId)?.parent,
    { instanceId: parentId, at: '/do/0/delegate' },
    'the child’s index row names its parent',
  );
  const parentRow = ((await call('GET', '/workflow-instances?workflow=delegating&limit=500', fixture.tokens.alice)).body.instances as JsonObject[]).find(
    (row) => row.instanceId === parentId,
  );
  assert.equal(parentRow?.parent, null);

  const cancelled = await call('POST', `/workflow-instances/${parentId}/cancel`, fixture.tokens.alice);
  assert.equal(cancelled.body.status, 'cancelled');
  let after = cancelled.body as unknown as WorkflowInstance;
  for (let tries = 0; tries < 400 && after.childInstances[0]?.status !== 'cancelled'; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    after = (await call('GET', `/workflow-instances/${parentId}`, fixture.tokens.alice)).body as unknown as WorkflowInstance;
  }
  assert.equal(after.childInstances[0]?.status, 'cancelled', 'the child was cancelled with its parent');
  await assertReplayEqual(parentId);
  await assertReplayEqual(child.instanceId);
});

test('an event stream whose client left while its first page was read holds none of its principal’s streams: later streams are not refused', async () => {
  const service = hosted.host.service;
  const list = service.list.bind(service);
  const server = hosted.server.app.server;
  const { hostname, port } = new URL(hosted.server.url);
  const request = `GET /workflow-instances/events HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${fixture.tokens.bob}\r\n\r\n`;
  try {
    // As many as the principal may hold: each client goes away before the stream's first page is read.
    for (let i = 0; i < eventStreamsPerPrincipalDefault; i++) {
      let entered!: () => void;
      let release!: () => void;
      let returned!: () => void;
      const reading = new Promise<void>((resolve) => (entered = resolve));
      const gate = new Promise<void>((resolve) => (release = resolve));
      const read = new Promise<void>((resolve) => (returned = resolve));
      service.list = async (principalId, query) => {
        entered();
        await gate;
        const page = await list(principalId, query);
        returned();
        return page;
      };
      const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
      const client = connect(Number(port), hostname);
      client.on('error', () => undefined);
      client.write(request);
      const socket = await accepted;
      await reading;
      const closed = once(socket, 'close');
      client.destroy();
      await closed;
      release();
      await read;
      await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    Reflect.deleteProperty(service, 'list');
  }
  const controller = new AbortController();
  try {
    const response = await fetch(`${hosted.server.url}/workflow-instances/events`, {
      headers: { authorization: `Bearer ${fixture.tokens.bob}` },
      signal: controller.signal,
    });
    assert.equal(response.status, 200, response.status === 200 ? '' : await response.text());
  } finally {
    controller.abort();
  }
});

test('an event stream whose refresh fails with a bug ends with an error event saying "internal error" in the words of a stream, never the bug’s message', async () => {
  const service = hosted.host.service;
  const list = service.list.bind(service);
  const bug = new SyntaxError('Unexpected token \'}\', "{"note":"alice-private"}" is not valid JSON (/var/lib/convoke/store.db)');
  let calls = 0;
  service.list = async (principalId, query) => {
    if (++calls > 1) throw bug;
    return list(principalId, query);
  };
  const reported: unknown[] = [];
  const consoleError = console.error;
  console.error = (...args: unknown[]) => void reported.push(...args);
  const controller = new AbortController();
  const events: { event: string; data: string }[] = [];
  try {
    const response = await fetch(`${hosted.server.url}/workflow-instances/events`, {
      headers: { authorization: `Bearer ${fixture.tokens.bob}` },
      signal: controller.signal,
    });
    assert.equal(response.status, 200);
    assert.ok(response.body);
    let started = false;
    for await (const block of sseBlocks(response.body)) {
      if (!block.startsWith(':')) events.push(sseEvent(block));
      // The first page is in: an append (any instance's) makes the stream read its page again.
      if (!started && events.length > 0) {
        started = true;
        await start(fixture.tokens.bob, 'slow', 'refresh-fails', {}, 0);
      }
    }
  } finally {
    controller.abort();
    console.error = consoleError;
    Reflect.deleteProperty(service, 'list');
  }
  assert.deepEqual(
    events.map((e) => e.event),
    ['page', 'error'],
  );
  const error = JSON.parse(events[1]?.data ?? '{}') as JsonObject;
  assert.equal(error.kind, 'unavailable');
  // In the words of a stream, not of an invocation.
  assert.match(String(error.description), /^internal error; this event stream stopped: open it again/);
  assert.doesNotMatch(events[1]?.data ?? '', /alice-private|\/var\/lib|invocation outcome/);
  assert.ok(reported.includes(bug), 'the bug is reported to the server’s onInternalError');
});

test("a bug's 500 on each workflow route says what is unknown about the workflow instance, never the invocation's words nor the bug's message", async () => {
  const service = hosted.host.service;
  const bug = new TypeError('cannot read properties of undefined (reading "alice-private")');
  const methods = ['start', 'get', 'cancel', 'list'] as const;
  for (const method of methods) Object.defineProperty(service, method, { value: async () => Promise.reject(bug), configurable: true, writable: true });
  const consoleError = console.error;
  console.error = () => {};
  try {
    const instanceId = workflowInstanceId('bob', fixture.bundle.digest, 'slow', 'bug-routes');
    const answers = {
      start: await start(fixture.tokens.bob, 'slow', 'bug-routes', {}),
      get: await call('GET', `/workflow-instances/${instanceId}`, fixture.tokens.bob),
      cancel: await call('POST', `/workflow-instances/${instanceId}/cancel`, fixture.tokens.bob, {}),
      list: await call('GET', '/workflow-instances', fixture.tokens.bob),
    };
    for (const [route, answer] of Object.entries(answers)) {
      assert.equal(answer.status, 500, `${route}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.kind, 'unavailable');
      assert.match(String(answer.body.description), /^internal error; .*workflow instance/, route);
      assert.doesNotMatch(String(answer.body.description), /invocation outcome|alice-private/, route);
    }
    assert.match(String(answers.start.body.description), /start it again with the same invocationKey/);
    assert.match(String(answers.cancel.body.description), /cancelled is unknown/);
  } finally {
    console.error = consoleError;
    for (const method of methods) Reflect.deleteProperty(service, method);
  }
});

/** A workflow of `steps` waits of `pauseMs` each, after a first wait of `firstMs` (time to open a stream). */
function pausing(name: string, steps: number, pauseMs: number, firstMs: number): JsonObject {
  return {
    document: { dsl: '1.0.3', namespace: 'lab', name, version: '1.0.0' },
    do: [
      { first: { wait: { milliseconds: firstMs } } },
      { each: { for: { in: `\${ [range(0; ${steps})] }`, each: 'i' }, do: [{ pause: { wait: { milliseconds: pauseMs } } }] } },
    ],
  };
}

/** Starts an instance of `workflow` with a `padBytes` input (every task execution carries it as its input); its id. */
async function startPadded(served: HostedWorkflows, own: WorkflowFixture, workflow: string, padBytes = 4000): Promise<string> {
  const started = await fetch(`${served.server.url}/workflow-instances`, {
    method: 'POST',
    headers: { authorization: `Bearer ${own.tokens.alice}`, 'content-type': 'application/json' },
    body: JSON.stringify({ bundle: { ...own.bundle }, workflow, invocationKey: `${workflow}-1`, input: { pad: 'x'.repeat(padBytes) }, waitMs: 0 }),
  });
  return ((await started.json()) as WorkflowInstance).instanceId;
}

async function transitionsOf(served: HostedWorkflows, own: WorkflowFixture, instanceId: string): Promise<WorkflowInspection> {
  const read = await fetch(`${served.server.url}/workflow-instances/${instanceId}/transitions`, { headers: { authorization: `Bearer ${own.tokens.alice}` } });
  return (await read.json()) as WorkflowInspection;
}

test(
  'an instance of many steps followed live: each update carries what its transitions changed, never the steps before; snapshot and updates rebuild /transitions',
  { timeout: 60_000 },
  async () => {
    const steps = 60;
    const own = await writeWorkflowFixture({ bundleWorkflows: { stepping: pausing('stepping', steps, 15, 300) } });
    const served = await serveWorkflowFixture(own);
    const controller = new AbortController();
    try {
      const instanceId = await startPadded(served, own, 'stepping');
      const response = await fetch(`${served.server.url}/workflow-instances/${instanceId}/events`, {
        headers: { authorization: `Bearer ${own.tokens.alice}` },
        signal: controller.signal,
      });
      assert.equal(response.status, 200);
      assert.ok(response.body);
      let followed: Followed<WorkflowInspection> | undefined;
      let fresh: WorkflowInspection | undefined;
      // Per update: its bytes, its transitions, how many loop steps had started before it, and whether it ended the instance.
      const updates: { bytes: number; transitions: number; before: number; ended: boolean }[] = [];
      for await (const block of sseBlocks(response.body)) {
        if (block.startsWith(':')) continue;
        const { event, data } = sseEvent(block);
        const before = followed?.state.tasks.filter((t) => t.name === 'pause').length ?? 0;
        followed = followWorkflow(followed, event, JSON.parse(data) as JsonObject);
        const transitions = (JSON.parse(data) as { timeline: unknown[] }).timeline.length;
        if (event === 'update') updates.push({ bytes: Buffer.byteLength(data), transitions, before, ended: followed.state.instance.status !== 'running' });
        if (followed.state.instance.status !== 'completed') continue;
        // Ended: once what was followed holds every transition stored, it must be what a fresh read answers.
        fresh = await transitionsOf(served, own, instanceId);
        if (fresh.timeline.length === followed.state.timeline.length) break;
      }
      assert.ok(followed && fresh);
      assert.deepEqual(followed.state, fresh, 'the snapshot with every update applied is the instance as /transitions answers it');
      assert.equal(followed.state.tasks.filter((t) => t.name === 'pause').length, steps);
      // The bytes per transition of an update late in the run are those of one early in it: no update carries the steps before it
      // (the last one, which ends the instance, carries its output and the ends of the loop as well).
      const perTransition = (u: { bytes: number; transitions: number }) => u.bytes / Math.max(1, u.transitions);
      const early = updates.filter((u) => u.before >= 1 && u.before <= 5);
      const late = updates.filter((u) => u.before >= steps - 5 && !u.ended);
      assert.ok(early.length > 0 && late.length > 0, JSON.stringify(updates));
      const earlyMax = Math.max(...early.map(perTransition));
      const lateMax = Math.max(...late.map(perTransition));
      assert.ok(lateMax <= earlyMax + 1024, `an update after step ${steps - 5} carries ${lateMax} bytes per transition, after step 5 ${earlyMax}`);
      const total = updates.reduce((sum, u) => sum + u.bytes, 0);
      assert.ok(total <= followed.state.timeline.length * 2 * earlyMax, `${total} bytes of updates for ${followed.state.timeline.length} transitions`);
    } finally {
      controller.abort();
      await served.close();
      await own.dispose();
    }
  },
);

test(
  'a stream whose log no longer continues what it sent sends a new snapshot, and numbers the updates after it from 1 again',
  { timeout: 60_000 },
  async () => {
    const service = hosted.host.service;
    const started = await start(fixture.tokens.alice, 'review-then-publish', 'diverged-1', { document: 'RFC 50' }, 10_000);
    const instanceId = started.body.instanceId as string;
    const first = await service.inspect('alice', instanceId);
    const update = (revision: string): WorkflowInspectionUpdate => ({ revision, tasks: [], timers: [], children: [], timeline: [] });
    const answers = [
      { kind: 'update' as const, update: update('r1') },
      { kind: 'snapshot' as const, inspection: { ...first, timeline: first.timeline.slice(0, 1) } },
      { kind: 'update' as const, update: update('r2') },
    ];
    service.inspectLive = async () => ({ first, next: async () => answers.shift() });
    // Appends noticed: one run each, every 20 ms.
    service.followInstance = async (_instanceId, listener) => {
      const timer = setInterval(() => listener(), 20);
      return { close: async () => clearInterval(timer) };
    };
    const controller = new AbortController();
    const events: { event: string; data: JsonObject }[] = [];
    try {
      const response = await fetch(`${hosted.server.url}/workflow-instances/${instanceId}/events`, {
        headers: { authorization: `Bearer ${fixture.tokens.alice}` },
        signal: controller.signal,
      });
      assert.ok(response.body);
      for await (const block of sseBlocks(response.body)) {
        if (block.startsWith(':')) continue;
        const { event, data } = sseEvent(block);
        events.push({ event, data: JSON.parse(data) as JsonObject });
        if (events.length === 4) break;
      }
    } finally {
      controller.abort();
      Reflect.deleteProperty(service, 'inspectLive');
      Reflect.deleteProperty(service, 'followInstance');
    }
    assert.deepEqual(
      events.map((e) => [e.event, e.data.seq, e.data.revision]),
      [
        ['snapshot', undefined, undefined],
        ['update', 1, 'r1'],
        ['snapshot', undefined, undefined],
        ['update', 1, 'r2'],
      ],
    );
    assert.equal((events[2]?.data.timeline as JsonObject[]).length, 1, 'the new snapshot is the whole inspection as read again');
  },
);

test(
  'an event stream whose client does not read holds at most one event it could not deliver; once the client reads, every transition arrives once, in order, and the updates rebuild /transitions',
  { timeout: 60_000 },
  async () => {
    // Each of its 60 one-millisecond pauses appends; each task execution carries the 50 KB input, so an update is some 150 KB
    // and the connection's buffers fill long before the end.
    const own = await writeWorkflowFixture({ bundleWorkflows: { churn: pausing('churn', 60, 1, 500) } });
    const served = await serveWorkflowFixture(own);
    const headers = { authorization: `Bearer ${own.tokens.alice}` };
    let response: IncomingMessage | undefined;
    try {
      const instanceId = await startPadded(served, own, 'churn', 50_000);
      const { hostname, port } = new URL(served.server.url);
      const accepted = new Promise<Socket>((resolve) => served.server.app.server.once('connection', resolve));
      // A client that never reads: node:http stops reading the socket once the response's buffer is full.
      response = await new Promise<IncomingMessage>((resolve, reject) =>
        get({ hostname, port, path: `/workflow-instances/${instanceId}/events`, headers, agent: false }, resolve).on('error', reject),
      );
      assert.equal(response.statusCode, 200);
      const socket = await accepted;
      let status = 'running';
      for (let tries = 0; status === 'running' && tries < 20; tries++) {
        const read = await fetch(`${served.server.url}/workflow-instances/${instanceId}?waitMs=5000`, { headers });
        status = ((await read.json()) as WorkflowInstance).status;
      }
      assert.equal(status, 'completed');
      await new Promise((resolve) => setTimeout(resolve, 300));
      const fresh = await transitionsOf(served, own, instanceId);
      assert.ok(socket.writableLength < 4 * 1024 * 1024, `the server holds ${socket.writableLength} bytes the client has not read`);

      const indexes: number[] = [];
      let followed: Followed<WorkflowInspection> | undefined;
      response.setEncoding('utf8');
      for await (const block of sseBlocks(response as AsyncIterable<string>)) {
        if (block.startsWith(':')) continue;
        const { event, data } = sseEvent(block);
        followed = followWorkflow(followed, event, JSON.parse(data) as JsonObject);
        indexes.push(...(JSON.parse(data) as { timeline: { index: number }[] }).timeline.map((t) => t.index));
        if (indexes.length >= fresh.timeline.length) break;
      }
      assert.deepEqual(
        indexes,
        fresh.timeline.map((_, i) => i),
        'every transition, once, in order',
      );
      assert.deepEqual(followed?.state, fresh, 'the snapshot with every update applied is the instance as /transitions answers it');
    } finally {
      response?.destroy();
      await served.close();
      await own.dispose();
    }
  },
);

test('every follower of workflow instances shares one store watch, opened with the first and closed with the last', async () => {
  const store = hosted.deployment.store;
  const watch = store.watch.bind(store);
  let opened = 0;
  let closed = 0;
  store.watch = async (listener) => {
    opened++;
    const watching = await watch(listener);
    return { close: async () => (closed++, await watching.close()) };
  };
  const service = hosted.host.service;
  const key = 'shared-watch-1';
  const instanceId = workflowInstanceId('alice', fixture.bundle.digest, 'review-then-publish', key);
  const notices = { instance: 0, other: 0, all: 0 };
  try {
    const followers = [
      await service.followInstance(instanceId, () => notices.instance++),
      await service.followInstance(workflowInstanceId('alice', fixture.bundle.digest, 'review-then-publish', 'never-started'), () => notices.other++),
      await service.followInstances(() => notices.all++),
    ];
    assert.equal((await start(fixture.tokens.alice, 'review-then-publish', key, { document: 'RFC 51' }, 10_000)).body.status, 'completed');
    // The instance's appends reach its followers and the followers of all; none reaches another instance's.
    for (let waited = 0; notices.instance < 2 && waited < 2_000; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(notices.instance >= 2 && notices.all >= notices.instance, JSON.stringify(notices));
    assert.equal(notices.other, 0);
    assert.deepEqual({ opened, closed }, { opened: 1, closed: 0 });
    for (const follower of followers) await follower.close();
    assert.deepEqual({ opened, closed }, { opened: 1, closed: 1 });
  } finally {
    store.watch = watch;
  }
});

test('POST /contract-invocations and POST /workflow-instances take an input as deep as admission does (the body one level deeper); one level more is 400 invalid-input naming the depth', async () => {
  const nested = (levels: number): JsonObject => {
    let value: JsonObject = {};
    for (let level = 1; level < levels; level++) value = { a: value };
    return value;
  };
  const publishBundle = { ...fixture.bundle };
  // {approvals, deep: …} is one level: `deep` holds one less than the input.
  const invoke = (invocationKey: string, levels: number) =>
    call('POST', '/contract-invocations', fixture.tokens.alice, {
      contract: publishBundle,
      interaction: 'publish',
      invocationKey,
      input: { approvals: 2, deep: nested(levels - 1) },
      waitMs: 10_000,
    });
  const invoked = await invoke('deepest-http-input', limits.jsonDepthMax);
  assert.equal(invoked.status, 200, JSON.stringify(invoked.body).slice(0, 400));
  assert.equal((invoked.body.decision as JsonObject).outcome, 'success');
  const refused = await invoke('too-deep-http-input', limits.jsonDepthMax + 1);
  assert.deepEqual([refused.status, refused.body.kind], [400, 'invalid-input']);
  assert.match(refused.body.description as string, /request body: the value at \/input nests deeper than 64 at \/input\/deep\/a\//);

  const started = await start(fixture.tokens.alice, 'slow', 'deepest-http-start', nested(limits.jsonDepthMax));
  assert.equal(started.status, 202, JSON.stringify(started.body).slice(0, 400));
  assert.equal((await call('POST', `/workflow-instances/${started.body.instanceId as string}/cancel`, fixture.tokens.alice)).status, 200);
  const tooDeep = await start(fixture.tokens.alice, 'slow', 'too-deep-http-start', nested(limits.jsonDepthMax + 1));
  assert.deepEqual([tooDeep.status, tooDeep.body.kind], [400, 'invalid-input']);
  assert.match(tooDeep.body.description as string, /request body: the value at \/input nests deeper than 64 at \/input\/a\//);
  // Every other route reads its body to the limit itself: a body there holds no value below it.
  const other = await call('POST', `/workflow-instances/${started.body.instanceId as string}/cancel`, fixture.tokens.alice, nested(limits.jsonDepthMax + 1));
  assert.deepEqual([other.status, other.body.kind], [400, 'invalid-input']);
  assert.match(other.body.description as string, /request body: nesting deeper than 64 at \/a\//);
});

test('a workflow named constructor, a name every object inherits, is answered whole: its cancellation none, as the bundle does not declare it, and its cancel 422', async () => {
  const named = await writeWorkflowFixture({
    bundleWorkflows: {
      constructor: { document: { dsl: '1.0.3', namespace: 'lab', name: 'constructor', version: '1.0.0' }, do: [{ pause: { wait: { seconds: 60 } } }] },
    },
  });
  const served = await serveWorkflowFixture(named);
  try {
    const response = await fetch(`${served.server.url}/workflow-instances`, {
      method: 'POST',
      headers: { authorization: `Bearer ${named.tokens.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ bundle: named.bundle, workflow: 'constructor', invocationKey: 'inherited', input: {} }),
    });
    const instance = (await response.json()) as WorkflowInstance;
    assert.equal(response.status, 202, JSON.stringify(instance));
    assert.ok(checkInstance(instance), `the answer is a WorkflowInstance: ${JSON.stringify(checkInstance.errors)}`);
    assert.equal(instance.cancellation, 'none');
    const cancel = await fetch(`${served.server.url}/workflow-instances/${instance.instanceId}/cancel`, {
      method: 'POST',
      headers: { authorization: `Bearer ${named.tokens.alice}` },
    });
    assert.equal(cancel.status, 422);
  } finally {
    await served.close();
    await named.dispose();
  }
});
