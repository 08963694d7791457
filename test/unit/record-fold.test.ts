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
import { applyEvents, fold, machineSteps } from '../../src/projections/record.js';
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

test('a delivery receipt of another attempt or fence changes nothing; one recorded after the branch moved on changes only its outbox', async () => {
  const { log } = await shortLog();
  const admittedRecord = fold(log.slice(0, 1))!;
  const at = admittedRecord.admittedAtMs + 1;
  const receipt = (attempt: number, fence: number) => ({ type: 'dispatch-recorded', v: 1, branchId: 'alfa', attempt, fence, receipt: 'stored' }) as const;
  assert.deepEqual(applyEvents(admittedRecord, [receipt(2, 2)], at), admittedRecord);
  assert.deepEqual(applyEvents(admittedRecord, [receipt(1, 2)], at), admittedRecord);
  const dispatched = applyEvents(admittedRecord, [receipt(1, 1)], at);
  assert.equal(dispatched.branches['alfa']!.state, 'dispatched');
  assert.equal(dispatched.branches['alfa']!.outbox.receipt, 'stored');
  // alfa's result raced its receipt: the branch stays where the result took it.
  const answered = fold(log)!;
  assert.equal(answered.branches['alfa']!.state, 'success');
  const late = applyEvents(answered, [{ ...receipt(1, 1), receipt: 'already-stored' }], at + 100);
  assert.equal(late.branches['alfa']!.state, 'success');
  assert.equal(late.branches['alfa']!.outbox.receipt, 'already-stored');
});

test("a failed result excludes its peer from the branch's later selection; a successful one does not", async () => {
  const { log } = await shortLog();
  const record = fold(log.slice(0, 2))!;
  const at = record.admittedAtMs + 1;
  const accepted = (branchId: string, status: 'success' | 'failure') =>
    ({
      type: 'result-accepted',
      v: 1,
      branchId,
      peerId: branchId,
      attempt: 1,
      fence: 1,
      status,
      retryable: false,
      retryAtMs: null,
      result: { verdict: status === 'success' ? 'approve' : 'reject' },
      subject: 's',
    }) as const;
  const after = applyEvents(record, [accepted('alfa', 'failure'), accepted('bravo', 'success')], at);
  assert.deepEqual(after.branches['alfa']!.excluded, ['alfa']);
  assert.deepEqual(after.branches['bravo']!.excluded, []);
});

test('an admission whose branches do not start at attempt 1 and fence 1 is refused; an event naming a branch outside the manifest is refused', async () => {
  const { log } = await shortLog();
  const admission = log[0]!.transition.events[0]!;
  assert.ok(admission.type === 'operation-admitted');
  for (const [attempt, fence] of [
    [1, 2],
    [2, 1],
    [0, 0],
  ]) {
    const damaged = {
      ...admission,
      outbox: admission.outbox.map((intent, i) => (i === 0 ? ({ ...intent, attempt, fence } as unknown as typeof intent) : intent)),
    };
    const stored: StoredTransition = { ...log[0]!, transition: { ...log[0]!.transition, events: [damaged] } };
    assert.throws(() => fold([stored]), AssertionFailure, `attempt ${attempt} fence ${fence}`);
  }
  const record = fold(log)!;
  assert.throws(
    () =>
      applyEvents(record, [{ type: 'lease-renewed', v: 1, branchId: 'zulu', attempt: 1, fence: 1, leaseUntilMs: record.deadlineMs }], record.admittedAtMs + 1),
    AssertionFailure,
  );
});

test('a reassignment must start the next attempt with a higher fence: any other is refused', async () => {
  const { log } = await shortLog();
  const admittedRecord = fold(log.slice(0, 1))!;
  const record = { ...admittedRecord, manifest: { ...admittedRecord.manifest, attemptsMax: 3 } };
  const at = record.admittedAtMs + 1;
  const retrying = applyEvents(record, [{ type: 'claim-ended', v: 1, branchId: 'bravo', attempt: 1, fence: 1, cause: 'released', retryAtMs: at + 100 }], at);
  const reassigned = (attempt: number, fence: number) =>
    applyEvents(retrying, [{ type: 'branch-reassigned', v: 1, branchId: 'bravo', peerId: 'bravo', attempt, fence, publicationId: 'p2' }], at + 100);
  assert.equal(reassigned(2, 2).branches['bravo']!.attempt, 2);
  for (const [attempt, fence] of [
    [2, 1],
    [3, 2],
    [1, 2],
  ]) {
    assert.throws(() => reassigned(attempt!, fence!), AssertionFailure, `attempt ${attempt} fence ${fence}`);
  }
});
