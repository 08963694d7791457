/**
 * Events reaching waiting listens over their two transports, with real parts: the HTTP CloudEvents
 * endpoint (POST /workflow-events, structured mode, over a real socket, authenticated) and a NATS
 * subscription on `<prefix>.>` (a real nats-server, request/reply). Either way the answer comes
 * only after the append that took the event; an event nothing takes is answered as such and not
 * stored; and a workflow's `emit` reaches, through NATS (`<emitPrefix>.<principal>.<type>`), the
 * `listen` of another workflow of the same principal, and no other principal's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import {
  NatsCloudEventSink,
  serveCloudEvents,
  type CloudEventSubscription,
  type ServeCloudEventsOptions,
} from '../../src/adapters/transport/nats-cloudevents.js';
import { principalSubjectToken, type CloudEvent } from '../../src/contract/cloudevents.js';
import { SystemClock } from '../../src/contract/clock.js';
import { limits } from '../../src/contract/limits.js';
import type { JsonValue } from '../../src/contract/json.js';
import { buildFixtureApp, writeHttpFixture } from '../support/http-fixtures.js';
import { startNatsServer } from '../support/nats-server.js';
import type { Transition } from '../../src/events/types.js';
import { storeWith } from '../support/scenario.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { assertReplayEqual, harness, yaml, type Harness, type HarnessOptions } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const approved = (id: string, data: JsonValue = { ok: true }, type = 'com.example.approved'): CloudEvent => ({
  specversion: '1.0',
  id,
  source: 'https://convoke.dev/test',
  type,
  data,
});

const waitFor = (type: string) =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: wait-${type.replace(/\./g, '-')}, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          one: { with: { type: ${type}, data: '\${ .ok == true }' } }
`);

/** Waits until the instance's listen at `at` is waiting for its event. */
async function untilListening(h: Harness, instanceId: string, at = '/do/0/wait'): Promise<void> {
  while (!(await h.executor.get(instanceId))?.listens[at]) await new Promise((r) => setTimeout(r, 5));
}

async function waiting(h: Harness, key: string, type = 'com.example.approved', principalId = 'alice'): Promise<string> {
  const { instanceId } = await h.executor.start({ principalId, invocationKey: key, document: waitFor(type), input: {} });
  await untilListening(h, instanceId);
  return instanceId;
}

/** The instance's end, once reached: completed, and its replay equal to its live record. */
async function completed(h: Harness, instanceId: string): Promise<WorkflowRecord> {
  const record = await h.executor.wait(instanceId, 5000);
  assert.equal(record.status, 'completed', JSON.stringify(record.error));
  await assertReplayEqual(h, instanceId);
  return record;
}

interface NatsIntake {
  nc: NatsConnection;
  h: Harness;
  /** The intake's current subscription on `test.events.>`: closed at the end, whichever it is. */
  subscription: CloudEventSubscription;
  /** Subscribes the intake again, as at first (after the test closed its subscription). */
  resubscribe(): void;
}

interface NatsIntakeOptions {
  /** The harness's options, given the connection (an emit sink publishes on it); the defaults when absent. */
  harness?: (nc: NatsConnection) => HarnessOptions;
  /** The intake's options (serveCloudEvents). */
  intake?: ServeCloudEventsOptions;
}

/** A nats-server, a connection to it, a harness and its event intake on `test.events.>`, for `body`; all closed after it. */
async function withNatsIntake(options: NatsIntakeOptions, body: (intake: NatsIntake) => Promise<void>): Promise<void> {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  const h = harness(options.harness?.(nc));
  const subscribe = () => serveCloudEvents(nc, 'test.events', h.executor, options.intake);
  const intake: NatsIntake = { nc, h, subscription: subscribe(), resubscribe: () => void (intake.subscription = subscribe()) };
  try {
    await body(intake);
  } finally {
    await intake.subscription.close();
    await h.close();
    await nc.close();
    await server.dispose();
  }
}

