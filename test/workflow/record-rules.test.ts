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
import type { JsonValue } from '../../src/contract/json.js';
import type { Stored } from '../../src/kernel/types.js';
import type { TimeGuard } from '../../src/events/types.js';
import type { WorkflowEvent, WorkflowTransition } from '../../src/workflow/exec/events.js';
import {
  applyWorkflow,
  foldWorkflow,
  isWorkflowFinished,
  listenOutput,
  nextWorkflowDueAfterMs,
  nextWorkflowDueMs,
  readEvent,
  taskTimeoutKey,
  workflowTimeoutKey,
  type ListenRecord,
  type WorkflowRecord,
} from '../../src/workflow/exec/record.js';
import { childBound, childDisposed, subworkflowBound, subworkflowDisposed } from './child-events.js';
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
  cancelReason: null,
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

test('a stream that begins with workflow-cancelled-before-start is cancelled from its first event, with its reason: no document, no input, ended at that instant, and it takes nothing after', () => {
  const cancelled: WorkflowEvent = { type: 'workflow-cancelled-before-start', v: 1, ...identity, parent, reason: 'parent cancelled' };
  assert.deepEqual(fold([cancelled]), {
    ...fresh,
    status: 'cancelled',
    started: { ...identity, document: null, input: null, deadlineMs: null, parent, cancelledBeforeStart: true },
    cancelReason: 'parent cancelled',
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

const taskStarted = (at: string, input: JsonValue = {}): WorkflowEvent => ({ type: 'task-started', v: 1, at, ref: `${at}#ref`, name: 'a', input });
const taskCompleted = (at: string, output: JsonValue): WorkflowEvent => ({ type: 'task-completed', v: 1, at, output });
const fault = { type: 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime', status: 500 };

test("a task's record: started with its input at the commit instant, ended completed with its output, faulted with its error, or cancelled; starts and ends counted in log order", () => {
  const record = fold([started], [taskStarted('/do/0/a', { n: 1 })], [taskStarted('/do/1/b')], [taskStarted('/do/2/c')], [taskStarted('/do/3/d')]);
  const running = (at: string, input: JsonValue, startedAtMs: number, startedSeq: number) => ({
    ref: `${at}#ref`,
    name: 'a',
    state: 'running',
    input,
    output: null,
    error: null,
    startedAtMs,
    startedSeq,
    endedSeq: null,
  });
  assert.deepEqual(record.tasks['/do/0/a'], running('/do/0/a', { n: 1 }, 1002, 0));
  assert.deepEqual(record.tasks['/do/3/d'], running('/do/3/d', {}, 1005, 3));
  assert.equal(record.seq, 4);
  const ended = apply(
    record,
    taskCompleted('/do/0/a', { done: true }),
    { type: 'task-faulted', v: 1, at: '/do/1/b', error: fault },
    { type: 'task-cancelled', v: 1, at: '/do/2/c', reason: 'r' },
  );
  assert.deepEqual(ended.tasks['/do/0/a'], { ...running('/do/0/a', { n: 1 }, 1002, 0), state: 'completed', output: { done: true }, endedSeq: 4 });
  assert.deepEqual(ended.tasks['/do/1/b'], { ...running('/do/1/b', {}, 1003, 1), state: 'faulted', error: fault, endedSeq: 5 });
  assert.deepEqual(ended.tasks['/do/2/c'], { ...running('/do/2/c', {}, 1004, 2), state: 'cancelled', endedSeq: 6 });
  assert.deepEqual(ended.tasks['/do/3/d'], running('/do/3/d', {}, 1005, 3), 'a task no event names is left as it was');
  assert.equal(ended.seq, 7);
  assert.deepEqual(apply(ended, taskStarted('/do/4/e')).tasks['/do/4/e'], running('/do/4/e', {}, 1007, 7), 'the next start counts on');
  // The machine refuses a task started twice, ended twice or ended unstarted.
  refused(record, [taskStarted('/do/0/a')], 'a running task started again');
  refused(ended, [taskStarted('/do/0/a')], 'an ended task started again');
  refused(ended, [taskCompleted('/do/0/a', 2)], 'a completed task completed again');
  refused(ended, [{ type: 'task-cancelled', v: 1, at: '/do/1/b', reason: 'r' }], 'a faulted task cancelled');
  refused(record, [taskCompleted('/do/9/none', 1)], 'no such task completed');
  refused(record, [{ type: 'task-faulted', v: 1, at: '/do/9/none', error: fault }], 'no such task faulted');
  refused(record, [{ type: 'task-cancelled', v: 1, at: '/do/9/none', reason: 'r' }], 'no such task cancelled');
});

test("a value named by reference is the one recorded there: the workflow's input, a step's ok result, a completed task's output, a listen's events; a reference to nothing recorded is refused", () => {
  const input = { doc: 'RFC 9' };
  const record = fold(
    [bareStarted({ deadlineMs: null, input })],
    [taskStarted('/do/0/a'), taskCompleted('/do/0/a', { out: 1 }), taskStarted('/do/1/b'), taskStarted('/do/2/l')],
    [{ type: 'expression-evaluated', v: 1, at: 'e', result: { ok: { set: 2 } } }],
    [{ type: 'call-answered', v: 1, at: 'c', result: { error: fault } }],
    [{ type: 'listen-started', v: 1, at: '/do/2/l', to: { one: {} }, read: 'data' }],
    [{ type: 'listen-event-received', v: 1, at: '/do/2/l', event: { data: { n: 7 } }, group: 'to', filter: 0, correlation: {} }],
  );
  const inputOf = (inputFrom: object) =>
    apply(record, { type: 'task-started', v: 1, at: '/do/5/x', ref: 'x', name: 'x', inputFrom } as WorkflowEvent).tasks['/do/5/x']?.input;
  assert.deepEqual(inputOf({ input: true }), input);
  assert.deepEqual(inputOf({ step: 'e' }), { set: 2 });
  assert.deepEqual(inputOf({ task: '/do/0/a' }), { out: 1 });
  assert.deepEqual(inputOf({ listen: '/do/2/l' }), [{ n: 7 }]);
  const outputOf = (outputFrom: object) => apply(record, { type: 'task-completed', v: 1, at: '/do/1/b', outputFrom } as WorkflowEvent).tasks['/do/1/b']?.output;
  assert.deepEqual(outputOf({ step: 'e' }), { set: 2 });
  assert.deepEqual(outputOf({ input: true }), input);
  const endOf = (outputFrom: object) => apply(record, { type: 'workflow-completed', v: 1, outputFrom } as WorkflowEvent).output;
  assert.deepEqual(endOf({ task: '/do/0/a' }), { out: 1 });
  assert.deepEqual(endOf({ listen: '/do/2/l' }), [{ n: 7 }]);
  assert.deepEqual(
    apply(record, { type: 'task-started', v: 1, at: '/do/5/x', ref: 'x', name: 'x', input: null }).tasks['/do/5/x']?.input,
    null,
    'a value in full, null',
  );
  const start = (inputFrom: object): WorkflowEvent => ({ type: 'task-started', v: 1, at: '/do/5/x', ref: 'x', name: 'x', inputFrom }) as WorkflowEvent;
  refused(record, [start({ step: 'none' })], 'no step recorded there');
  refused(record, [start({ step: 'c' })], 'a step that recorded an error, not a value');
  refused(record, [start({ task: '/do/1/b' })], 'a task still running');
  refused(record, [start({ task: '/do/9/none' })], 'no such task');
  refused(record, [start({ listen: '/do/1/b' })], 'no listen there');
});

test('a step (an evaluated expression, an answered call) is recorded once, by its key, with its result', () => {
  const record = fold(
    [started],
    [{ type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } }],
    [{ type: 'call-answered', v: 1, at: 'c', result: { error: fault } }],
  );
  assert.deepEqual(record.steps, { e: { ok: 1 }, c: { error: fault } });
  refused(record, [{ type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 2 } }], 'an expression recorded twice');
  refused(record, [{ type: 'call-answered', v: 1, at: 'c', result: { ok: 2 } }], 'a call answered twice');
  refused(record, [{ type: 'call-answered', v: 1, at: 'e', result: { ok: 2 } }], 'one key, two kinds of step');
});

test("a timer: set armed with its instant and purpose, fired keeping them; set once, fired once and only when set; a fork's winner recorded once", () => {
  const record = fold(
    [started],
    [{ type: 'timer-set', v: 1, at: 't1', dueAtMs: 5000, purpose: 'wait' }],
    [{ type: 'timer-set', v: 1, at: 't2', dueAtMs: 4000, purpose: 'retry' }],
  );
  assert.deepEqual(record.timers, { t1: { dueAtMs: 5000, purpose: 'wait', state: 'armed' }, t2: { dueAtMs: 4000, purpose: 'retry', state: 'armed' } });
  const fired = apply(record, { type: 'timer-fired', v: 1, at: 't1' });
  assert.deepEqual(fired.timers, { t1: { dueAtMs: 5000, purpose: 'wait', state: 'fired' }, t2: { dueAtMs: 4000, purpose: 'retry', state: 'armed' } });
  refused(record, [{ type: 'timer-fired', v: 1, at: 't9' }], 'a timer fired unset');
  refused(fired, [{ type: 'timer-fired', v: 1, at: 't1' }], 'a timer fired twice');
  refused(record, [{ type: 'timer-set', v: 1, at: 't1', dueAtMs: 6000, purpose: 'wait' }], 'an armed timer set again');
  refused(fired, [{ type: 'timer-set', v: 1, at: 't1', dueAtMs: 6000, purpose: 'wait' }], 'a fired timer set again');
  const won = apply(record, { type: 'fork-won', v: 1, at: 'f', branch: 2 });
  assert.deepEqual(won.winners, { f: 2 });
  refused(won, [{ type: 'fork-won', v: 1, at: 'f', branch: 2 }], 'a fork won twice');
  assert.deepEqual(apply(won, { type: 'fork-won', v: 1, at: 'g', branch: 0 }).winners, { f: 2, g: 0 });
});

test("a child operation is bound once with what the event names, and disposed once, only the one bound there, with the fork's disposition", () => {
  const record = fold([started], [childBound]);
  const bound = { ref: '/do/1/c#ref', iterations: [2], operationId: 'op-1', invocationKey: 'k1', attempt: 3 };
  assert.deepEqual(record.children, { '/do/1/c': bound }, 'no disposition while bound');
  refused(record, [childBound], 'bound twice');
  const disposed = apply(record, childDisposed);
  assert.deepEqual(disposed.children, { '/do/1/c': { ...bound, disposition: { fork: '/do/9/f', disposition: 'detached', detail: 'lost the race' } } });
  refused(disposed, [childDisposed], 'disposed twice');
  refused(record, [{ ...childDisposed, operationId: 'op-2' } as WorkflowEvent], 'another operation than the one bound there');
  refused(record, [{ ...childDisposed, at: '/do/1/d' } as WorkflowEvent], 'nothing bound there');
});

test("a child workflow instance is bound once, and disposed once, only the one bound there, with who released it; an ended instance still takes its disposal (a child operation's too) and nothing else", () => {
  const record = fold([started], [subworkflowBound]);
  const bound = { ref: '/do/2/s#ref', iterations: [1], instanceId: 'child-1', invocationKey: 'k2', workflow: 'sub', attempt: 2 };
  assert.deepEqual(record.subworkflows, { '/do/2/s': bound }, 'no disposition while bound');
  refused(record, [subworkflowBound], 'bound twice');
  const disposition = { by: '/do/2/s@timeout', disposition: 'cancelled', detail: 'timed out' };
  assert.deepEqual(apply(record, subworkflowDisposed).subworkflows, { '/do/2/s': { ...bound, disposition } });
  refused(apply(record, subworkflowDisposed), [subworkflowDisposed], 'disposed twice');
  refused(record, [{ ...subworkflowDisposed, instanceId: 'child-2' } as WorkflowEvent], 'another instance than the one bound there');
  refused(record, [{ ...subworkflowDisposed, at: '/do/2/t' } as WorkflowEvent], 'nothing bound there');
  // The parent ended first: the disposal is still recorded, the instance stays as it ended.
  const ended = apply(record, { type: 'workflow-completed', v: 1, output: 1 });
  const late = apply(ended, subworkflowDisposed);
  assert.deepEqual(late, { ...ended, revision: late.revision, lastAppliedAtMs: late.lastAppliedAtMs, subworkflows: { '/do/2/s': { ...bound, disposition } } });
  refused(ended, [subworkflowDisposed, { type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } }], 'a step beside it');
  // A contract call's release too (a timed-out task's, asked again until the runtime answered): what became of a child.
  const faulted = apply(record, childBound, { type: 'workflow-faulted', v: 1, error: fault });
  assert.deepEqual(apply(faulted, childDisposed).children['/do/1/c']?.disposition, { fork: '/do/9/f', disposition: 'detached', detail: 'lost the race' });
  assert.equal(apply(faulted, childDisposed).status, 'faulted');
  refused(faulted, [childDisposed, { type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } }], 'a step beside it');
  refused(ended, [{ type: 'workflow-completed', v: 1, output: 2 }], 'a second end');
  // Cancelled first: the disposal keeps why it was cancelled.
  const cancelled = apply(record, { type: 'workflow-cancelled', v: 1, reason: 'by its caller' });
  const after = apply(cancelled, subworkflowDisposed);
  assert.equal(after.cancelReason, 'by its caller');
  assert.deepEqual(after, {
    ...cancelled,
    revision: after.revision,
    lastAppliedAtMs: after.lastAppliedAtMs,
    subworkflows: { '/do/2/s': { ...bound, disposition } },
  });
});

const listenStarted = (at: string, read: ListenRecord['read'] = 'data'): WorkflowEvent => ({ type: 'listen-started', v: 1, at, to: { any: [] }, read });
const received = (at: string, event: JsonValue, correlation: Record<string, JsonValue> = {}, group: 'to' | 'until' = 'to', filter = 0): WorkflowEvent => ({
  type: 'listen-event-received',
  v: 1,
  at,
  event,
  group,
  filter,
  correlation,
});

test("a listen: started with what it waits for and how it reads, nothing taken; each event taken in log order, counted among every listen's; each correlation's first value kept", () => {
  const record = fold([started], [taskStarted('/do/0/a'), listenStarted('/do/0/a', 'envelope')]);
  assert.deepEqual(record.listens, { '/do/0/a': { to: { any: [] }, read: 'envelope', events: [], expected: {}, since: 0 } });
  refused(record, [listenStarted('/do/0/a')], 'a listen started twice');
  const one = apply(record, received('/do/0/a', { id: 1 }, { order: 'o1' }), received('/do/0/a', { id: 2 }, { order: 'o2', line: 4 }, 'until', 1));
  assert.deepEqual(one.listens['/do/0/a'], {
    to: { any: [] },
    read: 'envelope',
    events: [
      { event: { id: 1 }, group: 'to', filter: 0, correlation: { order: 'o1' }, position: 0 },
      { event: { id: 2 }, group: 'until', filter: 1, correlation: { order: 'o2', line: 4 }, position: 1 },
    ],
    expected: { order: 'o1', line: 4 },
    since: 0,
  });
  // A second listen starts after the two taken; what it takes counts on from there.
  const two = apply(one, taskStarted('/do/1/b'), listenStarted('/do/1/b'), received('/do/1/b', { id: 3 }));
  assert.deepEqual(two.listens['/do/1/b'], {
    to: { any: [] },
    read: 'data',
    events: [{ event: { id: 3 }, group: 'to', filter: 0, correlation: {}, position: 2 }],
    expected: {},
    since: 2,
  });
  assert.deepEqual(apply(two, received('/do/0/a', { id: 4 })).listens['/do/0/a']?.events.at(-1)?.position, 3, 'positions count every listen');
  assert.deepEqual(apply(two, taskStarted('/do/2/c'), listenStarted('/do/2/c')).listens['/do/2/c']?.since, 3);
  refused(record, [received('/do/1/b', { id: 1 })], 'no listen there, no task');
  refused(apply(record, taskStarted('/do/1/b')), [received('/do/1/b', { id: 1 })], 'a running task that does not listen');
  refused(apply(record, taskCompleted('/do/0/a', null)), [received('/do/0/a', { id: 1 })], 'its task ended');
});

test("a listen's output: the events of its `to` among its first ones, in log order, as it reads them (data, or data_base64 as text, or the envelope)", () => {
  const events: JsonValue[] = [{ data: { n: 1 } }, { data_base64: 'AAE=' }, { data: { n: 3 } }, { id: 'no data' }, 'not an object'];
  const listen = (read: ListenRecord['read'], groups: ('to' | 'until')[]): ListenRecord => ({
    to: {},
    read,
    events: events.map((event, position) => ({ event, group: groups[position] ?? 'to', filter: 0, correlation: {}, position })),
    expected: {},
    since: 0,
  });
  assert.deepEqual(listenOutput(listen('data', [])), [{ n: 1 }, 'AAE=', { n: 3 }, null, null]);
  assert.deepEqual(listenOutput(listen('raw', [])), [{ n: 1 }, 'AAE=', { n: 3 }, null, null]);
  assert.deepEqual(listenOutput(listen('envelope', [])), events);
  assert.deepEqual(listenOutput(listen('data', ['to', 'until', 'to'])), [{ n: 1 }, { n: 3 }, null, null], 'until events are not output');
  assert.deepEqual(listenOutput(listen('data', []), 2), [{ n: 1 }, 'AAE='], 'the first two');
  assert.deepEqual(listenOutput(listen('data', ['until']), 2), ['AAE=']);
  assert.deepEqual(readEvent({ data: 0, data_base64: 'AA==' }, 'data'), 0, 'data, even falsy, before data_base64');
  assert.deepEqual(readEvent({ data: null, data_base64: 'AA==' }, 'data'), 'AA==');
  assert.deepEqual(readEvent({ data: 'x' }, 'envelope'), { data: 'x' });
  assert.deepEqual(readEvent(null, 'raw'), null);
  assert.deepEqual(readEvent([1], 'data'), null, 'an array has no data');
});

test('the lease: acquired at the next epoch, renewed and released only at the current one; a release frees it, the epoch stays', () => {
  const record = fold([started]);
  const acquired = (epoch: number, worker = 'w1', untilMs = 5000): WorkflowEvent => ({ type: 'lease-acquired', v: 1, worker, epoch, untilMs });
  const held = apply(record, acquired(1));
  assert.deepEqual([held.lease, held.leaseEpoch], [{ worker: 'w1', epoch: 1, untilMs: 5000 }, 1]);
  refused(record, [acquired(2)], 'an epoch skipped');
  refused(record, [acquired(0)], 'epoch 0');
  refused(held, [acquired(1, 'w2')], 'an epoch taken twice');
  const renewed = apply(held, { type: 'lease-renewed', v: 1, epoch: 1, untilMs: 8000 });
  assert.deepEqual([renewed.lease, renewed.leaseEpoch], [{ worker: 'w1', epoch: 1, untilMs: 8000 }, 1]);
  const taken = apply(renewed, acquired(2, 'w2', 9000));
  assert.deepEqual([taken.lease, taken.leaseEpoch], [{ worker: 'w2', epoch: 2, untilMs: 9000 }, 2], 'a takeover');
  refused(taken, [{ type: 'lease-renewed', v: 1, epoch: 1, untilMs: 9500 }], 'a renewal of an earlier epoch');
  refused(taken, [{ type: 'lease-released', v: 1, epoch: 1 }], 'a release of an earlier epoch');
  const released = apply(taken, { type: 'lease-released', v: 1, epoch: 2 });
  assert.deepEqual([released.lease, released.leaseEpoch], [null, 2]);
  refused(released, [{ type: 'lease-renewed', v: 1, epoch: 2, untilMs: 9500 }], 'a renewal of a free lease');
  refused(released, [{ type: 'lease-released', v: 1, epoch: 2 }], 'a release of a free lease');
  refused(record, [{ type: 'lease-released', v: 1, epoch: 0 }], 'a release before any lease');
  assert.deepEqual(apply(released, acquired(3, 'w3')).lease, { worker: 'w3', epoch: 3, untilMs: 5000 });
});

test('an external call started: how many times, under the epoch of its latest start', () => {
  const record = fold([started], [{ type: 'call-started', v: 1, at: 'c', epoch: 1 }]);
  assert.deepEqual(record.calls, { c: { epoch: 1, starts: 1 } });
  const again = apply(record, { type: 'call-started', v: 1, at: 'c', epoch: 3 }, { type: 'call-started', v: 1, at: 'd', epoch: 3 });
  assert.deepEqual(again.calls, { c: { epoch: 3, starts: 2 }, d: { epoch: 3, starts: 1 } });
});

test("the instance's end: completed with its output, faulted with its error, or cancelled with its reason, at the commit instant; ended once", () => {
  const record = fold([started], [taskStarted('/do/0/a')]);
  const completed = apply(record, { type: 'workflow-completed', v: 1, output: { total: 3 } });
  const changed = (ended: WorkflowRecord) => ({ revision: ended.revision, lastAppliedAtMs: ended.lastAppliedAtMs });
  assert.deepEqual(completed, { ...record, ...changed(completed), status: 'completed', output: { total: 3 }, endedAtMs: 1003 });
  const faulted = apply(record, { type: 'workflow-faulted', v: 1, error: fault });
  assert.deepEqual(faulted, { ...record, ...changed(faulted), status: 'faulted', error: fault, endedAtMs: 1003 });
  const cancelled = apply(record, { type: 'workflow-cancelled', v: 1, reason: 'r' });
  assert.deepEqual(cancelled, { ...record, ...changed(cancelled), status: 'cancelled', cancelReason: 'r', endedAtMs: 1003 });
  for (const ended of [completed, faulted, cancelled]) {
    assert.equal(isWorkflowFinished(ended), true);
    refused(ended, [{ type: 'workflow-cancelled', v: 1, reason: 'again' }], `${ended.status}, then cancelled`);
    refused(ended, [taskCompleted('/do/0/a', 1)], `${ended.status}, then a task's end`);
  }
  assert.equal(isWorkflowFinished(record), false);
});

test('the due instant: the earliest armed timer of a running instance later than the instant asked after; fired timers and ended instances have none', () => {
  assert.equal(workflowTimeoutKey, '@workflow-timeout');
  assert.equal(taskTimeoutKey('/do/0/a'), '/do/0/a@timeout');
  const set = (at: string, dueAtMs: number): WorkflowEvent => ({ type: 'timer-set', v: 1, at, dueAtMs, purpose: 'wait' });
  const record = fold([started], [set('t1', 5000), set('t2', 3000), set('t3', 4000)], [{ type: 'timer-fired', v: 1, at: 't2' }]);
  assert.equal(nextWorkflowDueMs(record), 4000, 't2 fired');
  assert.equal(nextWorkflowDueAfterMs(record, 3999), 4000);
  assert.equal(nextWorkflowDueAfterMs(record, 4000), 5000, 'strictly later');
  assert.equal(nextWorkflowDueAfterMs(record, 5000), undefined);
  assert.equal(nextWorkflowDueMs(fold([started], [set('t1', 5000), set('t3', 4000), set('t4', 4500)])), 4000, 'the earliest, not the last set');
  assert.equal(nextWorkflowDueMs(fold([started])), undefined, 'no timer');
  assert.equal(nextWorkflowDueMs(apply(record, { type: 'workflow-cancelled', v: 1, reason: 'r' })), undefined, 'ended: its timers are never due');
});
