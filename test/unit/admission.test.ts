/**
 * Spec: "Admission and immutable manifests" — one test per rule, each named after it, each
 * checking that the state rebuilt from the log equals the live state.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, answers, types } from '../support/scenario.js';
import { AdapterError } from '../../src/contract/errors.js';
import { canonicalJson, sha256Hex } from '../../src/contract/canonical.js';
import { operationId } from '../../src/contract/ids.js';
import { limits } from '../../src/contract/limits.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { VirtualClock, flushMicrotasks } from '../../src/contract/clock.js';
import type { JsonObject } from '../../src/contract/json.js';
import type { OperationAdmitted, Transition } from '../../src/events/types.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import type { Directory } from '../../src/adapters/directory/types.js';

const rejects = (kind: AdapterError['kind']) => (error: unknown) => error instanceof AdapterError && error.kind === kind;

async function admittedEvent(s: Awaited<ReturnType<typeof scenario>>, opId: string): Promise<OperationAdmitted> {
  const [first] = await s.events(opId);
  assert.equal(first?.type, 'operation-admitted');
  return first as OperationAdmitted;
}

test('input is canonicalized with RFC 8785 before its invocation digest is computed', async () => {
  const s = await scenario({ review: { input: { type: 'object' } } });
  const a = await s.invoke('k', { b: 1, a: [1, 2, { d: true, c: null }] });
  const b = await s.invoke('k', { a: [1, 2, { c: null, d: true }], b: 1 });
  assert.equal(a.result.operationId, b.result.operationId);
  assert.equal(b.created, false);
  const admitted = await admittedEvent(s, a.result.operationId);
  assert.equal(admitted.inputDigest, `sha256:${sha256Hex(canonicalJson({ a: [1, 2, { c: null, d: true }], b: 1 }))}`);
  await s.assertReplayEquals(a.result.operationId);
});

test('nonfinite numbers, unsafe integers and invalid Unicode in the input fail', async () => {
  const s = await scenario({ review: { input: { type: 'object' } } });
  await assert.rejects(s.invoke('k1', { n: 2 ** 60 }), rejects('invalid-input'));
  await assert.rejects(s.invoke('k2', { n: Number.POSITIVE_INFINITY }), rejects('invalid-input'));
  await assert.rejects(s.invoke('k3', { s: 'a\ud800b' }), rejects('invalid-input'));
  assert.equal(s.bus.stats.published, 0);
});

test('the contract bundle digest participates in the operation key', async () => {
  const s = await scenario();
  const { result } = await s.invoke('same-key');
  assert.equal(result.operationId, operationId('svc-a', s.bundle.digest, 'same-key'));
  assert.notEqual(result.operationId, operationId('svc-a', `sha256:${'0'.repeat(64)}`, 'same-key'));
  assert.notEqual(result.operationId, operationId('svc-b', s.bundle.digest, 'same-key'));
});

test('the operation ID is op plus the SHA-256 of length-prefixed principal, contract digest and key', async () => {
  const s = await scenario();
  const { result } = await s.invoke('k');
  assert.match(result.operationId, /^op[0-9a-f]{64}$/);
  assert.equal(result.operationId.length, 66);
});

test('admission records resolver and policy revisions and the distinct logical peers', async () => {
  const s = await scenario();
  const { result } = await s.invoke('k');
  const admitted = await admittedEvent(s, result.operationId);
  assert.equal(admitted.revisions.directory, s.directory.revision);
  assert.equal(admitted.revisions.policy, s.policy.revision);
  assert.deepEqual(admitted.manifest.peers, peerIds(5).sort());
  assert.equal(admitted.authorizations.length, 5);
  await s.assertReplayEquals(result.operationId);
});

test('sender exclude removes the invoking peer from the audience; include keeps it', async () => {
  const excluding = await scenario({ review: { sender: 'exclude' } });
  const a = await excluding.invoke('k', undefined, 'svc-a', 'alfa');
  assert.deepEqual(
    a.result.branches.map((b) => b.peerId),
    ['bravo', 'charlie', 'delta', 'echo'],
  );
  const including = await scenario({ review: { sender: 'include' } });
  const b = await including.invoke('k', undefined, 'svc-a', 'alfa');
  assert.equal(b.result.branches.length, 5);
});

test('every included peer is authorized; a denied peer fails closed and is not admitted', async () => {
  const s = await scenario({ embedded: { rules: [{ effect: 'allow' }, { effect: 'deny', peers: ['charlie'] }] } });
  const { result } = await s.invoke('k');
  assert.deepEqual(
    result.branches.map((b) => b.peerId),
    ['alfa', 'bravo', 'delta', 'echo'],
  );
  await s.assertReplayEquals(result.operationId);
});

test('an unavailable authorization decision fails closed and creates nothing', async () => {
  const s = await scenario();
  const broken = {
    authorize: async () => {
      throw new AdapterError('unavailable', 'policy service down');
    },
  };
  s.coordinator.deps.policy = broken;
  await assert.rejects(s.invoke('k'), rejects('unavailable'));
  const ids = [];
  for await (const id of s.store.operationIds()) ids.push(id);
  assert.deepEqual(ids, []);
});

test('a principal the policy does not allow to invoke is denied', async () => {
  const s = await scenario({
    embedded: {
      rules: [
        { effect: 'allow', principals: ['svc-b'] },
        { effect: 'allow', peers: ['*'] },
      ],
    },
  });
  await assert.rejects(s.invoke('k', undefined, 'svc-a'), rejects('denied'));
});

test('independent delivery uses the initial peer ID as the branch ID', async () => {
  const s = await scenario();
  const { result } = await s.invoke('k');
  for (const b of result.branches) assert.equal(b.branchId, b.peerId);
});

test('empty audiences are rejected', async () => {
  const s = await scenario({ groups: { reviewers: [] } });
  await assert.rejects(s.invoke('k'), rejects('denied'));
  assert.equal(s.bus.stats.published, 0);
});

test('impossible thresholds are rejected', async () => {
  const s = await scenario({ peers: 2 });
  await assert.rejects(s.invoke('k'), (e) => rejects('invalid-input')(e) && /impossible threshold: 3 of 2/.test((e as Error).message));
});

test('unknown contracts are unsupported and unknown interactions are invalid input', async () => {
  const s = await scenario();
  const ref = { ...s.bundle.ref, digest: `sha256:${'1'.repeat(64)}` };
  await assert.rejects(
    s.coordinator.invoke({ principalId: 'p', senderPeerId: null }, { contract: ref, interaction: 'review', invocationKey: 'k', input: { document: 'x' } }),
    rejects('unsupported'),
  );
  await assert.rejects(
    s.coordinator.invoke(
      { principalId: 'p', senderPeerId: null },
      { contract: s.bundle.ref, interaction: 'nope', invocationKey: 'k', input: { document: 'x' } },
    ),
    rejects('invalid-input'),
  );
});

test('input that fails the interaction input schema is invalid input', async () => {
  const s = await scenario();
  await assert.rejects(s.invoke('k', { document: 42 }), rejects('invalid-input'));
});

test('the branch-count budget is checked before any state is created', async () => {
  const many = Array.from({ length: limits.branchesMax + 1 }, (_, i) => `p${i}`);
  const s = await scenario({ groups: { reviewers: many } });
  await assert.rejects(s.invoke('k'), rejects('invalid-input'));
  const ids = [];
  for await (const id of s.store.operationIds()) ids.push(id);
  assert.equal(ids.length, 0);
});

test('the serialized size budget is checked before creating state, never truncating the manifest', async () => {
  const s = await scenario({ review: { input: { type: 'object' } } });
  await assert.rejects(s.invoke('k', { blob: 'x'.repeat(limits.inputBytesMax + 1) }), rejects('invalid-input'));
  const ids = [];
  for await (const id of s.store.operationIds()) ids.push(id);
  assert.equal(ids.length, 0);
});

test('a duplicate invocation key with the same input returns the existing operation', async () => {
  const s = await scenario();
  const first = await s.invoke('k');
  const again = await s.invoke('k');
  assert.equal(first.created, true);
  assert.equal(again.created, false);
  assert.equal(again.result.operationId, first.result.operationId);
  const events = await s.events(first.result.operationId);
  assert.equal(events.filter((e) => e.type === 'operation-admitted').length, 1);
});

test('a duplicate key another coordinator admitted is found through the store: same input returns it, a different input conflicts', async () => {
  const s = await scenario();
  const first = await s.invoke('k');
  // A second coordinator on the same store has no cached entry: its create conflicts and it reads.
  s.coordinator.kernel.clear();
  const again = await s.invoke('k');
  assert.deepEqual([again.created, again.result.operationId], [false, first.result.operationId]);
  s.coordinator.kernel.clear();
  await assert.rejects(s.invoke('k', { document: 'other' }), rejects('conflict'));
  const events = await s.events(first.result.operationId);
  assert.equal(events.filter((e) => e.type === 'operation-admitted').length, 1);
});

test('a retry of an admitted key returns its operation even where a new admission would now be refused', async () => {
  const s = await scenario();
  const first = await s.invoke('k');
  s.policy.revoke({ principalId: 'svc-a' });
  s.coordinator.kernel.clear();
  const again = await s.invoke('k');
  assert.deepEqual([again.created, again.result.operationId], [false, first.result.operationId]);
  await assert.rejects(s.invoke('new-key'), rejects('denied'));
});

test('a duplicate invocation key with a different input fails with conflict', async () => {
  const s = await scenario();
  await s.invoke('k', { document: 'one' });
  await assert.rejects(s.invoke('k', { document: 'two' }), rejects('conflict'));
});

test("the recorded invocation identity is compared in full: a reused key naming a different interaction is a conflict, never the other interaction's operation", async () => {
  const base = reviewBundle();
  const review = (base.interactions as Record<string, JsonObject>).review!;
  const bundle = { ...base, interactions: { review, sealed: { ...review, waitFor: 'settled' } } };
  const e = await createEmbedded({ clock: new VirtualClock(), bundle, groups: { reviewers: peerIds(3) }, resultBatchMs: 0 });
  const invoke = (interaction: string) =>
    e.coordinator.invoke(
      { principalId: 'svc-a', senderPeerId: null },
      { contract: e.bundle.ref, interaction, invocationKey: 'k', input: { document: 'same' } },
    );
  const sealed = await invoke('sealed');
  assert.equal(sealed.created, true);
  // Held in this coordinator's cache, and found through the store by a coordinator that never saw it.
  await assert.rejects(
    invoke('review'),
    (error: unknown) => rejects('conflict')(error) && /interaction \("sealed"\)/.test((error as AdapterError).description ?? ''),
  );
  e.coordinator.kernel.clear();
  await assert.rejects(invoke('review'), rejects('conflict'));
  const again = await invoke('sealed');
  assert.deepEqual([again.created, again.result.operationId, again.result.interaction], [false, sealed.result.operationId, 'sealed']);
});

test('no sends occur before successful creation', async () => {
  const s = await scenario();
  const failing: EventStore = Object.assign(Object.create(s.store) as EventStore, {
    create: async () => ({ kind: 'unavailable' as const, description: 'disk gone' }),
    read: async () => ({ kind: 'not-found' as const, description: 'none' }),
  });
  s.coordinator.deps.store = failing;
  await assert.rejects(s.invoke('k'), rejects('unavailable'));
  assert.equal(s.bus.stats.published, 0);
});

test('the deadline starts at the admission boundary: admittedAtMs is the store commit time and deadlineMs adds timeoutMs', async () => {
  const s = await scenario();
  const start = s.clock.nowMs();
  const { result } = await s.invoke('k');
  assert.equal(result.admittedAtMs, start);
  assert.equal(result.deadlineMs, start + 5000);
});

/** Whether a promise has settled after the queued work ran; a hung admission stays pending. */
async function settledYet(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await flushMicrotasks();
  return settled;
}