test('POST /workflow-events: authenticated, structured mode, the caller’s own instances, 202 after the append, 404 when nothing took it', async () => {
  const fixture = await writeHttpFixture();
  const h = harness();
  const built = await buildFixtureApp(fixture, new SystemClock(), { workflowEvents: h.executor });
  try {
    const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
    const post = (body: unknown, token: string | undefined, contentType = 'application/cloudevents+json') =>
      fetch(`${address}/workflow-events`, {
        method: 'POST',
        headers: { 'content-type': contentType, ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify(body),
      });
    const id = await waiting(h, 'http-1');

    assert.equal((await post(approved('a1'), undefined)).status, 401);
    assert.equal((await post(approved('a2'), fixture.tokens.alice, 'application/json')).status, 415);
    const invalid = await post({ specversion: '1.0', source: 'x', type: 'com.example.approved' }, fixture.tokens.alice);
    assert.equal(invalid.status, 400);
    assert.match(((await invalid.json()) as { description: string }).description, /id/);
    // Attributes are the CloudEvents type system's: a time in RFC 3339, an extension a string, an integer or a boolean.
    for (const [attributes, says] of [
      [{ time: 'yesterday' }, /\/time must match pattern/],
      [{ tenant: { id: 'acme' } }, /\/tenant must be string,integer,boolean/],
      [{ weight: 1.5 }, /\/weight must be string,integer,boolean/],
    ] as const) {
      const refused = await post({ ...approved('a0'), ...attributes }, fixture.tokens.alice);
      assert.equal(refused.status, 400, JSON.stringify(attributes));
      assert.match(((await refused.json()) as { description: string }).description, says);
    }
    const bobs = await post(approved('a3'), fixture.tokens.bob);
    assert.equal(bobs.status, 404, 'another principal’s event reaches none of alice’s instances');
    assert.deepEqual(await bobs.json(), { status: 'no-match', matched: [] });
    assert.equal((await post(approved('a4', { ok: false }), fixture.tokens.alice)).status, 404);
    // The lease's own transitions (a renewal, a park) may move the revision meanwhile: what matters is that no event was taken.
    assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 0, 'nothing stored for events nothing took');

    const taken = await post(approved('a5'), fixture.tokens.alice);
    assert.equal(taken.status, 202);
    assert.deepEqual(await taken.json(), { status: 'accepted', matched: [id] });
    assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 1, 'appended before the answer');
    const record = await completed(h, id);
    assert.deepEqual(record.output, [{ ok: true }]);
  } finally {
    await built.close();
    await h.close();
    await fixture.dispose();
  }
});

test('CloudEvents attributes: source a URI-reference, dataschema an absolute URI, binary data as data_base64 (read as its base64 text), never beside data', async () => {
  const fixture = await writeHttpFixture();
  const h = harness();
  const built = await buildFixtureApp(fixture, new SystemClock(), { workflowEvents: h.executor });
  try {
    const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
    const post = (body: unknown) =>
      fetch(`${address}/workflow-events`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json', authorization: `Bearer ${fixture.tokens.alice}` },
        body: JSON.stringify(body),
      });
    const binary = (id: string): JsonValue => {
      const { data: _data, ...attributes } = approved(id, null, 'com.example.scanned');
      return { ...attributes, datacontenttype: 'application/octet-stream', data_base64: Buffer.from([0, 1, 2, 250, 255]).toString('base64') };
    };
    const { instanceId } = await h.executor.start({
      principalId: 'alice',
      invocationKey: 'binary-1',
      document: yaml(`document: { dsl: '1.0.3', namespace: test, name: scanned, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          one: { with: { type: com.example.scanned } }
`),
      input: {},
    });
    await untilListening(h, instanceId);

    for (const [attributes, says] of [
      [{ source: 'not a uri' }, /\/source must match format "uri-reference"/],
      [{ source: 'https://shop.example/a b' }, /\/source must match format "uri-reference"/],
      [{ dataschema: 'schemas/scanned.json' }, /\/dataschema must match format "uri"/],
      [{ data_base64: 'AAEC+v8' }, /\/data_base64 must match pattern/],
      [{ data_base64: 'AAEC\n+v8=' }, /\/data_base64 must match pattern/],
      [{ data: { ok: true } }, /must carry data or data_base64, not both/],
      [{ data_Base64: 'AAEC' }, /must match pattern/],
    ] as const) {
      const refused = await post({ ...(binary('b0') as object), ...attributes });
      assert.equal(refused.status, 400, JSON.stringify(attributes));
      assert.match(((await refused.json()) as { description: string }).description, says, JSON.stringify(attributes));
    }
    assert.equal((await h.executor.get(instanceId))!.listens['/do/0/wait']!.events.length, 0, 'no refused event was taken');

    // Relative and URN sources are URI-references; a dataschema is an absolute URI.
    for (const source of ['/scanners/7', 'urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66']) {
      const event = { ...(binary('b-probe') as object), source, dataschema: 'https://shop.example/schemas/scan', type: 'com.example.unheard' };
      assert.equal((await post(event)).status, 404, `${source}: a valid event nothing listens for`);
    }
    const taken = await post(binary('b1'));
    assert.equal(taken.status, 202);
    const record = await completed(h, instanceId);
    assert.deepEqual(record.output, ['AAEC+v8=']);
  } finally {
    await built.close();
    await h.close();
    await fixture.dispose();
  }
});

