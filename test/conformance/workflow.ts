/**
 * The workflow instance streams conformance suite: real workflow instances — the executor on the
 * store, through workflowStreams — run by every store's test file beside the EventStore and
 * operations index suites, against the same factories (EventStoreDB's only when CONVOKE_ESDB_URL
 * names a server, reported as skipped otherwise). Each test names the rule it checks: an instance
 * runs to its end through a timer and a child instance, and its record rebuilt from the stored
 * log equals the live one; each instance's index row is its log's projection, a child's naming
 * its parent; an abandoned child is cancelled and its disposition recorded; another client of
 * the store reads the same logs; a principal's running instances are counted in the index.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Clock } from '../../src/contract/clock.js';
import type { JsonValue } from '../../src/contract/json.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { isWorkflowNamed } from '../../src/workflow/exec/document.js';
import { workflowIndexRowOfLog } from '../../src/workflow/exec/index-row.js';
import { foldWorkflow, type WorkflowRecord } from '../../src/workflow/exec/record.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { assertReplayEqual, harness, yaml, type Harness } from '../workflow/support.js';
import type { StoreFactory, StoreFactoryOptions, StoreHarness } from './store.js';

const header = (name: string) => `document: { dsl: '1.0.3', namespace: conformance, name: ${name}, version: '1.0.0' }\n`;
const run = (name: string) => `run:\n        workflow: { namespace: conformance, name: ${name}, version: '1.0.0' }`;

const parent = yaml(
  `${header('parent')}do:\n  - pause:\n      wait: { milliseconds: 50 }\n  - delegate:\n      ${run('child')}\n  - total:\n      set: { total: '\${ .doubled + 1 }' }\n`,
);
const child = yaml(`${header('child')}do:\n  - twice:\n      set: { doubled: '\${ .n * 2 }' }\n`);
const forever = yaml(`${header('forever')}do:\n  - pause:\n      wait: { hours: 1 }\n`);
const impatient = yaml(
  `${header('impatient')}do:\n  - guarded:\n      try:\n        - delegate:\n            timeout: { after: { milliseconds: 200 } }\n            ${run('forever').replace('\n        ', '\n              ')}\n` +
    `      catch:\n        errors:\n          with: { type: https://serverlessworkflow.io/spec/1.0.0/errors/timeout }\n        do:\n          - fallback:\n              set: { fallback: true }\n`,
);
const documents: JsonValue[] = [child, forever];

/**
 * The executor's clock: the store's. A store whose clock the harness sets is moved to each timer's
 * instant when it fires (time only moves forward), so timers and the store's guards agree.
 */
function storeClock(h: StoreHarness): Clock {
  return {
    nowMs: () => h.nowMs(),
    at: (atMs, fn) => {
      const timer = setTimeout(
        () => {
          if (h.setTimeMs && h.nowMs() < atMs) h.setTimeMs(atMs);
          fn();
        },
        Math.min(Math.max(0, atMs - h.nowMs()), 2 ** 31 - 1),
      );
      return { cancel: () => clearTimeout(timer) };
    },
  };
}

async function finished(w: Harness, instanceId: string): Promise<WorkflowRecord> {
  const record = await w.executor.wait(instanceId, 20_000);
  assert.notEqual(record.status, 'running', `instance ${instanceId} finished`);
  return record;
}

