/**
 * The console's HTTP routes over a real socket against `convoke serve`: the static files and their
 * content security policy; GET /contract-invocations/{id}/transitions for the invoker, an operator
 * and nobody else; the server-sent event streams (snapshot, then updates of what changed that
 * rebuild the fresh read, heartbeat, the per-principal bound, refused credentials; an idle stream
 * outlives the socket's inactivity timeout whatever the heartbeat); the protective headers on every
 * API response (nosniff, no framing, no Referer, a policy that loads nothing); the OpenAPI document naming the routes.
 */
import { sseBlocks, sseEvent } from '../support/sse.js';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import { checkInspectionShape } from '../../src/http/schemas.js';
import { buildFixtureApp, requestBody, sha256Hex, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';
import { startServe, type ServeProcess } from '../support/http-server.js';
import { followOperation, type Followed } from '../support/inspection-updates.js';
import type { OperationInspection } from '../../src/projections/inspection.js';

const operatorToken = 'operator-token-for-the-http-console-test';

interface Inspection {
  principalId: string;
  result: { operationId: string; decision: { outcome: string; reason: string } | null };
  branches: { branchId: string; leaseUntilMs: number; attempt: number; fence: number }[];
  timeline: { index: number; applied: boolean; events: { type: string }[] }[];
}

interface SseEvent {
  event: string;
  data: string;
}

/** Reads a server-sent event stream until `until` says stop; returns the events and comment lines seen. */
async function readEvents(
  url: string,
  token: string,
  until: (events: SseEvent[], comments: number) => boolean,
  timeoutMs = 15_000,
): Promise<{ status: number; events: SseEvent[]; comments: number }> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  const events: SseEvent[] = [];
  let comments = 0;
  try {
    if (response.status !== 200 || !response.body) return { status: response.status, events, comments };
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    for await (const block of sseBlocks(response.body)) {
      if (block.startsWith(':')) comments++;
      else events.push(sseEvent(block));
      if (until(events, comments)) break;
    }
  } catch (error) {
    if (!controller.signal.aborted) throw error;
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
  return { status: response.status, events, comments };
}

async function post(base: string, path: string, token: string, body?: JsonObject) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as { operationId: string } };
}

interface Context {
  fixture: HttpFixture;
  base: string;
}

