/**
 * `convoke serve` as a child process, over a real socket with undici: every status code of the
 * facade, 200 vs 202 boundaries, idempotent retries, principal isolation, boundary strengthening
 * and weakening, connection close without cancellation, and graceful shutdown (drain: 503s,
 * released waits answered 202, exit code 0).
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { Agent, request } from 'undici';
import { operationId as deriveOperationId } from '../../src/contract/ids.js';
import { describeErrors } from '../../src/contract/validation.js';
import { checkErrorShape, checkResultShape } from '../../src/http/schemas.js';
import { SystemClock } from '../../src/contract/clock.js';
import { buildDeployment, readDeploymentConfig } from '../../src/deployment/config.js';
import { requestBody, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';
import { startServe, type ServeProcess } from '../support/http-server.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tests read whatever JSON the server answered
  body: any;
  text: string;
}

const agent = new Agent({ keepAliveTimeout: 2_000, connections: 16 });

async function call(
  base: string,
  method: 'GET' | 'POST',
  path: string,
  options: { token?: string; body?: string | object; contentType?: string; signal?: AbortSignal } = {},
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
  const payload = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  const response = await request(`${base}${path}`, { method, headers, body: payload, signal: options.signal, dispatcher: agent });
  const text = await response.body.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.statusCode, headers: response.headers, body, text };
}

function expectError(reply: Reply, status: number, kind?: string): { kind: string; description?: string } {
  assert.equal(reply.status, status, reply.text);
  assert.ok(checkErrorShape(reply.body), `AdapterError shape: ${describeErrors(checkErrorShape.errors)} in ${reply.text}`);
  if (kind !== undefined) assert.equal(reply.body.kind, kind, reply.text);
  return reply.body;
}

function expectResult(reply: Reply, status: 200 | 202) {
  assert.equal(reply.status, status, reply.text);
  assert.ok(checkResultShape(reply.body), `InvocationResult shape: ${describeErrors(checkResultShape.errors)}`);
  return reply.body as { operationId: string; decision: { outcome: string; successVotes: number } | null; phase: string; settlement: { status: string } };
}

async function admissions(base: string): Promise<number> {
  const metrics = await call(base, 'GET', '/metrics');
  return Number(/^convoke_admissions_total (\d+)/m.exec(metrics.text)?.[1] ?? 'NaN');
}

/** Polls until the server has admitted one more operation than `before` (bounded). */
async function admittedBeyond(base: string, before: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await admissions(base)) > before) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail('the server did not admit the operation within 2 s');
}

interface RawExchange {
  received: string;
  /** Status codes of every response the server wrote, in order. */
  statuses: number[];
  /** When the server closed the connection, from the connect; null if it was still open at the limit. */
  closedAfterMs: number | null;
}

/**
 * A raw TCP client: writes `start`, then one character of `trickle` every `everyMs` (a slow
 * sender), until the server closes the connection or `limitMs` passes.
 */
function rawExchange(base: string, start: string, trickle: string, everyMs: number, limitMs: number): Promise<RawExchange> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const startedAtMs = Date.now();
    let received = '';
    let sent = 0;
    const socket = connect(Number(port), hostname, () => socket.write(start));
    const writer = setInterval(() => {
      if (sent < trickle.length && socket.writable) socket.write(trickle[sent++]!);
    }, everyMs);
    const finish = (closedAfterMs: number | null) => {
      clearInterval(writer);
      clearTimeout(limit);
      socket.destroy();
      const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
      resolve({ received, statuses, closedAfterMs });
    };
    const limit = setTimeout(() => finish(null), limitMs);
    socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
    socket.on('end', () => clearInterval(writer)); // the server is done: stop writing into a closed socket
    socket.on('error', () => {}); // a write racing the server's close; 'close' follows
    socket.on('close', () => finish(Date.now() - startedAtMs));
  });
}

