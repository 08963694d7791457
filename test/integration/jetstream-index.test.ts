/**
 * The JetStream operations index's list and stuck counts (jetstream-index.ts, -feed.ts,
 * index-view.ts, docs/decisions/jetstream-list-view.md): a page costs one JetStream request and
 * the rows it walks, whatever the number of operations stored; pages are exact after another
 * client writes (rows, appends, tombstones) and stable while another client writes during
 * paging; a tombstoned operation's row never comes back; the view follows an index stream made
 * again; nothing a peer can publish lands in the index; a view works under the least-privilege
 * store permissions; a view starts from a snapshot (paged, or version 2 as an earlier build wrote
 * it) plus the rows after it, and one that is broken or stale is not used.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { JetStreamIndexFeed } from '../../src/adapters/store/jetstream-index-feed.js';
import { stuckBoundsDefault, type IndexQuery, type OperationIndexRow } from '../../src/events/operation-index.js';
import { workflowStuckBoundsDefault, type WorkflowIndexQuery, type WorkflowIndexRow } from '../../src/events/workflow-index.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { viewOfEveryRow, writeV2Snapshot, type V2Snapshot } from '../support/v2-index-snapshot.js';
import { workflowRowOf } from '../support/workflow-row.js';
import { encodeBody } from '../../src/adapters/store/jetstream-index-snapshot.js';
import { connectNats } from '../../src/adapters/transport/nats.js';
import { jetstreamStorePermissions } from '../../src/deployment/nats/permissions.js';
import { randomBytes } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { admission, lifecycle } from '../conformance/index.js';
import { expectOk, newOperationId, readOk } from '../conformance/store.js';
import { applyStored, fold } from '../../src/projections/record.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const requestTimeoutMs = 2_000;
/** Rows are published as each append is stored (no wait for a later row), except where a test is about that wait. */
const indexRowDelayMs = 0;
const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };

/** Counts the JetStream API requests a connection publishes (each request publishes once). */
function countApiRequests(nc: NatsConnection): { count: number } {
  const counter = { count: 0 };
  const target = nc as unknown as { publish: (...args: unknown[]) => unknown };
  const publish = target.publish.bind(nc);
  target.publish = (...args: unknown[]) => {
    if (String(args[0]).startsWith('$JS.API.')) counter.count++;
    return publish(...args);
  };
  return counter;
}

/** Admits `count` operations, 16 at a time: principals svc-0..3, two interactions. */
async function admit(store: JetStreamEventStore, count: number, label: string, from = 0): Promise<string[]> {
  const ids = Array.from({ length: count }, (_, i) => newOperationId(`${label}-${from + i}`));
  for (let i = 0; i < ids.length; i += 16) {
    await Promise.all(
      ids.slice(i, i + 16).map(async (id, k) => {
        const n = from + i + k;
        const outcome = await store.create(id, admission(id, guard, { principalId: `svc-${n % 4}`, interaction: n % 2 === 0 ? 'review' : 'quick' }));
        expectOk(outcome, `create ${n}`);
      }),
    );
  }
  return ids;
}

/** Appends the first `steps` lifecycle transitions (1: dispatched, 4: decided, 5: settled). */
async function advance(store: JetStreamEventStore, id: string, steps: number): Promise<void> {
  let revision = (await readOk(store, id)).revision;
  for (const next of lifecycle(guard).slice(0, steps)) {
    const outcome = await store.append(id, revision, next);
    expectOk(outcome, next.causation.command);
    revision = outcome.revision;
  }
}

/** Starts the client's view (a list before it reads the paged snapshot instead). */
async function startView(store: JetStreamEventStore): Promise<void> {
  await store.index.startView();
}

async function allPages(store: JetStreamEventStore, query: Omit<IndexQuery, 'after'>, between?: () => Promise<void>): Promise<OperationIndexRow[]> {
  const rows: OperationIndexRow[] = [];
  let after: IndexQuery['after'];
  for (let page = 0; page < 10_000; page++) {
    const result = await store.index.list({ ...query, ...(after ? { after } : {}) });
    rows.push(...result.rows);
    if (!result.next) return rows;
    after = result.next;
    await between?.();
  }
  throw new Error('paging did not end');
}

/** Workflow instance n's row: principals svc-0..2, every fourth one named `rare`. */
function workflowInstance(n: number, status: WorkflowIndexRow['status'], startedAtMs: number): WorkflowIndexRow {
  return workflowRowOf(n, {
    principalId: `svc-${n % 3}`,
    workflowName: n % 4 === 0 ? 'rare' : 'common',
    status,
    startedAtMs,
    endedAtMs: status === 'running' ? null : startedAtMs + 10,
    deadlineMs: startedAtMs + 60_000,
    revision: '3',
  });
}

async function allWorkflowPages(store: JetStreamEventStore, query: Omit<WorkflowIndexQuery, 'after'>): Promise<WorkflowIndexRow[]> {
  const rows: WorkflowIndexRow[] = [];
  let after: WorkflowIndexQuery['after'];
  for (let page = 0; page < 100; page++) {
    const result = await store.index.workflow.list({ ...query, ...(after ? { after } : {}) });
    rows.push(...result.rows);
    if (!result.next) return rows;
    after = result.next;
  }
  throw new Error('paging did not end');
}

/** A well-formed settled row (what the store's user writes), admitted at `admittedAtMs`. */
function rowFor(operationId: string, admittedAtMs: number): OperationIndexRow {
  return {
    operationId,
    principalId: 'alice',
    contractId: 'example.review',
    contractVersion: '1.0.0',
    interaction: 'review',
    phase: 'settled',
    outcome: 'success',
    settlement: 'complete',
    admittedAtMs,
    decidedAtMs: admittedAtMs,
    settledAtMs: admittedAtMs,
    deadlineMs: admittedAtMs,
    nextDueMs: null,
    openBranches: 0,
    lastRejection: null,
    leaseExpiresAtMs: null,
    outboxPendingSinceMs: null,
    revision: '1',
  };
}

const inListOrder = (rows: OperationIndexRow[]) =>
  rows.every(
    (r, i) =>
      i === 0 || rows[i - 1]!.admittedAtMs > r.admittedAtMs || (rows[i - 1]!.admittedAtMs === r.admittedAtMs && rows[i - 1]!.operationId > r.operationId),
  );