async function operationCount(s: Awaited<ReturnType<typeof scenario>>): Promise<number> {
  let count = 0;
  for await (const _ of s.store.operationIds()) count++;
  return count;
}

/** A call that answers only when the test says so (after the budget, or never). */
function hung<T>(): { call: () => Promise<T>; answer: (value: T) => void; calls: () => number } {
  let release: ((value: T) => void) | undefined;
  let calls = 0;
  const waiting = new Promise<T>((resolve) => (release = resolve));
  return { call: () => (calls++, waiting), answer: (value) => release!(value), calls: () => calls };
}

for (const which of ['directory', 'policy', 'manifest source'] as const) {
  test(`admission has a fixed 10000 ms budget: a hung ${which} cannot admit work later, the budget ends the wait and nothing is created`, async () => {
    const s = await scenario(
      which === 'manifest source'
        ? { review: { delivery: 'gather' }, embedded: { manifests: { 'lab.review/review': [{ branchId: 'b1', peerId: 'alfa' }] } } }
        : {},
    );
    const deps = s.coordinator.deps;
    const directory = hung<{ peers: string[]; revision: string }>();
    const policy = hung<{ allowed: boolean; revision: string; expiresAtMs: number }>();
    const manifest = hung<{ branches: { branchId: string; peerId: string }[]; revision: string }>();
    if (which === 'directory') deps.directory = { audience: directory.call };
    if (which === 'policy') deps.policy = { authorize: policy.call };
    if (which === 'manifest source') deps.manifests = { gather: manifest.call };
    const admission = s.invoke('k');
    admission.catch(() => undefined);
    await s.clock.advance(limits.admissionBudgetMs - 1);
    assert.equal(await settledYet(admission), false, 'still waiting inside the budget');
    await s.clock.advance(1);
    assert.equal(await settledYet(admission), true, 'the budget ended the wait');
    await assert.rejects(admission, (e) => rejects('expired')(e) && /10000 ms budget/.test((e as Error).message));
    assert.equal(directory.calls() + policy.calls() + manifest.calls(), 1);
    // The hung call answers at last: nothing is created from its late answer.
    directory.answer({ peers: ['alfa', 'bravo', 'charlie'], revision: 'r1' });
    policy.answer({ allowed: true, revision: 'p1', expiresAtMs: s.clock.nowMs() + 60_000 });
    manifest.answer({ branches: [{ branchId: 'b1', peerId: 'alfa' }], revision: 'm1' });
    await s.settle();
    assert.equal(await operationCount(s), 0);
    assert.equal(s.bus.stats.published, 0);
    assert.equal(s.clock.pendingTimers(), 0, 'the budget timer is gone');
  });
}

