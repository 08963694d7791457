/**
 * The worker lease's rules (src/workflow/exec/lease.ts) on records folded from logs built here,
 * without an executor: given the instance's lease events, when a worker acquires, renews, parks or
 * releases at an instant, then the transition decided (its events, its time guard, its causation),
 * nothing, or LeaseLost. Each decided transition is also folded onto its record, so it is one the
 * fold accepts. workers.test, parked-lease.test and executor.test run the same rules through
 * executors; this file pins each of them alone, and runs first in the mutation run.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Stored } from '../../src/kernel/types.js';
import type { WorkflowEvent, WorkflowTransition } from '../../src/workflow/exec/events.js';
import { Halted } from '../../src/workflow/exec/journal.js';
import { decideAcquire, decidePark, decideRelease, decideRenew, heldElsewhere, holderLease, LeaseLost } from '../../src/workflow/exec/lease.js';
import { applyWorkflow, foldWorkflow, type WorkflowRecord } from '../../src/workflow/exec/record.js';
import { bareStarted } from './support.js';

const leaseMs = 10_000;
const unbounded = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
const started = bareStarted({ deadlineMs: null });
const acquired = (worker: string, epoch: number, untilMs: number): WorkflowEvent => ({ type: 'lease-acquired', v: 1, worker, epoch, untilMs });
const renewed = (epoch: number, untilMs: number): WorkflowEvent => ({ type: 'lease-renewed', v: 1, epoch, untilMs });
const released = (epoch: number): WorkflowEvent => ({ type: 'lease-released', v: 1, epoch });
const completed: WorkflowEvent = { type: 'workflow-completed', v: 1, output: null };

const stored = (revision: number, transition: WorkflowTransition, committedAtMs = 1000): Stored<WorkflowTransition> => ({
  revision: String(revision),
  committedAtMs,
  transition,
});

/** The record of a log: the start, then each event as a transition of its own. */
function given(...events: WorkflowEvent[]): WorkflowRecord {
  const log = [started, ...events].map((event, index) => stored(index + 1, { events: [event], timeGuard: unbounded, causation: { command: 'test' } }));
  const record = foldWorkflow(log);
  assert.ok(record);
  return record;
}

/** The record with `transition` folded onto it (committed at `atMs`): a decided transition must be one the fold accepts. */
function folded(record: WorkflowRecord, transition: WorkflowTransition | undefined, atMs: number): WorkflowRecord {
  assert.ok(transition, 'a transition was decided');
  const next = applyWorkflow(record, stored(Number(record.revision) + 1, transition, atMs));
  assert.ok(next);
  return next;
}

const terms = (worker: string, nowMs: number) => ({ worker, nowMs, leaseMs });
const lost = (worker: string, holder?: string) =>
  ((error: unknown) =>
    error instanceof LeaseLost &&
    error instanceof Halted &&
    error.message.includes(`worker ${worker} no longer holds`) &&
    (holder === undefined || error.message.includes(holder))) as (error: unknown) => boolean;

test('heldElsewhere: only another worker’s lease, and only before its end (the end instant is past it)', () => {
  const held = given(acquired('w1', 1, 5000));
  assert.equal(heldElsewhere(given(), 'w2', 0), undefined, 'no lease taken');
  assert.equal(heldElsewhere(given(acquired('w1', 1, 5000), released(1)), 'w2', 0), undefined, 'a released lease');
  assert.equal(heldElsewhere(held, 'w1', 0), undefined, 'its own lease');
  assert.deepEqual(heldElsewhere(held, 'w2', 4999), { worker: 'w1', epoch: 1, untilMs: 5000 });
  assert.equal(heldElsewhere(held, 'w2', 5000), undefined, 'the lease ends at its untilMs');
  assert.equal(heldElsewhere(held, 'w2', 9000), undefined);
});

test('acquire with no lease ever taken: epoch 1 until now + leaseMs, no time guard, lease-acquire', () => {
  const record = given();
  const transition = decideAcquire(record, terms('w1', 2000));
  assert.deepEqual(transition, {
    events: [{ type: 'lease-acquired', v: 1, worker: 'w1', epoch: 1, untilMs: 12_000 }],
    timeGuard: unbounded,
    causation: { command: 'lease-acquire' },
  });
  const next = folded(record, transition, 2000);
  assert.deepEqual(next.lease, { worker: 'w1', epoch: 1, untilMs: 12_000 });
  assert.equal(next.leaseEpoch, 1);
});

