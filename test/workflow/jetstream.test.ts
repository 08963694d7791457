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
import { storeClockAhead } from '../support/store-clock.js';
import { workflowIndexRowOfLog } from '../../src/workflow/exec/index-row.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { harness, runToEnd, yaml } from './support.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { pruneWorkflowInstances } from '../../src/workflow/exec/retention.js';
import { replayInstances } from '../../src/cli/commands/workflow-ops.js';

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
    // A start repeated under its key finds the ended instance and leaves no running mark behind.
    const again = await a.executor.start({
      principalId: 'alice',
      invocationKey: 'js-1',
      document: yaml(`${head}do:\n  - add:\n      set: { n: '\${ .n + 1 }' }\n`),
      input: { n: 1 },
    });
    assert.deepEqual(again, { instanceId: record.instanceId, created: false });
    const running: string[] = [];
    for await (const id of storeB.runningWorkflowIds()) running.push(id);
    assert.deepEqual(running, [], 'no instance is marked running');

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

test("workflow instances on JetStream: a running instance's rows after its start wait and are replaced, its start's and its end's are written at once; a reader elsewhere sees a row behind, never wrong", async () => {
  const server = await startJetStreamServer();
  const clock = new SystemClock();
  // A row delay no run here outlasts: what waits is written only by a later row, a get or a list.
  const storeA = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000, indexRowDelayMs: 60_000 });
  const storeB = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  const a = harness({ store: storeA, clock });
  try {
    const head = `document: { dsl: '1.0.3', namespace: test, name: rows, version: '1.0.0' }\n`;
    const steps = ['one', 'two', 'three'].map((name) => `  - ${name}:\n      wait: { milliseconds: 20 }\n`).join('');
    const before = await indexLastSeq(server.url);
    const record = await runToEnd(a, yaml(`${head}do:\n${steps}  - done:\n      set: { ok: true }\n`), {}, 'rows-1');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const log = await workflowStreams(storeB).read(record.instanceId);
    assert.ok(log.kind === 'ok' && log.transitions.length >= 4, 'each wait commits its timer and its firing');
    assert.equal((await indexLastSeq(server.url)) - before, 2, 'one row for the start, one for the end');
    assert.deepEqual(await storeB.workflowIndex.get(record.instanceId), workflowIndexRowOfLog(log.kind === 'ok' ? log.transitions : []));

    // Parked in a long wait after a short one: the row after its start waits in storeA.
    const park = async (key: string) => {
      const { instanceId } = await a.executor.start({
        principalId: 'alice',
        invocationKey: key,
        document: yaml(`${head}do:\n  - short:\n      wait: { milliseconds: 1 }\n  - long:\n      wait: { seconds: 60 }\n`),
        input: {},
      });
      // Parked means the long wait's timer is committed: the task's start and its timer are two appends,
      // and a row read between them would be overtaken by the second.
      const longDue = Date.now() + 30_000;
      let current: ReturnType<typeof workflowIndexRowOfLog>;
      for (;;) {
        const parked = await workflowStreams(storeB).read(instanceId);
        assert.equal(parked.kind, 'ok');
        current = workflowIndexRowOfLog(parked.kind === 'ok' ? parked.transitions : []);
        if ((current?.nextDueMs ?? 0) > longDue) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      const elsewhere = await storeB.workflowIndex.get(instanceId);
      assert.equal(elsewhere?.status, 'running');
      assert.ok(Number(elsewhere.revision) < Number(current?.revision), 'another client reads the start row, behind the log');
      return { instanceId, current };
    };
    const got = await park('rows-2');
    assert.deepEqual(await storeA.workflowIndex.get(got.instanceId), got.current, 'the holder answers the current row (writing it first)');
    assert.deepEqual(await storeB.workflowIndex.get(got.instanceId), got.current, 'written: every client reads it now');
    const listed = await park('rows-3');
    const page = await storeA.workflowIndex.list({ limit: 10, status: 'running' });
    assert.deepEqual(
      page.rows.find((row) => row.instanceId === listed.instanceId),
      listed.current,
      "the holder's list answers the current row (writing the waiting rows first)",
    );
    assert.deepEqual(await storeB.workflowIndex.get(listed.instanceId), listed.current);
  } finally {
    await a.close();
    await storeA.close();
    await storeB.close();
    await server.dispose();
  }
});

/** The operations index stream's last sequence: how many rows were ever published to it. */
async function indexLastSeq(url: string): Promise<number> {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const nc = await connect({ servers: url });
  try {
    return (await (await jetstreamManager(nc)).streams.info('CONVOKE_OPS_INDEX')).state.last_seq;
  } finally {
    await nc.close();
  }
}

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

