/**
 * The coordinator's transition budget and the store's transition limit (runtime/log-budget.ts
 * resolveBudgets; docs/decisions/log-budgets.md "The store's transition limit"): every store reports
 * what it takes in one transition (EventStore.limits.transitionBytesMax), and the coordinator never
 * budgets past it. A result the store could not take with its transition overhead would otherwise
 * be refused by the store after intake let it through: acknowledged, recorded nowhere, its branch
 * left waiting and a decision it would close left open. Memory store with a lowered limit, virtual clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deliverToIntake, scenario, type Scenario } from '../support/scenario.js';
import type { DomainEvent } from '../../src/events/types.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { limits } from '../../src/contract/limits.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';

const of = <T extends DomainEvent['type']>(events: DomainEvent[], type: T) => events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);

/** A result message of `peer` whose result serializes to exactly `bytes`. */
function resultOfBytes(op: string, peer: string, bytes: number): object {
  const note = 'n'.repeat(bytes - JSON.stringify({ verdict: 'approve', note: '' }).length);
  const result = { verdict: 'approve', note };
  assert.equal(Buffer.byteLength(JSON.stringify(result)), bytes);
  return { kind: 'result', operationId: op, branchId: peer, peerId: peer, attempt: 1, fence: 1, result };
}

/** One result straight to intake, as the coordinator's subscription hands it over; answers its acknowledgements. */
const deliver = (s: Scenario, op: string, peer: string, body: object): Promise<string[]> => deliverToIntake(s, 'result', op, peer, body);

test('a coordinator over a store whose transitions cannot hold a result of the result budget and its overhead refuses to start, naming both numbers', async () => {
  const clock = new VirtualClock();
  const storeBytesMax = 200 * 1024;
  const store = new MemoryEventStore({ clock, limits: { transitionBytesMax: storeBytesMax } });
  await assert.rejects(
    scenario({ peers: 3, embedded: { clock, store } }),
    (error: unknown) =>
      isAdapterError(error) &&
      error.kind === 'invalid-input' &&
      error.message.includes(`${storeBytesMax} bytes`) &&
      error.message.includes(`limits.resultBytesMax (${limits.resultBytesMax})`) &&
      error.message.includes(`${limits.transitionOverheadBytesMax} bytes of transition overhead`) &&
      error.message.includes(`at most ${storeBytesMax - limits.transitionOverheadBytesMax}`),
  );
  // A store that cannot take even the smallest result budget with its overhead: the same refusal, however the result budget is lowered.
  const tiny = new MemoryEventStore({ clock, limits: { transitionBytesMax: 16 * 1024 } });
  await assert.rejects(
    scenario({ peers: 3, embedded: { clock, store: tiny, budgets: { resultBytesMax: 1024 } } }),
    (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input' && /16384 bytes/.test(error.message),
  );
});

test("the coordinator's transition budget is the store's limit when lower: a result over the result budget is a recorded rejection with its size, a batch past the store's limit splits, and the decision closes", async () => {
  const clock = new VirtualClock();
  const storeBytesMax = 180 * 1024;
  const resultBytesMax = 100 * 1024;
  const store = new MemoryEventStore({ clock, limits: { transitionBytesMax: storeBytesMax } });
  const s = await scenario({ peers: 3, embedded: { clock, store, budgets: { resultBytesMax } } });
  assert.equal(s.coordinator.budgets.transitionBytesMax, storeBytesMax, 'the lower of the coordinator’s budget and the store’s limit');
  assert.equal(s.coordinator.budgets.resultBytesMax, resultBytesMax);
  const { result: invoked } = await s.invoke('k');
  await s.settle();
  const op = invoked.operationId;

  assert.deepEqual(await deliver(s, op, 'alfa', resultOfBytes(op, 'alfa', 120 * 1024)), ['ack']);
  const [rejected] = of(await s.events(op), 'result-rejected');
  assert.deepEqual([rejected?.reason, rejected?.branchId], ['oversized', 'alfa']);
  assert.equal(rejected?.detail, `result is ${120 * 1024} bytes; the limit is ${resultBytesMax}`);

  // Three results of 95 KiB arrive together: one transition of them all is past the store's limit, each alone fits.
  const answered = await Promise.all(['alfa', 'bravo', 'charlie'].map((peer) => deliver(s, op, peer, resultOfBytes(op, peer, 95 * 1024))));
  assert.deepEqual(answered, [['ack'], ['ack'], ['ack']]);
  const events = await s.events(op);
  assert.equal(of(events, 'result-accepted').length, 3);
  assert.equal(of(events, 'result-rejected').length, 1, 'only the oversized one');
  assert.equal(of(events, 'decision-closed')[0]?.outcome, 'success');
  const read = await store.read(op);
  assert.ok(read.kind === 'ok' && read.transitions.every((t) => Buffer.byteLength(JSON.stringify(t.transition)) <= storeBytesMax));
  await s.assertReplayEquals(op);
  await s.close();
});
