/**
 * An event filter's expression that the jq evaluator could not answer — its worker not scheduled
 * until the wall-time cap stopped it (jq.ts), which says nothing of the event — leaves the event
 * undecided, not unmatched: over NATS (a real nats-server, request/reply) it is answered
 * `unavailable` and stored nowhere, and the publisher's next send is taken. Answered `no-match`,
 * it would tell the publisher no listen wanted it, and an emitted event (never answered, delivered
 * again only when unavailable) would be lost.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { stallForTests } from '../../src/workflow/exec/jq.js';
import { withIntake } from './intake-support.js';
import { assertReplayEqual, eventually, yaml } from './support.js';

const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: filter-unanswered, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          one: { with: { type: com.example.approved, data: '\${ .ok == true }' } }
`);

const approved: CloudEvent = { specversion: '1.0', id: 'a-1', source: 'https://convoke.dev/test', type: 'com.example.approved', data: { ok: true } };

test('an event whose filter the evaluator could not answer (its worker stopped at the wall-time cap) is answered unavailable, stored nowhere, and taken when sent again', async () => {
  // Each jq worker waits here, using no CPU, before each evaluation while element 0 is 1.
  const stall = new Int32Array(new SharedArrayBuffer(4));
  const release = () => (Atomics.store(stall, 0, 0), Atomics.notify(stall, 0));
  try {
    // A 100 ms CPU-time deadline: a worker held without CPU is stopped after 1 s of wall time.
    await withIntake({ jq: { workers: 1, deadlineMs: 100, [stallForTests]: stall } }, async (h, ask) => {
      const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'unanswered', document, input: {} });
      await eventually(async () => (await h.executor.get(instanceId))?.listens['/do/0/wait'] !== undefined, 'the listen waiting');
      const revision = (await h.executor.get(instanceId))!.revision;

      Atomics.store(stall, 0, 1);
      const held = await ask(approved, 10_000);
      release();
      assert.equal(held.status, 'rejected', JSON.stringify(held));
      assert.equal(held.error?.kind, 'unavailable');
      assert.match(held.error?.message ?? '', /not answered within 1000 ms of wall time/);
      assert.equal((await h.executor.get(instanceId))!.revision, revision, 'nothing stored');

      assert.deepEqual(await ask(approved, 10_000), { status: 'accepted', count: 1 }, 'the send again is taken');
      const ended = await h.executor.wait(instanceId, 5000);
      assert.equal(ended.status, 'completed', JSON.stringify(ended.error));
      await assertReplayEqual(h, instanceId);
    });
  } finally {
    release();
  }
});
