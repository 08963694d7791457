/**
 * A toy aggregate for the kernel's tests: an approval request that needs N distinct approvals
 * before it expires. It has what any aggregate on the kernel has — its own XState machine (the
 * legality table), a pure decider, a projection, a stream name, timers as data — and shares
 * nothing with operations, which is the point: the kernel takes it with no change.
 */
import { setup } from 'xstate';
import { AssertionFailure } from '../../src/contract/errors.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { guardBetween, openEndedMs, appliesOnFold } from '../../src/events/guard.js';
import type { StoredTransition, TimeGuard, Transition } from '../../src/events/types.js';
import type { Aggregate, Stored, StreamStore } from '../../src/kernel/index.js';
import { deriveTable, step } from '../../src/machines/table.js';

/** Events in the stores' envelope: a type and a schema version, as every stored event has. */
export type ApprovalEvent =
  | { type: 'approval-requested'; v: 1; requestId: string; needed: number; expiresAtMs: number }
  | { type: 'approved'; v: 1; by: string }
  | { type: 'granted'; v: 1 }
  | { type: 'lapsed'; v: 1 };

export interface ApprovalTransition {
  events: ApprovalEvent[];
  timeGuard: TimeGuard;
  causation: { command: string };
}

type MachineEvent = { type: 'GRANT' } | { type: 'LAPSE' } | { type: 'APPROVE' };
type State = 'pending' | 'granted' | 'lapsed';

/** The approval's legality, as an XState machine; the kernel test never reaches for its states by name. */
const approvalMachine = setup({ types: { events: {} as MachineEvent } }).createMachine({
  id: 'approval',
  initial: 'pending',
  states: {
    pending: { on: { APPROVE: { target: 'pending' }, GRANT: { target: 'granted' }, LAPSE: { target: 'lapsed' } } },
    granted: { type: 'final' },
    lapsed: { type: 'final' },
  },
});
const table = deriveTable<State, MachineEvent['type']>(approvalMachine, ['pending', 'granted', 'lapsed'], ['APPROVE', 'GRANT', 'LAPSE']);

/** The domain-event → machine-event table; the mapped type makes a new event kind a compile error until mapped. */
const machineEventOf: { [K in ApprovalEvent['type']]: MachineEvent['type'] | undefined } = {
  'approval-requested': undefined,
  approved: 'APPROVE',
  granted: 'GRANT',
  lapsed: 'LAPSE',
};

export interface ApprovalRecord {
  requestId: string;
  state: State;
  needed: number;
  approvers: string[];
  expiresAtMs: number;
  revision: string;
  lastAppliedAtMs: number;
}

function evolve(record: ApprovalRecord | undefined, event: ApprovalEvent): ApprovalRecord {
  if (event.type === 'approval-requested') {
    if (record !== undefined) throw new AssertionFailure('approval-requested only begins a stream');
    return {
      requestId: event.requestId,
      state: 'pending',
      needed: event.needed,
      approvers: [],
      expiresAtMs: event.expiresAtMs,
      revision: '0',
      lastAppliedAtMs: 0,
    };
  }
  if (record === undefined) throw new AssertionFailure(`${event.type} before approval-requested`);
  const machineEvent = machineEventOf[event.type];
  const state = machineEvent === undefined ? record.state : step(table, 'approval', record.state, machineEvent);
  return { ...record, state, approvers: event.type === 'approved' ? [...record.approvers, event.by] : record.approvers };
}

function apply(record: ApprovalRecord | undefined, stored: Stored<ApprovalTransition>): ApprovalRecord | undefined {
  // The same time-guard rule as every aggregate: a transition outside its guard is void on fold.
  if (!appliesOnFold(stored, record?.lastAppliedAtMs ?? Number.MIN_SAFE_INTEGER)) return record && { ...record, revision: stored.revision };
  let next = record;
  for (const event of stored.transition.events) next = evolve(next, event);
  return next && { ...next, revision: stored.revision, lastAppliedAtMs: stored.committedAtMs };
}

