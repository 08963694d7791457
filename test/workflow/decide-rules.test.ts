/**
 * The workflow deciders' rules (src/workflow/exec/decide.ts) on records folded from logs built
 * here, without an executor: given an instance's log and a proposal (or the due instant, the
 * disposals found, a cancel), the transition decided (its events as written, its time guard, its
 * causation) or nothing. A decided transition is also folded onto its record where what it writes
 * matters, so the fold takes it and the record holds the values the executor meant. aggregate.test
 * and steps.test run the same rules through the fold and an executor; this file pins each of them
 * alone, and runs first in the mutation run.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonValue } from '../../src/contract/json.js';
import type { Stored } from '../../src/kernel/types.js';
import { decideCancel, decideDefectFault, decideDisposals, decideDue, decideProposal, timeoutError, type Proposal } from '../../src/workflow/exec/decide.js';
import { errorTypes } from '../../src/workflow/exec/dsl-errors.js';
import type { ChildDisposed, SubworkflowDisposed, ValueRef, WorkflowEvent, WorkflowTransition } from '../../src/workflow/exec/events.js';
import { applyWorkflow, foldWorkflow, type WorkflowRecord } from '../../src/workflow/exec/record.js';
import { childBound, childDisposed, subworkflowBound, subworkflowDisposed } from './child-events.js';
import { bareStarted } from './support.js';

const open = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
const started = bareStarted({ deadlineMs: null });

const stored = (revision: number, events: WorkflowEvent[], committedAtMs = 1000): Stored<WorkflowTransition> => ({
  revision: String(revision),
  committedAtMs,
  transition: { events, timeGuard: open, causation: { command: 'test' } },
});

/** The record of a log: `first` (the start), then each event as a transition of its own. */
function given(first: WorkflowEvent, ...events: WorkflowEvent[]): WorkflowRecord {
  const record = foldWorkflow([first, ...events].map((event, index) => stored(index + 1, [event])));
  assert.ok(record);
  return record;
}

/** The record with a decided transition folded onto it. */
function folded(record: WorkflowRecord, transition: WorkflowTransition | undefined): WorkflowRecord {
  assert.ok(transition, 'a transition was decided');
  const next = applyWorkflow(record, stored(Number(record.revision) + 1, transition.events));
  assert.ok(next);
  return next;
}

const proposal = (events: WorkflowEvent[], extra: Partial<Proposal> = {}): Proposal => ({ command: 'c', events, ...extra });
/** The events decideProposal writes for `events` on `record` (undefined: nothing decided). */
const written = (record: WorkflowRecord, ...events: WorkflowEvent[]) => decideProposal(record, proposal(events), false)?.events;

const taskStarted = (at: string, input: JsonValue = {}): WorkflowEvent => ({ type: 'task-started', v: 1, at, ref: at, name: 'a', input });
const taskCompleted = (at: string, output: JsonValue): WorkflowEvent => ({ type: 'task-completed', v: 1, at, output });
const completed: WorkflowEvent = { type: 'workflow-completed', v: 1, output: null };

test('a proposal to an instance that is not running decides nothing; a retry as late decides its late alternative, or nothing without one', () => {
  const ended = given(started, completed);
  assert.equal(decideProposal(ended, proposal([{ type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } }]), false), undefined);
  const record = given(started, taskStarted('/do/0/a'));
  const fault: WorkflowEvent = { type: 'task-faulted', v: 1, at: '/do/0/a', error: { type: 't', status: 408 } };
  const completion = proposal([taskCompleted('/do/0/a', 1)], { notAfterMs: 500, late: proposal([fault], { command: 'late' }) });
  assert.deepEqual(decideProposal(record, completion, true), { events: [fault], timeGuard: open, causation: { command: 'late' } });
  assert.equal(decideProposal(record, proposal([taskCompleted('/do/0/a', 1)]), true), undefined, 'no late alternative');
  assert.equal(decideProposal(ended, completion, true), undefined, 'a finished instance takes no late alternative either');
});

