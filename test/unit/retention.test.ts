/**
 * Payload expiry (src/runtime/retention.ts) on the memory and SQLite stores, on a virtual clock:
 * only operations settled (complete) before the cutoff lose their log; open, indeterminate and
 * recent ones are kept; a pruned key answers expired to a read and to a new admission, never
 * recreated; a dry run changes nothing; a second prune finds nothing more to do.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isAdapterError } from '../../src/contract/errors.js';
import { keepMsProblem, pruneOperations, retentionKeepMsMin } from '../../src/runtime/retention.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import type { Handler } from '../../src/peer/peer.js';
import { answers, scenario, type Scenario } from '../support/scenario.js';

const hour = 3_600_000;

/** Four operations admitted at the start: two settled at once, one settled 10 ms later, one left open (its deadline never reached). */
async function fixture(store: 'memory' | 'sqlite'): Promise<{ s: Scenario; settled: string[]; recent: string; open: string; startMs: number }> {
  const s = await scenario({ peers: 3, store, review: { completion: { mode: 'quorum', count: 2 }, timeoutMs: 60_000 } });
  const held: (() => void)[] = [];
  // Approves at once, except the document "later" (approved when the test lets it) and "open" (never answered).
  const handler: Handler = (input) => {
    const document = (input as { document?: string }).document;
    if (document === 'open') return new Promise(() => {});
    if (document === 'later') return new Promise((resolve) => held.push(() => resolve({ verdict: 'approve' })));
    return { verdict: 'approve' };
  };
  for (const peer of ['alfa', 'bravo', 'charlie']) await s.addPeer(peer, { review: handler });
  const startMs = s.clock.nowMs();
  const settled: string[] = [];
  for (const key of ['k1', 'k2']) settled.push((await s.invoke(key)).result.operationId);
  const open = (await s.invoke('k-open', { document: 'open' })).result.operationId;
  const recent = (await s.invoke('k-later', { document: 'later' })).result.operationId;
  await s.settle();
  s.clock.set(startMs + 10);
  for (const release of held) release();
  await s.settle();
  for (const id of [...settled, recent]) assert.equal((await s.get(id)).settlement.status, 'complete', id);
  assert.equal((await s.get(open)).decision, null);
  return { s, settled, recent, open, startMs };
}

/** The store as another process opens it: a deployment of its own whose close leaves the store open for the test's. */
const shared = (store: EventStore): EventStore =>
  new Proxy(store, {
    get: (target, key) => {
      if (key === 'close') return async () => {};
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });

for (const kind of ['memory', 'sqlite'] as const) {
  test(`prune (${kind}): settled before the cutoff goes; open and recent stay; the key answers expired`, async () => {
    const { s, settled, recent, open, startMs } = await fixture(kind);
    const store = s.store;
    // The cutoff falls between the first two settlements and the third.
    const nowMs = startMs + hour + 5;
    const dry = await pruneOperations({ store, nowMs, keepMs: hour, dryRun: true });
    assert.deepEqual([dry.examined, dry.pruned, dry.open, dry.recent, dry.gone, dry.failures.length], [4, 2, 1, 1, 0, 0]);
    for (const id of settled) assert.equal((await store.read(id)).kind, 'ok', 'a dry run changes nothing');

    const pages: number[] = [];
    const tally = await pruneOperations({ store, nowMs, keepMs: hour, pageSize: 1, progress: (t) => pages.push(t.examined) });
    assert.deepEqual([tally.examined, tally.pruned, tally.open, tally.recent, tally.failures.length], [4, 2, 1, 1, 0]);
    assert.deepEqual(pages, [1, 2, 3, 4], 'told after each page of one row');
    for (const id of settled) {
      assert.equal((await store.read(id)).kind, 'expired', id);
      assert.equal(await store.index.get(id), undefined, 'its index row goes');
    }
    assert.equal((await store.read(recent)).kind, 'ok');
    assert.equal((await store.read(open)).kind, 'ok');
    const listed = await store.index.list({ limit: 10 });
    assert.deepEqual(new Set(listed.rows.map((r) => r.operationId)), new Set([recent, open]));

    // The key is never admitted again: a new invocation under it is expired.
    const again = await scenario({ peers: 3, embedded: { store: shared(store) } });
    again.clock.set(nowMs);
    await assert.rejects(again.invoke('k1'), (error) => isAdapterError(error) && error.kind === 'expired');

    const second = await pruneOperations({ store, nowMs, keepMs: hour });
    assert.deepEqual([second.examined, second.pruned], [2, 0], 'nothing more to do');
    await again.close();
    await s.close();
  });
}

test('prune keeps a settlement that is indeterminate, whatever its age', async () => {
  const s = await scenario({
    peers: 2,
    review: { completion: { mode: 'first-success' }, siblings: 'cancel', cancelTimeoutMs: 1000, settlementGraceMs: 3000, timeoutMs: 10_000, leaseMs: 10_000 },
    embedded: { rules: [{ effect: 'allow' }, { effect: 'deny', actions: ['cancel'] }] },
  });
  await s.addPeer('alfa', { review: answers('approve') });
  const { result } = await s.invoke('k');
  await s.settle();
  await s.clock.advance(1000);
  assert.equal((await s.get(result.operationId)).settlement.status, 'indeterminate');
  const tally = await pruneOperations({ store: s.store, nowMs: s.clock.nowMs() + 10 * hour, keepMs: hour });
  assert.deepEqual([tally.examined, tally.indeterminate, tally.pruned], [1, 1, 0]);
  assert.equal((await s.store.read(result.operationId)).kind, 'ok');
  await s.close();
});

test('a retention period is at least an hour and at most ten years, in whole milliseconds', async () => {
  assert.equal(keepMsProblem(retentionKeepMsMin), undefined);
  assert.match(keepMsProblem(retentionKeepMsMin - 1) ?? '', /at least an hour/);
  assert.match(keepMsProblem(11 * 366 * 86_400_000) ?? '', /at most ten years/);
  assert.match(keepMsProblem(hour + 0.5) ?? '', /whole number/);
  const s = await scenario({ peers: 1 });
  await assert.rejects(
    pruneOperations({ store: s.store, nowMs: s.clock.nowMs(), keepMs: 1000 }),
    (error) => isAdapterError(error) && error.kind === 'invalid-input',
  );
  await s.close();
});
