/**
 * The log budgets (src/runtime/log-budget.ts): renewals cost bounded log space over a whole
 * timeout, an operation's transition and byte budgets are checked before each append with a
 * defined outcome, and results over the result budget are recorded rejections. Virtual clock,
 * memory store, replay-equality checked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fillerTransition, scenario, namespace, sharedStore, types, type Scenario } from '../support/scenario.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import type { DomainEvent } from '../../src/events/types.js';
import { encodeWire, type ClaimMessage } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { peerBusPermissions } from '../../src/deployment/embedded.js';
import { VirtualClock, flushMicrotasks } from '../../src/contract/clock.js';
import { limits } from '../../src/contract/limits.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { resolveBudgets } from '../../src/runtime/log-budget.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { minimalServeConfig } from '../support/config-fixtures.js';

const of = <T extends DomainEvent['type']>(events: DomainEvent[], type: T) => events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);

function claimer(s: Scenario, peer: string) {
  const connection = s.bus.connect(`claim:${peer}`, peerBusPermissions(namespace, peer));
  return async (op: string, branchId: string, attempt = 1, fence = 1) => {
    const message: ClaimMessage = { kind: 'claim', action: 'renew', operationId: op, branchId, peerId: peer, attempt, fence };
    await connection.publish(subjectFor(namespace, 'review', op, 'claim', peer), encodeWire(message));
    await flushMicrotasks();
  };
}

test('an owner renewing at its declared interval over a 7-day timeout adds a bounded number of transitions and keeps its lease', async () => {
  const leaseMs = 60_000;
  const renewIntervalMs = 30_000;
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' }, leaseMs, renewIntervalMs, timeoutMs: limits.timeoutMsMax } });
  const { result } = await s.invoke('week');
  await s.settle();
  const op = result.operationId;
  const renew = claimer(s, 'alfa');
  const endMs = s.clock.nowMs() + limits.timeoutMsMax - leaseMs;
  let renewals = 0;
  // The virtual clock fires the operation's due timer on the way: an expired lease would end the claim.
  while (s.clock.nowMs() < endMs) {
    await s.clock.advance(renewIntervalMs);
    await renew(op, 'alfa');
    renewals++;
  }
  const branch = (await s.coordinator.record(op))?.branches.alfa;
  assert.ok(branch && branch.state === 'dispatched' && branch.leaseUntilMs > s.clock.nowMs(), `the owner still holds its lease (${branch?.state})`);
  const events = await s.events(op);
  const committed = of(events, 'lease-renewed').length;
  assert.equal(of(events, 'claim-ended').length, 0, 'the claim never expired');
  assert.ok(renewals > 20_000, `the owner renewed ${renewals} times`);
  assert.ok(
    committed <= limits.renewalTransitionsPerOperationMax + 1,
    `${committed} renewals committed, at most ${limits.renewalTransitionsPerOperationMax} + 1`,
  );
  assert.ok(committed >= 100, `renewals still commit (${committed})`);
  const read = await s.store.read(op);
  assert.ok(read.kind === 'ok' && read.transitions.length < limits.transitionsPerOperationMax / 2, 'the whole week fits well inside the transition budget');
  await s.assertReplayEquals(op);
});

/**
 * Appends ordinary filler transitions straight to the store, as an earlier writer without these
 * budgets would have; each carries `detailChars` characters.
 */
async function fill(s: Scenario, op: string, count: number, detailChars = 16): Promise<void> {
  const read = await s.store.read(op);
  assert.equal(read.kind, 'ok');
  if (read.kind !== 'ok') return;
  let revision = read.revision;
  for (let k = 0; k < count; k++) {
    const transition = fillerTransition(op, `filler ${k} `.padEnd(detailChars, '.'));
    const outcome = await s.store.append(op, revision, transition);
    assert.equal(outcome.kind, 'ok', JSON.stringify(outcome));
    if (outcome.kind === 'ok') revision = outcome.revision;
  }
}

