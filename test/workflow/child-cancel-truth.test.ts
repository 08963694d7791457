/**
 * What a parent records of a child it no longer awaits (`subworkflow-disposed`) says only what the
 * child's log shows. A child its caller cancelled (POST /workflow-instances/{id}/cancel, the
 * instances service's cancel, where the child declares caller cancellation) before its parent
 * released it was not cancelled by its parent: the disposition says it had been cancelled before
 * its parent's cancel, with the reason its log holds, and it is `already-closed`, not
 * `cancelled`.
 *
 * The order is driven, not hoped for: the store refuses the parent's record of its child's end
 * (the call's answer) until the parent has been cancelled, so the parent still owes the child a
 * disposition when it ends, and the child's cancel by its caller is already in the child's log.
 *
 * Nor does it say a child ended before the end that released it (X) when it ended after: a child
 * whose completion the store holds until its parent has been cancelled completes after its parent
 * ended and before its parent's cancel reaches it ("before its parent's cancel", not "before X
 * ended"). A host answering each kind of child pins every disposition's detail.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonValue } from '../../src/contract/json.js';
import type { WorkflowEvent, WorkflowTransition } from '../../src/workflow/exec/events.js';
import { WorkflowInstances } from '../../src/workflow/exec/instances.js';
import { foldWorkflow, type WorkflowRecord } from '../../src/workflow/exec/record.js';
import type { SubworkflowHost } from '../../src/workflow/exec/run.js';
import { disposeSubworkflow, owedDisposals } from '../../src/workflow/exec/subworkflows.js';
import type { Stored } from '../../src/kernel/types.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';
import { storeWith } from '../support/scenario.js';
import { assertReplayEqual, delegatingParent, harness, workflowsAmong, yaml } from './support.js';

const parent = delegatingParent('parent', 'child');
const child = yaml(`
document: { dsl: '1.0.3', namespace: t, name: child, version: '1.0.0' }
do:
  - pause:
      wait: { minutes: 10 }
`);

async function until<T>(what: string, probe: () => Promise<T | undefined>, waitMs = 10_000): Promise<T> {
  const endMs = Date.now() + waitMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > endMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test('a child its caller cancelled before its parent released it is recorded already closed, with its own cancel reason, not as cancelled by its parent', async () => {
  const clock = new SystemClock();
  const memory = new MemoryEventStore({ clock });
  let parentId = '';
  let refused = 0;
  const store = storeWith(memory, (real) => ({
    append: async (...args: Parameters<typeof real.append>) => {
      const events = (args[2] as unknown as WorkflowTransition).events;
      // The parent's record of its child's end, refused while the test drives the order.
      if (args[0] === parentId && events.some((event) => event.type === 'call-answered' && event.at.endsWith('>run'))) {
        refused += 1;
        return { kind: 'unavailable', description: 'held by the test' };
      }
      return real.append(...args);
    },
  }));
  const h = harness({ store, clock, workflows: workflowsAmong([child]) });
  const instances = new WorkflowInstances({
    executor: h.executor,
    bundleOf: () => undefined,
    definition: (_digest, workflow) => (workflow === 'child' ? { document: child, cancellation: 'caller' } : undefined),
  });
  try {
    const started = await h.executor.start({ principalId: 'alice', invocationKey: 'p', document: parent, input: {} });
    parentId = started.instanceId;
    const childId = await until('the child running', async () => {
      const bound = Object.values((await h.executor.get(parentId))?.subworkflows ?? {})[0];
      if (!bound) return undefined;
      const record = await h.executor.get(bound.instanceId).catch(() => undefined);
      return record?.status === 'running' ? bound.instanceId : undefined;
    });

    // Its caller cancels the child; the parent sees its end, and its record of it is refused.
    const byCaller = await instances.cancel('alice', childId);
    assert.equal(byCaller.status, 'cancelled');
    await until('the parent recording the child’s end', async () => (refused > 0 ? true : undefined));

    // Then the parent is cancelled: it owes the child a disposition, recorded with the cancel.
    const ended = await h.executor.cancel(parentId, 'the parent is cancelled');
    assert.equal(ended.status, 'cancelled');
    const disposition = Object.values(ended.subworkflows)[0]?.disposition;
    assert.ok(disposition, 'the child’s disposition is recorded');
    const childRecord = (await h.executor.get(childId)) as WorkflowRecord;
    assert.equal(childRecord.status, 'cancelled');
    assert.doesNotMatch(disposition.detail, /cancelled by its parent/, `the parent did not cancel it: ${disposition.detail}`);
    assert.equal(disposition.disposition, 'already-closed', disposition.detail);
    assert.equal(
      disposition.detail,
      "it had been cancelled before its parent's cancel when the instance (cancelled) ended: cancelled by the caller that started it",
    );
    assert.equal(childRecord.cancelReason, 'cancelled by the caller that started it', 'the child’s record keeps why it was cancelled');
    await assertReplayEqual(h, parentId);
    await assertReplayEqual(h, childId);
  } finally {
    await h.close();
    await memory.close();
  }
});

const parentId = `wf${'1'.repeat(64)}`;
const bundleDigest = `sha256:${'2'.repeat(64)}`;
const childId = workflowInstanceId('alice', bundleDigest, 'child', 'child-key');
const guard = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
const stored = (index: number, events: WorkflowEvent[]): Stored<WorkflowTransition> => ({
  revision: String(index),
  committedAtMs: 1000 + index,
  transition: { events, timeGuard: guard, causation: { command: 'test' } },
});
const startedBy = (instanceId: string, document: JsonValue, name: string): WorkflowEvent => ({
  type: 'workflow-started',
  v: 1,
  instanceId,
  principalId: 'alice',
  invocationKey: 'k',
  workflowName: name,
  bundleDigest,
  document,
  input: {},
  timeoutMs: null,
});

/** The parent bound its child at /do/0/delegate, and was then cancelled (it owes the child a disposition). */
const parentRecord = foldWorkflow([
  stored(1, [startedBy(parentId, parent, 'parent')]),
  stored(2, [
    { type: 'task-started', v: 1, at: '/do/0/delegate', ref: '/do/0/delegate', name: 'delegate', input: {} },
    {
      type: 'subworkflow-bound',
      v: 1,
      at: '/do/0/delegate',
      ref: '/do/0/delegate',
      instanceId: childId,
      invocationKey: 'child-key',
      workflow: 'child',
      iterations: [],
      attempt: 1,
    },
  ]),
  stored(3, [{ type: 'workflow-cancelled', v: 1, reason: 'the parent is cancelled' }]),
]) as WorkflowRecord;

