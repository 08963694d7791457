/**
 * Commands that wait for an operation's queue together share one transition (spec: per-operation
 * serialization makes votes, outbox state and closure "one logical record transition"). The
 * shared transition must carry exactly the events the commands would have appended one by one,
 * under a guard every one of them accepts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decideTogether } from '../../src/domain/decide.js';
import type { Transition } from '../../src/events/types.js';
import type { OperationRecord } from '../../src/projections/record.js';
import { couldClose } from '../../src/projections/decision.js';
import { scenario, types } from '../support/scenario.js';
import { receiptLingerMs, reconcileAfterMs } from '../../src/runtime/outbox.js';
import type { JsonObject } from '../../src/contract/json.js';

const approve = { verdict: 'approve' };
const peers = ['alfa', 'bravo', 'charlie', 'delta', 'echo'];

async function transitionsOf(s: Awaited<ReturnType<typeof scenario>>, operationId: string) {
  const read = await s.store.read(operationId);
  assert.equal(read.kind, 'ok');
  return read.kind === 'ok' ? read.transitions : [];
}

test('results that arrive together are committed as one transition with the events one-by-one commits would append', async () => {
  // One by one: each result is settled before the next is sent.
  const single = await scenario();
  const one = (await single.invoke('k')).result.operationId;
  await single.settle();
  for (const peer of peers.slice(0, 3)) await single.send(peer, { operationId: one, branchId: peer, peerId: peer, result: approve });
  // Together: three results published in the same turn.
  const grouped = await scenario();
  const together = (await grouped.invoke('k')).result.operationId;
  await grouped.settle();
  await Promise.all(peers.slice(0, 3).map((peer) => grouped.send(peer, { operationId: together, branchId: peer, peerId: peer, result: approve })));

  const singly = await transitionsOf(single, one);
  const jointly = await transitionsOf(grouped, together);
  assert.ok(jointly.length < singly.length, `grouped ${jointly.length} transitions, one by one ${singly.length}`);
  const shared = jointly.find((t) => (t.transition.causation.messageId ?? '').split(' ').length === 3);
  assert.ok(shared, `a transition caused by several commands: ${JSON.stringify(jointly.map((t) => t.transition.causation))}`);
  assert.equal(shared.transition.events.filter((e) => e.type === 'result-accepted').length, 3);
  // Same facts in the same order (operation ids differ: compare the event types and the record's decision).
  assert.deepEqual(types(jointly.flatMap((t) => t.transition.events)), types(singly.flatMap((t) => t.transition.events)));
  const [a, b] = [await single.get(one), await grouped.get(together)];
  assert.equal(b.decision?.outcome, 'success');
  assert.deepEqual(b.decision?.outcome, a.decision?.outcome);
  assert.deepEqual(
    b.branches.map((x) => x.status),
    a.branches.map((x) => x.status),
  );
  await grouped.assertReplayEquals(together);
  await single.assertReplayEquals(one);
});

test("decideTogether: the guard is the intersection of the commands' guards; windows that do not meet are disjoint", () => {
  const record = {} as OperationRecord;
  const part = (notBeforeMs: number, notAfterMs: number, command: string, messageId?: string): Transition => ({
    events: [],
    timeGuard: { notBeforeMs, notAfterMs },
    causation: messageId === undefined ? { command } : { command, messageId },
  });
  const joint = decideTogether(record, [() => part(0, 100, 'result', 'm1'), () => undefined, () => part(50, 200, 'claim', 'm2')], 60);
  assert.ok(joint !== undefined && joint !== 'disjoint');
  assert.deepEqual(joint.timeGuard, { notBeforeMs: 50, notAfterMs: 100 });
  assert.deepEqual(joint.causation, { command: 'result+claim', messageId: 'm1 m2' });
  assert.equal(decideTogether(record, [() => part(0, 50, 'result'), () => part(50, 200, 'result')], 49), 'disjoint');
  assert.equal(decideTogether(record, [() => undefined, () => undefined], 0), undefined);
  const alone = part(0, 10, 'result', 'm');
  assert.equal(decideTogether(record, [() => alone], 0), alone);
});

test('storage receipts wait for company; one whose lone commit fails is republished under the same identity and recorded', async () => {
  const s = await scenario({ peers: 3 });
  const deps = s.coordinator.deps;
  // Durable receipts on the in-process bus: every request publication answers `stored`.
  const published: string[] = [];
  const transport = deps.transport;
  const publish = transport.publish.bind(transport);
  transport.publish = async (subject, data, options) => {
    const receipt = await publish(subject, data, options);
    if (!subject.includes('.request.')) return receipt;
    published.push(options?.msgId ?? '');
    return receipt.receipt === 'sent' ? { receipt: 'stored' } : receipt;
  };
  // The first transition that records receipts fails as if the store were unreachable.
  let failures = 0;
  const store = deps.store;
  const append = store.append.bind(store);
  store.append = async (id, revision, transition) => {
    if (failures === 0 && transition.events.some((e) => e.type === 'dispatch-recorded')) {
      failures++;
      return { kind: 'unavailable', description: 'store unreachable (test)' };
    }
    return append(id, revision, transition);
  };
  const op = (await s.invoke('k')).result.operationId;
  await s.settle();
  assert.equal(published.length, 3);
  assert.deepEqual(types(await s.events(op)), ['operation-admitted'], 'receipts wait for a transition to ride with');
  await s.clock.advance(receiptLingerMs);
  assert.equal(failures, 1);
  assert.ok(!types(await s.events(op)).includes('dispatch-recorded'));
  await s.clock.advance(reconcileAfterMs + receiptLingerMs);
  assert.equal(published.length, 6, 'republished once each');
  assert.deepEqual([...new Set(published)].length, 3, 'under the same publication identities');
  assert.equal(types(await s.events(op)).filter((t) => t === 'dispatch-recorded').length, 3);
  await s.assertReplayEquals(op);
});

// ── results held back for the vote that closes the decision ─────────────────

const batchMs = 50;

async function undecidedOperation(review: JsonObject = {}) {
  const s = await scenario({ review, embedded: { resultBatchMs: batchMs } });
  const op = (await s.invoke('k')).result.operationId;
  await s.settle();
  return { s, op, before: (await transitionsOf(s, op)).length };
}

const result = (op: string, peer: string) => ({ operationId: op, branchId: peer, peerId: peer, result: approve });

test("with a batching window, a quorum's early votes wait and ride with the vote that closes it: one append", async () => {
  const { s, op, before } = await undecidedOperation();
  await s.send('alfa', result(op, 'alfa'));
  await s.send('bravo', result(op, 'bravo'));
  await s.settle();
  assert.equal((await transitionsOf(s, op)).length, before, 'votes that close nothing are held');
  assert.equal((await s.get(op)).decision, null);
  await s.send('charlie', result(op, 'charlie'));
  await s.settle();
  const after = await transitionsOf(s, op);
  assert.equal(after.length, before + 1, 'the closing vote commits the held ones with it');
  const last = after.at(-1)!.transition.events;
  assert.equal(last.filter((e) => e.type === 'result-accepted').length, 3);
  assert.ok(types(last).includes('decision-closed'));
  assert.equal((await s.get(op)).decision?.outcome, 'success');
  const appended = (await s.coordinator.metrics.appends.get()).values[0]?.value;
  assert.equal(appended, after.length, 'convoke_transitions_total counts every append, the admission included');
  await s.assertReplayEquals(op);
});

test('a held result is committed on its own when its window ends', async () => {
  const { s, op, before } = await undecidedOperation();
  await s.send('alfa', result(op, 'alfa'));
  await s.settle();
  assert.equal((await transitionsOf(s, op)).length, before);
  await s.clock.advance(batchMs - 1);
  assert.equal((await transitionsOf(s, op)).length, before, 'still inside the window');
  await s.clock.advance(1);
  const after = await transitionsOf(s, op);
  assert.equal(after.length, before + 1);
  assert.deepEqual(types(after.at(-1)!.transition.events), ['result-accepted']);
  assert.equal((await s.get(op)).decision, null);
  await s.assertReplayEquals(op);
});

test('a result is never held toward the end of its guard: near the deadline it is committed at once', async () => {
  const { s, op, before } = await undecidedOperation({ timeoutMs: 1000 });
  await s.clock.advance(1000 - batchMs - 10);
  await s.send('alfa', result(op, 'alfa'));
  await s.settle();
  const after = await transitionsOf(s, op);
  assert.equal(after.length, before + 1, 'committed without waiting');
  assert.deepEqual(types(after.at(-1)!.transition.events), ['result-accepted']);
  await s.assertReplayEquals(op);
});

test('with no batching window every result is committed when its turn comes', async () => {
  const s = await scenario({ embedded: { resultBatchMs: 0 } });
  const op = (await s.invoke('k')).result.operationId;
  await s.settle();
  const before = (await transitionsOf(s, op)).length;
  await s.send('alfa', result(op, 'alfa'));
  await s.settle();
  assert.equal((await transitionsOf(s, op)).length, before + 1);
});

test("a command that decides on its own (a caller's cancellation) first commits the results held for company", async () => {
  const { s, op, before } = await undecidedOperation({ cancellation: 'caller' });
  await s.send('alfa', result(op, 'alfa'));
  await s.settle();
  assert.equal((await transitionsOf(s, op)).length, before, 'held');
  const view = await s.coordinator.cancel('svc-a', op);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason], ['failed', 'cancelled']);
  const events = (await transitionsOf(s, op)).slice(before).flatMap((t) => t.transition.events);
  const accepted = events.findIndex((e) => e.type === 'result-accepted');
  const closed = events.findIndex((e) => e.type === 'decision-closed');
  assert.ok(accepted >= 0 && accepted < closed, `the held result is recorded before the cancellation closes: ${types(events).join(', ')}`);
  const disposition = events[closed] as { siblings: { branchId: string }[] };
  assert.ok(!disposition.siblings.some((b) => b.branchId === 'alfa'), 'alfa answered: it is not a sibling to cancel');
  await s.assertReplayEquals(op);
});

test('a held result is verified and authorized again by the drain that commits it: a revocation meanwhile is honoured', async () => {
  const { s, op, before } = await undecidedOperation();
  await s.send('alfa', result(op, 'alfa'));
  await s.settle();
  assert.equal((await transitionsOf(s, op)).length, before, 'held, authorized when it arrived');
  s.policy.revoke({ peerId: 'alfa' });
  await s.clock.advance(batchMs);
  const events = (await transitionsOf(s, op)).slice(before).flatMap((t) => t.transition.events);
  assert.deepEqual(types(events), ['branch-revoked'], 'the revoked peer supplies no vote');
  assert.equal((await s.get(op)).branches.find((b) => b.branchId === 'alfa')?.status, 'revoked');
  await s.assertReplayEquals(op);
});

test('property: holding results back never changes what is decided, for any completion rule, arrival times, redeliveries and conflicting answers', async () => {
  // Mostly answers: a rule that needs every unit closes only when all five answer.
  const verdicts = fc.oneof(
    { arbitrary: fc.constant('approve'), weight: 4 },
    { arbitrary: fc.constant('reject'), weight: 2 },
    { arbitrary: fc.constant('retry'), weight: 1 },
    { arbitrary: fc.constant('silent'), weight: 1 },
  );
  const completions = fc.constantFrom<JsonObject>(
    { mode: 'first-success' },
    { mode: 'all-successful' },
    { mode: 'all-terminal' },
    { mode: 'quorum', count: 1 },
    { mode: 'quorum', count: 3 },
    { mode: 'quorum', count: 5 },
  );
  // Each answer may arrive again later: the same one (a redelivery) or a different one (a protocol conflict).
  const again = fc.option(fc.record({ afterMs: fc.integer({ min: 0, max: 200 }), verdict: verdicts }));
  const arrivals = fc.array(fc.record({ verdict: verdicts, atMs: fc.integer({ min: 0, max: 1100 }), again }), { minLength: 5, maxLength: 5 });
  await fc.assert(
    fc.asyncProperty(completions, arrivals, async (completion, peerAnswers) => {
      // Every peer answers (or not) at its instant; the deadline is at 1000 ms.
      const run = async (resultBatchMs: number) => {
        const s = await scenario({ review: { completion, timeoutMs: 1000, leaseMs: 1000, renewIntervalMs: 500 }, embedded: { resultBatchMs } });
        const op = (await s.invoke('k')).result.operationId;
        await s.settle();
        const admittedAtMs = s.clock.nowMs();
        const schedule = peers
          .flatMap((peer, i) => {
            const { verdict, atMs, again } = peerAnswers[i]!;
            if (verdict === 'silent' || again === null) return [{ peer, verdict, atMs }];
            return [
              { peer, verdict, atMs },
              { peer, verdict: again.verdict === 'silent' ? verdict : again.verdict, atMs: atMs + again.afterMs },
            ];
          })
          .filter((a) => a.verdict !== 'silent')
          .sort((a, b) => a.atMs - b.atMs);
        for (const { peer, verdict, atMs } of schedule) {
          await s.clock.advance(admittedAtMs + atMs - s.clock.nowMs());
          await s.send(peer, { operationId: op, branchId: peer, peerId: peer, result: { verdict } });
        }
        await s.clock.advance(20_000);
        const view = await s.get(op);
        await s.assertReplayEquals(op);
        const { decision } = view;
        const conflicts = (await s.events(op)).filter((e) => e.type === 'protocol-conflict-recorded').length;
        // The instant too: a batch that closes the decision is never held, so it closes when its last vote arrives.
        const closedAfterMs = decision ? decision.closedAtMs - view.admittedAtMs : undefined;
        return {
          outcome: decision?.outcome,
          reason: decision?.reason,
          closedAfterMs,
          votes: decision?.successVotes,
          failed: decision?.failedUnits,
          branches: view.branches.map((b) => `${b.branchId}:${b.status}`),
          settlement: view.settlement.status,
          conflicts,
        };
      };
      assert.deepEqual(await run(batchMs), await run(0));
    }),
    { numRuns: 200 },
  );
});

test('couldClose answers exactly whether that many more results could reach the threshold, make it impossible or end the collection', async () => {
  const after = async (completion: JsonObject, answered: string[]) => {
    const s = await scenario({ review: { completion } });
    const op = (await s.invoke('k')).result.operationId;
    await s.settle();
    for (const peer of answered) await s.send(peer, { operationId: op, branchId: peer, peerId: peer, result: approve });
    const record = await s.coordinator.record(op);
    assert.ok(record);
    return record;
  };
  const quorum = await after({ mode: 'quorum', count: 3 }, ['alfa']);
  assert.deepEqual(
    [1, 2].map((n) => couldClose(quorum, n)),
    [false, true],
    'one vote of three: two more reach it',
  );
  const unanimous = await after({ mode: 'quorum', count: 5 }, []);
  assert.equal(couldClose(unanimous, 1), true, 'five of five: one failure makes it impossible');
  const collection = await after({ mode: 'all-terminal' }, ['alfa', 'bravo', 'charlie']);
  assert.deepEqual(
    [1, 2].map((n) => couldClose(collection, n)),
    [false, true],
    'three of five answered: two more end it',
  );
  const first = await after({ mode: 'first-success' }, []);
  assert.equal(couldClose(first, 1), true);
});
