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
import { scenario, namespace, type Scenario } from '../support/scenario.js';
import { peerIds } from '../../src/deployment/examples.js';
import { encodeWire } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { peerBusPermissions } from '../../src/deployment/embedded.js';
import { flushMicrotasks } from '../../src/contract/clock.js';
import type { DomainEvent } from '../../src/events/types.js';
import type { JsonObject } from '../../src/contract/json.js';

type Step =
  | { kind: 'wait'; ms: number }
  | { kind: 'result'; branch: number; offset: -1 | 0 | 1; verdict: 'approve' | 'reject' | 'retry' }
  | { kind: 'claim'; branch: number; action: 'renew' | 'release' }
  | { kind: 'revoke'; peer: number }
  | { kind: 'cancel-reply'; branch: number; outcome: 'stopped' | 'already-completed' | 'unknown' };

const stepArb = (peers: number): fc.Arbitrary<Step> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: 1, max: 900 }).map((ms) => ({ kind: 'wait' as const, ms })) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('result' as const), branch: fc.nat(peers - 1), offset: fc.constantFrom(-1 as const, 0 as const, 0 as const, 1 as const), verdict: fc.constantFrom('approve' as const, 'reject' as const, 'retry' as const) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('claim' as const), branch: fc.nat(peers - 1), action: fc.constantFrom('renew' as const, 'release' as const) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('revoke' as const), peer: fc.nat(peers - 1) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('cancel-reply' as const), branch: fc.nat(peers - 1), outcome: fc.constantFrom('stopped' as const, 'already-completed' as const, 'unknown' as const) }) },
  );

const caseArb = fc.integer({ min: 1, max: 4 }).chain((peers) =>
  fc.record({
    peers: fc.constant(peers),
    review: fc.record({
      delivery: fc.constantFrom('independent', 'one-eligible'),
      completion: fc.constantFrom({ mode: 'first-success' }, { mode: 'all-successful' }, { mode: 'all-terminal' }, { mode: 'quorum', count: 1 }),
      attempts: fc.integer({ min: 1, max: 3 }),
      leaseMs: fc.integer({ min: 300, max: 2000 }),
      retryBackoffMs: fc.integer({ min: 0, max: 400 }),
      siblings: fc.constantFrom('detach', 'cancel'),
      cancelTimeoutMs: fc.integer({ min: 100, max: 1500 }),
      settlementGraceMs: fc.integer({ min: 0, max: 1500 }),
    }),
    steps: fc.array(stepArb(peers), { maxLength: 25 }),
  }),
);

async function send(s: Scenario, peer: string, kind: 'result' | 'claim' | 'cancel-result', op: string, body: object) {
  const c = s.bus.connect(`p:${peer}:${kind}`, peerBusPermissions(namespace, peer));
  await c.publish(subjectFor(namespace, 'review', op, kind, peer), encodeWire(body as never));
  await flushMicrotasks();
}

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
      const s = await scenario({ store: 'sqlite', peers, review: { ...review, timeoutMs: 6000, renewIntervalMs: Math.max(1, Math.floor(review.leaseMs / 3)) } as JsonObject });
      const names = peerIds(peers).sort();
      const { result } = await s.invoke('prop');
      const op = result.operationId;
      await s.settle();
      let closed: unknown = null;
      for (const step of steps) {
        const record = (await s.coordinator.record(op))!;
        const branches = Object.values(record.branches);
        const branch = branches[('branch' in step ? step.branch : 0) % branches.length]!;
        if (step.kind === 'wait') await s.clock.advance(step.ms);
        if (step.kind === 'revoke') s.policy.revoke({ peerId: names[step.peer]! });
        if (step.kind === 'result') {
          const attempt = Math.max(1, branch.attempt + step.offset);
          const fence = Math.max(1, branch.fence + step.offset);
          await send(s, branch.peerId, 'result', op, { kind: 'result', operationId: op, branchId: branch.branchId, peerId: branch.peerId, attempt, fence, result: { verdict: step.verdict } });
        }
        if (step.kind === 'claim') await send(s, branch.peerId, 'claim', op, { kind: 'claim', action: step.action, operationId: op, branchId: branch.branchId, peerId: branch.peerId, attempt: branch.attempt, fence: branch.fence });
        if (step.kind === 'cancel-reply') await send(s, branch.peerId, 'cancel-result', op, { kind: 'cancel-result', operationId: op, branchId: branch.branchId, peerId: branch.peerId, attempt: branch.attempt, fence: branch.fence, outcome: step.outcome });
        const now = (await s.get(op)).decision;
        if (closed !== null) assert.deepEqual(now, closed, 'a closed decision never changes');
        else if (now !== null) closed = now;
        const view = await s.coordinator.record(op);
        if (view!.settlement.status === 'complete') {
          for (const b of Object.values(view!.branches)) {
            // Withdrawn: the cancelled attempt's request was never handed to the transport, so nothing runs.
            if (b.cancel !== null) assert.ok(b.cancelOutcome === 'stopped' || b.cancelOutcome === 'already-completed' || b.cancelOutcome === 'withdrawn', `complete settlement has every cancel reply (${b.branchId}: ${b.cancelOutcome})`);
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
