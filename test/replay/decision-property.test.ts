/**
 * Property: for random arrival orders, duplicates, late and forged results, the runtime's decision
 * equals a small reference model's, never changes after closure, and the record rebuilt from the
 * log equals the live record.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { completionArb, referenceThreshold, type Completion } from '../support/completion-reference.js';
import { scenario } from '../support/scenario.js';
import { peerIds } from '../../src/deployment/examples.js';
import type { JsonObject } from '../../src/contract/json.js';

interface Step {
  waitMs: number;
  peer: number;
  verdict: 'approve' | 'reject';
  /** 0 honest; 1 payload claims another peer; 2 another peer publishes on this peer's subject; 3 stale fence. */
  forgery: 0 | 1 | 2 | 3;
}

const timeoutMs = 5000;

/** The reference model: plain loops over the same inputs, no machines, no store. */
function reference(peers: number, completion: Completion, onTimeout: 'partial' | 'failed', steps: Step[]) {
  const verdicts = new Map<number, 'approve' | 'reject'>();
  let now = 0;
  let decision: { outcome: string; votes: number } | undefined;
  const need = referenceThreshold(completion, peers);
  const evaluate = () => {
    const successes = [...verdicts.values()].filter((v) => v === 'approve').length;
    const open = peers - verdicts.size;
    if (completion.mode === 'all-terminal') return open === 0 ? { outcome: 'success', votes: successes } : undefined;
    if (successes >= need) return { outcome: 'success', votes: successes };
    if (successes + open < need) return { outcome: 'failed', votes: successes };
    return undefined;
  };
  for (const step of steps) {
    now += step.waitMs;
    if (decision) continue;
    if (now >= timeoutMs) break;
    if (step.forgery !== 0 || verdicts.has(step.peer)) continue;
    verdicts.set(step.peer, step.verdict);
    decision = evaluate();
  }
  return decision ?? { outcome: onTimeout, votes: [...verdicts.values()].filter((v) => v === 'approve').length };
}

const caseArb = fc.integer({ min: 1, max: 6 }).chain((peers) =>
  fc.record({
    peers: fc.constant(peers),
    completion: completionArb(peers, 7),
    onTimeout: fc.constantFrom('partial' as const, 'failed' as const),
    steps: fc.array(
      fc.record({
        waitMs: fc.integer({ min: 0, max: 1500 }),
        peer: fc.integer({ min: 0, max: peers - 1 }),
        verdict: fc.constantFrom('approve' as const, 'reject' as const),
        forgery: fc.constantFrom(0 as const, 0 as const, 0 as const, 1 as const, 2 as const, 3 as const),
      }),
      { maxLength: 14 },
    ),
  }),
);

test('the decision equals the reference model under random order, duplicates, late and forged results, and never changes after closure', async () => {
  await fc.assert(
    fc.asyncProperty(caseArb, async ({ peers, completion, onTimeout, steps }) => {
      const s = await scenario({ peers, review: { completion, onTimeout } as unknown as JsonObject });
      const names = peerIds(peers).sort();
      const { result } = await s.invoke('prop');
      const op = result.operationId;
      await s.settle();
      let firstDecision: unknown = null;
      for (const step of steps) {
        await s.clock.advance(step.waitMs);
        const peer = names[step.peer]!;
        const other = names.length > 1 ? names[(step.peer + 1) % names.length]! : 'zulu';
        const body = { operationId: op, branchId: peer, peerId: peer, result: { verdict: step.verdict } };
        if (step.forgery === 0) await s.send(peer, body);
        if (step.forgery === 1) await s.send(peer, { ...body, peerId: other });
        if (step.forgery === 2) await s.send(other, body, peer);
        if (step.forgery === 3) await s.send(peer, { ...body, fence: 2 });
        const now = (await s.get(op)).decision;
        if (firstDecision !== null) assert.deepEqual(now, firstDecision, 'a closed decision never changes');
        else if (now !== null) firstDecision = now;
      }
      await s.clock.advance(timeoutMs);
      const view = await s.get(op);
      const expected = reference(peers, completion, onTimeout, steps);
      assert.equal(view.decision?.outcome, expected.outcome);
      assert.equal(view.decision?.successVotes, expected.votes);
      if (firstDecision !== null) assert.deepEqual(view.decision, firstDecision);
      await s.assertReplayEquals(op);
      await s.close();
    }),
    { numRuns: 150 },
  );
});
