/**
 * run: workflow under a short lease: a parent that only waits for its child parks its lease (no
 * renewal appended while it waits), and the child's end drives it again to its completion.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { JsonValue } from '../../src/contract/json.js';
import { isWorkflowNamed } from '../../src/workflow/exec/document.js';
import type { WorkflowTransition } from '../../src/workflow/exec/events.js';
import { assertReplayEqual, harness, runToEnd, yaml } from './support.js';

const parent = yaml(`
document: { dsl: '1.0.3', namespace: t, name: parent, version: '1.0.0' }
do:
  - delegate:
      run:
        workflow: { namespace: t, name: child, version: '1.0.0' }
`);
const child = yaml(`
document: { dsl: '1.0.3', namespace: t, name: child, version: '1.0.0' }
do:
  - pause:
      wait: { milliseconds: 1500 }
  - done:
      set: { done: true }
`);

test('a parent waiting only for its child parks its lease; the child’s end drives it to completion', async () => {
  const documents: JsonValue[] = [child];
  const h = harness({ leaseMs: 300, workflows: (_digest, ref) => documents.find((document) => isWorkflowNamed(document, ref)) });
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
