/**
 * listen (`one`, `all`, `any` + `until`, correlation, read, timeout) against the executor's
 * intake: an instance records that it waits, a delivered event is matched and appended under the
 * guarded append before `deliver` resolves, an event no listen takes is stored nowhere, and the
 * instance rebuilt from its log equals the live one.
 */
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock } from '../../src/contract/clock.js';
import { storeWith } from '../support/scenario.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { AdapterError } from '../../src/contract/errors.js';
import type { JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import type { ExpressionEvaluator } from '../../src/workflow/exec/jq.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { assertReplayEqual, harness, yaml, type Harness, type HarnessOptions } from './support.js';

let sequence = 0;
const event = (type: string, data: JsonValue, extra: Record<string, JsonValue> = {}): CloudEvent => ({
  specversion: '1.0',
  id: `e-${++sequence}`,
  source: 'https://convoke.dev/test',
  type,
  data,
  ...extra,
});

const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;

/** Starts an instance and waits until its listen at `at` is recorded. */
async function waiting(h: Harness, document: string, input: JsonValue, key: string, at = '/do/0/wait'): Promise<string> {
  const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: key, document: yaml(document), input });
  while (!(await h.executor.get(instanceId))?.listens[at]) await new Promise((r) => setTimeout(r, 5));
  return instanceId;
}

/** A document whose one task, `wait`, listens `to` (YAML lines indented under `to:`) with the `extra` lines of the listen task after it. */
const listenDocument = (name: string, to: string, extra = '') => `${head(name)}do:
  - wait:
      listen:
${extra}        to:
${to}`;

/** Runs `fn` on a new harness (its options, and a held evaluator released whatever happened), closed after. */
async function withHarness(fn: (h: Harness) => Promise<void>, options: HarnessOptions = {}, gate?: { release(): void }): Promise<void> {
  const h = harness(options);
  try {
    await fn(h);
  } finally {
    gate?.release(); // Whatever failed, a held evaluation ends and the executor can close.
    await h.close();
  }
}

/** Waits for the instance to end, asserts it completed (with `output` when given) and that replay rebuilds it. */
async function completed(h: Harness, id: string, output?: JsonValue): Promise<WorkflowRecord> {
  const record = await h.executor.wait(id, 5000);
  assert.equal(record.status, 'completed', JSON.stringify(record.error));
  if (output !== undefined) assert.deepEqual(record.output, output);
  await assertReplayEqual(h, id);
  return record;
}

/** Delivers `late` while the gate holds a verdict, releases the verdict once the delivery waits on the instance (or was answered), and answers the delivery. */
async function deliveredAfterVerdict(h: Harness, id: string, gate: { release(): void }, late: CloudEvent): Promise<{ matched: string[] }> {
  let settled = false;
  const delivery = h.executor.deliver(late, null).finally(() => (settled = true));
  const stream = h.executor.kernel.held().find((held) => held.id === id)!;
  while (!settled && stream.waiters.size === 0) await new Promise((resolve) => setImmediate(resolve));
  gate.release();
  return delivery;
}

test('listen one with correlation: only the matching, correlated event is taken, once; others are answered unmatched and not stored', () =>
  withHarness(async (h) => {
    const document = listenDocument(
      'one',
      `          one:
            with: { type: com.example.order.paid, source: 'https://convoke\\.dev/.*' }
            correlate:
              order: { from: '\${ .data.orderId }', expect: '\${ .orderId }' }
`,
    );
    const id = await waiting(h, document, { orderId: 'o-1' }, 'listen-one');
    const recorded = (await h.executor.get(id))!.listens['/do/0/wait']!;
    assert.deepEqual(
      (recorded.to as { one: { correlate: { order: { expect: JsonValue } } } }).one.correlate.order.expect,
      'o-1',
      'the expectation is recorded evaluated',
    );
    const revision = (await h.executor.get(id))!.revision;

    assert.deepEqual(await h.executor.deliver(event('com.example.order.shipped', { orderId: 'o-1' }), null), { matched: [] });
    assert.deepEqual(await h.executor.deliver(event('com.example.order.paid', { orderId: 'o-2' }), null), { matched: [] }, 'another order');
    assert.deepEqual(await h.executor.deliver(event('com.example.order.paid', { orderId: 'o-1' }, { source: 'https://elsewhere' }), null), { matched: [] });
    assert.deepEqual(await h.executor.deliver(event('com.example.order.paid', { orderId: 'o-1' }), 'bob'), { matched: [] }, 'another principal');
    assert.equal((await h.executor.get(id))!.revision, revision, 'nothing was stored for unmatched events');

    const paid = event('com.example.order.paid', { orderId: 'o-1', amount: 5 });
    assert.deepEqual(await h.executor.deliver(paid, 'alice'), { matched: [id] });
    assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 1, 'appended before deliver resolved');
    await completed(h, id, [{ orderId: 'o-1', amount: 5 }]);
    assert.deepEqual(await h.executor.deliver(paid, null), { matched: [id] }, 'a redelivery (a publisher retrying) is answered as taken');
    assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 1, 'and not taken twice');
    assert.deepEqual(await h.executor.deliver(event('com.example.order.paid', { orderId: 'o-1' }), null), { matched: [] }, 'the listen has ended');
    await assertReplayEqual(h, id);
  }));