test('a resolver that answers at the end of the admission budget cannot admit work', async () => {
  const s = await scenario();
  const slow: Directory = {
    audience: async () => {
      s.clock.set(s.clock.nowMs() + limits.admissionBudgetMs);
      return { peers: ['alfa', 'bravo', 'charlie'], revision: 'r1' };
    },
  };
  s.coordinator.deps.directory = slow;
  // A store that would take the commit at any instant: only the runtime's budget can refuse it.
  const unguarded = Object.assign(Object.create(s.store) as EventStore, {
    create: (id: string, t: Transition) =>
      s.store.create(id, { ...t, timeGuard: { notBeforeMs: t.timeGuard.notBeforeMs, notAfterMs: Number.MAX_SAFE_INTEGER } }),
  });
  s.coordinator.deps.store = unguarded;
  await assert.rejects(s.invoke('k'), rejects('expired'));
  assert.equal(await operationCount(s), 0);
  assert.equal(s.bus.stats.published, 0);
});

test('a resolver revision change during the snapshot check restarts admission within its budget', async () => {
  const s = await scenario();
  let calls = 0;
  const moving: Directory = {
    audience: async () => {
      calls++;
      return calls <= 1 ? { peers: ['alfa', 'bravo', 'charlie'], revision: 'r1' } : { peers: ['alfa', 'bravo', 'charlie', 'delta'], revision: 'r2' };
    },
  };
  s.coordinator.deps.directory = moving;
  const { result } = await s.invoke('k');
  const admitted = await admittedEvent(s, result.operationId);
  assert.equal(admitted.revisions.directory, 'r2');
  assert.equal(admitted.manifest.branches.length, 4);
  assert.ok(calls >= 3);
});