/** One event of each type the record can reflect (decide.ts `reflected`). */
const waitSet = (at: string): WorkflowEvent => ({ type: 'timer-set', v: 1, at, dueAtMs: 5000, purpose: 'wait' });
const timerFired = (at: string): WorkflowEvent => ({ type: 'timer-fired', v: 1, at });
const stepped = (type: 'expression-evaluated' | 'call-answered', at: string): WorkflowEvent => ({ type, v: 1, at, result: { ok: 1 } });
const forkWon = (at: string): WorkflowEvent => ({ type: 'fork-won', v: 1, at, branch: 0 });
const listenStarted = (at: string): WorkflowEvent => ({ type: 'listen-started', v: 1, at, to: { one: {} }, read: 'data' });
const callStarted = (at: string, epoch: number): WorkflowEvent => ({ type: 'call-started', v: 1, at, epoch });
/** A log holding one event of each type the record can reflect. */
const reflecting = given(
  started,
  taskStarted('/do/0/a'),
  taskStarted('/do/0/b'),
  taskCompleted('/do/0/b', 1),
  stepped('expression-evaluated', 'e1'),
  stepped('call-answered', 'c1'),
  childBound,
  subworkflowBound,
  waitSet('t1'),
  waitSet('t2'),
  timerFired('t2'),
  forkWon('f1'),
  taskStarted('/do/4/l'),
  listenStarted('/do/4/l'),
  callStarted('c9', 1),
);

test('each event the record already reflects is dropped from a proposal, each it does not is kept: event type by event type', () => {
  const record = reflecting;
  const kept = (event: WorkflowEvent, why: string) => assert.deepEqual(written(record, event), [event], `${event.type} kept: ${why}`);
  const dropped = (event: WorkflowEvent, why: string) => assert.equal(written(record, event), undefined, `${event.type} dropped: ${why}`);
  dropped(taskStarted('/do/0/a'), 'the task started');
  kept(taskStarted('/do/0/z'), 'no such task');
  dropped(taskCompleted('/do/0/b', 1), 'the task ended');
  kept(taskCompleted('/do/0/a', 1), 'the task runs');
  kept(taskCompleted('/do/0/z', 1), 'no such task');
  dropped({ type: 'task-faulted', v: 1, at: '/do/0/b', error: { type: 't', status: 500 } }, 'the task ended');
  kept({ type: 'task-faulted', v: 1, at: '/do/0/a', error: { type: 't', status: 500 } }, 'the task runs');
  dropped({ type: 'task-cancelled', v: 1, at: '/do/0/b', reason: 'r' }, 'the task ended');
  kept({ type: 'task-cancelled', v: 1, at: '/do/0/a', reason: 'r' }, 'the task runs');
  dropped(stepped('expression-evaluated', 'e1'), 'the step recorded');
  kept(stepped('expression-evaluated', 'e2'), 'no such step');
  dropped(stepped('call-answered', 'c1'), 'the answer recorded');
  kept(stepped('call-answered', 'c2'), 'no such answer');
  dropped(childBound, 'the child bound');
  kept({ ...childBound, at: '/do/1/d' } as WorkflowEvent, 'no child there');
  dropped(subworkflowBound, 'the child instance bound');
  kept({ ...subworkflowBound, at: '/do/2/t' } as WorkflowEvent, 'no child instance there');
  kept(childDisposed, 'the child bound, not disposed');
  kept(subworkflowDisposed, 'the child instance bound, not disposed');
  dropped(waitSet('t1'), 'the timer set');
  kept(waitSet('t3'), 'no such timer');
  kept(timerFired('t1'), 'the timer armed');
  dropped(timerFired('t2'), 'the timer fired');
  dropped(forkWon('f1'), 'the fork won');
  kept(forkWon('f2'), 'no winner there');
  dropped(listenStarted('/do/4/l'), 'the listen started');
  kept(listenStarted('/do/0/a'), 'no listen there');
  dropped(callStarted('c9', 1), 'the call started under that epoch');
  kept(callStarted('c9', 2), 'the call started under another epoch');
  kept(callStarted('c8', 1), 'no such call');
  kept(completed, 'an instance end is never reflected by a running record');
  // Disposed: the disposal is reflected.
  const disposed = folded(record, decideProposal(record, proposal([childDisposed, subworkflowDisposed]), false));
  assert.equal(written(disposed, childDisposed), undefined, 'child-disposed dropped: the child disposed');
  assert.equal(written(disposed, subworkflowDisposed), undefined, 'subworkflow-disposed dropped: the child instance disposed');
  // Only the reflected events of a proposal are dropped, in their order.
  assert.deepEqual(written(record, taskStarted('/do/0/a'), stepped('expression-evaluated', 'e2'), stepped('expression-evaluated', 'e1'), waitSet('t3')), [
    stepped('expression-evaluated', 'e2'),
    waitSet('t3'),
  ]);
});