test("listen correlation named __proto__: its declared expectation and the value taken are recorded and held to as any name's", () =>
  withHarness(async (h) => {
    const document = listenDocument(
      'proto',
      `          all:
            - with: { type: com.example.a }
              correlate:
                __proto__: { from: '\${ .data.key }', expect: { k: 1 } }
            - with: { type: com.example.b }
              correlate:
                __proto__: { from: '\${ .data.key }' }
`,
    );
    const id = await waiting(h, document, {}, 'listen-proto');
    assert.deepEqual(await h.executor.deliver(event('com.example.b', { key: { k: 2 } }), null), { matched: [] }, 'another value than the one declared');
    assert.deepEqual(await h.executor.deliver(event('com.example.a', { key: { k: 1 } }), null), { matched: [id] });
    const taken = (await h.executor.get(id))!.listens['/do/0/wait']!;
    assert.ok(Object.hasOwn(taken.events[0]!.correlation, '__proto__'), 'the correlation holds the value taken');
    await assertReplayEqual(h, id);
    assert.deepEqual(await h.executor.deliver(event('com.example.b', { key: { k: 2 } }), null), { matched: [] }, 'another value than the one taken');
    assert.deepEqual(await h.executor.deliver(event('com.example.b', { key: { k: 1 } }), null), { matched: [id] });
    await completed(h, id, [{ key: { k: 1 } }, { key: { k: 1 } }]);
  }));

test('listen all: each filter once, in any order; output in log order; read envelope', () =>
  withHarness(async (h) => {
    const document = listenDocument(
      'all',
      `          all:
            - with: { type: com.example.temperature, data: '\${ .value > 38 }' }
            - with: { type: com.example.bpm, data: '\${ .value > 100 }' }
`,
      '        read: envelope\n',
    );
    const id = await waiting(h, document, {}, 'listen-all');
    const bpm = event('com.example.bpm', { value: 120 });
    assert.deepEqual(await h.executor.deliver(event('com.example.temperature', { value: 37 }), null), { matched: [] }, 'the predicate is false');
    assert.deepEqual(await h.executor.deliver(bpm, null), { matched: [id] });
    assert.deepEqual(await h.executor.deliver(event('com.example.bpm', { value: 130 }), null), { matched: [] }, 'that filter is satisfied already');
    const temperature = event('com.example.temperature', { value: 39 });
    assert.deepEqual(await h.executor.deliver(temperature, null), { matched: [id] });
    await completed(h, id, [bpm, temperature]);
  }));

test('listen any until: events matching until end the wait and are left out; an until expression is evaluated after each event', () =>
  withHarness(async (h) => {
    const consumed = listenDocument(
      'until-consumed',
      `          any:
            - with: { type: com.example.reading }
          until:
            one: { with: { type: com.example.done } }
`,
    );
    const a = await waiting(h, consumed, {}, 'until-consumed');
    for (const n of [1, 2]) assert.deepEqual(await h.executor.deliver(event('com.example.reading', { n }), null), { matched: [a] });
    assert.deepEqual(await h.executor.deliver(event('com.example.done', {}), null), { matched: [a] });
    await completed(h, a, [{ n: 1 }, { n: 2 }]);

    const condition = listenDocument('until-condition', `          any: []\n          until: ( . | length ) > 2\n`);
    const b = await waiting(h, condition, {}, 'until-condition');
    for (const n of [1, 2, 3]) assert.deepEqual(await h.executor.deliver(event('com.example.anything', { n }), null), { matched: [b] });
    const second = await completed(h, b, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    assert.deepEqual(second.steps['/do/0/wait>until[1]'], { ok: false });
    assert.deepEqual(second.steps['/do/0/wait>until[2]'], { ok: true });
  }));

test('listen with a task timeout: no event in time faults the task with a timeout; a later event is not taken', () =>
  withHarness(async (h) => {
    const document = `${listenDocument('timeout', '          one: { with: { type: com.example.late } }\n')}      timeout: { after: { milliseconds: 300 } }\n`;
    const id = await waiting(h, document, {}, 'listen-timeout');
    const record = await h.executor.wait(id, 5000);
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.status, 408);
    assert.deepEqual(await h.executor.deliver(event('com.example.late', {}), null), { matched: [] });
    await assertReplayEqual(h, id);
  }));

