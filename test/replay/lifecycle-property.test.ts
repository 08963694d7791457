/**
 * Property: random interleavings of results, lease expiries, retries, releases, revocations and
 * cancel replies keep the lifecycle invariants — at most one accepted result per (branch,
 * attempt); fences strictly increase; attempts stay within the budget; a decision never changes;
 * settlement never claims complete while a cancel reply is missing (a withdrawn cancel, whose
 * request was never sent, needs none) — and replay equals live state.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { scenario } from '../support/scenario.js';
import { applyStep, caseArb } from '../support/lifecycle-steps.js';
import { peerIds } from '../../src/deployment/examples.js';
import type { DomainEvent } from '../../src/events/types.js';
import type { JsonObject } from '../../src/contract/json.js';

function checkInvariants(events: DomainEvent[], attemptsMax: number) {
  const accepted = new Set<string>();
  const fences = new Map<string, number>();
  let decision: unknown;
  for (const e of events) {
    if (e.type === 'result-accepted') {
      const key = `${e.branchId}/${e.attempt}`;
      assert.ok(!accepted.has(key), `at most one accepted result per branch and attempt (${key})`);
      accepted.add(key);
    }
    if (e.type === 'branch-reassigned') {
      assert.ok(e.fence > (fences.get(e.branchId) ?? 1), 'fences strictly increase');
      fences.set(e.branchId, e.fence);
      assert.ok(e.attempt <= attemptsMax, 'attempts stay within the budget');
    }
    if (e.type === 'decision-closed') {
      assert.equal(decision, undefined, 'a decision closes once');
      decision = e;
    }
  }
}

test('lifecycle invariants hold under random interleavings of results, expiries, retries, revocations and cancel replies', async () => {
  await fc.assert(
    fc.asyncProperty(caseArb, async ({ peers, review, steps }) => {
      const s = await scenario({
        store: 'sqlite',
        peers,
        review: { ...review, timeoutMs: 6000, renewIntervalMs: Math.max(1, Math.floor(review.leaseMs / 3)) } as JsonObject,
      });
      const names = peerIds(peers).sort();
      const { result } = await s.invoke('prop');
      const op = result.operationId;
      await s.settle();
      let closed: unknown = null;
      for (const step of steps) {
        await applyStep(s, op, step, names);
        const now = (await s.get(op)).decision;
        if (closed !== null) assert.deepEqual(now, closed, 'a closed decision never changes');
        else if (now !== null) closed = now;
        const view = await s.coordinator.record(op);
        if (view!.settlement.status === 'complete') {
          for (const b of Object.values(view!.branches)) {
            // Withdrawn: the cancelled attempt's request was never handed to the transport, so nothing runs.
            if (b.cancel !== null)
              assert.ok(
                b.cancelOutcome === 'stopped' || b.cancelOutcome === 'already-completed' || b.cancelOutcome === 'withdrawn',
                `complete settlement has every cancel reply (${b.branchId}: ${b.cancelOutcome})`,
              );
          }
        }
      }
      await s.clock.advance(20_000);
      const final = await s.get(op);
      assert.notEqual(final.decision, null, 'every operation decides');
      assert.equal(final.phase, 'settled', 'every operation settles');
      checkInvariants(await s.events(op), review.attempts);
      await s.assertReplayEquals(op);
      await s.close();
    }),
    { numRuns: 200 },
  );
});