test('at admission every branch has its initial assignment with attempt and fence 1 and a pending outbox entry', async () => {
  const s = await scenario();
  const { result } = await s.invoke('k');
  const admitted = await admittedEvent(s, result.operationId);
  assert.equal(admitted.outbox.length, 5);
  for (const intent of admitted.outbox) {
    assert.equal(intent.attempt, 1);
    assert.equal(intent.fence, 1);
    assert.match(intent.publicationId, /^[0-9a-f]{64}$/);
  }
  for (const b of result.branches) assert.deepEqual([b.attempt, b.fence, b.status], [1, 1, 'pending']);
});

test('result subscriptions are established before any request is published', async () => {
  const s = await scenario();
  const order: string[] = [];
  const transport = s.coordinator.deps.transport;
  const subscribe = transport.subscribe.bind(transport);
  const publish = transport.publish.bind(transport);
  transport.subscribe = (...args: Parameters<typeof subscribe>) => (order.push('subscribe'), subscribe(...args));
  transport.publish = (...args: Parameters<typeof publish>) => (order.push('publish'), publish(...args));
  await s.invoke('k');
  await s.settle();
  assert.equal(order[0], 'subscribe');
  assert.equal(order.filter((o) => o === 'publish').length, 5);
});

test('mutable directory membership does not change an admitted manifest', async () => {
  const s = await scenario();
  for (const p of ['alfa', 'bravo', 'charlie']) await s.addPeer(p, { review: answers('approve') });
  const { result } = await s.invoke('k');
  s.directory.setGroup('reviewers', ['alfa']);
  await s.settle();
  const after = await s.get(result.operationId);
  assert.equal(after.branches.length, 5);
  assert.equal(after.decision?.outcome, 'success');
  await s.assertReplayEquals(result.operationId);
});