test('POST /workflow-events: its refusals name its own media type and its own size bound (cloudEventBytesMax), not the JSON routes’', async () => {
  const bodyLimitBytes = 64 * 1024;
  const fixture = await writeHttpFixture({ bodyLimitBytes });
  const h = harness();
  const built = await buildFixtureApp(fixture, new SystemClock(), { workflowEvents: h.executor });
  try {
    const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
    const post = async (body: string, contentType: string) => {
      const response = await fetch(`${address}/workflow-events`, {
        method: 'POST',
        headers: { 'content-type': contentType, authorization: `Bearer ${fixture.tokens.alice}` },
        body,
      });
      return { status: response.status, body: (await response.json()) as { kind: string; description: string } };
    };
    const event = JSON.stringify(approved('m1'));
    // Whatever the media type, and whether or not another route takes it: without ce- headers it is not binary mode.
    for (const contentType of [
      'application/json',
      'application/cloudevents+json; charset=latin1',
      // A charset named twice: another reader may take the one this route would not.
      'application/cloudevents+json; charset=utf-8; charset=latin1',
      'application/cloudevents+json; charset=utf-8; charset=utf-8',
      'application/cloudevents+json; charset = latin1',
      'text/plain',
      'application/octet-stream',
    ]) {
      const refused = await post(event, contentType);
      assert.equal(refused.status, 415, contentType);
      assert.equal(
        refused.body.description,
        "content-type must be application/cloudevents+json (structured mode), or the event's attributes in ce- headers (binary mode)",
        contentType,
      );
    }
    const batch = await post(`[${event}]`, 'application/cloudevents-batch+json');
    assert.equal(batch.status, 415);
    assert.match(batch.body.description, /^batched mode \(application\/cloudevents-batch\+json\) is not taken/);
    // Over the JSON routes' bodyLimitBytes, within the event bound: taken as an event (nothing waits for it).
    const between = JSON.stringify(approved('m2', 'x'.repeat(bodyLimitBytes)));
    assert.equal((await post(between, 'application/cloudevents+json')).status, 404);
    const over = await post(JSON.stringify(approved('m3', 'x'.repeat(limits.cloudEventBytesMax))), 'application/cloudevents+json');
    assert.equal(over.status, 413);
    assert.equal(over.body.description, `body exceeds ${limits.cloudEventBytesMax} bytes`);
  } finally {
    await built.close();
    await h.close();
    await fixture.dispose();
  }
});

test('NATS <prefix>.>: request/reply answered after the append; wrong subject, garbage and unmatched events answered as such', async () => {
  await withNatsIntake({}, async ({ nc, h }) => {
    const ask = async (subject: string, body: unknown) =>
      (await nc.request(subject, typeof body === 'string' ? body : JSON.stringify(body), { timeout: 5000 })).json<{
        status: string;
        count?: number;
        error?: { kind: string };
      }>();
    const id = await waiting(h, 'nats-1');
    assert.deepEqual(await ask('test.events.com.example.approved', approved('n1', { ok: false })), { status: 'no-match' });
    const wrong = await ask('test.events.com.example.other', approved('n2'));
    assert.equal(wrong.status, 'rejected');
    assert.equal(wrong.error?.kind, 'invalid-input', 'an event travels on its own type’s subject');
    assert.equal((await ask('test.events.com.example.approved', 'not json')).error?.kind, 'invalid-input');
    const accepted = await ask('test.events.com.example.approved', approved('n3'));
    assert.deepEqual(accepted, { status: 'accepted', count: 1 });
    assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 1, 'appended before the reply');
    await completed(h, id);
  });
});

