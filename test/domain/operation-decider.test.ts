/**
 * The operation's deciders, given / when / then: rules that are purely a decider's, tested
 * without a runtime — the record is the fold of the given transitions (projections/record.ts),
 * the command is decided once, the answer is compared. End-to-end scenarios stay in test/unit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadBundle } from '../../src/contract/bundle.js';
import { AdapterError, AssertionFailure } from '../../src/contract/errors.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { guardBetween, openEndedMs } from '../../src/events/guard.js';
import type { DomainEvent, Transition } from '../../src/events/types.js';
import type { ResultMessage } from '../../src/events/wire.js';
import { planAdmission, type AdmissionFacts } from '../../src/domain/admission.js';
import { orThrow } from '../../src/domain/decided.js';
import { decideCancelOperation, decideDue, decideDurabilityLost, decideResult, type ResultCommand } from '../../src/domain/decide.js';
import { assertLegal } from '../../src/domain/legal.js';
import { applyStored, type OperationRecord } from '../../src/projections/record.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { deciderSpecification } from '../support/decider-spec.js';

const t0 = 1_700_000_000_000;
const peers = ['alfa', 'bravo', 'charlie'];

function compiled(review: JsonObject = {}) {
  const bundle = loadBundle(reviewBundle(review));
  return { bundle, interaction: bundle.interactions.get('review')! };
}

function admissionFacts(review: JsonObject = {}, changes: Partial<AdmissionFacts> = {}): AdmissionFacts {
  const { bundle, interaction } = compiled(review);
  return {
    bundle,
    interaction,
    operationId: `op${'0'.repeat(62)}`,
    principalId: 'svc-a',
    senderPeerId: null,
    invocationKey: 'k1',
    input: { document: 'hello' },
    inputDigest: `sha256:${'a'.repeat(64)}`,
    inputBytes: 20,
    audience: { peers, revision: 'd1' },
    durableDelivery: false,
    authorizations: peers.map((peerId) => ({ peerId, allowed: true, revision: 'p1', expiresAtMs: t0 + 3_600_000 })),
    policyRevision: 'p1',
    invokeExpiresAtMs: t0 + 3_600_000,
    requestStartMs: t0,
    attemptsMax: 1,
    ...changes,
  };
}

/** One given transition: its events, committed at `atMs`. */
interface Given {
  atMs: number;
  events: DomainEvent[];
}

type Command = (record: OperationRecord) => unknown;

let revision = 0;
const operation = deciderSpecification<OperationRecord | undefined, Given, Command, unknown>({
  initialState: () => undefined,
  evolve: (record, given) => {
    const transition: Transition = { events: given.events, timeGuard: guardBetween(given.atMs, openEndedMs), causation: { command: 'given' } };
    return applyStored(record, { revision: String(++revision), committedAtMs: given.atMs, transition });
  },
  decide: (command, record) => {
    assert.ok(record, 'the given events admit the operation');
    return command(record);
  },
});

const admitted = (review: JsonObject = {}): Given => ({ atMs: t0, events: orThrow(planAdmission(admissionFacts(review))).events });

function result(peerId: string, verdict: string, nowMs: number, attempt = 1): ResultCommand {
  const message: ResultMessage = { kind: 'result', operationId: `op${'0'.repeat(62)}`, branchId: peerId, peerId, attempt, fence: 1, result: { verdict } };
  return {
    subject: `demo.v1.lab.review.op.result.${peerId}`,
    subjectPeerId: peerId,
    message,
    publisherProblem: undefined,
    authorizationProblem: undefined,
    authorizedUntilMs: t0 + 3_600_000,
    nowMs,
  };
}

const accepted = (peerId: string, verdict: JsonValue, atMs: number): Given => ({
  atMs,
  events: [
    {
      type: 'result-accepted',
      v: 1,
      branchId: peerId,
      peerId,
      attempt: 1,
      fence: 1,
      status: verdict === 'approve' ? 'success' : 'failure',
      retryable: false,
      retryAtMs: null,
      result: { verdict },
      subject: `s.${peerId}`,
    },
  ],
});

const types = (transition: Transition | undefined) => transition?.events.map((e) => e.type);
const { interaction } = compiled();

test('given an admission, when a party answers before the deadline and its lease, then its result is accepted', () => {
  operation
    .given([admitted()])
    .when((record) => decideResult(record, interaction, result('alfa', 'approve', t0 + 10)))
    .thenAssert((d) => {
      const decision = d as ReturnType<typeof decideResult>;
      assert.equal(decision.kind, 'accept');
      assert.deepEqual(types('transition' in decision ? decision.transition : undefined), ['result-accepted']);
    });
});

test('given an admission, when a result arrives at the deadline, then it is rejected as late and the rejection recorded', () => {
  operation
    .given([admitted()])
    .when((record) => decideResult(record, interaction, result('alfa', 'approve', record.deadlineMs)))
    .thenAssert((d) => {
      const decision = d as ReturnType<typeof decideResult>;
      assert.equal(decision.kind, 'reject');
      assert.equal(decision.kind === 'reject' && decision.reason, 'late');
      assert.deepEqual(types(decision.kind === 'reject' ? decision.transition : undefined), ['result-rejected']);
    });
});

