/**
 * The EventStore conformance suite (STYLE.md §3): one function, run by every adapter's test file
 * against a factory. Each test is named after the rule it checks (spec "State-store protocol and
 * atomic time guards", docs/design.md §2). Guard-on-fold stores (jetstream, eventstoredb) keep void
 * transitions in the log, so "without mutation" is checked on the fold (`appliedOf`), which is
 * what every reader of those stores must apply.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { DomainEvent, StoredTransition, TimeGuard, Transition } from '../../src/events/types.js';
import type { JsonValue } from '../../src/contract/json.js';
import { appliesOnFold, guardAdmits } from '../../src/events/guard.js';
import { storedTransitionProblem } from '../../src/adapters/store/codec.js';
import type { AppendOutcome, EventStore, ReadOutcome, StoreLimits } from '../../src/adapters/store/types.js';
import { limits } from '../../src/contract/limits.js';

export interface StoreHarness {
  store: EventStore;
  /** 'injected': the store reads the harness's clock; 'server': the backend stamps time itself. */
  clock: 'injected' | 'server';
  /** Injected clocks only: moves the store's clock (backwards too). */
  setTimeMs?(ms: number): void;
  /** The store's current time as well as the test can know it. */
  nowMs(): number;
  /** Makes the backend unreachable mid-test (a real server stop). */
  stopServer?(): Promise<void>;
  /** Another client of the same store (another connection / process). */
  openSecondClient?(): Promise<EventStore>;
  dispose(): Promise<void>;
}

export interface StoreFactoryOptions {
  limits?: Partial<StoreLimits>;
}

export type StoreFactory = (options?: StoreFactoryOptions) => Promise<StoreHarness>;

export interface ConformanceOptions {
  /** Skips the whole suite with this reason (reported as skipped, never as passed). */
  skip?: string;
  /** Per-test timeout. */
  timeoutMs?: number;
}

// ---------------------------------------------------------------------------------------------
// Fixtures

export function newOperationId(label = ''): string {
  return 'op' + createHash('sha256').update(`${label}:${randomUUID()}`).digest('hex');
}

/** alfa's result on `branchId`'s first attempt, accepted as a success: `result` on `subject`. */
export function acceptedResult(branchId: string, result: JsonValue = { verdict: 'approve' }, subject = 's'): DomainEvent {
  return {
    type: 'result-accepted',
    v: 1,
    branchId,
    peerId: 'alfa',
    attempt: 1,
    fence: 1,
    status: 'success',
    retryable: false,
    retryAtMs: null,
    result,
    subject,
    // Cast: the store treats events as opaque; the fixture must not break when event types evolve.
  } as DomainEvent;
}

export function makeTransition(timeGuard: TimeGuard, tag: string, result: JsonValue = null): Transition {
  return {
    events: [
      { type: 'dispatch-recorded', v: 1, branchId: 'b1', attempt: 1, fence: 1, receipt: 'stored', detail: tag },
      acceptedResult('b1', result, 'demo.v1.lab.review.x.result.alfa'),
    ],
    timeGuard,
    causation: { command: `test:${tag}`, messageId: tag },
  };
}

const tagOf = (stored: StoredTransition) => stored.transition.causation.messageId;

/** A window that any sane store time falls in, whatever the clock source. */
export function wideGuard(h: StoreHarness): TimeGuard {
  const nowMs = h.nowMs();
  return { notBeforeMs: nowMs - 3_600_000, notAfterMs: nowMs + 3_600_000 };
}

/** The transitions the fold applies: all of them for in-write stores, the non-void ones on-fold. */
export function appliedOf(store: EventStore, transitions: StoredTransition[]): StoredTransition[] {
  if (store.capabilities.guard === 'in-write') return transitions;
  const applied: StoredTransition[] = [];
  let lastAppliedAtMs = Number.MIN_SAFE_INTEGER;
  for (const stored of transitions) {
    if (!appliesOnFold(stored, lastAppliedAtMs)) continue;
    applied.push(stored);
    lastAppliedAtMs = stored.committedAtMs;
  }
  return applied;
}

export function expectOk(outcome: AppendOutcome | ReadOutcome, context: string): asserts outcome is Extract<AppendOutcome | ReadOutcome, { kind: 'ok' }> {
  assert.equal(outcome.kind, 'ok', `${context}: ${JSON.stringify(outcome)}`);
}

export async function readOk(store: EventStore, operationId: string) {
  const outcome = await store.read(operationId);
  expectOk(outcome, `read ${operationId}`);
  if (outcome.kind !== 'ok') throw new Error('unreachable');
  return outcome;
}

export async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadlineMs = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadlineMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function withHarness(factory: StoreFactory, options: StoreFactoryOptions, body: (h: StoreHarness) => Promise<void>): Promise<void> {
  const h = await factory(options);
  try {
    await body(h);
  } finally {
    await h.dispose();
  }
}

/** Creates an operation with one applied transition; returns its revision. */
async function seeded(h: StoreHarness, operationId: string): Promise<string> {
  const created = await h.store.create(operationId, makeTransition(wideGuard(h), 'create'));
  expectOk(created, 'seed create');
  return created.revision;
}

// ---------------------------------------------------------------------------------------------
// The rules