test('NATS <prefix>.>: the answer waits for the append; an event published without a reply subject is taken, and answered to no one', async () => {
  const clock = new SystemClock();
  const memory = new MemoryEventStore({ clock });
  // The append that takes an event waits here until released.
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let reach!: () => void;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  let holding = true;
  const store = storeWith(memory, (real) => ({
    append: async (id: string, expected: string, transition: Transition, after?: Parameters<MemoryEventStore['append']>[3]) => {
      if (holding && transition.events.some((event) => (event as { type: string }).type === 'listen-event-received')) {
        reach();
        await released;
      }
      return real.append(id, expected, transition, after);
    },
  }));
  const subject = 'test.events.com.example.approved';
  await withNatsIntake({ harness: () => ({ store, clock }) }, async ({ nc, h }) => {
    try {
      const id = await waiting(h, 'nats-order');
      const answer = nc.request(subject, JSON.stringify(approved('o1')), { timeout: 5000 });
      await reached;
      const early = await Promise.race([answer.then(() => 'answered'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 300))]);
      assert.equal(early, 'waiting', 'no answer while the append is held');
      assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 0);
      holding = false;
      release();
      assert.deepEqual((await answer).json(), { status: 'accepted', count: 1 });
      assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 1);

      // Fire and forget: delivered as any event, its outcome told to no one (a publisher that needs to know asks with a request).
      const quiet = await waiting(h, 'nats-quiet');
      nc.publish(subject, JSON.stringify(approved('o2')));
      const record = await completed(h, quiet);
      assert.equal(record.listens['/do/0/wait']!.events.length, 1);
    } finally {
      holding = false;
      release();
    }
  });
});

test('NATS <prefix>.>: an event that is not I-JSON is rejected invalid-input and taken nowhere, as POST /workflow-events refuses it', async () => {
  const subject = 'test.events.com.example.approved';
  const event = (id: string, data: string) =>
    `{"specversion":"1.0","id":"${id}","source":"https://convoke.dev/test","type":"com.example.approved","data":${data}}`;
  await withNatsIntake({}, async ({ nc, h }) => {
    const ask = async (body: string) =>
      (await nc.request(subject, body, { timeout: 5000 })).json<{ status: string; matched?: string[]; error?: { kind: string; message: string } }>();
    const id = await waiting(h, 'nats-strict');
    const hostile: [string, string][] = [
      // The last of two keys would win in one reader, the first in another: the stored event would not be the one sent.
      ['a duplicate key', `{"specversion":"1.0","id":"s1","id":"s1b","source":"https://convoke.dev/test","type":"com.example.approved","data":{"ok":true}}`],
      // JSON.parse reads these as Infinity and as a rounded integer: the log would hold null and another number.
      ['a number that overflows', event('s2', '{"ok":true,"n":1e400}')],
      ['an unsafe integer', event('s3', '{"ok":true,"n":12345678901234567890}')],
      ['a lone surrogate', event('s4', '{"ok":true,"s":"\\ud800"}')],
      ['nesting beyond the limit', event('s5', `{"ok":true,"deep":${'['.repeat(65)}${']'.repeat(65)}}`)],
      // Deep enough to exhaust the call stack of a recursive reader: still a bad event, never "unavailable, send it again".
      ['nesting that exhausts a recursive reader', event('s6', `{"ok":true,"deep":${'['.repeat(100_000)}${']'.repeat(100_000)}}`)],
      ['a byte order mark', `\ufeff${event('s7', '{"ok":true}')}`],
    ];
    for (const [what, body] of hostile) {
      const answer = await ask(body);
      assert.equal(answer.status, 'rejected', `${what}: ${JSON.stringify(answer)}`);
      assert.equal(answer.error?.kind, 'invalid-input', `${what}: ${JSON.stringify(answer)}`);
    }
    assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 0, 'no refused event was taken');
    assert.deepEqual(await ask(event('s8', '{"ok":true}')), { status: 'accepted', count: 1 });
    await completed(h, id);
  });
});