test("a proposal's time guard: no earlier than its notBeforeMs, before the earlier of its notAfterMs and the deadline; a window the deadline closes decides nothing", () => {
  const step: WorkflowEvent = { type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } };
  const guard = (record: WorkflowRecord, extra: Partial<Proposal>) => decideProposal(record, proposal([step], extra), false)?.timeGuard;
  const unbounded = given(started);
  assert.deepEqual(guard(unbounded, {}), open, 'no deadline, no bounds');
  assert.deepEqual(guard(unbounded, { notBeforeMs: 300, notAfterMs: 700 }), { notBeforeMs: 300, notAfterMs: 700 });
  const bounded = given(bareStarted({ deadlineMs: 10_000 }));
  assert.deepEqual(guard(bounded, {}), { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: 10_000 }, 'the deadline');
  assert.deepEqual(guard(bounded, { notAfterMs: 500 }), { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: 500 }, 'a bound before the deadline');
  assert.deepEqual(guard(bounded, { notAfterMs: 20_000 }), { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: 10_000 }, 'a bound past the deadline');
  assert.deepEqual(guard(bounded, { notBeforeMs: 9_999 }), { notBeforeMs: 9_999, notAfterMs: 10_000 }, 'the last instant before the deadline');
  assert.equal(guard(bounded, { notBeforeMs: 10_000 }), undefined, 'a window that opens at the deadline is closed');
  assert.equal(guard(unbounded, { notBeforeMs: 500, notAfterMs: 500 }), undefined, 'a window that closes as it opens');
  assert.deepEqual(decideProposal(bounded, proposal([step]), false)?.causation, { command: 'c' }, "the proposal's command");
});

/** The workflow's completion, its output and where that output was recorded. */
const end = (value: JsonValue, from: ValueRef): WorkflowEvent => ({ type: 'workflow-completed', v: 1, output: value, outputFrom: from });

