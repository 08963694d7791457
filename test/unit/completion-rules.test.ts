/**
 * Spec: "Completion rules" — the tally per unit, when the frozen rule closes, and what result
 * batching may hold back (couldClose), each checked against a plain reference over random
 * completion rules, unit kinds and answer sequences. Records come from real admissions and
 * results (given events), never built by hand.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { completionArb, referenceThreshold, type Completion } from '../support/completion-reference.js';
import { scenario } from '../support/scenario.js';
import { couldClose, evaluateCompletion, tally, timeoutClosure } from '../../src/projections/decision.js';
import type { OperationRecord } from '../../src/projections/record.js';
import type { JsonObject } from '../../src/contract/json.js';

/**
 * What the reference needs of a record, per unit: `success` has a vote; `open` has no vote and can
 * still supply one; `failed` is terminal without a vote; `voted` has a vote and is still open
 * (distinct-peers: the approving peer's second branch has not answered).
 */
interface Units {
  success: number;
  failed: number;
  open: number;
  voted: number;
  total: number;
}

function closes(completion: Completion, u: Units): 'success' | 'failed' | undefined {
  if (completion.mode === 'all-terminal') return u.open + u.voted === 0 ? 'success' : undefined;
  const threshold = referenceThreshold(completion, u.total);
  if (u.success >= threshold) return 'success';
  if (u.success + u.open < threshold) return 'failed';
  return undefined;
}

/**
 * Whether some `results` more results could close the rule, counting each result as at most one
 * unit's vote or end (a lower bound on what it really takes, so couldClose must say yes).
 */
function closableWith(completion: Completion, u: Units, results: number): boolean {
  if (completion.mode === 'all-terminal') return results >= u.open + u.voted;
  const most = Math.min(results, u.open);
  for (let s = 0; s <= most; s++) {
    for (let f = 0; s + f <= most; f++) {
      if (closes(completion, { ...u, success: u.success + s, failed: u.failed + f, open: u.open - s - f }) !== undefined) return true;
    }
  }
  return false;
}

type Answer = 'approve' | 'reject' | null;

/**
 * The record after `answers` (per peer: approve, reject or nothing). With byPeer, each peer has
 * two branches and votes once (distinct-peers): it approves on its first branch (a vote, its unit
 * still open) or rejects on both (its unit terminal without a vote).
 */
async function recordAfter(completion: Completion, answers: Answer[], byPeer: boolean): Promise<{ record: OperationRecord; units: Units }> {
  const peers = ['alfa', 'bravo', 'charlie', 'delta', 'echo'].slice(0, answers.length);
  const review: JsonObject = { completion };
  if (byPeer)
    Object.assign(review, {
      delivery: 'explicit',
      votes: 'distinct-peers',
      branches: peers.flatMap((p) => [
        { branchId: `${p}-1`, peerId: p },
        { branchId: `${p}-2`, peerId: p },
      ]),
    });
  const s = await scenario({ peers: peers.length, review });
  const op = (await s.invoke('k')).result.operationId;
  await s.settle();
  const units: Units = { success: 0, failed: 0, open: peers.length, voted: 0, total: peers.length };
  for (const [i, answer] of answers.entries()) {
    if (answer === null) continue;
    const peer = peers[i]!;
    const branches = !byPeer ? [peer] : answer === 'approve' ? [`${peer}-1`] : [`${peer}-1`, `${peer}-2`];
    for (const branchId of branches) await s.send(peer, { operationId: op, branchId, peerId: peer, result: { verdict: answer } });
    units.open--;
    if (answer === 'reject') units.failed++;
    else units.success++;
    if (answer === 'approve' && byPeer) units.voted++;
    if ((await s.get(op)).decision !== null) break;
  }
  const record = await s.coordinator.record(op);
  assert.ok(record);
  return { record, units };
}

const caseArb = fc.integer({ min: 1, max: 5 }).chain((peers) =>
  fc.record({
    completion: completionArb(peers, 5),
    answers: fc.array(fc.constantFrom<Answer>('approve', 'reject', null), { minLength: peers, maxLength: peers }),
    byPeer: fc.boolean(),
  }),
);

