/**
 * Payload expiry on JetStream when a tombstone stops half-way. The store tombstones in several
 * writes (key record, marker, purge of the payload below the marker, removal of the index row);
 * once the marker is stored every read answers `expired`. A prune whose purge, or whose index row
 * removal, failed after the marker leaves the operation listed: the next prune tombstones it
 * again, which finishes it — the payload purged, the marker kept, the index row gone.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JetStreamManager } from '@nats-io/jetstream';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { pruneOperations } from '../../src/runtime/retention.js';
import { replayCommand } from '../../src/cli/commands/ops.js';
import { captureIo } from '../support/cli-io.js';
import { harness, yaml } from '../workflow/support.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { storeClockAhead } from '../support/store-clock.js';
import { expectOk, newOperationId } from '../conformance/store.js';
import { admission, lifecycle } from '../conformance/index.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const hour = 3_600_000;
const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };

/** An operation admitted and settled (complete), as a coordinator writes it. */
async function settled(store: JetStreamEventStore, label: string): Promise<string> {
  const id = newOperationId(label);
  let outcome = await store.create(id, admission(id, guard));
  expectOk(outcome, `admit ${label}`);
  for (const t of lifecycle(guard)) {
    outcome = await store.append(id, outcome.revision, t);
    expectOk(outcome, `${label} ${t.causation.command}`);
  }
  return id;
}

test('jetstream prune: a tombstone whose purge or index row removal failed after its marker is finished by the next prune', async () => {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000, indexRowDelayMs: 0 });
  try {
    const { jsm, streamName } = store as unknown as { jsm: JetStreamManager; streamName: string };
    const [purgeFails, removeFails] = [await settled(store, 'purge-fails'), await settled(store, 'remove-fails')];
    const messages = async (id: string) =>
      (await jsm.streams.info(streamName, { subjects_filter: `convoke.op.${id}` })).state.subjects?.[`convoke.op.${id}`] ?? 0;
    const listed = async () => (await store.index.list({ limit: 10 })).rows.map((row) => row.operationId).sort();
    assert.deepEqual(await listed(), [purgeFails, removeFails].sort());
    const held = await messages(purgeFails);
    assert.equal(held, 1 + lifecycle(guard).length);

    // Once each: the purge of one operation's payload and the removal of the other's index row fail.
    const purge = jsm.streams.purge.bind(jsm.streams);
    let purgeFailures = 1;
    jsm.streams.purge = async (stream, options) => {
      if (JSON.stringify(options).includes(purgeFails) && purgeFailures-- > 0) throw new Error('TIMEOUT (injected)');
      return purge(stream, options);
    };
    const remove = store.index.remove.bind(store.index);
    let removeFailures = 1;
    store.index.remove = async (id) => {
      if (id === removeFails && removeFailures-- > 0) throw new Error('TIMEOUT (injected)');
      return remove(id);
    };

    const nowMs = Date.now() + 2 * hour;
    // Measured on the server's clock, as if two hours on.
    const aged = storeClockAhead(store, 2 * hour);
    const first = await pruneOperations({ store: aged, nowMs, keepMs: hour });
    assert.deepEqual([first.examined, first.pruned, first.failures.length], [2, 0, 2], JSON.stringify(first));
    for (const id of [purgeFails, removeFails]) assert.equal((await store.read(id)).kind, 'expired', 'the marker is stored: reads answer expired');
    assert.equal(await messages(purgeFails), held + 1, 'the payload is still there, the marker after it');
    assert.equal(await messages(removeFails), 1, 'purged down to the marker');
    assert.deepEqual(await listed(), [purgeFails, removeFails].sort(), 'both still listed');

    const dry = await pruneOperations({ store: aged, nowMs, keepMs: hour, dryRun: true });
    assert.deepEqual([dry.examined, dry.pruned, dry.finished, dry.gone], [2, 2, 2, 0], 'a dry run counts what the prune would finish');
    assert.equal(await messages(purgeFails), held + 1, 'and changes nothing');

    const second = await pruneOperations({ store: aged, nowMs, keepMs: hour });
    assert.deepEqual([second.examined, second.pruned, second.finished, second.gone, second.failures], [2, 2, 2, 0, []], JSON.stringify(second));
    for (const id of [purgeFails, removeFails]) {
      assert.equal(await messages(id), 1, 'only the marker is left');
      assert.equal((await store.read(id)).kind, 'expired');
      assert.equal(await store.index.get(id), undefined, 'the index row is gone');
      const again = await store.create(id, admission(id, guard));
      assert.equal(again.kind, 'expired', `never recreated: ${JSON.stringify(again)}`);
    }
    assert.deepEqual(await listed(), []);
    const third = await pruneOperations({ store: aged, nowMs, keepMs: hour });
    assert.deepEqual([third.examined, third.pruned], [0, 0], 'nothing more to do');
  } finally {
    await store.close();
    await server.dispose();
  }
});

test('jetstream prune: the cutoff is measured on the server’s clock; a pruning process whose clock runs ahead prunes nothing younger than the period by it', async () => {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000, indexRowDelayMs: 0 });
  try {
    const id = await settled(store, 'fresh');
    const serverMs = await store.nowMs();
    assert.ok(Math.abs(serverMs - Date.now()) < 60_000, `the server's clock reads about now: ${serverMs}`);
    // Settled a moment ago by the server's clock; the pruning process's clock is two hours ahead.
    const skewed = await pruneOperations({ store, nowMs: Date.now() + 2 * hour, keepMs: hour });
    assert.deepEqual([skewed.examined, skewed.pruned], [0, 0], JSON.stringify(skewed));
    assert.ok(skewed.cutoffMs <= serverMs - hour, `the cutoff ${skewed.cutoffMs} is an hour before the server's clock ${serverMs}`);
    assert.equal((await store.read(id)).kind, 'ok', 'the payload is kept');
    // Once the server's clock is past the period, it goes.
    const later = await pruneOperations({ store: storeClockAhead(store, 2 * hour), nowMs: Date.now() + 2 * hour, keepMs: hour });
    assert.deepEqual([later.examined, later.pruned], [1, 1], JSON.stringify(later));
  } finally {
    await store.close();
    await server.dispose();
  }
});

