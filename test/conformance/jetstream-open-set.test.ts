/**
 * The JetStream store's open set (src/adapters/store/jetstream-open-set.ts): recovery's listing
 * (openOperationIds) reads the operations that may be open, not the history, and still finds an
 * admission whose index row was never written; a store written before the open set existed is
 * listed from its history once, then from its markers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isOperationId } from '../../src/contract/ids.js';
import { randomBytes } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { connectNats } from '../../src/adapters/transport/nats.js';
import { jetstreamStorePermissions } from '../../src/deployment/nats/permissions.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';

type JetStreamServer = Awaited<ReturnType<typeof startJetStreamServer>>;
import { expectOk, newOperationId } from './store.js';
import { admission, lifecycle } from './index.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const requestTimeoutMs = 1500;
const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };

async function admit(store: JetStreamEventStore, label: string): Promise<string> {
  const id = newOperationId(label);
  expectOk(await store.create(id, admission(id, guard)), `create ${label}`);
  return id;
}

async function admitAndSettle(store: JetStreamEventStore, label: string): Promise<string> {
  const id = newOperationId(label);
  let outcome = await store.create(id, admission(id, guard));
  for (const next of lifecycle(guard)) {
    expectOk(outcome, `settle ${label}`);
    outcome = await store.append(id, outcome.revision, next);
  }
  expectOk(outcome, `settle ${label}`);
  return id;
}

async function listed(store: JetStreamEventStore): Promise<string[]> {
  const ids: string[] = [];
  for await (const id of store.index.openOperationIds()) ids.push(id);
  return ids.sort();
}

/** The open listing of a store on its own connection, and how many messages that connection received for it. */
async function listedCounting(server: JetStreamServer): Promise<{ ids: string[]; messagesIn: number }> {
  const nc = await connect({ servers: server.url });
  const store = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, stampWaitMs: 0 });
  try {
    const before = nc.stats().inMsgs;
    const ids = await listed(store);
    return { ids, messagesIn: nc.stats().inMsgs - before };
  } finally {
    await store.close();
    await nc.close();
  }
}

/** The operations' markers (the stream also holds workflow instances' markers and their record, `convoke.open.workflows`). */
async function markers(nc: NatsConnection): Promise<string[]> {
  const info = await (await jetstreamManager(nc)).streams.info('CONVOKE_OPS_OPEN', { subjects_filter: 'convoke.open.>' });
  return Object.keys(info.state.subjects ?? {})
    .map((s) => s.slice('convoke.open.'.length))
    .filter(isOperationId)
    .sort();
}

async function withServer(fn: (server: JetStreamServer, store: JetStreamEventStore, nc: NatsConnection) => Promise<void>): Promise<void> {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs });
  const nc = await connect({ servers: server.url });
  try {
    await fn(server, store, nc);
  } finally {
    await store.close();
    await nc.close();
    await server.dispose();
  }
}

test('jetstream: recovery lists the open operations from the open set: what it receives does not grow with the settled history', async () => {
  await withServer(async (server, store, nc) => {
    // A new deployment: the open set is complete from the start, so even the first listing reads markers only.
    const open = [await admit(store, 'open-a'), await admit(store, 'open-b')].sort();
    const settled: string[] = [];
    for (let i = 0; i < 150; i++) settled.push(await admitAndSettle(store, `settled-${i}`));
    // A settled operation's marker is purged off its append's path: soon, not necessarily yet.
    for (let tries = 0; (await markers(nc)).length > open.length && tries < 100; tries++) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(await markers(nc), open, 'settled operations leave the open set');
    const { ids, messagesIn } = await listedCounting(server);
    assert.deepEqual(ids, open);
    // A few requests (the record, the markers, one row each), not one message per operation stored.
    assert.ok(messagesIn < 30, `the listing received ${messagesIn} messages for ${open.length} open operations among ${settled.length + open.length}`);
  });
});

test('jetstream: once the open set is complete, an admission whose index row was never written is still listed, and its row is written from its log', async () => {
  await withServer(async (server, store) => {
    assert.deepEqual(await listed(store), []);
    // The row is not written, as if its writer had died after the append: it waits in the writer's memory.
    const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs: 600_000 });
    const orphan = await admit(writer, 'orphan');
    const second = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs });
    try {
      assert.equal(await second.index.get(orphan), undefined, 'no row was written');
      const settled = await admitAndSettle(second, 'settled');
      assert.equal((await second.index.get(settled))?.phase, 'settled');
      assert.deepEqual(await listed(second), [orphan], 'the admission without a row, not the settled operation');
      assert.equal((await second.index.get(orphan))?.phase, 'admitted', 'the listing wrote the missing row from the log');
    } finally {
      await second.close();
      await writer.close();
    }
  });
});

