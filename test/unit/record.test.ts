/**
 * The record projection changes a record copy-on-write: applying a transition, or deciding one
 * provisionally, never changes a record that existed before — replay, provisional decisions and
 * the live record share structure and rely on it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, answers, silent } from '../support/scenario.js';
import { applyEvents, applyStored, evolve, fold, type OperationRecord } from '../../src/projections/record.js';
import type { StoredTransition } from '../../src/events/types.js';
import { AssertionFailure } from '../../src/contract/errors.js';

const cancelling = {
  completion: { mode: 'first-success' },
  siblings: 'cancel',
  cancelTimeoutMs: 1000,
  settlementGraceMs: 3000,
  timeoutMs: 10_000,
  leaseMs: 10_000,
} as const;

/** A log with admission, dispatch receipts, a result, closure with cancels, cancel dispatch and the cancel timeout. */
async function richLog(): Promise<StoredTransition[]> {
  const s = await scenario({ peers: 3, review: cancelling });
  await s.addPeer('alfa', { review: answers('approve') });
  await s.addPeer('bravo', { review: silent });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1500);
  await s.settle();
  const read = await s.store.read(result.operationId);
  assert.equal(read.kind, 'ok');
  return read.kind === 'ok' ? read.transitions : [];
}

test('applying stored transitions one by one never changes an earlier record', async () => {
  const log = await richLog();
  const types = new Set(log.flatMap((t) => t.transition.events.map((e) => e.type)));
  for (const type of ['operation-admitted', 'dispatch-recorded', 'result-accepted', 'decision-closed', 'cancel-dispatched', 'cancel-timed-out']) {
    assert.ok(types.has(type as never), `the log has ${type} (it has ${[...types].join(', ')})`);
  }
  const records: OperationRecord[] = [];
  const snapshots: OperationRecord[] = [];
  let record: OperationRecord | undefined;
  for (const stored of log) {
    record = applyStored(record, stored);
    records.push(record!);
    snapshots.push(structuredClone(record!));
  }
  records.forEach((r, i) => assert.deepEqual(r, snapshots[i], `record after transition ${i + 1} is unchanged by the later ones`));
  assert.deepEqual(record, fold(log), 'stepwise application equals the fold');
});

test('provisional application (applyEvents, evolve) leaves its input untouched and equals event-by-event evolution', async () => {
  const log = await richLog();
  const admitted = fold(log.slice(0, 1))!;
  const before = structuredClone(admitted);
  const rest = log.slice(1).flatMap((t) => t.transition.events);
  const atMs = admitted.admittedAtMs + 10;
  const together = applyEvents(admitted, rest, atMs);
  let oneByOne = admitted;
  for (const event of rest) oneByOne = evolve(oneByOne, event, atMs);
  assert.deepEqual(admitted, before, 'the input record is unchanged');
  assert.deepEqual(together, oneByOne, 'one draft for all events equals one draft per event');
  assert.notEqual(together.branches, admitted.branches, 'changed branches live in a new table');
});

test('an admission anywhere but at the start of a stream is refused', async () => {
  const log = await richLog();
  const admission = log[0]!.transition.events[0]!;
  const record = fold(log)!;
  assert.throws(() => evolve(record, admission, record.admittedAtMs), AssertionFailure);
  assert.throws(() => applyEvents(record, [admission], record.admittedAtMs), AssertionFailure);
  const twice: StoredTransition = { ...log[0]!, transition: { ...log[0]!.transition, events: [admission, admission] } };
  assert.throws(() => applyStored(undefined, twice), AssertionFailure);
  const orphan: StoredTransition = { ...log[1]!, transition: { ...log[1]!.transition } };
  assert.throws(() => applyStored(undefined, orphan), /before operation-admitted/);
});