test("a task's output names an earlier task's completion where it holds that very value, in the record or earlier in the transition; a task that did not complete holds no such value", () => {
  const output = { n: 1 };
  const record = given(started, taskStarted('/do/0/a'), taskCompleted('/do/0/a', output), taskStarted('/do/1/b'), taskStarted('/do/2/x'));
  const held = record.tasks['/do/0/a']?.output as JsonValue;
  assert.deepEqual(
    written(record, end(held, { task: '/do/0/a' })),
    [{ type: 'workflow-completed', v: 1, outputFrom: { task: '/do/0/a' } }],
    'the record holds it',
  );
  assert.deepEqual(written(record, end({ n: 1 }, { task: '/do/0/a' })), [{ type: 'workflow-completed', v: 1, output: { n: 1 } }], 'an equal value');
  assert.deepEqual(written(record, end(held, { task: '/do/1/b' })), [{ type: 'workflow-completed', v: 1, output: held }], 'a running task');
  const faulted = folded(record, decideProposal(record, proposal([{ type: 'task-faulted', v: 1, at: '/do/1/b', error: { type: 't', status: 500 } }]), false));
  assert.deepEqual(written(faulted, end(null, { task: '/do/1/b' })), [{ type: 'workflow-completed', v: 1, output: null }], 'a faulted task holds no output');
  // Earlier in the same transition: a completion in full, and one that names a step of that transition.
  const fresh = { m: 2 };
  assert.deepEqual(written(record, taskCompleted('/do/1/b', fresh), end(fresh, { task: '/do/1/b' })), [
    taskCompleted('/do/1/b', fresh),
    { type: 'workflow-completed', v: 1, outputFrom: { task: '/do/1/b' } },
  ]);
  const step: WorkflowEvent = { type: 'call-answered', v: 1, at: '/do/1/b>invoke', result: { ok: fresh } };
  const named: WorkflowEvent = { type: 'task-completed', v: 1, at: '/do/1/b', output: fresh, outputFrom: { step: '/do/1/b>invoke' } };
  assert.deepEqual(written(record, step, named, end(fresh, { task: '/do/1/b' })), [
    step,
    { type: 'task-completed', v: 1, at: '/do/1/b', outputFrom: { step: '/do/1/b>invoke' } },
    { type: 'workflow-completed', v: 1, outputFrom: { task: '/do/1/b' } },
  ]);
  // A completion of that transition written in full (the value it named was another): the later reference is to what it wrote.
  const copy = { m: 2 };
  const namedCopy: WorkflowEvent = { type: 'task-completed', v: 1, at: '/do/1/b', output: copy, outputFrom: { step: '/do/1/b>invoke' } };
  assert.deepEqual(written(record, step, namedCopy, end(copy, { task: '/do/1/b' })), [
    step,
    { type: 'task-completed', v: 1, at: '/do/1/b', output: copy },
    { type: 'workflow-completed', v: 1, outputFrom: { task: '/do/1/b' } },
  ]);
  // The latest completion of that task before the reference is the one named, not a later one.
  const other = { m: 3 };
  assert.deepEqual(written(record, taskCompleted('/do/1/b', fresh), end(fresh, { task: '/do/1/b' }), taskCompleted('/do/2/x', other))?.at(1), {
    type: 'workflow-completed',
    v: 1,
    outputFrom: { task: '/do/1/b' },
  });
  assert.deepEqual(
    written(record, taskCompleted('/do/2/x', other), end(fresh, { task: '/do/1/b' }))?.at(1),
    { type: 'workflow-completed', v: 1, output: fresh },
    'another task',
  );
  assert.deepEqual(
    written(record, taskCompleted('/do/2/x', other), end(other, { task: '/do/1/b' }))?.at(1),
    { type: 'workflow-completed', v: 1, output: other },
    "another task's completion holds that very value: the task named does not",
  );
  assert.deepEqual(written(record, end(null, { task: '/do/1/b' })), [{ type: 'workflow-completed', v: 1, output: null }], 'a running task (its output null)');
  assert.deepEqual(written(record, end(null, { task: '/do/9/none' })), [{ type: 'workflow-completed', v: 1, output: null }], 'no such task');
  // Each transition written is one the fold takes, and the record holds the value meant.
  for (const events of [
    [taskCompleted('/do/1/b', fresh), end(fresh, { task: '/do/1/b' })],
    [step, named, end(fresh, { task: '/do/1/b' })],
  ]) {
    assert.deepEqual(folded(record, decideProposal(record, proposal(events), false)).output, fresh);
  }
});

test("a step's result is named where the record, or an earlier step of the transition, holds that very value; a step's error holds none; a reference proposed alone is written as it is", () => {
  // A step the record holds, named after another step of the transition: the one named is the one compared.
  const answered = given(started, taskStarted('/do/0/a'), { type: 'call-answered', v: 1, at: 'r', result: { ok: { m: 2 } } });
  const held2 = (answered.steps.r as { ok: JsonValue }).ok;
  const later: WorkflowEvent = { type: 'expression-evaluated', v: 1, at: 'q', result: { ok: 7 } };
  assert.deepEqual(written(answered, later, end(held2, { step: 'r' })), [later, { type: 'workflow-completed', v: 1, outputFrom: { step: 'r' } }]);
  // An event proposed with its reference alone is written as it is (there is no value to compare).
  const alone: WorkflowEvent[] = [
    { type: 'task-started', v: 1, at: '/do/5/c', ref: '/do/5/c', name: 'c', inputFrom: { step: 'r' } },
    { type: 'task-completed', v: 1, at: '/do/5/c', outputFrom: { step: 'r' } },
    { type: 'workflow-completed', v: 1, outputFrom: { step: 'r' } },
  ];
  assert.deepEqual(written(answered, ...alone), alone);
  // A step that recorded an error holds no value: in the record, and earlier in the transition.
  const failed = given(started, taskStarted('/do/0/a'), { type: 'call-answered', v: 1, at: 's', result: { error: { type: 't', status: 500 } } });
  const endStep = (value: JsonValue, at: string) => end(value, { step: at });
  assert.deepEqual(written(failed, endStep(null, 's')), [{ type: 'workflow-completed', v: 1, output: null }]);
  const erred: WorkflowEvent = { type: 'expression-evaluated', v: 1, at: 'e', result: { error: { type: 't', status: 500 } } };
  assert.deepEqual(written(failed, erred, endStep(null, 'e')), [erred, { type: 'workflow-completed', v: 1, output: null }]);
});

