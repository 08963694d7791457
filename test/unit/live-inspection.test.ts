/**
 * What a live inspection stream builds its updates from: the tail of a log after what was sent
 * (readTail), through the store's readAfter or, without it, from the whole log checked to continue
 * what was sent; and the changes between two projections (projections/delta.ts): changed fields
 * whole, keyed lists as their new and changed entries, map entries a fold replaced; an operation's
 * and a workflow instance's inspection refuse a log that fails its schema (unavailable), as get does
 * — to the principal the store's index row names only: to any other it is not found.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ReadOutcome, Stored, TailOutcome } from '../../src/kernel/types.js';
import { changedEntries, changedFields, replacedKeys } from '../../src/projections/delta.js';
import { readTail, type LogSource } from '../../src/runtime/live-inspection.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import type { JsonObject } from '../../src/contract/json.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import type { OperationIndexRow } from '../../src/events/operation-index.js';
import type { Transition } from '../../src/events/types.js';
import { WorkflowInstances } from '../../src/workflow/exec/instances.js';
import { isNotFound } from '../../src/runtime/errors.js';
import { scenario } from '../support/scenario.js';
import { harness, quickDocument } from '../workflow/support.js';

const stored = (revision: string, transition: string): Stored<string> => ({ revision, committedAtMs: 0, transition });

/** A log read whole only (no readAfter). */
function wholeOnly(log: Stored<string>[]): LogSource<string> & { reads: number } {
  const source = {
    reads: 0,
    read: async (): Promise<ReadOutcome<string>> => {
      source.reads++;
      return { kind: 'ok', revision: log.at(-1)?.revision ?? '0', transitions: [...log] };
    },
  };
  return source;
}

test('without readAfter, the tail is what the whole log holds after what was sent; a log that no longer holds it there is diverged', async () => {
  const log = [stored('a', 'one'), stored('b', 'two'), stored('c', 'three')];
  const store = wholeOnly(log);
  assert.deepEqual(await readTail(store, 's', { revision: 'b', length: 2 }), { kind: 'ok', transitions: [stored('c', 'three')] });
  assert.deepEqual(await readTail(store, 's', { revision: 'c', length: 3 }), { kind: 'ok', transitions: [] });
  // Rewritten (a store that lost writes and took others): the revision sent is not where it was.
  log.splice(1, 2, stored('x', 'other'));
  assert.equal((await readTail(store, 's', { revision: 'b', length: 2 })).kind, 'diverged');
  assert.equal((await readTail(store, 's', { revision: 'c', length: 3 })).kind, 'diverged');
});

test('with readAfter, only the tail is read: the whole log never is', async () => {
  const asked: string[] = [];
  const store = {
    read: async (): Promise<ReadOutcome<string>> => assert.fail('the whole log is not read where the store reads tails'),
    readAfter: async (_id: string, revision: string): Promise<TailOutcome<string>> => {
      asked.push(revision);
      return { kind: 'ok', revision: 'c', transitions: [stored('c', 'three')] };
    },
  };
  assert.deepEqual(await readTail(store, 's', { revision: 'b', length: 2 }), { kind: 'ok', revision: 'c', transitions: [stored('c', 'three')] });
  assert.deepEqual(asked, ['b']);
});

test('changedFields: a changed field whole, a keyed list as its new and changed entries (left out when none), nothing unchanged', () => {
  const output = { big: 'x'.repeat(100) };
  const before = {
    status: 'running',
    output: null as unknown,
    stages: [
      { at: '/a', state: 'open' },
      { at: '/b', state: 'open' },
    ],
    startedAtMs: 1,
  };
  const after = {
    status: 'completed',
    output,
    stages: [
      { at: '/a', state: 'open' },
      { at: '/b', state: 'done' },
      { at: '/c', state: 'open' },
    ],
    startedAtMs: 1,
  };
  assert.deepEqual(changedFields(before, after, { stages: (s) => s.at }), {
    status: 'completed',
    output,
    stages: [
      { at: '/b', state: 'done' },
      { at: '/c', state: 'open' },
    ],
  });
  assert.deepEqual(changedFields(after, structuredClone(after), { stages: (s) => s.at }), {});
  assert.deepEqual(
    changedEntries(
      [{ id: 'p', n: 1 }],
      [
        { id: 'p', n: 1 },
        { id: 'q', n: 1 },
      ],
      (e) => e.id,
    ),
    [{ id: 'q', n: 1 }],
  );
});