async function staticFiles(ctx: Context): Promise<void> {
  const page = await fetch(`${ctx.base}/console/`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
  assert.doesNotMatch(page.headers.get('content-security-policy') ?? '', /unsafe/);
  assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
  assert.match(await page.text(), /<script src="console.js" defer><\/script>/);
  const script = await fetch(`${ctx.base}/console/console.js`);
  assert.match(script.headers.get('content-type') ?? '', /^text\/javascript/);
  assert.doesNotMatch(await script.text(), /innerHTML|insertAdjacentHTML|document\.write/);
  assert.equal((await fetch(`${ctx.base}/console/../package.json`)).status, 404);
  assert.equal((await fetch(`${ctx.base}/console/secrets.json`)).status, 404);
  // Names every object inherits are no console file either: 404 as any other, never an internal error.
  for (const name of ['constructor', 'toString', 'hasOwnProperty', '__proto__']) {
    const inherited = await fetch(`${ctx.base}/console/${name}`);
    assert.equal(inherited.status, 404, name);
    assert.deepEqual(await inherited.json(), { kind: 'invalid-input', description: `no route GET /console/${name}` });
  }
  const redirect = await fetch(`${ctx.base}/console`, { redirect: 'manual' });
  assert.equal(redirect.status, 308);
  assert.equal(redirect.headers.get('location'), '/console/');
}

async function transitionsVisibility(ctx: Context): Promise<void> {
  const { status, body } = await post(ctx.base, '/contract-invocations', ctx.fixture.tokens.alice, requestBody(ctx.fixture, { waitMs: 8000 }));
  assert.equal(status, 200);
  const path = `/contract-invocations/${body.operationId}/transitions`;
  for (const token of [ctx.fixture.tokens.alice, operatorToken]) {
    const response = await fetch(`${ctx.base}${path}`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(response.status, 200);
    const inspection = (await response.json()) as Inspection;
    assert.ok(checkInspectionShape(inspection as unknown), JSON.stringify(checkInspectionShape.errors));
    assert.equal(inspection.principalId, 'alice');
    assert.equal(inspection.result.decision?.outcome, 'success');
    assert.equal(inspection.branches.length, 3);
    assert.ok(inspection.branches.every((b) => b.attempt === 1 && b.fence >= 1 && b.leaseUntilMs > 0));
    assert.equal(inspection.timeline[0]?.events[0]?.type, 'operation-admitted');
    assert.ok(inspection.timeline.every((t, i) => t.index === i && t.applied));
    assert.ok(inspection.timeline.some((t) => t.events.some((e) => e.type === 'decision-closed')));
  }
  assert.equal((await fetch(`${ctx.base}${path}`, { headers: { authorization: `Bearer ${ctx.fixture.tokens.bob}` } })).status, 404);
  assert.equal((await fetch(`${ctx.base}${path}`, { headers: { authorization: 'Bearer nope' } })).status, 401);
  assert.equal((await fetch(`${ctx.base}${path}`)).status, 401);
}

async function eventsLive(ctx: Context): Promise<void> {
  // stoppable waits for zulu, who never answers: nothing happens until the caller cancels.
  const { body } = await post(ctx.base, '/contract-invocations', ctx.fixture.tokens.alice, requestBody(ctx.fixture, { interaction: 'stoppable', waitMs: 0 }));
  const url = `${ctx.base}/contract-invocations/${body.operationId}/events`;
  let cancelled = false;
  let followed: Followed<OperationInspection> | undefined;
  let applied = 0;
  const seen = await readEvents(url, ctx.fixture.tokens.alice, (events, comments) => {
    if (!cancelled && events.length > 0 && comments >= 2) {
      cancelled = true;
      void post(ctx.base, `/contract-invocations/${body.operationId}/cancel`, ctx.fixture.tokens.alice);
    }
    for (const e of events.slice(applied)) followed = followOperation(followed, e.event, JSON.parse(e.data) as JsonObject);
    applied = events.length;
    // Cancelled: the decision closes, then zulu's branch is sent its cancel (it never answers, so nothing follows).
    return followed?.state.timeline.some((t) => t.events.some((e) => e.type === 'cancel-dispatched')) === true;
  });
  assert.equal(seen.status, 200);
  assert.ok(seen.comments >= 2, 'heartbeats while idle');
  const [snapshot, ...updates] = seen.events.map((e) => ({ event: e.event, inspection: JSON.parse(e.data) as Inspection }));
  assert.equal(snapshot?.event, 'snapshot');
  assert.equal(snapshot?.inspection.result.decision, null);
  const first = snapshot?.inspection.timeline.length ?? 0;
  assert.ok(first >= 1);
  assert.ok(updates.length >= 1 && updates.every((u) => u.event === 'update'));
  assert.equal(followed?.state.result.decision?.reason, 'cancelled');
  // Updates carry only the transitions not sent before, in order.
  const indexes = [snapshot!, ...updates].flatMap((u) => u.inspection.timeline.map((t) => t.index));
  assert.deepEqual(
    indexes,
    indexes.map((_, i) => i),
  );
  // The snapshot with every update applied is the operation as a fresh read gives it.
  const fresh = await fetch(`${ctx.base}/contract-invocations/${body.operationId}/transitions`, {
    headers: { authorization: `Bearer ${ctx.fixture.tokens.alice}` },
  });
  assert.deepEqual(followed?.state, await fresh.json());
}

async function eventsBounded(ctx: Context): Promise<void> {
  const { body } = await post(ctx.base, '/contract-invocations', ctx.fixture.tokens.alice, requestBody(ctx.fixture, { interaction: 'stoppable', waitMs: 0 }));
  const url = `${ctx.base}/contract-invocations/${body.operationId}/events`;
  assert.equal((await fetch(url, { headers: { authorization: 'Bearer nope' } })).status, 401);
  assert.equal((await fetch(url, { headers: { authorization: `Bearer ${ctx.fixture.tokens.bob}` } })).status, 404);
  const held = [new AbortController(), new AbortController()];
  try {
    for (const controller of held)
      assert.equal((await fetch(url, { headers: { authorization: `Bearer ${ctx.fixture.tokens.alice}` }, signal: controller.signal })).status, 200);
    const third = await fetch(url, { headers: { authorization: `Bearer ${ctx.fixture.tokens.alice}` } });
    assert.equal(third.status, 503);
    assert.match(((await third.json()) as { description: string }).description, /already holds 2 event streams/);
    // Another principal's bound is its own.
    const list = await readEvents(`${ctx.base}/contract-invocations/events?interaction=stoppable`, operatorToken, (events) => events.length > 0);
    assert.equal(list.status, 200);
    assert.equal(list.events[0]?.event, 'page');
  } finally {
    for (const controller of held) controller.abort();
  }
  // Closed streams are released once the server sees the connections close.
  let again = await readEvents(url, ctx.fixture.tokens.alice, (events) => events.length > 0);
  for (let tries = 0; again.status === 503 && tries < 50; tries++) {
    await new Promise((done) => setTimeout(done, 100));
    again = await readEvents(url, ctx.fixture.tokens.alice, (events) => events.length > 0);
  }
  assert.equal(again.status, 200);
}

/**
 * The socket's inactivity timeout is 15 s past the longest wait; with no wait allowed and a heartbeat
 * every 16 s, an idle stream must still be there for its heartbeat (the timeout outlasts it too).
 */
async function heartbeatOutlastsIdleTimeout(): Promise<void> {
  const fixture = await writeHttpFixture({ waitMsMax: 0, http: { events: { heartbeatMs: 16_000 } } });
  const server = await startServe(fixture.configPath);
  try {
    const { body } = await post(server.url, '/contract-invocations', fixture.tokens.alice, requestBody(fixture, { waitMs: 0 }));
    const url = `${server.url}/contract-invocations/${body.operationId}/events`;
    const startedMs = Date.now();
    const seen = await readEvents(url, fixture.tokens.alice, (_events, comments) => comments >= 1, 30_000).catch((error: unknown) =>
      assert.fail(`the idle stream was cut after ${Date.now() - startedMs} ms, before its first heartbeat: ${String(error)}`),
    );
    assert.equal(seen.status, 200);
    assert.equal(seen.events[0]?.event, 'snapshot');
    assert.equal(seen.comments, 1, 'the heartbeat arrived on the idle stream');
  } finally {
    await server.stop();
    await fixture.dispose();
  }
}

/** What every response of the API carries, whatever it holds: no sniffing, no framing, nothing loaded from it, no Referer. */
function assertProtected(where: string, headers: Headers | Map<string, string>): void {
  assert.equal(headers.get('x-content-type-options'), 'nosniff', `${where}: x-content-type-options`);
  assert.equal(headers.get('x-frame-options'), 'DENY', `${where}: x-frame-options`);
  assert.equal(headers.get('referrer-policy'), 'no-referrer', `${where}: referrer-policy`);
  const policy = headers.get('content-security-policy') ?? '';
  assert.match(policy, /default-src 'none'/, `${where}: content-security-policy`);
  assert.match(policy, /frame-ancestors 'none'/, `${where}: content-security-policy`);
}

/** A request written as raw bytes (malformed HTTP the server answers itself); its status line and headers. */
async function rawResponse(base: string, request: string): Promise<{ status: string; headers: Map<string, string> }> {
  const { hostname, port } = new URL(base);
  const text = await new Promise<string>((resolve, reject) => {
    let received = '';
    const socket = connect(Number(port), hostname, () => socket.write(request));
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
  });
  const [status = '', ...lines] = text.split('\r\n\r\n')[0]!.split('\r\n');
  return { status, headers: new Map(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()])) };
}

