/**
 * The operations index conformance suite: one function, run by every store's test file beside
 * the EventStore suite (store.ts), against the same factories. Each test names the rule it checks
 * (docs/design.md §11): the row a store keeps equals the row its log folds to, through every
 * append, from a second client too; a page is a seek in list order with every filter; paging is
 * stable while operations are admitted and appended between pages; a tombstone removes the row.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DomainEvent, Manifest, StoredTransition, TimeGuard, Transition } from '../../src/events/types.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { stuckBoundsDefault, type IndexQuery, type OperationIndexRow } from '../../src/events/operation-index.js';
import { indexRowOfLog } from '../../src/projections/operation-index.js';
import { applyStored, type OperationRecord } from '../../src/projections/record.js';
import { pruneOperations } from '../../src/runtime/retention.js';
import { storeClockAhead } from '../support/store-clock.js';
import { acceptedResult, expectOk, newOperationId, readOk, type StoreFactory, type StoreHarness } from './store.js';

// ---------------------------------------------------------------------------------------------
// Fixtures: a real operation log (admission, dispatch, result, decision, settlement), by hand.

const contract = { id: 'example.review', version: '1.0.0', digest: `sha256:${'0'.repeat(64)}` };

function manifest(): Manifest {
  return {
    delivery: 'independent',
    completion: { mode: 'first-success' },
    votes: 'distinct-branches',
    units: 2,
    threshold: 1,
    onTimeout: 'failed',
    siblings: 'detach',
    waitFor: 'decision',
    attemptsMax: 1,
    leaseMs: 60_000,
    renewIntervalMs: 20_000,
    retryBackoffMs: 0,
    cancelTimeoutMs: 1_000,
    settlementGraceMs: 0,
    branches: [
      { branchId: 'b1', peerId: 'alfa' },
      { branchId: 'b2', peerId: 'bravo' },
    ],
    peers: ['alfa', 'bravo'],
    eligible: ['alfa', 'bravo'],
  };
}

function transition(guard: TimeGuard, command: string, events: DomainEvent[]): Transition {
  return { events, timeGuard: guard, causation: { command } };
}

export function admission(operationId: string, guard: TimeGuard, options: { principalId?: string; interaction?: string; timeoutMs?: number } = {}): Transition {
  const outbox = manifest().branches.map((b) => ({
    ...b,
    attempt: 1 as const,
    fence: 1 as const,
    publicationId: `pub-${operationId.slice(2, 10)}-${b.branchId}`,
  }));
  return transition(guard, 'admit', [
    {
      type: 'operation-admitted',
      v: 1,
      operationId,
      principalId: options.principalId ?? 'alice',
      senderPeerId: null,
      contract,
      interaction: options.interaction ?? 'review',
      subjectNamespace: 'demo.v1.lab',
      invocationKey: `key-${operationId.slice(2, 12)}`,
      inputDigest: `sha256:${'1'.repeat(64)}`,
      input: { document: 'hello' },
      timeoutMs: options.timeoutMs ?? 600_000,
      manifest: manifest(),
      revisions: { directory: 'd1', policy: 'p1' },
      authorizations: [],
      outbox,
    },
  ]);
}

/** The transitions after the admission, in order: dispatch, a rejection, a result, the decision, settlement. */
export function lifecycle(guard: TimeGuard): Transition[] {
  return [
    transition(guard, 'record-dispatch', [{ type: 'dispatch-recorded', v: 1, branchId: 'b1', attempt: 1, fence: 1, receipt: 'stored' }]),
    transition(guard, 'reject', [
      { type: 'result-rejected', v: 1, reason: 'stale-fence', subject: 's', branchId: 'b1', peerId: 'alfa', attempt: 1, fence: 0, detail: 'old' },
    ]),
    transition(guard, 'result', [acceptedResult('b1')]),
    transition(guard, 'close', [
      {
        type: 'decision-closed',
        v: 1,
        outcome: 'success',
        reason: 'threshold',
        successVotes: 1,
        failedUnits: 0,
        siblings: [{ branchId: 'b2', disposition: 'detached' }],
      },
    ]),
    transition(guard, 'settle', [{ type: 'settlement-completed', v: 1, status: 'complete' }]),
  ];
}

