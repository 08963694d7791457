/**
 * The workflow aggregate's pure parts: the machines' derived tables agree with XState's own
 * transition(); the fold asserts illegal events; the deciders are idempotent and build the time
 * guards the design asks for; a void transition (guard missed on a guard-on-fold store) changes
 * nothing but the revision.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { AssertionFailure } from '../../src/contract/errors.js';
import { stepWithMachine } from '../../src/machines/table.js';
import type { Stored } from '../../src/kernel/types.js';
import { decideDue, decideProposal, taskTimeoutKey } from '../../src/workflow/exec/decide.js';
import { workflowTransitionProblem, workflowTransitionSchema, type WorkflowEvent, type WorkflowTransition } from '../../src/workflow/exec/events.js';
import { ajv } from '../../src/contract/validation.js';
import type { JsonValue } from '../../src/contract/json.js';
import {
  instanceEvents,
  instanceMachine,
  instanceStates,
  leaseEvents,
  leaseMachine,
  leaseStates,
  stepInstance,
  stepLease,
  stepTask,
  stepTimer,
  taskEvents,
  taskMachine,
  taskStates,
  timerEvents,
  timerMachine,
  timerStates,
} from '../../src/workflow/exec/machines.js';
import { applyWorkflow, foldWorkflow, nextWorkflowDueMs, type WorkflowRecord } from '../../src/workflow/exec/record.js';
import { workflowAggregate } from '../../src/workflow/exec/aggregate.js';
import { bareStarted } from './support.js';

const open = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
const started = bareStarted({ deadlineMs: 10_000 });
const stored = (revision: number, events: WorkflowEvent[], committedAtMs = 1000 + revision, timeGuard = open): Stored<WorkflowTransition> => ({
  revision: String(revision),
  committedAtMs,
  transition: { events, timeGuard, causation: { command: 'test' } },
});

test('the lease: a takeover is the next epoch; a renewal or release names the current one', () => {
  const acquired = (epoch: number, worker = 'w1'): WorkflowEvent => ({ type: 'lease-acquired', v: 1, worker, epoch, untilMs: 5000 });
  const record = foldWorkflow([stored(1, [started]), stored(2, [acquired(1)]), stored(3, [{ type: 'lease-renewed', v: 1, epoch: 1, untilMs: 6000 }])])!;
  assert.deepEqual(record.lease, { worker: 'w1', epoch: 1, untilMs: 6000 });
  const taken = applyWorkflow(record, stored(4, [acquired(2, 'w2')]))!;
  assert.deepEqual(taken.lease, { worker: 'w2', epoch: 2, untilMs: 5000 });
  assert.throws(() => applyWorkflow(record, stored(4, [acquired(1, 'w2')])), AssertionFailure, 'an epoch taken twice');
  assert.throws(() => applyWorkflow(taken, stored(5, [{ type: 'lease-renewed', v: 1, epoch: 1, untilMs: 9000 }])), AssertionFailure);
  const released = applyWorkflow(taken, stored(5, [{ type: 'lease-released', v: 1, epoch: 2 }]))!;
  assert.equal(released.lease, null);
  assert.throws(
    () => applyWorkflow(released, stored(6, [{ type: 'lease-renewed', v: 1, epoch: 2, untilMs: 9000 }])),
    AssertionFailure,
    'no renewal of a free lease',
  );
  assert.equal(applyWorkflow(released, stored(6, [acquired(3, 'w1')]))!.leaseEpoch, 3);
});

function base(): WorkflowRecord {
  return foldWorkflow([stored(1, [started]), stored(2, [{ type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', input: {} }])])!;
}

test('the derived tables take exactly the steps the XState machines take', () => {
  const cases = [
    [instanceMachine, instanceStates, instanceEvents, stepInstance],
    [taskMachine, taskStates, taskEvents, stepTask],
    [timerMachine, timerStates, timerEvents, stepTimer],
    [leaseMachine, leaseStates, leaseEvents, stepLease],
  ] as const;
  for (const [machine, states, events, step] of cases) {
    for (const state of states) {
      for (const event of events) {
        const expected = stepWithMachine(machine, state, event);
        const run = () => (step as (s: string, e: string) => string)(state, event);
        if (expected === undefined) assert.throws(run, AssertionFailure, `${machine.id}: ${event} in ${state}`);
        else assert.equal(run(), expected);
      }
    }
  }
});

test('the fold asserts what the machines refuse: a task ending twice, a timer firing unset, anything after the end', () => {
  const record = base();
  const done = applyWorkflow(record, stored(3, [{ type: 'task-completed', v: 1, at: '/do/0/a', output: 1 }]))!;
  assert.equal(done.tasks['/do/0/a']?.state, 'completed');
  assert.throws(() => applyWorkflow(done, stored(4, [{ type: 'task-faulted', v: 1, at: '/do/0/a', error: { type: 't', status: 500 } }])), AssertionFailure);
  assert.throws(() => applyWorkflow(record, stored(3, [{ type: 'timer-fired', v: 1, at: 'x' }])), AssertionFailure);
  const ended = applyWorkflow(done, stored(4, [{ type: 'workflow-completed', v: 1, output: 1 }]))!;
  assert.throws(() => applyWorkflow(ended, stored(5, [{ type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } }])), AssertionFailure);
  assert.throws(
    () =>
      applyWorkflow(
        record,
        stored(3, [
          { type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } },
          { type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 2 } },
        ]),
      ),
    AssertionFailure,
  );
});

test("a workflow timeout's deadline is an instant: one past 2^53 − 1 ms from its commit is held to it", () => {
  const timeoutMs = Number.MAX_SAFE_INTEGER - 1500;
  for (const committedAtMs of [1000, 1500, 1501, 1_800_000_000_000]) {
    const record = foldWorkflow([stored(1, [bareStarted({ timeoutMs })], committedAtMs)])!;
    assert.equal(record.started.deadlineMs, Math.min(committedAtMs + timeoutMs, Number.MAX_SAFE_INTEGER), String(committedAtMs));
    assert.ok(Number.isSafeInteger(record.started.deadlineMs), String(committedAtMs));
    assert.equal(nextWorkflowDueMs(record), record.started.deadlineMs, 'its timer is due then');
  }
});

test('a void transition (its guard missed at the stored stamp) changes nothing but the revision', () => {
  const record = base();
  const late = applyWorkflow(record, stored(3, [{ type: 'task-completed', v: 1, at: '/do/0/a', output: 1 }], 5000, { notBeforeMs: 0, notAfterMs: 4000 }))!;
  assert.equal(late.revision, '3');
  assert.deepEqual({ ...late, revision: record.revision }, record);
});

test('proposals are idempotent and end at the deadline; a late completion becomes its timeout fault', () => {
  const record = base();
  const proposal = { command: 'x', events: [{ type: 'expression-evaluated', v: 1, at: 'e', result: { ok: 1 } }] as WorkflowEvent[] };
  const first = decideProposal(record, proposal, false);
  assert.deepEqual(first?.timeGuard, { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: 10_000 }, 'every step commits before the deadline');
  const after = applyWorkflow(record, stored(3, first!.events))!;
  assert.equal(decideProposal(after, proposal, false), undefined, 'a recorded step is not appended again');
  const late = {
    command: 'late',
    events: [{ type: 'task-faulted', v: 1, at: '/do/0/a', error: { type: 't', status: 408 } }] as WorkflowEvent[],
    notBeforeMs: 500,
  };
  const completion = { command: 'c', events: [{ type: 'task-completed', v: 1, at: '/do/0/a', output: 1 }] as WorkflowEvent[], notAfterMs: 500, late };
  assert.deepEqual(decideProposal(record, completion, false)?.timeGuard, { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: 500 });
  assert.equal(decideProposal(record, completion, true)?.events[0]?.type, 'task-faulted');
  assert.equal(decideProposal(record, { ...proposal, notBeforeMs: 20_000 }, false), undefined, 'a window the deadline closes appends nothing');
});

test('an event names a recorded value only where the record, or an earlier event of its transition, holds that very value; else it writes the value', () => {
  const answer = { operationId: 'x', verdict: 'approve' };
  const record = applyWorkflow(base(), stored(3, [{ type: 'call-answered', v: 1, at: '/do/0/a>invoke', result: { ok: answer } }]))!;
  const held = record.steps['/do/0/a>invoke'];
  const value = held && 'ok' in held ? held.ok : null;
  const completion = (output: JsonValue, step: string): WorkflowEvent => ({ type: 'task-completed', v: 1, at: '/do/0/a', output, outputFrom: { step } });
  const decided = (events: WorkflowEvent[]) => decideProposal(record, { command: 'c', events }, false)?.events.at(-1);
  assert.deepEqual(decided([completion(value, '/do/0/a>invoke')]), { type: 'task-completed', v: 1, at: '/do/0/a', outputFrom: { step: '/do/0/a>invoke' } });
  assert.deepEqual(
    decided([completion({ ...answer }, '/do/0/a>invoke')]),
    { type: 'task-completed', v: 1, at: '/do/0/a', output: answer },
    'an equal value that is not the one recorded there is written',
  );
  assert.deepEqual(decided([completion(value, '/do/0/a>other')]), { type: 'task-completed', v: 1, at: '/do/0/a', output: answer }, 'nothing recorded there');
  const fresh = { n: 1 };
  assert.deepEqual(
    decided([{ type: 'expression-evaluated', v: 1, at: 'e', result: { ok: fresh } }, completion(fresh, 'e')]),
    { type: 'task-completed', v: 1, at: '/do/0/a', outputFrom: { step: 'e' } },
    'a value recorded earlier in the same transition',
  );
  // Whichever it writes, the record is the one the value in full gives.
  for (const events of [[completion(value, '/do/0/a>invoke')], [completion({ ...answer }, '/do/0/a>other')]]) {
    const transition = decideProposal(record, { command: 'c', events }, false)!;
    assert.equal(workflowTransitionProblem(transition), undefined);
    assert.deepEqual(applyWorkflow(record, stored(4, transition.events))?.tasks['/do/0/a']?.output, answer);
  }
  assert.throws(
    () => applyWorkflow(record, stored(4, [{ type: 'task-completed', v: 1, at: '/do/0/a', outputFrom: { task: '/do/9/none' } }])),
    AssertionFailure,
    'a reference to nothing recorded is refused by the fold',
  );
  assert.notEqual(
    workflowTransitionProblem({ events: [completion(value, '/do/0/a>invoke')], timeGuard: open, causation: { command: 'c' } }),
    undefined,
    'a value and a reference together fail the schema',
  );
});

test("the workflow's input is named, not written again, where an event carries that very value; the fold puts it back", () => {
  const input = { doc: 'RFC 9', pages: [1, 2] };
  const record = foldWorkflow([stored(1, [{ ...started, input } as WorkflowEvent])])!;
  const begun = (value: JsonValue): WorkflowEvent => ({
    type: 'task-started',
    v: 1,
    at: '/do/0/a',
    ref: '/do/0/a',
    name: 'a',
    input: value,
    inputFrom: { input: true },
  });
  const decided = (value: JsonValue) => decideProposal(record, { command: 'c', events: [begun(value)] }, false)?.events[0];
  assert.deepEqual(decided(record.started.input), { type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', inputFrom: { input: true } });
  assert.deepEqual(
    decided({ ...input }),
    { type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', input },
    'an equal value that is not the recorded input is written',
  );
  // Carried by the start itself (one transition), and appended after it: the same record as the input in full.
  const named: WorkflowEvent = { type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', inputFrom: { input: true } };
  const full: WorkflowEvent = { type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', input };
  assert.equal(
    workflowTransitionProblem({ events: [{ ...started, input } as WorkflowEvent, named], timeGuard: open, causation: { command: 'start' } }),
    undefined,
  );
  assert.deepEqual(
    foldWorkflow([stored(1, [{ ...started, input } as WorkflowEvent, named])]),
    foldWorkflow([stored(1, [{ ...started, input } as WorkflowEvent, full])]),
  );
  assert.deepEqual(applyWorkflow(record, stored(2, [named]))?.tasks['/do/0/a']?.input, input);
  assert.notEqual(
    workflowTransitionProblem({
      events: [{ ...named, inputFrom: { input: false } } as unknown as WorkflowEvent],
      timeGuard: open,
      causation: { command: 'c' },
    }),
    undefined,
    'the input is named by {input: true} alone',
  );
});

test('the record the check derives is exactly the one applying the stored transition gives, whatever instant and guard it was stored at (fast-check)', () => {
  const record = base();
  const transitions: WorkflowEvent[][] = [
    [{ type: 'task-completed', v: 1, at: '/do/0/a', output: { n: 1 } }],
    [
      { type: 'expression-evaluated', v: 1, at: '/do/1/b>set', result: { ok: 2 } },
      { type: 'task-started', v: 1, at: '/do/1/b', ref: '/do/1/b', name: 'b', input: {} },
      { type: 'timer-set', v: 1, at: '/do/1/b@timeout', dueAtMs: 9000, purpose: 'task-timeout' },
    ],
    [
      { type: 'task-completed', v: 1, at: '/do/0/a', output: 1 },
      { type: 'workflow-completed', v: 1, outputFrom: { task: '/do/0/a' } },
    ],
  ];
  fc.assert(
    fc.property(
      fc.constantFrom(...transitions),
      fc.integer({ min: 900, max: 1100 }),
      fc.integer({ min: -2, max: 2 }),
      fc.constantFrom(open, { notBeforeMs: 0, notAfterMs: 1000 }, { notBeforeMs: 1005, notAfterMs: open.notAfterMs }),
      (events, atMs, offsetMs, timeGuard) => {
        const transition: WorkflowTransition = { events, timeGuard, causation: { command: 'c' } };
        const after = workflowAggregate.check?.(record, transition, atMs);
        assert.ok(after);
        // The store stamps at the instant the kernel expected, or near it.
        const stamp = { revision: '3', committedAtMs: Math.max(atMs, record.lastAppliedAtMs) + offsetMs, transition };
        assert.deepEqual(after(stamp), applyWorkflow(record, stamp));
      },
    ),
    { numRuns: 500 },
  );
});

test('the event-by-event check of a transition accepts exactly what the whole schema accepts, and describes what it refuses (fast-check)', () => {
  const whole = ajv.compile(workflowTransitionSchema);
  const answer = { ok: { operationId: 'x' } };
  const valid: WorkflowEvent[] = [
    started,
    { type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', input: {} },
    { type: 'task-started', v: 1, at: '/do/1/b', ref: '/do/1/b', name: 'b', inputFrom: { task: '/do/0/a' } },
    { type: 'call-answered', v: 1, at: '/do/0/a>invoke', result: answer },
    { type: 'task-completed', v: 1, at: '/do/0/a', outputFrom: { step: '/do/0/a>invoke' } },
    { type: 'workflow-completed', v: 1, output: 1 },
    { type: 'call-started', v: 1, at: '/do/0/a>invoke', epoch: 1 },
    { type: 'lease-acquired', v: 1, worker: 'w', epoch: 1, untilMs: 5 },
  ];
  // Each mutation: a field dropped, one added, one's value replaced (by another type, a wrong one, or a reference).
  const mutated = fc
    .tuple(fc.constantFrom(...valid), fc.nat(), fc.constantFrom<JsonValue>(null, 'x', -1, 0, 1.5, {}, { step: 'e' }, { task: '' }, [], 'task-started', 2))
    .map(([event, pick, value]) => {
      const copy: Record<string, unknown> = { ...event };
      const keys = [...Object.keys(copy), 'extra', 'inputFrom', 'outputFrom', 'output'];
      const key = keys[pick % keys.length] as string;
      if (pick % 3 === 0) delete copy[key];
      else copy[key] = value;
      return copy;
    });
  fc.assert(
    fc.property(fc.array(fc.oneof(fc.constantFrom(...valid), mutated), { minLength: 0, maxLength: 3 }), (events) => {
      const transition = { events, timeGuard: open, causation: { command: 'c' } };
      const problem = workflowTransitionProblem(transition);
      assert.equal(problem === undefined, whole(transition), problem);
    }),
    { numRuns: 2000 },
  );
  assert.match(
    workflowTransitionProblem({ events: [{ type: 'task-completed', v: 1, at: '/do/0/a' }], timeGuard: open, causation: { command: 'c' } }) ?? '',
    /\/events\/0 must have required property 'output'/,
  );
});

test('timers as data: the earliest armed timer is due; firing faults a running task at its timeout and the instance at its deadline', () => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 2000, max: 9000 }), { minLength: 1, maxLength: 6 }), (dues) => {
      let record = base();
      dues.forEach(
        (dueAtMs, index) => (record = applyWorkflow(record, stored(3 + index, [{ type: 'timer-set', v: 1, at: `t${index}`, dueAtMs, purpose: 'wait' }]))!),
      );
      assert.equal(nextWorkflowDueMs(record), Math.min(...dues));
      assert.equal(decideDue(record, Math.min(...dues) - 1), undefined);
      const fired = decideDue(record, Math.min(...dues))!;
      assert.equal(fired.timeGuard.notBeforeMs, Math.min(...dues));
      assert.equal(fired.events.length, dues.filter((d) => d === Math.min(...dues)).length);
    }),
  );
  let record = applyWorkflow(base(), stored(3, [{ type: 'timer-set', v: 1, at: taskTimeoutKey('/do/0/a'), dueAtMs: 3000, purpose: 'task-timeout' }]))!;
  const timeout = decideDue(record, 3000)!;
  assert.deepEqual(
    timeout.events.map((e) => e.type),
    ['timer-fired', 'task-faulted'],
  );
  record = applyWorkflow(record, stored(4, timeout.events))!;
  assert.equal(record.tasks['/do/0/a']?.error?.status, 408);
  record = applyWorkflow(record, stored(5, [{ type: 'timer-set', v: 1, at: '@workflow-timeout', dueAtMs: 10_000, purpose: 'workflow-timeout' }]))!;
  const deadline = decideDue(record, 10_000)!;
  assert.equal(deadline.events.at(-1)?.type, 'workflow-faulted');
  assert.equal(applyWorkflow(record, stored(6, deadline.events))!.status, 'faulted');
});

test('applying a transition copies every field of the record and changes only what its events change', () => {
  // The record the start creates has every field; each application after it keeps them all.
  const created = foldWorkflow([stored(1, [started])])!;
  const before = applyWorkflow(created, stored(2, [{ type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', input: {} }]))!;
  assert.deepEqual(Object.keys(before), Object.keys(created), 'the same fields, in the same order');
  const after = applyWorkflow(before, stored(3, [{ type: 'task-completed', v: 1, at: '/do/0/a', output: { done: true } }]))!;
  assert.notEqual(after, before);
  assert.deepEqual(Object.keys(after), Object.keys(created), 'the same fields, in the same order');
  const changed = Object.keys(before).filter((key) => !Object.is((before as never)[key], (after as never)[key]));
  assert.deepEqual(changed.sort(), ['lastAppliedAtMs', 'revision', 'seq', 'tasks']);
  assert.equal(before.tasks['/do/0/a']?.state, 'running', 'the record applied to is left as it was');
});
