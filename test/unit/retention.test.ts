/**
 * Payload expiry (src/runtime/retention.ts) on the memory and SQLite stores, on a virtual clock:
 * only operations settled (complete) before the cutoff lose their log; open, indeterminate and
 * recent ones are kept; a pruned key answers expired to a read and to a new admission, never
 * recreated; a dry run changes nothing; a second prune finds nothing more to do; a key found
 * tombstoned while the index still lists it is tombstoned again, which finishes it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AdapterError, isAdapterError } from '../../src/contract/errors.js';
import { OperationNotFound, WorkflowInstanceNotFound } from '../../src/runtime/errors.js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { VirtualClock } from '../../src/contract/clock.js';
import type { JsonObject } from '../../src/contract/json.js';
import { buildDeployment, parseDeploymentConfig } from '../../src/deployment/config.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { keepMsProblem, pruneOperations, PruneStopped, retentionKeepMsMin, scheduleRetention, type PruneTally } from '../../src/runtime/retention.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import { pruneWorkflowInstances } from '../../src/workflow/exec/retention.js';
import { createWorkflowHost } from '../../src/cli/workflow-host.js';
import { harness, quickDocument } from '../workflow/support.js';
import type { Handler } from '../../src/peer/peer.js';
import { answers, namespace, scenario, sharedStore, storeWith, type Scenario } from '../support/scenario.js';
import { onPeerMessage } from '../../src/runtime/intake.js';
import { encodeWire } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';

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
    const again = await scenario({ peers: 3, embedded: { store: sharedStore(store) } });
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

test('a schedule prunes every everyMs, one at a time, and stops at close', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' } } });
  await s.addPeer('alfa', { review: answers('approve') });
  const id = (await s.invoke('k')).result.operationId;
  await s.settle();
  assert.equal((await s.get(id)).settlement.status, 'complete');
  const tallies: PruneTally[] = [];
  const schedule = scheduleRetention({
    store: s.store,
    clock: s.clock,
    keepMs: hour,
    everyMs: 10 * 60_000,
    onPrune: ({ operations }) => tallies.push(operations),
  });
  await s.clock.advance(10 * 60_000 - 1);
  assert.equal(tallies.length, 0, 'the first prune waits everyMs');
  await s.clock.advance(1);
  assert.deepEqual([tallies.length, tallies[0]?.examined, tallies[0]?.pruned], [1, 0, 0], 'admitted ten minutes ago: after the cutoff');
  await s.clock.advance(60 * 60_000);
  assert.deepEqual(
    tallies.map((t) => t.pruned),
    [0, 0, 0, 0, 0, 0, 1],
    'pruned by the first run more than an hour after its settlement',
  );
  assert.equal((await s.store.read(id)).kind, 'expired');
  await schedule.close();
  await s.clock.advance(60 * 60_000);
  assert.equal(tallies.length, 7, 'nothing after close');
  await s.close();
});

/** Two operations settled on `clock` (first-success, principal svc-a) and a workflow instance that ended then (alice's), in the SQLite file at `path`. */
async function settledInFile(path: string, clock: VirtualClock, review: JsonObject): Promise<{ ids: string[]; instance: string }> {
  const seeded = await scenario({ peers: 1, review, embedded: { store: new SqliteEventStore({ path, clock }), clock } });
  await seeded.addPeer('alfa', { review: answers('approve') });
  const ids = [(await seeded.invoke('k1')).result.operationId, (await seeded.invoke('k2')).result.operationId];
  await seeded.settle();
  await seeded.close();
  const workflows = harness({ store: new SqliteEventStore({ path, clock }), clock });
  const instance = (await workflows.executor.start({ principalId: 'alice', invocationKey: 'w', document: quickDocument, input: {} })).instanceId;
  await clock.advance(0);
  assert.equal((await workflows.executor.get(instance))?.status, 'completed');
  await workflows.close();
  return { ids, instance };
}

