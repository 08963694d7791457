/**
 * Spec: "State-store protocol and atomic time guards" — a transition whose guard did not hold at
 * the store's serialization instant changes nothing (a guard-on-fold store keeps it, and the fold
 * treats it as void); records advance only through valid lifecycle moves. The fold
 * (src/projections/record.ts): void transitions, the machine cross-check, damaged streams, and
 * what the operation index reads off the record.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario } from '../support/scenario.js';
import { fold, machineSteps } from '../../src/projections/record.js';
import type { StoredTransition } from '../../src/events/types.js';
import { AssertionFailure } from '../../src/contract/errors.js';

/** Admission, its dispatch, a rejected result (stale fence) and an accepted one; first-success closes. */
async function shortLog(): Promise<{ log: StoredTransition[]; op: string; s: Awaited<ReturnType<typeof scenario>> }> {
  const s = await scenario({ peers: 3, review: { completion: { mode: 'first-success' } } });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', fence: 7, result: { verdict: 'approve' } });
  await s.clock.advance(10);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  const read = await s.store.read(op);
  assert.ok(read.kind === 'ok');
  const types = read.transitions.map((t) => t.transition.events[0]?.type);
  assert.deepEqual(types, ['operation-admitted', 'dispatch-recorded', 'result-rejected', 'result-accepted']);
  return { log: read.transitions, op, s };
}

test('a transition whose guard did not hold at its store instant is void on fold: only the revision moves, and it is counted void, not applied', async () => {
  const { log } = await shortLog();
  const prefix = log.slice(0, 3);
  const accepted = log[3]!;
  // Stored at or after the end of its guard (a guard-on-fold store keeps such a transition).
  const late: StoredTransition = {
    ...accepted,
    transition: { ...accepted.transition, timeGuard: { ...accepted.transition.timeGuard, notAfterMs: accepted.committedAtMs } },
  };
  const valid = fold(prefix)!;
  assert.equal(valid.transitionsApplied, 3);
  assert.equal(valid.transitionsVoid, 0);
  assert.deepEqual(fold([...prefix, late]), { ...valid, revision: late.revision, transitionsVoid: 1 });
  // One stored before the last applied instant is void as well: store time does not run backwards.
  const earlier: StoredTransition = { ...accepted, committedAtMs: prefix[2]!.committedAtMs - 1 };
  assert.deepEqual(fold([...prefix, earlier]), { ...valid, revision: earlier.revision, transitionsVoid: 1 });
  // The same transition inside its guard is applied.
  const applied = fold(log)!;
  assert.equal(applied.transitionsApplied, 4);
  assert.equal(applied.decision?.outcome, 'success');
});

test("the machines' own steps fold a log to the same record as the derived tables, and refuse a move the machines do not allow", async () => {
  const { log } = await shortLog();
  assert.deepEqual(fold(log, machineSteps), fold(log));
  assert.throws(() => machineSteps.branch('success', 'RESULT_FAILURE'), AssertionFailure);
  assert.throws(() => machineSteps.operation('closed', 'CLOSED'), AssertionFailure);
  assert.equal(machineSteps.branch('assigned', 'DISPATCHED'), 'dispatched');
  assert.equal(machineSteps.operation('admitted', 'CLOSED'), 'closed');
});

test('a log that does not begin with an admission is refused with a typed assertion failure, an empty first transition too', async () => {
  const { log } = await shortLog();
  assert.throws(() => fold(log.slice(1)), AssertionFailure);
  const empty: StoredTransition = { ...log[1]!, transition: { ...log[1]!.transition, events: [] } };
  assert.throws(() => fold([empty]), AssertionFailure);
});

test('the operation index carries the last recorded rejection with the store instant of its transition', async () => {
  const { log, op, s } = await shortLog();
  const rejected = log[2]!;
  assert.deepEqual(fold(log)!.lastRejection, { reason: 'stale-fence', atMs: rejected.committedAtMs });
  const row = await s.store.index.get(op);
  assert.deepEqual(row?.lastRejection, { reason: 'stale-fence', atMs: rejected.committedAtMs });
});