type TestContext = { skip(message?: string): void };
type Rule = (factory: StoreFactory, t: TestContext) => Promise<void>;

const createIfAbsent: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const id = newOperationId('create');
    const first = makeTransition(wideGuard(h), 'first');
    const created = await h.store.create(id, first);
    expectOk(created, 'first create');
    assert.ok(Number.isSafeInteger(created.committedAtMs));
    const second = await h.store.create(id, makeTransition(wideGuard(h), 'second'));
    assert.equal(second.kind, 'conflict', JSON.stringify(second));
    const read = await readOk(h.store, id);
    assert.equal(read.revision, created.revision);
    assert.deepEqual(read.transitions.map(tagOf), ['first']);
  });

const appendAtRevision: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const id = newOperationId('append');
    let revision = await seeded(h, id);
    const revisions = [revision];
    for (let i = 0; i < 3; i++) {
      const appended = await h.store.append(id, revision, makeTransition(wideGuard(h), `a${i}`));
      expectOk(appended, `append ${i}`);
      assert.notEqual(appended.revision, revision, 'a new revision');
      revision = appended.revision;
      revisions.push(revision);
    }
    const read = await readOk(h.store, id);
    assert.equal(read.revision, revision);
    assert.deepEqual(
      read.transitions.map((s) => s.revision),
      revisions,
    );
    assert.deepEqual(read.transitions.map(tagOf), ['create', 'a0', 'a1', 'a2']);
  });

const revisionConflict: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const id = newOperationId('conflict');
    const stale = await seeded(h, id);
    const current = await h.store.append(id, stale, makeTransition(wideGuard(h), 'winner'));
    expectOk(current, 'append');
    for (const expected of [stale, '999999', 'not-a-revision', '0', '']) {
      const outcome = await h.store.append(id, expected, makeTransition(wideGuard(h), `loser-${expected}`));
      assert.equal(outcome.kind, 'conflict', `expected ${JSON.stringify(expected)}: ${JSON.stringify(outcome)}`);
    }
    const read = await readOk(h.store, id);
    assert.equal(read.revision, current.revision);
    assert.deepEqual(read.transitions.map(tagOf), ['create', 'winner']);
  });

interface Win {
  writer: number;
  revision: string;
  tag: string;
}

/** One writer: read the revision, append at it, retry on conflict; every success is recorded. */
async function raceWriter(h: StoreHarness, store: EventStore, id: string, writer: number, rounds: number, wins: Win[]): Promise<number> {
  let conflicts = 0;
  for (let round = 0; round < rounds; round++) {
    const tag = `w${writer}-r${round}`;
    for (let attempt = 0; ; attempt++) {
      assert.ok(attempt < 200, `${tag} starved`);
      const read = await readOk(store, id);
      const outcome = await store.append(id, read.revision, makeTransition(wideGuard(h), tag));
      if (outcome.kind === 'ok') {
        wins.push({ writer, revision: outcome.revision, tag });
        break;
      }
      assert.equal(outcome.kind, 'conflict', `${tag}: ${JSON.stringify(outcome)}`);
      conflicts++;
    }
  }
  return conflicts;
}

const concurrentAppenders: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const second = (await h.openSecondClient?.()) ?? h.store;
    try {
      const id = newOperationId('race');
      await seeded(h, id);
      // Phase 1: both clients append at the very same revision, many times: one wins each.
      for (let i = 0; i < 10; i++) {
        const { revision } = await readOk(h.store, id);
        const outcomes = await Promise.all([
          h.store.append(id, revision, makeTransition(wideGuard(h), `same-${i}-a`)),
          second.append(id, revision, makeTransition(wideGuard(h), `same-${i}-b`)),
        ]);
        assert.deepEqual(outcomes.map((o) => o.kind).sort(), ['conflict', 'ok'], JSON.stringify(outcomes));
      }
      // Phase 2: free-running read/append loops; every acknowledged append is in the log once.
      const wins: Win[] = [];
      const rounds = 12;
      await Promise.all([raceWriter(h, h.store, id, 0, rounds, wins), raceWriter(h, second, id, 1, rounds, wins)]);
      const read = await readOk(h.store, id);
      const phase2 = read.transitions.filter((s) => tagOf(s)?.startsWith('w'));
      assert.equal(phase2.length, 2 * rounds, 'no acknowledged append lost, none duplicated');
      const byRevision = new Map(phase2.map((s) => [s.revision, tagOf(s)]));
      for (const win of wins) assert.equal(byRevision.get(win.revision), win.tag, `win ${win.tag} at ${win.revision}`);
      assert.equal(new Set(read.transitions.map((s) => s.revision)).size, read.transitions.length, 'revisions are unique');
    } finally {
      if (second !== h.store) await second.close();
    }
  });

