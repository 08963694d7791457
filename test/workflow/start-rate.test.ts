/**
 * The start rate per principal (config workflows.startRate): a caller's new instance past the
 * principal's bucket is refused `unavailable` before anything is recorded, and counted; a start
 * under a key that already names an instance is answered whatever the bucket holds; principals
 * have their own buckets; a `run: workflow` child takes a token of its parent's principal, and one
 * refused faults its parent's task (503).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { harness, quickDocument, workflowsAmong, yaml } from './support.js';

const quick = quickDocument;
const parent = yaml(`
document: { dsl: '1.0.3', namespace: t, name: parent, version: '1.0.0' }
do:
  - child:
      run:
        workflow: { namespace: t, name: quick, version: '1.0.0' }
`);

test('past a principal’s start rate a new instance is refused and counted, a run: workflow child’s too; known keys and other principals are not', async () => {
  const clock = new VirtualClock();
  const refusals: string[] = [];
  const h = harness({
    clock,
    startRate: { perSecond: 1, burst: 2 },
    onStartRefused: (starter, reason) => refusals.push(`${starter} ${reason}`),
    workflows: workflowsAmong([quick]),
  });
  const start = (key: string, principalId = 'alice', document = quick) => h.executor.start({ principalId, invocationKey: key, document, input: {} });
  try {
    const first = await start('k1');
    await start('k2');
    await assert.rejects(
      start('k3'),
      (error) => isAdapterError(error) && error.kind === 'unavailable' && /principal "alice" starts at most one workflow instance a second/.test(error.message),
    );
    assert.deepEqual(refusals, ['caller start-rate']);
    assert.equal((await h.executor.get(first.instanceId))?.instanceId, first.instanceId);
    assert.deepEqual(await start('k1'), { instanceId: first.instanceId, created: false }, 'a known key is answered with the bucket empty');
    // A start that finds its key taken gives its token back: a client's retries do not use up its rate.
    await clock.advance(1000);
    assert.deepEqual(await start('k1'), { instanceId: first.instanceId, created: false });
    assert.deepEqual(await start('k2'), { instanceId: (await start('k2')).instanceId, created: false });
    assert.equal((await start('k5')).created, true, 'the token the retries took back is there for a new instance');
    await assert.rejects(start('k6'), (error) => isAdapterError(error) && error.kind === 'unavailable');
    assert.deepEqual(refusals, ['caller start-rate', 'caller start-rate']);
    assert.equal((await start('k1', 'bob')).created, true, 'bob has his own bucket');
    await clock.advance(1000);
    // One token: the parent takes it, and its child, started by the workflow, finds none: the child's task faults.
    const starved = await start('starved', 'alice', parent);
    await clock.advance(0);
    const faulted = await h.executor.wait(starved.instanceId, 5000);
    assert.equal(faulted.status, 'faulted');
    assert.deepEqual([faulted.error?.status, faulted.error?.title, faulted.error?.instance], [503, 'Workflow start rate reached', '/do/0/child']);
    assert.match(faulted.error?.detail ?? '', /^principal "alice" starts at most one workflow instance a second/);
    assert.deepEqual(refusals, ['caller start-rate', 'caller start-rate', 'workflow start-rate']);
    // Two tokens: the parent takes one, its child the other; a caller's start after them finds none.
    await clock.advance(2000);
    const tree = await start('tree', 'alice', parent);
    await clock.advance(0);
    const record = await h.executor.wait(tree.instanceId, 5000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(Object.keys(record.subworkflows).length, 1);
    await assert.rejects(start('k4'), (error) => isAdapterError(error) && error.kind === 'unavailable');
    assert.deepEqual(refusals, ['caller start-rate', 'caller start-rate', 'workflow start-rate', 'caller start-rate']);
  } finally {
    await h.close();
  }
});