test('jetstream index: a page costs one request and walks only its rows, at 60 and at 600 operations alike', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  const reader = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, indexRowDelayMs, stampWaitMs: 0 });
  try {
    const limit = 20;
    const later = Date.now() + 3_600_000; // every undecided operation is stuck by then
    const queries: Array<[string, Omit<IndexQuery, 'limit' | 'after'>]> = [
      ['every principal', {}],
      ['one principal', { principalId: 'svc-1' }],
      ['one interaction', { interaction: 'quick' }],
      ['a phase', { phase: 'settled' }],
      ['one principal, a phase', { principalId: 'svc-2', phase: 'admitted' }],
      ['an outcome', { outcome: 'success' }],
      ['undecided', { outcome: 'open' }],
      ['a settlement', { settlement: 'complete' }],
      ['stuck', { stuck: { nowMs: later, bounds: stuckBoundsDefault } }],
      ['stuck, one reason', { stuck: { nowMs: later, bounds: stuckBoundsDefault, reason: 'outbox-pending' } }],
    ];
    const counter = countApiRequests(nc);
    let stored = 0;
    for (const size of [60, 600]) {
      const ids = await admit(writer, size - stored, `cost-${size}`);
      // A tenth of each batch settled: the settled-only filters have rows to page through.
      for (const id of ids.filter((_, i) => i % 10 === 0)) await advance(writer, id, 5);
      stored = size;
      await reader.index.list({ limit: 1 }); // the view is started and current (its start reads every row once)
      for (const [name, query] of queries) {
        let after: IndexQuery['after'];
        // The first page and two more by cursor.
        for (let page = 0; page < 3; page++) {
          const [requests, walked, delivered] = [counter.count, reader.index.rowsWalked, reader.index.rowsDelivered];
          const result = await reader.index.list({ ...query, limit, ...(after ? { after } : {}) });
          const cost = { requests: counter.count - requests, walked: reader.index.rowsWalked - walked, delivered: reader.index.rowsDelivered - delivered };
          assert.equal(cost.requests, 1, `${size}: ${name}, page ${page}: one request (the stream's last sequence)`);
          assert.equal(cost.delivered, 0, `${size}: ${name}, page ${page}: no row read from the stream`);
          assert.ok(cost.walked <= limit + 1, `${size}: ${name}, page ${page}: walked ${cost.walked} rows for ${result.rows.length}`);
          if (!result.next) break;
          after = result.next;
        }
      }
      const requests = counter.count;
      const counts = await reader.index.countStuck(later, stuckBoundsDefault);
      assert.equal(counter.count - requests, 1, `${size}: the stuck counts cost one request`);
      assert.equal(counts['outbox-pending'], size - Math.ceil(size / 10), `${size}: every undecided operation counted`);
    }
  } finally {
    await reader.close();
    await nc.close();
    await writer.close();
    await server.dispose();
  }
});

test("jetstream index: a page holds every row, append and tombstone another client stored before it, and a tombstoned operation's row never comes back", async () => {
  const server = await startJetStreamServer();
  const first = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  const second = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  try {
    const [kept, gone] = await admit(first, 2, 'exact');
    assert.equal((await second.index.list({ limit: 10 })).rows.length, 2, 'the second client sees the first client’s rows');
    const [added] = await admit(first, 1, 'exact-added');
    assert.ok(
      (await second.index.list({ limit: 10 })).rows.some((r) => r.operationId === added),
      'a row stored just before the page',
    );
    await advance(first, kept!, 4);
    assert.deepEqual(
      (await second.index.list({ limit: 10, outcome: 'success' })).rows.map((r) => r.operationId),
      [kept],
      'an append just before the page moves the row between filters',
    );
    assert.deepEqual(await second.index.countStuck(Date.now() + 3_600_000, stuckBoundsDefault), {
      'open-past-deadline': 2,
      'lease-expired': 2,
      'outbox-pending': 2,
      'settlement-indeterminate': 0,
    });
    // The second client remembers the row it would write next for `gone`.
    const log = await readOk(second, gone!);
    expectOk(await first.tombstone(gone!), 'tombstone');
    assert.ok(!(await second.index.list({ limit: 10 })).rows.some((r) => r.operationId === gone), 'a tombstone just before the page');
    // A late row for the tombstoned operation (a writer that stored its append before the
    // tombstone and writes the row after it, from its own record): refused by the marker.
    const late = { revision: String(Number(log.revision) + 1000), committedAtMs: Date.now(), transition: lifecycle(guard)[0]! };
    await second.index.appended(gone!, log.revision, late, (stored) => applyStored(fold(log.transitions), stored));
    assert.equal(await second.index.get(gone!), undefined, 'no row over the removal marker');
    assert.ok(!(await first.index.list({ limit: 10 })).rows.some((r) => r.operationId === gone));
  } finally {
    await second.close();
    await first.close();
    await server.dispose();
  }
});

test('jetstream index: a page waits for every row stored before it, even while its view is behind a burst of rows', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const reader = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  try {
    assert.deepEqual((await reader.index.list({ limit: 10 })).rows, [], 'the view runs, empty');
    // Thousands of rows published at once (as the store's user would write them): the view
    // applies them one by one, well after the last PubAck.
    const js = jetstream(nc);
    const burst = 3_000;
    const startMs = Date.now();
    await Promise.all(
      Array.from({ length: burst }, (_, i) => {
        const id = newOperationId(`burst-${i}`);
        return js.publish(`convoke.idx.${id}`, JSON.stringify(rowFor(id, startMs + i)));
      }),
    );
    const first = await reader.index.list({ limit: 5 });
    assert.equal(first.rows[0]?.admittedAtMs, startMs + burst - 1, 'the newest row, stored last, is on the first page');
    assert.equal((await allPages(reader, { limit: 500 })).length, burst);
  } finally {
    await reader.close();
    await nc.close();
    await server.dispose();
  }
});

/**
 * A feed of its own on an index stream made as a store makes it, on a server of its own, with the
 * client's JetStream handles to write and purge rows: all closed (feed, client, server) once
 * `body` ends.
 */
async function withIndexFeed(
  feedTimeoutMs: number,
  body: (fixture: { feed: JetStreamIndexFeed; js: ReturnType<typeof jetstream>; jsm: Awaited<ReturnType<typeof jetstreamManager>> }) => Promise<void>,
): Promise<void> {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  try {
    const jsm = await jetstreamManager(nc);
    const js = jetstream(nc);
    await jsm.streams.add({ name: 'CONVOKE_OPS_INDEX', subjects: ['convoke.idx.*'], max_msgs_per_subject: 1, allow_direct: true });
    const feed = await JetStreamIndexFeed.start({ js, jsm, stream: 'CONVOKE_OPS_INDEX', subjectPrefix: 'convoke.idx.', requestTimeoutMs: feedTimeoutMs });
    try {
      await body({ feed, js, jsm });
    } finally {
      await feed.close();
    }
  } finally {
    await nc.close();
    await server.dispose();
  }
}

test('jetstream index: a view answers only once it has applied the last row stored, however late its deliveries come', () =>
  withIndexFeed(requestTimeoutMs, async ({ feed, js }) => {
    await feed.current();
    // Deliveries held back 300 ms, as a consumer far behind (or on a slow link) would see them.
    const deliver = feed.deliver.bind(feed);
    feed.deliver = (msg) => void setTimeout(() => deliver(msg), 300);
    const id = newOperationId('late');
    await js.publish(`convoke.idx.${id}`, JSON.stringify(rowFor(id, Date.now())));
    const startedMs = Date.now();
    await feed.current();
    assert.ok(Date.now() - startedMs >= 250, 'current() waited for the delivery');
    assert.equal(feed.view.get(id)?.operationId, id, 'the row stored before the call is in the view');
  }));

// Long enough for any request on a loaded machine; "asked, not waited out" is still told from it.
const shortTimeoutMs = 5_000;