/** Injected clock: the exact boundaries, at the exact instants. */
async function guardBoundsInjected(h: StoreHarness): Promise<void> {
  const setTimeMs = h.setTimeMs;
  assert.ok(setTimeMs, 'an injected-clock harness provides setTimeMs');
  const t0 = h.nowMs() + 1000;
  setTimeMs(t0);
  const id = newOperationId('guard');
  const early = await h.store.create(id, makeTransition({ notBeforeMs: t0 + 1, notAfterMs: t0 + 10 }, 'early'));
  assert.equal(early.kind, 'expired', JSON.stringify(early));
  assert.equal((await h.store.read(id)).kind, 'not-found', 'an expired create writes nothing');
  const created = await h.store.create(id, makeTransition({ notBeforeMs: t0, notAfterMs: t0 + 1 }, 'at-lower-bound'));
  expectOk(created, 'lower bound is inclusive');
  assert.equal(created.committedAtMs, t0, 'committedAtMs is the clock reading the guard was checked against');
  const atUpper = await h.store.append(id, created.revision, makeTransition({ notBeforeMs: t0 - 10, notAfterMs: t0 }, 'at-upper-bound'));
  assert.equal(atUpper.kind, 'expired', `upper bound is exclusive: ${JSON.stringify(atUpper)}`);
  const read = await readOk(h.store, id);
  assert.equal(read.revision, created.revision, 'expired appends do not mutate');
  setTimeMs(t0 + 1);
  const next = await h.store.append(id, created.revision, makeTransition({ notBeforeMs: t0 + 1, notAfterMs: t0 + 2 }, 'later'));
  expectOk(next, 'inside the window after time moved');
  assert.equal(next.committedAtMs, t0 + 1);
}

/** Server clock: clearly-inside and clearly-outside windows, and answers that match the fold. */
async function guardBoundsServer(h: StoreHarness): Promise<void> {
  const id = newOperationId('guard');
  const future = { notBeforeMs: h.nowMs() + 60_000, notAfterMs: h.nowMs() + 120_000 };
  const early = await h.store.create(id, makeTransition(future, 'early'));
  assert.equal(early.kind, 'expired', JSON.stringify(early));
  const beforeMs = h.nowMs();
  const created = await h.store.create(id, makeTransition({ notBeforeMs: beforeMs - 60_000, notAfterMs: beforeMs + 60_000 }, 'inside'));
  const afterMs = h.nowMs();
  expectOk(created, 'a create inside its window (an expired create left nothing applied)');
  assert.ok(created.committedAtMs >= beforeMs - 1 && created.committedAtMs <= afterMs + 1, 'committedAtMs is the store time of the write');
  const past = { notBeforeMs: h.nowMs() - 120_000, notAfterMs: h.nowMs() - 60_000 };
  for (const [label, guard] of [
    ['future', future],
    ['past', past],
  ] as const) {
    const { revision } = await readOk(h.store, id);
    const outcome = await h.store.append(id, revision, makeTransition(guard, label));
    assert.equal(outcome.kind, 'expired', `${label}: ${JSON.stringify(outcome)}`);
  }
  // Tight windows around "now" land either side of a bound; the answer must be the fold's.
  for (let i = 0; i < 6; i++) {
    const t = h.nowMs();
    const guard = i % 2 === 0 ? { notBeforeMs: t, notAfterMs: t + 1 } : { notBeforeMs: t - 5, notAfterMs: t };
    const { revision } = await readOk(h.store, id);
    const outcome = await h.store.append(id, revision, makeTransition(guard, `tight-${i}`));
    assert.ok(outcome.kind === 'ok' || outcome.kind === 'expired', JSON.stringify(outcome));
    const stored = (await readOk(h.store, id)).transitions.find((s) => tagOf(s) === `tight-${i}`);
    if (h.store.capabilities.guard === 'in-write') {
      assert.equal(stored !== undefined, outcome.kind === 'ok', 'in-write stores keep only admitted transitions');
      continue;
    }
    assert.ok(stored, 'on-fold stores keep the void transition too');
    assert.equal(outcome.kind === 'ok', guardAdmits(guard, stored.committedAtMs), `answer agrees with the fold at ${stored.committedAtMs}`);
  }
  const applied = appliedOf(h.store, (await readOk(h.store, id)).transitions).map(tagOf);
  assert.deepEqual(applied.slice(0, 1), ['inside'], 'outside-window transitions change nothing');
  assert.ok(!applied.includes('future') && !applied.includes('past') && !applied.includes('early'));
}

const guardBounds: Rule = async (factory) => {
  assert.equal(guardAdmits({ notBeforeMs: 10, notAfterMs: 20 }, 10), true, 'lower inclusive');
  assert.equal(guardAdmits({ notBeforeMs: 10, notAfterMs: 20 }, 20), false, 'upper exclusive');
  await withHarness(factory, {}, (h) => (h.clock === 'injected' ? guardBoundsInjected(h) : guardBoundsServer(h)));
};

const badGuards: Array<[string, TimeGuard]> = [
  ['empty', { notBeforeMs: 1000, notAfterMs: 1000 }],
  ['reversed', { notBeforeMs: 2000, notAfterMs: 1000 }],
];

const unsafeGuards: Array<[string, TimeGuard]> = [
  ['fraction', { notBeforeMs: 1.5, notAfterMs: 10 }],
  ['NaN', { notBeforeMs: Number.NaN, notAfterMs: 10 }],
  ['Infinity', { notBeforeMs: 0, notAfterMs: Number.POSITIVE_INFINITY }],
  ['beyond 2^53', { notBeforeMs: 0, notAfterMs: 2 ** 53 }],
  ['-Infinity', { notBeforeMs: Number.NEGATIVE_INFINITY, notAfterMs: 0 }],
];

