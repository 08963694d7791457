/**
 * The HTTP facade in process, through `app.inject`: status mapping, the strict body parser, the
 * boundary rules, authentication (static tokens and JWT), and the deployment config checks.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { loadBundle } from '../../src/contract/bundle.js';
import { operationId as deriveOperationId } from '../../src/contract/ids.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { checkErrorShape, checkResultShape } from '../../src/http/schemas.js';
import { describeErrors } from '../../src/contract/validation.js';
import { effectiveBoundary } from '../../src/http/wait.js';
import { buildDeployment, eventDeliveriesMaxDefault, eventStreamsMaxDefault, parseDeploymentConfig, totalOf } from '../../src/deployment/config.js';
import { limits } from '../../src/contract/limits.js';
import { waitsMaxDefault } from '../../src/runtime/wait-slots.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { SystemClock } from '../../src/contract/clock.js';
import { buildFixtureApp, fixtureBundle, requestBody, storedOperationIds, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import { sseBlocks, sseEvent } from '../support/sse.js';
import type { NatsTransportConfig } from '../../src/deployment/types.js';
import type { CloudEventIntake } from '../../src/contract/cloudevents.js';
import { openApiDocument } from '../../src/http/openapi.js';

type Built = Awaited<ReturnType<typeof buildFixtureApp>>;

function errorBody(response: { statusCode: number; body: string }, status: number): { kind: string; description?: string } {
  assert.equal(response.statusCode, status, response.body);
  const body = JSON.parse(response.body) as { kind: string; description?: string };
  assert.ok(checkErrorShape(body), `AdapterError shape: ${describeErrors(checkErrorShape.errors)} in ${response.body}`);
  return body;
}

function resultBody(response: { statusCode: number; body: string }, status: number) {
  assert.equal(response.statusCode, status, response.body);
  const body = JSON.parse(response.body);
  assert.ok(checkResultShape(body), `InvocationResult shape: ${describeErrors(checkResultShape.errors)}`);
  return body as { operationId: string; decision: { outcome: string } | null; phase: string; settlement: { status: string }; invocationKey: string };
}

describe('HTTP facade (inject)', () => {
  let fixture: HttpFixture;
  let built: Built;
  let headers: Record<string, string>;
  const post = (payload: unknown, extra: Record<string, string> = {}) =>
    built.http.app.inject({
      method: 'POST',
      url: '/contract-invocations',
      headers: { ...headers, ...extra },
      payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
  const get = (path: string, token = fixture.tokens.alice) =>
    built.http.app.inject({ method: 'GET', url: path, headers: { authorization: `Bearer ${token}` } });

  before(async () => {
    fixture = await writeHttpFixture({ peerDelayMs: 100, bodyLimitBytes: 4096 });
    built = await buildFixtureApp(fixture);
    headers = { authorization: `Bearer ${fixture.tokens.alice}`, 'content-type': 'application/json' };
  });
  after(async () => {
    await built.close();
    await fixture.dispose();
  });

  test('POST reaches the decision within the wait: 200 with a schema-valid InvocationResult', async () => {
    const body = resultBody(await post(requestBody(fixture, { waitMs: 5000 })), 200);
    assert.equal(body.decision?.outcome, 'success');
  });

  test('waitMs 0 answers 202 with Location; GET with a wait then answers 200', async () => {
    const response = await post(requestBody(fixture, { waitMs: 0 }));
    const pending = resultBody(response, 202);
    assert.equal(pending.decision, null);
    assert.equal(response.headers.location, `/contract-invocations/${pending.operationId}`);
    const done = resultBody(await get(`/contract-invocations/${pending.operationId}?waitMs=5000`), 200);
    assert.equal(done.operationId, pending.operationId);
    assert.equal(done.decision?.outcome, 'success');
  });

  test('malformed JSON is 400 and creates nothing: duplicate keys, unsafe integers, lone surrogates', async () => {
    const before = (await storedOperationIds(built.deployment)).length;
    const valid = JSON.stringify(requestBody(fixture));
    const cases = [
      valid.replace('"interaction":"review"', '"interaction":"review","interaction":"sealed"'),
      valid.replace('{"document"', '{"document":"a","docu\\u006dent"'),
      valid.replace('}', ',"waitMs":9007199254740993}'),
      valid.replace('"RFC: adopt convoke"', '"\\ud800"'),
      valid.replace(/"invocationKey":"[^"]*"/, '"invocationKey":"\\udc00x"'),
      valid.slice(0, -1),
      '',
    ];
    for (const payload of cases) {
      const body = errorBody(await post(payload), 400);
      assert.equal(body.kind, 'invalid-input');
    }
    assert.equal((await storedOperationIds(built.deployment)).length, before);
  });

  test('schema errors are 400 and list every error', async () => {
    const body = errorBody(await post({ interaction: 7, invocationKey: '', input: {}, waitMs: -1, extra: true }), 400);
    for (const fragment of ["'contract'", '/interaction', '/invocationKey', '/waitMs', '"extra"'])
      assert.ok(body.description?.includes(fragment), `${fragment} in ${body.description}`);
  });

  test('non-JSON content types are 415; a missing content type too', async () => {
    const payload = JSON.stringify(requestBody(fixture));
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1']) {
      assert.equal(errorBody(await post(payload, { 'content-type': type }), 415).description, 'content-type must be application/json');
    }
    const bare = await built.http.app.inject({ method: 'POST', url: '/contract-invocations', headers: { authorization: headers.authorization! } });
    errorBody(bare, 415);
    resultBody(await post(payload, { 'content-type': 'application/json; charset=UTF-8' }), 202);
  });

  test('a content type naming its charset twice is 415 whichever comes first, and creates nothing: one reader would decode the body as UTF-8, another as the other', async () => {
    const before = (await storedOperationIds(built.deployment)).length;
    for (const type of [
      'application/json; charset=utf-8; charset=latin1',
      'application/json; charset=latin1; charset=utf-8',
      'application/json;charset=utf-8;CHARSET="utf-16"',
      'application/json; charset=utf-8; charset=utf-8',
    ]) {
      assert.match(errorBody(await post(JSON.stringify(requestBody(fixture)), { 'content-type': type }), 415).description ?? '', /one charset/, type);
    }
    assert.equal((await storedOperationIds(built.deployment)).length, before);
  });

  test('a body over the limit is 413', async () => {
    const big = requestBody(fixture, { input: { document: 'x'.repeat(5000) } });
    assert.equal(errorBody(await post(big), 413).description, 'body exceeds 4096 bytes');
  });

  test('401 without or with a wrong credential, same body', async () => {
    const missing = errorBody(
      await built.http.app.inject({ method: 'POST', url: '/contract-invocations', payload: '{}', headers: { 'content-type': 'application/json' } }),
      401,
    );
    const wrong = errorBody(await post(requestBody(fixture), { authorization: 'Bearer not-a-token' }), 401);
    const scheme = errorBody(await post(requestBody(fixture), { authorization: `Basic ${fixture.tokens.alice}` }), 401);
    assert.deepEqual(missing, { kind: 'denied', description: 'authentication required' });
    assert.deepEqual(wrong, missing);
    assert.deepEqual(scheme, missing);
  });

  test('403 denied by policy, 409 conflicting input, 422 undeployed contract', async () => {
    const bobHeaders = { authorization: `Bearer ${fixture.tokens.bob}` };
    assert.equal(errorBody(await post(requestBody(fixture, { interaction: 'restricted' }), bobHeaders), 403).kind, 'denied');
    const first = requestBody(fixture, { waitMs: 0 });
    resultBody(await post(first), 202);
    assert.equal(errorBody(await post({ ...first, input: { document: 'something else' } }), 409).kind, 'conflict');
    const undeployed = requestBody(fixture, { contract: { ...fixture.contract, digest: `sha256:${'0'.repeat(64)}` } });
    assert.equal(errorBody(await post(undeployed), 422).kind, 'unsupported');
  });

  test("a reused invocation key naming a different interaction is 409, and never reads the other interaction's operation at its weaker boundary", async () => {
    const key = `reused-${Date.now()}`;
    const sealed = resultBody(await post(requestBody(fixture, { interaction: 'sealed', invocationKey: key, waitMs: 0 })), 202);
    const reused = errorBody(await post(requestBody(fixture, { interaction: 'review', invocationKey: key, waitMs: 5000 })), 409);
    assert.equal(reused.kind, 'conflict');
    assert.match(reused.description ?? '', /interaction \("sealed"\)/);
    assert.ok(!JSON.stringify(reused).includes(sealed.operationId));
  });

  test('410 for an invocation key whose operation was tombstoned', async () => {
    // Another coordinator on the same store admits and the operator tombstones it; this one never cached it.
    const other = await createEmbedded({
      clock: new SystemClock(),
      bundle: fixtureBundle(),
      groups: { reviewers: ['alfa', 'bravo', 'charlie'] },
      store: built.deployment.store,
    });
    const body = requestBody(fixture, { waitMs: 0 });
    const { result } = await other.coordinator.invoke(
      { principalId: 'alice', senderPeerId: null },
      { contract: fixture.contract, interaction: 'review', invocationKey: body.invocationKey as string, input: body.input! },
    );
    await other.coordinator.close();
    assert.equal((await built.deployment.store.tombstone(result.operationId)).kind, 'ok');
    assert.equal(errorBody(await post(body), 410).kind, 'expired');
  });

  test('GET: another principal, an unknown id and a malformed id are all 404 with the same shape', async () => {
    const { operationId } = resultBody(await post(requestBody(fixture, { waitMs: 0 })), 202);
    const hidden = errorBody(await get(`/contract-invocations/${operationId}`, fixture.tokens.bob), 404);
    const unknownId = `op${'ab'.repeat(32)}`;
    const unknown = errorBody(await get(`/contract-invocations/${unknownId}`), 404);
    assert.deepEqual(hidden, { ...unknown, description: unknown.description!.replace(unknownId, operationId) });
    errorBody(await get('/contract-invocations/not-an-id'), 404);
  });

  test('waitFor: strengthening is honoured, weakening is 400 before any state exists', async () => {
    const strong = resultBody(await post(requestBody(fixture, { interaction: 'careful', waitFor: 'settled', waitMs: 1500 })), 202);
    assert.notEqual(strong.decision, null, 'the decision closed but settlement (cancel siblings) is still pending');
    assert.equal(strong.settlement.status, 'pending');
    const countBefore = (await storedOperationIds(built.deployment)).length;
    const weak = errorBody(await post(requestBody(fixture, { interaction: 'sealed', waitFor: 'decision' })), 400);
    assert.match(weak.description ?? '', /weaken/);
    assert.equal((await storedOperationIds(built.deployment)).length, countBefore);
    const sealed = resultBody(await post(requestBody(fixture, { interaction: 'sealed', waitFor: 'settled', waitMs: 5000 })), 200);
    assert.equal(sealed.phase, 'settled');
    errorBody(await get(`/contract-invocations/${sealed.operationId}?waitFor=decision`), 400);
    errorBody(await get(`/contract-invocations/${sealed.operationId}?waitMs=abc`), 400);
  });

  test('effectiveBoundary: the stronger boundary wins, weaker is refused', () => {
    assert.equal(effectiveBoundary(undefined, 'settled'), 'settled');
    assert.equal(effectiveBoundary('settled', 'decision'), 'settled');
    assert.equal(effectiveBoundary('decision', 'decision'), 'decision');
    assert.throws(
      () => effectiveBoundary('decision', 'settled'),
      (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input',
    );
  });

  test('operator routes: healthz, openapi.json from the same schemas (the routes of an app without workflow instances), metrics; unknown route 404', async () => {
    assert.deepEqual(JSON.parse((await built.http.app.inject({ url: '/healthz' })).body), { status: 'ok' });
    const doc = JSON.parse((await built.http.app.inject({ url: '/openapi.json' })).body);
    assert.equal(doc.openapi, '3.1.0');
    assert.deepEqual(Object.keys(doc.paths).sort(), [
      '/contract-invocations',
      '/contract-invocations/events',
      '/contract-invocations/{operationId}',
      '/contract-invocations/{operationId}/cancel',
      '/contract-invocations/{operationId}/events',
      '/contract-invocations/{operationId}/transitions',
      '/healthz',
      '/metrics',
      '/openapi.json',
    ]);
    assert.deepEqual(doc.components.schemas.InvocationRequest.required, ['contract', 'interaction', 'invocationKey', 'input']);
    for (const status of ['200', '202', '400', '401', '403', '409', '410', '413', '415', '422', '503'])
      assert.ok(doc.paths['/contract-invocations'].post.responses[status], status);
    const metrics = await built.http.app.inject({ url: '/metrics' });
    assert.match(metrics.headers['content-type'] as string, /^text\/plain/);
    assert.match(metrics.body, /convoke_admissions_total \d+/);
    assert.match(metrics.body, /convoke_http_responses_total\{method="POST",route="\/contract-invocations",status="400"\} \d+/);
    errorBody(await built.http.app.inject({ url: '/nowhere' }), 404);
    errorBody(await built.http.app.inject({ method: 'DELETE', url: '/contract-invocations' }), 404);
  });

  test('a query parameter given twice is refused naming it and saying so, not as a value of the wrong type', async () => {
    const operationId = `op${'ab'.repeat(32)}`;
    for (const path of [`/contract-invocations/${operationId}?waitMs=1&waitMs=2`, '/contract-invocations?limit=5&limit=6&phase=closed']) {
      const body = errorBody(await get(path), 400);
      assert.match(body.description ?? '', /^querystring: (waitMs|limit) is given more than once: give it once$/, path);
    }
  });

  test('/openapi.json names only the routes the app serves: none of the workflow instances without them, POST /workflow-events only with an event intake', async () => {
    /** Every `METHOD /path` the document names that the app answers "no route" (its parameters filled with ids of the right form). */
    const unserved = async (app: Built['http']['app']) => {
      const doc = JSON.parse((await app.inject({ url: '/openapi.json' })).body) as { paths: Record<string, Record<string, unknown>> };
      const missing: string[] = [];
      for (const [path, operations] of Object.entries(doc.paths))
        for (const method of Object.keys(operations)) {
          const url = path.replace('{operationId}', `op${'0'.repeat(64)}`).replace('{instanceId}', `wf${'0'.repeat(64)}`);
          const answer = await app.inject({ method: method.toUpperCase() as 'GET' | 'POST', url });
          if (answer.statusCode === 404 && /^no route /.test((JSON.parse(answer.body) as { description: string }).description))
            missing.push(`${method.toUpperCase()} ${path}`);
        }
      return { names: Object.keys(doc.paths), missing };
    };
    // This app was given no workflow instances and no event intake (createHttpApp's options).
    const plain = await unserved(built.http.app);
    assert.deepEqual(plain.missing, []);
    assert.ok(plain.names.includes('/contract-invocations'));
    const intake: CloudEventIntake = { deliver: () => Promise.reject(new Error('not delivered in this test')) };
    const withEvents = await buildFixtureApp(fixture, new SystemClock(), { workflowEvents: intake });
    try {
      const served = await unserved(withEvents.http.app);
      assert.deepEqual(served.missing, []);
      assert.ok(served.names.includes('/workflow-events'), 'an app with an event intake names POST /workflow-events');
    } finally {
      await withEvents.close();
    }
  });

  test('/openapi.json states one limit for every list: operations and workflow instances, pages and their event streams (1 to the maximum, 50 when absent)', () => {
    type Parameter = { name: string; schema: { minimum?: number; maximum?: number; default?: number } };
    const doc = openApiDocument({ workflows: true, workflowEvents: false }) as { paths: Record<string, { get?: { parameters?: Parameter[] } }> };
    const lists = ['/contract-invocations', '/contract-invocations/events', '/workflow-instances', '/workflow-instances/events'];
    for (const path of lists)
      assert.deepEqual(
        doc.paths[path]?.get?.parameters?.find((p) => p.name === 'limit')?.schema,
        { type: 'integer', minimum: 1, maximum: limits.listLimitMax, default: 50 },
        path,
      );
  });

  test('/openapi.json loads into a JSON Schema 2020-12 validator: every response schema compiles against its components', async () => {
    const doc = JSON.parse((await built.http.app.inject({ url: '/openapi.json' })).body) as {
      components: object;
      paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>>;
    };
    // OpenAPI 3.1 schemas are JSON Schema 2020-12; a client validates answers with the document's components as one resource.
    const ajv = new Ajv2020({ strict: false, allowUnionTypes: true });
    ajv.addSchema({ $id: 'https://client.example/openapi.json', components: doc.components });
    const anchored = (schema: object) => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"https://client.example/openapi.json#/components/'));
    let compiled = 0;
    for (const [path, operations] of Object.entries(doc.paths))
      for (const [method, operation] of Object.entries(operations))
        for (const [status, response] of Object.entries(operation.responses)) {
          const schema = response.content?.['application/json']?.schema;
          if (schema === undefined) continue;
          assert.doesNotThrow(() => ajv.compile(anchored(schema)), `${method.toUpperCase()} ${path} ${status}`);
          compiled++;
        }
    assert.ok(compiled > 50, `${compiled} response schemas`);
    const validate = ajv.getSchema('https://client.example/openapi.json#/components/schemas/InvocationResult');
    const answered = JSON.parse((await post(requestBody(fixture, { waitMs: 5000 }))).body);
    assert.ok(validate?.(answered), JSON.stringify(validate?.errors));
  });

  test('/openapi.json: every authenticated operation documents 401, 500 and 503, every other one 503 (a server shutting down answers every request so), and every error answer as an AdapterError body', async () => {
    type Operation = { security?: unknown[]; responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }> };
    const doc = JSON.parse((await built.http.app.inject({ url: '/openapi.json' })).body) as { paths: Record<string, Record<string, Operation>> };
    const problems: string[] = [];
    for (const [path, operations] of Object.entries(doc.paths))
      for (const [method, operation] of Object.entries(operations)) {
        const where = `${method.toUpperCase()} ${path}`;
        const authenticated = !(Array.isArray(operation.security) && operation.security.length === 0);
        for (const status of authenticated ? ['401', '500', '503'] : ['503']) if (!operation.responses[status]) problems.push(`${where}: no ${status}`);
        for (const [status, response] of Object.entries(operation.responses)) {
          // POST /workflow-events answers an event nothing took with its delivery, 404 no-match.
          if (Number(status) < 400 || (path === '/workflow-events' && status === '404')) continue;
          if (response.content?.['application/json']?.schema.$ref !== '#/components/schemas/AdapterError')
            problems.push(`${where}: ${status} without an AdapterError body`);
        }
      }
    assert.deepEqual(problems, []);
  });

  test('/openapi.json states the waitMs the routes take: up to its maximum (clamped to the deployment bound), one more is 400', async () => {
    type Parameter = { name: string; in: string; schema: { maximum?: number } };
    const doc = JSON.parse((await built.http.app.inject({ url: '/openapi.json' })).body) as {
      paths: Record<string, Record<string, { parameters?: Parameter[] }>>;
    };
    const stated = Object.entries(doc.paths).flatMap(([path, operations]) =>
      Object.entries(operations).flatMap(([method, operation]) =>
        (operation.parameters ?? []).filter((p) => p.name === 'waitMs').map((p) => ({ where: `${method} ${path}`, maximum: p.schema.maximum })),
      ),
    );
    assert.ok(
      stated.some(({ where }) => where === 'get /contract-invocations/{operationId}'),
      JSON.stringify(stated),
    );
    for (const { where, maximum } of stated) assert.equal(maximum, 999_999_999, where);
    const decided = resultBody(await post(requestBody(fixture, { waitMs: 5000 })), 200);
    // Decided already: the longest wait stated answers at once.
    assert.equal(resultBody(await get(`/contract-invocations/${decided.operationId}?waitMs=999999999`), 200).operationId, decided.operationId);
    assert.equal(errorBody(await get(`/contract-invocations/${decided.operationId}?waitMs=1000000000`), 400).kind, 'invalid-input');
  });

  test('same key, same input: the same operation, 200 once reached', async () => {
    const body = requestBody(fixture, { waitMs: 5000 });
    const a = resultBody(await post(body), 200);
    const b = resultBody(await post({ ...body, waitMs: 0 }), 200);
    assert.equal(a.operationId, b.operationId);
    assert.equal(a.operationId, deriveOperationId('alice', fixture.contract.digest, body.invocationKey as string));
  });

  test('after shutdown begins every request is 503 unavailable', async () => {
    const local = await buildFixtureApp(fixture);
    local.http.beginShutdown();
    const response = await local.http.app.inject({ url: '/healthz' });
    assert.equal(errorBody(response, 503).kind, 'unavailable');
    await local.close();
  });
});

