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
import { scenario, type Scenario } from '../support/scenario.js';
import { applyStep, caseArb } from '../support/lifecycle-steps.js';
import { peerIds } from '../../src/deployment/examples.js';
import { flushMicrotasks } from '../../src/contract/clock.js';
import type { JsonObject } from '../../src/contract/json.js';
import { indexRowOfLog } from '../../src/projections/operation-index.js';

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
  assert.deepEqual(
    listed.rows.map((r) => r.operationId),
    [op],
    `${context}: listed once`,
  );
}

for (const store of ['sqlite', 'memory'] as const) {
  test(`${store}: the operations index row equals the fold of the log after every step of random lifecycles`, async () => {
    await fc.assert(
      fc.asyncProperty(caseArb, async ({ peers, review, steps }) => {
        const s = await scenario({
          store,
          peers,
          review: { ...review, timeoutMs: 6000, renewIntervalMs: Math.max(1, Math.floor(review.leaseMs / 3)) } as JsonObject,
        });
        try {
          const names = peerIds(peers).sort();
          const { result } = await s.invoke('prop');
          const op = result.operationId;
          await s.settle();
          await checkRow(s, op, 'after admission');
          for (const [i, step] of steps.entries()) {
            await applyStep(s, op, step, names);
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