function invalidGuardRule(cases: Array<[string, TimeGuard]>): Rule {
  return (factory) =>
    withHarness(factory, {}, async (h) => {
      const id = newOperationId('badguard');
      for (const [label, guard] of cases) {
        const created = await h.store.create(id, makeTransition(guard, label));
        assert.equal(created.kind, 'invalid-input', `create ${label}: ${JSON.stringify(created)}`);
      }
      assert.equal((await h.store.read(id)).kind, 'not-found', 'nothing was created');
      const revision = await seeded(h, id);
      for (const [label, guard] of cases) {
        const appended = await h.store.append(id, revision, makeTransition(guard, label));
        assert.equal(appended.kind, 'invalid-input', `append ${label}: ${JSON.stringify(appended)}`);
      }
      const read = await readOk(h.store, id);
      assert.equal(read.revision, revision, 'nothing was appended');
      assert.equal(read.transitions.length, 1);
    });
}

const clockRollback: Rule = async (factory, t) => {
  await withHarness(factory, {}, async (h) => {
    if (h.clock === 'server' || !h.setTimeMs) {
      t.skip('server-clock store: a test cannot set the server clock back (the fold rule is covered by the guard tests)');
      return;
    }
    const t0 = h.nowMs() + 5000;
    h.setTimeMs(t0);
    const id = newOperationId('rollback');
    const created = await h.store.create(id, makeTransition({ notBeforeMs: 0, notAfterMs: t0 + 10_000 }, 'create'));
    expectOk(created, 'create');
    h.setTimeMs(t0 - 1000);
    const guard = { notBeforeMs: 0, notAfterMs: t0 + 10_000 };
    const rolledBack = await h.store.append(id, created.revision, makeTransition(guard, 'during-rollback'));
    assert.equal(rolledBack.kind, 'unavailable', `append during rollback: ${JSON.stringify(rolledBack)}`);
    const otherCreate = await h.store.create(newOperationId('rollback-other'), makeTransition(guard, 'other'));
    assert.equal(otherCreate.kind, 'unavailable', `create during rollback: ${JSON.stringify(otherCreate)}`);
    assert.equal((await readOk(h.store, id)).revision, created.revision, 'nothing written during rollback');
    h.setTimeMs(t0 + 1);
    const resumed = await h.store.append(id, created.revision, makeTransition(guard, 'after-rollback'));
    expectOk(resumed, 'append once time is monotonic again');
    assert.equal(resumed.committedAtMs, t0 + 1);
  });
};

const unavailableDistinct: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const id = newOperationId('unavailable');
    const revision = await seeded(h, id);
    if (h.stopServer) await h.stopServer();
    else await h.store.close();
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    // Calls that would otherwise be ok, conflict, not-found or expired: all must be unavailable.
    const outcomes = await Promise.all([
      h.store.read(id).then((o) => ['read existing', o] as const),
      h.store.read(newOperationId('missing')).then((o) => ['read missing', o] as const),
      h.store.append(id, revision, makeTransition(guard, 'x')).then((o) => ['append current', o] as const),
      h.store.append(id, 'stale', makeTransition(guard, 'y')).then((o) => ['append stale', o] as const),
      h.store.append(newOperationId('missing'), '1', makeTransition(guard, 'z')).then((o) => ['append missing', o] as const),
      h.store.create(id, makeTransition(guard, 'dup')).then((o) => ['create existing', o] as const),
      h.store.create(newOperationId('fresh'), makeTransition(guard, 'new')).then((o) => ['create fresh', o] as const),
      h.store.tombstone(id).then((o) => ['tombstone', o] as const),
    ]);
    for (const [label, outcome] of outcomes) assert.equal(outcome.kind, 'unavailable', `${label}: ${JSON.stringify(outcome)}`);
  });

const notFound: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const id = newOperationId('unknown');
    assert.equal((await h.store.read(id)).kind, 'not-found');
    const appended = await h.store.append(id, '1', makeTransition(wideGuard(h), 'x'));
    assert.equal(appended.kind, 'not-found', JSON.stringify(appended));
    assert.equal((await h.store.tombstone(id)).kind, 'not-found');
    assert.equal((await h.store.read(id)).kind, 'not-found', 'probing created nothing');
  });

const sizeBudget: Rule = (factory) =>
  withHarness(factory, { limits: { transitionBytesMax: 4096 } }, async (h) => {
    const id = newOperationId('size');
    const big = makeTransition(wideGuard(h), 'big', 'x'.repeat(5000));
    const created = await h.store.create(id, big);
    assert.equal(created.kind, 'invalid-input', JSON.stringify(created));
    assert.equal((await h.store.read(id)).kind, 'not-found', 'an oversized create stores nothing');
    const revision = await seeded(h, id);
    const appended = await h.store.append(id, revision, big);
    assert.equal(appended.kind, 'invalid-input', JSON.stringify(appended));
    const read = await readOk(h.store, id);
    assert.equal(read.revision, revision, 'an oversized append stores nothing');
    assert.equal(read.transitions.length, 1);
    const fits = await h.store.append(id, revision, makeTransition(wideGuard(h), 'fits', 'x'.repeat(3000)));
    expectOk(fits, 'a transition under the budget');
  });

