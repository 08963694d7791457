/**
 * A parent cancelled while its child's start is in flight (the child bound in the parent's log,
 * its stream not created yet), on the memory store and on SQLite (and JetStream, on a nats-server
 * of the test's own), by the worker driving the parent or by another worker on the same store.
 * Store wrappers hold a creation until the test lets it through, so each order is driven, not
 * hoped for:
 *
 * - the cancel first: the child's creation is held until the parent's cancel has answered. The
 *   parent records `not-started`, and that must be true of the child's own log: its id holds an
 *   instance cancelled before its start, which ran no task, and no start of the id succeeds
 *   afterwards (the same start answers that instance). Before the fix the cancel found no
 *   instance, recorded `not-started`, and the start then created the child and ran it.
 * - the start first: the cancel, finding no child, goes to create it cancelled before its start
 *   and is held until the start is stored; its creation is refused, and the child is cancelled as
 *   any running child (`cancelled`).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { WorkflowEvent } from '../../src/workflow/exec/events.js';
import { replayWorkflowLog } from '../../src/workflow/exec/replay.js';
import type { WorkflowTransition } from '../../src/workflow/exec/events.js';
import type { Stored } from '../../src/kernel/types.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { assertReplayEqual, delegatingParent, harness, workflowsAmong, yaml, type Harness } from './support.js';

const parent = delegatingParent('parent', 'child');
const child = yaml(`
document: { dsl: '1.0.3', namespace: t, name: child, version: '1.0.0' }
do:
  - work:
      set: { ran: true }
`);
/** A parent whose child waits long enough to be cancelled while it runs. */
const slowParent = delegatingParent('slow-parent', 'slow-child');
const slowChild = yaml(`
document: { dsl: '1.0.3', namespace: t, name: slow-child, version: '1.0.0' }
do:
  - pause:
      wait: { seconds: 30 }
`);
const workflows = workflowsAmong([child, slowChild]);

/** A creation held until released: when it arrived (its stream id), and when the store answered it. */
interface Gate {
  arrived: Promise<string>;
  release(): void;
  answered: Promise<void>;
}

/**
 * The store, with the first creation whose events `matches` accepts held until its gate is
 * released (one gate per rule, each used once); every other call goes straight through.
 */