test('jetstream index: a view waiting for a row that was purged before its delivery goes on; one whose rows stop coming is unavailable', () =>
  withIndexFeed(shortTimeoutMs, async ({ feed, js, jsm }) => {
    const [kept, purged, held] = [newOperationId('kept'), newOperationId('purged'), newOperationId('held')];
    const deliver = feed.deliver.bind(feed);
    // The purged row never reaches the view, as when an earlier build purges it before delivery.
    feed.deliver = (msg) => {
      if (msg.subject.endsWith(purged) || msg.subject.endsWith(held)) return;
      deliver(msg);
    };
    await js.publish(`convoke.idx.${kept}`, JSON.stringify(rowFor(kept, Date.now())));
    await js.publish(`convoke.idx.${purged}`, JSON.stringify(rowFor(purged, Date.now())));
    await jsm.streams.purge('CONVOKE_OPS_INDEX', { filter: `convoke.idx.${purged}` });
    const startedMs = Date.now();
    await feed.current();
    assert.ok(Date.now() - startedMs < shortTimeoutMs, 'the stream was asked for its last stored row, not waited out');
    assert.deepEqual(
      feed.view.page({ limit: 10 }).rows.map((r) => r.operationId),
      [kept],
    );
    // A row that exists but never arrives: the wait ends, unavailable, after the timeout.
    await js.publish(`convoke.idx.${held}`, JSON.stringify(rowFor(held, Date.now())));
    await assert.rejects(feed.current(), (error: Error) => error.name === 'AdapterError' && /no row delivered/.test(error.message));
  }));

test('jetstream index: paging is stable while another client admits and appends during it', async () => {
  const server = await startJetStreamServer();
  const reader = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  try {
    const existing = await admit(writer, 40, 'stable');
    let writing = true;
    const added: string[] = [];
    // Concurrently with the paging below, not between pages: admissions (newer than every row) and appends.
    const writes = (async () => {
      for (let i = 0; writing; i++) {
        added.push(...(await admit(writer, 1, `stable-added-${i}`)));
        const target = existing[i % existing.length]!;
        const log = await readOk(writer, target);
        if (log.transitions.length < 6) expectOk(await writer.append(target, log.revision, lifecycle(guard)[log.transitions.length - 1]!), 'append');
      }
    })();
    const rows = await allPages(reader, { limit: 3 }, () => new Promise((resolve) => setTimeout(resolve, 5)));
    writing = false;
    await writes;
    const seen = rows.map((r) => r.operationId);
    assert.equal(new Set(seen).size, seen.length, 'no operation twice');
    for (const id of existing) assert.ok(seen.includes(id), `every operation that existed when paging began (${id})`);
    assert.ok(inListOrder(rows), 'list order');
    assert.ok(added.length > 0, 'the writer wrote while the reader paged');
  } finally {
    await writer.close();
    await reader.close();
    await server.dispose();
  }
});

test('jetstream index: a view follows the index stream when it is created again', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const first = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  let second: JetStreamEventStore | undefined;
  try {
    const [before] = await admit(first, 1, 'again');
    assert.equal((await first.index.list({ limit: 10 })).rows[0]?.operationId, before);
    await (await jetstreamManager(nc)).streams.delete('CONVOKE_OPS_INDEX');
    second = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs }); // creates it again, empty
    const [after] = await admit(second, 1, 'again-after');
    assert.deepEqual(
      (await first.index.list({ limit: 10 })).rows.map((r) => r.operationId),
      [after],
      'the rows of the stream as it is now (the earlier row went with the stream until replay --fix-index writes it)',
    );
  } finally {
    await second?.close();
    await first.close();
    await nc.close();
    await server.dispose();
  }
});

test('jetstream index: a view starts from the newest snapshot and reads only the rows stored after it, answering what a view of every row answers', async () => {
  const server = await startJetStreamServer();
  const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  const first = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs, indexSnapshotTailMin: 1 });
  let second: JetStreamEventStore | undefined;
  let whole: JetStreamEventStore | undefined;
  try {
    const ids = await admit(writer, 30, 'snap');
    for (const id of ids.slice(0, 5)) await advance(writer, id, 4);
    await first.index.list({ limit: 1 }); // the first view reads every row and writes a snapshot of them
    await first.index.snapshotIdle();
    assert.equal(first.index.rowsFromSnapshot, 0, 'no snapshot existed for the first view');
    // After the snapshot: new operations first (the tail's first message), rows it holds superseded, a tombstone.
    const added = await admit(writer, 6, 'snap-after');
    for (const id of ids.slice(3, 8)) await advance(writer, id, 5);
    expectOk(await writer.tombstone(ids[10]!), 'tombstone');
    expectOk(await writer.tombstone(added[2]!), 'tombstone');
    second = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
    whole = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs, indexSnapshotTailMin: 0 });
    await startView(second);
    assert.equal(second.index.rowsFromSnapshot, 30, 'the second view started from the snapshot');
    // The stream keeps each subject's last message: 6 new subjects (one now a removal marker), 5 settled rows, 1 more marker.
    assert.equal(second.index.rowsDelivered, 12, 'the second view read only the tail from the stream');
    const later = Date.now() + 3_600_000;
    const queries: Array<Omit<IndexQuery, 'after'>> = [
      { limit: 7 },
      { limit: 5, principalId: 'svc-1' },
      { limit: 5, phase: 'settled' },
      { limit: 5, outcome: 'open' },
      { limit: 5, stuck: { nowMs: later, bounds: stuckBoundsDefault } },
    ];
    for (const query of queries) {
      const expected = await allPages(whole, query);
      assert.deepEqual(await allPages(second, query), expected, `${JSON.stringify(query)}: as a view of every row`);
      assert.deepEqual(await allPages(first, query), expected, `${JSON.stringify(query)}: as the view that wrote the snapshot`);
    }
    assert.equal((await allPages(second, { limit: 50 })).length, 34);
    assert.deepEqual(await second.index.countStuck(later, stuckBoundsDefault), await whole.index.countStuck(later, stuckBoundsDefault));
  } finally {
    await whole?.close();
    await second?.close();
    await first.close();
    await writer.close();
    await server.dispose();
  }
});

test('jetstream index: nothing a peer can publish lands in the index', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  try {
    const jsm = await jetstreamManager(nc);
    const js = jetstream(nc);
    const id = newOperationId('forged');
    const forged = rowFor(id, Date.now());
    // A stream as an earlier build made it (`convoke.idx.>`), holding what a peer of namespace
    // `convoke`, interaction `idx` may publish: `convoke.idx.<operation>.result.<peer>`.
    await jsm.streams.add({ name: 'CONVOKE_OPS_INDEX', subjects: ['convoke.idx.>'], max_msgs_per_subject: 1, allow_direct: true });
    await js.publish(`convoke.idx.${id}.result.alfa`, JSON.stringify(forged));
    const feed = await JetStreamIndexFeed.start({ js, jsm, stream: 'CONVOKE_OPS_INDEX', subjectPrefix: 'convoke.idx.', requestTimeoutMs });
    try {
      await feed.current();
      assert.equal(feed.view.size, 0, 'a view reads row subjects only (one token after idx)');
    } finally {
      await feed.close();
    }
    // A store narrows the stream to row subjects: the peer's subject is no longer taken at all.
    const store = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, indexRowDelayMs });
    try {
      assert.deepEqual((await jsm.streams.info('CONVOKE_OPS_INDEX')).config.subjects, ['convoke.idx.*']);
      await assert.rejects(js.publish(`convoke.idx.${id}.result.bravo`, JSON.stringify(forged), { timeout: 1_000 }), 'no stream stores it');
      assert.deepEqual((await store.index.list({ limit: 10 })).rows, []);
      assert.equal(await store.index.get(id), undefined);
    } finally {
      await store.close();
    }
  } finally {
    await nc.close();
    await server.dispose();
  }
});

