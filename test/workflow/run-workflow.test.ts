/**
 * run: workflow under a short lease: a parent that only waits for its child parks its lease (no
 * renewal appended while it waits), and the child's end drives it again to its completion.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { WorkflowTransition } from '../../src/workflow/exec/events.js';
import type { Stored } from '../../src/kernel/types.js';
import { foldWorkflow, type WorkflowRecord } from '../../src/workflow/exec/record.js';
import { openSubworkflowsOf } from '../../src/workflow/exec/subworkflows.js';
import { assertReplayEqual, delegatingParent, harness, runToEnd, workflowsAmong, yaml } from './support.js';

const parent = delegatingParent('parent', 'child');
const child = yaml(`
document: { dsl: '1.0.3', namespace: t, name: child, version: '1.0.0' }
do:
  - pause:
      wait: { milliseconds: 1500 }
  - done:
      set: { done: true }
`);

test('a parent waiting only for its child parks its lease; the child’s end drives it to completion', async () => {
  const h = harness({ leaseMs: 300, workflows: workflowsAmong([child]) });
  try {
    const record = await runToEnd(h, parent, {}, 'park', 20_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { done: true });
    const read = await h.store.read(record.instanceId);
    assert.equal(read.kind, 'ok');
    const transitions = read.kind === 'ok' ? read.transitions.map((stored) => stored.transition as unknown as WorkflowTransition) : [];
    const commands = transitions.map((transition) => transition.causation.command);
    assert.ok(commands.includes('lease-park'), `the parent parked its lease while it waited: ${commands.join(', ')}`);
    // 1.5 s under a 300 ms lease renewed every 100 ms would be ~15 renewals; parked, a handful at most.
    assert.ok(commands.filter((command) => command === 'lease-renew').length <= 4, commands.join(', '));
    const childId = Object.values(record.subworkflows)[0]?.instanceId;
    assert.ok(childId);
    await assertReplayEqual(h, childId);
  } finally {
    await h.close();
  }
});

/** A parent's log: started, then `delegate` (inside `outer`) bound its child and `outer` faulted (its timeout), no answer recorded for the child. */
function abandonedLog(awaitChild: boolean): Stored<WorkflowTransition>[] {
  const document = yaml(`
document: { dsl: '1.0.3', namespace: t, name: parent, version: '1.0.0' }
do:
  - outer:
      do:
        - delegate:
            run:
              workflow: { namespace: t, name: child, version: '1.0.0' }
              await: ${awaitChild}
`);
  const instanceId = `wf${'1'.repeat(64)}`;
  const guard = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
  const transitions: WorkflowTransition[] = [
    {
      events: [
        {
          type: 'workflow-started',
          v: 1,
          instanceId,
          principalId: 'alice',
          invocationKey: 'k',
          workflowName: 'parent',
          bundleDigest: `sha256:${'2'.repeat(64)}`,
          document,
          input: {},
          timeoutMs: null,
        },
      ],
      timeGuard: guard,
      causation: { command: 'start' },
    },
    {
      events: [
        { type: 'task-started', v: 1, at: '/do/0/outer', ref: '/do/0/outer', name: 'outer', input: {} },
        { type: 'task-started', v: 1, at: '/do/0/outer/do/0/delegate', ref: '/do/0/outer/do/0/delegate', name: 'delegate', input: {} },
        {
          type: 'subworkflow-bound',
          v: 1,
          at: '/do/0/outer/do/0/delegate',
          ref: '/do/0/outer/do/0/delegate',
          instanceId: `wf${'3'.repeat(64)}`,
          invocationKey: 'child-key',
          workflow: 'child',
          iterations: [],
          attempt: 1,
        },
      ],
      timeGuard: guard,
      causation: { command: 'subworkflow-bound' },
    },
    {
      events: [{ type: 'task-faulted', v: 1, at: '/do/0/outer', error: { type: 'https://serverlessworkflow.io/spec/1.0.0/errors/timeout', status: 408 } }],
      timeGuard: guard,
      causation: { command: 'timers-due' },
    },
  ];
  return transitions.map((transition, index) => ({ revision: String(index + 1), committedAtMs: 1000 + index, transition }));
}

test('an ended task releases the awaited children open inside it, and not one started with await: false', () => {
  const within = (record: WorkflowRecord) => [{ pointer: '/do/0/outer', at: '/do/0/outer', endedSeq: record.tasks['/do/0/outer']?.endedSeq ?? null }];
  const awaited = foldWorkflow(abandonedLog(true));
  assert.ok(awaited);
  assert.deepEqual(
    openSubworkflowsOf(awaited, within(awaited)).map(([at]) => at),
    ['/do/0/outer/do/0/delegate'],
  );
  // Not inside another execution of the task, nor inside a sibling.
  assert.deepEqual(openSubworkflowsOf(awaited, [{ pointer: '/do/0/outer', at: '/do/0/outer~1', endedSeq: null }]), []);
  assert.deepEqual(openSubworkflowsOf(awaited, [{ pointer: '/do/0/out', at: '/do/0/out', endedSeq: null }]), []);
  // Nor inside an execution of the task that ended before the child's task started (delegate started at seq 1).
  assert.deepEqual(openSubworkflowsOf(awaited, [{ pointer: '/do/0/outer', at: '/do/0/outer', endedSeq: 1 }]), []);
  // A child its task did not await is not released with the task, even before the task's answer is recorded.
  const fired = foldWorkflow(abandonedLog(false));
  assert.ok(fired);
  assert.deepEqual(openSubworkflowsOf(fired, within(fired)), []);
});