test('the tally, the closure and couldClose agree with a plain reference for every rule, unit kind and answer sequence', async () => {
  await fc.assert(
    fc.asyncProperty(caseArb, async ({ completion, answers, byPeer }) => {
      const { record, units } = await recordAfter(completion, answers, byPeer);
      if (record.decision !== null) {
        // Closed by the last result sent (siblings then end): the decision is the reference's closure of the units before that.
        assert.deepEqual([record.decision.outcome, record.decision.successVotes], [closes(completion, units), units.success]);
        assert.equal(
          record.decision.reason,
          completion.mode === 'all-terminal' ? 'complete' : record.decision.outcome === 'success' ? 'threshold' : 'impossible',
        );
        return;
      }
      const t = tally(record);
      assert.deepEqual(
        {
          units: t.units,
          threshold: t.threshold,
          successVotes: t.successVotes,
          failedUnits: t.failedUnits,
          openUnits: t.openUnits,
          terminalUnits: t.terminalUnits,
        },
        {
          units: units.total,
          threshold: referenceThreshold(completion, units.total),
          successVotes: units.success,
          failedUnits: units.failed,
          openUnits: units.open,
          terminalUnits: units.total - units.open - units.voted,
        },
      );
      // Still open: the rule does not close on these units, and the deadline closes it as declared.
      assert.equal(evaluateCompletion(record), undefined);
      assert.equal(closes(completion, units), undefined);
      const timeout = timeoutClosure(record);
      assert.deepEqual([timeout.outcome, timeout.reason, timeout.tally], [record.manifest.onTimeout, 'timeout', t]);
      for (let results = 0; results <= 2 * units.total; results++) {
        const could = couldClose(record, results);
        const closable = closableWith(completion, units, results);
        if (closable) assert.equal(could, true, `${results} more results can close it`);
        // One result per unit is all it takes without distinct peers: then the answer is exact.
        if (!byPeer && results <= units.open) assert.equal(could, closable, `${results} more results: exactly whether they can close it`);
      }
    }),
    { seed: 19, numRuns: 80 },
  );
});

test('distinct-branches counts each branch of a peer as its own unit; distinct-peers counts the peer once', async () => {
  const branches = [
    { branchId: 'a1', peerId: 'alfa' },
    { branchId: 'a2', peerId: 'alfa' },
    { branchId: 'b1', peerId: 'bravo' },
  ];
  for (const votes of ['distinct-branches', 'distinct-peers'] as const) {
    const s = await scenario({ peers: 2, review: { delivery: 'explicit', branches, votes, completion: { mode: 'quorum', count: 2 } } });
    const op = (await s.invoke('k')).result.operationId;
    await s.settle();
    for (const branchId of ['a1', 'a2']) await s.send('alfa', { operationId: op, branchId, peerId: 'alfa', result: { verdict: 'approve' } });
    const record = await s.coordinator.record(op);
    assert.ok(record);
    if (votes === 'distinct-branches') {
      assert.deepEqual(
        [record.manifest.units, record.decision?.outcome, record.decision?.successVotes],
        [3, 'success', 2],
        'two branches of alfa are two votes',
      );
    } else {
      assert.deepEqual(
        [record.manifest.units, record.decision, tally(record).successVotes, tally(record).openUnits],
        [2, null, 1, 1],
        'alfa votes once; bravo can still vote',
      );
    }
  }
});

test("every mode of the completion table has a closing rule, and the bundle schema accepts exactly the modes' shapes", async () => {
  const { completionModes, completionSchema, describeCompletion, completionProblem } = await import('../../src/contract/completion.js');
  const { closingRules } = await import('../../src/projections/completion-rules.js');
  const { compileChecker } = await import('../../src/contract/validation.js');
  assert.deepEqual(Object.keys(completionModes), ['first-success', 'quorum', 'all-successful', 'all-terminal']);
  for (const entry of Object.values(completionModes)) assert.ok(Object.hasOwn(closingRules, entry.closes), `${entry.name} closes by ${entry.closes}`);
  assert.equal(completionSchema.oneOf.length, 5, 'one closed schema per shape: quorum has two');
  const check = compileChecker(completionSchema, 'completion');
  const shapes: Completion[] = [
    { mode: 'first-success' },
    { mode: 'quorum', count: 2 },
    { mode: 'quorum', fraction: { num: 2, den: 3 } },
    { mode: 'all-successful' },
    { mode: 'all-terminal' },
  ];
  for (const shape of shapes) assert.doesNotThrow(() => check(shape as unknown as JsonObject), JSON.stringify(shape));
  for (const bad of [{ mode: 'majority' }, { mode: 'quorum' }, { mode: 'first-success', count: 1 }, { mode: 'quorum', count: 0 }]) {
    assert.throws(() => check(bad as unknown as JsonObject), JSON.stringify(bad));
  }
  assert.deepEqual(shapes.map(describeCompletion), ['first-success', 'quorum 2', 'quorum 2/3', 'all-successful', 'all-terminal']);
  assert.equal(completionProblem({ mode: 'quorum', fraction: { num: 4, den: 3 } }), 'quorum fraction 4/3 exceeds 1');
  assert.equal(completionProblem({ mode: 'quorum', fraction: { num: 3, den: 3 } }), undefined);
});
