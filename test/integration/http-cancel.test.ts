/**
 * POST /contract-invocations/{operationId}/cancel: the invoker cancels an operation whose
 * interaction declares caller cancellation (decision failed/cancelled); 422 unsupported where it
 * does not; 404 for another principal's operation; 401 without a credential; 200 on a log filled
 * past its closing room by another writer (the budget never refuses a closing); the route is in the
 * OpenAPI document. Through `inject` and once over a real socket.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { describeErrors } from '../../src/contract/validation.js';
import { checkErrorShape, checkResultShape } from '../../src/http/schemas.js';
import { limits } from '../../src/contract/limits.js';
import type { Transition } from '../../src/events/types.js';
import { transitionBytes } from '../../src/runtime/log-budget.js';
import { buildFixtureApp, requestBody, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';

let fixture: HttpFixture;
let built: Awaited<ReturnType<typeof buildFixtureApp>>;

before(async () => {
  fixture = await writeHttpFixture();
  built = await buildFixtureApp(fixture);
});

after(async () => {
  await built?.close();
  await fixture?.dispose();
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

async function invoke(interaction: string): Promise<string> {
  const response = await built.http.app.inject({
    method: 'POST',
    url: '/contract-invocations',
    headers: auth(fixture.tokens.alice),
    payload: requestBody(fixture, { interaction }),
  });
  assert.ok(response.statusCode === 200 || response.statusCode === 202, response.body);
  return (response.json() as { operationId: string }).operationId;
}

const cancel = (operationId: string, token?: string) =>
  built.http.app.inject({ method: 'POST', url: `/contract-invocations/${operationId}/cancel`, headers: token === undefined ? {} : auth(token) });

test('the invoker cancels an open operation of an interaction that declares caller cancellation: 200, failed (cancelled)', async () => {
  const operationId = await invoke('stoppable');
  const response = await cancel(operationId, fixture.tokens.alice);
  assert.equal(response.statusCode, 200, response.body);
  const result = response.json() as { decision: { outcome: string; reason: string } | null };
  assert.ok(checkResultShape(result), describeErrors(checkResultShape.errors));
  assert.deepEqual([result.decision?.outcome, result.decision?.reason], ['failed', 'cancelled']);
  // Cancelling again changes nothing: the decision stays as it closed.
  const again = await cancel(operationId, fixture.tokens.alice);
  assert.equal(again.statusCode, 200);
  assert.equal((again.json() as { decision: { reason: string } }).decision.reason, 'cancelled');
});

test('cancel on an interaction without caller cancellation is 422 unsupported, and the operation carries on', async () => {
  const operationId = await invoke('review');
  const response = await cancel(operationId, fixture.tokens.alice);
  assert.equal(response.statusCode, 422, response.body);
  const body = response.json() as { kind: string; description: string };
  assert.ok(checkErrorShape(body));
  assert.equal(body.kind, 'unsupported');
  assert.match(body.description, /caller cancellation/);
});

test("cancel of another principal's operation is 404, of an unknown one 404, without a credential 401", async () => {
  const operationId = await invoke('stoppable');
  assert.equal((await cancel(operationId, fixture.tokens.bob)).statusCode, 404);
  assert.equal((await cancel(`op${'0'.repeat(64)}`, fixture.tokens.alice)).statusCode, 404);
  assert.equal((await cancel(operationId)).statusCode, 401);
  // Still open for its owner after all that.
  const current = await built.http.app.inject({ method: 'GET', url: `/contract-invocations/${operationId}`, headers: auth(fixture.tokens.alice) });
  assert.equal((current.json() as { decision: unknown }).decision, null);
});

test('the OpenAPI document describes the cancel route with its 200 and 422 answers, and no 202: a cancel that returns has closed the decision', async () => {
  const document = (await built.http.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
    paths: Record<string, { post?: { responses: Record<string, unknown> } }>;
  };
  const route = document.paths['/contract-invocations/{operationId}/cancel']?.post;
  assert.ok(route, 'the cancel route is documented');
  for (const status of ['200', '401', '404', '422']) assert.ok(route.responses[status], `documents ${status}`);
  assert.equal(route.responses['202'], undefined);
  const workflowCancel = document.paths['/workflow-instances/{instanceId}/cancel']?.post;
  if (workflowCancel) assert.equal(workflowCancel.responses['202'], undefined);
});

/**
 * Appends rejections of about 4 KB straight to the store, as an earlier writer under larger
 * budgets would have, until the operation's log has no room left for a closing transition.
 */
async function fillPastClosingRoom(operationId: string, branches: number): Promise<void> {
  const store = built.deployment.store;
  const read = await store.read(operationId);
  assert.ok(read.kind === 'ok');
  let revision = read.revision;
  let bytes = read.transitions.reduce((sum, stored) => sum + transitionBytes(stored.transition), 0);
  for (let k = 0; bytes <= limits.recordBytesMax - branches * limits.closingBytesPerBranch; k++) {
    const transition: Transition = {
      events: [
        {
          type: 'result-rejected',
          v: 1,
          reason: 'malformed',
          subject: `demo.v1.lab.stoppable.${operationId}.result.alfa`,
          branchId: null,
          peerId: null,
          attempt: null,
          fence: null,
          detail: `filler ${k} `.padEnd(4000, '.'),
        },
      ],
      timeGuard: { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER },
      causation: { command: 'admit-result' },
    };
    const outcome = await store.append(operationId, revision, transition);
    assert.ok(outcome.kind === 'ok', JSON.stringify(outcome));
    revision = outcome.revision;
    bytes += transitionBytes(transition);
  }
}

test("a cancel on a log another writer filled past this process's closing room closes the operation: 200, failed (cancelled); the budget never refuses a closing", async () => {
  const operationId = await invoke('stoppable');
  // alfa's and bravo's results first (zulu never answers): arriving later, one would close the operation for its budget.
  for (;;) {
    const current = await built.http.app.inject({ method: 'GET', url: `/contract-invocations/${operationId}`, headers: auth(fixture.tokens.alice) });
    const view = current.json() as { branches: { status: string }[] };
    if (view.branches.filter((b) => b.status !== 'pending').length === 2) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await fillPastClosingRoom(operationId, 3);
  const response = await cancel(operationId, fixture.tokens.alice);
  assert.equal(response.statusCode, 200, response.body);
  const result = response.json() as { decision: { outcome: string; reason: string } | null };
  assert.ok(checkResultShape(result), describeErrors(checkResultShape.errors));
  assert.deepEqual([result.decision?.outcome, result.decision?.reason], ['failed', 'cancelled']);
  // Asked again, the decision as it closed.
  const again = await cancel(operationId, fixture.tokens.alice);
  assert.equal(again.statusCode, 200, again.body);
  assert.equal((again.json() as { decision: { reason: string } }).decision.reason, 'cancelled');
});

test('cancel over a real socket', async () => {
  const operationId = await invoke('stoppable');
  const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
  const response = await request(`${address}/contract-invocations/${operationId}/cancel`, { method: 'POST', headers: auth(fixture.tokens.alice) });
  const body = (await response.body.json()) as { decision: { reason: string } };
  assert.equal(response.statusCode, 200);
  assert.equal(body.decision.reason, 'cancelled');
});
