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
import { connect } from '@nats-io/transport-node';
import { serveCloudEvents } from '../../src/adapters/transport/nats-cloudevents.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { stallForTests } from '../../src/workflow/exec/jq.js';
import { startNatsServer } from '../support/nats-server.js';
import { assertReplayEqual, eventually, harness, yaml } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

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
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  // A 100 ms CPU-time deadline: a worker held without CPU is stopped after 1 s of wall time.
  const h = harness({ jq: { workers: 1, deadlineMs: 100, [stallForTests]: stall } });
  const subscription = serveCloudEvents(nc, 'test.events', h.executor);
  try {
    await subscription.ready();
    const ask = async () =>
      (await nc.request('test.events.com.example.approved', JSON.stringify(approved), { timeout: 10_000 })).json<{
        status: string;
        count?: number;
        error?: { kind: string; message: string };
      }>();
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'unanswered', document, input: {} });
    await eventually(async () => (await h.executor.get(instanceId))?.listens['/do/0/wait'] !== undefined, 'the listen waiting');
    const revision = (await h.executor.get(instanceId))!.revision;

    Atomics.store(stall, 0, 1);
    const held = await ask();
    release();
    assert.equal(held.status, 'rejected', JSON.stringify(held));
    assert.equal(held.error?.kind, 'unavailable');
    assert.match(held.error?.message ?? '', /not answered within 1000 ms of wall time/);
    assert.equal((await h.executor.get(instanceId))!.revision, revision, 'nothing stored');

    assert.deepEqual(await ask(), { status: 'accepted', count: 1 }, 'the send again is taken');
    const ended = await h.executor.wait(instanceId, 5000);
    assert.equal(ended.status, 'completed', JSON.stringify(ended.error));
    await assertReplayEqual(h, instanceId);
  } finally {
    release();
    await subscription.close();
    await h.close();
    await nc.close();
    await server.dispose();
  }
});
