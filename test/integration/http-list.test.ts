/**
 * GET /contract-invocations over a real socket, `convoke serve` as a child process on a SQLite
 * store: two callers each see only their own operations, an operator principal declared in the
 * config sees all, every parameter is checked with an invalid-input description, the cursor
 * pages through each operation once while others are admitted between pages, and the stuck
 * gauge is served at /metrics.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Agent, request } from 'undici';
import { describeErrors } from '../../src/contract/validation.js';
import { checkErrorShape, checkListPageShape } from '../../src/http/schemas.js';
import { requestBody, sha256Hex, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';
import { startServe, type ServeProcess } from '../support/http-server.js';

const agent = new Agent({ keepAliveTimeout: 2_000, connections: 8 });
let fixture: HttpFixture;
let serve: ServeProcess;
const operatorToken = `ops-${randomBytes(16).toString('hex')}`;
const admitted: Record<'alice' | 'bob', string[]> = { alice: [], bob: [] };

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tests read whatever JSON the server answered
async function call(method: 'GET' | 'POST', path: string, token: string | undefined, body?: object): Promise<{ status: number; body: any; text: string }> {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await request(`${serve.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), dispatcher: agent });
  const text = await response.body.text();
  return { status: response.statusCode, body: text.length > 0 && text.startsWith('{') ? JSON.parse(text) : undefined, text };
}

async function invoke(who: 'alice' | 'bob'): Promise<string> {
  const reply = await call('POST', '/contract-invocations', fixture.tokens[who], requestBody(fixture, { waitMs: 5_000 }));
  assert.ok(reply.status === 200 || reply.status === 202, reply.text);
  return reply.body.operationId as string;
}

async function list(
  token: string,
  query = '',
): Promise<{ operations: { operationId: string; principalId: string; phase: string; stuck: string[] }[]; nextCursor: string | null }> {
  const reply = await call('GET', `/contract-invocations${query}`, token);
  assert.equal(reply.status, 200, reply.text);
  assert.ok(checkListPageShape(reply.body), `page shape: ${describeErrors(checkListPageShape.errors)}`);
  return reply.body;
}

before(async () => {
  fixture = await writeHttpFixture({ store: 'sqlite:ops.db', peerDelayMs: 20 });
  const config = JSON.parse(await readFile(fixture.configPath, 'utf8'));
  config.http.principals.push({ principalId: 'ops', tokenSha256: sha256Hex(operatorToken) });
  config.operators = ['ops'];
  await writeFile(join(fixture.dir, 'convoke.json'), JSON.stringify(config, null, 2));
  serve = await startServe(fixture.configPath);
  for (let i = 0; i < 3; i++) admitted.alice.push(await invoke('alice'));
  for (let i = 0; i < 2; i++) admitted.bob.push(await invoke('bob'));
});

after(async () => {
  await serve?.stop();
  await fixture?.dispose();
  await agent.close();
});

test("each caller lists only its own operations; the operator lists every principal's", async () => {
  const alice = await list(fixture.tokens.alice);
  assert.deepEqual(new Set(alice.operations.map((o) => o.operationId)), new Set(admitted.alice));
  assert.ok(alice.operations.every((o) => o.principalId === 'alice'));
  const bob = await list(fixture.tokens.bob);
  assert.deepEqual(new Set(bob.operations.map((o) => o.operationId)), new Set(admitted.bob));
  const ops = await list(operatorToken);
  assert.deepEqual(new Set(ops.operations.map((o) => o.operationId)), new Set([...admitted.alice, ...admitted.bob]));
  const newestFirst = ops.operations.map((o) => o.operationId);
  assert.deepEqual(newestFirst.slice(0, 2).sort(), [...admitted.bob].sort(), 'bob admitted last: listed first');
  const interaction = await list(operatorToken, '?interaction=careful');
  assert.equal(interaction.operations.length, 0);
  const decided = await list(fixture.tokens.alice, '?outcome=success&phase=closed&settlement=pending&limit=10');
  for (const o of decided.operations) assert.equal(o.phase, 'closed');
});

test('the cursor pages through every operation once while others are admitted between pages', async () => {
  const before = new Set((await list(operatorToken, '?limit=500')).operations.map((o) => o.operationId));
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page = await list(operatorToken, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    seen.push(...page.operations.map((o) => o.operationId));
    cursor = page.nextCursor;
    await invoke('alice');
  } while (cursor !== null);
  const old = seen.filter((id) => before.has(id));
  assert.equal(new Set(old).size, old.length, 'no duplicates');
  assert.deepEqual(new Set(old), before, 'no gaps');
});

test('every parameter is checked: one invalid-input description per problem; no credential is 401', async () => {
  const reply = await call('GET', '/contract-invocations?phase=nope&limit=501&stuck=maybe&cursor=x&until=tomorrow&colour=red', fixture.tokens.alice);
  assert.equal(reply.status, 400, reply.text);
  const error = reply.body as { kind: string; description: string };
  assert.ok(checkErrorShape(error));
  assert.equal(error.kind, 'invalid-input');
  for (const fragment of [
    'phase must be one of',
    'limit must be an integer from 1 to 500',
    'stuck must be',
    'cursor is not one',
    'until must be',
    'unknown parameter "colour"',
  ]) {
    assert.ok(error.description.includes(fragment), `${fragment} in ${error.description}`);
  }
  const twice = await call('GET', '/contract-invocations?phase=active&phase=closed', fixture.tokens.alice);
  assert.equal(twice.status, 400, twice.text);
  const reversed = await call('GET', '/contract-invocations?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z', fixture.tokens.alice);
  assert.equal(reversed.status, 400);
  assert.match(reversed.body.description, /since must be before until/);
  assert.equal((await call('GET', '/contract-invocations', undefined)).status, 401);
  assert.equal((await call('GET', '/contract-invocations', 'not-a-known-token')).status, 401);
  const stuck = await list(operatorToken, '?stuck=true');
  assert.equal(stuck.operations.length, 0, 'nothing is stuck');
});

test('the stuck gauge is served per reason; the OpenAPI document lists the operation', async () => {
  const metrics = await call('GET', '/metrics', undefined);
  for (const reason of ['open-past-deadline', 'lease-expired', 'outbox-pending', 'settlement-indeterminate'])
    assert.match(metrics.text, new RegExp(`convoke_operations_stuck\\{reason="${reason}"\\} 0`));
  const openapi = await call('GET', '/openapi.json', undefined);
  assert.equal(openapi.body.paths['/contract-invocations'].get.operationId, 'listInvocations');
});
