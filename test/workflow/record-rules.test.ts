/**
 * The workflow instance fold's rules (src/workflow/exec/record.ts), one by one, on logs built here:
 * the exact record each event gives (every field of it: a task's, a timer's, a child's, a listen's,
 * the lease's, a call's), the values events name by reference, what the fold refuses as an
 * assertion (a log it cannot trust), the transitions it voids, and the record applied to left as it
 * was. aggregate.test and decide-rules.test fold records on the way to the deciders; the executor
 * suites fold every transition they commit; this file pins the fold alone, and runs first in its
 * mutation run.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AssertionFailure } from '../../src/contract/errors.js';
import type { Stored } from '../../src/kernel/types.js';
import type { TimeGuard } from '../../src/events/types.js';
import type { WorkflowEvent, WorkflowTransition } from '../../src/workflow/exec/events.js';
import { applyWorkflow, foldWorkflow, type WorkflowRecord } from '../../src/workflow/exec/record.js';
import { bareStarted } from './support.js';

const open: TimeGuard = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };

/** Transition `revision` of a log, committed at 1000 + revision unless told. */
const stored = (revision: number, events: WorkflowEvent[], committedAtMs = 1000 + revision, timeGuard = open): Stored<WorkflowTransition> => ({
  revision: String(revision),
  committedAtMs,
  transition: { events, timeGuard, causation: { command: 'test' } },
});

/** The record of a log of transitions, the first committed at 1001, each next one a millisecond later. */
function fold(...transitions: WorkflowEvent[][]): WorkflowRecord {
  const record = foldWorkflow(transitions.map((events, index) => stored(index + 1, events)));
  assert.ok(record);
  return record;
}

/** The record with one more transition applied (its revision the next, committed a millisecond after the last). */
function apply(record: WorkflowRecord, ...events: WorkflowEvent[]): WorkflowRecord {
  const next = applyWorkflow(record, stored(Number(record.revision) + 1, events, record.lastAppliedAtMs + 1));
  assert.ok(next);
  return next;
}

/** That applying `events` to `record` is refused as an assertion: a log the fold cannot trust. */
const refused = (record: WorkflowRecord, events: WorkflowEvent[], why: string) => assert.throws(() => apply(record, ...events), AssertionFailure, why);

const started = bareStarted({ deadlineMs: null });
const instanceId = (started as { instanceId: string }).instanceId;
const identity = {
  instanceId,
  principalId: 'alice',
  invocationKey: 'k',
  workflowName: 'w',
  bundleDigest: `sha256:${'0'.repeat(64)}`,
};
const parent = { instanceId: 'parent-1', at: '/do/0/run', depth: 1 };

/** The record a start without a timeout, committed at 1001, creates: every field. */
const fresh: WorkflowRecord = {
  instanceId,
  revision: '1',
  status: 'running',
  started: { ...identity, document: { do: [] }, input: {}, deadlineMs: null },
  startedAtMs: 1001,
  lastAppliedAtMs: 1001,
  tasks: {},
  steps: {},
  children: {},
  subworkflows: {},
  timers: {},
  winners: {},
  listens: {},
  lease: null,
  leaseEpoch: 0,
  calls: {},
  seq: 0,
  output: null,
  error: null,
  endedAtMs: null,
};

