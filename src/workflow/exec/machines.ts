/**
 * The legality authority of a workflow instance: XState machines, as src/machines is for
 * operations. One machine for the instance, one for each task execution, one for each timer.
 * The fold steps them through tables derived from the machines themselves (machines/table.ts);
 * a decided event a machine cannot take is a bug, asserted, never dropped.
 *
 *   instance: unstarted ─START▶ running | ─CANCEL_BEFORE_START▶ cancelled (a stream's first event:
 *             workflow-started, or workflow-cancelled-before-start — a child its parent cancelled
 *             before its start was stored, which never runs; neither is legal anywhere else)
 *             running ─COMPLETE▶ completed | ─FAULT▶ faulted | ─CANCEL▶ cancelled (running takes STEP)
 *             every started state takes DISPOSE (a child workflow's disposition, subworkflow-disposed, or a
 *             child operation's, child-disposed): an ended instance still records what became of the
 *             children it started, and nothing else
 *   task:     idle ─START▶ running ─COMPLETE▶ completed | ─FAULT▶ faulted | ─CANCEL▶ cancelled
 *   timer:    idle ─SET▶ armed ─FIRE▶ fired
 *   lease:    free ─ACQUIRE▶ held ─RENEW | ACQUIRE (a takeover)▶ held ─RELEASE▶ free
 */
import { setup } from 'xstate';
import { AssertionFailure } from '../../contract/errors.js';
import { deriveTable, step, type Table } from '../../machines/table.js';

/** A record's status: what an instance is once its stream exists. */
export type InstanceState = 'running' | 'completed' | 'faulted' | 'cancelled';
/** The machine's states: before its stream's first event, and after. */
export type InstanceMachineState = 'unstarted' | InstanceState;
export type InstanceEvent = 'START' | 'CANCEL_BEFORE_START' | 'STEP' | 'COMPLETE' | 'FAULT' | 'CANCEL' | 'DISPOSE';

export const instanceMachine = setup({ types: { events: {} as { type: InstanceEvent } } }).createMachine({
  id: 'workflow-instance',
  initial: 'unstarted',
  states: {
    unstarted: { on: { START: { target: 'running' }, CANCEL_BEFORE_START: { target: 'cancelled' } } },
    running: {
      on: {
        STEP: { target: 'running' },
        DISPOSE: { target: 'running' },
        COMPLETE: { target: 'completed' },
        FAULT: { target: 'faulted' },
        CANCEL: { target: 'cancelled' },
      },
    },
    completed: { type: 'final', on: { DISPOSE: { target: 'completed' } } },
    faulted: { type: 'final', on: { DISPOSE: { target: 'faulted' } } },
    cancelled: { type: 'final', on: { DISPOSE: { target: 'cancelled' } } },
  },
});

export type TaskState = 'idle' | 'running' | 'completed' | 'faulted' | 'cancelled';
export type TaskEvent = 'START' | 'COMPLETE' | 'FAULT' | 'CANCEL';

export const taskMachine = setup({ types: { events: {} as { type: TaskEvent } } }).createMachine({
  id: 'workflow-task',
  initial: 'idle',
  states: {
    idle: { on: { START: { target: 'running' } } },
    running: { on: { COMPLETE: { target: 'completed' }, FAULT: { target: 'faulted' }, CANCEL: { target: 'cancelled' } } },
    completed: { type: 'final' },
    faulted: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

export type TimerState = 'idle' | 'armed' | 'fired';
export type TimerEvent = 'SET' | 'FIRE';

export const timerMachine = setup({ types: { events: {} as { type: TimerEvent } } }).createMachine({
  id: 'workflow-timer',
  initial: 'idle',
  states: {
    idle: { on: { SET: { target: 'armed' } } },
    armed: { on: { FIRE: { target: 'fired' } } },
    fired: { type: 'final' },
  },
});

export type LeaseState = 'free' | 'held';
export type LeaseEvent = 'ACQUIRE' | 'RENEW' | 'RELEASE';

export const leaseMachine = setup({ types: { events: {} as { type: LeaseEvent } } }).createMachine({
  id: 'workflow-lease',
  initial: 'free',
  states: {
    free: { on: { ACQUIRE: { target: 'held' } } },
    held: { on: { ACQUIRE: { target: 'held' }, RENEW: { target: 'held' }, RELEASE: { target: 'free' } } },
  },
});

export const instanceStates: readonly InstanceMachineState[] = ['unstarted', 'running', 'completed', 'faulted', 'cancelled'];
export const instanceEvents: readonly InstanceEvent[] = ['START', 'CANCEL_BEFORE_START', 'STEP', 'COMPLETE', 'FAULT', 'CANCEL', 'DISPOSE'];
export const taskStates: readonly TaskState[] = ['idle', 'running', 'completed', 'faulted', 'cancelled'];
export const taskEvents: readonly TaskEvent[] = ['START', 'COMPLETE', 'FAULT', 'CANCEL'];
export const timerStates: readonly TimerState[] = ['idle', 'armed', 'fired'];
export const timerEvents: readonly TimerEvent[] = ['SET', 'FIRE'];
export const leaseStates: readonly LeaseState[] = ['free', 'held'];
export const leaseEvents: readonly LeaseEvent[] = ['ACQUIRE', 'RENEW', 'RELEASE'];

const instanceTable: Table<InstanceMachineState, InstanceEvent> = deriveTable(instanceMachine, instanceStates, instanceEvents);
const taskTable: Table<TaskState, TaskEvent> = deriveTable(taskMachine, taskStates, taskEvents);
const timerTable: Table<TimerState, TimerEvent> = deriveTable(timerMachine, timerStates, timerEvents);
const leaseTable: Table<LeaseState, LeaseEvent> = deriveTable(leaseMachine, leaseStates, leaseEvents);

/** One legal step of the instance machine (no event leads back to `unstarted`: a record's status is what it answers). */
export const stepInstance = (state: InstanceMachineState, event: InstanceEvent): InstanceState => {
  const next = step(instanceTable, 'workflow-instance', state, event);
  if (next === 'unstarted') throw new AssertionFailure(`workflow-instance machine: ${event} led back to unstarted`);
  return next;
};
export const stepTask = (state: TaskState, event: TaskEvent): TaskState => step(taskTable, 'workflow-task', state, event);
export const stepTimer = (state: TimerState, event: TimerEvent): TimerState => step(timerTable, 'workflow-timer', state, event);
export const stepLease = (state: LeaseState, event: LeaseEvent): LeaseState => step(leaseTable, 'workflow-lease', state, event);

/**
 * The instance machine's event for a logged event: a stream's first event START or
 * CANCEL_BEFORE_START, a child workflow's or a child operation's disposition DISPOSE, any other STEP (an instance's own
 * end is stepped as it is applied: COMPLETE, FAULT, CANCEL).
 */
export const instanceEventOf = (type: string): InstanceEvent =>
  type === 'subworkflow-disposed' || type === 'child-disposed'
    ? 'DISPOSE'
    : type === 'workflow-started'
      ? 'START'
      : type === 'workflow-cancelled-before-start'
        ? 'CANCEL_BEFORE_START'
        : 'STEP';

export const isTaskEnded = (state: TaskState): boolean => state === 'completed' || state === 'faulted' || state === 'cancelled';
