/**
 * Workflow instances on JetStream: subject `convoke.wf.<instanceId>` in the operations stream,
 * the same CAS and guard-on-fold rules. An instance runs to its end on one client, its log reads
 * back through another (replay equals the live record), and a second executor on another
 * connection resumes an instance the first one left in a wait.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { SystemClock } from '../../src/contract/clock.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { workflowIndexRowOfLog } from '../../src/workflow/exec/index-row.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { harness, runToEnd, yaml } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

test('workflow instances on JetStream: their own subject, replay equal, resumed by another executor', async () => {
  const server = await startJetStreamServer();
  const clock = new SystemClock();
  const storeA = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  const storeB = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  const a = harness({ store: storeA, clock });
  const b = harness({ store: storeB, clock });
  try {
    const head = `document: { dsl: '1.0.3', namespace: test, name: js, version: '1.0.0' }\n`;
    const record = await runToEnd(a, yaml(`${head}do:\n  - add:\n      set: { n: '\${ .n + 1 }' }\n`), { n: 1 }, 'js-1');
    assert.deepEqual(record.output, { n: 2 });
    const subjects = await storeSubjects(server.url);
    assert.ok(subjects.includes(`convoke.wf.${record.instanceId}`), subjects.join(', '));
    const operations: string[] = [];
    for await (const id of storeA.operationIds()) operations.push(id);
    assert.deepEqual(operations, []);

    const { instanceId } = await a.executor.start({
      principalId: 'alice',
      invocationKey: 'js-2',
      document: yaml(`${head}do:\n  - pause:\n      wait: { milliseconds: 500 }\n  - done:\n      set: { ok: true }\n`),
      input: {},
    });
    while (Object.keys((await a.executor.get(instanceId))?.timers ?? {}).length === 0) await new Promise((r) => setTimeout(r, 10));
    await a.close();
    const resumed = await b.executor.wait(instanceId, 10_000);
    assert.equal(resumed.status, 'completed', JSON.stringify(resumed.error));
    assert.deepEqual(resumed.output, { ok: true });
    assert.deepEqual(await b.executor.replay(instanceId), resumed);

    // The workflow instances index: each row is its log's projection, listed through either client.
    for (const id of [record.instanceId, instanceId]) {
      const read = await workflowStreams(storeB).read(id);
      assert.equal(read.kind, 'ok');
      assert.deepEqual(await storeA.workflowIndex.get(id), workflowIndexRowOfLog(read.kind === 'ok' ? read.transitions : []));
    }
    const page = await storeA.workflowIndex.list({ limit: 1, status: 'completed' });
    assert.deepEqual(
      page.rows.map((r) => r.instanceId),
      [instanceId],
      'newest start first, as the other client wrote it',
    );
    assert.ok(page.next);
    const rest = await storeB.workflowIndex.list({ limit: 5, status: 'completed', after: page.next });
    assert.deepEqual(
      rest.rows.map((r) => r.instanceId),
      [record.instanceId],
    );
  } finally {
    await a.close();
    await b.close();
    await storeA.close();
    await storeB.close();
    await server.dispose();
  }
});

async function storeSubjects(url: string): Promise<string[]> {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const nc = await connect({ servers: url });
  try {
    const info = await (await jetstreamManager(nc)).streams.info('CONVOKE_OPS', { subjects_filter: '>' });
    return Object.keys(info.state.subjects ?? {});
  } finally {
    await nc.close();
  }
}