const wide = (h: StoreHarness): TimeGuard => ({ notBeforeMs: h.nowMs() - 3_600_000, notAfterMs: h.nowMs() + 3_600_000 });

/** Rows come in when the store says the append is done; on-fold stores write them right after. */
async function rowOf(store: EventStore, operationId: string): Promise<OperationIndexRow | undefined> {
  return store.index.get(operationId);
}

async function expectRowIsFold(store: EventStore, operationId: string, context: string): Promise<OperationIndexRow> {
  const log: StoredTransition[] = (await readOk(store, operationId)).transitions;
  const expected = indexRowOfLog(log);
  assert.ok(expected, `${context}: the log folds to a row`);
  assert.deepEqual(await rowOf(store, operationId), expected, `${context}: the stored row is the fold of the log`);
  return expected;
}

/** Admits operations one at a time, advancing an injected clock so each has its own admission instant. */
async function admitMany(
  h: StoreHarness,
  count: number,
  options: (i: number) => { principalId?: string; interaction?: string } = () => ({}),
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = newOperationId(`index-${i}`);
    if (h.setTimeMs) h.setTimeMs(h.nowMs() + 5);
    expectOk(await h.store.create(id, admission(id, wide(h), options(i))), `create ${i}`);
    ids.push(id);
  }
  return ids;
}

async function allPages(store: EventStore, query: Omit<IndexQuery, 'after'>, between?: (page: number) => Promise<void>): Promise<OperationIndexRow[]> {
  const rows: OperationIndexRow[] = [];
  let after: IndexQuery['after'];
  for (let page = 0; page < 1000; page++) {
    const result = await store.index.list({ ...query, ...(after ? { after } : {}) });
    rows.push(...result.rows);
    if (!result.next) return rows;
    after = result.next;
    await between?.(page);
  }
  throw new Error('paging did not end');
}

const isListOrder = (rows: OperationIndexRow[]) =>
  rows.every(
    (r, i) =>
      i === 0 || rows[i - 1]!.admittedAtMs > r.admittedAtMs || (rows[i - 1]!.admittedAtMs === r.admittedAtMs && rows[i - 1]!.operationId > r.operationId),
  );

// ---------------------------------------------------------------------------------------------