export const approvalAggregate: Aggregate<ApprovalRecord, ApprovalTransition> = {
  name: 'approval',
  apply,
  fold: (log) => log.reduce<ApprovalRecord | undefined>((record, stored) => apply(record, stored), undefined),
  revision: (record) => record.revision,
  nextDueMs: (record) => (record.state === 'pending' ? record.expiresAtMs : undefined),
  finished: (record) => record.state !== 'pending',
  commandOf: (transition) => transition.causation.command,
  // A decider's output must be legal in the machine from the current state, in order.
  check: (record, transition) => {
    let state = record.state;
    for (const event of transition.events) {
      const machineEvent = machineEventOf[event.type];
      if (event.type === 'approval-requested') throw new AssertionFailure('a second approval-requested');
      if (machineEvent !== undefined) state = step(table, 'approval', state, machineEvent);
    }
  },
};

/** The stream an approval request lives in. */
export const approvalStream = (requestId: string) => `approval-${requestId}`;

export type ApprovalCommand = { kind: 'approve'; by: string; nowMs: number } | { kind: 'expire'; nowMs: number };
export type ApprovalDecision = { kind: 'decided'; transition: ApprovalTransition } | { kind: 'unchanged' } | { kind: 'refused'; reason: 'closed' | 'expired' };

export function requestApproval(requestId: string, needed: number, nowMs: number, ttlMs: number): ApprovalTransition {
  return {
    events: [{ type: 'approval-requested', v: 1, requestId, needed, expiresAtMs: nowMs + ttlMs }],
    timeGuard: guardBetween(nowMs, openEndedMs),
    causation: { command: 'request' },
  };
}

/** The pure decider: approvals before expiry (granted with the last one needed), lapse at expiry. */
export function decideApproval(command: ApprovalCommand, record: ApprovalRecord): ApprovalDecision {
  switch (command.kind) {
    case 'approve': {
      if (record.state !== 'pending') return { kind: 'refused', reason: 'closed' };
      if (command.nowMs >= record.expiresAtMs) return { kind: 'refused', reason: 'expired' };
      if (record.approvers.includes(command.by)) return { kind: 'unchanged' };
      const events: ApprovalEvent[] = [{ type: 'approved', v: 1, by: command.by }];
      if (record.approvers.length + 1 >= record.needed) events.push({ type: 'granted', v: 1 });
      return { kind: 'decided', transition: { events, timeGuard: guardBetween(0, record.expiresAtMs), causation: { command: 'approve' } } };
    }
    case 'expire':
      if (record.state !== 'pending' || command.nowMs < record.expiresAtMs) return { kind: 'unchanged' };
      return {
        kind: 'decided',
        transition: { events: [{ type: 'lapsed', v: 1 }], timeGuard: guardBetween(record.expiresAtMs, openEndedMs), causation: { command: 'expire' } },
      };
    default: {
      const unreachable: never = command;
      return unreachable;
    }
  }
}

/** The decider's transition, or nothing when it decided nothing or refused. */
export const transitionOf = (decision: ApprovalDecision) => (decision.kind === 'decided' ? decision.transition : undefined);

/**
 * The memory and SQLite stores keep any JSON transition under a time guard; their TypeScript
 * interface names the operation's events. This view gives the toy aggregate its own types over
 * the same stores — the one cast, here, is only a change of name.
 */
const asApproval = (s: StoredTransition): Stored<ApprovalTransition> => ({
  revision: s.revision,
  committedAtMs: s.committedAtMs,
  transition: s.transition as unknown as ApprovalTransition,
});

export function approvalStore(store: EventStore): StreamStore<ApprovalTransition> {
  const readAfter = store.readAfter;
  const asOperation = (t: ApprovalTransition) => t as unknown as Transition;
  return {
    create: (id, t) => store.create(id, asOperation(t)),
    append: (id, revision, t) => store.append(id, revision, asOperation(t)),
    read: async (id) => {
      const read = await store.read(id);
      if (read.kind !== 'ok') return read;
      return { kind: 'ok', revision: read.revision, transitions: read.transitions.map(asApproval) };
    },
    ...(readAfter === undefined
      ? {}
      : {
          readAfter: async (id: string, revision: string) => {
            const read = await readAfter.call(store, id, revision);
            if (read.kind !== 'ok') return read;
            return { kind: 'ok' as const, revision: read.revision, transitions: read.transitions.map(asApproval) };
          },
        }),
    watch: (listener) => store.watch(listener),
  };
}