describe('convoke serve over HTTP (memory store, in-process peers)', () => {
  let fixture: HttpFixture;
  let server: ServeProcess;
  let base: string;
  let alice: string;
  let bob: string;

  before(async () => {
    fixture = await writeHttpFixture({ peerDelayMs: 400, drainMs: 1500, bodyLimitBytes: 64 * 1024 });
    server = await startServe(fixture.configPath);
    base = server.url;
    ({ alice, bob } = fixture.tokens);
  });
  after(async () => {
    await server?.stop();
    await fixture?.dispose();
  });

  test('200 when the decision is reached within the wait', async () => {
    const result = expectResult(await call(base, 'POST', '/contract-invocations', { token: alice, body: requestBody(fixture, { waitMs: 5000 }) }), 200);
    assert.equal(result.decision?.outcome, 'success');
    assert.equal(result.decision?.successVotes, 2);
  });

  test('a wait too short answers 202 with Location; GET then answers 200', async () => {
    const pending = await call(base, 'POST', '/contract-invocations', { token: alice, body: requestBody(fixture, { waitMs: 50 }) });
    const first = expectResult(pending, 202);
    assert.equal(first.decision, null);
    assert.equal(pending.headers.location, `/contract-invocations/${first.operationId}`);
    const done = expectResult(await call(base, 'GET', `/contract-invocations/${first.operationId}?waitMs=5000`, { token: alice }), 200);
    assert.equal(done.decision?.outcome, 'success');
  });

  test('idempotent retry: same key and input return the same operation; different input is 409', async () => {
    const body = requestBody(fixture, { waitMs: 0 });
    const a = expectResult(await call(base, 'POST', '/contract-invocations', { token: alice, body }), 202);
    const b = await call(base, 'POST', '/contract-invocations', { token: alice, body: { ...body, waitMs: 5000 } });
    assert.equal(expectResult(b, 200).operationId, a.operationId);
    assert.equal(a.operationId, deriveOperationId('alice', fixture.contract.digest, body.invocationKey as string));
    expectError(await call(base, 'POST', '/contract-invocations', { token: alice, body: { ...body, input: { document: 'another' } } }), 409, 'conflict');
  });

  test('principal isolation: another principal gets the unknown-id 404 for an existing operation', async () => {
    const { operationId } = expectResult(await call(base, 'POST', '/contract-invocations', { token: alice, body: requestBody(fixture, { waitMs: 0 }) }), 202);
    const hidden = await call(base, 'GET', `/contract-invocations/${operationId}`, { token: bob });
    const unknownId = `op${'0'.repeat(64)}`;
    const unknown = await call(base, 'GET', `/contract-invocations/${unknownId}`, { token: bob });
    expectError(hidden, 404);
    expectError(unknown, 404);
    assert.equal(hidden.text, unknown.text.replace(unknownId, operationId));
    assert.equal(hidden.headers['content-length'], unknown.headers['content-length']);
    // The same key under bob is bob's own operation, not alice's.
    const body = requestBody(fixture, { waitMs: 0 });
    const mine = expectResult(await call(base, 'POST', '/contract-invocations', { token: alice, body }), 202);
    const his = expectResult(await call(base, 'POST', '/contract-invocations', { token: bob, body }), 202);
    assert.notEqual(mine.operationId, his.operationId);
  });

  test('400 (strict JSON, schema), 401, 403, 413, 415, 422', async () => {
    const valid = JSON.stringify(requestBody(fixture));
    expectError(
      await call(base, 'POST', '/contract-invocations', {
        token: alice,
        body: valid.replace('"interaction":"review"', '"interaction":"review","interaction":"review"'),
      }),
      400,
      'invalid-input',
    );
    expectError(
      await call(base, 'POST', '/contract-invocations', { token: alice, body: valid.replace('"RFC: adopt convoke"', '"\\udbff"') }),
      400,
      'invalid-input',
    );
    expectError(
      await call(base, 'POST', '/contract-invocations', { token: alice, body: valid.replace('}', ',"waitMs":123456789012345678}') }),
      400,
      'invalid-input',
    );
    expectError(await call(base, 'POST', '/contract-invocations', { token: alice, body: { interaction: 'review' } }), 400, 'invalid-input');
    const unauthenticated = await call(base, 'POST', '/contract-invocations', { body: valid });
    assert.deepEqual(expectError(unauthenticated, 401), { kind: 'denied', description: 'authentication required' });
    assert.match(String(unauthenticated.headers['www-authenticate']), /^Bearer/);
    expectError(await call(base, 'POST', '/contract-invocations', { token: 'wrong', body: valid }), 401, 'denied');
    expectError(await call(base, 'POST', '/contract-invocations', { token: bob, body: requestBody(fixture, { interaction: 'restricted' }) }), 403, 'denied');
    const oversized = requestBody(fixture, { input: { document: 'x'.repeat(70 * 1024) } });
    assert.equal(
      expectError(await call(base, 'POST', '/contract-invocations', { token: alice, body: oversized }), 413, 'invalid-input').description,
      `body exceeds ${64 * 1024} bytes`,
    );
    expectError(await call(base, 'POST', '/contract-invocations', { token: alice, body: valid, contentType: 'text/plain' }), 415, 'invalid-input');
    const undeployed = requestBody(fixture, { contract: { ...fixture.contract, digest: `sha256:${'f'.repeat(64)}` } });
    expectError(await call(base, 'POST', '/contract-invocations', { token: alice, body: undeployed }), 422, 'unsupported');
  });

  test('two authorization or content-type headers are 400 and a content-encoding other than identity is 415, before authentication and before the body', async () => {
    /** One request written as raw bytes (a client library would merge or refuse repeated headers); its status and body. */
    const raw = (headerLines: string[], body = '') =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const { hostname, port } = new URL(base);
        const socket = connect(Number(port), hostname);
        let answer = '';
        socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
        socket.on('error', reject);
        socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]), body: answer.slice(answer.indexOf('\r\n\r\n') + 4) }));
        const length = Buffer.byteLength(body);
        socket.end(
          [
            `POST /contract-invocations HTTP/1.1`,
            `host: ${hostname}`,
            'connection: close',
            'content-type: application/json',
            `content-length: ${length}`,
            ...headerLines,
          ].join('\r\n') + `\r\n\r\n${body}`,
        );
      });
    const before = await call(base, 'GET', '/contract-invocations?limit=200', { token: alice });
    const valid = JSON.stringify(requestBody(fixture, { waitMs: 0 }));
    // Each credential is valid alone: which one the request spoke for would depend on the reader.
    const twice = await raw([`authorization: Bearer ${alice}`, `authorization: Bearer ${bob}`], valid);
    assert.equal(twice.status, 400, twice.body);
    assert.deepEqual(JSON.parse(twice.body), {
      kind: 'invalid-input',
      description: 'a request carries one authorization header, not 2: which one names the caller would depend on who reads it',
    });
    // Node keeps the first content-type, a proxy in front may read the last: JSON to one, text to the other.
    const typedTwice = await raw([`authorization: Bearer ${alice}`, 'content-type: text/plain'], valid);
    assert.equal(typedTwice.status, 400, typedTwice.body);
    assert.deepEqual(JSON.parse(typedTwice.body), {
      kind: 'invalid-input',
      description: 'a request carries one content-type header, not 2: the media type its body is read as would depend on who reads it',
    });
    for (const coding of ['gzip', 'deflate, identity', 'br']) {
      const encoded = await raw([`authorization: Bearer ${alice}`, `content-encoding: ${coding}`], valid);
      assert.equal(encoded.status, 415, encoded.body);
      assert.match(JSON.parse(encoded.body).description as string, /^content-encoding must be identity \(bodies are read as sent, never decompressed\), not "/);
    }
    // Unauthenticated and encoded: refused for its encoding before anything is read.
    assert.equal((await raw(['content-encoding: gzip'], valid)).status, 415);
    const identity = await raw([`authorization: Bearer ${alice}`, 'content-encoding: Identity'], valid);
    assert.equal(identity.status, 202, identity.body);
    const after = await call(base, 'GET', '/contract-invocations?limit=200', { token: alice });
    assert.equal(
      (after.body as { operations: unknown[] }).operations.length,
      (before.body as { operations: unknown[] }).operations.length + 1,
      'only the identity-encoded request with one content-type created an operation',
    );
  });

  test('strengthening decision → settled waits for settlement; weakening settled → decision is 400', async () => {
    const decided = expectResult(
      await call(base, 'POST', '/contract-invocations', { token: alice, body: requestBody(fixture, { interaction: 'careful', waitMs: 5000 }) }),
      200,
    );
    assert.equal(decided.decision?.outcome, 'success');
    assert.equal(decided.settlement.status, 'pending', 'the unanswered sibling is still being cancelled');
    const strengthened = expectResult(
      await call(base, 'POST', '/contract-invocations', {
        token: alice,
        body: requestBody(fixture, { interaction: 'careful', waitFor: 'settled', waitMs: 1500 }),
      }),
      202,
    );
    assert.notEqual(strengthened.decision, null);
    const before = await admissions(base);
    const weak = expectError(
      await call(base, 'POST', '/contract-invocations', { token: alice, body: requestBody(fixture, { interaction: 'sealed', waitFor: 'decision' }) }),
      400,
      'invalid-input',
    );
    assert.match(weak.description ?? '', /weaken/);
    assert.equal(await admissions(base), before, 'a weakening request creates no operation');
    const sealed = expectResult(
      await call(base, 'POST', '/contract-invocations', { token: alice, body: requestBody(fixture, { interaction: 'sealed', waitMs: 5000 }) }),
      200,
    );
    assert.equal(sealed.phase, 'settled');
  });

  test('closing the connection stops the wait and never cancels the operation', async () => {
    const body = requestBody(fixture, { waitMs: 8000 });
    const operationId = deriveOperationId('alice', fixture.contract.digest, body.invocationKey as string);
    const before = await admissions(base);
    const controller = new AbortController();
    const waiting = call(base, 'POST', '/contract-invocations', { token: alice, body, signal: controller.signal });
    await admittedBeyond(base, before);
    controller.abort();
    await assert.rejects(waiting, (e: Error) => e.name === 'AbortError');
    const after = expectResult(await call(base, 'GET', `/contract-invocations/${operationId}?waitMs=5000`, { token: alice }), 200);
    assert.equal(after.decision?.outcome, 'success', 'the operation went on to its decision');
    const metrics = await call(base, 'GET', '/metrics');
    assert.match(metrics.text, /convoke_http_waits_released_total\{reason="client-closed"\} [1-9]/);
  });

  test('the default headers timeout closes a client that sends its headers slowly at about 10 s, not at the 30 s connection sweep', async () => {
    const exchange = await rawExchange(base, 'GET /healthz HTTP/1.1\r\nHost: convoke\r\n', 'X-Slow: ' + 'a'.repeat(200), 250, 20_000);
    assert.deepEqual(exchange.statuses, [408], exchange.received);
    assert.ok(
      exchange.closedAfterMs !== null && exchange.closedAfterMs >= 9_500 && exchange.closedAfterMs <= 12_000,
      `closed after ${exchange.closedAfterMs} ms`,
    );
  });

  test('operator routes over the socket', async () => {
    assert.deepEqual((await call(base, 'GET', '/healthz')).body, { status: 'ok' });
    assert.equal((await call(base, 'GET', '/openapi.json')).body.openapi, '3.1.0');
    // The list route exists (the operations index) and needs a credential like every invocation route.
    expectError(await call(base, 'GET', '/contract-invocations'), 401);
    expectError(await call(base, 'GET', '/no-such-route'), 404);
  });

  // Last: it stops the server.
  test('graceful shutdown: waits released with 202, 503 while draining, clean exit', async () => {
    const before = await admissions(base);
    const inflight = call(base, 'POST', '/contract-invocations', {
      token: alice,
      body: requestBody(fixture, { interaction: 'careful', waitFor: 'settled', waitMs: 9000 }),
    });
    await admittedBeyond(base, before);
    server.child.kill('SIGTERM');
    const released = await inflight;
    expectResult(released, 202);
    expectError(await call(base, 'GET', '/healthz'), 503, 'unavailable');
    expectError(await call(base, 'POST', '/contract-invocations', { token: alice, body: requestBody(fixture) }), 503, 'unavailable');
    assert.equal(await server.exited, 0, server.stderr());
    assert.match(server.stderr(), /stopped/);
  });
});