test('listen until races: an event matching both to and until ends the listen; concurrent deliveries are decided by the order the log records', () =>
  withHarness(async (h) => {
    const document = (name: string) =>
      listenDocument(
        name,
        `          any:
            - with: { type: com.example.reading }
          until:
            one: { with: { type: com.example.reading, subject: last } }
`,
      );
    // One event satisfying both: taken once, for until (its filters are tried first), and left out of the output.
    const both = await waiting(h, document('until-both'), {}, 'until-both');
    assert.deepEqual(await h.executor.deliver(event('com.example.reading', { n: 1 }), null), { matched: [both] });
    const last = event('com.example.reading', { n: 2 }, { subject: 'last' });
    assert.deepEqual(await h.executor.deliver(last, null), { matched: [both] });
    const ended = await completed(h, both, [{ n: 1 }]);
    assert.deepEqual(
      ended.listens['/do/0/wait']!.events.map((taken) => [taken.group, (taken.event as { id: string }).id]),
      [
        ['to', `e-${sequence - 1}`],
        ['until', last.id],
      ],
    );

    // The last `to` event and the `until` event at once: whichever the log records first decides.
    for (let round = 0; round < 6; round++) {
      const id = await waiting(h, document('until-race'), {}, `until-race-${round}`);
      const reading = event('com.example.reading', { round });
      const done = event('com.example.reading', {}, { subject: 'last' });
      await Promise.all(
        round % 2 === 0
          ? [h.executor.deliver(reading, null), h.executor.deliver(done, null)]
          : [h.executor.deliver(done, null), h.executor.deliver(reading, null)],
      );
      const record = await completed(h, id);
      const order = record.listens['/do/0/wait']!.events.map((taken) => (taken.event as { id: string }).id);
      assert.equal(order.at(-1), done.id, 'nothing is taken after the until event');
      assert.deepEqual(record.output, order.includes(reading.id) ? [{ round }] : [], `log order ${order.join(', ')}`);
    }
  }));

test('listen until expression race: events delivered together end the listen at the first, in log order, whose until held', () =>
  withHarness(async (h) => {
    const document = listenDocument('until-expression-race', `          any: []\n          until: ( . | length ) >= 1\n`);
    for (let round = 0; round < 4; round++) {
      const id = await waiting(h, document, {}, `until-expression-race-${round}`);
      const first = event('com.example.anything', { n: 1 });
      const second = event('com.example.anything', { n: 2 });
      await Promise.all([h.executor.deliver(first, null), h.executor.deliver(second, null)]);
      const record = await completed(h, id);
      const taken = record.listens['/do/0/wait']!.events;
      assert.deepEqual(record.output, [(taken[0]!.event as { data: JsonValue }).data], 'the output is the events up to the first whose until held');
      assert.deepEqual(record.steps['/do/0/wait>until[0]'], { ok: true });
      assert.equal(record.steps['/do/0/wait>until[1]'], undefined, 'until is not evaluated past the event that ended the listen');
    }
  }));

/** A jq evaluator whose answers to the programs `holds` picks are held until `release()`: `reached` resolves once one is held. */
function holding(holds: (query: string) => boolean) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let reach!: () => void;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  const wrap = (jq: ExpressionEvaluator): ExpressionEvaluator => ({
    evaluate: async (query, input, vars, principal) => {
      const answer = await jq.evaluate(query, input, vars, principal);
      if (holds(query)) {
        reach();
        await released;
      }
      return answer;
    },
    close: () => jq.close(),
  });
  return { wrap, reached, release };
}

