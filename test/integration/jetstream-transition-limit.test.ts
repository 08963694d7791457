/**
 * A coordinator over a JetStream store on a server with a small max_payload (128 KiB): the store
 * takes transitions of at most the server's message size less its headers' allowance, and the
 * coordinator budgets no larger (runtime/log-budget.ts resolveBudgets). With the built-in result
 * budget (256 KiB) no result of it would fit with its overhead: the coordinator refuses to start,
 * naming both numbers. With the result budget lowered to fit, a larger result is a recorded
 * rejection with its size, the branch stays open, and a result in budget closes the decision.
 * Real nats-server, in-process bus for the peers' messages (its size is not what is tested).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deliverToIntake, scenario, type Scenario } from '../support/scenario.js';
import type { DomainEvent } from '../../src/events/types.js';
import { SystemClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { limits } from '../../src/contract/limits.js';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { sharedStore } from '../support/scenario.js';
import { startJetStreamServer } from '../support/jetstream-server.js';

const review = { completion: { mode: 'first-success' }, timeoutMs: 60_000, leaseMs: 60_000, renewIntervalMs: 10_000 };

/** One result straight to intake, as the coordinator's subscription hands it over; answers its acknowledgements. */
const deliver = (s: Scenario, op: string, peer: string, result: object): Promise<string[]> =>
  deliverToIntake(s, 'result', op, peer, { kind: 'result', operationId: op, branchId: peer, peerId: peer, attempt: 1, fence: 1, result });

test('jetstream under a small max_payload: the coordinator budgets no larger a transition than the store takes, and a result it cannot hold is a recorded rejection, never a silent drop', async () => {
  const server = await startJetStreamServer({ maxPayload: 128 * 1024 });
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 5000 });
  try {
    const storeBytesMax = store.limits.transitionBytesMax;
    assert.equal(storeBytesMax, 128 * 1024 - 512);
    const clock = new SystemClock();
    await assert.rejects(
      scenario({ peers: 3, review, embedded: { clock, store: sharedStore(store) } }),
      (error: unknown) =>
        isAdapterError(error) &&
        error.kind === 'invalid-input' &&
        error.message.includes(`${storeBytesMax} bytes`) &&
        error.message.includes(`limits.resultBytesMax (${limits.resultBytesMax})`),
    );

    const resultBytesMax = storeBytesMax - limits.transitionOverheadBytesMax;
    const s = await scenario({ peers: 3, review, embedded: { clock, store: sharedStore(store), budgets: { resultBytesMax } } });
    try {
      assert.equal(s.coordinator.budgets.transitionBytesMax, storeBytesMax);
      const { result: invoked } = await s.invoke('k');
      const op = invoked.operationId;
      // Inside the built-in result budget, past what this store can take in one transition.
      const big = { verdict: 'approve', note: 'x'.repeat(200_000) };
      const bigBytes = Buffer.byteLength(JSON.stringify(big));
      assert.ok(bigBytes < limits.resultBytesMax && bigBytes > storeBytesMax);
      assert.deepEqual(await deliver(s, op, 'alfa', big), ['ack']);
      const rejected = (await s.events(op)).filter((e): e is Extract<DomainEvent, { type: 'result-rejected' }> => e.type === 'result-rejected');
      assert.deepEqual(
        rejected.map((e) => [e.reason, e.branchId, e.detail]),
        [['oversized', 'alfa', `result is ${bigBytes} bytes; the limit is ${resultBytesMax}`]],
      );
      assert.equal((await s.get(op)).decision, null);
      // The largest result of the lowered budget closes the decision: its transition fits the store.
      const note = 'y'.repeat(resultBytesMax - JSON.stringify({ verdict: 'approve', note: '' }).length);
      assert.deepEqual(await deliver(s, op, 'bravo', { verdict: 'approve', note }), ['ack']);
      const view = await s.get(op);
      assert.equal(view.decision?.outcome, 'success');
      assert.equal(view.branches.find((b) => b.peerId === 'bravo')?.status, 'success');
      await s.assertReplayEquals(op);
    } finally {
      await s.close();
    }
  } finally {
    await store.close();
    await server.dispose();
  }
});