test('before admission the context deadline is null; after, it is the recorded deadline', async () => {
  const s = await scenario();
  const seen: (number | null)[] = [];
  const policy = s.policy;
  const wrapped = { authorize: (input: Parameters<typeof policy.authorize>[0]) => (seen.push(input.context.deadlineMs), policy.authorize(input)) };
  s.coordinator.deps.policy = wrapped;
  const { result } = await s.invoke('k');
  await s.settle();
  assert.equal(seen[0], null);
  assert.ok(seen.includes(result.deadlineMs));
});

test('authorization attempts outside 1..16 are invalid input', async () => {
  const s = await scenario();
  const base = {
    context: { principalId: 'p', senderPeerId: null, account: 'a', system: 's', domain: 'd', nowMs: 0, deadlineMs: null },
    action: 'deliver' as const,
    contract: s.bundle.ref,
    interaction: 'review',
    peerId: 'alfa',
    branchId: null,
  };
  await assert.rejects(s.policy.authorize({ ...base, attempt: 17 }), rejects('invalid-input'));
  await assert.rejects(s.policy.authorize({ ...base, attempt: 0 }), rejects('invalid-input'));
  assert.equal((await s.policy.authorize({ ...base, attempt: 16 })).allowed, true);
});

test('memory-mode idempotency is process-local: a fresh store does not know an earlier operation', async () => {
  const s = await scenario();
  const { result } = await s.invoke('k');
  s.coordinator.kernel.clear();
  s.coordinator.deps.store = new MemoryEventStore({ clock: s.clock });
  await assert.rejects(s.get(result.operationId), (e) => e instanceof AdapterError && /no operation/.test(e.message));
});

test('the admission stream starts with exactly one operation-admitted transition', async () => {
  const s = await scenario();
  const { result } = await s.invoke('k');
  await s.settle();
  const events = await s.events(result.operationId);
  assert.deepEqual(types(events).slice(0, 2), ['operation-admitted', 'dispatch-recorded']);
  await s.assertReplayEquals(result.operationId);
});

test('provider capacity refusal rejects admission without sending any branch', async () => {
  const s = await scenario();
  const full = new MemoryEventStore({ clock: s.clock, limits: { operationsMax: 1 } });
  s.coordinator.deps.store = full;
  await s.invoke('first');
  await s.settle();
  const sent = s.bus.stats.published;
  await assert.rejects(s.invoke('second'), rejects('unavailable'));
  await s.settle();
  assert.equal(s.bus.stats.published, sent);
});

test('outbox wire values that depend on the admission timestamp are materialized from the recorded instants', async () => {
  const s = await scenario();
  const seen: { deadlineMs: number; leaseUntilMs: number; attempt: number; fence: number }[] = [];
  const spy = s.bus.connect('spy');
  await spy.subscribe('demo.v1.lab.review.*.request.*', (m) => void seen.push(JSON.parse(new TextDecoder().decode(m.data))));
  s.clock.set(s.clock.nowMs() + 1234);
  const { result } = await s.invoke('k');
  await s.settle();
  const record = await s.coordinator.record(result.operationId);
  assert.equal(seen.length, 5);
  for (const m of seen) {
    assert.equal(m.deadlineMs, record!.deadlineMs);
    assert.equal(m.leaseUntilMs, record!.branches['alfa']!.leaseUntilMs);
    assert.deepEqual([m.attempt, m.fence], [1, 1]);
  }
});

