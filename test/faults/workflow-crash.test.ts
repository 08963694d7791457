/**
 * Workflow instances through crashes: a worker process (test/support/workflow-crash-child.ts) runs
 * six three-stage contract pipelines (review, a wait, publish, notify) over the SQLite store, and
 * over JetStream, and is SIGKILLed at seeded points while they run, restarted, killed again, then
 * left to finish. Each restarted worker takes the instances over once its predecessor's lease has
 * ended. Then, from the store alone:
 *
 *   - every instance completed — or faulted because a stage's operation decided other than
 *     success (the runtime's own outcome: its branches' peers die with each killed worker, and a
 *     loaded machine may use up their attempts or the operation's deadline), the stage's recorded
 *     answer that decision error, and no later stage started;
 *   - each stage that ran invoked its contract under exactly one key: one child binding per stage,
 *     and the store holds exactly one operation per stage that ran (three per completed instance,
 *     no other);
 *   - no completed stage ran again: every task started once and ended once;
 *   - timers resumed from their recorded instants: each wait that began had its timer set once,
 *     fired no earlier than its instant, and the next stage started no earlier than it.
 *
 * The seed is printed; CONVOKE_CRASH_SEED=N reproduces the kill schedule.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openStore } from '../../src/adapters/store/open.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { loadBundle } from '../../src/contract/bundle.js';
import { SystemClock } from '../../src/contract/clock.js';
import { seededRandom } from '../../src/runtime/random.js';
import type { WorkflowEvent, WorkflowTransition } from '../../src/workflow/exec/events.js';
import { foldWorkflow, type WorkflowRecord } from '../../src/workflow/exec/record.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import type { Stored } from '../../src/kernel/types.js';
import { CrashChild, type ChildEvent } from '../support/crash-harness.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { stagePointers, wfCrashBundle, wfCrashDocument, wfCrashInstanceId, wfCrashKeys } from '../support/workflow-crash-plan.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const seed = process.env.CONVOKE_CRASH_SEED !== undefined ? Number(process.env.CONVOKE_CRASH_SEED) : randomInt(2 ** 31);
console.log(`workflow-crash seed ${seed} (CONVOKE_CRASH_SEED=${seed} reproduces the kill schedule)`);

const kills = 3;
/** A kill lands this long after the incarnation reports its first instance: while it takes over, starts or runs instances. */
const killDelayMinMs = 100;
const killDelaySpanMs = 1400;
const finalTimeoutMs = 25_000;

async function crashAndFinish(storeUrl: string, label: string): Promise<void> {
  const random = seededRandom(seed ^ label.length);
  for (let k = 0; k < kills; k++) {
    const child = CrashChild.start(['--store', storeUrl], 'workflow-crash-child');
    await child.waitFor('instance', 20_000);
    // Every other kill lands while an instance waits on its timer; the others at a seeded delay.
    const inWait = k % 2 === 0;
    if (inWait) await untilEvent(child, (e) => e.event === 'progress' && Number(e.waiting) > 0, 20_000);
    const delayMs = inWait ? random.int(150) : killDelayMinMs + random.int(killDelaySpanMs);
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    const progress = child.last('progress');
    const state = progress ? `${String(progress.finished)} finished, ${String(progress.waiting)} waiting` : 'starting';
    console.log(`${label}: kill ${k + 1} ${delayMs} ms after ${inWait ? 'an instance began waiting' : 'the first instance'} (${state})`);
    await child.kill();
  }
  const last = CrashChild.start(['--store', storeUrl], 'workflow-crash-child');
  try {
    await last.waitFor('done', finalTimeoutMs);
  } finally {
    await last.kill();
  }
}

/** Until an event matches; or the child is done (no instance left to wait), exited, or timeoutMs passed. */
async function untilEvent(child: CrashChild, match: (event: ChildEvent) => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!child.events.some(match) && child.running && !child.last('done') && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 10));
}

const eventsOf = (log: readonly Stored<WorkflowTransition>[]): WorkflowEvent[] => log.flatMap((s) => s.transition.events);

const decisionErrorType = 'https://convoke.dev/errors/workflow/decision';

/**
 * The stages an instance ran, in order: all three when it completed; when it faulted, those up to
 * the stage whose operation decided other than success — the only fault this test accepts: the
 * instance's error is that stage's decision error (422), recorded as its answer — and no task after
 * that stage started.
 */
