/**
 * Spec: "Admission and immutable manifests", steps 2–5, on the pure planner: given the observed
 * audience and authorization answers, then exactly this admission transition, or this refusal.
 * The coordinator tests (admission.test.ts) prove the same rules through the runtime; these pin
 * every field the planner freezes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planAdmission as decideAdmission, byteOrder, type AdmissionFacts } from '../../src/domain/admission.js';
import { orThrow } from '../../src/domain/decided.js';

/** Admission planning at a boundary that reports refusals as errors, as the coordinator does. */
const planAdmission = (f: AdmissionFacts) => orThrow(decideAdmission(f));
import { loadBundle } from '../../src/contract/bundle.js';
import { AdapterError } from '../../src/contract/errors.js';
import { publicationId } from '../../src/contract/ids.js';
import { limits } from '../../src/contract/limits.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import type { JsonObject } from '../../src/contract/json.js';
import type { OperationAdmitted } from '../../src/events/types.js';

const startMs = 1_700_000_000_000;

function facts(review: JsonObject = {}, overrides: Partial<AdmissionFacts> = {}): AdmissionFacts {
  const bundle = loadBundle(reviewBundle(review));
  const interaction = bundle.interactions.get('review')!;
  const peers = overrides.audience?.peers ?? ['charlie', 'alfa', 'bravo'];
  return {
    bundle,
    interaction,
    operationId: 'op-1',
    principalId: 'svc-a',
    senderPeerId: null,
    invocationKey: 'k',
    input: { document: 'hello' },
    inputDigest: 'sha256:00',
    inputBytes: 20,
    audience: { peers, revision: 'd1' },
    durableDelivery: true,
    authorizations: peers.map((peerId) => ({ peerId, allowed: true, revision: 'p1', expiresAtMs: startMs + 60_000 })),
    policyRevision: 'p1',
    invokeExpiresAtMs: startMs + 60_000,
    requestStartMs: startMs,
    attemptsMax: 16,
    ...overrides,
  };
}

function admitted(f: AdmissionFacts): OperationAdmitted {
  const transition = planAdmission(f);
  assert.equal(transition.events.length, 1);
  const [event] = transition.events;
  assert.equal(event?.type, 'operation-admitted');
  return event as OperationAdmitted;
}

const refused = (kind: AdapterError['kind'], pattern: RegExp) => (error: unknown) =>
  error instanceof AdapterError && error.kind === kind && pattern.test(error.message);

test('the planned admission freezes the manifest, identity, revisions, authorizations and the first outbox entries', () => {
  const f = facts({ completion: { mode: 'quorum', count: 2 }, attempts: 3 });
  const transition = planAdmission(f);
  const event = transition.events[0] as OperationAdmitted;
  assert.deepEqual(
    { ...event, manifest: undefined, outbox: undefined },
    {
      type: 'operation-admitted',
      v: 1,
      operationId: 'op-1',
      principalId: 'svc-a',
      senderPeerId: null,
      contract: f.bundle.ref,
      interaction: 'review',
      subjectNamespace: f.bundle.bundle.subjectNamespace,
      invocationKey: 'k',
      inputDigest: 'sha256:00',
      input: { document: 'hello' },
      timeoutMs: f.interaction.spec.timeoutMs,
      manifest: undefined,
      revisions: { directory: 'd1', policy: 'p1' },
      // In the order the policy answered (the candidates' order), filtered to the eligible peers.
      authorizations: ['charlie', 'alfa', 'bravo'].map((peerId) => ({ peerId, revision: 'p1', expiresAtMs: startMs + 60_000 })),
      outbox: undefined,
    },
  );
  const spec = f.interaction.spec;
  assert.deepEqual(event.manifest, {
    delivery: 'independent',
    completion: { mode: 'quorum', count: 2 },
    votes: 'distinct-branches',
    units: 3,
    threshold: 2,
    onTimeout: spec.onTimeout,
    siblings: spec.siblings,
    waitFor: spec.waitFor,
    attemptsMax: 3,
    leaseMs: spec.leaseMs,
    renewIntervalMs: spec.renewIntervalMs,
    retryBackoffMs: spec.retryBackoffMs,
    cancelTimeoutMs: spec.cancelTimeoutMs,
    settlementGraceMs: spec.settlementGraceMs,
    branches: ['alfa', 'bravo', 'charlie'].map((p) => ({ branchId: p, peerId: p })),
    peers: ['alfa', 'bravo', 'charlie'],
    eligible: ['alfa', 'bravo', 'charlie'],
  });
  assert.deepEqual(
    event.outbox,
    ['alfa', 'bravo', 'charlie'].map((p) => ({ branchId: p, peerId: p, attempt: 1, fence: 1, publicationId: publicationId(f.bundle.digest, 'op-1', p, 1) })),
  );
  assert.equal('presence' in event, false);
  assert.equal('streamsCreatedUntilMs' in event, false);
  assert.deepEqual(transition.timeGuard, { notBeforeMs: startMs, notAfterMs: startMs + limits.admissionBudgetMs });
  assert.deepEqual(transition.causation, { command: 'invoke', messageId: 'k' });
});