test('jetstream index: under the least-privilege store permissions a view starts, follows another client and answers pages; a view writes a paged snapshot and a one-shot client lists from it', async () => {
  const password = randomBytes(9).toString('hex');
  const permissions = jetstreamStorePermissions({}, { manageStreams: true });
  const server = await startJetStreamServer({ users: [{ user: 'store', password, publish: permissions.publish, subscribe: ['_INBOX.store.>'] }] });
  const open = async (indexSnapshotTailMin?: number) => {
    const nc = await connectNats({ servers: server.url, user: 'store', pass: password, inboxPrefix: '_INBOX.store' });
    const notices: string[] = [];
    const options = { connection: nc, requestTimeoutMs, indexRowDelayMs, indexSnapshotPageRows: 5, onNotice: (line: string) => notices.push(line) };
    return { nc, notices, store: await JetStreamEventStore.open({ ...options, ...(indexSnapshotTailMin === undefined ? {} : { indexSnapshotTailMin }) }) };
  };
  const reader = await open();
  const writer = await open();
  const pager = await open(1);
  const oneShot = await open();
  try {
    const ids = await admit(writer.store, 20, 'least');
    await startView(pager.store);
    await pager.store.index.snapshotIdle();
    assert.deepEqual(new Set((await allPages(oneShot.store, { limit: 7 })).map((r) => r.operationId)), new Set(ids));
    assert.deepEqual([oneShot.store.index.paged.lists > 0, oneShot.store.index.rowsDelivered], [true, 0], 'the one-shot client read the pages');
    assert.deepEqual([...pager.notices, ...oneShot.notices], []);
  } finally {
    await pager.store.close();
    await oneShot.store.close();
    await pager.nc.close();
    await oneShot.nc.close();
  }
  try {
    const ids = (await allPages(reader.store, { limit: 50 })).map((r) => r.operationId);
    assert.equal(ids.length, 20);
    await startView(reader.store);
    const page = await reader.store.index.list({ limit: 50 });
    assert.deepEqual(new Set(page.rows.map((r) => r.operationId)), new Set(ids));
    const [more] = await admit(writer.store, 1, 'least-more');
    assert.equal((await reader.store.index.list({ limit: 1 })).rows[0]?.operationId, more);
    expectOk(await writer.store.tombstone(more!), 'tombstone');
    assert.equal((await reader.store.index.countStuck(Date.now() + 3_600_000, stuckBoundsDefault))['outbox-pending'], 20);
  } finally {
    await reader.store.close();
    await writer.store.close();
    await reader.nc.close();
    await writer.nc.close();
    await server.dispose();
  }
});

test('jetstream index: a store user whose permissions predate the snapshot stream lists every row, writes no snapshot, and tells it once', async () => {
  const password = randomBytes(9).toString('hex');
  const current = jetstreamStorePermissions({}, { manageStreams: true });
  // What a deployment generated before index snapshots: everything but the snapshot stream and its subjects.
  const older = current.publish.filter((subject) => !subject.includes('_INDEX_SNAP') && !subject.includes('.isnap.'));
  assert.ok(older.length < current.publish.length);
  const server = await startJetStreamServer({
    users: [
      { user: 'store', password, publish: current.publish, subscribe: ['_INBOX.store.>'] },
      { user: 'older', password, publish: older, subscribe: ['_INBOX.older.>'] },
    ],
  });
  const opened: { nc: NatsConnection; store: JetStreamEventStore; notices: string[] }[] = [];
  const open = async (user: 'store' | 'older') => {
    const nc = await connectNats({ servers: server.url, user, pass: password, inboxPrefix: `_INBOX.${user}` });
    const notices: string[] = [];
    // A snapshot after every row: a view that may write one does at once.
    const store = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, indexSnapshotTailMin: 1, onNotice: (line) => notices.push(line) });
    opened.push({ nc, store, notices });
    return { nc, store, notices };
  };
  const listed = async (store: JetStreamEventStore) => {
    const rows = (await store.index.list({ limit: 100 })).rows.map((r) => r.operationId);
    await store.index.snapshotIdle();
    return new Set(rows);
  };
  try {
    // No snapshot stream yet, and the older user may not create it.
    const first = await open('older');
    const ids = await admit(first.store, 20, 'older');
    assert.deepEqual(await listed(first.store), new Set(ids));
    ids.push(...(await admit(first.store, 5, 'older-more')));
    assert.deepEqual(await listed(first.store), new Set(ids));
    assert.equal(first.store.index.rowsFromSnapshot, 0);
    assert.equal(first.notices.length, 1, first.notices.join('\n'));
    assert.match(first.notices[0]!, /index snapshots are off: stream CONVOKE_OPS_INDEX_SNAP .*every list view starts by reading every index row/);
    assert.equal(first.store.indexSnapshotProblem, first.notices[0]);
    // A current user's view creates the stream and writes a snapshot; the older user's views still read every row and write none.
    const newer = await open('store');
    assert.deepEqual(await listed(newer.store), new Set(ids));
    const jsm = await jetstreamManager(newer.nc, { checkAPI: false });
    const head = async () => (await jsm.streams.getMessage('CONVOKE_OPS_INDEX_SNAP', { last_by_subj: 'convoke.isnap.dir' }))?.seq;
    const written = await head();
    assert.ok(written !== undefined, 'the current user wrote a snapshot');
    assert.equal(newer.notices.length, 0, newer.notices.join('\n'));
    const second = await open('older');
    ids.push(...(await admit(second.store, 3, 'older-after')));
    assert.deepEqual(await listed(second.store), new Set(ids));
    assert.deepEqual([second.store.index.rowsFromSnapshot, second.store.index.rowsDelivered], [0, ids.length], 'the older view read every row');
    assert.equal(second.notices.length, 1, second.notices.join('\n'));
    assert.equal(await head(), written, 'no older view wrote a snapshot');
  } finally {
    for (const { store, nc } of opened) {
      await store.close();
      await nc.close();
    }
    await server.dispose();
  }
});

test('jetstream index: a view outlives a broker restart: pages fail while it is away, then go on without reading every row again', async () => {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  let again: Awaited<ReturnType<typeof startJetStreamServer>> | undefined;
  try {
    await admit(store, 30, 'restart');
    assert.equal((await store.index.list({ limit: 50 })).rows.length, 30);
    const delivered = store.index.rowsDelivered;
    await server.stop();
    await assert.rejects(store.index.list({ limit: 50 }), (error: Error) => error.name === 'AdapterError', 'unavailable while the broker is away');
    again = await startJetStreamServer({ storeDir: server.storeDir, port: server.port });
    // The store reconnects by itself; its next admission and page go through once it has.
    let added: string[] = [];
    for (let attempt = 0; added.length === 0; attempt++) {
      added = await admit(store, 1, `restart-added-${attempt}`).catch(async (error: unknown) => {
        if (attempt > 100) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200));
        return [];
      });
    }
    const rows = (await store.index.list({ limit: 50 })).rows;
    assert.equal(rows.length, 31);
    assert.equal(rows[0]?.operationId, added[0]);
    assert.ok(store.index.rowsDelivered - delivered < 30, `the view went on where it stopped (read ${store.index.rowsDelivered - delivered} rows since)`);
  } finally {
    await store.close();
    await again?.dispose();
    await server.dispose();
  }
});

