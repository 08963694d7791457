/**
 * A start under a key that already names an instance — a client retrying, the same start sent
 * twice, a different input under the key — is answered from the stored instance: it runs none of
 * the workflow again (no expression evaluated, nothing offered to the store), whether the instance
 * is running or has ended, and however many such starts arrive at once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isAdapterError } from '../../src/contract/errors.js';
import { harness, yaml } from './support.js';

const counted = yaml(`
document: { dsl: '1.0.3', namespace: t, name: counted, version: '1.0.0' }
do:
  - add:
      set: { n: '\${ .n + 1 }' }
  - pause:
      wait: { minutes: 10 }
`);

const ended = yaml(`
document: { dsl: '1.0.3', namespace: t, name: ended, version: '1.0.0' }
do:
  - add:
      set: { n: '\${ .n + 1 }' }
`);

test('the same start again, or another input under its key, evaluates nothing of the workflow: it is answered from the stored instance', async () => {
  let evaluations = 0;
  const h = harness({
    evaluator: (jq) => ({
      evaluate: (...args) => {
        evaluations++;
        return jq.evaluate(...args);
      },
      close: () => jq.close(),
    }),
  });
  const start = (document: typeof counted, key: string, n: number) => h.executor.start({ principalId: 'alice', invocationKey: key, document, input: { n } });
  try {
    const running = await start(counted, 'running', 1);
    assert.equal(running.created, true);
    const afterStart = evaluations;
    assert.ok(afterStart > 0, 'the first start evaluated its first task');
    assert.deepEqual(await start(counted, 'running', 1), { instanceId: running.instanceId, created: false });
    const again = await Promise.all(Array.from({ length: 8 }, () => start(counted, 'running', 1)));
    assert.ok(again.every((answer) => answer.instanceId === running.instanceId && !answer.created));
    await assert.rejects(start(counted, 'running', 2), (error) => isAdapterError(error) && error.kind === 'conflict');
    assert.equal(evaluations, afterStart, 'no start again evaluated any of the running instance’s workflow');

    const done = await start(ended, 'ended', 1);
    const record = await h.executor.wait(done.instanceId, 5000);
    assert.deepEqual([record.status, record.output], ['completed', { n: 2 }]);
    const afterEnd = evaluations;
    assert.deepEqual(await start(ended, 'ended', 1), { instanceId: done.instanceId, created: false });
    await assert.rejects(start(ended, 'ended', 5), (error) => isAdapterError(error) && error.kind === 'conflict');
    assert.equal(evaluations, afterEnd, 'no start again evaluated any of the ended instance’s workflow');
  } finally {
    await h.close();
  }
});