test('NATS <prefix>.>: an event whose data its datacontenttype contradicts (CloudEvents JSON format §3.1) is rejected invalid-input and taken nowhere', async () => {
  const subject = 'test.events.com.example.approved';
  await withNatsIntake({}, async ({ nc, h }) => {
    const ask = async (event: JsonValue) =>
      (await nc.request(subject, JSON.stringify(event), { timeout: 5000 })).json<{
        status: string;
        count?: number;
        error?: { kind: string; message: string };
      }>();
    const id = await waiting(h, 'nats-content-type');
    const typed = (id: string, datacontenttype: string, data: JsonValue): CloudEvent => ({ ...approved(id, data), datacontenttype });
    const refused: [string, JsonValue, RegExp][] = [
      // Data that is not JSON-formatted travels as a JSON string: an object here is not what its type says.
      ['text/plain with an object', typed('c1', 'text/plain', { ok: true }), /datacontenttype text\/plain is not JSON: its data must be a string/],
      ['application/xml with a boolean', typed('c2', 'application/xml; charset=utf-8', true), /datacontenttype application\/xml; charset=utf-8 is not JSON/],
      ['not a media type', typed('c3', 'json', { ok: true }), /\/datacontenttype must match pattern/],
      ['a media type with no subtype', typed('c4', 'application/', { ok: true }), /\/datacontenttype must match pattern/],
      // The attributes' own type system (CloudEvents core, Type System): strings without control characters, 32-bit integers.
      ['a line break in subject', { ...approved('c6', { ok: true }), subject: 'order\n42' }, /\/subject holds U\+000A at index 5/],
      ['an extension past 32 bits', { ...approved('c7', { ok: true }), amount: 4_294_967_296 }, /\/amount is 4294967296: a CloudEvents integer/],
    ];
    for (const [what, event, says] of refused) {
      const answer = await ask(event);
      assert.equal(answer.status, 'rejected', `${what}: ${JSON.stringify(answer)}`);
      assert.equal(answer.error?.kind, 'invalid-input', `${what}: ${JSON.stringify(answer)}`);
      assert.match(answer.error?.message ?? '', says, what);
    }
    assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 0, 'no refused event was taken');
    // JSON media types (`*/json`, `*/*+json`, any case, with parameters) carry any JSON value; a string is text of any other type.
    const unheard = (id: string, datacontenttype: string, data: JsonValue): JsonValue => ({ ...typed(id, datacontenttype, data), type: 'com.example.unheard' });
    const valid: [string, JsonValue][] = [
      ['text/plain', 'hello'],
      ['application/vnd.example+JSON; charset=utf-8', { ok: true }],
      ['Application/Json', [1, 2]],
    ];
    for (const [datacontenttype, data] of valid) {
      const answer = (await nc.request('test.events.com.example.unheard', JSON.stringify(unheard('u', datacontenttype, data)), { timeout: 5000 })).json();
      assert.deepEqual(answer, { status: 'no-match' }, `${datacontenttype}: a valid event nothing listens for`);
    }
    assert.deepEqual(await ask(typed('c5', 'application/json', { ok: true })), { status: 'accepted', count: 1 });
    await completed(h, id);
  });
});

test('one workflow’s emit reaches another’s listen through NATS: its own principal’s only', async () => {
  const store = new MemoryEventStore({ clock: new SystemClock() });
  const emitted = { emitSubjectPrefix: 'test.emitted' };
  await withNatsIntake({ harness: (nc) => ({ store, events: new NatsCloudEventSink(nc, emitted) }), intake: emitted }, async ({ h, subscription }) => {
    // Bob's listen first: the intake offers an event to the instances in the order it holds them,
    // so a delivery that reached Bob would have appended to his log before Alice's.
    const other = await waiting(h, 'ping-other', 'com.example.ping', 'bob');
    const listener = await waiting(h, 'ping-listener', 'com.example.ping');
    const emitter = yaml(`document: { dsl: '1.0.3', namespace: test, name: ping, version: '1.0.0' }
do:
  - ping:
      emit: { event: { with: { source: https://convoke.dev/test, type: com.example.ping, data: { ok: true } } } }
`);
    await h.executor.start({ principalId: 'alice', invocationKey: 'ping-emitter', document: emitter, input: {} });
    const record = await completed(h, listener);
    assert.deepEqual(record.output, [{ ok: true }]);
    // Every delivery under way has ended once the subscription is closed.
    await subscription.close();
    const bob = await h.executor.get(other);
    assert.equal(bob?.status, 'running');
    assert.equal(bob?.listens['/do/0/wait']?.events.length, 0, 'another principal’s listen took nothing an emitted event carried');
  });
});

