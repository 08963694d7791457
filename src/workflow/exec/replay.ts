/**
 * Replay of a workflow instance's log, for operators (`convoke replay`, `convoke inspect`): every
 * transition checked against its schema, the record folded (record.ts, through the tables derived
 * from the machines), and a reference replay that steps every machine — the instance, each task
 * execution, each timer, the lease — with XState's own transition(), independently of record.ts.
 * A difference between the two, a transition that fails its schema, or a fold that throws is a
 * problem to report.
 */
import { appliesOnFold } from '../../events/guard.js';
import type { Stored } from '../../kernel/types.js';
import { stepWithMachine } from '../../machines/table.js';
import { workflowTransitionProblem, type WorkflowEvent, type WorkflowTransition } from './events.js';
import { instanceEventOf, instanceMachine, leaseMachine, taskMachine, timerMachine } from './machines.js';
import { foldWorkflow, workflowTimeoutKey, type WorkflowRecord } from './record.js';

export interface MachineStates {
  status: string;
  tasks: Record<string, string>;
  timers: Record<string, string>;
  lease: string;
}

export interface WorkflowReplay {
  record: WorkflowRecord | undefined;
  /** Whether each transition applied (false: void on a guard-on-fold store). */
  applied: boolean[];
  problem: string | null;
}

type Machine = typeof instanceMachine | typeof taskMachine | typeof timerMachine | typeof leaseMachine;

function stepped(machine: Machine, state: string, event: string, what: string): string {
  const next = stepWithMachine(machine, state, event);
  if (next === undefined) throw new Error(`${what}: ${event} is not legal in state ${state}`);
  return next;
}

/** One event through XState's own machines. */
function machineStep(states: MachineStates, event: WorkflowEvent): void {
  const task = (at: string, type: string) => (states.tasks[at] = stepped(taskMachine, states.tasks[at] ?? 'idle', type, `task ${at}`));
  // A stream's first event steps the machine out of `unstarted` (START, or CANCEL_BEFORE_START); every other its own.
  states.status = stepped(instanceMachine, states.status, instanceEventOf(event.type), 'instance');
  switch (event.type) {
    case 'task-started':
      return void task(event.at, 'START');
    case 'task-completed':
      return void task(event.at, 'COMPLETE');
    case 'task-faulted':
      return void task(event.at, 'FAULT');
    case 'task-cancelled':
      return void task(event.at, 'CANCEL');
    case 'timer-set':
    case 'timer-fired': {
      const type = event.type === 'timer-set' ? 'SET' : 'FIRE';
      states.timers[event.at] = stepped(timerMachine, states.timers[event.at] ?? 'idle', type, `timer ${event.at}`);
      return;
    }
    case 'lease-acquired':
      return void (states.lease = stepped(leaseMachine, states.lease, 'ACQUIRE', 'lease'));
    case 'lease-renewed':
      return void (states.lease = stepped(leaseMachine, states.lease, 'RENEW', 'lease'));
    case 'lease-released':
      return void (states.lease = stepped(leaseMachine, states.lease, 'RELEASE', 'lease'));
    case 'workflow-completed':
    case 'workflow-faulted':
    case 'workflow-cancelled': {
      const type = event.type === 'workflow-completed' ? 'COMPLETE' : event.type === 'workflow-faulted' ? 'FAULT' : 'CANCEL';
      states.status = stepped(instanceMachine, 'running', type, 'instance');
      return;
    }
    default:
      return;
  }
}

/** The machines' states after the log, each event stepped with XState's transition(). */
export function machineReplay(log: readonly Stored<WorkflowTransition>[]): MachineStates {
  const states: MachineStates = { status: 'unstarted', tasks: {}, timers: {}, lease: 'free' };
  let lastAppliedAtMs = Number.MIN_SAFE_INTEGER;
  for (const stored of log) {
    if (!appliesOnFold(stored, lastAppliedAtMs)) continue;
    lastAppliedAtMs = stored.committedAtMs;
    const [first] = stored.transition.events;
    if (first?.type === 'workflow-started' && typeof first.timeoutMs === 'number')
      states.timers[workflowTimeoutKey] = stepped(timerMachine, 'idle', 'SET', 'timer');
    for (const event of stored.transition.events) machineStep(states, event);
  }
  return states;
}

const statesOf = (record: WorkflowRecord): MachineStates => ({
  status: record.status,
  tasks: Object.fromEntries(Object.entries(record.tasks).map(([at, task]) => [at, task.state])),
  timers: Object.fromEntries(Object.entries(record.timers).map(([at, timer]) => [at, timer.state])),
  lease: record.lease ? 'held' : 'free',
});

function differences(a: MachineStates, b: MachineStates): string[] {
  const found: string[] = [];
  if (a.status !== b.status) found.push(`status ${a.status} / machines ${b.status}`);
  if (a.lease !== b.lease) found.push(`lease ${a.lease} / machines ${b.lease}`);
  for (const kind of ['tasks', 'timers'] as const) {
    for (const key of new Set([...Object.keys(a[kind]), ...Object.keys(b[kind])]))
      if (a[kind][key] !== b[kind][key]) found.push(`${kind} ${key}: ${a[kind][key] ?? 'absent'} / machines ${b[kind][key] ?? 'absent'}`);
  }
  return found;
}

/** Rebuilds an instance from its log and checks it against the machines' own replay. */
export function replayWorkflowLog(log: readonly Stored<WorkflowTransition>[]): WorkflowReplay {
  const applied: boolean[] = [];
  let lastAppliedAtMs = Number.MIN_SAFE_INTEGER;
  for (const stored of log) {
    const applies = appliesOnFold(stored, lastAppliedAtMs);
    applied.push(applies);
    if (applies) lastAppliedAtMs = stored.committedAtMs;
  }
  for (const stored of log) {
    const problem = workflowTransitionProblem(stored.transition);
    if (problem !== undefined) return { record: undefined, applied, problem: `revision ${stored.revision} fails its schema: ${problem}` };
  }
  let record: WorkflowRecord | undefined;
  try {
    record = foldWorkflow(log);
  } catch (error) {
    return { record: undefined, applied, problem: `the fold failed: ${(error as Error).message}` };
  }
  if (!record) return { record, applied, problem: 'no workflow-started was ever applied' };
  try {
    const found = differences(statesOf(record), machineReplay(log));
    return { record, applied, problem: found.length === 0 ? null : `the record differs from the machines' replay: ${found.join('; ')}` };
  } catch (error) {
    return { record, applied, problem: `the machines' replay refused the log: ${(error as Error).message}` };
  }
}