async function apiHeaders(ctx: Context): Promise<void> {
  const alice = { authorization: `Bearer ${ctx.fixture.tokens.alice}` };
  const { body } = await post(ctx.base, '/contract-invocations', ctx.fixture.tokens.alice, requestBody(ctx.fixture, { waitMs: 8000 }));
  const answers: [string, Response][] = [
    ['200 a result', await fetch(`${ctx.base}/contract-invocations/${body.operationId}`, { headers: alice })],
    ['200 a list', await fetch(`${ctx.base}/contract-invocations?limit=1`, { headers: alice })],
    ['200 transitions', await fetch(`${ctx.base}/contract-invocations/${body.operationId}/transitions`, { headers: alice })],
    ['401', await fetch(`${ctx.base}/contract-invocations`)],
    ['404 reflecting the id', await fetch(`${ctx.base}/contract-invocations/%3Csvg%20onload=alert(1)%3E`, { headers: alice })],
    ['404 reflecting the route', await fetch(`${ctx.base}/%3Cscript%3Ealert(1)%3C/script%3E`)],
    ['400 bad encoding (a framework error)', await fetch(`${ctx.base}/contract-invocations/%E0%A4%A`, { headers: alice })],
    [
      '415 markup as a body',
      await fetch(`${ctx.base}/contract-invocations`, {
        method: 'POST',
        headers: { ...alice, 'content-type': 'text/html' },
        body: '<script>alert(1)</script>',
      }),
    ],
    ['200 health', await fetch(`${ctx.base}/healthz`)],
    ['200 openapi', await fetch(`${ctx.base}/openapi.json`)],
    ['200 metrics', await fetch(`${ctx.base}/metrics`)],
    ['308 to the console', await fetch(`${ctx.base}/console`, { redirect: 'manual' })],
  ];
  for (const [where, response] of answers) {
    assertProtected(where, response.headers);
    await response.arrayBuffer();
  }
  // Every error is JSON, never markup, whatever the request held.
  for (const [where, response] of answers.filter(([, r]) => r.status >= 400))
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/, where);
  // An event stream, taken over from the framework.
  const controller = new AbortController();
  const stream = await fetch(`${ctx.base}/contract-invocations/events`, { headers: alice, signal: controller.signal });
  assert.equal(stream.status, 200);
  assertProtected('an event stream', stream.headers);
  controller.abort();
  // Malformed HTTP, answered before any route.
  const malformed = await rawResponse(ctx.base, 'GET /healthz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n');
  assert.match(malformed.status, /^HTTP\/1.1 400/);
  assertProtected('malformed HTTP', malformed.headers);
  // The console keeps its own, stricter policy.
  const page = await fetch(`${ctx.base}/console/`);
  assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
  assertProtected('the console page', page.headers);
}