test('replacedKeys: the entries a fold added or replaced, by reference; an own key only ("constructor" is no entry of every map)', () => {
  const kept = { n: 1 };
  const before = { a: kept, b: { n: 1 } };
  const after = { a: kept, b: { n: 1 }, c: { n: 2 }, constructor: { n: 3 } };
  assert.deepEqual(replacedKeys(before, after), ['b', 'c', 'constructor']);
  assert.deepEqual(replacedKeys(after, after), []);
});

/** A copy of `log` in a store of its own, the transitions `tamper` names rewritten as a store that lost its integrity would hold them. */
async function copied(
  log: readonly Stored<Transition>[],
  id: string,
  tamper: (event: JsonObject, index: number) => void,
  clock: VirtualClock,
): Promise<MemoryEventStore> {
  const store = new MemoryEventStore({ clock });
  for (const [index, { transition }] of log.entries()) {
    const body = structuredClone(transition);
    for (const event of body.events) tamper(event as unknown as JsonObject, index);
    const written = index === 0 ? await store.create(id, body) : await store.append(id, String(index), body);
    assert.equal(written.kind, 'ok');
  }
  return store;
}

/**
 * `store` answering for `id` the index row its own store wrote when the log was whole: a log
 * corrupted after it was written (the row is the owner's proof, which a corrupt log cannot give).
 */
function keepingRow(store: MemoryEventStore, id: string, row: OperationIndexRow | undefined): MemoryEventStore {
  const get = store.index.get.bind(store.index);
  store.index.get = async (asked) => (asked === id ? row : get(asked));
  return store;
}

const failsItsSchema = (revision: number) => (e: unknown) =>
  e instanceof AdapterError && e.kind === 'unavailable' && new RegExp(`revision ${revision} fails its schema`).test(e.description ?? '');

test("an operation's inspection refuses a log that fails its schema, as get does: unavailable, never folded or shown, at the snapshot and in an update", async () => {
  const s = await scenario({ peers: 3 });
  const { result } = await s.invoke('corrupt');
  await s.settle();
  const read = await s.store.read(result.operationId);
  assert.ok(read.kind === 'ok' && read.transitions.length >= 2);
  const row = await s.store.index.get(result.operationId);
  const reader = async (store: MemoryEventStore) =>
    createEmbedded({
      clock: s.clock,
      bundle: reviewBundle(),
      groups: { reviewers: ['alfa', 'bravo', 'charlie'] },
      store: keepingRow(store, result.operationId, row),
    });
  // A field the schema refuses (shown as if it were the operation's), and a missing one (the fold itself throws).
  for (const tamper of [(e: JsonObject) => void (e.trustMe = true), (e: JsonObject) => void delete e.manifest]) {
    const embedded = await reader(await copied(read.transitions, result.operationId, (e, i) => i === 0 && tamper(e), s.clock));
    try {
      await assert.rejects(embedded.coordinator.get('svc-a', result.operationId), failsItsSchema(1));
      await assert.rejects(embedded.coordinator.inspect('svc-a', result.operationId), failsItsSchema(1));
    } finally {
      await embedded.close();
    }
  }
  // A stream opened on the valid log, which is then appended a transition that fails its schema.
  const store = await copied(read.transitions.slice(0, 1), result.operationId, () => undefined, s.clock);
  const embedded = await reader(store);
  try {
    const live = await embedded.coordinator.inspectLive('svc-a', result.operationId);
    const bad = structuredClone(read.transitions[1]!.transition);
    (bad.events[0] as unknown as JsonObject).trustMe = true;
    assert.equal((await store.append(result.operationId, '1', bad)).kind, 'ok');
    await assert.rejects(live.next(), failsItsSchema(2));
  } finally {
    await embedded.close();
  }
});

/**
 * A workflow instance alice started under `invocationKey`, its log as read once it ran, and the index
 * row the store wrote while the log was whole (its owner's proof); the executor is closed.
 */
async function startedByAlice(invocationKey: string) {
  const clock = new VirtualClock();
  const h = harness({ clock });
  const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey, document: quickDocument, input: {} });
  await clock.advance(0);
  const read = await h.store.read(instanceId);
  const row = await h.store.workflowIndex.get(instanceId);
  await h.close();
  if (read.kind !== 'ok' || read.transitions.length < 1) throw new Error(`the started instance reads ${read.kind}`);
  return { clock, instanceId, read, row };
}