test('the manifest freezes the smaller of the contract attempts and the deployment cap', () => {
  assert.equal(admitted(facts({ attempts: 3 }, { attemptsMax: 1 })).manifest.attemptsMax, 1);
  assert.equal(admitted(facts({ attempts: 3 }, { attemptsMax: 5 })).manifest.attemptsMax, 3);
});

test('the causation message id is the invocation key cut to 256 characters', () => {
  const key = 'k'.repeat(300);
  assert.equal(planAdmission(facts({}, { invocationKey: key })).causation.messageId, 'k'.repeat(256));
});

test('the time guard ends at the earliest of the admission budget, the invoke decision and every frozen authorization', () => {
  const guard = (f: AdmissionFacts) => planAdmission(f).timeGuard;
  assert.deepEqual(guard(facts({}, { invokeExpiresAtMs: startMs + 700 })), { notBeforeMs: startMs, notAfterMs: startMs + 700 });
  const one = facts();
  one.authorizations[1]!.expiresAtMs = startMs + 300;
  assert.deepEqual(guard(one), { notBeforeMs: startMs, notAfterMs: startMs + 300 });
  // An authorization that expires one millisecond after the start still leaves a guard; one that has expired refuses.
  assert.equal(guard(facts({}, { invokeExpiresAtMs: startMs + 1 })).notAfterMs, startMs + 1);
  assert.throws(() => planAdmission(facts({}, { invokeExpiresAtMs: startMs })), refused('expired', /authorization expired before admission could commit/));
});

test("only eligible peers' authorizations are frozen: one-eligible keeps every eligible peer, its branch the first in byte order", () => {
  const f = facts({ delivery: 'one-eligible', completion: { mode: 'first-success' } }, { audience: { peers: ['bravo', 'Zulu', 'alfa'], revision: 'd1' } });
  const event = admitted(f);
  assert.deepEqual(event.manifest.branches, [{ branchId: 'Zulu', peerId: 'Zulu' }]);
  assert.deepEqual(event.manifest.peers, ['Zulu']);
  assert.deepEqual(event.manifest.eligible, ['Zulu', 'alfa', 'bravo']);
  assert.deepEqual(
    event.authorizations.map((a) => a.peerId),
    ['bravo', 'Zulu', 'alfa'],
  );
  assert.deepEqual(
    event.outbox.map((o) => o.peerId),
    ['Zulu'],
  );
});

test('a denied or missing candidate authorization leaves that peer out of an independent audience', () => {
  const f = facts({ completion: { mode: 'first-success' } }, { audience: { peers: ['alfa', 'bravo', 'charlie', 'delta'], revision: 'd1' } });
  f.authorizations = [
    { peerId: 'alfa', allowed: true, revision: 'p1', expiresAtMs: startMs + 1 },
    { peerId: 'bravo', allowed: false, revision: 'p1', expiresAtMs: startMs + 60_000 },
  ];
  const event = admitted(f);
  assert.deepEqual(event.manifest.peers, ['alfa']);
  assert.deepEqual(
    event.authorizations.map((a) => a.peerId),
    ['alfa'],
  );
});

test('an expired candidate allow is not a denial: it refuses the admission as expired rather than leaving the peer out', () => {
  const f = facts({ completion: { mode: 'first-success' } }, { audience: { peers: ['alfa', 'bravo', 'charlie'], revision: 'd1' } });
  f.authorizations = [
    { peerId: 'alfa', allowed: true, revision: 'p1', expiresAtMs: startMs + 1 },
    { peerId: 'bravo', allowed: false, revision: 'p1', expiresAtMs: startMs + 60_000 },
    { peerId: 'charlie', allowed: true, revision: 'p1', expiresAtMs: startMs },
  ];
  assert.throws(() => planAdmission(f), refused('expired', /candidate charlie/));
});