async function openApi(ctx: Context): Promise<void> {
  const document = (await (await fetch(`${ctx.base}/openapi.json`)).json()) as {
    paths: Record<string, unknown>;
    components: { schemas: Record<string, unknown> };
  };
  for (const path of ['/contract-invocations/{operationId}/transitions', '/contract-invocations/{operationId}/events', '/contract-invocations/events'])
    assert.ok(document.paths[path], path);
  assert.ok(document.components.schemas.OperationInspection);
}

describe('the console routes of convoke serve', { timeout: 60_000 }, () => {
  let fixture: HttpFixture;
  let server: ServeProcess;
  const ctx = {} as Context;

  before(async () => {
    fixture = await writeHttpFixture({ peerDelayMs: 200, http: { events: { heartbeatMs: 200, streamsPerPrincipal: 2 } } });
    const config = structuredClone(fixture.config) as { http: { principals: JsonObject[] }; operators?: string[] };
    config.http.principals.push({ principalId: 'ops', tokenSha256: sha256Hex(operatorToken) });
    config.operators = ['ops'];
    await writeFile(fixture.configPath, JSON.stringify(config));
    server = await startServe(fixture.configPath);
    Object.assign(ctx, { fixture, base: server.url });
  });
  after(async () => {
    await server?.stop();
    await fixture?.dispose();
  });

  test('the console files are served with a content security policy that allows only their own script', () => staticFiles(ctx));
  test('transitions: the invoker and an operator see the log; another principal and a bad token do not', () => transitionsVisibility(ctx));
  test('events: a snapshot, then an update when the operation is appended to, and heartbeats while idle', () => eventsLive(ctx));
  test('events: refused credentials and other principals get no stream; a principal holds a bounded number', () => eventsBounded(ctx));
  test('every API response, errors and event streams included, is served nosniff, unframeable, with no Referer and nothing loaded from it', () =>
    apiHeaders(ctx));
  test('the OpenAPI document names the console routes', () => openApi(ctx));
});