test('a deployment with config retention prunes on its own, says so, counts it, lets go of what it held, and stops before its store closes', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-retention-'));
  try {
    // Settled on a clock, in a SQLite file the deployment then opens two hours later.
    const clock = new VirtualClock();
    const review = { completion: { mode: 'first-success' } };
    const { ids, instance } = await settledInFile(join(dir, 'ops.db'), clock, review);
    await writeFile(join(dir, 'b.json'), JSON.stringify(reviewBundle(review)));
    const config = minimalServeConfig({
      store: 'sqlite:ops.db',
      directory: { groups: { reviewers: ['alfa'] } },
      attestations: [{ namespace: 'demo.v1.lab', exclusivePeerPublishers: true }],
      retention: { keepMs: hour, everyMs: 60_000 },
    });
    const later = new VirtualClock(clock.nowMs() + 2 * hour);
    const lines: [string, string | undefined][] = [];
    const deployment = await buildDeployment(parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(config)), dir), {
      clock: later,
      log: (line, level) => lines.push([line, level]),
      workflows: (parts) => createWorkflowHost({ ...parts, seed: 7 }),
    });
    // A failed assertion still closes the deployment (its schedule's timers would hold the process).
    let closed = false;
    try {
      // Read through the deployment first: its coordinator and its workflow service now hold each in memory.
      for (const id of ids) assert.equal((await deployment.coordinator.get('svc-a', id)).settlement.status, 'complete');
      assert.equal((await deployment.workflows!.get('alice', instance)).status, 'completed');
      await later.advance(60_000);
      // Pruned, they are gone from this process too: its reads meet the tombstones, not the payloads it held.
      for (const id of ids) await assert.rejects(deployment.coordinator.get('svc-a', id), (error: unknown) => error instanceof OperationNotFound, id);
      await assert.rejects(deployment.workflows!.get('alice', instance), (error: unknown) => error instanceof WorkflowInstanceNotFound);
      const said = lines.filter(([line]) => line.startsWith('retention:'));
      assert.equal(said.length, 1, JSON.stringify(lines));
      assert.match(said[0]![0], /^retention: 2 operations settled before \S+ pruned, 0 kept; 1 workflow instances pruned, 0 kept$/);
      assert.equal(said[0]![1], 'info');
      for (const id of [...ids, instance]) assert.equal((await deployment.store.read(id)).kind, 'expired');
      const metrics = await deployment.coordinator.metrics.registry.getMetricsAsJSON();
      const value = (name: string) => metrics.find((m) => m.name === name)?.values;
      assert.deepEqual(
        value('convoke_pruned_total')?.map((v) => [v.labels.kind, v.value]),
        [
          ['operation', 2],
          ['workflow-instance', 1],
        ],
      );
      assert.deepEqual(
        value('convoke_retention_runs_total')?.map((v) => [v.labels.result, v.value]),
        [['ok', 1]],
      );
      await deployment.close();
      closed = true;
      await later.advance(10 * 60_000);
      assert.equal(lines.filter(([line]) => line.startsWith('retention:')).length, 1, 'nothing after close');
    } finally {
      if (!closed) await deployment.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** Until `check` holds (real time: a SQLite store polls for other connections' writes), at most `timeoutMs`. */
async function eventually(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadlineMs = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadlineMs) assert.fail(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('what another process pruned (convoke prune, another serve) is let go by a serve that held it: its get and wait meet the tombstone, not the payload', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-retention-'));
  try {
    const clock = new VirtualClock();
    const review = { completion: { mode: 'first-success' } };
    const path = join(dir, 'ops.db');
    const { ids, instance } = await settledInFile(path, clock, review);
    await writeFile(join(dir, 'b.json'), JSON.stringify(reviewBundle(review)));
    const config = minimalServeConfig({
      store: 'sqlite:ops.db',
      directory: { groups: { reviewers: ['alfa'] } },
      attestations: [{ namespace: 'demo.v1.lab', exclusivePeerPublishers: true }],
    });
    const later = new VirtualClock(clock.nowMs() + 2 * hour);
    const deployment = await buildDeployment(parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(config)), dir), {
      clock: later,
      workflows: (parts) => createWorkflowHost({ ...parts, seed: 7 }),
    });
    // The pruning process: a connection of its own to the file, as `convoke prune` opens it.
    const pruner = new SqliteEventStore({ path, clock: later });
    try {
      // Held in this serve's memory first: its coordinator and its workflow service answer from there.
      for (const id of ids) assert.equal((await deployment.coordinator.get('svc-a', id)).settlement.status, 'complete');
      assert.equal((await deployment.workflows!.get('alice', instance)).status, 'completed');
      assert.equal((await pruneOperations({ store: pruner, nowMs: later.nowMs(), keepMs: hour })).pruned, 2);
      assert.equal((await pruneWorkflowInstances({ store: pruner, nowMs: later.nowMs(), keepMs: hour })).pruned, 1);
      const gone = (read: Promise<unknown>, kind: new (id: string) => Error) =>
        read.then(
          () => false,
          (error: unknown) => (error instanceof kind ? true : Promise.reject(error)),
        );
      // Told by the store's watch, as another connection's append is (SQLite polls every 50 ms).
      for (const id of ids) await eventually(() => gone(deployment.coordinator.get('svc-a', id), OperationNotFound), 5000, `get ${id}`);
      await eventually(() => gone(deployment.workflows!.get('alice', instance), WorkflowInstanceNotFound), 5000, `get ${instance}`);
      await assert.rejects(deployment.coordinator.wait('svc-a', ids[0]!, 'settled', 0), OperationNotFound);
      await assert.rejects(deployment.workflows!.wait('alice', instance, 0), WorkflowInstanceNotFound);
      assert.deepEqual((await deployment.coordinator.metrics.storeErrors.get()).values, [], 'a tombstone read is no store failure');
    } finally {
      await pruner.close();
      await deployment.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a prune measures its cutoff on the store’s clock where it stamps with one: a pruning process two hours ahead of it prunes nothing younger than the period', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-retention-'));
  const path = join(dir, 'ops.db');
  const storeClock = new VirtualClock();
  const { ids, instance } = await settledInFile(path, storeClock, { completion: { mode: 'first-success' } });
  const file = new SqliteEventStore({ path, clock: storeClock });
  // As a server-stamped store is (JetStream): committedAtMs and nowMs() read the store's clock, not the pruning process's.
  const store = storeWith<EventStore>(file, () => ({ nowMs: async () => storeClock.nowMs() }));
  try {
    const skewedMs = storeClock.nowMs() + 2 * hour;
    const operations = await pruneOperations({ store, nowMs: skewedMs, keepMs: hour });
    const instances = await pruneWorkflowInstances({ store, nowMs: skewedMs, keepMs: hour });
    assert.deepEqual([operations.pruned, instances.pruned], [0, 0], JSON.stringify({ operations, instances }));
    assert.equal(operations.cutoffMs, storeClock.nowMs() - hour);
    for (const id of [...ids, instance]) assert.equal((await store.read(id)).kind, 'ok', id);
    await storeClock.advance(hour + 1);
    const later = [await pruneOperations({ store, nowMs: skewedMs, keepMs: hour }), await pruneWorkflowInstances({ store, nowMs: skewedMs, keepMs: hour })];
    assert.deepEqual(
      later.map((tally) => tally.pruned),
      [2, 1],
      'past the period by the store’s clock',
    );
  } finally {
    await file.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('config retention: keepMs at least an hour, everyMs between a minute and a day', () => {
  const parse = (retention: unknown) => () => parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(minimalServeConfig({ retention }))), '/tmp');
  assert.throws(parse({ keepMs: hour - 1 }), /retention\/keepMs/);
  assert.throws(parse({ keepMs: hour, everyMs: 59_999 }), /retention\/everyMs/);
  assert.throws(parse({ keepMs: hour, everyMs: 86_400_001 }), /retention\/everyMs/);
  assert.throws(parse({ everyMs: 60_000 }), /keepMs/);
  assert.throws(parse({ keepMs: hour, other: 1 }), /other/);
  assert.deepEqual(parse({ keepMs: hour })().retention, { keepMs: hour });
});

test('a prune tombstones at most `concurrency` operations at once, and more than one', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' } } });
  await s.addPeer('alfa', { review: answers('approve') });
  for (let i = 0; i < 20; i++) await s.invoke(`k${i}`);
  await s.settle();
  let underWay = 0;
  let most = 0;
  const store = storeWith(s.store, (real) => ({
    tombstone: async (id: string) => {
      most = Math.max(most, ++underWay);
      await new Promise((resolve) => setTimeout(resolve, 5));
      underWay--;
      return real.tombstone(id);
    },
  }));
  const tally = await pruneOperations({ store, nowMs: s.clock.nowMs() + 2 * hour, keepMs: hour, concurrency: 4 });
  assert.deepEqual([tally.pruned, most], [20, 4]);
  await s.close();
});