function holdingCreates(store: EventStore, rules: readonly ((events: readonly WorkflowEvent[]) => boolean)[]): { store: EventStore; gates: Gate[] } {
  const gates = rules.map(() => {
    let arrive!: (id: string) => void;
    let release!: () => void;
    let answer!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const gate = {
      arrived: new Promise<string>((resolve) => (arrive = resolve)),
      release,
      answered: new Promise<void>((resolve) => (answer = resolve)),
      used: false,
      pass: async (id: string, create: () => ReturnType<EventStore['create']>) => {
        arrive(id);
        await released;
        try {
          return await create();
        } finally {
          answer();
        }
      },
    };
    return gate;
  });
  const create: EventStore['create'] = (id, transition, after) => {
    const events = transition.events as unknown as WorkflowEvent[];
    const index = rules.findIndex((matches, at) => !(gates[at] as { used: boolean }).used && matches(events));
    const gate = gates[index];
    if (gate === undefined) return store.create(id, transition, after);
    gate.used = true;
    return gate.pass(id, () => store.create(id, transition, after));
  };
  const held = new Proxy(store, {
    get(target, property) {
      if (property === 'create') return create;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: held, gates };
}

/** A child instance's start: a workflow-started naming a parent. */
const childStart = (events: readonly WorkflowEvent[]) => events.some((event) => event.type === 'workflow-started' && event.parent !== undefined);
/** A child cancelled before its start. */
const cancelBeforeStart = (events: readonly WorkflowEvent[]) => events.some((event) => event.type === 'workflow-cancelled-before-start');

async function logOf(store: EventStore, instanceId: string): Promise<Stored<WorkflowTransition>[]> {
  const read = await store.read(instanceId);
  assert.equal(read.kind, 'ok', `the log of ${instanceId}`);
  return read.kind === 'ok' ? (read.transitions as unknown as Stored<WorkflowTransition>[]) : [];
}

interface Stores {
  /** The driving worker's store, and the cancelling worker's (the same object when one worker does both). */
  driving: EventStore;
  cancelling: EventStore | undefined;
  close(): Promise<void>;
}

async function race(stores: Stores, key: string): Promise<void> {
  const held = holdingCreates(stores.driving, [childStart]);
  const [start] = held.gates as [Gate];
  const driver = harness({ store: held.store, workflows, worker: 'driver' });
  const canceller: Harness = stores.cancelling ? harness({ store: stores.cancelling, workflows, worker: 'canceller' }) : driver;
  const store = stores.cancelling ?? stores.driving;
  try {
    const { instanceId } = await driver.executor.start({ principalId: 'alice', invocationKey: key, document: parent, input: { n: 1 } });
    const childId = await start.arrived;
    // The child is bound in the parent's log, its creation in flight: the parent is cancelled now.
    const cancelled = await canceller.executor.cancel(instanceId, 'stopped while its child starts');
    assert.equal(cancelled.status, 'cancelled');
    const [at, bound] = Object.entries(cancelled.subworkflows)[0] ?? [];
    assert.ok(at !== undefined && bound !== undefined);
    assert.equal(bound.instanceId, childId);
    assert.equal(bound.disposition?.disposition, 'not-started', 'the cancel answers once the child’s disposition is recorded');
    // The start goes on, and must not start what the parent's log already settled.
    start.release();
    await start.answered;
    const childRecord = await driver.executor.wait(childId, 10_000);
    const childLog = await logOf(store, childId);
    const types = childLog.flatMap((stored) => stored.transition.events.map((event) => event.type));
    assert.deepEqual(Object.keys(childRecord.tasks), [], `a child its parent says never started ran no task: ${types.join(', ')}`);
    assert.deepEqual(types, ['workflow-cancelled-before-start'], 'a child its parent says never started has no start');
    assert.equal(childRecord.status, 'cancelled');
    assert.equal(childRecord.started.cancelledBeforeStart, true);
    assert.deepEqual(childRecord.started.parent, { instanceId, at, depth: 1 });
    assert.equal(replayWorkflowLog(childLog).problem, null);
    assert.equal(replayWorkflowLog(await logOf(store, instanceId)).problem, null);
    // The index lists it as a cancelled child, never running.
    const row = await store.workflowIndex.get(childId);
    assert.equal(row?.status, 'cancelled');
    assert.deepEqual(row?.parent, { instanceId, at });
    // A replay-stamped store marks an instance before each creation it writes, the refused start's too, and removes
    // that mark when the creation is refused by an instance that has ended.
    const running: string[] = [];
    for await (const id of store.runningWorkflowIds()) running.push(id);
    assert.ok(!running.includes(childId), 'a child cancelled before its start is not listed as running');
    // No later start of the child's id succeeds: the same start answers the instance as it is.
    const again = await driver.executor.start({
      principalId: 'alice',
      bundleDigest: cancelled.started.bundleDigest,
      invocationKey: bound.invocationKey,
      document: child,
      input: { n: 1 },
      parent: { instanceId, at, depth: 1 },
    });
    assert.deepEqual(again, { instanceId: childId, created: false });
    const after = await driver.executor.wait(childId, 10_000);
    assert.equal(after.status, 'cancelled');
    assert.deepEqual(Object.keys(after.tasks), []);
    assert.equal((await logOf(store, childId)).length, 1);
    await assertReplayEqual(canceller, instanceId);
    await assertReplayEqual(driver, childId);
    if (canceller !== driver) await assertReplayEqual(canceller, childId);
  } finally {
    if (canceller !== driver) await canceller.close();
    await driver.close();
    await stores.close();
  }
}

/**
 * The other order: the cancel finds no child and goes to create it cancelled before its start, but
 * the start is stored first. The cancel's creation is refused (the stream exists), and the child is
 * cancelled as any running child: the parent records `cancelled`.
 */
async function startStoredFirst(stores: Stores, key: string): Promise<void> {
  // One worker: one store with both creations held; two: the driver's start held on its store, the canceller's creation on its own.
  const drivingHeld = holdingCreates(stores.driving, stores.cancelling ? [childStart] : [childStart, cancelBeforeStart]);
  const cancellingHeld = stores.cancelling ? holdingCreates(stores.cancelling, [cancelBeforeStart]) : undefined;
  const [start] = drivingHeld.gates as [Gate];
  const forestall = (cancellingHeld?.gates[0] ?? drivingHeld.gates[1]) as Gate;
  const driver = harness({ store: drivingHeld.store, workflows, worker: 'driver' });
  const canceller: Harness = cancellingHeld ? harness({ store: cancellingHeld.store, workflows, worker: 'canceller' }) : driver;
  try {
    const { instanceId } = await driver.executor.start({ principalId: 'alice', invocationKey: key, document: slowParent, input: {} });
    const childId = await start.arrived;
    const cancelling = canceller.executor.cancel(instanceId, 'stopped while its child starts');
    // The cancel found no child and goes to create it cancelled before its start: the start is stored first.
    const arrived = await Promise.race([
      forestall.arrived,
      cancelling.then(() => assert.fail('the cancel answered without creating the child cancelled before its start')),
    ]);
    assert.equal(arrived, childId);
    start.release();
    await start.answered;
    forestall.release();
    const cancelled = await cancelling;
    const bound = Object.values(cancelled.subworkflows)[0];
    assert.equal(bound?.disposition?.disposition, 'cancelled');
    const childRecord = await canceller.executor.wait(childId, 10_000);
    assert.equal(childRecord.status, 'cancelled');
    assert.notEqual(childRecord.started.cancelledBeforeStart, true);
    const types = (await logOf(stores.driving, childId)).flatMap((stored) => stored.transition.events.map((event) => event.type));
    assert.equal(types[0], 'workflow-started');
    assert.ok(!types.includes('workflow-cancelled-before-start'), types.join(', '));
    await assertReplayEqual(canceller, instanceId);
    await assertReplayEqual(canceller, childId);
  } finally {
    if (canceller !== driver) await canceller.close();
    await driver.close();
    await stores.close();
  }
}

function memoryStores(twoWorkers: boolean): Stores {
  const store = new MemoryEventStore({ clock: new SystemClock() });
  return { driving: store, cancelling: twoWorkers ? store : undefined, close: async () => undefined };
}

function sqliteStores(twoWorkers: boolean): Stores {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-wf-child-race-'));
  const clock = new SystemClock();
  const a = new SqliteEventStore({ path: join(dir, 'wf.db'), clock });
  const b = twoWorkers ? new SqliteEventStore({ path: join(dir, 'wf.db'), clock }) : undefined;
  return {
    driving: a,
    cancelling: b,
    close: async () => {
      await b?.close();
      await a.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Two JetStream stores on a nats-server of the test's own (a replay-stamped store: the running mark is written before the creation). */
async function jetStreamStores(): Promise<Stores> {
  const server = await startJetStreamServer();
  const a = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  const b = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  return {
    driving: a,
    cancelling: b,
    close: async () => {
      await b.close();
      await a.close();
      await server.dispose();
    },
  };
}

test('memory, one worker: the start stored first, the cancel’s creation is refused and the child is cancelled', () =>
  startStoredFirst(memoryStores(false), 'mem-first-one'));
test('memory, two workers: the start stored first, the cancel’s creation is refused and the child is cancelled', () =>
  startStoredFirst(memoryStores(true), 'mem-first-two'));
test('SQLite, two workers: the start stored first, the cancel’s creation is refused and the child is cancelled', () =>
  startStoredFirst(sqliteStores(true), 'sql-first-two'));
test('memory: a parent cancelled by its own worker while its child starts records the truth of the child', () => race(memoryStores(false), 'mem-one'));
test('memory: a parent cancelled by another worker while its child starts records the truth of the child', () => race(memoryStores(true), 'mem-two'));
test('SQLite: a parent cancelled by its own worker while its child starts records the truth of the child', () => race(sqliteStores(false), 'sql-one'));
test('SQLite: a parent cancelled by another worker while its child starts records the truth of the child', () => race(sqliteStores(true), 'sql-two'));
test('JetStream: a parent cancelled by another worker while its child starts records the truth of the child', async () =>
  race(await jetStreamStores(), 'js-two'));
test('JetStream, two workers: the start stored first, the cancel’s creation is refused and the child is cancelled', async () =>
  startStoredFirst(await jetStreamStores(), 'js-first-two'));