/** `tag`'s transition padded to exactly `bytes` bytes of stored JSON (its body: codec.ts encodeTransition). */
export function transitionOfBytes(guard: TimeGuard, tag: string, bytes: number): Transition {
  const bare = makeTransition(guard, tag, '');
  const padding = bytes - Buffer.byteLength(JSON.stringify(bare));
  assert.ok(padding >= 0, `a transition of ${bytes} bytes can be made`);
  const padded = makeTransition(bare.timeGuard, tag, 'x'.repeat(padding));
  assert.equal(Buffer.byteLength(JSON.stringify(padded)), bytes);
  return padded;
}

/**
 * What a store reports it takes (limits.transitionBytesMax, which the workflow interpreter reads to
 * decide what one transition carries) is what it enforces: a transition of exactly that size is
 * stored, one byte more is refused invalid-input naming the limit; never more than configured.
 */
const reportsSizeLimit: Rule = async (factory) => {
  await withHarness(factory, {}, async (h) => {
    const reported = h.store.limits.transitionBytesMax;
    assert.ok(Number.isSafeInteger(reported) && reported > 0 && reported <= limits.transitionBytesMax, `reported ${reported}`);
  });
  await withHarness(factory, { limits: { transitionBytesMax: 6000 } }, async (h) => {
    assert.equal(h.store.limits.transitionBytesMax, 6000, 'the configured limit, where the backend takes as much');
    const id = newOperationId('exact');
    const over = await h.store.create(id, transitionOfBytes(wideGuard(h), 'over', 6001));
    assert.equal(over.kind, 'invalid-input', JSON.stringify(over));
    assert.match(over.kind === 'invalid-input' ? over.description : '', /the limit is 6000/);
    expectOk(await h.store.create(id, transitionOfBytes(wideGuard(h), 'exact', 6000)), 'a transition of exactly the reported size');
    const read = await readOk(h.store, id);
    assert.equal(read.transitions[0]?.transition.causation.messageId, 'exact');
    expectOk(await h.store.append(id, read.revision, transitionOfBytes(wideGuard(h), 'again', 6000)), 'an append of exactly the reported size');
    const second = await h.openSecondClient?.();
    if (second) {
      try {
        assert.equal(second.limits.transitionBytesMax, 6000, 'another client of the store reports the same');
      } finally {
        await second.close();
      }
    }
  });
};

const capacity: Rule = (factory) =>
  withHarness(factory, { limits: { operationsMax: 2 } }, async (h) => {
    const [a, b, c] = [newOperationId('cap-a'), newOperationId('cap-b'), newOperationId('cap-c')];
    await seeded(h, a);
    await seeded(h, b);
    const refused = await h.store.create(c, makeTransition(wideGuard(h), 'c'));
    assert.equal(refused.kind, 'unavailable', JSON.stringify(refused));
    assert.match('description' in refused ? refused.description : '', /capacity of 2 operations reached; new operations are refused/);
    assert.equal((await h.store.read(c)).kind, 'not-found');
    // A workflow instance's start is refused as well, and said to be one.
    const instance = `wf${createHash('sha256').update(c).digest('hex')}`;
    const start = await h.store.create(instance, makeTransition(wideGuard(h), 'start'));
    assert.equal(start.kind, 'unavailable', JSON.stringify(start));
    assert.match('description' in start ? start.description : '', /capacity of 2 operations reached; new workflow instances are refused/);
    expectOk(await h.store.tombstone(a), 'tombstone a');
    const stillRefused = await h.store.create(c, makeTransition(wideGuard(h), 'c'));
    assert.equal(stillRefused.kind, 'unavailable', `tombstones count against capacity: ${JSON.stringify(stillRefused)}`);
    assert.equal((await h.store.read(a)).kind, 'expired', 'key history of a is kept');
    const readB = await readOk(h.store, b);
    const appended = await h.store.append(b, readB.revision, makeTransition(wideGuard(h), 'b-more'));
    expectOk(appended, 'existing operations keep working at capacity');
  });

const tombstoneRule: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const id = newOperationId('tomb');
    const first = makeTransition(wideGuard(h), 'create');
    const created = await h.store.create(id, first);
    expectOk(created, 'create');
    const revision = created.revision;
    expectOk(await h.store.append(id, revision, makeTransition(wideGuard(h), 'more')), 'append');
    expectOk(await h.store.tombstone(id), 'tombstone');
    assert.equal((await h.store.read(id)).kind, 'expired');
    const recreated = await h.store.create(id, makeTransition(wideGuard(h), 'again'));
    assert.equal(recreated.kind, 'expired', `never recreated: ${JSON.stringify(recreated)}`);
    // The first create retried, the same bytes (a store that deduplicates a retried write must not answer it from a purged message).
    const retried = await h.store.create(id, first);
    assert.equal(retried.kind, 'expired', `a retried create is not answered from the purged log: ${JSON.stringify(retried)}`);
    const appended = await h.store.append(id, revision, makeTransition(wideGuard(h), 'late'));
    assert.equal(appended.kind, 'expired', JSON.stringify(appended));
    assert.equal((await h.store.read(id)).kind, 'expired', 'still expired after the attempts');
    const ids: string[] = [];
    for await (const listed of h.store.operationIds()) ids.push(listed);
    assert.ok(!ids.includes(id), 'a tombstoned operation is not live');
  });