test('a late peer message on a settled operation pruned while this coordinator still held it is dropped as unknown, not retried as a store failure', async () => {
  const s = await scenario({ peers: 3, review: { completion: { mode: 'first-success' } } });
  try {
    const operationId = (await s.invoke('k')).result.operationId;
    await s.settle();
    const deliver = async (verdict: string) => {
      const answered: string[] = [];
      await onPeerMessage(s.coordinator, namespace, 'review', 'result', {
        subject: subjectFor(namespace, 'review', operationId, 'result', 'alfa'),
        data: encodeWire({ kind: 'result', operationId, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, result: { verdict } }),
        headers: {},
        redelivered: false,
        ack: async () => void answered.push('ack'),
        nak: async () => void answered.push('nak'),
      });
      return answered;
    };
    assert.deepEqual(await deliver('approve'), ['ack']);
    assert.equal((await s.get(operationId)).phase, 'settled');
    const tally = await pruneOperations({ store: s.store, nowMs: s.clock.nowMs() + 2 * hour, keepMs: hour });
    assert.equal(tally.pruned, 1);
    // A conflicting result (one the settled record would still record) meets the tombstone at its append.
    for (let delivery = 0; delivery < 2; delivery++) assert.deepEqual(await deliver('reject'), ['ack']);
    const storeErrors = (await s.coordinator.metrics.storeErrors.get()).values;
    assert.deepEqual(storeErrors, [], 'no store failure counted');
    const rejections = (await s.coordinator.metrics.rejections.get()).values.map((v) => [v.labels.reason, v.value]);
    // (The conflicting result is also counted as the protocol conflict it is, before its append meets the tombstone.)
    assert.deepEqual(
      rejections.filter(([reason]) => reason === 'unknown-operation'),
      [['unknown-operation', 2]],
    );
  } finally {
    await s.close();
  }
});

