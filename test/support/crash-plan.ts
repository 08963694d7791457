/**
 * What the crash test's coordinator child runs, shared by the child (test/support/crash-child.ts)
 * and the test that checks it (test/faults/crash-recovery.test.ts): the bundle, the fixed list of
 * invocations, and each peer's verdict as a pure function of (interaction, peer, document), so the
 * decision every operation must reach is computable without running anything.
 *
 * Two interactions, both quorum 3 of 5:
 *   - `review`: verdicts approve / reject / retry. Its deadline (reviewTimeoutMs) is sized far
 *     beyond the whole crash phase, so its decisions are determined by the verdicts alone
 *     (threshold or impossible) and never by the clock.
 *   - `review-deadline`: verdicts approve / reject / hold (a hold handler commits its effect, then
 *     answers only after the deadline). Only documents whose verdicts can neither reach the quorum
 *     nor become impossible before the deadline are planned, so every one of them must close by
 *     timeout as `partial` — the deadline timer has to survive the crashes (re-armed on recovery).
 *     Its lease spans the whole deadline (see crashBundle).
 */
import { sha256Hex } from '../../src/contract/canonical.js';
import type { JsonObject } from '../../src/contract/json.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';

export type Verdict = 'approve' | 'reject' | 'retry' | 'hold';

export interface PlannedInvocation {
  interaction: 'review' | 'review-deadline';
  invocationKey: string;
  document: string;
}

export const crashCaller = { principalId: 'crash-test', senderPeerId: null } as const;
export const crashPeers = peerIds(5);
export const quorumCount = 3;
/** Far beyond any crash phase this test runs (≤ 4 kills, each ≤ ~2.5 s after a start of ≤ ~3 s): never reached by `review`. */
export const reviewTimeoutMs = 60_000;
export const deadlineTimeoutMs = 3_000;
/**
 * Each kill can cost an in-flight branch one attempt (its peer died with the process, so its claim
 * expires and the branch retries). attempts = kills + 2 keeps an `approve` branch able to succeed
 * after every kill plus one incidental lease expiry.
 */
export const attemptsMax = 6;

const shared: JsonObject = {
  completion: { mode: 'quorum', count: quorumCount },
  leaseMs: 1000,
  renewIntervalMs: 300,
  attempts: attemptsMax,
  retryBackoffMs: 100,
  onTimeout: 'partial',
};

export function crashBundle(): JsonObject {
  const bundle = reviewBundle({ ...shared, timeoutMs: reviewTimeoutMs, siblings: 'cancel', cancelTimeoutMs: 1500 });
  const interactions = bundle.interactions as Record<string, JsonObject>;
  // The claim covers the whole deadline (leaseUntilMs is capped at it), so no crash can end a hold
  // branch's claim early: with a shorter lease, a claim expiring within retryBackoffMs of the
  // deadline leaves no time for another attempt, the branch fails, and the quorum becomes
  // impossible before the deadline — legitimate, but then the crash, not the verdicts, decides.
  interactions['review-deadline'] = {
    ...interactions.review!,
    ...shared,
    timeoutMs: deadlineTimeoutMs,
    leaseMs: deadlineTimeoutMs,
    siblings: 'detach',
    description: 'A review that can only close at its deadline.',
  };
  return bundle;
}

function hashByte(interaction: string, peerId: string, document: string, salt: string): number {
  return parseInt(sha256Hex(`${salt}\u0000${interaction}\u0000${peerId}\u0000${document}`).slice(0, 2), 16);
}

/** The verdict a peer gives a document: pure, so expected decisions can be computed. */
export function verdictOf(interaction: PlannedInvocation['interaction'], peerId: string, document: string): Verdict {
  const b = hashByte(interaction, peerId, document, 'verdict');
  if (interaction === 'review') return b < 128 ? 'approve' : b < 192 ? 'reject' : 'retry';
  return b < 77 ? 'approve' : b < 128 ? 'reject' : 'hold';
}

/** How long a handler works after committing its effect (20–219 ms): deterministic, varied. */
export function workMs(interaction: string, peerId: string, document: string): number {
  return 20 + Math.floor((hashByte(interaction, peerId, document, 'work') * 200) / 256);
}

const count = (verdicts: Verdict[], v: Verdict) => verdicts.filter((x) => x === v).length;

export const reviewOperations = 30;
export const deadlineOperations = 6;

/** The fixed invocations, in admission order: every sixth is a `review-deadline`. */
export function crashPlan(): PlannedInvocation[] {
  const deadlineDocuments: string[] = [];
  for (let n = 0; deadlineDocuments.length < deadlineOperations; n++) {
    const document = `deadline-doc-${n}`;
    const verdicts = crashPeers.map((p) => verdictOf('review-deadline', p, document));
    const approves = count(verdicts, 'approve');
    if (approves < quorumCount && approves + count(verdicts, 'hold') >= quorumCount) deadlineDocuments.push(document);
  }
  const plan: PlannedInvocation[] = [];
  for (let i = 0, r = 0, d = 0; r < reviewOperations || d < deadlineOperations; i++) {
    if (i % 6 === 5 && d < deadlineOperations)
      plan.push({ interaction: 'review-deadline', invocationKey: `crash-deadline-${d}`, document: deadlineDocuments[d++]! });
    else if (r < reviewOperations) plan.push({ interaction: 'review', invocationKey: `crash-review-${r}`, document: `review-doc-${r++}` });
  }
  return plan;
}
