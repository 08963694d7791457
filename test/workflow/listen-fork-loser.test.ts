/**
 * A listen in a competing fork's losing branch: once the log records another branch's win, the
 * losers are stopped and then recorded cancelled (tasks.ts releaseLosers), which may take a while
 * (a loser unwinding, its child operations disposed, a worker that died in between). Nothing reads
 * what such a listen takes: from the win, it takes nothing, and its events are answered no-match
 * over NATS (a real nats-server, request/reply).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { heldEvaluator, withIntake } from './intake-support.js';
import { assertReplayEqual, eventually, yaml } from './support.js';

/** `quick` wins after a wait; in `slow`, `hear` listens while `busy` evaluates an expression this test holds. */
const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: fork-loser, version: '1.0.0' }
do:
  - race:
      fork:
        compete: true
        branches:
          - quick:
              wait: { milliseconds: 100 }
          - slow:
              fork:
                branches:
                  - hear:
                      listen:
                        to:
                          one: { with: { type: com.example.ready } }
                  - busy:
                      set: { x: '\${ "held" }' }
`);

const hear = '/do/0/race/fork/branches/1/slow/fork/branches/0/hear{1}{0}';
const ready: CloudEvent = { specversion: '1.0', id: 'r-1', source: 'https://convoke.dev/test', type: 'com.example.ready', data: {} };

test('a listen in a competing fork’s losing branch takes nothing once the win is recorded, before the losers are recorded cancelled', async () => {
  // busy's expression is answered only once released: the losing branch cannot unwind before.
  const held = heldEvaluator((query) => query.includes('held'));
  await withIntake({ evaluator: held.evaluator }, async (h, ask) => {
    try {
      const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'fork-loser', document, input: {} });
      await eventually(async () => (await h.executor.get(instanceId))?.winners['/do/0/race'] !== undefined, 'the win recorded');
      const record = (await h.executor.get(instanceId))!;
      assert.equal(record.winners['/do/0/race'], 0, 'quick won');
      assert.ok(record.listens[hear], 'the losing branch listened');
      assert.equal(record.tasks[hear]?.state, 'running', 'the losers are not recorded cancelled yet');

      assert.deepEqual(await ask(ready), { status: 'no-match' }, 'a losing branch’s listen takes nothing');
      assert.equal((await h.executor.get(instanceId))!.revision, record.revision, 'nothing stored');

      held.release();
      const ended = await h.executor.wait(instanceId, 5000);
      assert.equal(ended.status, 'completed', JSON.stringify(ended.error));
      assert.equal(ended.tasks[hear]?.state, 'cancelled');
      assert.equal(ended.listens[hear]!.events.length, 0);
      await assertReplayEqual(h, instanceId);
    } finally {
      // Before the harness closes: it waits for the evaluation held.
      held.release();
    }
  });
});
