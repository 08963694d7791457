/**
 * Stuck workflow instances: the serve config's `workflows.stuck` bounds (validated by the config's
 * schema, defaults as before) decide which running instances the listing's stuck filter and the
 * gauge `convoke_workflow_instances_stuck{reason}` name; the gauge counts each reason exactly
 * (paging past one page of stuck rows) and follows the metrics naming rules.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkflowIndexView } from '../../src/adapters/store/workflow-index-view.js';
import type { WorkflowIndexStore } from '../../src/adapters/store/types.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { workflowStuckBoundsDefault, workflowStuckReasonsOf, workflowStuckReasons, type WorkflowIndexRow } from '../../src/events/workflow-index.js';
import { namingProblems } from '../../src/runtime/metrics.js';
import { countStuckWorkflowInstances, observeStuckWorkflowInstances, workflowStuckGaugeName } from '../../src/runtime/workflow-stuck-metrics.js';
import { serveWorkflowFixture, writeWorkflowFixture } from './instances-fixture.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import { workflowRowOf } from '../support/workflow-row.js';

function runningRow(i: number, fields: Partial<WorkflowIndexRow>): WorkflowIndexRow {
  return workflowRowOf(i, { workflowName: 'slow', startedAtMs: 1_000 + i, ...fields });
}

const gaugeLine = (text: string, reason: string) => new RegExp(`^${workflowStuckGaugeName}\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text)?.[1];

test('the stuck instances gauge counts each reason exactly as the reference does, past one page of stuck rows, and follows the naming rules', async () => {
  const clock = new VirtualClock(10_000_000);
  // The in-memory view that the memory, JetStream and EventStoreDB stores list from.
  const view = new WorkflowIndexView();
  const index: WorkflowIndexStore = {
    list: async (query) => view.page(query),
    get: async (instanceId) => view.get(instanceId),
    put: async (_id, row) => void (row && view.apply(row)),
    countRunning: async (principalId, atMost) => view.countRunning(principalId, atMost),
  };
  const rows: WorkflowIndexRow[] = [];
  // 1 200 running instances: deadlines, timers and leases spread around now.
  for (let i = 0; i < 1_200; i++) {
    const now = clock.nowMs();
    const row = runningRow(i, {
      deadlineMs: i % 3 === 0 ? now - 40_000 + (i % 7) * 5_000 : null,
      nextDueMs: i % 4 !== 0 ? now - 120_000 + (i % 5) * 20_000 : null,
      lease: i % 4 === 0 ? { worker: 'w', epoch: 1, untilMs: now - 50_000 + (i % 9) * 10_000 } : null,
    });
    rows.push(row);
    await index.put(row.instanceId, row);
  }
  const expected = Object.fromEntries(workflowStuckReasons.map((r) => [r, 0])) as Record<string, number>;
  for (const row of rows) for (const reason of workflowStuckReasonsOf(row, clock.nowMs(), workflowStuckBoundsDefault)) expected[reason]!++;
  assert.ok(
    Object.values(expected).some((n) => n > 500),
    'a reason with more stuck rows than one page',
  );
  assert.deepEqual(await countStuckWorkflowInstances(index, clock.nowMs(), workflowStuckBoundsDefault), expected);

  const registry = new Registry();
  observeStuckWorkflowInstances(registry, () => index, clock, workflowStuckBoundsDefault);
  const text = await registry.metrics();
  for (const reason of workflowStuckReasons) assert.equal(gaugeLine(text, reason), String(expected[reason]), reason);
  assert.deepEqual(await namingProblems(registry), []);
});

test('workflows.stuck in the serve config is validated by its schema; absent fields keep the defaults', () => {
  const parse = (workflows: object) => parseDeploymentConfig(Buffer.from(JSON.stringify(minimalServeConfig({ workflows }))), '/tmp');
  assert.deepEqual(parse({ stuck: { timerGraceMs: 5_000 } }).workflows?.stuck, { timerGraceMs: 5_000 });
  for (const bad of [{ timerGraceMs: -1 }, { timeoutGraceMs: 1.5 }, { leaseGraceMs: '30s' }, { graceMs: 1 }])
    assert.throws(
      () => parse({ stuck: bad }),
      (error: Error) => error.name === 'AdapterError' && /workflows\/stuck/.test(error.message),
      JSON.stringify(bad),
    );
});

test('convoke serve: the configured workflows.stuck bounds decide what the stuck filter lists and the gauge counts', async () => {
  // Past its workflow timeout by 5 s: stuck under a 1 s grace, not under the default 30 s.
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-stuck-'));
  // SQLite: its index takes a rebuilt row whatever the log (the memory store keeps rows of live logs only).
  const fixture = await writeWorkflowFixture({ store: `sqlite:${join(dir, 'wf.db')}`, workflows: { stuck: { timeoutGraceMs: 1_000 } } });
  const hosted = await serveWorkflowFixture(fixture);
  try {
    const row = runningRow(1, { startedAtMs: Date.now() - 60_000, deadlineMs: Date.now() - 5_000 });
    await hosted.deployment.store.workflowIndex.put(row.instanceId, row);
    const text = await hosted.deployment.coordinator.metrics.registry.metrics();
    assert.equal(gaugeLine(text, 'past-timeout'), '1', 'counted under the configured grace');
    assert.equal(gaugeLine(text, 'timer-overdue'), '0');
    const listed = await fetch(`${hosted.server.url}/workflow-instances?stuck=past-timeout`, { headers: { authorization: `Bearer ${fixture.tokens.ops}` } });
    assert.equal(listed.status, 200);
    const body = (await listed.json()) as { instances: Array<{ instanceId: string; stuck: string[] }> };
    assert.deepEqual(
      body.instances.map((i) => [i.instanceId, i.stuck]),
      [[row.instanceId, ['past-timeout']]],
    );
  } finally {
    await hosted.close();
    await fixture.dispose();
    await rm(dir, { recursive: true, force: true });
  }
});