/** A second coordinator over the first one's store and clock: it loads the operation from its log, as after a restart. */
async function restarted(first: Scenario, options: Parameters<typeof scenario>[0]): Promise<Scenario> {
  const second = await scenario({ ...options, embedded: { ...options?.embedded, store: first.store, clock: first.clock } });
  await second.coordinator.recover();
  await second.coordinator.inboundPath(namespace, 'review', 'result');
  return second;
}

const allSuccessful = { completion: { mode: 'all-successful' }, timeoutMs: 60_000 };

test('an undecided operation whose log reaches its ordinary transition budget closes as indeterminate, and the result that did not fit is refused, not stored', async () => {
  const first = await scenario({ peers: 3, review: allSuccessful });
  const { result } = await first.invoke('full');
  await first.settle();
  const op = result.operationId;
  const ordinaryMax = limits.transitionsPerOperationMax - limits.closingTransitionsPerBranch * 3 - limits.closingTransitionsBase;
  const held = await first.store.read(op);
  assert.ok(held.kind === 'ok');
  await fill(first, op, ordinaryMax - held.transitions.length);
  // One result more does not fit the ordinary budget of a coordinator that loads this log.
  const second = await restarted(first, { peers: 3, review: allSuccessful });
  await second.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  await second.settle();
  const view = await second.get(op);
  assert.equal(view.decision?.outcome, 'indeterminate');
  assert.equal(view.decision?.reason, 'log-budget-exhausted');
  const events = await second.events(op);
  assert.equal(of(events, 'result-accepted').length, 0, 'the result that did not fit is not stored');
  assert.equal((await second.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === 'log-budget')?.value, 1, 'it is a counted rejection');
  const read = await second.store.read(op);
  assert.ok(read.kind === 'ok' && read.transitions.length <= limits.transitionsPerOperationMax, 'the log stays within the budget every store reads back');
  assert.equal(types(events).at(-1), 'settlement-completed');
  // Later traffic is answered as for any settled operation: nothing more is appended.
  await second.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: { verdict: 'approve' } });
  await second.settle();
  const after = await second.store.read(op);
  assert.ok(after.kind === 'ok' && after.transitions.length === read.transitions.length);
  await second.assertReplayEquals(op);
});

test('a record at its byte budget refuses further growth: the operation closes as indeterminate within its reserve', async () => {
  const budgets = {
    resultBytesMax: 8192,
    transitionBytesMax: limits.transitionOverheadBytesMax + 8192,
    recordBytesMax: 4 * (limits.transitionOverheadBytesMax + 8192),
  };
  const first = await scenario({ peers: 3, review: allSuccessful, embedded: { budgets } });
  const { result } = await first.invoke('grow');
  await first.settle();
  const op = result.operationId;
  const ordinaryBytes = budgets.recordBytesMax - 3 * limits.closingBytesPerBranch - budgets.transitionBytesMax;
  const held = await first.store.read(op);
  assert.ok(held.kind === 'ok');
  const heldBytes = held.transitions.reduce((sum, t) => sum + Buffer.byteLength(JSON.stringify(t.transition)), 0);
  // Filler of about 4 KB each until the ordinary room has less than one result left.
  await fill(first, op, Math.floor((ordinaryBytes - heldBytes - 1024) / 4300), 4000);
  const second = await restarted(first, { peers: 3, review: allSuccessful, embedded: { budgets } });
  await second.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve', note: 'p'.repeat(6000) } });
  await second.settle();
  const view = await second.get(op);
  assert.equal(view.decision?.reason, 'log-budget-exhausted', JSON.stringify(view.decision));
  assert.equal(view.decision?.outcome, 'indeterminate');
  // Its closing fitted the reserve kept for it: nothing was let through past the budget.
  assert.deepEqual(
    (await second.coordinator.metrics.closingsPastBudget.get()).values.filter((v) => v.value > 0),
    [],
  );
  const read = await second.store.read(op);
  assert.ok(read.kind === 'ok');
  const bytes = read.transitions.reduce((sum, t) => sum + Buffer.byteLength(JSON.stringify(t.transition)), 0);
  assert.ok(bytes <= budgets.recordBytesMax, `the record holds ${bytes} bytes, within ${budgets.recordBytesMax}`);
  assert.equal(of(await second.events(op), 'result-accepted').length, 0);
  await second.assertReplayEquals(op);
});