test("a listen's completion names its events where the record holds them and they equal its output; an event it takes in the same transition, a listen never started or another output is written in full", () => {
  const cloudEvent = (id: string, data: JsonValue): JsonValue => ({ specversion: '1.0', id, source: 's', type: 't', data });
  const took = (at: string, id: string, data: JsonValue): WorkflowEvent => ({
    type: 'listen-event-received',
    v: 1,
    at,
    event: cloudEvent(id, data),
    group: 'to',
    filter: 0,
    correlation: {},
  });
  const record = given(
    started,
    taskStarted('/do/0/w'),
    { type: 'listen-started', v: 1, at: '/do/0/w', to: { one: {} }, read: 'data' },
    took('/do/0/w', 'e1', { x: 1 }),
    taskStarted('/do/1/v'),
    { type: 'listen-started', v: 1, at: '/do/1/v', to: { one: {} }, read: 'data' },
  );
  const done = (at: string, output: JsonValue, listen = at): WorkflowEvent => ({ type: 'task-completed', v: 1, at, output, outputFrom: { listen } });
  const named = (at: string, listen = at): WorkflowEvent => ({ type: 'task-completed', v: 1, at, outputFrom: { listen } });
  assert.deepEqual(written(record, done('/do/0/w', [{ x: 1 }])), [named('/do/0/w')], 'equal as JSON: a list built anew is never the same object');
  assert.deepEqual(written(record, done('/do/0/w', [{ x: 2 }])), [taskCompleted('/do/0/w', [{ x: 2 }])], 'another output');
  assert.deepEqual(written(record, done('/do/0/w', [{ x: 1 }], '/do/9/none')), [taskCompleted('/do/0/w', [{ x: 1 }])], 'no listen there');
  const second = took('/do/0/w', 'e2', { x: 2 });
  assert.deepEqual(
    written(record, second, done('/do/0/w', [{ x: 1 }, { x: 2 }])),
    [second, taskCompleted('/do/0/w', [{ x: 1 }, { x: 2 }])],
    'an event taken in the transition',
  );
  // The record holds [{x: 1}] before the transition; its event is folded before the reference, which would then name [{x: 1}, {x: 2}].
  assert.deepEqual(
    written(record, second, done('/do/0/w', [{ x: 1 }])),
    [second, taskCompleted('/do/0/w', [{ x: 1 }])],
    'equal to what the record held before',
  );
  const elsewhere = took('/do/1/v', 'e3', { y: 1 });
  assert.deepEqual(written(record, elsewhere, done('/do/0/w', [{ x: 1 }])), [elsewhere, named('/do/0/w')], "another listen's event");
  assert.deepEqual(written(record, done('/do/0/w', [{ x: 1 }]), took('/do/0/w', 'e5', { x: 3 }))?.at(0), named('/do/0/w'), 'an event after the reference');
  // What is written folds to the output meant.
  for (const events of [[done('/do/0/w', [{ x: 1 }])], [second, done('/do/0/w', [{ x: 1 }, { x: 2 }])], [second, done('/do/0/w', [{ x: 1 }])]]) {
    const output = (events.at(-1) as { output: JsonValue }).output;
    assert.deepEqual(folded(record, decideProposal(record, proposal(events), false)).tasks['/do/0/w']?.output, output);
  }
});