test('events: an idle stream is kept until its heartbeat, also where the heartbeat is longer than the longest wait', { timeout: 60_000 }, () =>
  heartbeatOutlastsIdleTimeout(),
);

test(
  'events: all principals together hold at most http.events.streamsMax streams; past it a stream is refused (503) though its principal is within its own bound',
  { timeout: 60_000 },
  async () => {
    const fixture = await writeHttpFixture({ http: { events: { heartbeatMs: 60_000, streamsPerPrincipal: 2, streamsMax: 3 } } });
    const built = await buildFixtureApp(fixture);
    const held: AbortController[] = [];
    try {
      const base = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
      const url = `${base}/contract-invocations/events`;
      const open = (token: string) => {
        const controller = new AbortController();
        held.push(controller);
        return fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
      };
      const { alice, bob } = fixture.tokens;
      for (const token of [alice, alice, bob]) assert.equal((await open(token)).status, 200);
      const past = await open(bob);
      assert.equal(past.status, 503, 'bob holds one of his two, but all principals hold three of three');
      const refusal = (await past.json()) as { kind: string; description: string };
      assert.equal(refusal.kind, 'unavailable');
      assert.match(refusal.description, /3 event streams .*http\.events\.streamsMax/);
      // One closed gives one back, to whoever asks: bob's stream is taken once alice's first has gone.
      held[0]!.abort();
      let again = await open(bob);
      for (let tries = 0; again.status === 503 && tries < 50; tries++) {
        await again.body?.cancel();
        await new Promise((done) => setTimeout(done, 100));
        again = await open(bob);
      }
      assert.equal(again.status, 200);
    } finally {
      for (const controller of held) controller.abort();
      built.http.app.server.closeAllConnections();
      await built.close();
      await fixture.dispose();
    }
  },
);

test(
  "another principal's appends send a list stream nothing; shutdown ends every open event stream, and a stream asked for meanwhile is refused",
  { timeout: 60_000 },
  async () => {
    const fixture = await writeHttpFixture({ http: { events: { heartbeatMs: 60_000 } } });
    const built = await buildFixtureApp(fixture);
    try {
      const base = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
      const open = (path: string, token = fixture.tokens.alice) =>
        fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } }).then(async (response) => {
          assert.equal(response.status, 200);
          const blocks: string[] = [];
          for await (const block of sseBlocks(response.body!)) blocks.push(block);
          return blocks;
        });
      const bobs = open('/contract-invocations/events', fixture.tokens.bob);
      const { body } = await post(base, '/contract-invocations', fixture.tokens.alice, requestBody(fixture, { interaction: 'stoppable', waitMs: 0 }));
      const streams = [open('/contract-invocations/events'), open(`/contract-invocations/${body.operationId}/events`), bobs];
      // Past the list streams' refresh gap (250 ms), after alice's admission and her branches' appends.
      await new Promise<void>((resolve) => setTimeout(resolve, 800));
      built.http.beginShutdown();
      const refused = await fetch(`${base}/contract-invocations/events`, { headers: { authorization: `Bearer ${fixture.tokens.alice}` } });
      assert.equal(refused.status, 503);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('a stream was still open 5 s after shutdown began')), 5_000)));
      const ended = await Promise.race([Promise.all(streams), late]).finally(() => clearTimeout(timer));
      assert.deepEqual(
        ended.map((blocks) => sseEvent(blocks[0]!).event),
        ['page', 'snapshot', 'page'],
      );
      // bob's list: his one (empty) page, nothing of alice's operation, no second event.
      assert.deepEqual(ended[2], ['event: page\ndata: {"operations":[],"nextCursor":null}']);
      assert.ok(ended[0]!.join('').includes(body.operationId));
    } finally {
      // A stream the shutdown left open would keep close() waiting: drop it, the test has failed already.
      built.http.app.server.closeAllConnections();
      await built.close();
      await fixture.dispose();
    }
  },
);