const untilHeldDocument = listenDocument('until-expression-held', `          any: []\n          until: ( . | length ) >= 1\n`);

test('listen until expression held: an event delivered while the verdict is being evaluated waits for it; past the bound it is answered unavailable and not taken', async () => {
  const gate = holding((query) => query.includes('length'));
  await withHarness(
    async (h) => {
      const id = await waiting(h, untilHeldDocument, {}, 'until-held-bound');
      const first = event('com.example.anything', { n: 1 });
      assert.deepEqual(await h.executor.deliver(first, null), { matched: [id] });
      await gate.reached; // The interpreter is evaluating until[0] on the first event; its verdict (true) is held.
      const second = event('com.example.anything', { n: 2 });
      const answer = await h.executor.deliver(second, null).then(
        (delivery) => ({ delivery }),
        (error: unknown) => ({ error }),
      );
      assert.ok('error' in answer, `the event was answered ${JSON.stringify(answer)} while the verdict before it was unknown`);
      assert.ok(answer.error instanceof AdapterError && answer.error.kind === 'unavailable', String(answer.error));
      assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 1, 'nothing was taken while the verdict was unknown');

      gate.release();
      const record = await completed(h, id, [{ n: 1 }]);
      assert.deepEqual(record.steps['/do/0/wait>until[0]'], { ok: true });
      assert.deepEqual(await h.executor.deliver(second, null), { matched: [] }, 'sent again, it finds the listen ended, as for a satisfied one');
      assert.equal(record.listens['/do/0/wait']!.events.length, 1);
      await assertReplayEqual(h, id);
    },
    { evaluator: gate.wrap, listenUntilWaitMs: 200 },
    gate,
  );
});

test('listen until expression held: an event waiting for the verdict that ends the listen is not taken and answered no-match', async () => {
  const gate = holding((query) => query.includes('length'));
  await withHarness(
    async (h) => {
      const id = await waiting(h, untilHeldDocument, {}, 'until-held-ends');
      assert.deepEqual(await h.executor.deliver(event('com.example.anything', { n: 1 }), null), { matched: [id] });
      await gate.reached;
      const late = await deliveredAfterVerdict(h, id, gate, event('com.example.anything', { n: 2 }));
      assert.deepEqual(late, { matched: [] }, 'the verdict before it ended the listen: taken nothing');
      const record = await completed(h, id, [{ n: 1 }]);
      assert.equal(record.listens['/do/0/wait']!.events.length, 1, 'the log holds no event after the one that ended the listen');
      assert.equal(record.steps['/do/0/wait>until[1]'], undefined);
    },
    { evaluator: gate.wrap },
    gate,
  );
});

test('listen until expression false: an event waiting for a verdict that does not end the listen is taken after it', async () => {
  const gate = holding((query) => query.includes('length'));
  await withHarness(
    async (h) => {
      const document = listenDocument('until-expression-later', `          any: []\n          until: ( . | length ) >= 2\n`);
      const id = await waiting(h, document, {}, 'until-held-later');
      assert.deepEqual(await h.executor.deliver(event('com.example.anything', { n: 1 }), null), { matched: [id] });
      await gate.reached;
      assert.deepEqual(await deliveredAfterVerdict(h, id, gate, event('com.example.anything', { n: 2 })), { matched: [id] });
      const record = await completed(h, id, [{ n: 1 }, { n: 2 }]);
      assert.deepEqual(record.steps['/do/0/wait>until[0]'], { ok: false });
      assert.deepEqual(record.steps['/do/0/wait>until[1]'], { ok: true });
    },
    { evaluator: gate.wrap },
    gate,
  );
});

test('received events meet the instance’s log budget: past it one is not taken, and the room kept for its end stays its own', () =>
  withHarness(
    async (h) => {
      const id = await waiting(
        h,
        listenDocument(
          'flooded',
          `          any:\n            - with: { type: com.example.tick }\n          until:\n            one:\n              with: { type: com.example.stop }\n`,
        ),
        {},
        'flood',
      );
      const big = 'x'.repeat(10 * 1024);
      let taken = 0;
      for (let i = 0; i < 40; i++) if ((await h.executor.deliver(event('com.example.tick', big), null)).matched.length > 0) taken++;
      const held = h.executor.kernel.held().find((instance) => instance.id === id)!;
      assert.ok(taken > 0 && taken < 40, `some taken, then none: ${taken}`);
      assert.ok(held.logBytes <= 64 * 1024, `the log stays within its byte budget: ${held.logBytes}`);
      assert.ok(held.known.size <= 20, `and its transitions within theirs: ${held.known.size}`);
      const record = (await h.executor.get(id))!;
      assert.equal(record.status, 'running');
      assert.equal(record.listens['/do/0/wait']!.events.length, taken);
      // Its end is still its own: a cancel is recorded in the room kept for it.
      assert.equal((await h.executor.cancel(id, 'flooded')).status, 'cancelled');
      await assertReplayEqual(h, id);
    },
    { transitionsMax: 20, logBytesMax: 64 * 1024 },
  ));

