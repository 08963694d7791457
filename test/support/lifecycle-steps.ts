/**
 * Random operation lifecycles for the replay properties (test/replay): steps that interleave
 * results (of the current, an older or a newer attempt and fence), lease expiries (time passing),
 * claim renewals and releases, revocations and cancel replies, sent as a peer would send them over
 * the in-process bus, and the review rules they run under.
 */
import fc from 'fast-check';
import { namespace, type Scenario } from './scenario.js';
import { encodeWire } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { peerBusPermissions } from '../../src/deployment/embedded.js';
import { flushMicrotasks } from '../../src/contract/clock.js';

export type Step =
  | { kind: 'wait'; ms: number }
  | { kind: 'result'; branch: number; offset: -1 | 0 | 1; verdict: 'approve' | 'reject' | 'retry' }
  | { kind: 'claim'; branch: number; action: 'renew' | 'release' }
  | { kind: 'revoke'; peer: number }
  | { kind: 'cancel-reply'; branch: number; outcome: 'stopped' | 'already-completed' | 'unknown' };

const stepArb = (peers: number): fc.Arbitrary<Step> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: 1, max: 900 }).map((ms) => ({ kind: 'wait' as const, ms })) },
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('result' as const),
        branch: fc.nat(peers - 1),
        offset: fc.constantFrom(-1 as const, 0 as const, 0 as const, 1 as const),
        verdict: fc.constantFrom('approve' as const, 'reject' as const, 'retry' as const),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('claim' as const), branch: fc.nat(peers - 1), action: fc.constantFrom('renew' as const, 'release' as const) }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('revoke' as const), peer: fc.nat(peers - 1) }) },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('cancel-reply' as const),
        branch: fc.nat(peers - 1),
        outcome: fc.constantFrom('stopped' as const, 'already-completed' as const, 'unknown' as const),
      }),
    },
  );

export const caseArb = fc.integer({ min: 1, max: 4 }).chain((peers) =>
  fc.record({
    peers: fc.constant(peers),
    review: fc.record({
      delivery: fc.constantFrom('independent', 'one-eligible'),
      completion: fc.constantFrom({ mode: 'first-success' }, { mode: 'all-successful' }, { mode: 'all-terminal' }, { mode: 'quorum', count: 1 }),
      attempts: fc.integer({ min: 1, max: 3 }),
      leaseMs: fc.integer({ min: 300, max: 2000 }),
      retryBackoffMs: fc.integer({ min: 0, max: 400 }),
      siblings: fc.constantFrom('detach', 'cancel'),
      cancelTimeoutMs: fc.integer({ min: 100, max: 1500 }),
      settlementGraceMs: fc.integer({ min: 0, max: 1500 }),
    }),
    steps: fc.array(stepArb(peers), { maxLength: 25 }),
  }),
);

export async function send(s: Scenario, peer: string, kind: 'result' | 'claim' | 'cancel-result', op: string, body: object) {
  const c = s.bus.connect(`p:${peer}:${kind}`, peerBusPermissions(namespace, peer));
  await c.publish(subjectFor(namespace, 'review', op, kind, peer), encodeWire(body as never));
  await flushMicrotasks();
}

/** Applies one step to the operation `op` as it stands (`names`: the peers, sorted). */
export async function applyStep(s: Scenario, op: string, step: Step, names: readonly string[]): Promise<void> {
  const record = (await s.coordinator.record(op))!;
  const branches = Object.values(record.branches);
  const branch = branches[('branch' in step ? step.branch : 0) % branches.length]!;
  if (step.kind === 'wait') await s.clock.advance(step.ms);
  if (step.kind === 'revoke') s.policy.revoke({ peerId: names[step.peer]! });
  if (step.kind === 'result') {
    const attempt = Math.max(1, branch.attempt + step.offset);
    const fence = Math.max(1, branch.fence + step.offset);
    await send(s, branch.peerId, 'result', op, {
      kind: 'result',
      operationId: op,
      branchId: branch.branchId,
      peerId: branch.peerId,
      attempt,
      fence,
      result: { verdict: step.verdict },
    });
  }
  if (step.kind === 'claim')
    await send(s, branch.peerId, 'claim', op, {
      kind: 'claim',
      action: step.action,
      operationId: op,
      branchId: branch.branchId,
      peerId: branch.peerId,
      attempt: branch.attempt,
      fence: branch.fence,
    });
  if (step.kind === 'cancel-reply')
    await send(s, branch.peerId, 'cancel-result', op, {
      kind: 'cancel-result',
      operationId: op,
      branchId: branch.branchId,
      peerId: branch.peerId,
      attempt: branch.attempt,
      fence: branch.fence,
      outcome: step.outcome,
    });
}