test('NATS <emitPrefix>.>: an emitted event reaches the principal its subject names, on its own type’s subject only; it is never answered', async () => {
  // A principal id that is not a subject token travels encoded (principalSubjectToken).
  const web = 'jwt:https://idp.example/:u.1';
  await withNatsIntake({ intake: { emitSubjectPrefix: 'test.emitted' } }, async (intake) => {
    const { nc, h } = intake;
    assert.throws(() => serveCloudEvents(nc, 'test.events', h.executor, { emitSubjectPrefix: 'test.events.x' }), /overlap/);
    const bob = await waiting(h, 'emitted-bob', 'com.example.approved', 'bob');
    const jwt = await waiting(h, 'emitted-jwt', 'com.example.approved', web);
    const send = (subject: string, event: CloudEvent) => nc.publish(subject, JSON.stringify(event));
    send('test.emitted.bob.com.example.other', approved('x1')); // another type's subject
    send('test.emitted.com.example.approved', approved('x2')); // no principal token
    send(`test.emitted._${Buffer.from('bob').toString('base64url')}.com.example.approved`, approved('x3')); // not the canonical token of bob
    send(`test.emitted.${web}.com.example.approved`, approved('x4')); // not a token at all: another subject
    send('test.emitted.alice.com.example.approved', approved('x5')); // another principal
    const answer = await nc.request('test.emitted.carol.com.example.approved', JSON.stringify(approved('x6')), { timeout: 500 }).catch((e: unknown) => e);
    assert.ok(answer instanceof Error, 'an emitted event is not answered');
    await nc.flush();
    await intake.subscription.close();
    for (const id of [bob, jwt]) assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 0, id);

    intake.resubscribe();
    send('test.emitted.bob.com.example.approved', approved('y1'));
    send(`test.emitted.${principalSubjectToken(web)}.com.example.approved`, approved('y2'));
    for (const [id, event] of [
      [bob, 'y1'],
      [jwt, 'y2'],
    ] as const) {
      const record = await h.executor.wait(id, 5000);
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      assert.deepEqual(
        record.listens['/do/0/wait']!.events.map((e) => (e.event as CloudEvent).id),
        [event],
      );
    }
  });
});

/** The store's transition size in the tests below: events are taken up to cloudEventBytesMax (256 KiB). */
const storeLimit = 64 * 1024;

/** An event of exactly `bytes` bytes of JSON, padded in an extension attribute (its data, what a listen outputs, stays small). */
function sized(id: string, bytes: number): CloudEvent {
  const bare = { ...approved(id), pad: '' };
  return { ...bare, pad: 'x'.repeat(bytes - Buffer.byteLength(JSON.stringify(bare))) };
}

interface SmallStoreIntake {
  h: Harness;
  post(event: CloudEvent): Promise<{ status: number; body: { kind?: string; description?: string; status?: string; matched?: string[] } }>;
  ask(event: CloudEvent): Promise<{ status: string; count?: number; error?: { kind: string; message: string } }>;
  taken(id: string, at?: string): Promise<number>;
}