test('a candidate the index still lists but whose read answers expired (a tombstone left half-done) is tombstoned again, counted as finished', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' } } });
  await s.addPeer('alfa', { review: answers('approve') });
  const [half, whole] = [(await s.invoke('k-half')).result.operationId, (await s.invoke('k-whole')).result.operationId];
  await s.settle();
  // As a store whose tombstone stopped after its first write: reads answer expired, the log and the index row are still there.
  const tombstoned: string[] = [];
  const store = storeWith(s.store, (real) => ({
    read: async (id: string) => (id === half ? { kind: 'expired', description: `operation ${id} is tombstoned` } : real.read(id)),
    tombstone: async (id: string) => (tombstoned.push(id), real.tombstone(id)),
  }));
  const nowMs = s.clock.nowMs() + 2 * hour;
  const dry = await pruneOperations({ store, nowMs, keepMs: hour, dryRun: true });
  assert.deepEqual([dry.examined, dry.pruned, dry.finished, dry.gone, tombstoned.length], [2, 2, 1, 0, 0], 'a dry run counts it and tombstones nothing');
  const tally = await pruneOperations({ store, nowMs, keepMs: hour });
  assert.deepEqual([tally.examined, tally.pruned, tally.finished, tally.gone, tally.failures], [2, 2, 1, 0, []]);
  assert.deepEqual(tombstoned.sort(), [half, whole].sort());
  assert.equal(await s.store.index.get(half), undefined, 'its index row is gone');
  const again = await pruneOperations({ store, nowMs, keepMs: hour });
  assert.deepEqual([again.examined, again.pruned], [0, 0], 'nothing more to do');
  await s.close();
});