test('acquire after a release or a park: the next epoch after the last one taken, at once (no takeover to wait out)', () => {
  const record = given(acquired('w1', 1, 5000), released(1), acquired('w2', 2, 6000), released(2));
  const transition = decideAcquire(record, terms('w1', 3000));
  assert.deepEqual(transition, {
    events: [{ type: 'lease-acquired', v: 1, worker: 'w1', epoch: 3, untilMs: 13_000 }],
    timeGuard: unbounded,
    causation: { command: 'lease-acquire' },
  });
  assert.equal(folded(record, transition, 3000).leaseEpoch, 3);
});

test('acquire over another worker’s lease: nothing before its end; from its end a takeover, guarded to commit no earlier', () => {
  const record = given(acquired('w1', 1, 5000), renewed(1, 8000));
  assert.equal(decideAcquire(record, terms('w2', 0)), undefined);
  assert.equal(decideAcquire(record, terms('w2', 7999)), undefined, 'the renewed end counts, not the first');
  for (const nowMs of [8000, 20_000]) {
    const transition = decideAcquire(record, terms('w2', nowMs));
    assert.deepEqual(transition, {
      events: [{ type: 'lease-acquired', v: 1, worker: 'w2', epoch: 2, untilMs: nowMs + leaseMs }],
      timeGuard: { notBeforeMs: 8000, notAfterMs: Number.MAX_SAFE_INTEGER },
      causation: { command: 'lease-takeover' },
    });
    assert.deepEqual(folded(record, transition, nowMs).lease, { worker: 'w2', epoch: 2, untilMs: nowMs + leaseMs });
  }
});

test('acquire by the holder is a renewal under its epoch, before and after its end', () => {
  const record = given(acquired('w1', 1, 5000), released(1), acquired('w1', 2, 9000));
  for (const nowMs of [4000, 9000, 30_000]) {
    assert.deepEqual(decideAcquire(record, terms('w1', nowMs)), {
      events: [{ type: 'lease-renewed', v: 1, epoch: 2, untilMs: Math.max(9000, nowMs + leaseMs) }],
      timeGuard: unbounded,
      causation: { command: 'lease-renew' },
    });
  }
});

test('renew: the holder’s end moves to now + leaseMs under its epoch, never backwards', () => {
  const record = given(acquired('w1', 1, 5000), released(1), acquired('w1', 2, 9000));
  const transition = decideRenew(record, terms('w1', 4000));
  assert.deepEqual(transition, { events: [renewed(2, 14_000)], timeGuard: unbounded, causation: { command: 'lease-renew' } });
  assert.deepEqual(folded(record, transition, 4000).lease, { worker: 'w1', epoch: 2, untilMs: 14_000 });
  // A clock behind the lease's end by more than a lease (another worker's end, a shorter lease): the end stays.
  assert.deepEqual(decideRenew(record, { worker: 'w1', nowMs: 1000, leaseMs: 2000 })?.events, [renewed(2, 9000)]);
  assert.deepEqual(decideRenew(record, { worker: 'w1', nowMs: 0, leaseMs: 8999 })?.events, [renewed(2, 9000)]);
  assert.deepEqual(decideRenew(record, { worker: 'w1', nowMs: 0, leaseMs: 9001 })?.events, [renewed(2, 9001)]);
});

test('renew by a worker that does not hold the lease: LeaseLost (a Halted), naming the holder and its epoch', () => {
  assert.throws(() => decideRenew(given(acquired('w1', 1, 5000)), terms('w2', 0)), lost('w2', 'w1 holds epoch 1'));
  assert.throws(() => decideRenew(given(acquired('w1', 1, 5000), released(1)), terms('w1', 0)), lost('w1'));
  assert.throws(() => decideRenew(given(), terms('w1', 0)), lost('w1'));
  // Taken over: the old holder's renewal is decided again on the new record and loses.
  assert.throws(() => decideRenew(given(acquired('w1', 1, 5000), acquired('w2', 2, 15_000)), terms('w1', 4000)), lost('w1', 'w2 holds epoch 2'));
});

