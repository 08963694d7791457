/**
 * A listen inside a task whose own timeout fired: the enclosing task faulted (and a `try` caught
 * it, so the instance goes on), its work stopped, and nothing will ever read what that listen
 * takes. Over NATS (a real nats-server, request/reply), such a listen takes nothing: an event only
 * it would take is answered no-match and stored nowhere, and an event it would take beside a live
 * listen is taken by the live one alone, without waiting for an `until` verdict the stopped listen
 * will never record. Nor does it take an event at or after the instant the enclosing task times
 * out, though that timeout has not committed yet: the event's append is guarded by that instant
 * as by the listen's own timeout (on an injected clock).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { withIntake } from './intake-support.js';
import { assertReplayEqual, eventually, yaml } from './support.js';

const event = (id: string, type: string): CloudEvent => ({ specversion: '1.0', id, source: 'https://convoke.dev/test', type, data: { id } });

/**
 * `outer` times out while `stale` waits, with an `until` expression that never holds; the `try`
 * catches the timeout, and `live` then waits for two ticks.
 */
const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: enclosing-timeout, version: '1.0.0' }
do:
  - guarded:
      try:
        - outer:
            timeout: { after: { milliseconds: 200 } }
            do:
              - stale:
                  listen:
                    to:
                      any:
                        - with: { type: com.example.late }
                        - with: { type: com.example.tick }
                      until: '\${ false }'
      catch:
        errors: { with: { status: 408 } }
  - live:
      listen:
        to:
          any:
            - with: { type: com.example.tick }
          until: '\${ length >= 2 }'
`);

const outer = '/do/0/guarded/try/0/outer';
const stale = `${outer}/do/0/stale`;
const live = '/do/1/live';

test('a listen whose enclosing task timed out takes nothing: its events are answered no-match, and a live listen of the instance takes its own without waiting for it', () =>
  withIntake({ listenUntilWaitMs: 300 }, async (h, ask) => {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'enclosing', document, input: {} });
    await eventually(async () => (await h.executor.get(instanceId))?.listens[live] !== undefined, 'the timeout caught and the live listen waiting');
    const record = (await h.executor.get(instanceId))!;
    assert.equal(record.tasks[outer]?.state, 'faulted', 'the enclosing task timed out');
    const revision = record.revision;

    assert.deepEqual(await ask(event('late-1', 'com.example.late')), { status: 'no-match' }, 'only the stopped listen would take it');
    assert.equal((await h.executor.get(instanceId))!.revision, revision, 'nothing stored');

    assert.deepEqual(await ask(event('tick-1', 'com.example.tick')), { status: 'accepted', count: 1 });
    assert.deepEqual(
      await ask(event('tick-2', 'com.example.tick')),
      { status: 'accepted', count: 1 },
      'no wait for a verdict the stopped listen never records',
    );
    const ended = await h.executor.wait(instanceId, 5000);
    assert.equal(ended.status, 'completed', JSON.stringify(ended.error));
    assert.deepEqual(ended.output, [{ id: 'tick-1' }, { id: 'tick-2' }]);
    assert.equal(ended.listens[stale]!.events.length, 0, 'the stopped listen took nothing');
    await assertReplayEqual(h, instanceId);
  }));

test('an event at the instant an enclosing task times out, before that timeout commits, is not taken: answered no-match, nothing stored', () => {
  const clock = new VirtualClock();
  return withIntake({ clock, store: new MemoryEventStore({ clock }) }, async (h, ask) => {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'enclosing-instant', document, input: {} });
    await eventually(async () => (await h.executor.get(instanceId))?.listens[stale] !== undefined, 'the listen waiting');
    const record = (await h.executor.get(instanceId))!;
    const dueAtMs = record.timers[`${outer}@timeout`]!.dueAtMs;
    clock.set(dueAtMs); // The due timer has not fired yet: the event's append meets the instant first.
    assert.deepEqual(await ask(event('late-at', 'com.example.late')), { status: 'no-match' }, 'the enclosing timeout bounds the append, exclusive');
    assert.equal((await h.executor.get(instanceId))!.revision, record.revision, 'nothing stored');

    await clock.advance(0);
    await eventually(async () => (await h.executor.get(instanceId))?.listens[live] !== undefined, 'the timeout caught and the live listen waiting');
    assert.equal((await h.executor.get(instanceId))!.listens[stale]!.events.length, 0, 'the stopped listen took nothing');
    await assertReplayEqual(h, instanceId);
  });
});

/** `outer` iterates each order it takes (`foreach`), listening in the iteration for that order's payment. */
const iterating = yaml(`document: { dsl: '1.0.3', namespace: test, name: enclosing-foreach, version: '1.0.0' }
do:
  - outer:
      timeout: { after: { milliseconds: 1000 } }
      listen:
        to:
          one: { with: { type: com.example.order } }
      foreach:
        do:
          - paid:
              listen:
                to:
                  one: { with: { type: com.example.paid } }
`);

test('a listen inside the iteration of a foreach listen runs on past that listen’s timeout, as the iteration does: it takes its event after the instant', () => {
  const clock = new VirtualClock();
  return withIntake({ clock, store: new MemoryEventStore({ clock }) }, async (h, ask) => {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'enclosing-foreach', document: iterating, input: {} });
    await eventually(async () => (await h.executor.get(instanceId))?.listens['/do/0/outer'] !== undefined, 'the outer listen waiting');
    assert.deepEqual(await ask(event('order-1', 'com.example.order')), { status: 'accepted', count: 1 });
    const paid = '/do/0/outer/foreach/do/0/paid[0]';
    await eventually(async () => (await h.executor.get(instanceId))?.listens[paid] !== undefined, 'the iteration listening');
    const dueAtMs = (await h.executor.get(instanceId))!.timers['/do/0/outer@timeout']!.dueAtMs;
    await clock.advance(dueAtMs - clock.nowMs()); // The outer listen's timeout fires: it ends the wait, not the iteration.
    assert.deepEqual(await ask(event('paid-1', 'com.example.paid')), { status: 'accepted', count: 1 });
    const ended = await h.executor.wait(instanceId, 5000);
    assert.equal(ended.status, 'completed', JSON.stringify(ended.error));
    await assertReplayEqual(h, instanceId);
  });
});