test('a prune stopped part-way keeps what it did: a page the index could not list, or the instances’ prune failing after the operations’', async () => {
  const { s, settled, recent, open, startMs } = await fixture('memory');
  try {
    // One row a page; the second page cannot be listed.
    let lists = 0;
    const store = storeWith(s.store, (real) => ({
      index: storeWith(real.index, (index) => ({
        list: async (...args: Parameters<typeof index.list>) => {
          if (++lists === 2) throw new AdapterError('unavailable', 'the index is away');
          return index.list(...args);
        },
      })),
    }));
    const nowMs = startMs + 2 * hour;
    const stoppedAt = await pruneOperations({ store, nowMs, keepMs: hour, pageSize: 1 }).then(
      () => assert.fail('the second page failed'),
      (error: unknown) => error,
    );
    assert.ok(stoppedAt instanceof PruneStopped, String(stoppedAt));
    assert.equal(stoppedAt.kind, 'unavailable', 'the failure keeps its kind (exit 4, retried on schedule)');
    assert.deepEqual([stoppedAt.tally.examined, (stoppedAt.tally as PruneTally).pruned], [1, 1], 'the first page was done before it stopped');
    assert.match(stoppedAt.description ?? '', /past 1 rows examined \(the index is away\)/);

    // Scheduled: the operations pruned, then the workflow instances' prune fails: the tallies are told with the failure.
    // (The open one's deadline passes meanwhile: it settles, and goes too.)
    const readable = async () =>
      (await Promise.all([...settled, recent, open].map(async (id) => (await s.store.read(id)).kind))).filter((kind) => kind === 'ok').length;
    const left = await readable();
    assert.ok(left > 0);
    const told: { pruned: number; error: unknown }[] = [];
    const errors: unknown[] = [];
    const schedule = scheduleRetention({
      store: s.store,
      clock: s.clock,
      keepMs: hour,
      everyMs: 2 * hour,
      instances: async () => {
        throw new AdapterError('unavailable', 'the instances are away');
      },
      onPrune: ({ operations }, _stopped, error) => told.push({ pruned: operations.pruned, error }),
      onError: (error) => errors.push(error),
    });
    await s.clock.advance(2 * hour);
    await schedule.close();
    assert.equal(told.length, 1);
    assert.equal(told[0]?.pruned, left, 'what the operations’ prune did is told');
    assert.equal(await readable(), 0);
    assert.match(String(told[0]?.error), /the instances are away/);
    assert.deepEqual(errors, [], 'not told as a prune that could not run');
  } finally {
    await s.close();
  }
});

test('a caller waiting on an operation that another process prunes is answered at once that it is gone, not left until its wait ends', async () => {
  // A SQLite store, watched as a serve watches it (the poll runs on real time).
  const { s, open } = await fixture('sqlite');
  let realTimer: NodeJS.Timeout | undefined;
  try {
    // Waits far past anything the virtual clock reaches: only the tombstone can answer it.
    const waiting = s.coordinator.wait('svc-a', open, 'settled', hour);
    let answered = false;
    void waiting.then(
      () => (answered = true),
      () => (answered = true),
    );
    await s.settle();
    assert.equal(answered, false, 'still waiting before the tombstone');
    // Another process's tombstone, told to this coordinator by the store's watch.
    assert.equal((await s.store.tombstone(open)).kind, 'ok');
    const realTimeout = new Promise<never>((_, reject) => (realTimer = setTimeout(() => reject(new Error('the waiter was not answered within 3 s')), 3000)));
    await assert.rejects(Promise.race([waiting, realTimeout]), OperationNotFound);
    await assert.rejects(s.get(open), OperationNotFound);
  } finally {
    clearTimeout(realTimer);
    await s.close();
  }
});
