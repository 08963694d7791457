/** The machines are the legality authority; the derived tables must agree with xstate's own transition(). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { setup } from 'xstate';
import { branchMachine, branchTable, operationMachine, operationTable } from '../../src/machines/index.js';
import { branchEventTypes, branchStates } from '../../src/machines/branch.js';
import { operationEventTypes, operationStates } from '../../src/machines/operation.js';
import { stepWithMachine } from '../../src/machines/table.js';
import { AssertionFailure } from '../../src/contract/errors.js';
import {
  branchSets,
  branchStatusOf,
  isCancelling,
  isClaimed,
  isOpenBranch,
  isRetrying,
  isSettled,
  operationSets,
  stepBranch,
  stepOperation,
} from '../../src/machines/index.js';
import { machineEventTable, machineMoves } from '../../src/machines/mapping.js';
import { eventSchemas } from '../../src/events/schemas.js';

function agree(
  machine: Parameters<typeof stepWithMachine>[0],
  table: ReadonlyMap<string, ReadonlyMap<string, string>>,
  initial: string,
  events: readonly string[],
) {
  return fc.property(fc.array(fc.constantFrom(...events), { maxLength: 30 }), (sequence) => {
    let state = initial;
    for (const event of sequence) {
      const viaMachine = stepWithMachine(machine, state, event);
      const viaTable = table.get(state)?.get(event);
      assert.equal(viaTable, viaMachine, `${state} --${event}-->`);
      if (viaMachine !== undefined) state = viaMachine;
    }
  });
}

test('the branch transition table equals xstate transition() over random event sequences', () => {
  fc.assert(agree(branchMachine, branchTable, 'assigned', branchEventTypes), { numRuns: 500 });
});

test('the operation transition table equals xstate transition() over random event sequences', () => {
  fc.assert(agree(operationMachine, operationTable, 'admitted', operationEventTypes), { numRuns: 500 });
});

test('every machine state is reachable in the derived tables', () => {
  const reach = (table: ReadonlyMap<string, ReadonlyMap<string, string>>, from: string) => {
    const seen = new Set([from]);
    const queue = [from];
    while (queue.length)
      for (const next of table.get(queue.shift()!)!.values())
        if (!seen.has(next)) {
          seen.add(next);
          queue.push(next);
        }
    return seen;
  };
  assert.deepEqual([...reach(branchTable, 'assigned')].sort(), [...branchStates].sort());
  assert.deepEqual([...reach(operationTable, 'admitted')].sort(), [...operationStates].sort());
});

test('terminal branch states accept no further lifecycle event', () => {
  for (const state of ['success', 'failure', 'revoked', 'cancelled', 'indeterminate'] as const) {
    assert.equal(branchTable.get(state)?.size, 0, state);
  }
});

test('a second closure is illegal: a decision closes once and never changes', () => {
  assert.throws(() => stepOperation('closed', 'CLOSED'), AssertionFailure);
  assert.throws(() => stepOperation('settled', 'CLOSED'), AssertionFailure);
  assert.throws(() => stepBranch('success', 'RESULT_FAILURE'), AssertionFailure);
});

test('machine implementations are referenced by name and bad names fail to compile', () => {
  const m = setup({ types: { events: {} as { type: 'GO' } }, actions: { noted: () => {} } }).createMachine({
    initial: 'a',
    states: {
      a: { on: { GO: { target: 'b', actions: 'noted' } } },
      // @ts-expect-error an action name that setup() does not declare
      b: { entry: 'missing' },
    },
  });
  assert.ok(m);
  // @ts-expect-error an event type the branch machine does not have
  assert.throws(() => stepBranch('assigned', 'EXPLODE'), AssertionFailure);
});

test('the named state sets are read off the machines: terminal is final, claimed accepts DISPATCHED, retrying REASSIGNED, cancelling CANCEL_STOPPED, settled is where SETTLED leads', () => {
  const sorted = (set: ReadonlySet<string>) => [...set].sort();
  assert.deepEqual(sorted(branchSets.terminal), ['cancelled', 'failure', 'indeterminate', 'revoked', 'success']);
  assert.deepEqual(sorted(branchSets.open), ['assigned', 'cancelling', 'dispatched', 'retrying']);
  assert.deepEqual(sorted(branchSets.claimed), ['assigned', 'dispatched']);
  assert.deepEqual(sorted(branchSets.retrying), ['retrying']);
  assert.deepEqual(sorted(branchSets.cancelling), ['cancelling']);
  assert.deepEqual(sorted(operationSets.settled), ['settled']);
  for (const state of branchStates) assert.equal(isOpenBranch(state), branchStatusOf(state) === 'pending', `${state}: open is the profile's pending`);
  assert.ok(
    isClaimed('assigned') && !isClaimed('retrying') && isRetrying('retrying') && isCancelling('cancelling') && isSettled('settled') && !isSettled('closed'),
  );
});

test('the domain-event → machine-event table maps every event kind the event schemas know, and its moves are legal in the machines', () => {
  const kinds = eventSchemas.map((schema) => (schema as { properties: { type: { const: string } } }).properties.type.const).sort();
  assert.deepEqual(Object.keys(machineEventTable).sort(), kinds);
  for (const event of Object.values(machineEventTable)) assert.equal(typeof event, 'function');
  const view = () => ({ state: 'assigned' as const, attempt: 1, fence: 1 });
  assert.deepEqual(machineMoves({ type: 'branch-revoked', v: 1, branchId: 'b', attempt: 1, fence: 1, policyRevision: 'p', reason: 'r' }, view), {
    branches: [{ branchId: 'b', event: 'REVOKED' }],
  });
  assert.deepEqual(
    machineMoves({ type: 'dispatch-recorded', v: 1, branchId: 'b', attempt: 2, fence: 2, receipt: 'stored' }, view),
    { branches: [] },
    'an older attempt moves nothing',
  );
  assert.deepEqual(machineMoves({ type: 'settlement-completed', v: 1, status: 'complete' }, view), { operation: 'SETTLED', branches: [] });
});