test('given an accepted result, when the same result arrives again, then it is a duplicate and nothing is appended', () => {
  operation
    .given([admitted(), accepted('alfa', 'approve', t0 + 10)])
    .when((record) => decideResult(record, interaction, result('alfa', 'approve', t0 + 20)))
    .then({ kind: 'duplicate' });
});

test('given an accepted result, when a different result for the same attempt arrives, then a protocol conflict is recorded and the accepted result stands', () => {
  operation
    .given([admitted(), accepted('alfa', 'approve', t0 + 10)])
    .when((record) => decideResult(record, interaction, result('alfa', 'reject', t0 + 20)))
    .thenAssert((d) => {
      const decision = d as ReturnType<typeof decideResult>;
      assert.equal(decision.kind, 'protocol-conflict');
      assert.deepEqual(types(decision.kind === 'protocol-conflict' ? decision.transition : undefined), ['protocol-conflict-recorded']);
    });
});

test('given two approvals of a quorum of three, when the third approves, then the decision closes in the same transition', () => {
  operation
    .given([admitted({ completion: { mode: 'quorum', count: 3 } }), accepted('alfa', 'approve', t0 + 10), accepted('bravo', 'approve', t0 + 20)])
    .when((record) => decideResult(record, interaction, result('charlie', 'approve', t0 + 30)))
    .thenAssert((d) => {
      const decision = d as ReturnType<typeof decideResult>;
      assert.equal(decision.kind, 'accept');
      const transition = decision.kind === 'accept' ? decision.transition : undefined;
      assert.deepEqual(types(transition), ['result-accepted', 'decision-closed', 'settlement-completed']);
      const closed = transition?.events[1];
      assert.equal(closed?.type === 'decision-closed' && closed.outcome, 'success');
    });
});

test('given an open operation, when its deadline is due, then it closes with the declared timeout outcome, guarded from the deadline on', () => {
  operation
    .given([admitted({ onTimeout: 'partial' }), accepted('alfa', 'approve', t0 + 10)])
    .when((record) => decideDue(record, record.deadlineMs, () => undefined))
    .thenAssert((d) => {
      const transition = d as Transition;
      assert.deepEqual(types(transition), ['decision-closed', 'settlement-completed']);
      const closed = transition.events[0];
      assert.equal(closed?.type === 'decision-closed' && `${closed.outcome}/${closed.reason}`, 'partial/timeout');
      assert.deepEqual(transition.timeGuard, { notBeforeMs: t0 + 5000, notAfterMs: openEndedMs });
    });
});

test('given a closed decision, when the invoker cancels, then nothing is decided (a decision never changes)', () => {
  const closeAll = (record: OperationRecord) => decideDurabilityLost(record)!;
  let closed: Given | undefined;
  operation
    .given([admitted()])
    .when((record) => (closed = { atMs: t0 + 50, events: closeAll(record).events }))
    .thenAssert((d) => assert.ok(d));
  operation
    .given([admitted(), closed!])
    .when((record) => decideCancelOperation(record, t0 + 60, t0 + 3_600_000))
    .then(undefined);
});

test('given an open operation, when durability is lost, then it closes indeterminate with its open branches detached', () => {
  operation
    .given([admitted(), accepted('alfa', 'approve', t0 + 10)])
    .when((record) => decideDurabilityLost(record))
    .thenAssert((d) => {
      const transition = d as Transition;
      assert.deepEqual(types(transition), ['decision-closed', 'settlement-completed']);
      const closed = transition.events[0];
      assert.ok(closed?.type === 'decision-closed');
      assert.equal(`${closed.outcome}/${closed.reason}`, 'indeterminate/durability-lost');
      assert.deepEqual(
        closed.siblings.map((s) => `${s.branchId}:${s.disposition}`),
        ['bravo:detached', 'charlie:detached'],
      );
    });
});

test('given a closed decision, when a decider emits a second closure, then the legality check refuses it before any append', () => {
  operation
    .given([admitted(), accepted('alfa', 'approve', t0 + 10)])
    .when((record) => {
      const closing = decideDurabilityLost(record)!.events;
      assertLegal(record, closing, 'durability-lost');
      return () => assertLegal(record, [...closing, closing[0]!], 'twice');
    })
    .thenAssert((again) => assert.throws(again as () => void, AssertionFailure));
});

test('given nothing, when an admission finds every candidate refused by policy, then it is refused as denied and nothing is planned', () => {
  const facts = admissionFacts(
    {},
    { authorizations: peers.map((peerId) => ({ peerId, allowed: false, revision: 'p1', expiresAtMs: t0 + 1000, reason: 'no' })) },
  );
  const decided = planAdmission(facts);
  assert.equal(decided.kind, 'refused');
  assert.ok(decided.kind === 'refused' && decided.refusal instanceof AdapterError);
  assert.equal(decided.kind === 'refused' && decided.refusal.kind, 'denied');
});