test('jetstream index: a snapshot of an index stream since created again, or whose chunk was replaced, is not used; the view reads every row', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const opened: JetStreamEventStore[] = [];
  const open = async (indexSnapshotTailMin?: number) => {
    const store = await JetStreamEventStore.open({
      servers: server.url,
      requestTimeoutMs,
      indexRowDelayMs,
      ...(indexSnapshotTailMin === undefined ? {} : { indexSnapshotTailMin }),
    });
    opened.push(store);
    return store;
  };
  /** A fresh client's view, started, and with its snapshot written when it writes one. */
  const started = async (indexSnapshotTailMin?: number) => {
    const store = await open(indexSnapshotTailMin);
    await startView(store);
    await store.index.snapshotIdle();
    return store;
  };
  try {
    const jsm = await jetstreamManager(nc);
    await admit(await open(), 20, 'old');
    await started(1);
    assert.equal((await started()).index.rowsFromSnapshot, 20, 'the snapshot is used');
    // The index stream deleted and created again, and filled past the snapshot's sequence.
    await jsm.streams.delete('CONVOKE_OPS_INDEX');
    const ids = await admit(await open(), 25, 'new');
    const recreated = await started(1); // reads every row (the old snapshot is not of this stream) and writes one
    assert.deepEqual([recreated.index.rowsFromSnapshot, recreated.index.rowsDelivered], [0, 25], 'a snapshot of the stream before is not read');
    assert.equal((await started()).index.rowsFromSnapshot, 25, "the new stream's snapshot is used");
    // A publisher allowed on the snapshot subjects replaces the snapshot's one page with a well-formed one that drops a row.
    const directory = JSON.parse(
      gunzipSync((await jsm.streams.getMessage('CONVOKE_OPS_INDEX_SNAP', { last_by_subj: 'convoke.isnap.dir' }))!.data).toString('utf8'),
    ) as { operations: { id: string }[] };
    assert.equal(directory.operations.length, 1);
    const chunk = `convoke.isnap.p.${directory.operations[0]!.id}`;
    const body = JSON.parse(gunzipSync((await jsm.streams.getMessage('CONVOKE_OPS_INDEX_SNAP', { last_by_subj: chunk }))!.data).toString('utf8')) as {
      operations: Record<string, unknown[]>;
    };
    // The operations' rows are kept by column: the last row leaves every column.
    for (const column of Object.values(body.operations)) column.pop();
    await jetstream(nc).publish(chunk, gzipSync(JSON.stringify(body)));
    const tampered = await started();
    assert.deepEqual([tampered.index.rowsFromSnapshot, tampered.index.rowsDelivered], [0, 25], 'a snapshot that fails its hash is not read');
    assert.deepEqual((await allPages(tampered, { limit: 7 })).map((r) => r.operationId).sort(), [...ids].sort());
  } finally {
    for (const store of opened) await store.close();
    await nc.close();
    await server.dispose();
  }
});

test("jetstream index: an open operation's row waits for a later one: one settled within the wait publishes one row; its own client's pages see a waiting row, others once written, and close writes what waits", async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  // Long enough that nothing is written by the timer while the test runs.
  const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs: 600_000 });
  const reader = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, indexRowDelayMs, stampWaitMs: 0 });
  const rowsPublished = async () => (await jsm.streams.info('CONVOKE_OPS_INDEX')).state.last_seq;
  const ids = (rows: OperationIndexRow[]) => rows.map((r) => r.operationId).sort();
  try {
    const [settled, open] = await admit(writer, 2, 'wait');
    await advance(writer, settled!, 5);
    // Six rows for `settled` (admitted, then one per transition): only the settled one was published.
    assert.equal(await rowsPublished(), 1, 'one row published: the settled one');
    assert.deepEqual(ids((await reader.index.list({ limit: 10 })).rows), [settled], 'the other client sees what was published, not the waiting row');
    assert.deepEqual(ids((await writer.index.list({ limit: 10 })).rows), [open, settled].sort(), "the writer's own page writes its waiting rows first");
    assert.deepEqual(ids((await reader.index.list({ limit: 10 })).rows), [open, settled].sort(), 'then the other client sees it too');
    const [late] = await admit(writer, 1, 'late');
    assert.equal((await writer.index.get(late!))?.phase, 'admitted', 'get answers a waiting row (written first)');
    const [last] = await admit(writer, 1, 'last');
    await writer.close();
    assert.ok(ids((await reader.index.list({ limit: 10 })).rows).includes(last!), 'close wrote the waiting row');
  } finally {
    await writer.close().catch(() => undefined);
    await reader.close();
    await nc.close();
    await server.dispose();
  }
});

/** The directory of the paged snapshot as stored (jetstream-index-pages.ts). */
async function storedDirectory(nc: NatsConnection): Promise<{ seq: number; created: string; operations: { id: string; rows: number }[] }> {
  const jsm = await jetstreamManager(nc);
  const msg = await jsm.streams.getMessage('CONVOKE_OPS_INDEX_SNAP', { last_by_subj: 'convoke.isnap.dir' });
  assert.ok(msg, 'a directory is stored');
  return JSON.parse(gunzipSync(msg.data).toString('utf8')) as { seq: number; created: string; operations: { id: string; rows: number }[] };
}