test('jetstream: replay --fix-index finishes a tombstone stopped before its purge (payload purged, row removed), never only dropping the row the next prune needs', async () => {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000, indexRowDelayMs: 0 });
  try {
    const { jsm, streamName } = store as unknown as { jsm: JetStreamManager; streamName: string };
    const [halfDone, live] = [await settled(store, 'half-done'), await settled(store, 'live')];
    const messages = async (id: string) =>
      (await jsm.streams.info(streamName, { subjects_filter: `convoke.op.${id}` })).state.subjects?.[`convoke.op.${id}`] ?? 0;
    const held = await messages(halfDone);
    const purge = jsm.streams.purge.bind(jsm.streams);
    let purgeFailures = 1;
    jsm.streams.purge = async (stream, options) => {
      if (JSON.stringify(options).includes(halfDone) && purgeFailures-- > 0) throw new Error('TIMEOUT (injected)');
      return purge(stream, options);
    };
    // The one operation's tombstone stops after its marker: reads answer expired, the payload and the row are still there.
    const outcome = await store.tombstone(halfDone);
    assert.notEqual(outcome.kind, 'ok');
    assert.equal((await store.read(halfDone)).kind, 'expired');
    assert.equal(await messages(halfDone), held + 1);
    assert.ok(await store.index.get(halfDone), 'its row is still listed');

    const url = `jetstream:${server.url}`;
    const check = captureIo();
    assert.equal(await replayCommand(undefined, { store: url, json: true }, check), 1, check.err());
    const found = (JSON.parse(check.out()) as { rows: { operationId?: string; problem: string | null }[] }).rows;
    assert.deepEqual(
      found.filter((row) => row.operationId === halfDone).map((row) => [row.operationId, row.problem]),
      [[halfDone, 'an index row without a live log']],
    );
    const fix = captureIo();
    await replayCommand(undefined, { store: url, json: true, fixIndex: true }, fix);
    const fixed = (JSON.parse(fix.out()) as { rows: { operationId?: string; problem: string | null }[] }).rows;
    assert.deepEqual(
      fixed.filter((row) => row.operationId === halfDone).map((row) => [row.operationId, row.problem]),
      [[halfDone, 'an index row without a live log (its tombstone finished)']],
    );
    assert.equal(await messages(halfDone), 1, 'the payload purged: only the marker is left');
    assert.equal(await store.index.get(halfDone), undefined, 'the row removed after the purge');
    assert.equal((await store.read(live)).kind, 'ok', 'the live operation untouched');
    // (The live operation's conformance log fails replay's full schema check; only the pruned one matters here.)
    const again = captureIo();
    await replayCommand(undefined, { store: url, json: true }, again);
    const rows = (JSON.parse(again.out()) as { rows: { operationId?: string }[] }).rows;
    assert.deepEqual(
      rows.filter((row) => row.operationId === halfDone),
      [],
      'nothing left of it to report',
    );
  } finally {
    await store.close();
    await server.dispose();
  }
});

test('jetstream: replay --fix-index finishes a workflow instance’s tombstone stopped before its purge', async () => {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000, indexRowDelayMs: 0 });
  const h = harness({ store });
  try {
    const { jsm, streamName } = store as unknown as { jsm: JetStreamManager; streamName: string };
    const { instanceId } = await h.executor.start({
      principalId: 'alice',
      invocationKey: 'ended-1',
      document: yaml(`document: { dsl: '1.0.3', namespace: test, name: ended, version: '1.0.0' }
do:
  - done:
      set: { ok: true }
`),
      input: {},
    });
    assert.equal((await h.executor.wait(instanceId, 5000)).status, 'completed');
    const messages = async () =>
      (await jsm.streams.info(streamName, { subjects_filter: `convoke.wf.${instanceId}` })).state.subjects?.[`convoke.wf.${instanceId}`] ?? 0;
    const held = await messages();
    const purge = jsm.streams.purge.bind(jsm.streams);
    let purgeFailures = 1;
    jsm.streams.purge = async (stream, options) => {
      if (JSON.stringify(options).includes(instanceId) && purgeFailures-- > 0) throw new Error('TIMEOUT (injected)');
      return purge(stream, options);
    };
    assert.notEqual((await store.tombstone(instanceId)).kind, 'ok');
    assert.equal(await messages(), held + 1, 'the payload is still there, the marker after it');
    assert.ok(await store.workflowIndex.get(instanceId), 'its row is still listed');

    const fix = captureIo();
    await replayCommand(undefined, { store: `jetstream:${server.url}`, json: true, fixIndex: true }, fix);
    const rows = (JSON.parse(fix.out()) as { rows: { instanceId?: string; problem: string | null }[] }).rows;
    assert.deepEqual(
      rows.filter((row) => row.instanceId === instanceId).map((row) => row.problem),
      ['a workflow index row without a live log (its tombstone finished)'],
    );
    assert.equal(await messages(), 1, 'the payload purged: only the marker is left');
    assert.equal(await store.workflowIndex.get(instanceId), undefined, 'the row removed after the purge');
  } finally {
    await h.close();
    await store.close();
    await server.dispose();
  }
});
