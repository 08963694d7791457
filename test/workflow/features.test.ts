/**
 * convoke's own feature files (test/workflow/features), in the conformance kit's Gherkin format,
 * for what the kit lacks: a competing fork releasing its losers' child operations, and listen.
 * Parsed with @cucumber/gherkin like the kit (ctk.test.ts); one test per scenario; every
 * finished instance is also checked against the one rebuilt from its log.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { test } from 'node:test';
import { AstBuilder, GherkinClassicTokenMatcher, Parser, compile } from '@cucumber/gherkin';
import { IdGenerator, type Pickle } from '@cucumber/messages';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import type { CloudEvent, CloudEventDelivery } from '../../src/contract/cloudevents.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { createEmbedded, type Embedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import type { WorkflowEvent } from '../../src/workflow/exec/events.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { isWorkflowNamed } from '../../src/workflow/exec/document.js';
import { repoRoot } from '../support/assertions.js';
import { assertReplayEqual, harness, runToEnd, yaml, type Harness } from './support.js';

interface World {
  clock: SystemClock;
  store: MemoryEventStore;
  embedded?: Embedded;
  h?: Harness;
  document?: string;
  input: JsonValue;
  instanceId?: string;
  record?: WorkflowRecord;
  delivery?: CloudEventDelivery;
  /** Documents `run: workflow` may name beside the workflow. */
  children: string[];
  /** While set, the store refuses to create child instances (a worker that stops between binding a child and starting it). */
  gate: boolean;
  /** While set, the store refuses to record a child instance cancelled (a worker that stops between abandoning a child and cancelling it). */
  cancelGate: boolean;
  /** Set once the store recorded the parent's end. */
  parentEnded: boolean;
  /** Set once the gate refused a child's cancel after the parent's end was recorded. */
  refusedAfterEnd: boolean;
  /** The child a stopped worker left running under its ended parent. */
  abandoned?: string;
}

let scenarioKey = 0;

function executor(w: World): Harness {
  w.h ??= harness({
    store: gated(w),
    clock: w.clock,
    invocations: w.embedded?.coordinator,
    workflows: (_digest, ref) => w.children.map((text) => yaml(text)).find((document) => isWorkflowNamed(document, ref)),
  });
  return w.h;
}