type Sign = (claims: { sub?: string; aud?: string; exp?: number }) => Promise<string>;

/** A deployment accepting JWTs of https://issuer.test for audience convoke, and a signer of them. */
async function jwtApp(): Promise<{ fixture: HttpFixture; built: Built; sign: Sign }> {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  const fixture = await writeHttpFixture({ http: { jwt: { issuer: 'https://issuer.test', audience: 'convoke', jwksFile: 'jwks.json' } } });
  await writeFile(join(fixture.dir, 'jwks.json'), JSON.stringify({ keys: [jwk] }));
  const built = await buildFixtureApp(fixture);
  const sign: Sign = async ({ sub = 'carol', aud = 'convoke', exp }) =>
    new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setSubject(sub)
      .setIssuer('https://issuer.test')
      .setAudience(aud)
      .setIssuedAt()
      .setExpirationTime(exp ?? Math.floor(Date.now() / 1000) + 300)
      .sign(privateKey);
  return { fixture, built, sign };
}

const postAs = (built: Built, token: string, body: object) =>
  built.http.app.inject({
    method: 'POST',
    url: '/contract-invocations',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });

describe('HTTP facade with JWT principals (inject)', () => {
  let fixture: HttpFixture;
  let built: Built;
  let sign: Sign;

  before(async () => ({ fixture, built, sign } = await jwtApp()));
  after(async () => {
    await built.close();
    await fixture.dispose();
  });

  const post = (token: string, body: object) => postAs(built, token, body);

  test('a valid JWT authenticates jwt:<issuer>:<sub>, the JWT principal namespace; its operations are its own', async () => {
    const body = requestBody(fixture, { waitMs: 0 });
    const result = resultBody(await post(await sign({}), body), 202);
    assert.equal(result.operationId, deriveOperationId('jwt:https://issuer.test:carol', fixture.contract.digest, body.invocationKey as string));
    const asAlice = await built.http.app.inject({
      url: `/contract-invocations/${result.operationId}`,
      headers: { authorization: `Bearer ${fixture.tokens.alice}` },
    });
    errorBody(asAlice, 404);
  });

  test("a JWT whose sub equals a static principal id cannot read that principal's operation (404)", async () => {
    const body = requestBody(fixture, { waitMs: 0 });
    const alices = resultBody(await post(fixture.tokens.alice, body), 202);
    const asJwtAlice = await built.http.app.inject({
      url: `/contract-invocations/${alices.operationId}`,
      headers: { authorization: `Bearer ${await sign({ sub: 'alice' })}` },
    });
    errorBody(asJwtAlice, 404);
  });

  test('a JWT sub that cannot make a principal id (control characters, too long once prefixed) is 401', async () => {
    errorBody(await post(await sign({ sub: 'carol\u0000' }), requestBody(fixture)), 401);
    errorBody(await post(await sign({ sub: 'c'.repeat(256 - 'jwt:https://issuer.test:'.length + 1) }), requestBody(fixture)), 401);
    resultBody(await post(await sign({ sub: 'c'.repeat(256 - 'jwt:https://issuer.test:'.length) }), requestBody(fixture, { waitMs: 0 })), 202);
  });

  test('expired, wrong audience, or tampered JWTs are 401', async () => {
    const expired = await sign({ exp: Math.floor(Date.now() / 1000) - 60 });
    const wrongAudience = await sign({ aud: 'someone-else' });
    const good = await sign({});
    const tampered = good.slice(0, -4) + (good.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    for (const token of [expired, wrongAudience, tampered]) errorBody(await post(token, requestBody(fixture)), 401);
  });
});

describe('event streams with JWT principals (a socket)', () => {
  let fixture: HttpFixture;
  let built: Built;
  let sign: Sign;

  before(async () => ({ fixture, built, sign } = await jwtApp()));
  after(async () => {
    await built.close();
    await fixture.dispose();
  });

  test('event streams opened with a JWT end when it expires, with a denied error event: none outlives its credential', async () => {
    const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
    const expSeconds = Math.floor(Date.now() / 1000) + 3;
    const token = await sign({ exp: expSeconds });
    const { operationId } = resultBody(await postAs(built, token, requestBody(fixture, { waitMs: 0 })), 202);
    const follow = async (path: string) => {
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), expSeconds * 1000 - Date.now() + 4000);
      const blocks: string[] = [];
      try {
        const response = await fetch(`${address}${path}`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
        assert.equal(response.status, 200);
        for await (const block of sseBlocks(response.body!)) blocks.push(block);
      } catch (error) {
        if (!controller.signal.aborted) throw error;
        assert.fail(`${path} was still open 4 s after its JWT expired: ${JSON.stringify(blocks)}`);
      } finally {
        clearTimeout(timer);
      }
      assert.ok(Date.now() >= expSeconds * 1000, `${path} ended before the expiry`);
      const last = sseEvent(blocks.at(-1)!);
      assert.equal(last.event, 'error');
      assert.equal((JSON.parse(last.data) as { kind: string }).kind, 'denied');
    };
    await Promise.all([follow('/contract-invocations/events'), follow(`/contract-invocations/${operationId}/events`)]);
    // Opened again with the same token: refused.
    errorBody(await built.http.app.inject({ url: '/contract-invocations/events', headers: { authorization: `Bearer ${token}` } }), 401);
  });

  test("a long poll asked with a JWT answers by the JWT's exp, not at its waitMs: no answer carries what happened after its credential expired", async () => {
    const expSeconds = Math.floor(Date.now() / 1000) + 2;
    const token = await sign({ exp: expSeconds });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    // `stoppable` does not decide before its timeout (zulu never answers): each wait below would last its whole waitMs (10 s here).
    const stoppable = (waitMs: number) => requestBody(fixture, { interaction: 'stoppable', waitMs });
    const posted = built.http.app.inject({ method: 'POST', url: '/contract-invocations', headers, payload: JSON.stringify(stoppable(10_000)) });
    const { operationId } = resultBody(await postAs(built, token, stoppable(0)), 202);
    const got = built.http.app.inject({ url: `/contract-invocations/${operationId}?waitMs=10000`, headers: { authorization: headers.authorization } });
    const [post, get] = await Promise.all([posted, got]);
    const answeredMs = Date.now();
    resultBody(post, 202);
    resultBody(get, 202);
    assert.ok(answeredMs >= expSeconds * 1000 - 50, `answered ${expSeconds * 1000 - answeredMs} ms before the exp`);
    assert.ok(answeredMs < expSeconds * 1000 + 3000, `answered ${answeredMs - expSeconds * 1000} ms after the exp`);
    // Asked after the exp: refused, not waited.
    errorBody(
      await built.http.app.inject({ url: `/contract-invocations/${operationId}?waitMs=10000`, headers: { authorization: headers.authorization } }),
      401,
    );
  });
});