test('jetstream index: a fresh client lists from the paged snapshot and the rows after it, starting no view, reading only the pages a page needs, and answers what a view of every row answers', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  const pager = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs, indexSnapshotTailMin: 1, indexSnapshotPageRows: 10 });
  const opened: JetStreamEventStore[] = [];
  try {
    // The oldest page (10 rows) is exactly the first ten admitted: admitted concurrently, rows of one
    // millisecond are ordered by id, so the rest are admitted once the server's clock has moved on.
    const oldest = await admit(writer, 10, 'paged');
    await new Promise((resolve) => setTimeout(resolve, 20));
    const ids = [...oldest, ...(await admit(writer, 50, 'paged', 10))];
    for (const id of ids.slice(0, 5)) await advance(writer, id, 4);
    // The view writes a generation of pages (10 rows each) of everything it holds.
    await startView(pager);
    await pager.index.snapshotIdle();
    const directory = await storedDirectory(nc);
    assert.equal(directory.operations.length, 6);
    // After the snapshot: new operations, rows it holds superseded, a tombstone of a row it holds and of a new one.
    const added = await admit(writer, 6, 'paged-after');
    for (const id of ids.slice(3, 8)) await advance(writer, id, 5);
    expectOk(await writer.tombstone(ids[10]!), 'tombstone');
    expectOk(await writer.tombstone(added[2]!), 'tombstone');
    const whole = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs, indexSnapshotTailMin: 0 });
    opened.push(whole);
    const queries: Array<Omit<IndexQuery, 'after'>> = [
      ...indexQueries().operations,
      { limit: 5, stuck: { nowMs: Date.now() - 3_600_000, bounds: stuckBoundsDefault } },
    ];
    for (const query of queries) {
      const oneShot = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
      opened.push(oneShot);
      assert.deepEqual(await allPages(oneShot, query), await allPages(whole, query), `${JSON.stringify(query)}: as a view of every row`);
      assert.equal(oneShot.index.rowsDelivered, 0, 'no view was started');
      assert.ok(oneShot.index.paged.lists > 0);
      // The tail: 6 new subjects (one now a removal marker), 5 superseded rows, 1 more marker; read once per page listed.
      assert.equal(oneShot.index.paged.tailRows, 12 * oneShot.index.paged.lists);
    }
    assert.equal((await allPages(whole, { limit: 100 })).length, 64);
    // The settled rows are in one page of the snapshot (and the tail): a settled page reads one page of six.
    const settled = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
    opened.push(settled);
    await settled.index.list({ limit: 50, phase: 'settled' });
    assert.deepEqual([settled.index.paged.read, settled.index.paged.skipped], [0, 6], 'no page of the snapshot holds a settled row');
    // A decided outcome is in the oldest page only.
    const decided = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
    opened.push(decided);
    await decided.index.list({ limit: 50, outcome: 'success' });
    assert.deepEqual([decided.index.paged.read, decided.index.paged.skipped], [1, 5]);
  } finally {
    for (const store of opened) await store.close();
    await pager.close();
    await writer.close();
    await nc.close();
    await server.dispose();
  }
});

test('jetstream index: a one-shot first page costs the same requests and pages at 60 and at 600 operations', async () => {
  const costs: { requests: number; pages: number }[] = [];
  for (const count of [60, 600]) {
    const server = await startJetStreamServer();
    const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
    const pager = await JetStreamEventStore.open({
      servers: server.url,
      requestTimeoutMs,
      indexRowDelayMs,
      indexSnapshotTailMin: 1,
      indexSnapshotPageRows: 20,
    });
    const nc = await connect({ servers: server.url });
    const reader = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, indexRowDelayMs });
    try {
      await admit(writer, count, `cost-${count}`);
      await startView(pager);
      await pager.index.snapshotIdle();
      await admit(writer, 5, `cost-${count}-after`);
      const requests = countApiRequests(nc);
      const rows = (await reader.index.list({ limit: 10 })).rows;
      assert.equal(rows.length, 10);
      costs.push({ requests: requests.count, pages: reader.index.paged.read });
      assert.equal(reader.index.rowsDelivered, 0);
    } finally {
      await reader.close();
      await nc.close();
      await pager.close();
      await writer.close();
      await server.dispose();
    }
  }
  assert.deepEqual(costs[0], costs[1]);
  assert.equal(costs[0]!.pages, 1);
});

test('jetstream index: a one-shot list does not take a directory of an index stream since created again, nor one whose page is gone, nor a tail past its bound: it starts a view, which writes a new generation', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const opened: JetStreamEventStore[] = [];
  const open = async (options: { indexSnapshotTailMin?: number } = {}) => {
    const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs, indexSnapshotPageRows: 5, ...options });
    opened.push(store);
    return store;
  };
  try {
    const jsm = await jetstreamManager(nc);
    const writer = await open();
    await admit(writer, 20, 'stale-old');
    const first = await open({ indexSnapshotTailMin: 1 });
    await startView(first);
    await first.index.snapshotIdle();
    const fresh = await open();
    assert.equal((await fresh.index.list({ limit: 50 })).rows.length, 20);
    assert.deepEqual([fresh.index.paged.lists, fresh.index.rowsDelivered], [1, 0], 'the pages answer');
    // The index stream deleted and created again, and filled past the directory's sequence.
    const stale = await storedDirectory(nc);
    await jsm.streams.delete('CONVOKE_OPS_INDEX');
    const again = await open();
    const ids = await admit(again, 25, 'stale-new');
    const recreated = await open({ indexSnapshotTailMin: 1 });
    assert.deepEqual((await recreated.index.list({ limit: 50 })).rows.map((r) => r.operationId).sort(), [...ids].sort());
    assert.deepEqual(
      [recreated.index.paged.lists, recreated.index.rowsDelivered],
      [0, 25],
      'the directory of the stream before is not taken: a view read every row',
    );
    await recreated.index.snapshotIdle();
    assert.notEqual((await storedDirectory(nc)).created, stale.created, 'the view wrote a generation of the new stream');
    // A page of the directory gone (a writer purged it): the one-shot list starts a view instead.
    const directory = await storedDirectory(nc);
    await jsm.streams.purge('CONVOKE_OPS_INDEX_SNAP', { filter: `convoke.isnap.p.${directory.operations.at(-1)!.id}` });
    const missing = await open();
    assert.equal((await allPages(missing, { limit: 50 })).length, 25);
    assert.equal(missing.index.rowsDelivered, 25, 'a view read every row');
    // A tail longer than 4 times tailMin: a view starts from the pages and the tail and writes a new generation.
    const rewrite = await open({ indexSnapshotTailMin: 1 });
    await startView(rewrite);
    await rewrite.index.snapshotIdle();
    await admit(again, 9, 'stale-tail');
    const bounded = await open({ indexSnapshotTailMin: 2 });
    assert.equal((await bounded.index.list({ limit: 50 })).rows.length, 34);
    assert.deepEqual([bounded.index.paged.lists, bounded.index.rowsFromSnapshot, bounded.index.rowsDelivered], [0, 25, 9], 'the tail of 9 is past 4 × 2');
    await bounded.close();
    const after = await open();
    assert.equal((await after.index.list({ limit: 50 })).rows.length, 34);
    assert.deepEqual(
      [after.index.paged.lists, after.index.paged.tailRows, after.index.rowsDelivered],
      [1, 0, 0],
      'the view wrote the generation the next list reads',
    );
  } finally {
    for (const store of opened) await store.close();
    await nc.close();
    await server.dispose();
  }
});

test('jetstream index: a new generation writes only the pages whose rows changed and names the others again; pages no directory names are purged', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  const pager = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs, indexSnapshotTailMin: 1, indexSnapshotPageRows: 10 });
  try {
    const jsm = await jetstreamManager(nc);
    const ids = await admit(writer, 45, 'gen');
    await startView(pager);
    await pager.index.snapshotIdle();
    const first = await storedDirectory(nc);
    // Pages cut oldest first: 10, 10, 10, 10 and the newest 5.
    assert.deepEqual(
      first.operations.map((p) => p.rows),
      [5, 10, 10, 10, 10],
    );
    // New admissions land in the newest page; one update in the oldest page.
    await admit(writer, 3, 'gen-after');
    await advance(writer, ids[0]!, 1);
    await startView(pager);
    await pager.index.snapshotIdle();
    const second = await storedDirectory(nc);
    assert.deepEqual(
      second.operations.map((p) => p.rows),
      [8, 10, 10, 10, 10],
    );
    const kept = second.operations.filter((p) => first.operations.some((q) => q.id === p.id)).length;
    assert.equal(kept, 3, 'the three pages whose rows did not change are named again');
    // Another generation: the first generation's rewritten pages are no longer named by the last two directories, and are purged.
    await advance(writer, ids[20]!, 1);
    await startView(pager);
    await pager.index.snapshotIdle();
    const third = await storedDirectory(nc);
    const info = await jsm.streams.info('CONVOKE_OPS_INDEX_SNAP', { subjects_filter: 'convoke.isnap.p.*' });
    const stored = new Set(Object.keys(info.state.subjects ?? {}));
    const named = new Set([...second.operations, ...third.operations].map((p) => `convoke.isnap.p.${p.id}`));
    assert.deepEqual(stored, named);
  } finally {
    await pager.close();
    await writer.close();
    await nc.close();
    await server.dispose();
  }
});