/** Leases as long as the timeout: no branch fails before the deadline, whose transition closes the decision. */
const unclaimed = { ...allSuccessful, leaseMs: allSuccessful.timeoutMs, renewIntervalMs: 30_000 };

/**
 * An operation admitted by a writer under the hard budgets, which stopped before its deadline,
 * and whose log that writer (or an earlier version) filled past the whole byte budget of the
 * process that loads it now: not even a settlement fact fits that budget.
 */
async function overfilled(): Promise<{ clock: VirtualClock; second: Scenario; op: string }> {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const budgets = {
    resultBytesMax: 8192,
    transitionBytesMax: limits.transitionOverheadBytesMax + 8192,
    recordBytesMax: 4 * (limits.transitionOverheadBytesMax + 8192),
  };
  const first = await scenario({ peers: 3, review: unclaimed, embedded: { clock, store: sharedStore(store) } });
  const { result } = await first.invoke('overfilled');
  await first.settle();
  const op = result.operationId;
  await first.close();
  await fill(first, op, Math.ceil(budgets.recordBytesMax / 4000) + 1, 4000);
  const second = await scenario({ peers: 3, review: unclaimed, embedded: { clock, store: sharedStore(store), budgets } });
  await second.coordinator.recover();
  await second.coordinator.inboundPath(namespace, 'review', 'result');
  return { clock, second, op };
}

test("an operation whose log another writer under larger budgets filled past this process's closing room still closes at its deadline and settles: the budget never refuses a closing transition", async () => {
  const { clock, second, op } = await overfilled();
  await clock.advance(unclaimed.timeoutMs + 1000);
  await second.settle();
  const view = await second.get(op);
  assert.ok(view.decision !== null, 'the operation is decided');
  assert.deepEqual([view.decision.outcome, view.decision.reason], ['partial', 'timeout']);
  assert.equal(types(await second.events(op)).at(-1), 'settlement-completed', 'and settled');
  // Each closing this process let through past its own room is counted, by kind: the decision's, then each settlement fact after it.
  const read = await second.store.read(op);
  assert.ok(read.kind === 'ok');
  const closing = read.transitions.findIndex((t) => t.transition.events.some((e) => e.type === 'decision-closed'));
  const past = (await second.coordinator.metrics.closingsPastBudget.get()).values;
  const count = (kind: string) => past.find((v) => v.labels.kind === kind)?.value ?? 0;
  assert.equal(count('closes-decision'), 1, 'the deadline transition that closed the decision');
  assert.equal(count('settlement'), read.transitions.length - closing - 1, 'and each settlement fact appended after it');
  await second.assertReplayEquals(op);
  await second.close();
});

test("a result on a log filled past this process's closing room is refused and the operation closes as indeterminate for its budget, not left open", async () => {
  const { second, op } = await overfilled();
  await second.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve' } });
  await second.settle();
  const view = await second.get(op);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['indeterminate', 'log-budget-exhausted']);
  const events = await second.events(op);
  assert.equal(of(events, 'result-accepted').length, 0, 'the result that did not fit is not stored');
  assert.equal(types(events).at(-1), 'settlement-completed');
  await second.assertReplayEquals(op);
  await second.close();
});