test('sender exclude removes only the invoking peer; a duplicated audience entry is one candidate', () => {
  const audience = { peers: ['bravo', 'alfa', 'alfa', 'charlie'], revision: 'd1' };
  const excluded = admitted(facts({ sender: 'exclude', completion: { mode: 'first-success' } }, { audience, senderPeerId: 'bravo' }));
  assert.deepEqual(excluded.manifest.peers, ['alfa', 'charlie']);
  assert.equal(excluded.senderPeerId, 'bravo');
  const included = admitted(facts({ sender: 'include', completion: { mode: 'first-success' } }, { audience, senderPeerId: 'bravo' }));
  assert.deepEqual(included.manifest.peers, ['alfa', 'bravo', 'charlie']);
  const noSender = admitted(facts({ sender: 'exclude', completion: { mode: 'first-success' } }, { audience, senderPeerId: null }));
  assert.deepEqual(noSender.manifest.peers, ['alfa', 'bravo', 'charlie']);
});

test('explicit and gather manifests need every listed peer authorized, and keep their branch ids', () => {
  const branches = [
    { branchId: 'b2', peerId: 'bravo' },
    { branchId: 'a1', peerId: 'alfa' },
    { branchId: 'a2', peerId: 'alfa' },
  ];
  const explicit = admitted(facts({ delivery: 'explicit', branches, completion: { mode: 'first-success' } }));
  assert.deepEqual(explicit.manifest.branches, branches);
  assert.deepEqual(explicit.manifest.peers, ['alfa', 'bravo']);
  assert.equal(explicit.manifest.units, 3);
  const denied = facts({ delivery: 'explicit', branches, completion: { mode: 'first-success' } });
  denied.authorizations = denied.authorizations.filter((a) => a.peerId !== 'bravo');
  assert.throws(() => planAdmission(denied), refused('denied', /explicit manifest peers not authorized: bravo$/));
  const gathered = {
    branches: [
      { branchId: 'g1', peerId: 'charlie' },
      { branchId: 'g2', peerId: 'alfa' },
    ],
    revision: 'm1',
  };
  const gather = planAdmission(facts({ delivery: 'gather', completion: { mode: 'first-success' } }, { gathered }));
  const event = gather.events[0] as OperationAdmitted;
  assert.deepEqual(event.manifest.branches, gathered.branches);
  assert.deepEqual(event.revisions, { directory: 'd1', policy: 'p1', manifest: 'm1' });
  const gatherDenied = facts({ delivery: 'gather', completion: { mode: 'first-success' } }, { gathered });
  gatherDenied.authorizations = gatherDenied.authorizations.filter((a) => a.peerId !== 'charlie');
  assert.throws(() => planAdmission(gatherDenied), refused('denied', /gather manifest peers not authorized: charlie$/));
  // Without a manifest source, gather is unsupported (not an empty or denied audience).
  assert.throws(() => planAdmission(facts({ delivery: 'gather', completion: { mode: 'first-success' } })), refused('unsupported', /needs a manifest source/));
});

test("a gathered manifest's branch ids are checked at admission, whatever source answered it: each a token, each once", () => {
  const gather = (branches: { branchId: string; peerId: string }[]) =>
    planAdmission(facts({ delivery: 'gather', completion: { mode: 'first-success' } }, { gathered: { branches, revision: 'm2' } }));
  assert.throws(
    () =>
      gather([
        { branchId: 'g1', peerId: 'alfa' },
        { branchId: 'g1', peerId: 'charlie' },
      ]),
    refused('invalid-input', /gathered manifest \(revision m2\) names branch g1 twice$/),
  );
  for (const branchId of ['a.b', 'a>', '', 'x'.repeat(65), 'é'])
    assert.throws(() => gather([{ branchId, peerId: 'alfa' }]), refused('invalid-input', /gathered manifest branch id must match/), JSON.stringify(branchId));
  assert.equal((gather([{ branchId: 'g_1-x', peerId: 'alfa' }]).events[0] as OperationAdmitted).manifest.branches[0]?.branchId, 'g_1-x');
});

test('distinct-peers units count peers, not branches, and the threshold is checked against them', () => {
  const branches = [
    { branchId: 'a1', peerId: 'alfa' },
    { branchId: 'a2', peerId: 'alfa' },
    { branchId: 'b1', peerId: 'bravo' },
  ];
  const event = admitted(facts({ delivery: 'explicit', branches, votes: 'distinct-peers', completion: { mode: 'quorum', count: 2 } }));
  assert.deepEqual([event.manifest.units, event.manifest.threshold], [2, 2]);
  assert.throws(
    () => planAdmission(facts({ delivery: 'explicit', branches, votes: 'distinct-peers', completion: { mode: 'quorum', count: 3 } })),
    refused('invalid-input', /impossible threshold: 3 of 2 peers$/),
  );
  assert.throws(() => planAdmission(facts({ completion: { mode: 'quorum', count: 4 } })), refused('invalid-input', /impossible threshold: 4 of 3 branches$/));
});