const rules: Record<string, (h: StoreHarness) => Promise<void>> = {
  'every append leaves the row equal to the fold of the log': async (h) => {
    const id = newOperationId('fold');
    const guard = wide(h);
    let outcome = await h.store.create(id, admission(id, guard));
    expectOk(outcome, 'create');
    let row = await expectRowIsFold(h.store, id, 'after admission');
    assert.equal(row.phase, 'admitted');
    assert.equal(row.outcome, null);
    assert.equal(row.openBranches, 2);
    assert.equal(row.outboxPendingSinceMs, row.admittedAtMs, 'both publications pending since admission');
    assert.equal(row.nextDueMs, row.admittedAtMs + 60_000, 'the first lease end is due first');
    for (const [i, next] of lifecycle(guard).entries()) {
      outcome = await h.store.append(id, outcome.revision, next);
      expectOk(outcome, `append ${i}`);
      row = await expectRowIsFold(h.store, id, `after ${next.causation.command}`);
    }
    assert.equal(row.phase, 'settled');
    assert.equal(row.outcome, 'success');
    assert.equal(row.settlement, 'complete');
    assert.equal(row.lastRejection?.reason, 'stale-fence');
    assert.equal(row.openBranches, 0);
    assert.equal(row.nextDueMs, null);
    assert.equal(row.revision, outcome.revision);
  },

  "the row is derived from the committing side's record after the append, asked with what was stored": async (h) => {
    const id = newOperationId('handed');
    const guard = wide(h);
    let record: OperationRecord | undefined;
    const asked: string[] = [];
    // What the kernel hands over: its record at the expected revision with the stored transition applied.
    const after = (stored: StoredTransition) => {
      asked.push(stored.revision);
      return applyStored(record, stored);
    };
    let outcome = await h.store.create(id, admission(id, guard), after);
    expectOk(outcome, 'create');
    record = applyStored(undefined, (await readOk(h.store, id)).transitions[0]!);
    for (const next of lifecycle(guard)) {
      outcome = await h.store.append(id, outcome.revision, next, after);
      expectOk(outcome, next.causation.command);
      const log = (await readOk(h.store, id)).transitions;
      record = applyStored(record, log.at(-1)!);
      await expectRowIsFold(h.store, id, `after ${next.causation.command}`);
      assert.equal(asked.at(-1), outcome.revision, 'asked for the record at the revision the append answered');
    }
    assert.equal(new Set(asked).size, 1 + lifecycle(guard).length, 'asked once per write');
  },

  "a committing record of another revision or another operation is never used: the row stays the log's": async (h) => {
    const id = newOperationId('mismatch');
    const other = newOperationId('mismatch-other');
    const guard = wide(h);
    expectOk(await h.store.create(other, admission(other, guard)), 'create another');
    const otherRecord = applyStored(undefined, (await readOk(h.store, other)).transitions[0]!)!;
    // Another operation's record, claiming this one's revision.
    let outcome = await h.store.create(id, admission(id, guard), (stored) => ({ ...otherRecord, revision: stored.revision }));
    expectOk(outcome, 'create');
    await expectRowIsFold(h.store, id, 'another operation offered');
    const [dispatch, reject, result, close] = lifecycle(guard);
    // This operation's record one revision behind (not the revision written), made to look decided.
    const stale = applyStored(undefined, (await readOk(h.store, id)).transitions[0]!)!;
    const doctored: OperationRecord = { ...stale, phase: 'closed' };
    for (const next of [dispatch!, reject!, result!, close!]) {
      outcome = await h.store.append(id, outcome.revision, next, () => doctored);
      expectOk(outcome, next.causation.command);
      await expectRowIsFold(h.store, id, `stale record offered at ${next.causation.command}`);
    }
    // A throwing committing side changes nothing either.
    const settle = lifecycle(guard)[4]!;
    outcome = await h.store.append(id, outcome.revision, settle, () => {
      throw new Error('fold failed');
    });
    expectOk(outcome, 'settle');
    await expectRowIsFold(h.store, id, 'a throwing committing side');
  },

  'openOperationIds lists the operations not settled and leaves settled ones out': async (h) => {
    const guard = wide(h);
    const [open, settled, decided] = await admitMany(h, 3);
    const run = async (id: string, transitions: Transition[]) => {
      let revision = (await readOk(h.store, id)).revision;
      for (const next of transitions) {
        const outcome = await h.store.append(id, revision, next);
        expectOk(outcome, next.causation.command);
        revision = outcome.revision;
      }
    };
    await run(settled!, lifecycle(guard));
    await run(decided!, lifecycle(guard).slice(0, 4));
    const listed = new Set<string>();
    for await (const id of h.store.index.openOperationIds()) listed.add(id);
    assert.ok(listed.has(open!), 'an admitted operation');
    assert.ok(listed.has(decided!), 'a decided operation not yet settled');
    assert.ok(!listed.has(settled!), 'a settled operation is left out');
  },

  'a log that is no operation has no row, and its appends still succeed': async (h) => {
    const id = newOperationId('opaque');
    const guard = wide(h);
    const opaque = lifecycle(guard)[0]!;
    const created = await h.store.create(id, opaque);
    expectOk(created, 'create');
    expectOk(await h.store.append(id, created.revision, lifecycle(guard)[1]!), 'append');
    assert.equal(await h.store.index.get(id), undefined);
  },

  'pages follow list order, every filter narrows exactly, and visibility is by principal': async (h) => {
    const ids = await admitMany(h, 7, (i) => ({ principalId: i % 2 === 0 ? 'alice' : 'bob', interaction: i < 3 ? 'review' : 'quick' }));
    const first = ids[0]!;
    let revision = (await readOk(h.store, first)).revision;
    for (const next of lifecycle(wide(h)).slice(0, 4)) {
      const outcome = await h.store.append(first, revision, next);
      expectOk(outcome, next.causation.command);
      revision = outcome.revision;
    }
    const ours = new Set(ids);
    const all = (await allPages(h.store, { limit: 3 })).filter((r) => ours.has(r.operationId));
    assert.equal(all.length, 7);
    assert.ok(isListOrder(all), 'newest admission first, then id descending');
    const check = async (query: Omit<IndexQuery, 'limit' | 'after'>, expected: string[], what: string) => {
      const got = (await allPages(h.store, { limit: 2, ...query })).filter((r) => ours.has(r.operationId)).map((r) => r.operationId);
      assert.deepEqual(new Set(got), new Set(expected), what);
      assert.equal(got.length, expected.length, `${what}: no duplicates`);
    };
    await check(
      { principalId: 'alice' },
      ids.filter((_, i) => i % 2 === 0),
      'alice sees her own',
    );
    await check(
      { principalId: 'bob' },
      ids.filter((_, i) => i % 2 === 1),
      'bob sees his own',
    );
    await check({ interaction: 'quick' }, ids.slice(3), 'by interaction');
    await check({ outcome: 'open' }, ids.slice(1), 'undecided');
    await check({ outcome: 'success' }, [first], 'decided success');
    await check({ phase: 'closed' }, [first], 'by phase');
    await check({ settlement: 'pending' }, ids, 'by settlement');
    await check(
      { principalId: 'alice', phase: 'admitted' },
      ids.filter((_, i) => i % 2 === 0 && i > 0),
      'principal and phase',
    );
    const rows = await Promise.all(ids.map((id) => h.store.index.get(id)));
    const middle = rows[3]!.admittedAtMs;
    await check(
      { sinceMs: middle },
      ids.filter((_, i) => rows[i]!.admittedAtMs >= middle),
      'since (inclusive)',
    );
    await check(
      { untilMs: middle },
      ids.filter((_, i) => rows[i]!.admittedAtMs < middle),
      'until (exclusive)',
    );
  },

  'paging is stable while operations are admitted and appended between pages': async (h) => {
    const ids = await admitMany(h, 9);
    const ours = new Set(ids);
    const added: string[] = [];
    const rows = await allPages(h.store, { limit: 2 }, async (page) => {
      // A newer admission and an append to an operation already listed, between every two pages.
      added.push(...(await admitMany(h, 1)));
      const target = ids[page % ids.length]!;
      const log = await readOk(h.store, target);
      expectOk(await h.store.append(target, log.revision, lifecycle(wide(h))[0]!), 'append between pages');
    });
    const seen = rows.map((r) => r.operationId).filter((id) => ours.has(id));
    assert.equal(new Set(seen).size, seen.length, 'no duplicates');
    assert.deepEqual(new Set(seen), ours, 'no gaps: every operation that existed when paging began');
    assert.ok(isListOrder(rows));
    for (const id of added) assert.ok(!seen.includes(id));
  },

  'a second client keeps the same rows, and each client folds what the other appended': async (h) => {
    if (!h.openSecondClient) return;
    const other = await h.openSecondClient();
    try {
      const id = newOperationId('two-clients');
      const guard = wide(h);
      let outcome = await h.store.create(id, admission(id, guard));
      expectOk(outcome, 'create');
      for (const [i, next] of lifecycle(guard).entries()) {
        const writer = i % 2 === 0 ? other : h.store;
        outcome = await writer.append(id, outcome.revision, next);
        expectOk(outcome, `append ${i} by ${i % 2 === 0 ? 'the second client' : 'the first'}`);
      }
      const expected = await expectRowIsFold(h.store, id, 'read by the first client');
      assert.deepEqual(await other.index.get(id), expected, 'read by the second client');
    } finally {
      // A second client is a process (sqlite) or a connection (JetStream): left open, it keeps the test file alive.
      await other.close();
    }
  },

  'a tombstone removes the row; rebuild answers the fold of the log': async (h) => {
    const [id] = await admitMany(h, 1);
    const row = await h.store.index.rebuild(id!);
    assert.deepEqual(row, await expectRowIsFold(h.store, id!, 'rebuilt'));
    expectOk(await h.store.tombstone(id!), 'tombstone');
    assert.equal(await h.store.index.get(id!), undefined);
    assert.equal(await h.store.index.rebuild(id!), undefined);
  },

  'payload expiry: a prune tombstones the settled operations and keeps the open ones; the rows follow': async (h) => {
    const guard = wide(h);
    const settled = newOperationId('expiry-settled');
    const open = newOperationId('expiry-open');
    let outcome = await h.store.create(settled, admission(settled, guard));
    expectOk(outcome, 'create');
    for (const next of lifecycle(guard)) {
      outcome = await h.store.append(settled, outcome.revision, next);
      expectOk(outcome, next.causation.command);
    }
    expectOk(await h.store.create(open, admission(open, guard)), 'create open');
    const hour = 3_600_000;
    // Now, plus the period, plus a minute a server's clock may be ahead of the test's; a server's clock as far on.
    const nowMs = h.nowMs() + hour + 60_000;
    const store = storeClockAhead(h.store, hour + 60_000);
    const dry = await pruneOperations({ store, nowMs, keepMs: hour, dryRun: true });
    assert.ok(dry.pruned >= 1 && dry.open >= 1, JSON.stringify(dry));
    expectOk(await h.store.read(settled), 'a dry run changes nothing');
    const tally = await pruneOperations({ store, nowMs, keepMs: hour });
    assert.deepEqual(tally.failures, []);
    assert.equal((await h.store.read(settled)).kind, 'expired');
    assert.equal(await h.store.index.get(settled), undefined, 'the pruned row goes');
    assert.equal((await h.store.create(settled, admission(settled, guard))).kind, 'expired', 'the key is never admitted again');
    await expectRowIsFold(h.store, open, 'the open operation is kept');
    const listed = await allPages(h.store, { limit: 50, untilMs: nowMs });
    assert.ok(!listed.some((r) => r.operationId === settled) && listed.some((r) => r.operationId === open));
  },

  'stuck work is counted and listed per reason': async (h) => {
    const id = newOperationId('stuck');
    expectOk(await h.store.create(id, admission(id, wide(h), { timeoutMs: 1_000 })), 'create');
    const row = (await h.store.index.get(id))!;
    const before = await h.store.index.countStuck(row.admittedAtMs, stuckBoundsDefault);
    const later = row.admittedAtMs + 1_000 + 60_000 + stuckBoundsDefault.outboxPendingMs + 1;
    const after = await h.store.index.countStuck(later, stuckBoundsDefault);
    assert.ok(after['open-past-deadline'] >= before['open-past-deadline'] + 1, 'open past its deadline');
    assert.ok(after['lease-expired'] >= before['lease-expired'] + 1, 'a lease ended with no claim-ended');
    assert.ok(after['outbox-pending'] >= before['outbox-pending'] + 1, 'publications waiting for receipts');
    const stuck = await allPages(h.store, { limit: 50, stuck: { nowMs: later, bounds: stuckBoundsDefault, reason: 'outbox-pending' } });
    assert.ok(stuck.some((r) => r.operationId === id));
    const notYet = await allPages(h.store, { limit: 50, stuck: { nowMs: row.admittedAtMs, bounds: stuckBoundsDefault } });
    assert.ok(!notYet.some((r) => r.operationId === id), 'not stuck at admission');
  },
};

export function indexConformance(name: string, factory: StoreFactory, options: { skip?: string; timeoutMs?: number } = {}): void {
  describe(`operations index conformance: ${name}`, () => {
    for (const [rule, run] of Object.entries(rules)) {
      it(rule, { skip: options.skip ?? false, timeout: options.timeoutMs ?? 60_000 }, async () => {
        const h = await factory();
        try {
          await run(h);
        } finally {
          await h.dispose();
        }
      });
    }
  });
}