test('an instance waiting for its until verdict holds only itself: the other listening instances, another principal’s too, take the event', async () => {
  const gate = holding((query) => query.includes('length'));
  await withHarness(
    async (h) => {
      // Started first, so offered first: its verdict on the first event is held.
      const held = await waiting(h, untilHeldDocument, {}, 'held-first');
      const { instanceId: other } = await h.executor.start({
        principalId: 'bob',
        invocationKey: 'other',
        document: yaml(
          listenDocument(
            'other-listener',
            `          any:\n            - with: { type: com.example.anything }\n          until:\n            one:\n              with: { type: com.example.stop }\n`,
          ),
        ),
        input: {},
      });
      while (!(await h.executor.get(other))?.listens['/do/0/wait']) await new Promise((resolve) => setTimeout(resolve, 5));
      assert.deepEqual(new Set((await h.executor.deliver(event('com.example.anything', { n: 1 }), null)).matched), new Set([held, other]));
      await gate.reached;
      const second = event('com.example.anything', { n: 2 });
      await assert.rejects(h.executor.deliver(second, null), (error: unknown) => error instanceof AdapterError && error.kind === 'unavailable');
      assert.equal((await h.executor.get(other))!.listens['/do/0/wait']!.events.length, 2, 'the other instance took it meanwhile');
      assert.equal((await h.executor.get(held))!.listens['/do/0/wait']!.events.length, 1, 'the waiting one did not');
      gate.release();
      await completed(h, held, [{ n: 1 }]);
      // Sent again: the other instance answers it taken already (once), the ended listen takes nothing.
      assert.deepEqual(await h.executor.deliver(second, null), { matched: [other] });
      assert.equal((await h.executor.get(other))!.listens['/do/0/wait']!.events.length, 2);
      await assertReplayEqual(h, other);
    },
    { evaluator: gate.wrap, listenUntilWaitMs: 100 },
    gate,
  );
});

test('an event more instances listen for than one delivery appends to: each send appends it to that many more, answered unavailable until every listen was offered it, then accepted by all; none takes it twice', () =>
  withHarness(
    async (h) => {
      const document = listenDocument('many', `          one: { with: { type: com.example.broadcast } }\n`);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await waiting(h, document, {}, `many-${i}`));
      const broadcast = event('com.example.broadcast', { n: 1 });
      const took = async () =>
        (await Promise.all(ids.map((id) => h.executor.get(id)))).filter((r) => r!.listens['/do/0/wait']!.events.length > 0 || r!.status === 'completed').length;
      const partial = (error: unknown) => error instanceof AdapterError && error.kind === 'unavailable' && /publish it again for the rest/.test(error.message);
      await assert.rejects(h.executor.deliver(broadcast, null), partial);
      assert.equal(await took(), 2, 'the first send appends it to two');
      await assert.rejects(h.executor.deliver(broadcast, null), partial);
      assert.equal(await took(), 4, 'the second to two more: those that took it count as taken, not against the bound');
      const delivered = await h.executor.deliver(broadcast, null);
      assert.deepEqual([...delivered.matched].sort(), [...ids].sort(), 'the third reaches the last and answers every instance that holds it');
      for (const id of ids) {
        const record = await completed(h, id, [{ n: 1 }]);
        assert.equal(record.listens['/do/0/wait']!.events.length, 1, 'taken once');
      }
      // Another principal's send reaches none of them, whatever the bound.
      assert.deepEqual(await h.executor.deliver(event('com.example.broadcast', { n: 2 }), 'mallory'), { matched: [] });

      // Past the bound, instances that hold the event already are still answered: bob's two took it from bob's own send.
      const later: string[] = [];
      for (const [principalId, key] of [
        ['alice', 'later-a1'],
        ['alice', 'later-a2'],
        ['bob', 'later-b1'],
        ['bob', 'later-b2'],
      ] as const) {
        const { instanceId } = await h.executor.start({ principalId, invocationKey: key, document: yaml(document), input: {} });
        while (!(await h.executor.get(instanceId))?.listens['/do/0/wait']) await new Promise((r) => setTimeout(r, 5));
        later.push(instanceId);
      }
      const third = event('com.example.broadcast', { n: 3 });
      assert.deepEqual([...(await h.executor.deliver(third, 'bob')).matched].sort(), later.slice(2).sort());
      assert.deepEqual(
        [...(await h.executor.deliver(third, null)).matched].sort(),
        [...later].sort(),
        'alice’s two appended, bob’s two answered as holding it',
      );
    },
    { eventMatchesMax: 2 },
  ));