test('failure to establish the result path sends nothing and the deadline closes the operation', async () => {
  const s = await scenario();
  const transport = s.coordinator.deps.transport;
  transport.subscribe = async () => {
    throw new AdapterError('unavailable', 'subscription refused');
  };
  const { result } = await s.invoke('k');
  await s.settle();
  assert.equal(s.bus.stats.published, 0);
  await s.clock.advance(5000);
  const view = await s.get(result.operationId);
  assert.deepEqual(
    [view.decision?.reason, view.branches.map((b) => b.status)],
    ['timeout', ['indeterminate', 'indeterminate', 'indeterminate', 'indeterminate', 'indeterminate']],
  );
});

test('authorization validity must cover the guarded admission transition', async () => {
  const ttlMs = 100;
  const s = await scenario({ embedded: { policyTtlMs: ttlMs } });
  // The commit reaches the store's serialization point `delayMs` after planning: a slow store.
  const guards: { notBeforeMs: number; notAfterMs: number }[] = [];
  let delayMs = ttlMs;
  const slow = Object.assign(Object.create(s.store) as EventStore, {
    create: (id: string, t: Transition) => {
      guards.push(t.timeGuard);
      s.clock.set(s.clock.nowMs() + delayMs);
      return s.store.create(id, t);
    },
  });
  s.coordinator.deps.store = slow;
  const startMs = s.clock.nowMs();
  // Every decision expires at startMs + ttlMs: a commit at that instant is outside its validity.
  await assert.rejects(s.invoke('late'), rejects('expired'));
  assert.deepEqual(guards, [{ notBeforeMs: startMs, notAfterMs: startMs + ttlMs }]);
  assert.equal(await operationCount(s), 0);
  assert.equal(s.bus.stats.published, 0);
  // One millisecond inside the validity, the same commit is admitted.
  delayMs = ttlMs - 1;
  const { result } = await s.invoke('in-time');
  assert.equal(result.admittedAtMs, s.clock.nowMs());
});

test("the invoke decision's validity also covers the admission commit", async () => {
  const s = await scenario();
  const policy = s.policy;
  const real = policy.authorize.bind(policy);
  policy.authorize = async (input) => {
    const decision = await real(input);
    return input.action === 'invoke' ? { ...decision, expiresAtMs: s.clock.nowMs() + 7 } : decision;
  };
  const guards: number[] = [];
  const spy = Object.assign(Object.create(s.store) as EventStore, {
    create: (id: string, t: Transition) => (guards.push(t.timeGuard.notAfterMs), s.store.create(id, t)),
  });
  s.coordinator.deps.store = spy;
  await s.invoke('k');
  assert.deepEqual(guards, [s.clock.nowMs() + 7]);
});

test('a policy revision change during admission restarts admission within its budget', async () => {
  const s = await scenario();
  const policy = s.policy;
  const real = policy.authorize.bind(policy);
  const seen: string[] = [];
  let revoked = false;
  policy.authorize = async (input) => {
    const decision = await real(input);
    seen.push(`${input.action}:${input.peerId ?? '-'}@${decision.revision}`);
    // The policy moves right after answering for alfa: alfa's allow is from the old revision.
    if (input.peerId === 'alfa' && !revoked) {
      revoked = true;
      policy.revoke({ peerId: 'alfa' });
    }
    return decision;
  };
  const { result } = await s.invoke('k');
  const admitted = await admittedEvent(s, result.operationId);
  assert.equal(admitted.revisions.policy, s.policy.revision);
  assert.deepEqual(admitted.manifest.peers, ['bravo', 'charlie', 'delta', 'echo'], 'the retaken snapshot no longer admits alfa');
  for (const a of admitted.authorizations) assert.equal(a.revision, s.policy.revision);
  assert.ok(seen.filter((c) => c.startsWith('invoke:')).length >= 2, `admission was retaken: ${seen.join(', ')}`);
  await s.assertReplayEquals(result.operationId);
});