test('the input, branch and audience budgets refuse the plan', () => {
  assert.throws(() => planAdmission(facts({}, { inputBytes: limits.inputBytesMax + 1 })), refused('invalid-input', /input is/));
  assert.equal(admitted(facts({ completion: { mode: 'first-success' } }, { inputBytes: limits.inputBytesMax })).type, 'operation-admitted');
  const many = Array.from({ length: limits.branchesMax + 1 }, (_, i) => `p${String(i).padStart(3, '0')}`);
  assert.throws(
    () => planAdmission(facts({ completion: { mode: 'first-success' } }, { audience: { peers: many, revision: 'd1' } })),
    refused('invalid-input', /branches exceed the budget/),
  );
  const most = many.slice(0, limits.branchesMax);
  assert.equal(admitted(facts({ completion: { mode: 'first-success' } }, { audience: { peers: most, revision: 'd1' } })).manifest.units, limits.branchesMax);
  assert.throws(() => planAdmission(facts({}, { audience: { peers: [], revision: 'd1' } })), refused('denied', /audience is empty/));
  assert.throws(
    () => planAdmission(facts({}, { audience: { peers: ['bad peer'], revision: 'd1' } })),
    (e) => e instanceof AdapterError && e.kind === 'invalid-input',
  );
});

test('presence is recorded for the listed candidates, sorted and deduplicated, and the offline rule applies', () => {
  const presence = { revision: 'pr1', online: ['charlie', 'alfa', 'alfa', 'zulu'], offline: ['bravo', 'yankee'] };
  const audience = { peers: ['alfa', 'bravo', 'charlie'], revision: 'd1', presence };
  const deliver = admitted(facts({ completion: { mode: 'first-success' }, offline: 'deliver' }, { audience }));
  assert.deepEqual(deliver.presence, { revision: 'pr1', online: ['alfa', 'charlie'], offline: ['bravo'] });
  assert.deepEqual(deliver.manifest.peers, ['alfa', 'bravo', 'charlie']);
  const exclude = admitted(facts({ completion: { mode: 'first-success' }, offline: 'exclude' }, { audience }));
  assert.deepEqual(exclude.manifest.peers, ['alfa', 'charlie']);
  assert.throws(
    () => planAdmission(facts({ completion: { mode: 'first-success' }, offline: 'deliver' }, { audience, durableDelivery: false })),
    refused('unsupported', /peers bravo were observed offline \(presence pr1\)/),
  );
  // Nobody observed offline: no durable delivery is needed.
  const allOnline = { ...audience, presence: { revision: 'pr2', online: ['alfa'], offline: [] } };
  assert.deepEqual(
    admitted(facts({ completion: { mode: 'first-success' }, offline: 'deliver' }, { audience: allOnline, durableDelivery: false })).manifest.peers,
    ['alfa', 'bravo', 'charlie'],
  );
});

test('the verified stream creation instant is recorded with the admission when there is one', () => {
  assert.equal(admitted(facts({}, { streamsCreatedUntilMs: startMs - 5 })).streamsCreatedUntilMs, startMs - 5);
  assert.equal(admitted(facts({}, { streamsCreatedUntilMs: 0 })).streamsCreatedUntilMs, 0);
});

test('byteOrder is unsigned byte order of ASCII ids: upper case before lower case, shorter prefix first', () => {
  assert.deepEqual(['b', 'a', 'B', 'ab', 'A'].sort(byteOrder), ['A', 'B', 'a', 'ab', 'b']);
  assert.equal(byteOrder('a', 'a'), 0);
  assert.equal(byteOrder('a', 'b'), -1);
  assert.equal(byteOrder('b', 'a'), 1);
});

test('one-eligible with no authorized candidate is denied as an empty audience, never a branch without a peer', () => {
  const f = facts({ delivery: 'one-eligible', completion: { mode: 'first-success' } });
  f.authorizations = f.authorizations.map((a) => ({ ...a, allowed: false }));
  assert.throws(() => planAdmission(f), refused('denied', /audience is empty after sender and authorization rules/));
});