test('a burst of events nothing takes shares the look for other workers’ new instances: the store is listed at most twice, and an instance started meanwhile is still found', async () => {
  const clock = new SystemClock();
  const memory = new MemoryEventStore({ clock });
  let listings = 0;
  const counted = storeWith(memory, (real) => ({
    runningWorkflowIds: () => {
      listings++;
      return real.runningWorkflowIds();
    },
  }));
  await withHarness(
    async (h) => {
      const unmatched = () => h.executor.deliver(event('com.example.nobody', { n: 1 }), null);
      assert.deepEqual(await unmatched(), { matched: [] });
      assert.equal(listings, 1, 'one delivery, one look');
      listings = 0;
      const burst = await Promise.all(Array.from({ length: 50 }, unmatched));
      assert.ok(burst.every((answer) => answer.matched.length === 0));
      assert.ok(listings <= 2, `50 deliveries at once listed the store ${listings} times`);

      // Another worker (its own executor on the same store) starts an instance that listens: a delivery finds it by the look.
      const other = harness({ store: memory, clock });
      let closed = false;
      try {
        const { instanceId } = await other.executor.start({
          principalId: 'alice',
          invocationKey: 'elsewhere',
          document: yaml(listenDocument('elsewhere', '          one: { with: { type: com.example.found } }\n')),
          input: {},
        });
        while (!(await other.executor.get(instanceId))?.listens['/do/0/wait']) await new Promise((r) => setTimeout(r, 5));
        await other.close();
        closed = true;
        const found = await h.executor.deliver(event('com.example.found', { n: 2 }), null);
        assert.deepEqual(found.matched, [instanceId]);
      } finally {
        if (!closed) await other.close();
      }
    },
    { store: counted, clock },
  );
});

test('a publisher’s retry of an event taken by one listen is not taken again by a listen the instance started after it (a loop’s next iteration)', () =>
  withHarness(async (h) => {
    const document = `${head('loop-listen')}do:
  - each:
      for: { in: '\${ [1, 2] }', each: n }
      do:
        - wait:
            listen:
              to:
                one: { with: { type: com.example.paid } }
`;
    const { instanceId: id } = await h.executor.start({ principalId: 'alice', invocationKey: 'loop-listen', document: yaml(document), input: {} });
    const listening = async (count: number) => {
      while (Object.keys((await h.executor.get(id))!.listens).length < count) await new Promise((r) => setTimeout(r, 5));
    };
    await listening(1);
    const paid = event('com.example.paid', { amount: 5 });
    assert.deepEqual(await h.executor.deliver(paid, null), { matched: [id] });
    await listening(2);
    // The answer was lost: the publisher sends the same event again while the second iteration waits.
    assert.deepEqual(await h.executor.deliver(paid, null), { matched: [id] }, 'answered as taken');
    const second = (await h.executor.get(id))!.listens['/do/0/each/do/0/wait[1]']!;
    assert.deepEqual(second.events, [], 'the second listen did not take the first event again');
    const next = event('com.example.paid', { amount: 7 });
    assert.deepEqual(await h.executor.deliver(next, null), { matched: [id] });
    const record = await completed(h, id);
    const taken = Object.values(record.listens).map((listen) => listen.events.map((e) => (e.event as { id: string }).id));
    assert.deepEqual(taken, [[paid.id], [next.id]], 'each event taken once');
  }));