/**
 * A tombstone is done again when a prune finds a tombstoned key still listed (one left half-done,
 * src/runtime/retention.ts): a second tombstone answers ok, finds nothing left to drop, and the
 * key stays expired, never recreated.
 */
const tombstoneTwiceRule: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const id = newOperationId('tomb-twice');
    const revision = await seeded(h, id);
    expectOk(await h.store.append(id, revision, makeTransition(wideGuard(h), 'more')), 'append');
    expectOk(await h.store.tombstone(id), 'tombstone');
    expectOk(await h.store.tombstone(id), 'a second tombstone of the tombstoned stream');
    assert.equal((await h.store.read(id)).kind, 'expired', 'still expired');
    assert.equal(await h.store.index.get(id), undefined, 'no index row comes back');
    const recreated = await h.store.create(id, makeTransition(wideGuard(h), 'again'));
    assert.equal(recreated.kind, 'expired', `never recreated: ${JSON.stringify(recreated)}`);
    expectOk(await h.store.tombstone(id), 'a third, after the refused create');
    assert.equal((await h.store.read(id)).kind, 'expired', 'expired after all of them');
    const ids: string[] = [];
    for await (const listed of h.store.operationIds()) ids.push(listed);
    assert.ok(!ids.includes(id), 'a tombstoned operation is not live');
  });

/**
 * readAfter answers what a reader holding the log up to a revision lacks: exactly what `read`
 * holds after it (revision, stamp, transition), nothing past the last revision, `diverged` for a
 * revision the log does not hold, and what `read` answers for a missing or tombstoned stream.
 * The longest tail here is past JetStream's per-message gets (contractLimits.jetstreamScanGetsMax),
 * so its batched read is taken too.
 */
const readAfterRule: Rule = (factory, t) =>
  withHarness(factory, {}, async (h) => {
    const readAfter = h.store.readAfter?.bind(h.store);
    if (readAfter === undefined) return t.skip('this store has no readAfter: readers read whole logs');
    const id = newOperationId('tail');
    const other = newOperationId('tail-other');
    let revision = await seeded(h, id);
    let otherRevision = await seeded(h, other);
    const appends = limits.jetstreamScanGetsMax + 4;
    // Another stream's appends interleave, as in any store shared by many streams.
    for (let i = 0; i < appends; i++) {
      const appended = await h.store.append(id, revision, makeTransition(wideGuard(h), `t${i}`));
      expectOk(appended, `append ${i}`);
      revision = appended.revision;
      const beside = await h.store.append(other, otherRevision, makeTransition(wideGuard(h), `o${i}`));
      expectOk(beside, `append beside ${i}`);
      otherRevision = beside.revision;
    }
    const read = await readOk(h.store, id);
    assert.equal(read.transitions.length, appends + 1);
    for (const at of [0, 1, appends - 2, appends]) {
      const after = read.transitions[at]?.revision ?? '';
      const tail = await readAfter(id, after);
      assert.equal(tail.kind, 'ok', `after ${after}: ${JSON.stringify(tail)}`);
      if (tail.kind !== 'ok') continue;
      assert.equal(tail.revision, read.revision, `after ${after}: the log's last revision`);
      assert.deepStrictEqual(tail.transitions, read.transitions.slice(at + 1), `after ${after} (the ${at + 1}th): what read holds after it`);
    }
    // The other stream, longer and written last: its last revision is none of this log's.
    const longer = await h.store.append(other, otherRevision, makeTransition(wideGuard(h), 'last'));
    expectOk(longer, 'append to the longer stream');
    for (const missing of [longer.revision, 'not-a-revision', '']) {
      const tail = await readAfter(id, missing);
      assert.equal(tail.kind, 'diverged', `after ${JSON.stringify(missing)}, which the log does not hold: ${JSON.stringify(tail)}`);
    }
    assert.equal((await readAfter(newOperationId('never'), read.revision)).kind, 'not-found');
    expectOk(await h.store.tombstone(id), 'tombstone');
    assert.equal((await readAfter(id, read.transitions[0]?.revision ?? '')).kind, 'expired', 'a tombstoned stream');
    assert.equal((await readAfter(id, read.revision)).kind, 'expired', 'a tombstoned stream, after its last revision');
  });

const operationIdsRule: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const live = [newOperationId('l1'), newOperationId('l2'), newOperationId('l3')];
    const dead = newOperationId('dead');
    for (const id of [...live, dead]) await seeded(h, id);
    expectOk(await h.store.tombstone(dead), 'tombstone');
    const listed: string[] = [];
    for await (const id of h.store.operationIds()) listed.push(id);
    assert.deepEqual([...listed].sort(), [...live].sort());
  });

/**
 * Listens with `listen`, then appends once through each client after a create, and answers what
 * the listener was told of that operation beside what the store holds.
 */
async function toldOfEveryClient<T>(
  h: StoreHarness,
  label: string,
  listen: (tell: (operationId: string, item: T) => void) => Promise<{ close(): Promise<void> }>,
) {
  const second = (await h.openSecondClient?.()) ?? h.store;
  const told: Array<{ operationId: string; item: T }> = [];
  const subscription = await listen((operationId, item) => told.push({ operationId, item }));
  try {
    const id = newOperationId(label);
    const revision = await seeded(h, id);
    const first = await h.store.append(id, revision, makeTransition(wideGuard(h), 'by-first'));
    expectOk(first, 'append by the first client');
    const other = await second.append(id, first.revision, makeTransition(wideGuard(h), 'by-second'));
    expectOk(other, 'append by the second client');
    await waitFor(() => told.filter((s) => s.operationId === id).length >= 3, 10_000, `three appends told to ${label}`);
    return { read: await readOk(h.store, id), items: told.filter((s) => s.operationId === id).map((s) => s.item), lastRevision: other.revision };
  } finally {
    await subscription.close();
    if (second !== h.store) await second.close();
  }
}

