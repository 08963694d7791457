/**
 * Spec: "Completion rules" — a quorum fraction num/den of the units needs ceil(units·num/den)
 * votes, computed in exact integer arithmetic. Floating point gets some of these wrong: 7/25 is
 * 0.28000000000000003 as a double, so 25 × (7/25) is 7.000000000000001 and its ceiling 8. Each
 * test below fails against such an implementation (and the property against any off-by-one).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { thresholdFor } from '../../src/projections/decision.js';
import { limits } from '../../src/contract/limits.js';
import { scenario } from '../support/scenario.js';

/** The smallest t with t·den ≥ units·num, in BigInt: the spec's ceiling without any rounding. */
function exactCeiling(units: number, num: number, den: number): number {
  const product = BigInt(units) * BigInt(num);
  return Number((product + BigInt(den) - 1n) / BigInt(den));
}

const fraction = (num: number, den: number) => ({ mode: 'quorum' as const, fraction: { num, den } });

test('quorum fraction 7/25 of 25 peers needs exactly 7 votes (floating point would need 8)', () => {
  assert.equal(25 * (7 / 25), 7.000000000000001, 'the trap this test guards against is real on this platform');
  assert.equal(thresholdFor(fraction(7, 25), 25), 7);
});

test('quorum fractions whose double product lands just above an integer need exactly that integer', () => {
  // Every (units, num/den) up to 100 units and den 100 where units·(num/den) as a double rounds
  // above the exact integer quotient: a float implementation needs one vote too many for each.
  const traps: [number, number, number][] = [];
  for (let den = 2; den <= 100; den++) {
    for (let num = 1; num < den; num++) {
      for (let units = den; units <= 100; units += den) {
        if (Math.ceil(units * (num / den)) !== (units * num) / den) traps.push([units, num, den]);
      }
    }
  }
  assert.ok(traps.length > 10, `found ${traps.length} floating-point traps`);
  for (const [units, num, den] of traps) assert.equal(thresholdFor(fraction(num, den), units), (units * num) / den, `${num}/${den} of ${units}`);
});

test('a quorum fraction needs the smallest vote count whose share reaches it, for every unit count and fraction', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: limits.branchesMax }),
      fc.integer({ min: 1, max: limits.quorumDenominatorMax }),
      fc.integer({ min: 1, max: limits.quorumDenominatorMax }),
      (units, a, b) => {
        const [num, den] = a <= b ? [a, b] : [b, a];
        const need = thresholdFor(fraction(num, den), units);
        assert.equal(need, exactCeiling(units, num, den));
        // need votes reach the fraction; one fewer does not.
        assert.ok(BigInt(need) * BigInt(den) >= BigInt(units) * BigInt(num));
        assert.ok(BigInt(need - 1) * BigInt(den) < BigInt(units) * BigInt(num));
      },
    ),
    { seed: 19, numRuns: 2000 },
  );
});

test('the other completion rules: first-success needs 1, all-successful and all-terminal need every unit, a count is taken as given', () => {
  assert.equal(thresholdFor({ mode: 'first-success' }, 9), 1);
  assert.equal(thresholdFor({ mode: 'all-successful' }, 9), 9);
  assert.equal(thresholdFor({ mode: 'all-terminal' }, 9), 9);
  assert.equal(thresholdFor({ mode: 'quorum', count: 4 }, 9), 4);
});

test('an operation with a 7/25 quorum of 25 peers is decided by the seventh approval, not the eighth', async () => {
  const s = await scenario({ peers: 25, review: { completion: { mode: 'quorum', fraction: { num: 7, den: 25 } } } });
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  assert.equal((await s.coordinator.record(op))?.manifest.threshold, 7);
  const peers = result.branches.map((b) => b.peerId);
  for (const peer of peers.slice(0, 6)) await s.send(peer, { operationId: op, branchId: peer, peerId: peer, result: { verdict: 'approve' } });
  assert.equal((await s.get(op)).decision, null, 'six approvals are not seven');
  const seventh = peers[6]!;
  await s.send(seventh, { operationId: op, branchId: seventh, peerId: seventh, result: { verdict: 'approve' } });
  const view = await s.get(op);
  assert.deepEqual([view.decision?.outcome, view.decision?.reason, view.decision?.successVotes], ['success', 'threshold', 7]);
  await s.assertReplayEquals(op);
});