test('an event one listen took while another, already waiting, could not take it yet: the publisher’s retry reaches the other', async () => {
  const gate = holding((query) => query.includes('length'));
  await withHarness(
    async (h) => {
      const document = `${head('fork-listens')}do:
  - both:
      fork:
        branches:
          - plain:
              listen:
                to:
                  any: []
                  until:
                    one: { with: { type: com.example.stop } }
          - counted:
              listen:
                to:
                  any: [ { with: { type: com.example.anything } } ]
                  until: ( . | length ) >= 2
`;
      const { instanceId: id } = await h.executor.start({ principalId: 'alice', invocationKey: 'fork-listens', document: yaml(document), input: {} });
      while (Object.keys((await h.executor.get(id))!.listens).length < 2) await new Promise((r) => setTimeout(r, 5));
      const [plain, counted] = Object.keys((await h.executor.get(id))!.listens).sort();
      assert.deepEqual(await h.executor.deliver(event('com.example.anything', { n: 1 }), null), { matched: [id] });
      const first = (await h.executor.get(id))!.listens;
      assert.deepEqual([first[plain!]!.events.length, first[counted!]!.events.length], [1, 1], 'both listens took the first event, in one delivery');
      await gate.reached; // The counted listen's verdict on its first event is held.
      const second = event('com.example.anything', { n: 2 });
      await assert.rejects(h.executor.deliver(second, null), (error: unknown) => error instanceof AdapterError && error.kind === 'unavailable');
      gate.release();
      while ((await h.executor.get(id))!.steps[`${counted}>until[0]`] === undefined) await new Promise((r) => setTimeout(r, 5));
      assert.deepEqual(await h.executor.deliver(second, null), { matched: [id] }, 'sent again');
      assert.deepEqual(await h.executor.deliver(event('com.example.stop', {}), null), { matched: [id] });
      const record = await completed(h, id);
      const ids = (at: string) => record.listens[at]!.events.map((taken) => (taken.event as { id: string }).id);
      assert.equal(ids(plain!).filter((taken) => taken === second.id).length, 1, 'the plain listen took it once');
      assert.deepEqual(ids(counted!).at(-1), second.id, 'the counted listen, waiting when it first arrived, took it on the retry');
    },
    { evaluator: gate.wrap, listenUntilWaitMs: 100 },
    gate,
  );
});

test('an event of another type under the same source and id is another event: one publisher cannot have another’s answered as taken and left out of the log', () =>
  withHarness(async (h) => {
    const document = listenDocument(
      'forged-id',
      `          all:
            - with: { type: com.example.ping }
            - with: { type: com.example.bank.paid }
`,
    );
    const id = await waiting(h, document, {}, 'forged-id');
    // The publisher allowed `ping` claims the source and id the bank's next event will carry.
    const forged = event('com.example.ping', {}, { source: 'https://bank.example', id: 'payment-1' });
    const paid = event('com.example.bank.paid', { amount: 5 }, { source: 'https://bank.example', id: 'payment-1' });
    assert.deepEqual(await h.executor.deliver(forged, null), { matched: [id] });
    assert.deepEqual(await h.executor.deliver(paid, null), { matched: [id] });
    const record = await completed(h, id, [{}, { amount: 5 }]);
    assert.deepEqual(
      record.listens['/do/0/wait']!.events.map((taken) => (taken.event as { type: string }).type),
      ['com.example.ping', 'com.example.bank.paid'],
      'the bank’s event, answered as taken, is in the log',
    );
    assert.deepEqual(await h.executor.deliver(paid, null), { matched: [id] }, 'its retry is answered as taken');
    assert.equal((await h.executor.get(id))!.listens['/do/0/wait']!.events.length, 2, 'and appends nothing');
  }));