test('due: every armed timer whose instant has come fires, no earlier than the latest of them; a running task faults at its timeout, the instance at its own', () => {
  const timerSet = (at: string, dueAtMs: number, purpose: 'wait' | 'task-timeout'): WorkflowEvent => ({ type: 'timer-set', v: 1, at, dueAtMs, purpose });
  const fired = (at: string): WorkflowEvent => ({ type: 'timer-fired', v: 1, at });
  // The workflow's timeout (5 s from the start's commit at 1000) is armed by the start itself.
  const record = given(
    bareStarted({ timeoutMs: 5000 }),
    taskStarted('/do/0/a'),
    timerSet('/do/0/a@timeout', 3000, 'task-timeout'),
    timerSet('w1', 2000, 'wait'),
    timerSet('w0', 1500, 'wait'),
    fired('w0'),
    taskStarted('/do/1/b'),
    taskCompleted('/do/1/b', 1),
    timerSet('/do/1/b@timeout', 2500, 'task-timeout'),
    timerSet('/do/7/z@timeout', 2500, 'task-timeout'),
  );
  const due = (nowMs: number) => decideDue(record, nowMs);
  // The instance's own timeout cancels a task still running that no timeout of its own faults now.
  const waiting = given(bareStarted({ timeoutMs: 5000 }), taskStarted('/do/2/c'));
  assert.deepEqual(decideDue(waiting, 6000)?.events, [
    fired('@workflow-timeout'),
    { type: 'task-cancelled', v: 1, at: '/do/2/c', reason: 'the workflow timed out' },
    { type: 'workflow-faulted', v: 1, error: timeoutError('/', 'workflow w') },
  ]);
  assert.equal(folded(waiting, decideDue(waiting, 6000)).tasks['/do/2/c']?.state, 'cancelled');
  const taskTimedOut: WorkflowEvent = { type: 'task-faulted', v: 1, at: '/do/0/a', error: timeoutError('/do/0/a', 'task a') };
  assert.deepEqual(taskTimedOut.error, { type: errorTypes.timeout, status: 408, title: 'Timeout', detail: 'task a timed out', instance: '/do/0/a' });
  assert.equal(due(1999), undefined, 'nothing due yet; a fired timer does not fire again');
  assert.deepEqual(due(2000), {
    events: [fired('w1')],
    timeGuard: { notBeforeMs: 2000, notAfterMs: Number.MAX_SAFE_INTEGER },
    causation: { command: 'timers-due' },
  });
  assert.deepEqual(
    due(2999)?.events,
    [fired('w1'), fired('/do/1/b@timeout'), fired('/do/7/z@timeout')],
    'an ended task, or one not recorded, does not fault at its timeout',
  );
  assert.deepEqual(due(2999)?.timeGuard.notBeforeMs, 2500, 'the latest instant among those fired');
  assert.deepEqual(due(3000)?.events, [fired('/do/0/a@timeout'), taskTimedOut, fired('w1'), fired('/do/1/b@timeout'), fired('/do/7/z@timeout')]);
  assert.deepEqual(due(3000)?.timeGuard.notBeforeMs, 3000);
  assert.deepEqual(due(6000), {
    events: [
      fired('@workflow-timeout'),
      fired('/do/0/a@timeout'),
      taskTimedOut,
      fired('w1'),
      fired('/do/1/b@timeout'),
      fired('/do/7/z@timeout'),
      { type: 'workflow-faulted', v: 1, error: timeoutError('/', 'workflow w') },
    ],
    timeGuard: { notBeforeMs: 6000, notAfterMs: Number.MAX_SAFE_INTEGER },
    causation: { command: 'timers-due' },
  });
  // Folded: the task and the instance faulted, every timer fired.
  const after = folded(record, due(6000));
  assert.equal(after.status, 'faulted');
  assert.equal(after.tasks['/do/0/a']?.state, 'faulted');
  assert.equal(decideDue(after, 9000), undefined, 'an ended instance has nothing due');
  assert.equal(decideDue(folded(record, decideCancel(record, 'stop')), 6000), undefined, 'a cancelled instance fires none of its armed timers');
  // A task faulted before its timeout fires: the timer fires, nothing else.
  const faulted = folded(record, decideProposal(record, proposal([{ type: 'task-faulted', v: 1, at: '/do/0/a', error: { type: 't', status: 500 } }]), false));
  assert.deepEqual(decideDue(faulted, 3000)?.events, [fired('/do/0/a@timeout'), fired('w1'), fired('/do/1/b@timeout'), fired('/do/7/z@timeout')]);
});

