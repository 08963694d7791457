/**
 * What an outside publisher is told names no instance: an event on `<prefix>.<type>` reaches every
 * principal's listens, and its publisher is none of them (docs/workflows-executor.md, NATS: an
 * accepted event is answered with a count, never the instances). An event answered `unavailable`
 * because a listening instance's `until` verdict is still being evaluated says so without naming
 * that instance or its listen. Over a real nats-server, request/reply.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { heldEvaluator, withIntake } from './intake-support.js';
import { eventually, yaml } from './support.js';

const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: outside-answer, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          any: []
          until: ( . | length ) >= 2
`);

const tick = (id: string): CloudEvent => ({ specversion: '1.0', id, source: 'https://convoke.dev/test', type: 'com.example.tick', data: { id } });

test('an outside event answered unavailable while a listening instance’s until verdict is evaluated names neither that instance nor its listen', async () => {
  // The interpreter's until verdicts wait here until released.
  const held = heldEvaluator((query) => query.includes('length'));
  await withIntake({ evaluator: held.evaluator, listenUntilWaitMs: 200 }, async (h, ask) => {
    try {
      const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'outside-answer', document, input: {} });
      await eventually(async () => (await h.executor.get(instanceId))?.listens['/do/0/wait'] !== undefined, 'the listen waiting');
      assert.deepEqual(await ask(tick('t-1')), { status: 'accepted', count: 1 });

      const answer = await ask(tick('t-2'));
      assert.equal(answer.status, 'rejected', JSON.stringify(answer));
      assert.equal(answer.error?.kind, 'unavailable');
      assert.match(answer.error?.message ?? '', /until expression/, 'it says why');
      assert.ok(!answer.error?.message.includes(instanceId), `the answer names the instance: ${answer.error?.message}`);
      assert.ok(!answer.error?.message.includes('/do/0/wait'), `the answer names the listen: ${answer.error?.message}`);
    } finally {
      // Before the harness closes: it waits for the evaluation held.
      held.release();
    }
  });
});