test('jetstream: a store written before the open set existed is listed from its history once, then from the markers that listing wrote', async () => {
  await withServer(async (server, store, nc) => {
    const open = [await admit(store, 'old-open-a'), await admit(store, 'old-open-b')].sort();
    for (let i = 0; i < 20; i++) await admitAndSettle(store, `old-settled-${i}`);
    // As before the open set: no markers, no record that the set is complete.
    await (await jetstreamManager(nc)).streams.delete('CONVOKE_OPS_OPEN');
    const upgraded = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs });
    try {
      assert.deepEqual(await markers(nc), []);
      assert.deepEqual(await listed(upgraded), open, 'from the history');
      assert.deepEqual(await markers(nc), open, 'each listed operation marked');
      const later = await listedCounting(server);
      assert.deepEqual(later.ids, open, 'from the markers');
      assert.ok(later.messagesIn < 30, `the second listing received ${later.messagesIn} messages`);
    } finally {
      await upgraded.close();
    }
  });
});

test('jetstream: a marker left behind by a settled or tombstoned operation is not listed, and the listing removes the settled one', async () => {
  await withServer(async (server, store, nc) => {
    assert.deepEqual(await listed(store), []);
    const open = await admit(store, 'open');
    const settled = await admitAndSettle(store, 'settled');
    const tombstoned = await admit(store, 'tombstoned');
    expectOk(await store.tombstone(tombstoned), 'tombstone');
    assert.deepEqual(await markers(nc), [open]);
    // As if the settled operation's marker purge had failed.
    await jetstream(nc).publish(`convoke.open.${settled}`, new Uint8Array(0));
    assert.deepEqual(await listed(store), [open]);
    assert.deepEqual(await markers(nc), [open]);
  });
});

test('jetstream: recovery finds a settled operation whose row was left at its admission and whose marker stayed (a crash between the settling append and its row): the row is written from the log and the marker removed', async () => {
  await withServer(async (server, store, nc) => {
    const settled = await admitAndSettle(store, 'row-behind');
    const settledRow = await store.index.get(settled);
    assert.equal(settledRow?.phase, 'settled');
    // The state a crash leaves: the admission's row last on its subject, and the marker.
    const admitted = { ...settledRow, phase: 'admitted', outcome: null, settlement: 'pending', decidedAtMs: null, settledAtMs: null, revision: '1' };
    await jetstream(nc).publish(`convoke.idx.${settled}`, JSON.stringify(admitted));
    await jetstream(nc).publish(`convoke.open.${settled}`, new Uint8Array(0));
    assert.equal((await store.index.get(settled))?.phase, 'admitted');
    const fresh = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs });
    try {
      assert.deepEqual(await listed(fresh), [], 'not listed as open');
      assert.equal((await fresh.index.get(settled))?.phase, 'settled', 'its row written from the log');
      assert.deepEqual(await markers(nc), [], 'its marker removed');
    } finally {
      await fresh.close();
    }
  });
});

test('jetstream: a create whose marker cannot be written writes no admission', async () => {
  await withServer(async (server, store, nc) => {
    await (await jetstreamManager(nc)).streams.delete('CONVOKE_OPS_OPEN');
    const id = newOperationId('unmarked');
    const outcome = await store.create(id, admission(id, guard));
    assert.equal(outcome.kind, 'unavailable');
    assert.equal((await store.read(id)).kind, 'not-found');
  });
});

test("jetstream: a settled operation's marker is deleted by its sequence: a store principal not allowed to purge the open set removes it", async () => {
  const password = randomBytes(9).toString('hex');
  const denied = '$JS.API.STREAM.PURGE.CONVOKE_OPS_OPEN';
  const permissions = jetstreamStorePermissions({}, { manageStreams: true });
  assert.ok(permissions.publish.includes(denied));
  const publish = permissions.publish.filter((subject) => subject !== denied);
  const server = await startJetStreamServer({
    users: [
      { user: 'store', password, publish, subscribe: ['_INBOX.store.>'] },
      { user: 'admin', password },
    ],
  });
  const nc = await connectNats({ servers: server.url, user: 'store', pass: password, inboxPrefix: '_INBOX.store' });
  const admin = await connect({ servers: server.url, user: 'admin', pass: password });
  const store = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs });
  try {
    const open = await admit(store, 'open');
    const settled = await admitAndSettle(store, 'settled');
    const tombstoned = await admit(store, 'tombstoned');
    expectOk(await store.tombstone(tombstoned), 'tombstone');
    // The settling append removes its marker off the append's path.
    await eventually(async () => (await markers(admin)).length === 1, 'the settled marker removed');
    assert.deepEqual(await markers(admin), [open]);
    assert.ok(!(await markers(admin)).includes(settled));
  } finally {
    await store.close();
    await nc.close();
    await admin.close();
    await server.dispose();
  }
});

test('jetstream: a marker written again since (another sequence) is still removed when its operation settles', async () => {
  await withServer(async (server, store, nc) => {
    const open = await admit(store, 'open');
    const id = newOperationId('marked-again');
    let outcome = await store.create(id, admission(id, guard));
    // Another process marks it again (recovery's rebuild of a row still open): the marker this
    // store stored is replaced (one per subject) by one at a later sequence.
    await jetstream(nc).publish(`convoke.open.${id}`, new Uint8Array(0));
    for (const next of lifecycle(guard)) {
      expectOk(outcome, 'settle');
      outcome = await store.append(id, outcome.revision, next);
    }
    expectOk(outcome, 'settle');
    await eventually(async () => (await markers(nc)).length === 1, 'the marker written again removed');
    assert.deepEqual(await markers(nc), [open]);
  });
});