test("due: a task's timeout cancels every task execution still running inside it, the last started first, in the transition that faults it; one its own timeout faults then is faulted, one ended or outside it is left", () => {
  const timerSet = (at: string): WorkflowEvent => ({ type: 'timer-set', v: 1, at: `${at}@timeout`, dueAtMs: 3000, purpose: 'task-timeout' });
  const fired = (at: string): WorkflowEvent => ({ type: 'timer-fired', v: 1, at: `${at}@timeout` });
  const [t, a, b, c, d] = [
    '/do/0/t',
    '/do/0/t/fork/branches/0/a',
    '/do/0/t/fork/branches/1/b',
    '/do/0/t/fork/branches/1/b/do/0/c',
    '/do/0/t/fork/branches/2/d',
  ];
  const record = given(
    started,
    taskStarted('/do/1/u'),
    taskStarted(t),
    timerSet(t),
    taskStarted(a),
    taskStarted(b),
    taskStarted(c),
    timerSet(c),
    taskStarted(d),
    taskCompleted(d, 1),
    taskStarted('/do/0/tt'),
  );
  const cancelled = (at: string): WorkflowEvent => ({ type: 'task-cancelled', v: 1, at, reason: `task a (${t}) timed out` });
  assert.deepEqual(decideDue(record, 3000)?.events, [
    fired(t),
    { type: 'task-faulted', v: 1, at: t, error: timeoutError(t, 'task a') },
    fired(c),
    { type: 'task-faulted', v: 1, at: c, error: timeoutError(c, 'task a') },
    cancelled(b),
    cancelled(a),
  ]);
  const after = folded(record, decideDue(record, 3000));
  assert.deepEqual(Object.fromEntries(Object.entries(after.tasks).map(([at, task]) => [at, task.state])), {
    '/do/1/u': 'running',
    [t]: 'faulted',
    [a]: 'cancelled',
    [b]: 'cancelled',
    [c]: 'faulted',
    [d]: 'completed',
    '/do/0/tt': 'running',
  });
  // With the workflow's own timeout: each task ended once, by the first that ends it.
  const both = given(bareStarted({ timeoutMs: 2000 }), taskStarted(t), timerSet(t), taskStarted(a), taskStarted('/do/1/u'));
  assert.deepEqual(decideDue(both, 3000)?.events, [
    { type: 'timer-fired', v: 1, at: '@workflow-timeout' },
    fired(t),
    { type: 'task-faulted', v: 1, at: t, error: timeoutError(t, 'task a') },
    cancelled(a),
    { type: 'task-cancelled', v: 1, at: '/do/1/u', reason: 'the workflow timed out' },
    { type: 'workflow-faulted', v: 1, error: timeoutError('/', 'workflow w') },
  ]);
});