test('workflow instances on JetStream expire: an ended one is tombstoned, its index row goes, its key is never started again, a replay of the store skips it', async () => {
  const server = await startJetStreamServer();
  const clock = new SystemClock();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  const h = harness({ store, clock });
  try {
    const head = `document: { dsl: '1.0.3', namespace: test, name: expiring, version: '1.0.0' }\n`;
    const document = yaml(`${head}do:\n  - done:\n      set: { done: true }\n`);
    const record = await runToEnd(h, document, {}, 'expiring');
    const running = await h.executor.start({
      principalId: 'alice',
      invocationKey: 'waits',
      document: yaml(`${head}do:\n  - pause:\n      wait: { minutes: 10 }\n`),
      input: {},
    });
    const hour = 3_600_000;
    const tally = await pruneWorkflowInstances({ store: storeClockAhead(store, hour + 60_000), nowMs: Date.now() + hour + 60_000, keepMs: hour });
    assert.deepEqual([tally.pruned, tally.running, tally.failures], [1, 1, []], JSON.stringify(tally));
    assert.equal((await store.read(record.instanceId)).kind, 'expired');
    assert.equal(await store.workflowIndex.get(record.instanceId), undefined, 'the row goes');
    const listed = await store.workflowIndex.list({ limit: 10 });
    assert.deepEqual(
      listed.rows.map((row) => row.instanceId),
      [running.instanceId],
    );
    const ids: string[] = [];
    for await (const id of store.workflowInstanceIds()) ids.push(id);
    assert.deepEqual(ids, [running.instanceId], 'the pruned instance is not listed');
    assert.deepEqual(
      (await replayInstances(store, false)).map((row) => [row.instanceId, row.problem]),
      [[running.instanceId, null]],
    );
    // Another client (a fresh view of the index) sees the row gone as well.
    const other = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
    try {
      assert.equal(await other.workflowIndex.get(record.instanceId), undefined);
      const fresh = harness({ store: other, clock });
      try {
        await assert.rejects(
          fresh.executor.start({ principalId: 'alice', invocationKey: 'expiring', document, input: {} }),
          (error) => isAdapterError(error) && error.kind === 'expired',
        );
      } finally {
        await fresh.close();
      }
    } finally {
      await other.close();
    }
  } finally {
    await h.close();
    await store.close();
    await server.dispose();
  }
});

test('workflow instances on JetStream: one another client pruned is let go by an executor that held it, told by the store’s watch', async () => {
  const server = await startJetStreamServer();
  const clock = new SystemClock();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  const pruner = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  const h = harness({ store, clock });
  try {
    await h.executor.watch();
    const head = `document: { dsl: '1.0.3', namespace: test, name: pruned-elsewhere, version: '1.0.0' }\n`;
    const record = await runToEnd(h, yaml(`${head}do:\n  - done:\n      set: { secret: 42 }\n`), {}, 'pruned-elsewhere');
    assert.deepEqual((await h.executor.get(record.instanceId))?.output, { secret: 42 }, 'held in memory');
    const hour = 3_600_000;
    const tally = await pruneWorkflowInstances({ store: storeClockAhead(pruner, hour + 60_000), nowMs: Date.now() + hour + 60_000, keepMs: hour });
    assert.deepEqual([tally.pruned, tally.failures], [1, []], JSON.stringify(tally));
    const expired = () =>
      h.executor.get(record.instanceId).then(
        () => false,
        (error: unknown) => isAdapterError(error) && error.kind === 'expired',
      );
    const deadlineMs = Date.now() + 5000;
    while (!(await expired())) {
      assert.ok(Date.now() < deadlineMs, 'the executor still answers the pruned instance from memory');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await h.close();
    await pruner.close();
    await store.close();
    await server.dispose();
  }
});

test('workflow instances on JetStream under a small max_payload: a value under the held bound the store cannot take faults the task that made it, at its pointer, caught around it', async () => {
  // The store's transition size follows the server's max_payload (20 KiB): a fork's output of about 24 KB is past it.
  const server = await startJetStreamServer({ maxPayload: 20 * 1024 });
  const clock = new SystemClock();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  const h = harness({ store, clock });
  const head = `document: { dsl: '1.0.3', namespace: test, name: js-small, version: '1.0.0' }\n`;
  const fork = `fork:
        branches:
          - left:
              set: { text: '\${ "l" * 12000 }' }
          - right:
              set: { text: '\${ "r" * 12000 }' }`;
  try {
    const record = await runToEnd(h, yaml(`${head}do:\n  - review:\n      ${fork}\n  - after:\n      set: { done: true }\n`), {}, 'js-small-1');
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.instance, '/do/0/review', JSON.stringify(record.error));
    assert.match(record.error?.detail ?? '', /the output of task review is \d+ bytes of JSON/);
    assert.equal(Object.values(record.tasks).find((task) => task.ref === '/do/0/review')?.state, 'faulted');
    const caught = await runToEnd(
      h,
      yaml(`${head}do:
  - guarded:
      try:
        - review:
            ${fork.replace(/\n/g, '\n      ')}
      catch:
        errors: { with: { type: 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime' } }
        do:
          - fallback:
              set: { fallback: true }
`),
      {},
      'js-small-2',
    );
    assert.equal(caught.status, 'completed', JSON.stringify(caught.error));
    assert.deepEqual(caught.output, { fallback: true });
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
    await store.close();
    await server.dispose();
  }
});