test("a workflow instance's inspection refuses a log that fails its schema: unavailable, never folded or shown", async () => {
  const { clock, instanceId, read, row } = await startedByAlice('corrupt');
  for (const tamper of [(e: JsonObject) => void (e.trustMe = true), (e: JsonObject) => void delete e.document]) {
    const store = await copied(read.transitions, instanceId, (e, i) => i === 0 && e.type === 'workflow-started' && tamper(e), clock);
    await store.workflowIndex.put(instanceId, row);
    const other = harness({ store, clock });
    const instances = new WorkflowInstances({
      executor: other.executor,
      bundleOf: () => undefined,
      definition: () => undefined,
      listing: { store, clock, operators: new Set() },
    });
    try {
      await assert.rejects(instances.inspect('alice', instanceId), failsItsSchema(1));
    } finally {
      await other.close();
    }
  }
});

const notFound = (e: unknown) => isNotFound(e);

test("an operation's unreadable log is unavailable to its owner only: to another principal it is not found, as an id that names nothing is", async () => {
  const s = await scenario({ peers: 3 });
  const { result } = await s.invoke('unreadable');
  await s.settle();
  const id = result.operationId;
  const read = await s.store.read(id);
  assert.ok(read.kind === 'ok' && read.transitions.length >= 2);
  const last = read.transitions.length - 1;
  const store = await copied(read.transitions, id, (e, i) => i === last && void (e.trustMe = true), s.clock);
  assert.equal((await store.index.get(id))?.principalId, 'svc-a', 'the row the store wrote beside the log names its owner');
  const embedded = await createEmbedded({ clock: s.clock, bundle: reviewBundle(), groups: { reviewers: ['alfa', 'bravo', 'charlie'] }, store });
  try {
    const c = embedded.coordinator;
    await assert.rejects(c.get('svc-a', id), failsItsSchema(last + 1));
    await assert.rejects(c.inspect('svc-a', id), failsItsSchema(last + 1));
    await assert.rejects(c.get('svc-b', id), notFound);
    await assert.rejects(c.wait('svc-b', id, 'decision', 0), notFound);
    await assert.rejects(c.cancel('svc-b', id), notFound);
    await assert.rejects(c.inspect('svc-b', id), notFound);
    await assert.rejects(c.get('svc-b', `op${'ab'.repeat(32)}`), notFound);
    // With no row, nothing written says whose it is: the id alone is not found, to its owner too. Its owner's
    // invocation sent again names it by derivation (principal, contract, key), which proves it the owner's: unavailable.
    const get = store.index.get.bind(store.index);
    store.index.get = async (asked) => (asked === id ? undefined : get(asked));
    await assert.rejects(c.get('svc-a', id), notFound);
    await assert.rejects(
      c.invoke(
        { principalId: 'svc-a', senderPeerId: null },
        { contract: embedded.bundle.ref, interaction: 'review', invocationKey: 'unreadable', input: { document: 'hello' } },
      ),
      failsItsSchema(last + 1),
    );
    // The store failing for every id (its index cannot answer either) is unavailable to anyone: it tells nothing of this id.
    store.index.get = async () => {
      throw new AdapterError('unavailable', 'the store is not answering');
    };
    await assert.rejects(c.get('svc-b', id), failsItsSchema(last + 1));
  } finally {
    await embedded.close();
  }
});

test("a workflow instance's unreadable log is unavailable to its owner only: to another principal it is not found", async () => {
  const { clock, instanceId, read, row } = await startedByAlice('unreadable');
  assert.equal(row?.principalId, 'alice');
  const store = await copied(read.transitions, instanceId, (e, i) => i === 0 && e.type === 'workflow-started' && void (e.trustMe = true), clock);
  await store.workflowIndex.put(instanceId, row);
  const other = harness({ store, clock });
  const instances = new WorkflowInstances({
    executor: other.executor,
    bundleOf: () => undefined,
    definition: () => undefined,
    listing: { store, clock, operators: new Set() },
  });
  try {
    await assert.rejects(instances.get('alice', instanceId), failsItsSchema(1));
    await assert.rejects(instances.inspect('alice', instanceId), failsItsSchema(1));
    await assert.rejects(instances.get('bob', instanceId), notFound);
    await assert.rejects(instances.inspect('bob', instanceId), notFound);
    await assert.rejects(instances.cancel('bob', instanceId), notFound);
    await store.workflowIndex.put(instanceId, undefined);
    await assert.rejects(instances.get('alice', instanceId), notFound, 'no row: nothing written says whose it is');
    // The same start again derives the id from alice, which proves it hers: unavailable.
    await assert.rejects(other.executor.start({ principalId: 'alice', invocationKey: 'unreadable', document: quickDocument, input: {} }), failsItsSchema(1));
  } finally {
    await other.close();
  }
});