/** An executor on a store recording at most storeLimit bytes a transition, taking events over HTTP (as alice) and NATS, for `body`. */
async function withSmallStoreIntake(body: (intake: SmallStoreIntake) => Promise<void>): Promise<void> {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock, limits: { transitionBytesMax: storeLimit } });
  await withNatsIntake({ harness: () => ({ store, clock }) }, async ({ nc, h }) => {
    const fixture = await writeHttpFixture();
    const built = await buildFixtureApp(fixture, clock, { workflowEvents: h.executor });
    try {
      const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
      await body({
        h,
        post: async (event) => {
          const response = await fetch(`${address}/workflow-events`, {
            method: 'POST',
            headers: { 'content-type': 'application/cloudevents+json', authorization: `Bearer ${fixture.tokens.alice}` },
            body: JSON.stringify(event),
          });
          return { status: response.status, body: (await response.json()) as { kind?: string; description?: string; status?: string; matched?: string[] } };
        },
        ask: async (event) => (await nc.request('test.events.com.example.approved', JSON.stringify(event), { timeout: 5000 })).json(),
        taken: async (id, at = '/do/0/wait') => (await h.executor.get(id))!.listens[at]!.events.length,
      });
    } finally {
      await built.close();
      await fixture.dispose();
    }
  });
}

test('an event the store cannot record in one transition is refused before anything is taken, 413 invalid-input over HTTP and rejected over NATS, naming the limit', async () => {
  await withSmallStoreIntake(async ({ h, post, ask, taken }) => {
    const first = await waiting(h, 'large-1');
    const second = await waiting(h, 'large-2');
    // Larger than a transition; then within one, but not with what a listen records beside it (its key, the guard: about 230 bytes).
    for (const [what, bytes] of [
      ['past the limit', 100_000],
      ['within it, not with the listen’s record', storeLimit - 100],
    ] as const) {
      const refused = await post(sized(`http-${bytes}`, bytes));
      assert.equal(refused.status, 413, `${what}: ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.kind, 'invalid-input');
      assert.match(refused.body.description ?? '', new RegExp(`the event is ${bytes} bytes of JSON; .* at most ${storeLimit} bytes`), what);
      const rejected = await ask(sized(`nats-${bytes}`, bytes));
      assert.equal(rejected.status, 'rejected', `${what}: ${JSON.stringify(rejected)}`);
      assert.equal(rejected.error?.kind, 'invalid-input');
      assert.match(rejected.error?.message ?? '', new RegExp(`at most ${storeLimit} bytes`), what);
      for (const id of [first, second]) assert.equal(await taken(id), 0, `${what}: nothing was taken`);
    }
    // An event that fits is taken by both, answered after the appends.
    assert.deepEqual(await ask(approved('small')), { status: 'accepted', count: 2 });
    for (const id of [first, second]) {
      await completed(h, id);
    }
    assert.deepEqual(h.executor.failures, []);
  });
});

test('an event some listens cannot record beside what they record with it (a longer key) is taken by the others, answered as theirs; those did not take it', async () => {
  await withSmallStoreIntake(async ({ h, post, ask, taken }) => {
    const first = await waiting(h, 'partly-1');
    const second = await waiting(h, 'partly-2');
    // A listen whose key is 246 characters longer records more beside the event: one that fits the short key's transition only is taken there alone.
    const name = 'w'.repeat(250);
    const { instanceId: long } = await h.executor.start({
      principalId: 'alice',
      invocationKey: 'partly-long',
      document: yaml(`document: { dsl: '1.0.3', namespace: test, name: wait-long, version: '1.0.0' }
do:
  - ${name}:
      listen:
        to:
          one: { with: { type: com.example.approved } }
`),
      input: {},
    });
    await untilListening(h, long, `/do/0/${name}`);
    const partly = await post(sized('partly', storeLimit - 350));
    assert.equal(partly.status, 202, JSON.stringify(partly.body));
    assert.deepEqual(partly.body.matched?.sort(), [first, second].sort());
    assert.equal(await taken(long, `/do/0/${name}`), 0, 'the long key’s listen could not record it, and did not take it');
    for (const id of [first, second]) {
      await completed(h, id);
    }
    // Sent again: answered as taken by those that hold it, nothing appended, the long key's listen still without it.
    const again = await post(sized('partly', storeLimit - 350));
    assert.deepEqual(again.body.matched?.sort(), [first, second].sort());
    assert.equal(await taken(long, `/do/0/${name}`), 0);
    // An event that fits is taken as ever.
    assert.deepEqual(await ask(approved('small')), { status: 'accepted', count: 1 });
    await completed(h, long);
    assert.deepEqual(h.executor.failures, []);
  });
});