test('park: the holder at its epoch gives the lease up (lease-park); anyone else, another epoch or no lease, nothing', () => {
  const record = given(acquired('w1', 1, 5000), acquired('w2', 2, 15_000));
  const transition = decidePark(record, 'w2', 2);
  assert.deepEqual(transition, { events: [released(2)], timeGuard: unbounded, causation: { command: 'lease-park' } });
  const parked = folded(record, transition, 6000);
  assert.equal(parked.lease, null);
  assert.equal(parked.leaseEpoch, 2);
  assert.equal(decidePark(record, 'w2', 1), undefined, 'another epoch of the same worker');
  assert.equal(decidePark(record, 'w2', 3), undefined);
  assert.equal(decidePark(record, 'w1', 2), undefined, 'another worker, the holder’s epoch');
  assert.equal(decidePark(record, 'w1', 1), undefined, 'the old holder at its old epoch');
  assert.equal(decidePark(parked, 'w2', 2), undefined, 'already parked');
  assert.equal(decidePark(given(), 'w2', 0), undefined, 'never taken');
});

test('release: the holder’s lease ends at once, whatever its epoch (lease-release); a worker holding none releases nothing', () => {
  const record = given(acquired('w1', 1, 5000), acquired('w2', 2, 15_000));
  const transition = decideRelease(record, 'w2');
  assert.deepEqual(transition, { events: [released(2)], timeGuard: unbounded, causation: { command: 'lease-release' } });
  const free = folded(record, transition, 6000);
  assert.equal(free.lease, null);
  assert.equal(decideRelease(record, 'w1'), undefined, 'the old holder');
  assert.equal(decideRelease(free, 'w2'), undefined, 'already released');
  assert.equal(decideRelease(given(), 'w1'), undefined, 'never taken');
  // Free again: the next acquire is at once, the epoch after the released one.
  assert.deepEqual(decideAcquire(free, terms('w1', 6000))?.events, [acquired('w1', 3, 16_000)]);
});

test('an instance that has ended: no worker acquires, renews, parks or releases its lease', () => {
  const held = given(acquired('w1', 1, 5000), completed);
  const never = given(completed);
  for (const record of [held, never]) {
    assert.equal(record.status, 'completed');
    assert.equal(decideAcquire(record, terms('w1', 1000)), undefined);
    assert.equal(decideAcquire(record, terms('w2', 9000)), undefined, 'not even past the end of its lease');
    assert.equal(decideRenew(record, terms('w1', 1000)), undefined);
    assert.equal(decideRenew(record, terms('w2', 1000)), undefined, 'no LeaseLost for an ended instance');
    assert.equal(decideRelease(record, 'w1'), undefined);
  }
  assert.equal(decidePark(held, 'w1', 1), undefined);
});

test('holderLease: the lease when the worker holds it (at the epoch asked, or any); LeaseLost otherwise', () => {
  const record = given(acquired('w1', 1, 5000), acquired('w2', 2, 15_000));
  const lease = { worker: 'w2', epoch: 2, untilMs: 15_000 };
  assert.deepEqual(holderLease(record, 'w2'), lease);
  assert.deepEqual(holderLease(record, 'w2', 2), lease);
  // The lease's end is not the fence: a holder past it still holds it until a takeover is recorded.
  assert.deepEqual(holderLease(given(acquired('w2', 1, 5000)), 'w2', 1), { worker: 'w2', epoch: 1, untilMs: 5000 });
  assert.throws(() => holderLease(record, 'w2', 1), lost('w2', 'w2 holds epoch 2'));
  assert.throws(() => holderLease(record, 'w2', 3), lost('w2'));
  assert.throws(() => holderLease(record, 'w1', 1), lost('w1', 'w2 holds epoch 2'));
  assert.throws(() => holderLease(record, 'w1'), lost('w1'));
  assert.throws(() => holderLease(given(acquired('w2', 1, 5000), released(1)), 'w2', 1), lost('w2'));
  assert.throws(() => holderLease(given(), 'w2'), lost('w2'));
});