test('jetstream index: a fresh client lists workflow instances from the paged snapshot and the rows after it, as a view of every row does', async () => {
  const server = await startJetStreamServer();
  const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
  const pager = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs, indexSnapshotTailMin: 1, indexSnapshotPageRows: 8 });
  const opened: JetStreamEventStore[] = [];
  try {
    const startMs = Date.now() - 600_000;
    for (let n = 0; n < 30; n++)
      await writer.index.workflow.put(workflowInstance(n, 'running', startMs + n).instanceId, workflowInstance(n, 'running', startMs + n));
    await startView(pager);
    await pager.index.snapshotIdle();
    // After the snapshot: new instances, instances it holds completed, one removed.
    for (let n = 30; n < 34; n++)
      await writer.index.workflow.put(workflowInstance(n, 'running', startMs + n).instanceId, workflowInstance(n, 'running', startMs + n));
    for (const n of [2, 17, 31])
      await writer.index.workflow.put(workflowInstance(n, 'completed', startMs + n).instanceId, workflowInstance(n, 'completed', startMs + n));
    await writer.index.workflow.put(workflowInstance(5, 'running', 0).instanceId, undefined);
    const whole = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs, indexSnapshotTailMin: 0 });
    opened.push(whole);
    const queries: Omit<WorkflowIndexQuery, 'after'>[] = [
      { limit: 4 },
      { limit: 3, status: 'completed' },
      { limit: 3, workflowName: 'rare' },
      { limit: 3, principalId: 'svc-1', status: 'running' },
      { limit: 5, stuck: { nowMs: Date.now() + 3_600_000, bounds: workflowStuckBoundsDefault } },
    ];
    for (const query of queries) {
      const oneShot = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs });
      opened.push(oneShot);
      assert.deepEqual(await allWorkflowPages(oneShot, query), await allWorkflowPages(whole, query), `${JSON.stringify(query)}: as a view of every row`);
      assert.equal(oneShot.index.rowsDelivered, 0, 'no view was started');
      assert.ok(oneShot.index.paged.lists > 0);
    }
    assert.equal((await allWorkflowPages(whole, { limit: 100 })).length, 33);
  } finally {
    for (const store of opened) await store.close();
    await pager.close();
    await writer.close();
    await server.dispose();
  }
});

/** The subjects the snapshot stream holds a message on, sorted. */
async function snapshotSubjects(nc: NatsConnection): Promise<string[]> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info('CONVOKE_OPS_INDEX_SNAP', { subjects_filter: 'convoke.isnap.>' });
  return Object.keys(info.state.subjects ?? {}).sort();
}

/** A server, a connection to it, and stores opened on it with their notices collected; `close` ends them all. */
async function v2Setting() {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const notices: string[] = [];
  const opened: JetStreamEventStore[] = [];
  const open = async (options: { indexSnapshotTailMin?: number } = {}) => {
    const store = await JetStreamEventStore.open({
      servers: server.url,
      requestTimeoutMs,
      indexRowDelayMs,
      onNotice: (line) => notices.push(line),
      ...options,
    });
    opened.push(store);
    return store;
  };
  const close = async () => {
    for (const store of opened) await store.close();
    await nc.close();
    await server.dispose();
  };
  return { nc, notices, open, close };
}

/**
 * 30 operations (5 of them decided) and 6 running workflow instances; a version 2 snapshot of them,
 * written as the earlier build wrote it; then 16 index messages after it: 6 new operations, 5 rows
 * it holds superseded, a tombstone of a row it holds and of a new one (each subject's last message
 * is a removal marker), 2 new instances, one it holds completed, one removed. No paged directory.
 */
async function storedWithV2Snapshot(nc: NatsConnection, writer: JetStreamEventStore): Promise<V2Snapshot> {
  const ids = await admit(writer, 30, 'v2');
  for (const id of ids.slice(0, 5)) await advance(writer, id, 4);
  const startMs = Date.now() - 600_000;
  const put = (n: number, status: WorkflowIndexRow['status']) =>
    writer.index.workflow.put(workflowInstance(n, status, startMs + n).instanceId, workflowInstance(n, status, startMs + n));
  for (let n = 0; n < 6; n++) await put(n, 'running');
  const { created, snapshot } = await viewOfEveryRow(nc, { requestTimeoutMs });
  assert.deepEqual([snapshot.operations.length, snapshot.workflows.length], [30, 6]);
  // The earlier build cut the body in 512 KiB chunks, which a body of these rows fits in one of:
  // cut finer, the reader joins more chunks than it reads at once.
  const v2 = await writeV2Snapshot(nc, created, snapshot, { chunkBytes: 64 });
  assert.ok(v2.chunks > 8, `${v2.chunks} chunks`);
  const added = await admit(writer, 6, 'v2-after');
  for (const id of ids.slice(3, 8)) await advance(writer, id, 5);
  expectOk(await writer.tombstone(ids[10]!), 'tombstone');
  expectOk(await writer.tombstone(added[2]!), 'tombstone');
  for (const n of [6, 7]) await put(n, 'running');
  await put(2, 'completed');
  await writer.index.workflow.put(workflowInstance(4, 'running', 0).instanceId, undefined);
  assert.deepEqual(await snapshotSubjects(nc), [...v2.chunkSubjects, v2.headSubject].sort(), 'the version 2 snapshot, no directory of pages');
  return v2;
}

/** Queries over the rows the version 2 tests store (operations of principals svc-0..3, instances of svc-0..2). */
function indexQueries(): { operations: Omit<IndexQuery, 'after'>[]; workflows: Omit<WorkflowIndexQuery, 'after'>[] } {
  const later = Date.now() + 3_600_000;
  return {
    operations: [
      { limit: 7 },
      { limit: 5, principalId: 'svc-1' },
      { limit: 5, phase: 'settled' },
      { limit: 5, outcome: 'open' },
      { limit: 3, outcome: 'success' },
      { limit: 5, interaction: 'quick' },
      { limit: 5, stuck: { nowMs: later, bounds: stuckBoundsDefault } },
    ],
    workflows: [{ limit: 3 }, { limit: 2, status: 'completed' }, { limit: 2, principalId: 'svc-1', status: 'running' }, { limit: 5, workflowName: 'rare' }],
  };
}

