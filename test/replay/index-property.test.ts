/**
 * Property: through random lifecycles — results (stale, current, future attempts), claims,
 * revocations, cancel replies and time passing — the operations index row a store keeps is, after
 * every step, exactly the row the operation's log folds to (what `convoke replay` checks), and it
 * agrees with the coordinator's live view of the same operation: phase, outcome, settlement,
 * instants and open branches. Runs on the SQLite store (retries, reassignments) and the memory
 * store (one attempt).
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
import type { JsonObject } from '../../src/contract/json.js';
import { indexRowOfLog } from '../../src/projections/operation-index.js';

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
    steps: fc.array(stepArb(peers), { maxLength: 20 }),
  }),
);

async function send(s: Scenario, peer: string, kind: 'result' | 'claim' | 'cancel-result', op: string, body: object) {
  const c = s.bus.connect(`p:${peer}:${kind}`, peerBusPermissions(namespace, peer));
  await c.publish(subjectFor(namespace, 'review', op, kind, peer), encodeWire(body as never));
  await flushMicrotasks();
}

/** The stored row is the fold of the log, and says what the coordinator's own view says. */
async function checkRow(s: Scenario, op: string, context: string): Promise<void> {
  await flushMicrotasks();
  const read = await s.store.read(op);
  assert.equal(read.kind, 'ok');
  if (read.kind !== 'ok') return;
  const row = await s.store.index.get(op);
  assert.deepEqual(row, indexRowOfLog(read.transitions), `${context}: the index row is the fold of the log`);
  const view = await s.get(op);
  const record = (await s.coordinator.record(op))!;
  assert.ok(row);
  assert.equal(row.phase, view.phase, `${context}: phase`);
  assert.equal(row.outcome, view.decision?.outcome ?? null, `${context}: outcome`);
  assert.equal(row.decidedAtMs, view.decision?.closedAtMs ?? null, `${context}: decided at`);
  assert.equal(row.settlement, view.settlement.status, `${context}: settlement`);
  assert.equal(row.settledAtMs, record.settlement.completedAtMs, `${context}: settled at`);
  assert.equal(row.admittedAtMs, view.admittedAtMs);
  assert.equal(row.deadlineMs, view.deadlineMs);
  assert.equal(row.openBranches, view.branches.filter((b) => b.status === 'pending').length, `${context}: open branches`);
  assert.equal(row.revision, record.revision, `${context}: revision`);
  assert.equal(row.principalId, 'svc-a');
  assert.equal(row.interaction, 'review');
  assert.equal(row.lastRejection !== null, record.rejectionsRecorded > 0, `${context}: a last rejection exactly when one was recorded`);
  const listed = await s.store.index.list({ limit: 10, principalId: 'svc-a' });
  assert.deepEqual(listed.rows.map((r) => r.operationId), [op], `${context}: listed once`);
}

for (const store of ['sqlite', 'memory'] as const) {
  test(`${store}: the operations index row equals the fold of the log after every step of random lifecycles`, async () => {
    await fc.assert(
      fc.asyncProperty(caseArb, async ({ peers, review, steps }) => {
        const s = await scenario({ store, peers, review: { ...review, timeoutMs: 6000, renewIntervalMs: Math.max(1, Math.floor(review.leaseMs / 3)) } as JsonObject });
        try {
          const names = peerIds(peers).sort();
          const { result } = await s.invoke('prop');
          const op = result.operationId;
          await s.settle();
          await checkRow(s, op, 'after admission');
          for (const [i, step] of steps.entries()) {
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
            await checkRow(s, op, `after step ${i} (${step.kind})`);
          }
          await s.clock.advance(20_000);
          await checkRow(s, op, 'settled');
          assert.equal((await s.store.index.get(op))?.phase, 'settled');
        } finally {
          await s.close();
        }
      }),
      { numRuns: 60 },
    );
  });
}
