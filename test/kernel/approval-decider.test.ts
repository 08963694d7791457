/** The toy approval aggregate's decider, given / when / then (the same helper the operation's deciders use). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AssertionFailure } from '../../src/contract/errors.js';
import {
  decideApproval,
  approvalAggregate,
  requestApproval,
  type ApprovalCommand,
  type ApprovalDecision,
  type ApprovalRecord,
  type ApprovalTransition,
} from '../support/approval.js';
import { deciderSpecification } from '../support/decider-spec.js';

const t0 = 1_000_000;
let revision = 0;
const approval = deciderSpecification<ApprovalRecord | undefined, ApprovalTransition, ApprovalCommand, ApprovalDecision>({
  initialState: () => undefined,
  evolve: (record, transition) => approvalAggregate.apply(record, { revision: String(++revision), committedAtMs: t0, transition }),
  decide: (command, record) => {
    if (record === undefined) throw new AssertionFailure('no approval was requested');
    return decideApproval(command, record);
  },
});
const requested = requestApproval('r1', 2, t0, 1000);
const approvedBy = (by: string): ApprovalTransition => ({
  events: [{ type: 'approved', v: 1, by }],
  timeGuard: { notBeforeMs: 0, notAfterMs: t0 + 1000 },
  causation: { command: 'approve' },
});

test('approval: given a request, when the last approval needed arrives, then approved and granted are decided together', () => {
  approval
    .given([requested, approvedBy('a')])
    .when({ kind: 'approve', by: 'b', nowMs: t0 + 10 })
    .thenAssert((d) => assert.deepEqual(d.kind === 'decided' && d.transition.events.map((e) => e.type), ['approved', 'granted']));
});

test('approval: given an approval by a, when a approves again, then nothing changes', () => {
  approval
    .given([requested, approvedBy('a')])
    .when({ kind: 'approve', by: 'a', nowMs: t0 + 10 })
    .then({ kind: 'unchanged' });
});

test('approval: given a request, when an approval arrives at expiry, then it is refused as expired', () => {
  approval
    .given([requested])
    .when({ kind: 'approve', by: 'a', nowMs: t0 + 1000 })
    .then({ kind: 'refused', reason: 'expired' });
});

test('approval: given nothing, when anything is decided, then it throws: a stream begins with its request', () => {
  approval.given([]).when({ kind: 'expire', nowMs: t0 }).thenThrows(AssertionFailure);
});