const followRule: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const { read, items } = await toldOfEveryClient<StoredTransition>(h, 'follow', (tell) => h.store.follow(tell));
    assert.deepEqual(items, read.transitions, 'follow delivers the stored transitions, in order');
  });

const watchRule: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const { read, items, lastRevision } = await toldOfEveryClient<string>(h, 'watch', (tell) => h.store.watch(tell));
    assert.deepEqual(
      items,
      read.transitions.map((s) => s.revision),
      'watch names every revision, in order, whichever client appended',
    );
    assert.equal(items.at(-1), lastRevision);
  });

/**
 * A tombstone is told to watchers as an append is, whichever client wrote it: by a revision past
 * the last append's, after which the stream reads `expired` (a process holding it lets it go).
 */
const watchTombstoneRule: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const second = (await h.openSecondClient?.()) ?? h.store;
    const told: Array<{ operationId: string; revision: string }> = [];
    const subscription = await h.store.watch((operationId, revision) => told.push({ operationId, revision }));
    try {
      const id = newOperationId('watch-tomb');
      const revision = await seeded(h, id);
      const of = () => told.filter((t) => t.operationId === id).map((t) => t.revision);
      await waitFor(() => of().length >= 1, 10_000, 'the create told to watch');
      expectOk(await second.tombstone(id), 'tombstone by the second client');
      await waitFor(() => of().length >= 2, 10_000, 'the tombstone told to watch');
      assert.equal(of()[0], revision);
      assert.notEqual(of()[1], revision, 'the tombstone is told by a revision of its own');
      assert.equal((await h.store.read(id)).kind, 'expired');
      if (h.store.readAfter) assert.equal((await h.store.readAfter(id, revision)).kind, 'expired', 'the revision held before reads expired');
    } finally {
      await subscription.close();
      if (second !== h.store) await second.close();
    }
  });

const roundTrip: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const payload = fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<JsonValue>;
    await fc.assert(
      fc.asyncProperty(payload, payload, fc.string({ maxLength: 40 }), async (first, second, text) => {
        const id = newOperationId('roundtrip');
        const appended = [makeTransition(wideGuard(h), `1-${text}`, first), makeTransition(wideGuard(h), `2-${text}`, second)];
        const created = await h.store.create(id, appended[0]!);
        expectOk(created, 'create');
        const next = await h.store.append(id, created.revision, appended[1]!);
        expectOk(next, 'append');
        const read = await readOk(h.store, id);
        for (const stored of read.transitions) assert.equal(storedTransitionProblem(stored), undefined, 'valid after read');
        // What a store returns is what JSON carries: the serialized form of what was appended.
        assert.deepStrictEqual(
          read.transitions.map((s) => s.transition),
          appended.map((t) => JSON.parse(JSON.stringify(t))),
        );
        assert.deepStrictEqual(
          read.transitions.map((s) => [s.revision, s.committedAtMs]),
          [
            [created.revision, created.committedAtMs],
            [next.revision, next.committedAtMs],
          ],
        );
        assert.equal(read.revision, next.revision);
      }),
      { numRuns: 25 },
    );
  });

/**
 * docs/design.md §10: a store accepts only what it can read back in full. Appending one transition after
 * another, the store refuses (invalid-input) before its log outgrows what it reads back, after
 * accepting at least the per-operation budget; then the whole log reads back, in order.
 */
const readsBackWhatItAccepts: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const id = newOperationId('long');
    let revision = await seeded(h, id);
    const tags = ['create'];
    let refusal: AppendOutcome | undefined;
    while (tags.length <= limits.transitionsStoredMax) {
      const tag = `t${tags.length}`;
      const outcome = await h.store.append(id, revision, makeTransition(wideGuard(h), tag));
      if (outcome.kind !== 'ok') {
        refusal = outcome;
        break;
      }
      revision = outcome.revision;
      tags.push(tag);
    }
    assert.equal(refusal?.kind, 'invalid-input', `the append after ${tags.length} transitions is refused: ${JSON.stringify(refusal)}`);
    assert.ok(tags.length >= limits.transitionsPerOperationMax, `the per-operation budget fits (accepted ${tags.length})`);
    const read = await readOk(h.store, id);
    assert.equal(read.revision, revision);
    assert.deepEqual(read.transitions.map(tagOf), tags, 'every accepted transition reads back, in order');
  });

/** A workflow transition of the stored shape: the store reads only its event types. */
function workflowTransition(h: StoreHarness, type: string): Transition {
  return { events: [{ type, v: 1 }], timeGuard: wideGuard(h), causation: { command: type } } as unknown as Transition;
}

async function runningOf(store: EventStore): Promise<string[]> {
  const ids: string[] = [];
  for await (const id of store.runningWorkflowIds()) ids.push(id);
  return ids.sort();
}