describe('deployment config', () => {
  const base = () => {
    const config = minimalServeConfig();
    return { ...config, http: { ...(config.http as object), bodyLimitBytes: 4096 } };
  };
  const parse = (config: unknown) =>
    parseDeploymentConfig(new TextEncoder().encode(typeof config === 'string' ? config : JSON.stringify(config)), '/etc/convoke');
  const fails = (config: unknown, ...fragments: string[]) =>
    assert.throws(
      () => parse(config),
      (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input' && fragments.every((f) => (e.description ?? '').includes(f)),
    );

  test('paths resolve against the config file; a valid config parses', () => {
    const config = parse({ ...base(), store: 'sqlite:data/ops.db' });
    assert.deepEqual(config.bundles, ['/etc/convoke/b.json']);
    assert.equal(config.store, 'sqlite:/etc/convoke/data/ops.db');
  });

  test('resultBatchMs is an integer from 0 to 1000 ms', () => {
    assert.equal(parse({ ...base(), resultBatchMs: 0 }).resultBatchMs, 0);
    assert.equal(parse({ ...base(), resultBatchMs: 1000 }).resultBatchMs, 1000);
    fails({ ...base(), resultBatchMs: 1001 }, '/resultBatchMs');
    fails({ ...base(), resultBatchMs: 2.5 }, '/resultBatchMs');
  });

  test('duplicate keys in the config are rejected by the strict parser', () => {
    fails(JSON.stringify(base()).replace('"store":"memory:"', '"store":"memory:","store":"sqlite:x"'), 'duplicate key');
  });

  test('every schema error is reported at once', () => {
    const config = { ...base(), http: { ...base().http, port: -1, principals: [{ principalId: 'p', tokenSha256: 'nothex' }] }, surprise: 1 };
    fails(config, '/http/port', '/http/principals/0/tokenSha256', '"surprise"');
  });

  test('semantic errors: shared token hashes, nobody able to authenticate', () => {
    const twice = {
      ...base().http,
      principals: [
        { principalId: 'p', tokenSha256: 'a'.repeat(64) },
        { principalId: 'q', tokenSha256: 'a'.repeat(64) },
      ],
    };
    fails({ ...base(), http: twice }, 'share one token hash');
    fails({ ...base(), http: { ...base().http, principals: [] } }, 'no principal can authenticate');
  });

  test('each authentication source has its own principal namespace: no static principal id inside the JWT prefix, which is configurable', () => {
    const jwt = { issuer: 'https://idp.test', audience: 'convoke', jwksFile: 'jwks.json' };
    const withStatic = (principalId: string, extra: object = {}) => ({
      ...base(),
      http: { ...base().http, principals: [{ principalId, tokenSha256: 'a'.repeat(64) }], jwt: { ...jwt, ...extra } },
    });
    fails(withStatic('jwt:https://idp.test:carol'), 'lies in the JWT principal namespace "jwt:https://idp.test:"');
    assert.equal(parse(withStatic('carol')).http.jwt?.issuer, 'https://idp.test');
    fails(withStatic('idp/carol', { principalPrefix: 'idp/' }), 'lies in the JWT principal namespace "idp/"');
    assert.equal(parse(withStatic('jwt:https://idp.test:carol', { principalPrefix: 'idp/' })).http.jwt?.principalPrefix, 'idp/');
    fails(withStatic('carol', { principalPrefix: '' }), '/http/jwt/principalPrefix');
    fails(withStatic('carol', { principalPrefix: 'p'.repeat(256) }), 'leaves no room for a subject');
    // A JWT principal is never a subject token, so never a NATS command principal (convoke.cmd.<principal>).
    fails(withStatic('carol', { principalPrefix: 'sso-' }), 'made of subject-token characters only');
    assert.equal(parse(withStatic('carol', { principalPrefix: 'sso:' })).http.jwt?.principalPrefix, 'sso:');
  });

  test('http.eventDeliveriesPerPrincipal is an integer from 1 to limits.httpEventDeliveriesPerPrincipalMax', () => {
    const http = (extra: object) => ({ ...base(), http: { ...base().http, ...extra } });
    assert.equal(parse(http({ eventDeliveriesPerPrincipal: 1 })).http.eventDeliveriesPerPrincipal, 1);
    assert.equal(parse(http({ eventDeliveriesPerPrincipal: 4096 })).http.eventDeliveriesPerPrincipal, 4096);
    fails(http({ eventDeliveriesPerPrincipal: 0 }), '/http/eventDeliveriesPerPrincipal');
    fails(http({ eventDeliveriesPerPrincipal: 4097 }), '/http/eventDeliveriesPerPrincipal');
    fails(http({ eventDeliveriesPerPrincipal: 2.5 }), '/http/eventDeliveriesPerPrincipal');
  });

  test('the totals of all principals (http.waitsMax, http.events.streamsMax, http.eventDeliveriesMax) are integers from 1 to their limits, each at least its per-principal bound, left out at least that bound', () => {
    const http = (extra: object) => ({ ...base(), http: { ...base().http, ...extra } });
    const events = (extra: object) => http({ events: extra });
    assert.equal(parse(http({ waitsMax: 1, waitsPerPrincipal: 1 })).http.waitsMax, 1);
    assert.equal(parse(http({ waitsMax: limits.httpWaitsMax })).http.waitsMax, limits.httpWaitsMax);
    fails(http({ waitsMax: 0 }), '/http/waitsMax');
    fails(http({ waitsMax: limits.httpWaitsMax + 1 }), '/http/waitsMax');
    fails(http({ waitsMax: 2.5 }), '/http/waitsMax');
    assert.equal(parse(events({ streamsMax: 1, streamsPerPrincipal: 1 })).http.events?.streamsMax, 1);
    assert.equal(parse(events({ streamsMax: limits.httpEventStreamsMax })).http.events?.streamsMax, limits.httpEventStreamsMax);
    fails(events({ streamsMax: 0 }), '/http/events/streamsMax');
    fails(events({ streamsMax: limits.httpEventStreamsMax + 1 }), '/http/events/streamsMax');
    assert.equal(parse(http({ eventDeliveriesMax: 1, eventDeliveriesPerPrincipal: 1 })).http.eventDeliveriesMax, 1);
    assert.equal(parse(http({ eventDeliveriesMax: limits.httpEventDeliveriesMax })).http.eventDeliveriesMax, limits.httpEventDeliveriesMax);
    fails(http({ eventDeliveriesMax: 0 }), '/http/eventDeliveriesMax');
    fails(http({ eventDeliveriesMax: limits.httpEventDeliveriesMax + 1 }), '/http/eventDeliveriesMax');
    // A total set below its per-principal bound could never be reached: the operator hears of it.
    fails(http({ waitsPerPrincipal: 3, waitsMax: 2 }), 'waitsPerPrincipal (3) exceeds http.waitsMax (2)');
    fails(events({ streamsPerPrincipal: 3, streamsMax: 2 }), 'streamsPerPrincipal (3) exceeds http.events.streamsMax (2)');
    fails(http({ eventDeliveriesPerPrincipal: 3, eventDeliveriesMax: 2 }), 'eventDeliveriesPerPrincipal (3) exceeds http.eventDeliveriesMax (2)');
    // A total left out is its default, raised to the per-principal bound: a config that sets only that bound loads as it did.
    assert.equal(parse(http({ waitsPerPrincipal: waitsMaxDefault + 1 })).http.waitsPerPrincipal, waitsMaxDefault + 1);
    assert.equal(parse(http({ eventDeliveriesPerPrincipal: eventDeliveriesMaxDefault + 1 })).http.eventDeliveriesPerPrincipal, eventDeliveriesMaxDefault + 1);
    assert.equal(totalOf(undefined, waitsMaxDefault, waitsMaxDefault + 1), waitsMaxDefault + 1);
    assert.equal(totalOf(undefined, waitsMaxDefault, 3), waitsMaxDefault);
    assert.equal(totalOf(5, waitsMaxDefault, 3), 5);
    assert.ok(limits.httpEventStreamsPerPrincipalMax <= eventStreamsMaxDefault, 'every per-principal stream bound fits the default total');
  });

  test('the receive timeouts are bounded and the headers timeout is within the request timeout', () => {
    const http = (extra: object) => ({ ...base(), http: { ...base().http, ...extra } });
    assert.equal(parse(http({ headersTimeoutMs: 1000, requestTimeoutMs: 2000 })).http.headersTimeoutMs, 1000);
    fails(http({ headersTimeoutMs: 5000, requestTimeoutMs: 2000 }), 'headersTimeoutMs (5000) exceeds requestTimeoutMs (2000)');
    fails(http({ headersTimeoutMs: 99 }), '/http/headersTimeoutMs');
    fails(http({ requestTimeoutMs: 300_001 }), '/http/requestTimeoutMs');
  });

  test('building: unattested namespaces and example results that do not match are config errors; an incomplete nats transport is invalid input', async () => {
    const fixture = await writeHttpFixture();
    try {
      const config = parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(fixture.config)), fixture.dir);
      const clock = new SystemClock();
      await assert.rejects(buildDeployment({ ...config, attestations: [] }, { clock }), /no publisher attestation/);
      await assert.rejects(
        buildDeployment({ ...config, transport: { kind: 'memory', examplePeers: { alfa: { review: { verdict: 'maybe' } }, bravo: { nope: 1 } } } }, { clock }),
        (e: unknown) => isAdapterError(e) && /examplePeers\.alfa\.review/.test(e.description ?? '') && /examplePeers\.bravo\.nope/.test(e.description ?? ''),
      );
      await assert.rejects(
        // A config built in code skips the file's schema (a JavaScript caller, or a cast): the transport is checked again.
        buildDeployment({ ...config, transport: { kind: 'nats' } as unknown as NatsTransportConfig }, { clock }),
        (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input' && /servers/.test(e.description ?? ''),
      );
      await assert.rejects(buildDeployment({ ...config, store: 'postgres://x' }, { clock }), (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input');
      assert.equal(loadBundle(fixtureBundle()).digest, fixture.contract.digest);
    } finally {
      await fixture.dispose();
    }
  });
});

describe('HTTP facade with an admission rate (inject)', () => {
  test('past the principal’s bucket a new invocation is 503 with Retry-After; its known keys and other principals are answered', async () => {
    const fixture = await writeHttpFixture({ peerDelayMs: 10 });
    await writeFile(fixture.configPath, JSON.stringify({ ...fixture.config, admissionRate: { perSecond: 0.5, burst: 2 } }));
    const built = await buildFixtureApp(fixture);
    try {
      const post = (body: unknown, token = fixture.tokens.alice) =>
        built.http.app.inject({
          method: 'POST',
          url: '/contract-invocations',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        });
      const first = requestBody(fixture, { waitMs: 0 });
      assert.equal((await post(first)).statusCode, 202);
      assert.equal((await post(requestBody(fixture, { waitMs: 0 }))).statusCode, 202);
      const refused = await post(requestBody(fixture, { waitMs: 0 }));
      assert.equal(refused.statusCode, 503, refused.body);
      assert.equal(refused.headers['retry-after'], '2');
      assert.match(
        (JSON.parse(refused.body) as { description: string }).description,
        /principal "alice" admits at most one operation every 2 s here \(a burst of 2\)/,
      );
      assert.ok([200, 202].includes((await post(first)).statusCode), 'a known key is answered');
      assert.equal((await post(requestBody(fixture, { waitMs: 0 }), fixture.tokens.bob)).statusCode, 202, 'bob has his own bucket');
    } finally {
      await built.close();
      await fixture.dispose();
    }
  });
});