/** Every page of every v2 query, from `store` and from `whole` (a view of every row), is the same. */
async function answersAsWhole(store: JetStreamEventStore, whole: JetStreamEventStore, what: string): Promise<void> {
  const { operations, workflows } = indexQueries();
  for (const query of operations)
    assert.deepEqual(await allPages(store, query), await allPages(whole, query), `${what}: ${JSON.stringify(query)} as a view of every row`);
  for (const query of workflows)
    assert.deepEqual(await allWorkflowPages(store, query), await allWorkflowPages(whole, query), `${what}: ${JSON.stringify(query)} as a view of every row`);
}

test('jetstream index: a view starts from a version 2 snapshot an earlier build wrote and reads only the rows after it, answering what a view of every row answers', async () => {
  const { nc, notices, open, close } = await v2Setting();
  try {
    const writer = await open(); // creates the snapshot stream
    const v2 = await storedWithV2Snapshot(nc, writer);
    const whole = await open({ indexSnapshotTailMin: 0 });
    // A view that writes no pages (its tail is far below tailMin).
    const fromV2 = await open();
    await startView(fromV2);
    assert.equal(fromV2.index.rowsFromSnapshot, 36, 'the view started from the version 2 snapshot');
    assert.equal(fromV2.index.rowsDelivered, 16, 'the view read only the tail from the stream');
    await answersAsWhole(fromV2, whole, 'the view from the version 2 snapshot');
    assert.equal((await allPages(fromV2, { limit: 100 })).length, 34);
    assert.equal((await allWorkflowPages(fromV2, { limit: 100 })).length, 7);
    const later = Date.now() + 3_600_000;
    assert.deepEqual(await fromV2.index.countStuck(later, stuckBoundsDefault), await whole.index.countStuck(later, stuckBoundsDefault));
    assert.deepEqual(await snapshotSubjects(nc), [...v2.chunkSubjects, v2.headSubject].sort(), 'nothing written');
    assert.deepEqual(notices, []);
  } finally {
    await close();
  }
});

test('jetstream index: the first paged generation, written by a view started from a version 2 snapshot, purges its chunks; a fresh client then lists from the pages', async () => {
  const { nc, notices, open, close } = await v2Setting();
  try {
    const jsm = await jetstreamManager(nc);
    const v2 = await storedWithV2Snapshot(nc, await open());
    const whole = await open({ indexSnapshotTailMin: 0 });
    // A view that writes a generation at once.
    const upgraded = await open({ indexSnapshotTailMin: 1 });
    await startView(upgraded);
    await upgraded.index.snapshotIdle();
    assert.deepEqual([upgraded.index.rowsFromSnapshot, upgraded.index.rowsDelivered], [36, 16], 'the view started from the version 2 snapshot');
    const directory = await storedDirectory(nc);
    assert.equal(directory.seq, (await jsm.streams.info('CONVOKE_OPS_INDEX')).state.last_seq, 'the generation holds every row stored');
    assert.equal(
      directory.operations.reduce((sum, p) => sum + p.rows, 0),
      34,
    );
    // The purge takes the chunks (`<generation>.<n>`) and the head naming them.
    const stored = await snapshotSubjects(nc);
    assert.deepEqual(
      stored.filter((s) => s.startsWith(`convoke.isnap.${v2.generation}.`)),
      [],
      'the version 2 chunks are purged',
    );
    assert.ok(!stored.includes(v2.headSubject), 'the version 2 head is purged');
    assert.deepEqual(
      stored.filter((s) => s !== 'convoke.isnap.dir' && !s.startsWith('convoke.isnap.p.')),
      [],
      'the stream holds the directory and its pages alone',
    );
    // A fresh client lists from the pages: no view, no tail.
    const oneShot = await open();
    await answersAsWhole(oneShot, whole, 'the one-shot client');
    assert.equal(oneShot.index.rowsDelivered, 0, 'no view was started');
    assert.ok(oneShot.index.paged.lists > 0);
    assert.equal(oneShot.index.paged.tailRows, 0);
    assert.deepEqual(notices, []);
  } finally {
    await close();
  }
});

test('jetstream index: a version 2 snapshot with a chunk gone or chunks that do not match its digest is not used: the view reads every row, quietly, and answers exactly', async () => {
  const { nc, notices, open, close } = await v2Setting();
  /** A fresh client's view, started (it writes no pages: its tail is far below tailMin). */
  const started = async () => {
    const store = await open();
    await startView(store);
    return store;
  };
  try {
    const jsm = await jetstreamManager(nc);
    const writer = await open();
    const ids = await admit(writer, 20, 'v2-broken');
    for (const id of ids.slice(0, 4)) await advance(writer, id, 4);
    const startMs = Date.now() - 600_000;
    for (let n = 0; n < 3; n++)
      await writer.index.workflow.put(workflowInstance(n, 'running', startMs + n).instanceId, workflowInstance(n, 'running', startMs + n));
    const { created, snapshot } = await viewOfEveryRow(nc, { requestTimeoutMs });
    // After it: 3 new operations, one it holds settled, one it holds tombstoned.
    await admit(writer, 3, 'v2-broken-after');
    await advance(writer, ids[5]!, 5);
    expectOk(await writer.tombstone(ids[6]!), 'tombstone');
    const whole = await open({ indexSnapshotTailMin: 0 });
    const everyRowRead = [0, (await jsm.streams.info('CONVOKE_OPS_INDEX')).state.messages];

    // Intact, in several chunks: used.
    const split = await writeV2Snapshot(nc, created, snapshot, { chunkBytes: 256 });
    assert.ok(split.chunks >= 3, `${split.chunks} chunks`);
    const intact = await started();
    assert.deepEqual([intact.index.rowsFromSnapshot, intact.index.rowsDelivered], [23, 5], 'the intact snapshot is used');
    await answersAsWhole(intact, whole, 'the intact snapshot');

    // One chunk gone (a newer snapshot's writer purged it): not used.
    await jsm.streams.purge('CONVOKE_OPS_INDEX_SNAP', { filter: split.chunkSubjects[1]! });
    const gone = await started();
    assert.deepEqual([gone.index.rowsFromSnapshot, gone.index.rowsDelivered], everyRowRead, 'a snapshot with a chunk gone is not read');
    await answersAsWhole(gone, whole, 'a chunk gone');

    // Written again whole (one chunk, the earlier build's size), then its chunk replaced by a
    // well-formed body without one row the tail does not touch: the digest the head names no longer matches.
    const single = await writeV2Snapshot(nc, created, snapshot);
    assert.equal(single.chunks, 1);
    const dropped = { ...snapshot, operations: snapshot.operations.filter((row) => row.operationId !== ids[0]) };
    assert.equal(dropped.operations.length, snapshot.operations.length - 1);
    await jetstream(nc).publish(single.chunkSubjects[0]!, gzipSync(JSON.stringify(encodeBody(dropped))));
    const tampered = await started();
    assert.deepEqual([tampered.index.rowsFromSnapshot, tampered.index.rowsDelivered], everyRowRead, 'a snapshot that fails its digest is not read');
    await answersAsWhole(tampered, whole, 'a digest that does not match');
    assert.ok((await tampered.index.get(ids[0]!)) !== undefined, 'the row the replaced chunk lacks');
    assert.deepEqual(notices, [], 'a snapshot not used is no failure');
  } finally {
    await close();
  }
});