/** The world's store, refusing (unavailable) to create a child instance while the gate is set. */
function gated(w: World): MemoryEventStore {
  return new Proxy(w.store, {
    get(target, property) {
      if (property === 'create')
        return (id: string, transition: { events: JsonObject[] }, ...rest: unknown[]) =>
          w.gate && transition.events[0]?.parent !== undefined
            ? Promise.resolve({ kind: 'unavailable', description: 'the worker stops before the child starts' })
            : (target.create as (...args: unknown[]) => unknown)(id, transition, ...rest);
      if (property === 'append')
        return async (id: string, revision: string, transition: { events: { type: string }[]; causation: { command: string } }, ...rest: unknown[]) => {
          if (w.cancelGate && transition.causation.command === 'cancel' && id !== w.instanceId) {
            if (w.parentEnded) w.refusedAfterEnd = true;
            return { kind: 'unavailable', description: 'the worker stops before the child is cancelled' };
          }
          const outcome = (await (target.append as (...args: unknown[]) => Promise<{ kind: string }>)(id, revision, transition, ...rest)) as { kind: string };
          if (outcome.kind === 'ok' && id === w.instanceId && transition.events.some((event) => endTypes.has(event.type))) w.parentEnded = true;
          return outcome;
        };
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

const endTypes = new Set(['workflow-completed', 'workflow-faulted', 'workflow-cancelled']);

/** The child instance a task bound (`run: workflow`). */
function boundChild(record: WorkflowRecord, name: string): string {
  return boundRecord(record, name).instanceId;
}

function boundRecord(record: WorkflowRecord, name: string): WorkflowRecord['subworkflows'][string] {
  const child = Object.values(record.subworkflows).find((bound) => bound.ref.endsWith(`/${name}`));
  assert.ok(child, `task ${name} bound a child workflow instance`);
  return child;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (let tries = 0; tries < 2000; tries++) {
    const found = await probe();
    if (found !== undefined) return found;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.fail(`timed out waiting for ${what}`);
}

/** Stops the worker (its leases released, its interpreters stopped) and starts another on the same store, which resumes what runs. */
async function reload(w: World): Promise<void> {
  await w.h?.close();
  w.h = undefined;
  w.gate = false;
  w.cancelGate = false;
  await executor(w).executor.resume();
}

async function instanceIds(store: MemoryEventStore): Promise<string[]> {
  const ids: string[] = [];
  for await (const id of store.workflowInstanceIds()) ids.push(id);
  return ids.sort();
}

/** Starts the workflow (no waiting for a listen). */
async function startWorkflow(w: World): Promise<string> {
  const { instanceId } = await executor(w).executor.start({
    principalId: 'alice',
    invocationKey: `feature-${++scenarioKey}`,
    document: documentOf(w),
    input: w.input,
  });
  w.instanceId = instanceId;
  return instanceId;
}

function documentOf(w: World): JsonValue {
  assert.ok(w.document, 'a workflow was given');
  return yaml(w.embedded ? w.document.replaceAll('<digest>', w.embedded.bundle.ref.digest) : w.document);
}

async function finished(w: World): Promise<WorkflowRecord> {
  if (!w.record) {
    assert.ok(w.instanceId, 'the workflow was started');
    w.record = await executor(w).executor.wait(w.instanceId, 10_000);
    assert.notEqual(w.record.status, 'running', 'the instance finished');
    await replayEqualSettled(w, w.instanceId);
  }
  return w.record;
}

/**
 * The live instance equals its replay, once the live record has applied what the store holds (a
 * disposition recorded after the end may be on its way in while the two are read).
 */
async function replayEqualSettled(w: World, instanceId: string): Promise<void> {
  const h = executor(w);
  for (let tries = 0; tries < 200; tries++) {
    const replayed = await h.executor.replay(instanceId);
    if (replayed && isDeepStrictEqual(replayed, await h.executor.get(instanceId))) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await assertReplayEqual(h, instanceId);
}

/** One contract, two interactions: `review` declares caller cancellation, `hold` does not; peers answer when cancelled or after 3 s. */
async function deployment(w: World): Promise<void> {
  const bundle = reviewBundle({ completion: { mode: 'quorum', count: 2 }, timeoutMs: 8000, cancellation: 'caller' });
  const interactions = bundle.interactions as JsonObject;
  interactions.hold = { ...(interactions.review as JsonObject), cancellation: 'none' };
  const peers = peerIds(3);
  w.embedded = await createEmbedded({ clock: w.clock, store: w.store, bundle, groups: { reviewers: peers } });
  const slow = (_input: unknown, context: { signal: AbortSignal }) =>
    new Promise<{ verdict: 'approve' }>((resolve) => {
      const timer = setTimeout(() => resolve({ verdict: 'approve' }), 3000);
      context.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve({ verdict: 'approve' });
      });
    });
  for (const peerId of peers) await w.embedded.addPeer(peerId, { review: slow, hold: slow });
}

/** The executions of the task named `name` (at least one unless `some` is false). */
function executions(record: WorkflowRecord, name: string, some = true) {
  const found = Object.values(record.tasks).filter((task) => task.name === name);
  if (some) assert.ok(found.length > 0, `task ${name} ran`);
  return found;
}

function childOf(record: WorkflowRecord, name: string) {
  const child = Object.entries(record.children).find(([, c]) => c.ref.endsWith(`/${name}`));
  assert.ok(child, `task ${name} bound a child operation`);
  return child[1];
}

type Step = [RegExp, (world: World, match: RegExpExecArray, doc: string | undefined) => Promise<void> | void];

/** run: workflow — child instances (features/run-workflow.feature). */
const childSteps: Step[] = [
  [/^a child workflow with definition:$/, (w, _m, doc) => void w.children.push(doc ?? '')],
  [
    /^the workflow is started and (\w+) has started its child$/,
    async (w, m) => {
      const id = await startWorkflow(w);
      const h = executor(w);
      await until('the child instance', async () => {
        const record = await h.executor.get(id);
        const bound = record && Object.values(record.subworkflows).find((child) => child.ref.endsWith(`/${m[1]!}`));
        return bound && (await h.executor.get(bound.instanceId))?.status === 'running' ? true : undefined;
      });
    },
  ],
  [
    /^the worker stops after (\w+) bound its child, before the child started$/,
    async (w, m) => {
      w.gate = true;
      const id = await startWorkflow(w);
      const h = executor(w);
      // The child's id is in the parent's log, and its start was refused: the worker stops there.
      const childId = await until('the child binding', async () => {
        const record = await h.executor.get(id);
        return record?.subworkflows && Object.keys(record.subworkflows).length > 0 && h.executor.failures.length > 0 ? boundChild(record, m[1]!) : undefined;
      });
      assert.equal((await w.store.read(childId)).kind, 'not-found', 'the child was not started');
      await reload(w);
    },
  ],
  [
    /^the worker stops after (\w+) timed out, before the child of (\w+) was cancelled$/,
    async (w, m) => {
      w.cancelGate = true;
      const id = await startWorkflow(w);
      const h = executor(w);
      // The timeout's fault is in the parent's log, and the child's cancel was refused: the worker stops there.
      const childId = await until('the timeout and the refused cancel', async () => {
        const record = await h.executor.get(id);
        const timedOut = record && Object.values(record.tasks).some((task) => task.name === m[1] && task.state === 'faulted');
        return timedOut && h.executor.failures.length > 0 ? boundChild(record, m[2]!) : undefined;
      });
      assert.equal((await h.executor.get(childId))?.status, 'running', 'the child was not cancelled');
      assert.equal(boundRecord((await h.executor.get(id))!, m[2]!).disposition, undefined, 'no disposition was recorded');
      await reload(w);
    },
  ],
  [
    /^the worker stops after the workflow ended, before the child of (\w+) was cancelled$/,
    async (w, m) => {
      w.cancelGate = true;
      const id = await startWorkflow(w);
      const h = executor(w);
      // The parent's end is in its log, and the child's cancel was refused after it: the worker stops there.
      await until('the end and a refused cancel after it', () => Promise.resolve(w.refusedAfterEnd ? true : undefined));
      const record = (await h.executor.get(id))!;
      assert.notEqual(record.status, 'running');
      assert.equal((await h.executor.get(boundChild(record, m[1]!)))?.status, 'running', 'the child was not cancelled');
      assert.equal(boundRecord(record, m[1]!).disposition, undefined, 'no disposition was recorded');
      w.abandoned = boundChild(record, m[1]!);
      await reload(w);
    },
  ],
  [
    /^the worker stops after (\w+) timed out and the workflow was cancelled, before the child of (\w+) was cancelled$/,
    async (w, m) => {
      w.cancelGate = true;
      const id = await startWorkflow(w);
      const h = executor(w);
      await until('the timeout and the refused cancel', async () => {
        const record = await h.executor.get(id);
        const timedOut = record && Object.values(record.tasks).some((task) => task.name === m[1] && task.state === 'faulted');
        return timedOut && h.executor.failures.length > 0 ? true : undefined;
      });
      // The parent's cancel is recorded; its child's is refused: the caller is told, and the worker stops there.
      await assert.rejects(h.executor.cancel(id, 'the test cancels it'));
      const record = (await h.executor.get(id))!;
      assert.equal(record.status, 'cancelled');
      assert.equal((await h.executor.get(boundChild(record, m[2]!)))?.status, 'running', 'the child was not cancelled');
      assert.equal(boundRecord(record, m[2]!).disposition, undefined, 'no disposition was recorded');
      w.abandoned = boundChild(record, m[2]!);
      await reload(w);
    },
  ],
  [
    // Read from the store only: the next worker resumed the running child alone, and settles its ended parent by itself.
    /^the next worker cancels the abandoned child and records it in the ended parent's log$/,
    async (w) => {
      const h = executor(w);
      const childId = w.abandoned!;
      await until('the abandoned child cancelled', async () => ((await h.executor.replay(childId))?.status === 'cancelled' ? true : undefined));
      await until('its disposition in the parent', async () => {
        const parent = await h.executor.replay(w.instanceId!);
        return Object.values(parent?.subworkflows ?? {}).some((child) => child.instanceId === childId && child.disposition) ? true : undefined;
      });
    },
  ],
  [
    /^the workflow is waiting in (\w+)$/,
    async (w, m) =>
      void (await until(`task ${m[1]!} running`, async () => {
        const record = await executor(w).executor.get(w.instanceId!);
        return record && Object.values(record.tasks).some((task) => task.name === m[1] && task.state === 'running') ? true : undefined;
      })),
  ],
  [
    /^the child instance of (\w+) should be released as (cancelled|already-closed|not-started) by (\w+|the workflow)$/,
    async (w, m) => {
      // The disposition may be recorded after the parent's end: read the log as it is now.
      await finished(w);
      const record = await until('the disposition', async () => {
        const replayed = await executor(w).executor.replay(w.instanceId!);
        return replayed && boundRecord(replayed, m[1]!).disposition ? replayed : undefined;
      });
      const child = boundRecord(record, m[1]!);
      assert.equal(child.disposition?.disposition, m[2], JSON.stringify(child.disposition));
      if (m[3] === 'the workflow') assert.equal(child.disposition?.by, '/', `released by the workflow's end: ${JSON.stringify(child.disposition)}`);
      else assert.ok(child.disposition?.by.endsWith(`/${m[3]!}`), `released by ${m[3]!}: ${JSON.stringify(child.disposition)}`);
      await replayEqualSettled(w, w.instanceId!);
    },
  ],
  [/^the worker is reloaded$/, (w) => reload(w)],
  [/^the workflow is cancelled$/, async (w) => void (await executor(w).executor.cancel(w.instanceId!, 'the test cancels it'))],
  [
    /^there should be exactly one child instance, bound by (\w+)$/,
    async (w, m) => {
      const record = await finished(w);
      assert.deepEqual(await instanceIds(w.store), [record.instanceId, boundChild(record, m[1]!)].sort());
    },
  ],
  [
    /^the child instance of (\w+) should be (completed|faulted|cancelled|running)$/,
    async (w, m) => {
      const h = executor(w);
      const childId = boundChild((await h.executor.get(w.instanceId!))!, m[1]!);
      const child = m[2] === 'running' ? await h.executor.get(childId) : await h.executor.wait(childId, 10_000);
      assert.equal(child?.status, m[2], JSON.stringify(child?.error));
      assert.deepEqual(child?.started.parent?.instanceId, w.instanceId, 'the child names its parent');
      if (m[2] !== 'running') await assertReplayEqual(h, childId);
    },
  ],
  [
    /^the workflow should be cancelled$/,
    async (w) => {
      const record = await executor(w).executor.wait(w.instanceId!, 10_000);
      assert.equal(record.status, 'cancelled');
      await assertReplayEqual(executor(w), record.instanceId);
    },
  ],
  [/^the workflow instances should number (\d+)$/, async (w, m) => assert.equal((await instanceIds(w.store)).length, Number(m[1]))],
];

const steps: Step[] = [
  [/^a contract deployment where review declares caller cancellation and hold does not$/, (w) => deployment(w)],
  [/^a workflow with definition:$/, (w, _m, doc) => void (w.document = doc ?? '')],
  [/^(?:given )?the workflow input is:$/, (w, _m, doc) => void (w.input = yaml(doc ?? ''))],
  [
    /^the workflow is executed$/,
    async (w) => {
      w.record = await runToEnd(executor(w), documentOf(w), w.input, `feature-${++scenarioKey}`);
      w.instanceId = w.record.instanceId;
    },
  ],
  [
    /^the workflow is started$/,
    async (w) => {
      const h = executor(w);
      const { instanceId } = await h.executor.start({
        principalId: 'alice',
        invocationKey: `feature-${++scenarioKey}`,
        document: documentOf(w),
        input: w.input,
      });
      w.instanceId = instanceId;
      // Started means waiting: its listen is recorded before anything is delivered.
      while (Object.keys((await h.executor.get(instanceId))?.listens ?? {}).length === 0) await new Promise((r) => setTimeout(r, 5));
    },
  ],
  [/^the event is delivered:$/, async (w, _m, doc) => void (w.delivery = await executor(w).executor.deliver(yaml(doc ?? '') as CloudEvent, 'alice'))],
  [/^the delivery should be accepted$/, (w) => assert.deepEqual(w.delivery, { matched: [w.instanceId] })],
  [/^the delivery should match nothing$/, (w) => assert.deepEqual(w.delivery, { matched: [] })],
  [
    /^the workflow should complete with output:$/,
    async (w, _m, doc) => {
      const record = await finished(w);
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      assert.deepEqual(record.output, yaml(doc ?? ''));
    },
  ],
  [
    /^the workflow should fault with status (\d+)$/,
    async (w, m) => {
      const record = await finished(w);
      assert.equal(record.status, 'faulted');
      assert.equal(record.error?.status, Number(m[1]));
    },
  ],
  [
    /^the workflow should fault with error:$/,
    async (w, _m, doc) => {
      const record = await finished(w);
      assert.equal(record.status, 'faulted');
      const expected = yaml(doc ?? '') as JsonObject;
      const actual = record.error as unknown as JsonObject;
      for (const [name, value] of Object.entries(expected)) assert.deepEqual(actual[name], value, `error.${name} in ${JSON.stringify(actual)}`);
    },
  ],
  [/^(\w+) should complete$/, async (w, m) => assert.ok(executions(await finished(w), m[1]!).every((t) => t.state === 'completed'))],
  [/^(\w+) should fault$/, async (w, m) => assert.ok(executions(await finished(w), m[1]!).some((t) => t.state === 'faulted'))],
  [/^(\w+) should not run$/, async (w, m) => assert.deepEqual(executions(await finished(w), m[1]!, false), [])],
  [
    /^starting the workflow should be refused as ([a-z-]+) naming (\S+)$/,
    async (w, m) => {
      const start = executor(w).executor.start({ principalId: 'alice', invocationKey: `feature-${++scenarioKey}`, document: documentOf(w), input: w.input });
      await assert.rejects(start, (error: Error & { kind?: string; description?: string }) => {
        assert.equal(error.kind, m[1]);
        assert.ok(error.description?.startsWith(`${m[2]!}:`), error.message);
        return true;
      });
    },
  ],
  [
    /^the child operation of (\w+) should be (cancelled|detached|already-closed|not-admitted)$/,
    async (w, m) => {
      const child = childOf(await finished(w), m[1]!);
      assert.equal(child.disposition?.disposition, m[2], child.disposition?.detail);
      if (m[2] === 'cancelled') assert.equal((await w.embedded!.coordinator.get('alice', child.operationId)).decision?.reason, 'cancelled');
    },
  ],
  [
    /^the child dispositions should be recorded before the fork completed$/,
    async (w) => {
      const record = await finished(w);
      const log = await w.store.read(record.instanceId);
      const events = log.kind === 'ok' ? log.transitions.flatMap((t) => t.transition.events as unknown as WorkflowEvent[]) : [];
      const lastDisposed = events.findLastIndex((e) => e.type === 'child-disposed');
      const forkDone = events.findIndex((e) => e.type === 'task-completed' && e.at === '/do/0/race');
      assert.ok(lastDisposed >= 0 && lastDisposed < forkDone, 'child-disposed precedes the fork task-completed');
    },
  ],
];

steps.push(...childSteps);

async function runPickle(pickle: Pickle): Promise<void> {
  const clock = new SystemClock();
  const world: World = {
    clock,
    store: new MemoryEventStore({ clock }),
    input: {},
    children: [],
    gate: false,
    cancelGate: false,
    parentEnded: false,
    refusedAfterEnd: false,
  };
  try {
    for (const step of pickle.steps) {
      const text = step.text.trim();
      const found = steps.map(([pattern, run]) => [pattern.exec(text), run] as const).find(([match]) => match !== null);
      if (!found || !found[0]) assert.fail(`no step definition for "${text}"`);
      await found[1](world, found[0], step.argument?.docString?.content);
    }
  } finally {
    await world.h?.close();
    await world.embedded?.close();
  }
}

const featuresDir = join(repoRoot(), 'test', 'workflow', 'features');
const pickles: Pickle[] = [];
for (const file of readdirSync(featuresDir)
  .filter((name) => name.endsWith('.feature'))
  .sort()) {
  const parser = new Parser(new AstBuilder(IdGenerator.incrementing()), new GherkinClassicTokenMatcher());
  pickles.push(...compile(parser.parse(readFileSync(join(featuresDir, file), 'utf8')), file, IdGenerator.incrementing()));
}

test('convoke’s feature files hold their scenarios', () => assert.equal(pickles.length, 31));

for (const pickle of pickles) test(`feature ${pickle.uri}: ${pickle.name}`, () => runPickle(pickle));