function stagesRun(key: string, record: WorkflowRecord): readonly string[] {
  if (record.status === 'completed') return stagePointers;
  assert.equal(record.status, 'faulted', `${key}: completed or faulted`);
  const error = record.error;
  const failed = stagePointers.indexOf(error?.instance as (typeof stagePointers)[number]);
  assert.ok(error?.type === decisionErrorType && error.status === 422 && failed >= 0, `${key}: faulted only by a stage's decision (${JSON.stringify(error)})`);
  const answer = record.steps[`${stagePointers[failed]!}>invoke`];
  assert.ok(answer && 'error' in answer && answer.error.type === decisionErrorType, `${key}: the failed stage's answer is its decision error`);
  const ran = stagePointers.slice(0, failed + 1);
  const later = Object.values(record.tasks).filter(
    (task) => !ran.some((pointer) => task.ref === pointer) && task.startedSeq > record.tasks[stagePointers[failed]!]!.startedSeq,
  );
  assert.deepEqual(
    later.map((task) => task.ref),
    [],
    `${key}: nothing ran after the failed stage`,
  );
  return ran;
}

async function checkStore(store: EventStore): Promise<void> {
  const document = wfCrashDocument(loadBundle(wfCrashBundle()).ref);
  const streams = workflowStreams(store);
  const expectedOperations = new Set<string>();
  for (const key of wfCrashKeys()) {
    const id = wfCrashInstanceId(document, key);
    const read = await streams.read(id);
    assert.equal(read.kind, 'ok', `${key}: instance ${id} exists`);
    const log = (read as { transitions: Stored<WorkflowTransition>[] }).transitions;
    const record = foldWorkflow(log)!;
    const ran = stagesRun(key, record);
    const events = eventsOf(log);

    const bound = events.filter((e) => e.type === 'child-bound');
    assert.deepEqual(bound.map((e) => e.ref).sort(), [...ran].sort(), `${key}: one child binding per stage that ran`);
    assert.equal(new Set(bound.map((e) => e.invocationKey)).size, ran.length, `${key}: ${ran.length} distinct stage keys`);
    for (const child of bound) expectedOperations.add(child.operationId);
    for (const pointer of ran) {
      const answer = record.steps[`${pointer}>invoke`];
      assert.ok(answer, `${key}: ${pointer} answered`);
      const operationId = Object.values(record.children).find((c) => c.ref === pointer)!.operationId;
      // The failed stage's decision error (stagesRun) names the operation it bound.
      if ('error' in answer) assert.ok(answer.error.detail?.startsWith(`operation ${operationId} decided`), `${key}: ${answer.error.detail ?? ''}`);
      else assert.equal((answer.ok as { operationId: string }).operationId, operationId);
    }

    const starts = events.filter((e) => e.type === 'task-started').map((e) => e.at);
    assert.equal(new Set(starts).size, starts.length, `${key}: no task started twice (${starts.join(', ')})`);
    const ends = events.filter((e) => e.type === 'task-completed' || e.type === 'task-faulted').map((e) => e.at);
    assert.deepEqual([...ends].sort(), [...starts].sort(), `${key}: every task ended once`);

    const timerSets = events.filter((e) => e.type === 'timer-set' && e.purpose === 'wait');
    // The wait begins once review succeeded.
    assert.equal(timerSets.length, ran.length > 1 ? 1 : 0, `${key}: the wait's timer was set once, if review succeeded`);
    const timer = timerSets[0] as Extract<WorkflowEvent, { type: 'timer-set' }> | undefined;
    if (timer) {
      const fired = log.find((s) => s.transition.events.some((e) => e.type === 'timer-fired' && e.at === timer.at))!;
      assert.ok(fired.committedAtMs >= timer.dueAtMs, `${key}: the timer fired no earlier than its recorded instant`);
      assert.ok(record.tasks['/do/2/publish']!.startedAtMs >= timer.dueAtMs, `${key}: publish started after the wait's instant`);
    }
    const takeovers = events.filter((e) => e.type === 'lease-acquired').length;
    const outcome = record.status === 'completed' ? 'completed' : `faulted at ${record.error?.instance ?? '?'} (${record.error?.detail ?? ''})`;
    console.log(
      `${key}: ${outcome}, ${log.length} transitions, ${takeovers} lease(s), calls started ${events.filter((e) => e.type === 'call-started').length}`,
    );
  }
  const operations: string[] = [];
  for await (const id of store.operationIds()) operations.push(id);
  assert.deepEqual(operations.sort(), [...expectedOperations].sort(), 'exactly one operation per stage, and no other');
}

test('workflow worker SIGKILLed mid-pipeline over SQLite: every instance finishes, one operation per stage, timers at their instants', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-crash-'));
  const url = `sqlite:${join(dir, 'wf.db')}`;
  try {
    await crashAndFinish(url, 'sqlite');
    const store = await openStore(url, { clock: new SystemClock() });
    try {
      await checkStore(store);
    } finally {
      await store.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('workflow worker SIGKILLed mid-pipeline over JetStream: every instance finishes, one operation per stage, timers at their instants', async () => {
  const server = await startJetStreamServer();
  try {
    await crashAndFinish(`jetstream:${server.url}`, 'jetstream');
    const store = await openStore(`jetstream:${server.url}`, { clock: new SystemClock() });
    try {
      await checkStore(store);
    } finally {
      await store.close();
    }
  } finally {
    await server.dispose();
  }
});