test('the start creates the record: its deadline counts from the commit instant and arms the workflow timeout; older logs keep the deadline recorded', () => {
  assert.deepEqual(fold([started]), fresh, 'no timeout, no deadline');
  const timed = fold([bareStarted({ timeoutMs: 500, parent, keys: 3, format: 2 })]);
  assert.deepEqual(timed, {
    ...fresh,
    started: { ...identity, document: { do: [] }, input: {}, deadlineMs: 1501, timeoutMs: 500, parent, keys: 3, format: 2 },
    timers: { '@workflow-timeout': { dueAtMs: 1501, purpose: 'workflow-timeout', state: 'armed' } },
  });
  // A log written before timeoutMs: the deadline as its start decided it, and no timer armed by the start.
  assert.deepEqual(fold([bareStarted({ deadlineMs: 7000 })]).started, { ...identity, document: { do: [] }, input: {}, deadlineMs: 7000 });
  assert.deepEqual(fold([bareStarted({ deadlineMs: 7000 })]).timers, {});
  assert.deepEqual(
    fold([bareStarted({ timeoutMs: null })]),
    { ...fresh, started: { ...identity, document: { do: [] }, input: {}, deadlineMs: null, timeoutMs: null } },
    'a null timeout: no deadline, no timer',
  );
  assert.deepEqual(fold([bareStarted({})]).started.deadlineMs, null, 'neither timeout nor deadline recorded');
  // The rest of the start's transition applies at the same instant, to the new record.
  const begun = fold([started, { type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', inputFrom: { input: true } }]);
  assert.deepEqual(begun.tasks['/do/0/a'], {
    ref: '/do/0/a',
    name: 'a',
    state: 'running',
    input: {},
    output: null,
    error: null,
    startedAtMs: 1001,
    startedSeq: 0,
    endedSeq: null,
  });
  assert.equal(begun.seq, 1);
});

test('a stream begins with its start or with workflow-cancelled-before-start, and with nothing else; neither comes later', () => {
  const first = (events: WorkflowEvent[]) => () => foldWorkflow([stored(1, events)]);
  assert.throws(first([]), AssertionFailure, 'an empty first transition');
  assert.throws(first([{ type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } }]), AssertionFailure, 'a step first');
  const record = fold([started]);
  refused(record, [started], 'a second start');
  refused(record, [{ type: 'workflow-cancelled-before-start', v: 1, ...identity, parent, reason: 'r' }], 'a cancel before the start, after it');
});

test('a stream that begins with workflow-cancelled-before-start is cancelled from its first event: no document, no input, ended at that instant, and it takes nothing after', () => {
  const cancelled: WorkflowEvent = { type: 'workflow-cancelled-before-start', v: 1, ...identity, parent, reason: 'parent cancelled' };
  assert.deepEqual(fold([cancelled]), {
    ...fresh,
    status: 'cancelled',
    started: { ...identity, document: null, input: null, deadlineMs: null, parent, cancelledBeforeStart: true },
    endedAtMs: 1001,
  });
  const task: WorkflowEvent = { type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', input: {} };
  assert.throws(() => foldWorkflow([stored(1, [cancelled, task])]), AssertionFailure, 'a task in the same transition');
  assert.throws(() => foldWorkflow([stored(1, [cancelled]), stored(2, [task])]), AssertionFailure, 'a task after it');
});

test('a void transition (its guard missed at its stamp, or stamped before the last applied) changes nothing but the revision; a void first one creates nothing', () => {
  const record = fold([started], [{ type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } }]);
  const step: WorkflowEvent = { type: 'expression-evaluated', v: 1, at: 'f', result: { ok: 2 } };
  const guarded = applyWorkflow(record, stored(3, [step], 5000, { notBeforeMs: 0, notAfterMs: 4000 }));
  assert.deepEqual(guarded, { ...record, revision: '3' }, 'the guard missed');
  const earlier = applyWorkflow(record, stored(3, [step], record.lastAppliedAtMs - 1));
  assert.deepEqual(earlier, { ...record, revision: '3' }, 'stamped before the last applied transition');
  const same = applyWorkflow(record, stored(3, [step], record.lastAppliedAtMs));
  assert.deepEqual(same?.steps['f'], { ok: 2 }, 'stamped at the same instant as the last applied: applied');
  assert.equal(applyWorkflow(undefined, stored(1, [started], 5000, { notBeforeMs: 0, notAfterMs: 4000 })), undefined);
  assert.equal(foldWorkflow([]), undefined);
});

test('applying a transition sets its revision and commit instant, and leaves the record applied to, and every map of it, as it was', () => {
  const events: WorkflowEvent[][] = [
    [started],
    [{ type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', input: {} }],
    [{ type: 'listen-started', v: 1, at: '/do/0/a', to: { one: {} }, read: 'data' }],
    [{ type: 'child-bound', v: 1, at: '/do/1/c', ref: '/do/1/c', operationId: 'op-1', invocationKey: 'k1', iterations: [], attempt: 1 }],
    [
      {
        type: 'subworkflow-bound',
        v: 1,
        at: '/do/2/s',
        ref: '/do/2/s',
        instanceId: 'child-1',
        invocationKey: 'k2',
        workflow: 'sub',
        iterations: [],
        attempt: 1,
      },
    ],
    [{ type: 'timer-set', v: 1, at: 't1', dueAtMs: 5000, purpose: 'wait' }],
    [{ type: 'call-started', v: 1, at: 'c1', epoch: 1 }],
  ];
  const before = fold(...events);
  const after = applyWorkflow(
    before,
    stored(9, [
      { type: 'task-completed', v: 1, at: '/do/0/a', output: 1 },
      { type: 'task-started', v: 1, at: '/do/3/b', ref: '/do/3/b', name: 'b', input: 2 },
      { type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } },
      { type: 'call-answered', v: 1, at: 'c1', result: { ok: 2 } },
      { type: 'child-disposed', v: 1, at: '/do/1/c', fork: '/do/9/f', operationId: 'op-1', disposition: 'detached', detail: 'd' },
      { type: 'subworkflow-disposed', v: 1, at: '/do/2/s', instanceId: 'child-1', by: '/do/2/s', disposition: 'cancelled', detail: 'd' },
      { type: 'timer-fired', v: 1, at: 't1' },
      { type: 'timer-set', v: 1, at: 't2', dueAtMs: 6000, purpose: 'retry' },
      { type: 'fork-won', v: 1, at: '/do/9/f', branch: 1 },
      { type: 'call-started', v: 1, at: 'c2', epoch: 1 },
      { type: 'listen-started', v: 1, at: '/do/3/b', to: { one: {} }, read: 'raw' },
      { type: 'lease-acquired', v: 1, worker: 'w1', epoch: 1, untilMs: 9000 },
    ]),
  );
  assert.ok(after);
  assert.equal(after.revision, '9');
  assert.equal(after.lastAppliedAtMs, 1009);
  assert.equal(after.startedAtMs, 1001, 'the start instant stays');
  assert.deepEqual(before, fold(...events), 'the record applied to is unchanged, every map of it');
  // Two changes to one map in one transition both land.
  assert.deepEqual(Object.keys(after.tasks), ['/do/0/a', '/do/3/b']);
  assert.deepEqual(Object.keys(after.timers), ['t1', 't2']);
  assert.deepEqual(Object.keys(after.steps), ['e', 'c1']);
  assert.deepEqual(Object.keys(after.calls), ['c1', 'c2']);
  assert.deepEqual(Object.keys(after.listens), ['/do/0/a', '/do/3/b']);
});