/** The child's record as its log ends with `end`. */
const childEnded = (end: WorkflowEvent): WorkflowRecord => foldWorkflow([stored(1, [startedBy(childId, child, 'child')]), stored(5, [end])]) as WorkflowRecord;

/** A host whose child is running until the parent's cancel unless `before` ended it first; answers what a cancel finds, and the reason it was sent. */
function hostWith(before: WorkflowEvent | undefined): { host: SubworkflowHost; sent: string[] } {
  const sent: string[] = [];
  const host: SubworkflowHost = {
    resolve: () => undefined,
    start: () => Promise.reject(new Error('not started here')),
    wait: () => Promise.resolve(undefined),
    cancel: (_instanceId, reason) => {
      sent.push(reason);
      return Promise.resolve(childEnded(before ?? { type: 'workflow-cancelled', v: 1, reason }));
    },
  };
  return { host, sent };
}

const dispose = async (before: WorkflowEvent | undefined) => {
  const { host, sent } = hostWith(before);
  const [owed] = owedDisposals(parentRecord);
  assert.ok(owed);
  const event = await disposeSubworkflow(host, parentRecord, owed.by, owed.at, owed.child, 'the instance (cancelled)');
  return { event, sent };
};

test('the disposition says who cancelled the child as its log says: this cancel, its parent before, or someone else before', async () => {
  const mine = await dispose(undefined);
  assert.deepEqual(mine.sent, [`its parent ${parentId} no longer awaits it: the instance (cancelled) ended`]);
  assert.equal(mine.event.disposition, 'cancelled');
  assert.equal(mine.event.detail, 'cancelled by its parent when the instance (cancelled) ended');

  // Its parent cancelled it before: another release (another task's end), or the cancel of a start it met after its own end.
  const earlier = `its parent ${parentId} is cancelled`;
  const byParent = await dispose({ type: 'workflow-cancelled', v: 1, reason: earlier });
  assert.equal(byParent.event.disposition, 'cancelled');
  assert.equal(byParent.event.detail, `cancelled by its parent earlier, before its cancel when the instance (cancelled) ended: ${earlier}`);

  // Its caller (or another parent's id in the reason: not this parent) cancelled it before.
  for (const reason of ['cancelled by the caller that started it', `its parent ${'wf' + '4'.repeat(64)} is cancelled`, `its parent ${parentId}`]) {
    const other = await dispose({ type: 'workflow-cancelled', v: 1, reason });
    assert.equal(other.event.disposition, 'already-closed', reason);
    assert.equal(other.event.detail, `it had been cancelled before its parent's cancel when the instance (cancelled) ended: ${reason}`);
  }

  const completed = await dispose({ type: 'workflow-completed', v: 1, output: 1 });
  assert.deepEqual(completed.event, {
    type: 'subworkflow-disposed',
    v: 1,
    at: '/do/0/delegate',
    instanceId: childId,
    by: '/',
    disposition: 'already-closed',
    detail: "it had completed before its parent's cancel when the instance (cancelled) ended",
  });
  const faulted = await dispose({ type: 'workflow-faulted', v: 1, error: { type: 'https://example.com/boom', status: 500 } });
  assert.equal(faulted.event.disposition, 'already-closed');
  assert.equal(faulted.event.detail, "it had faulted before its parent's cancel when the instance (cancelled) ended");
});