describe('convoke serve over HTTP: slow senders, unauthenticated bodies and JWT principals (short receive timeouts)', () => {
  const headersTimeoutMs = 1_000;
  const requestTimeoutMs = 3_000;
  let fixture: HttpFixture;
  let server: ServeProcess;
  let sign: (sub: string) => Promise<string>;

  before(async () => {
    const jwt = { issuer: 'https://issuer.test', audience: 'convoke', jwksFile: 'jwks.json' };
    fixture = await writeHttpFixture({ peerDelayMs: 20, http: { headersTimeoutMs, requestTimeoutMs, jwt } });
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    await writeFile(join(fixture.dir, 'jwks.json'), JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] }));
    sign = (sub) =>
      new SignJWT({})
        .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
        .setSubject(sub)
        .setIssuer(jwt.issuer)
        .setAudience(jwt.audience)
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(privateKey);
    server = await startServe(fixture.configPath);
  });
  after(async () => {
    await server?.stop();
    await fixture?.dispose();
  });

  test('the configured headers timeout closes a client that sends its headers slowly within a tenth of it', async () => {
    const exchange = await rawExchange(server.url, 'POST /contract-invocations HTTP/1.1\r\nHost: convoke\r\n', 'X-Slow: ' + 'a'.repeat(200), 100, 10_000);
    assert.deepEqual(exchange.statuses, [408], exchange.received);
    assert.ok(
      exchange.closedAfterMs !== null && exchange.closedAfterMs >= headersTimeoutMs * 0.9 && exchange.closedAfterMs <= headersTimeoutMs * 1.1 + 300,
      `closed after ${exchange.closedAfterMs} ms`,
    );
  });

  test('an unauthenticated request is answered once: its 401 closes the connection, and no 408 follows while its body trickles in', async () => {
    const body = JSON.stringify(requestBody(fixture));
    const head = `POST /contract-invocations HTTP/1.1\r\nHost: convoke\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
    // The body would take far longer than requestTimeoutMs to arrive.
    const exchange = await rawExchange(server.url, head, body, 100, requestTimeoutMs * 2);
    assert.deepEqual(exchange.statuses, [401], exchange.received);
    assert.match(exchange.received, /\r\nconnection: close\r\n/i);
    assert.ok(
      exchange.closedAfterMs !== null && exchange.closedAfterMs < requestTimeoutMs / 2,
      `the server closed the connection after ${exchange.closedAfterMs} ms`,
    );
  });

  test("a JWT whose sub equals a static principal id is another principal: it cannot read that principal's operation (404), and the same key names another operation", async () => {
    const body = requestBody(fixture, { waitMs: 0 });
    const alices = expectResult(await call(server.url, 'POST', '/contract-invocations', { token: fixture.tokens.alice, body }), 202);
    assert.equal(alices.operationId, deriveOperationId('alice', fixture.contract.digest, body.invocationKey as string), 'static principals keep their ids');
    const impostor = await sign('alice');
    expectError(await call(server.url, 'GET', `/contract-invocations/${alices.operationId}`, { token: impostor }), 404);
    const own = expectResult(await call(server.url, 'POST', '/contract-invocations', { token: impostor, body }), 202);
    assert.equal(own.operationId, deriveOperationId('jwt:https://issuer.test:alice', fixture.contract.digest, body.invocationKey as string));
    assert.notEqual(own.operationId, alices.operationId);
    expectResult(await call(server.url, 'GET', `/contract-invocations/${own.operationId}?waitMs=5000`, { token: impostor }), 200);
  });
});

/**
 * Invokes once as alice and once as bob without waiting (202, undecided), then holds, all at once,
 * a 10 s wait on its own principal's operation for each of `waiters`: the replies, in that order.
 */
async function waitsAtOnce(server: ServeProcess, fixture: HttpFixture, waiters: readonly ('alice' | 'bob')[]): Promise<Reply[]> {
  const { tokens } = fixture;
  const undecided = async (token: string) =>
    expectResult(await call(server.url, 'POST', '/contract-invocations', { token, body: requestBody(fixture, { waitMs: 0 }) }), 202).operationId;
  const operationIds = { alice: await undecided(tokens.alice), bob: await undecided(tokens.bob) };
  return Promise.all(
    waiters.map((principal) => call(server.url, 'GET', `/contract-invocations/${operationIds[principal]}?waitMs=10000`, { token: tokens[principal] })),
  );
}

describe('convoke serve over HTTP: a principal holds at most http.waitsPerPrincipal long-polls at once', () => {
  let fixture: HttpFixture;
  let server: ServeProcess;

  before(async () => {
    // Peers answer after 1.5 s: a wait of 10 s on a new operation ends at its decision.
    fixture = await writeHttpFixture({ peerDelayMs: 1500, http: { waitsPerPrincipal: 2 } });
    server = await startServe(fixture.configPath);
  });
  after(async () => {
    await server?.stop();
    await fixture?.dispose();
  });

  test('past the bound a wait answers at once (202, the state as it is); the waits within it and another principal’s wait until the decision', async () => {
    const { alice } = fixture.tokens;
    const replies = await waitsAtOnce(server, fixture, ['alice', 'alice', 'alice', 'bob']);
    const alices = replies.slice(0, 3).map((reply) => [reply.status, reply.body.decision === null]);
    assert.deepEqual(
      alices.sort(),
      [
        [200, false],
        [200, false],
        [202, true],
      ],
      'two of alice’s waits lasted until the decision, the third answered at once, undecided',
    );
    assert.equal(expectResult(replies[3]!, 200).decision?.outcome, 'success', 'bob’s wait is not alice’s to use up');
    // The bound is on waits held at once: once they ended, alice waits again.
    const next = expectResult(await call(server.url, 'POST', '/contract-invocations', { token: alice, body: requestBody(fixture, { waitMs: 10_000 }) }), 200);
    assert.equal(next.decision?.outcome, 'success');
  });
});

describe('convoke serve over HTTP: all principals together hold at most http.waitsMax long-polls at once', () => {
  let fixture: HttpFixture;
  let server: ServeProcess;

  before(async () => {
    // Peers answer after 1.5 s: a wait of 10 s on a new operation ends at its decision.
    fixture = await writeHttpFixture({ peerDelayMs: 1500, http: { waitsPerPrincipal: 2, waitsMax: 3 } });
    server = await startServe(fixture.configPath);
  });
  after(async () => {
    await server?.stop();
    await fixture?.dispose();
  });

  test('two principals, each within its own bound: past the total one wait answers at once (202, the state as it is), the others until the decision', async () => {
    const { alice, bob } = fixture.tokens;
    const replies = await waitsAtOnce(server, fixture, ['alice', 'alice', 'bob', 'bob']);
    assert.deepEqual(
      replies.map((reply) => [reply.status, reply.body.decision === null]).sort(),
      [
        [200, false],
        [200, false],
        [200, false],
        [202, true],
      ],
      'three waits lasted until the decision, the fourth (its principal holding one of its two) answered at once, undecided',
    );
    // The total is of waits held at once: once they ended, both wait again.
    const next = await Promise.all(
      [alice, bob].map(async (token) =>
        expectResult(await call(server.url, 'POST', '/contract-invocations', { token, body: requestBody(fixture, { waitMs: 10_000 }) }), 200),
      ),
    );
    assert.deepEqual(
      next.map((result) => result.decision?.outcome),
      ['success', 'success'],
    );
  });
});

describe('convoke serve over HTTP (sqlite store): 410 for a tombstoned key', () => {
  let fixture: HttpFixture;
  let server: ServeProcess;

  before(async () => {
    fixture = await writeHttpFixture({ store: 'sqlite:ops.db' });
    server = await startServe(fixture.configPath);
  });
  after(async () => {
    await server?.stop();
    await fixture?.dispose();
    await agent.close();
  });

  test('an operator tombstones an operation; the same key is then expired, never recreated', async () => {
    const body = requestBody(fixture, { waitMs: 0 });
    // The operator's own process opens the same store, admits under alice's key and tombstones it.
    const operator = await buildDeployment(await readDeploymentConfig(fixture.configPath), { clock: new SystemClock() });
    const { result } = await operator.coordinator.invoke(
      { principalId: 'alice', senderPeerId: null },
      { contract: fixture.contract, interaction: 'review', invocationKey: body.invocationKey as string, input: body.input! },
    );
    assert.equal((await operator.store.tombstone(result.operationId)).kind, 'ok');
    await operator.close();
    expectError(await call(server.url, 'POST', '/contract-invocations', { token: fixture.tokens.alice, body }), 410, 'expired');
    expectError(await call(server.url, 'GET', `/contract-invocations/${result.operationId}`, { token: fixture.tokens.alice }), 404);
  });
});