const runningWorkflows: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const [a, b, c] = ['a', 'b', 'c'].map((label) => 'wf' + createHash('sha256').update(`${label}:${randomUUID()}`).digest('hex')) as [string, string, string];
    for (const id of [a, b, c]) expectOk(await h.store.create(id, workflowTransition(h, 'workflow-started')), `start ${id}`);
    const op = newOperationId('beside');
    expectOk(await h.store.create(op, makeTransition(wideGuard(h), 'op')), 'an operation beside them');
    assert.deepEqual(await runningOf(h.store), [a, b, c].sort(), 'every started instance is listed, no operation');
    expectOk(await h.store.append(a, (await readOk(h.store, a)).revision, workflowTransition(h, 'task-started')), 'a step');
    expectOk(await h.store.append(b, (await readOk(h.store, b)).revision, workflowTransition(h, 'workflow-completed')), 'b completes');
    expectOk(await h.store.append(c, (await readOk(h.store, c)).revision, workflowTransition(h, 'workflow-cancelled')), 'c is cancelled');
    // What a writer that died before unmarking would leave is removed by workflowEnded; on an exact store it is a no-op.
    await h.store.workflowEnded(b);
    assert.deepEqual(await runningOf(h.store), [a], 'ended instances are no longer listed; a running one with more steps still is');
    const second = await h.openSecondClient?.();
    if (second) {
      try {
        assert.deepEqual(await runningOf(second), [a], 'another client of the store lists the same');
      } finally {
        await second.close();
      }
    }
  });

const newInstanceId = (label: string): string => 'wf' + createHash('sha256').update(`${label}:${randomUUID()}`).digest('hex');

/** `convoke replay` of a whole store replays what workflowInstanceIds lists: a tombstoned (pruned) instance is not. */
const workflowInstanceIdsRule: Rule = (factory) =>
  withHarness(factory, {}, async (h) => {
    const [kept, ended, pruned] = [newInstanceId('kept'), newInstanceId('ended'), newInstanceId('pruned')];
    for (const id of [kept, ended, pruned]) expectOk(await h.store.create(id, workflowTransition(h, 'workflow-started')), `start ${id}`);
    for (const id of [ended, pruned])
      expectOk(await h.store.append(id, (await readOk(h.store, id)).revision, workflowTransition(h, 'workflow-completed')), `${id} ends`);
    expectOk(await h.store.create(newOperationId('beside'), makeTransition(wideGuard(h), 'op')), 'an operation beside them');
    expectOk(await h.store.tombstone(pruned), 'tombstone');
    const listed: string[] = [];
    for await (const id of h.store.workflowInstanceIds()) listed.push(id);
    assert.deepEqual(listed.sort(), [kept, ended].sort(), 'every instance stored, running or ended, except the tombstoned one; no operation');
  });

const rules: Array<[string, Rule]> = [
  ['create-if-absent: a second create answers conflict and the stream is unchanged', createIfAbsent],
  ['append with the expected revision succeeds and advances the revision', appendAtRevision],
  ['expected-revision mismatch returns conflict without mutation', revisionConflict],
  ['concurrent appenders race on one stream: exactly one wins each revision, none lost', concurrentAppenders],
  ['time guard is lower-inclusive and upper-exclusive at the store serialization point', guardBounds],
  ['empty or reversed time guard is invalid-input', invalidGuardRule(badGuards)],
  ['non-safe-integer time guard bounds are invalid-input', invalidGuardRule(unsafeGuards)],
  ['clock rollback stops protected transitions until time is monotonic again', clockRollback],
  ['unavailable is distinguished from conflict, expired and not-found', unavailableDistinct],
  ['an unknown operation is not-found', notFound],
  ['the transition-size budget rejects before any write', sizeBudget],
  ['the transition size a store reports is the one it enforces, at most the configured one', reportsSizeLimit],
  ['operationsMax capacity refuses new creates with unavailable; key history stays readable', capacity],
  ['tombstone: reads answer expired and the key is never recreated', tombstoneRule],
  ['tombstone twice: the second answers ok and the key stays expired', tombstoneTwiceRule],
  ['operationIds lists live streams only', operationIdsRule],
  ['follow sees appends from every client', followRule],
  ['watch names the revision of every append, from every client', watchRule],
  ['watch names a tombstone too, from every client', watchTombstoneRule],
  ['read after append returns exactly what was appended, valid after read', roundTrip],
  ['readAfter answers exactly what read holds after a revision, diverged for one the log does not hold', readAfterRule],
  ['a store accepts only what it reads back: appends past its log limit are refused and the whole log reads back', readsBackWhatItAccepts],
  ['running workflow instances are listed from their start to their end, without operations, to every client', runningWorkflows],
  ['workflowInstanceIds lists every instance stored but the tombstoned ones', workflowInstanceIdsRule],
];

export function storeConformance(name: string, factory: StoreFactory, options: ConformanceOptions = {}): void {
  // The skip goes on every test, not only the suite, so the runner counts each rule as skipped.
  const skip = options.skip ?? false;
  describe(`EventStore conformance: ${name}`, () => {
    for (const [rule, run] of rules) {
      it(rule, { skip, timeout: options.timeoutMs ?? 60_000 }, (t) => run(factory, t));
    }
  });
}