const briefChild = yaml(`
document: { dsl: '1.0.3', namespace: t, name: child, version: '1.0.0' }
do:
  - pause:
      wait: { milliseconds: 100 }
  - done:
      set: { done: true }
`);

test('a child that completed after its parent ended, before its parent’s cancel reached it, is not recorded as completed before its parent ended', async () => {
  const clock = new SystemClock();
  const memory = new MemoryEventStore({ clock });
  let childId = '';
  let held: (() => void) | undefined;
  const store = storeWith(memory, (real) => ({
    append: async (...args: Parameters<typeof real.append>) => {
      const events = (args[2] as unknown as WorkflowTransition).events;
      // The child's completion, held until the parent has ended.
      if (args[0] === childId && events.some((event) => event.type === 'workflow-completed')) await new Promise<void>((resolve) => (held = resolve));
      return real.append(...args);
    },
  }));
  const h = harness({ store, clock, workflows: workflowsAmong([briefChild]) });
  try {
    const { instanceId: parentId } = await h.executor.start({ principalId: 'alice', invocationKey: 'p', document: parent, input: {} });
    childId = await until('the child bound', async () => Object.values((await h.executor.get(parentId))?.subworkflows ?? {})[0]?.instanceId);
    await until('the child’s completion held', async () => held);

    // The parent ends (cancelled) while the child's completion is on its way; its cancel of the child waits behind that completion.
    const cancelling = h.executor.cancel(parentId, 'the parent is cancelled');
    const parentEnded = await until('the parent cancelled', async () => {
      const read = await memory.read(parentId);
      return read.kind === 'ok' &&
        read.transitions.some((stored) => (stored.transition as unknown as WorkflowTransition).events.some((e) => e.type === 'workflow-cancelled'))
        ? read.transitions.at(-1)?.committedAtMs
        : undefined;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    held?.();
    const ended = await cancelling;

    const childRecord = (await h.executor.get(childId)) as WorkflowRecord;
    assert.equal(childRecord.status, 'completed');
    assert.ok((childRecord.endedAtMs ?? 0) > parentEnded, 'the child completed after its parent was cancelled');
    const disposition = Object.values(ended.subworkflows)[0]?.disposition;
    assert.ok(disposition);
    assert.equal(disposition.disposition, 'already-closed');
    assert.doesNotMatch(disposition.detail, /before the instance \(cancelled\) ended/, `it completed after the parent ended: ${disposition.detail}`);
    assert.equal(disposition.detail, "it had completed before its parent's cancel when the instance (cancelled) ended");
    await assertReplayEqual(h, parentId);
  } finally {
    held?.();
    await h.close();
    await memory.close();
  }
});