test("an event filter's expressions see the task's runtime arguments ($input, $context, $workflow, $task), as every task-definition expression does", () =>
  withHarness(async (h) => {
    const document = `${head('arguments')}do:
  - init:
      set: { region: eu }
      export: { as: '\${ {region: .region} }' }
  - wait:
      input: { from: '\${ $workflow.input.order }' }
      listen:
        to:
          one:
            with:
              type: com.example.order.paid
              data: '\${ .orderId == $input.id and .region == $context.region and .tag == $workflow.input.tag and .by == $task.name }'
            correlate:
              amount: { from: '\${ .data.amount * $input.rate }', expect: 10 }
`;
    const id = await waiting(h, document, { order: { id: 'o-1', rate: 2 }, tag: 't' }, 'arguments', '/do/1/wait');
    const paid = (data: JsonValue) => event('com.example.order.paid', data);
    const revision = (await h.executor.get(id))!.revision;
    assert.deepEqual(await h.executor.deliver(paid({ orderId: 'o-2', region: 'eu', tag: 't', by: 'wait', amount: 5 }), null), { matched: [] }, 'another order');
    assert.deepEqual(
      await h.executor.deliver(paid({ orderId: 'o-1', region: 'us', tag: 't', by: 'wait', amount: 5 }), null),
      { matched: [] },
      'another region',
    );
    assert.deepEqual(
      await h.executor.deliver(paid({ orderId: 'o-1', region: 'eu', tag: 't', by: 'wait', amount: 4 }), null),
      { matched: [] },
      'another amount',
    );
    assert.equal((await h.executor.get(id))!.revision, revision, 'nothing was stored for unmatched events');
    const matching = { orderId: 'o-1', region: 'eu', tag: 't', by: 'wait', amount: 5 };
    assert.deepEqual(await h.executor.deliver(paid(matching), null), { matched: [id] });
    await completed(h, id, [matching]);
  }));

test("an event filter of the first task reading $workflow.startedAt sees the start's commit instant, though the start waits for the first commit", () => {
  // Each reading a few milliseconds later: an instant read before the start committed is another.
  const clock = new (class extends SystemClock {
    private offsetMs = 0;
    override nowMs(): number {
      this.offsetMs += 3;
      return super.nowMs() + this.offsetMs;
    }
  })();
  return withHarness(
    async (h) => {
      const document = listenDocument(
        'started-at',
        `          one:\n            with: { type: com.example.stamp, data: '\${ .at == $workflow.startedAt.epoch.milliseconds }' }\n`,
      );
      const id = await waiting(h, document, {}, 'started-at');
      const startedAtMs = (await h.executor.get(id))!.startedAtMs;
      assert.deepEqual(await h.executor.deliver(event('com.example.stamp', { at: startedAtMs }), null), { matched: [id] });
      await completed(h, id);
    },
    { clock, store: new MemoryEventStore({ clock }) },
  );
});

test("an event filter in a loop sees the loop's variables: each iteration's listen takes the event of its own item", () =>
  withHarness(async (h) => {
    const document = `${head('loop')}do:
  - each:
      for: { in: '\${ .orders }', each: order, at: n }
      do:
        - wait:
            listen:
              to:
                one:
                  with: { type: com.example.order.paid, data: '\${ .orderId == $order and .n == $n }' }
`;
    const { instanceId: id } = await h.executor.start({ principalId: 'alice', invocationKey: 'loop', document: yaml(document), input: { orders: ['a', 'b'] } });
    for (const [n, order] of ['a', 'b'].entries()) {
      while (Object.keys((await h.executor.get(id))!.listens).length <= n) await new Promise((r) => setTimeout(r, 5));
      assert.deepEqual(
        await h.executor.deliver(event('com.example.order.paid', { orderId: order === 'a' ? 'b' : 'a', n }), null),
        { matched: [] },
        'another item',
      );
      assert.deepEqual(await h.executor.deliver(event('com.example.order.paid', { orderId: order, n }), null), { matched: [id] }, `item ${order}`);
    }
    await completed(h, id);
  }));

test('an event filter reading $workflow over an input as deep as a caller may give records its arguments, and the listen takes the event', () =>
  withHarness(async (h) => {
    const document = listenDocument(
      'deep-arguments',
      `          one:\n            with: { type: com.example.tagged, data: '\${ .tag == $workflow.input.tag }' }\n`,
    );
    // 64 levels: the input itself, then `deep` holding 63 (`{}` is one level).
    let deep: JsonValue = {};
    for (let level = 1; level < limits.jsonDepthMax - 1; level++) deep = { a: deep };
    const { instanceId } = await h.executor.start({
      principalId: 'alice',
      invocationKey: 'deep-arguments',
      document: yaml(document),
      input: { tag: 't', deep },
    });
    const started = await h.executor.wait(instanceId, 300).catch(() => undefined);
    assert.equal(started?.status ?? 'running', 'running', `the listen waits: ${JSON.stringify(started?.error)}`);
    for (let tries = 0; !(await h.executor.get(instanceId))?.listens['/do/0/wait'] && tries < 400; tries++) await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(await h.executor.deliver(event('com.example.tagged', { tag: 't' }), null), { matched: [instanceId] });
    await completed(h, instanceId, [{ tag: 't' }]);
  }));