/** The index row the store keeps is the projection of the instance's log (asked again for a while: some stores write it after the append). */
async function assertRowIsProjection(store: EventStore, instanceId: string): Promise<void> {
  let stored: unknown;
  let expected: unknown;
  for (let tries = 0; tries < 200; tries++) {
    const read = await workflowStreams(store).read(instanceId);
    assert.equal(read.kind, 'ok', `the log of ${instanceId} reads`);
    expected = workflowIndexRowOfLog(read.kind === 'ok' ? read.transitions : []);
    stored = await store.workflowIndex.get(instanceId);
    if (JSON.stringify(stored) === JSON.stringify(expected)) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.deepEqual(stored, expected, `the index row of ${instanceId} is its log's projection`);
}

type Rule = (h: StoreHarness, w: Harness) => Promise<void>;

const rules: Record<string, Rule> = {
  'an instance runs to its end through a timer and a child instance; both rebuilt from their logs equal the live ones; each row is its log’s projection, the child’s naming its parent':
    async (h, w) => {
      const { instanceId } = await w.executor.start({ principalId: 'alice', invocationKey: 'conformance-1', document: parent, input: { n: 3 } });
      const record = await finished(w, instanceId);
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      assert.deepEqual(record.output, { total: 7 });
      const [bound] = Object.values(record.subworkflows);
      assert.ok(bound, 'the child was bound');
      assert.equal((await finished(w, bound.instanceId)).status, 'completed');
      for (const id of [instanceId, bound.instanceId]) {
        await assertReplayEqual(w, id);
        await assertRowIsProjection(h.store, id);
      }
      assert.deepEqual((await h.store.workflowIndex.get(bound.instanceId))?.parent, { instanceId, at: '/do/1/delegate' });
      assert.equal((await h.store.workflowIndex.get(instanceId))?.parent, null);
    },
  'a child whose task timed out is cancelled by its parent, its disposition recorded in the parent’s log': async (h, w) => {
    const { instanceId } = await w.executor.start({ principalId: 'alice', invocationKey: 'conformance-2', document: impatient, input: {} });
    const record = await finished(w, instanceId);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { fallback: true });
    const [bound] = Object.values(record.subworkflows);
    assert.equal(bound?.disposition?.disposition, 'cancelled', JSON.stringify(bound?.disposition));
    assert.equal((await finished(w, bound.instanceId)).status, 'cancelled');
    for (const id of [instanceId, bound.instanceId]) {
      await assertReplayEqual(w, id);
      await assertRowIsProjection(h.store, id);
    }
  },
  'another client of the store reads the same logs, and lists neither as running once ended': async (h, w) => {
    const { instanceId } = await w.executor.start({ principalId: 'alice', invocationKey: 'conformance-3', document: parent, input: { n: 1 } });
    const record = await finished(w, instanceId);
    const childId = Object.values(record.subworkflows)[0]?.instanceId;
    assert.ok(childId);
    const second = await h.openSecondClient?.();
    if (!second) return;
    try {
      for (const id of [instanceId, childId]) {
        const read = await workflowStreams(second).read(id);
        assert.equal(read.kind, 'ok');
        assert.deepEqual(foldWorkflow(read.kind === 'ok' ? read.transitions : []), await w.executor.get(id), 'the same record from the other client');
      }
      const running: string[] = [];
      for await (const id of second.runningWorkflowIds()) running.push(id);
      assert.ok(!running.includes(instanceId) && !running.includes(childId), 'ended instances are not listed as running');
    } finally {
      await second.close();
    }
  },
  'a principal’s running instances are counted in the index (what bounds its starts), as another client of the store counts them, never past the count asked; one ended counts no more':
    async (h, w) => {
      const ids: string[] = [];
      for (const key of ['count-1', 'count-2'])
        ids.push((await w.executor.start({ principalId: 'carol', invocationKey: key, document: forever, input: {} })).instanceId);
      assert.equal(await h.store.workflowIndex.countRunning('carol', 10), 2);
      assert.equal(await h.store.workflowIndex.countRunning('carol', 1), 1);
      assert.equal(await h.store.workflowIndex.countRunning('dave', 10), 0);
      const second = await h.openSecondClient?.();
      if (second) {
        try {
          assert.equal(await second.workflowIndex.countRunning('carol', 10), 2, 'another client counts them');
        } finally {
          await second.close();
        }
      }
      await w.executor.cancel(ids[0]!, 'counted no more');
      assert.equal(await h.store.workflowIndex.countRunning('carol', 10), 1);
      await w.executor.cancel(ids[1]!, 'counted no more');
    },
};

/** Rules run on a store opened with other limits than its defaults. */
const limitedRules: Record<string, { options: StoreFactoryOptions; body: Rule }> = {
  'a value the store cannot take in one transition, though under the held bound, faults the task that made it at its pointer; the instance ends, rebuilt from its log as it ran':
    {
      options: { limits: { transitionBytesMax: 20 * 1024 } },
      body: async (h, w) => {
        assert.equal(h.store.limits.transitionBytesMax, 20 * 1024);
        assert.equal(workflowStreams(h.store).transitionBytesMax, 20 * 1024, 'the workflow streams report the store’s limit');
        // Each branch's value fits a transition; the fork's output (about 24 KB, under the 32 KiB an output may be held at) does not.
        const fork = yaml(
          `${header('fork')}do:\n  - review:\n      fork:\n        branches:\n` +
            `          - left:\n              set: { text: '\${ "l" * 12000 }' }\n` +
            `          - right:\n              set: { text: '\${ "r" * 12000 }' }\n  - after:\n      set: { done: true }\n`,
        );
        const { instanceId } = await w.executor.start({ principalId: 'alice', invocationKey: 'conformance-limit', document: fork, input: {} });
        const record = await finished(w, instanceId);
        assert.equal(record.status, 'faulted');
        assert.equal(record.error?.instance, '/do/0/review', JSON.stringify(record.error));
        assert.equal(Object.values(record.tasks).find((task) => task.ref === '/do/0/review')?.state, 'faulted', 'the fork is recorded faulted');
        assert.deepEqual(w.executor.failures, [], 'every transition the instance proposed was stored or refused with its task');
        await assertReplayEqual(w, instanceId);
        await assertRowIsProjection(h.store, instanceId);
      },
    },
};

export function workflowConformance(name: string, factory: StoreFactory, options: { skip?: string; timeoutMs?: number } = {}): void {
  describe(`workflow instance streams conformance: ${name}`, () => {
    const all = [...Object.entries(rules).map(([rule, body]) => [rule, { options: {}, body }] as const), ...Object.entries(limitedRules)];
    for (const [rule, { options: opened, body }] of all) {
      it(rule, { skip: options.skip ?? false, timeout: options.timeoutMs ?? 60_000 }, async () => {
        const h = await factory(opened);
        const w = harness({ store: h.store, clock: storeClock(h), workflows: (_digest, ref) => documents.find((document) => isWorkflowNamed(document, ref)) });
        try {
          await body(h, w);
        } finally {
          await w.close();
          await h.dispose();
        }
      });
    }
  });
}