test("disposals: each child instance's or child operation's disposition the record does not hold, for the one bound there, running or ended; unguarded, subworkflows-disposed", () => {
  const bound = (at: string, instanceId: string): WorkflowEvent => ({
    type: 'subworkflow-bound',
    v: 1,
    at,
    ref: at,
    instanceId,
    invocationKey: `k-${instanceId}`,
    workflow: 'sub',
    iterations: [],
    attempt: 1,
  });
  const disposal = (at: string, instanceId: string): SubworkflowDisposed => ({
    type: 'subworkflow-disposed',
    v: 1,
    at,
    instanceId,
    by: '/',
    disposition: 'cancelled',
    detail: 'the parent ended',
  });
  const running = given(started, bound('/do/0/s', 'child-1'), bound('/do/1/t', 'child-2'));
  const ended = folded(running, decideCancel(running, 'stop'));
  for (const record of [running, ended]) {
    assert.deepEqual(decideDisposals(record, [disposal('/do/0/s', 'child-1'), disposal('/do/1/t', 'child-9'), disposal('/do/2/u', 'child-3')]), {
      events: [disposal('/do/0/s', 'child-1')],
      timeGuard: { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER },
      causation: { command: 'subworkflows-disposed' },
    });
    assert.equal(decideDisposals(record, []), undefined);
    assert.equal(decideDisposals(record, [disposal('/do/1/t', 'child-9')]), undefined, 'another instance than the one bound there');
    const disposed = folded(record, decideDisposals(record, [disposal('/do/0/s', 'child-1')]));
    assert.equal(decideDisposals(disposed, [disposal('/do/0/s', 'child-1')]), undefined, 'disposed once');
    assert.deepEqual(decideDisposals(disposed, [disposal('/do/0/s', 'child-1'), disposal('/do/1/t', 'child-2')])?.events, [disposal('/do/1/t', 'child-2')]);
  }
  // A child operation's release (a timed-out task's, a stopped fork's), running or ended alike: for the operation bound there, once.
  const withCall = given(started, childBound);
  const release = childDisposed as ChildDisposed;
  for (const record of [withCall, folded(withCall, decideCancel(withCall, 'stop'))]) {
    assert.deepEqual(decideDisposals(record, [release])?.events, [release]);
    assert.equal(decideDisposals(record, [{ ...release, operationId: 'op-2' }]), undefined, 'another operation than the one bound there');
    assert.equal(decideDisposals(folded(record, decideDisposals(record, [release])), [release]), undefined, 'disposed once');
  }
});

test('a defect fault and a cancel end a running instance, unguarded, with their own error and command, its running tasks cancelled with it; an ended instance takes neither', () => {
  const record = given(
    bareStarted({ deadlineMs: 10_000 }),
    taskStarted('/do/0/a'),
    taskStarted('/do/0/a/do/0/b'),
    taskStarted('/do/1/c'),
    taskCompleted('/do/1/c', 1),
  );
  const unguarded = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
  const cancelledTasks = (reason: string): WorkflowEvent[] => [
    { type: 'task-cancelled', v: 1, at: '/do/0/a/do/0/b', reason },
    { type: 'task-cancelled', v: 1, at: '/do/0/a', reason },
  ];
  const fault = decideDefectFault(record);
  assert.deepEqual(fault?.timeGuard, unguarded, 'unguarded: past the deadline too');
  assert.deepEqual(fault?.causation, { command: 'defect-fault' });
  assert.deepEqual(fault?.events.slice(0, -1), cancelledTasks('the runtime stopped the instance'), 'the running tasks, the last started first');
  const event = fault?.events.at(-1);
  assert.ok(event?.type === 'workflow-faulted');
  assert.deepEqual(event.error, {
    type: errorTypes.runtime,
    status: 500,
    title: 'Internal error',
    detail: "the runtime could not record this instance's next step (it failed an internal check, a defect the runtime's log names) and stopped it",
    instance: '/',
  });
  assert.equal(folded(record, fault).status, 'faulted');
  assert.deepEqual(decideCancel(record, 'stop'), {
    events: [...cancelledTasks('the instance was cancelled'), { type: 'workflow-cancelled', v: 1, reason: 'stop' }],
    timeGuard: unguarded,
    causation: { command: 'cancel' },
  });
  const cancelled = folded(record, decideCancel(record, 'stop'));
  assert.equal(cancelled.status, 'cancelled');
  // An ended instance holds no task still running; the one that had completed stays completed.
  for (const ended of [cancelled, folded(record, fault)])
    assert.deepEqual(
      Object.entries(ended.tasks).map(([at, task]) => [at, task.state]),
      [
        ['/do/0/a', 'cancelled'],
        ['/do/0/a/do/0/b', 'cancelled'],
        ['/do/1/c', 'completed'],
      ],
    );
  for (const ended of [cancelled, folded(record, fault)]) {
    assert.equal(decideDefectFault(ended), undefined);
    assert.equal(decideCancel(ended, 'again'), undefined);
  }
});