test('a result over the result budget (1 MB) is a recorded rejection with its reason, and nothing of it is stored', async () => {
  const s = await scenario({ peers: 3 });
  const { result } = await s.invoke('big');
  await s.settle();
  const op = result.operationId;
  const padding = 'x'.repeat(1024 * 1024);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve', note: padding } });
  await s.settle();
  const events = await s.events(op);
  const rejected = of(events, 'result-rejected');
  assert.equal(rejected.length, 1);
  assert.equal(rejected[0]?.reason, 'oversized');
  assert.match(rejected[0]?.detail ?? '', /result is \d+ bytes; the limit is 262144/);
  assert.equal(of(events, 'result-accepted').length, 0);
  const read = await s.store.read(op);
  assert.ok(read.kind === 'ok' && !JSON.stringify(read.transitions).includes('xxxxxxxx'), 'no byte of the result is stored');
  const view = await s.get(op);
  assert.equal(view.branches.find((b) => b.branchId === 'alfa')?.status, 'pending');
  assert.equal((await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === 'oversized')?.value, 1);
  await s.assertReplayEquals(op);
});

test('an oversized result is recorded as oversized only for its verified and authorized publisher: from a peer the policy no longer allows it is answered like any result of that peer (its branch revoked)', async () => {
  const s = await scenario({ peers: 3 });
  const { result } = await s.invoke('big-denied');
  await s.settle();
  const op = result.operationId;
  s.policy.revoke({ peerId: 'alfa' });
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve', note: 'x'.repeat(1024 * 1024) } });
  await s.settle();
  const events = await s.events(op);
  assert.deepEqual(
    of(events, 'result-rejected').map((e) => e.reason),
    [],
    'no oversized rejection recorded for a peer the policy does not allow',
  );
  assert.deepEqual(
    of(events, 'branch-revoked').map((e) => e.branchId),
    ['alfa'],
  );
  assert.equal(of(events, 'result-accepted').length, 0);
  const read = await s.store.read(op);
  assert.ok(read.kind === 'ok' && !JSON.stringify(read.transitions).includes('xxxxxxxx'), 'no byte of the result is stored');
  await s.assertReplayEquals(op);
});

test('a result just over a lowered transition budget is rejected and recorded, not refused as a store error', async () => {
  const budgets = { resultBytesMax: 4096, transitionBytesMax: limits.transitionOverheadBytesMax + 4096 };
  const s = await scenario({ peers: 3, embedded: { budgets } });
  const { result } = await s.invoke('over');
  await s.settle();
  const op = result.operationId;
  const padding = 'y'.repeat(budgets.transitionBytesMax + 1);
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', result: { verdict: 'approve', note: padding } });
  await s.settle();
  const events = await s.events(op);
  assert.deepEqual(
    of(events, 'result-rejected').map((e) => e.reason),
    ['oversized'],
  );
  assert.equal(of(events, 'result-accepted').length, 0);
  assert.equal((await s.coordinator.metrics.storeErrors.get()).values.length, 0, 'no store error');
  // A result inside the lowered budget is admitted as usual.
  await s.send('bravo', { operationId: op, branchId: 'bravo', peerId: 'bravo', result: { verdict: 'approve', note: 'z'.repeat(1024) } });
  await s.settle();
  assert.equal(of(await s.events(op), 'result-accepted').length, 1);
  await s.assertReplayEquals(op);
});

test('deployment config may lower the byte budgets and never raise them past the hard maxima', () => {
  const parse = (extra: Record<string, unknown>) => parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(minimalServeConfig(extra))), '/tmp');
  const lowered = parse({ limits: { resultBytesMax: 65_536, recordBytesMax: 2 * 1024 * 1024 } });
  assert.deepEqual(lowered.limits, { resultBytesMax: 65_536, recordBytesMax: 2 * 1024 * 1024 });
  assert.equal(resolveBudgets(lowered.limits).resultBytesMax, 65_536);
  for (const over of [
    { resultBytesMax: limits.resultBytesMax + 1 },
    { transitionBytesMax: limits.transitionBytesMax + 1 },
    { recordBytesMax: limits.recordBytesMax + 1 },
    { resultBytesMax: 200_000, transitionBytesMax: 200_000 },
  ]) {
    assert.throws(
      () => parse({ limits: over }),
      (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input',
      JSON.stringify(over),
    );
  }
});
