/**
 * POST /workflow-events holds a bounded number of one principal's deliveries in flight
 * (http.eventDeliveriesPerPrincipal): each is matched against the principal's waiting listens (jq,
 * through the evaluator every principal shares) and may append, so without a bound one principal
 * sending thousands at once takes the executor from every other. Past the bound a delivery is
 * refused at once (503 unavailable, nothing stored); another principal's goes through; a slot is
 * given back when its delivery ends, however it ends — answered, refused, or its client gone.
 * Over real parts: HTTP on a socket, the jq worker evaluator, the workflow executor.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonValue } from '../../src/contract/json.js';
import type { ExpressionEvaluator } from '../../src/workflow/exec/jq.js';
import { eventDeliveriesPerPrincipalDefault } from '../../src/deployment/config.js';
import { buildFixtureApp, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';
import { harness, yaml } from './support.js';

/** Paid (correlated by a jq expression: the evaluator's work) and shipped (matched on its type alone). */
const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: wait-paid-shipped, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          all:
            - with: { type: com.example.paid }
              correlate: { order: { from: '\${ .data.order }' } }
            - with: { type: com.example.shipped }
`);

const paid = (id: string, hold: boolean): CloudEvent => ({
  specversion: '1.0',
  id,
  source: 'https://shop.example',
  type: 'com.example.paid',
  data: { order: 'o-1', hold },
});
const shipped = (id: string): CloudEvent => ({ specversion: '1.0', id, source: 'https://shop.example', type: 'com.example.shipped', data: { order: 'o-1' } });

/** An evaluator that holds the evaluations of events marked `hold` until released: deliveries kept in flight. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const state = { waiting: 0, returned: 0, open: () => open() };
  const wrap = (inner: ExpressionEvaluator): ExpressionEvaluator => ({
    evaluate: async (query, input, vars, principal) => {
      const data = (input as { data?: { hold?: JsonValue } } | null)?.data;
      if (data?.hold === true) {
        state.waiting++;
        await opened;
        state.returned++;
      }
      return inner.evaluate(query, input, vars, principal);
    },
    close: () => inner.close(),
  });
  return { state, wrap };
}

async function until(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await delay(5);
  }
}

async function setUp(http: Record<string, JsonValue> = {}) {
  const fixture = await writeHttpFixture({ http });
  const held = gate();
  const h = harness({ evaluator: held.wrap });
  const built = await buildFixtureApp(fixture, new SystemClock(), { workflowEvents: h.executor });
  const address = await built.http.app.listen({ host: '127.0.0.1', port: 0 });
  const post = (who: keyof HttpFixture['tokens'], event: CloudEvent, signal?: AbortSignal) =>
    fetch(`${address}/workflow-events`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', authorization: `Bearer ${fixture.tokens[who]}` },
      body: JSON.stringify(event),
      ...(signal ? { signal } : {}),
    });
  const waiting = async (principalId: string, key: string) => {
    const { instanceId } = await h.executor.start({ principalId, invocationKey: key, document, input: {} });
    for (;;) {
      if ((await h.executor.get(instanceId))?.listens['/do/0/wait']) return instanceId;
      await delay(5);
    }
  };
  return {
    h,
    held,
    post,
    waiting,
    close: async () => {
      held.state.open();
      await built.close();
      await h.close();
      await fixture.dispose();
    },
  };
}

const takenTypes = async (h: ReturnType<typeof harness>, instanceId: string) =>
  (await h.executor.get(instanceId))!.listens['/do/0/wait']!.events.map((taken) => (taken.event as { type: string }).type);

test('past http.eventDeliveriesPerPrincipal deliveries in flight, one more of that principal is refused at once (503, nothing stored); another principal still delivers; freed slots take deliveries again', async () => {
  const bound = eventDeliveriesPerPrincipalDefault;
  const s = await setUp();
  try {
    const alices = await s.waiting('alice', 'a-1');
    const bobs = await s.waiting('bob', 'b-1');

    // `bound` deliveries of alice's, each held in the evaluator; one of them its client gives up on.
    const leaving = new AbortController();
    const inFlight = Array.from({ length: bound }, (_, i) => s.post('alice', paid(`held-${i}`, true), i === 0 ? leaving.signal : undefined));
    await until(() => s.held.state.waiting === bound, `${bound} deliveries are in flight`);
    leaving.abort();
    await inFlight[0]!.catch(() => {});

    // One more that would be held too: refused at once, never reaching the evaluator.
    const over = await Promise.race([s.post('alice', paid('one-more', true)), delay(2_000).then(() => 'still in flight' as const)]);
    if (over === 'still in flight') assert.fail(`a delivery past the bound was taken into flight (${s.held.state.waiting} in flight)`);
    assert.equal(s.held.state.waiting, bound, 'the one past the bound never reached the evaluator');
    assert.equal(over.status, 503);
    const body = (await over.json()) as { kind: string; description: string };
    assert.equal(body.kind, 'unavailable');
    assert.match(body.description, new RegExp(`${bound} .*in flight`));
    assert.match(body.description, /send it again|again once/);

    // One that would be taken at once (no jq): refused too, and nothing of it stored.
    const refused = await s.post('alice', shipped('ship-early'));
    assert.equal(refused.status, 503);
    assert.deepEqual(await takenTypes(s.h, alices), [], 'the refused event is stored nowhere');

    // Bob's delivery at the same time goes through.
    const bobsDelivery = await s.post('bob', shipped('ship-bob'));
    assert.equal(bobsDelivery.status, 202);
    assert.deepEqual(await bobsDelivery.json(), { status: 'accepted', matched: [bobs] });

    // The held ones finish (every one answered, none refused), the one whose client left included.
    s.held.state.open();
    const answers = await Promise.all(inFlight.slice(1).map(async (response) => (await response).status));
    assert.ok(
      answers.every((status) => status === 202 || status === 404),
      `the held deliveries are answered: ${[...new Set(answers)].join(', ')}`,
    );
    await until(() => s.held.state.returned === bound, 'every held evaluation returned');

    // Alice delivers again: every slot came back, the one whose client left included.
    const again = await deliverUntilTaken(() => s.post('alice', shipped('ship-1')));
    assert.equal(again.status, 202);
    assert.deepEqual(await again.json(), { status: 'accepted', matched: [alices] });
    assert.deepEqual(await takenTypes(s.h, alices), ['com.example.paid', 'com.example.shipped']);
  } finally {
    await s.close();
  }
});

/**
 * A delivery sent until it is not refused for the bound (a client's retry), within a deadline: a
 * slot that never came back would refuse it forever. The one whose client left is given back when
 * its delivery ends, a moment after the evaluation returned.
 */
async function deliverUntilTaken(send: () => Promise<Response>): Promise<Response> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const response = await send();
    if (response.status !== 503 || Date.now() > deadline) return response;
    await response.body?.cancel();
    await delay(20);
  }
}

test('a delivery refused or failing gives its slot back: more than the bound of them one after another, then one taken', async () => {
  const bound = eventDeliveriesPerPrincipalDefault;
  const s = await setUp();
  try {
    const alices = await s.waiting('alice', 'a-1');
    const first = await s.post('alice', paid('pay-1', false));
    assert.equal(first.status, 202);
    // Another event under the identity of the one taken: the intake refuses it (409), after it took a slot.
    for (let i = 0; i <= bound; i++) {
      const conflicting = await s.post('alice', { ...paid('pay-1', false), data: { order: 'o-1', other: i } });
      assert.equal(conflicting.status, 409, `conflict ${i}`);
      await conflicting.body?.cancel();
    }
    const taken = await s.post('alice', shipped('ship-1'));
    assert.equal(taken.status, 202, 'every slot was given back');
    assert.deepEqual(await taken.json(), { status: 'accepted', matched: [alices] });
  } finally {
    await s.close();
  }
});

test('http.eventDeliveriesPerPrincipal sets the bound', async () => {
  const s = await setUp({ eventDeliveriesPerPrincipal: 2 });
  try {
    await s.waiting('alice', 'a-1');
    const inFlight = [s.post('alice', paid('held-0', true)), s.post('alice', paid('held-1', true))];
    await until(() => s.held.state.waiting === 2, 'two deliveries are in flight');
    const over = await s.post('alice', paid('held-2', true));
    assert.equal(over.status, 503);
    assert.match(((await over.json()) as { description: string }).description, /2 .*in flight/);
    s.held.state.open();
    await Promise.all(inFlight);
  } finally {
    await s.close();
  }
});

test('past http.eventDeliveriesMax deliveries in flight of all principals, one more is refused at once (503, nothing stored), though its principal is within its own bound; one answered frees one', async () => {
  const s = await setUp({ eventDeliveriesPerPrincipal: 2, eventDeliveriesMax: 3 });
  try {
    await s.waiting('alice', 'a-1');
    const bobs = await s.waiting('bob', 'b-1');
    const inFlight = [s.post('alice', paid('held-a0', true)), s.post('alice', paid('held-a1', true)), s.post('bob', paid('held-b0', true))];
    await until(() => s.held.state.waiting === 3, 'three deliveries are in flight');
    const over = await s.post('bob', shipped('ship-bob'));
    assert.equal(over.status, 503, 'bob has one of his two in flight, but all principals have three of three');
    const body = (await over.json()) as { kind: string; description: string };
    assert.equal(body.kind, 'unavailable');
    assert.match(body.description, /3 events in flight .*http\.eventDeliveriesMax 3/);
    assert.deepEqual(await takenTypes(s.h, bobs), [], 'the refused event is stored nowhere');
    s.held.state.open();
    await Promise.all(inFlight);
    const again = await deliverUntilTaken(() => s.post('bob', shipped('ship-bob')));
    assert.equal(again.status, 202);
    assert.deepEqual(await again.json(), { status: 'accepted', matched: [bobs] });
  } finally {
    await s.close();
  }
});
