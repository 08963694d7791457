import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { connect, headers, nanos } from '@nats-io/transport-node';
import { DiscardPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager, type StreamConfig } from '@nats-io/jetstream';
import { AdapterError } from '../../src/contract/errors.js';
import { createHash, randomBytes } from 'node:crypto';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { addedMeanwhile } from '../../src/adapters/store/jetstream-stream-limits.js';
import { connectNats } from '../../src/adapters/transport/nats.js';
import { jetstreamStorePermissions } from '../../src/deployment/nats/permissions.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import type { Transition } from '../../src/events/types.js';
import { expectOk, makeTransition, newOperationId, readOk, storeConformance, transitionOfBytes, type StoreFactory } from './store.js';
import { workflowConformance } from './workflow.js';
import { admission, indexConformance, lifecycle } from './index.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const requestTimeoutMs = 1500;

/** `stampWaitMs` 0: every append reads its message back instead of using the stamp feed. */
const jetstreamFactory =
  (stampWaitMs?: number): StoreFactory =>
  async (options = {}) => {
    const server = await startJetStreamServer();
    const clients: JetStreamEventStore[] = [];
    const open = async () => {
      const client = await JetStreamEventStore.open({
        servers: server.url,
        limits: options.limits,
        requestTimeoutMs,
        ...(stampWaitMs === undefined ? {} : { stampWaitMs }),
      });
      clients.push(client);
      return client;
    };
    try {
      const store = await open();
      return {
        store,
        clock: 'server',
        // Same machine, same clock as the server: good to a few ms, and tests only use wide margins.
        nowMs: () => Date.now(),
        stopServer: () => server.stop(),
        openSecondClient: open,
        dispose: async () => {
          await Promise.all(clients.map((c) => c.close()));
          await server.dispose();
        },
      };
    } catch (error) {
      await server.dispose();
      throw error;
    }
  };

storeConformance('jetstream', jetstreamFactory(), { timeoutMs: 60_000 });
storeConformance('jetstream, stamps read back', jetstreamFactory(0), { timeoutMs: 60_000 });
indexConformance('jetstream', jetstreamFactory(), { timeoutMs: 60_000 });
workflowConformance('jetstream', jetstreamFactory(), { timeoutMs: 60_000 });

/** A store and a client connection on a server of their own, closed (client, store, server) once `body` ends. */
async function withStoreAndClient(
  body: (fixture: {
    server: Awaited<ReturnType<typeof startJetStreamServer>>;
    store: JetStreamEventStore;
    nc: Awaited<ReturnType<typeof connect>>;
  }) => Promise<void>,
): Promise<void> {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs });
  const nc = await connect({ servers: server.url });
  try {
    await body({ server, store, nc });
  } finally {
    await nc.close();
    await store.close();
    await server.dispose();
  }
}

/** A reading of a stream is at most a second old: past it, the next write reads the stream again. */
const readingAgeMs = 1_100;

/**
 * One operation created on `store`, for the tests that edit a stream under a running store:
 * `appendGoesOn` appends to it and checks the append went in, keeping `revision` the log's last.
 */
async function openOperation(
  store: JetStreamEventStore,
  name: string,
): Promise<{ id: string; revision: string; appendGoesOn: (what: string) => Promise<void> }> {
  const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
  const id = newOperationId(name);
  const created = await store.create(id, makeTransition(guard, 'create'));
  expectOk(created, 'create');
  const operation = {
    id,
    revision: created.revision,
    appendGoesOn: async (what: string) => {
      const appended = await store.append(id, operation.revision, makeTransition(guard, what));
      expectOk(appended, `append ${what}`);
      operation.revision = appended.revision;
    },
  };
  return operation;
}

/** `answer` is the refusal of a write: unavailable, its description matching `named`. */
function assertRefused(answer: { kind: string; description?: string }, named: RegExp, what: string): void {
  assert.equal(answer.kind, 'unavailable', `${what}: ${JSON.stringify(answer)}`);
  assert.match(answer.description ?? '', named, what);
}

test("jetstream: the transition size the store reports follows the server's max_payload, less its headers' allowance, and is the one it enforces, for every client", async () => {
  const server = await startJetStreamServer({ maxPayload: 20 * 1024 });
  const stores: JetStreamEventStore[] = [];
  try {
    for (let k = 0; k < 2; k++) stores.push(await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs }));
    const [store, other] = stores as [JetStreamEventStore, JetStreamEventStore];
    const reported = store.limits.transitionBytesMax;
    assert.equal(reported, 20 * 1024 - 512, 'below the configured 1 MiB: what a message of the server may carry');
    assert.equal(other.limits.transitionBytesMax, reported);
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const id = newOperationId('payload');
    const over = await store.create(id, transitionOfBytes(guard, 'over', reported + 1));
    assert.equal(over.kind, 'invalid-input', JSON.stringify(over));
    assert.match(over.kind === 'invalid-input' ? over.description : '', new RegExp(`the limit is ${reported}`));
    const created = await store.create(id, transitionOfBytes(guard, 'exact', reported));
    expectOk(created, 'a transition of exactly the reported size, with the store headers, fits a message');
    expectOk(await other.append(id, created.revision, transitionOfBytes(guard, 'again', reported)), 'through the other client');
    assert.deepEqual(
      (await readOk(other, id)).transitions.map((t) => t.transition.causation.messageId),
      ['exact', 'again'],
    );
  } finally {
    for (const store of stores) await store.close();
    await server.dispose();
  }
});

test("jetstream: an operations stream found with a smaller max_msg_size than the server's max_payload (an operator's, or an earlier client's made under a lower limit) is what the store reports and enforces", async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  const history = { storage: StorageType.File, retention: RetentionPolicy.Limits, discard: DiscardPolicy.New, subjects: ['convoke.op.>', 'convoke.wf.>'] };
  const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
  try {
    const streamBytesMax = 32 * 1024;
    await jsm.streams.add({ name: 'CONVOKE_OPS', ...history, max_msg_size: streamBytesMax });
    const store = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs });
    try {
      // Inside what the server carries (1 MiB), past what the stream takes.
      const over = await store.create(newOperationId('stream-size'), transitionOfBytes(guard, 'over', 40 * 1024));
      assert.equal(over.kind, 'invalid-input', JSON.stringify(over));
      const reported = store.limits.transitionBytesMax;
      assert.equal(reported, streamBytesMax - 512, "the stream's message size less the store's headers' allowance");
      const id = newOperationId('stream-size');
      const refused = await store.create(id, transitionOfBytes(guard, 'over', reported + 1));
      assert.match(refused.kind === 'invalid-input' ? refused.description : JSON.stringify(refused), new RegExp(`the limit is ${reported}`));
      expectOk(await store.create(id, transitionOfBytes(guard, 'exact', reported)), 'a transition of exactly the reported size fits the stream');
    } finally {
      await store.close();
    }
    // The store's own stream, made by a client configured with a lower limit: a client configured with the default reports the stream's.
    for await (const name of jsm.streams.names()) await jsm.streams.delete(name);
    const first = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, limits: { transitionBytesMax: 6000 } });
    await first.close();
    const second = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs });
    try {
      assert.equal(second.limits.transitionBytesMax, 6000);
      const refused = await second.create(newOperationId('stream-size'), transitionOfBytes(guard, 'over', 6001));
      assert.equal(refused.kind, 'invalid-input', JSON.stringify(refused));
    } finally {
      await second.close();
    }
  } finally {
    await nc.close();
    await server.dispose();
  }
});

test('jetstream: appends learn their server stamps from the stamp feed, equal to what a read returns', async () => {
  const server = await startJetStreamServer();
  // A generous wait: this test is about where the stamps come from, not how fast.
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, stampWaitMs: 10_000 });
  try {
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const answered: string[] = [];
    for (const id of [newOperationId('feed-a'), newOperationId('feed-b')]) {
      let outcome = await store.create(id, makeTransition(guard, 'create'));
      expectOk(outcome, 'create');
      answered.push(`${outcome.revision}@${outcome.committedAtMs}`);
      for (let k = 0; k < 4; k++) {
        outcome = await store.append(id, outcome.revision, makeTransition(guard, `append-${k}`));
        expectOk(outcome, `append ${k}`);
        answered.push(`${outcome.revision}@${outcome.committedAtMs}`);
      }
      const read = await readOk(store, id);
      assert.deepEqual(
        read.transitions.map((t) => `${t.revision}@${t.committedAtMs}`),
        answered.slice(-5),
        'each answered stamp is the stored one',
      );
    }
    assert.deepEqual(store.stampSources, { fed: 10, readBack: 0 });
  } finally {
    await store.close();
    await server.dispose();
  }
});

test('jetstream: with the stamp feed off, appends read their message back and answer the same way', async () => {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, stampWaitMs: 0 });
  try {
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const id = newOperationId('no-feed');
    const created = await store.create(id, makeTransition(guard, 'create'));
    expectOk(created, 'create');
    const appended = await store.append(id, created.revision, makeTransition(guard, 'append'));
    expectOk(appended, 'append');
    assert.equal((await readOk(store, id)).transitions[1]?.committedAtMs, appended.committedAtMs);
    assert.deepEqual(store.stampSources, { fed: 0, readBack: 2 });
  } finally {
    await store.close();
    await server.dispose();
  }
});

test('jetstream: under the least-privilege store permissions the stamp feed keeps flowing past its flow-control windows', async () => {
  // The feed is an ordered push consumer: the server pauses it at each flow-control window until
  // the client answers on $JS.FC. A store user that may not publish there still works, but every
  // append after the first window pays a read-back; this test sees that as readBack > 0.
  const password = randomBytes(9).toString('hex');
  const permissions = jetstreamStorePermissions({}, { manageStreams: true });
  const server = await startJetStreamServer({ users: [{ user: 'store', password, publish: permissions.publish, subscribe: ['_INBOX.store.>'] }] });
  const nc = await connectNats({ servers: server.url, user: 'store', pass: password, inboxPrefix: '_INBOX.store' });
  const store = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, stampWaitMs: 2_000 });
  try {
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    // Deliveries are headers only (a few hundred bytes): nats-server 2.9 asks for flow control
    // after 1 MiB outstanding and stops the feed at 2 MiB, some thousands of appends.
    const operations = 40;
    const appendsEach = 250;
    await Promise.all(
      Array.from({ length: operations }, async (_, i) => {
        const id = newOperationId(`feed-windows-${i}`);
        let outcome = await store.create(id, makeTransition(guard, 'create'));
        expectOk(outcome, 'create');
        for (let k = 0; k < appendsEach; k++) {
          outcome = await store.append(id, outcome.revision, makeTransition(guard, `append-${k}`));
          expectOk(outcome, `append ${k}`);
        }
      }),
    );
    assert.deepEqual(store.stampSources, { fed: operations * (appendsEach + 1), readBack: 0 });
  } finally {
    await store.close();
    await nc.close();
    await server.dispose();
  }
});

test('jetstream: committedAtMs is the server-assigned timestamp, never a client-supplied one', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const id = newOperationId('server-time');
    const claimedMs = 1_000; // 1970: a claim no server clock would make.
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    // The body claims a committedAtMs; the store must ignore it.
    const claiming = { ...makeTransition(guard, 'claims-time'), committedAtMs: claimedMs } as Transition;
    const beforeMs = Date.now();
    const created = await store.create(id, claiming);
    const afterMs = Date.now();
    expectOk(created, 'create');
    assert.notEqual(created.committedAtMs, claimedMs);
    // Same machine, same clock: the server's stamp falls between the client's readings (±1 ms of truncation).
    assert.ok(created.committedAtMs >= beforeMs - 1 && created.committedAtMs <= afterMs + 1, `${beforeMs} <= ${created.committedAtMs} <= ${afterMs}`);
    // A raw client publishes a transition whose headers and body both claim another time.
    const claimHeaders = headers();
    claimHeaders.set('Convoke-Committed-At-Ms', String(claimedMs));
    claimHeaders.set('Nats-Time-Stamp', new Date(claimedMs).toISOString());
    const rawBeforeMs = Date.now();
    await jetstream(nc).publish(`convoke.op.${id}`, JSON.stringify(claiming), {
      headers: claimHeaders,
      expect: { lastSubjectSequence: Number(created.revision) },
    });
    const rawAfterMs = Date.now();
    const read = await readOk(store, id);
    const raw = read.transitions.at(-1);
    assert.ok(raw && read.transitions.length === 2);
    assert.notEqual(raw.committedAtMs, claimedMs);
    assert.ok(raw.committedAtMs >= rawBeforeMs - 1 && raw.committedAtMs <= rawAfterMs + 1, `${rawBeforeMs} <= ${raw.committedAtMs} <= ${rawAfterMs}`);
    assert.equal(read.transitions[0]?.committedAtMs, created.committedAtMs, 'read returns the stamp the append answered');
  }));

test('jetstream: a retried append (same revision, same bytes) dedupes to the stored message and answers the same', async () => {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs });
  try {
    const id = newOperationId('retry');
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const created = await store.create(id, makeTransition(guard, 'create'));
    expectOk(created, 'create');
    const transition = makeTransition(guard, 'uncertain');
    const first = await store.append(id, created.revision, transition);
    const retry = await store.append(id, created.revision, transition);
    assert.deepEqual(retry, first, 'the retry of an uncertain append gets the original answer');
    assert.equal((await readOk(store, id)).transitions.length, 2, 'stored once');
    const different = await store.append(id, created.revision, makeTransition(guard, 'different'));
    assert.equal(different.kind, 'conflict');
  } finally {
    await store.close();
    await server.dispose();
  }
});

/** Counts the JetStream API requests a connection publishes (a request publishes once; so does a pull), but those whose subject starts with `except`. */
function countApiRequests(nc: { publish: (...args: never[]) => unknown }, except?: string): { count: number } {
  const counter = { count: 0 };
  const publish = nc.publish.bind(nc) as (...args: unknown[]) => unknown;
  (nc as { publish: unknown }).publish = (...args: unknown[]) => {
    const subject = String(args[0]);
    if (subject.startsWith('$JS.API.') && (except === undefined || !subject.startsWith(except))) counter.count++;
    return publish(...args);
  };
  return counter;
}

test('jetstream: reading a long log is batched, not one request per message', async (t) => {
  const server = await startJetStreamServer();
  const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs });
  const nc = await connect({ servers: server.url });
  const reader = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, stampWaitMs: 0 });
  try {
    const id = newOperationId('long-read');
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    // Other operations' messages interleave in the stream, as they do in a deployment.
    const other = newOperationId('other');
    expectOk(await writer.create(other, makeTransition(guard, 'other')), 'create other');
    let outcome = await writer.create(id, makeTransition(guard, 'create'));
    expectOk(outcome, 'create');
    const transitionsMax = 4000;
    for (let k = 1; k < transitionsMax; k++) {
      outcome = await writer.append(id, outcome.revision, makeTransition(guard, `t${k}`));
      expectOk(outcome, `append ${k}`);
    }
    const counter = countApiRequests(nc as never);
    const startedMs = performance.now();
    const read = await readOk(reader, id);
    const tookMs = performance.now() - startedMs;
    t.diagnostic(`read ${read.transitions.length} transitions in ${tookMs.toFixed(0)} ms with ${counter.count} JetStream API requests`);
    assert.equal(read.transitions.length, transitionsMax);
    assert.equal(read.revision, outcome.revision);
    assert.deepEqual(
      read.transitions.map((s) => s.transition.causation.messageId),
      ['create', ...Array.from({ length: transitionsMax - 1 }, (_, k) => `t${k + 1}`)],
    );
    assert.ok(counter.count <= 32, `a ${transitionsMax}-transition log reads back in a few requests (made ${counter.count})`);
  } finally {
    await reader.close();
    await nc.close();
    await writer.close();
    await server.dispose();
  }
});

test('jetstream: an admission whose index row was never written (the writer died between the two publishes) is still found by openOperationIds', async () => {
  const server = await startJetStreamServer();
  // The row is not written, as if its writer had died after the append: it waits in the writer's memory.
  const first = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs, indexRowDelayMs: 600_000 });
  let second: JetStreamEventStore | undefined;
  try {
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const orphan = newOperationId('orphan');
    expectOk(await first.create(orphan, admission(orphan, guard)), 'create without its row');
    second = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs });
    assert.equal(await second.index.get(orphan), undefined, 'no row was written');
    const settled = newOperationId('settled');
    let outcome = await second.create(settled, admission(settled, guard));
    for (const next of lifecycle(guard)) {
      expectOk(outcome, 'settle');
      outcome = await second.append(settled, outcome.revision, next);
    }
    assert.equal((await second.index.get(settled))?.phase, 'settled');
    const listed: string[] = [];
    for await (const id of second.index.openOperationIds()) listed.push(id);
    assert.deepEqual(listed, [orphan], 'the admission without a row, not the settled operation');
  } finally {
    await second?.close();
    await first.close();
    await server.dispose();
  }
});

test("jetstream: readAfter of a sequence that is another subject's answers diverged, and a tail moves the reader's fold point so its next append reads no log", async () => {
  const server = await startJetStreamServer();
  const writer = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs });
  const nc = await connect({ servers: server.url });
  const reader = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, stampWaitMs: 10_000 });
  try {
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const id = newOperationId('tail-held');
    const other = newOperationId('tail-beside');
    let outcome = await writer.create(id, makeTransition(guard, 'create'));
    expectOk(outcome, 'create');
    const beside = await writer.create(other, makeTransition(guard, 'beside'));
    expectOk(beside, 'create beside');
    outcome = await writer.append(id, outcome.revision, makeTransition(guard, 'after-beside'));
    expectOk(outcome, 'append');
    // The other subject's sequence lies inside this log's range: the log does not hold it.
    assert.ok(Number(beside.revision) < Number(outcome.revision));
    const diverged = await reader.readAfter(id, beside.revision);
    assert.equal(diverged.kind, 'diverged', JSON.stringify(diverged));
    // The reader holds the whole log (its fold point at the last revision), then follows by tails only.
    const held = await readOk(reader, id);
    for (let k = 0; k < 3; k++) {
      outcome = await writer.append(id, outcome.revision, makeTransition(guard, `w${k}`));
      expectOk(outcome, `append ${k}`);
    }
    const tail = await reader.readAfter(id, held.revision);
    expectOk(tail as never, 'tail');
    assert.equal(tail.kind === 'ok' ? tail.transitions.length : 0, 3);
    // The requests made before the append's publish (the index row after it may read the log: no record was given).
    // The stream's info, which a write reads at most once a second to check its configuration, is no log read.
    const counter = countApiRequests(nc as never, '$JS.API.STREAM.INFO.');
    let beforePublish: number | undefined;
    const publish = nc.publish.bind(nc);
    nc.publish = (subject, ...rest) => {
      if (subject === `convoke.op.${id}`) beforePublish ??= counter.count;
      publish(subject, ...rest);
    };
    const appended = await reader.append(id, outcome.revision, makeTransition(guard, 'reader'));
    expectOk(appended, 'the reader appends at the tail');
    assert.equal(beforePublish, 0, 'no log read before the append: its fold point followed the tail');
  } finally {
    await reader.close();
    await nc.close();
    await writer.close();
    await server.dispose();
  }
});

test('jetstream: a stream found with limits that evict (an age, a per-subject count, a byte cap, discard-old caps, rollups) is refused at open, never read back shorter', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  const history = { storage: StorageType.File, retention: RetentionPolicy.Limits, discard: DiscardPolicy.New };
  const cases: Array<[string, Partial<StreamConfig>]> = [
    ['CONVOKE_OPS', { ...history, subjects: ['convoke.op.>', 'convoke.wf.>'], max_age: nanos(60_000) }],
    ['CONVOKE_OPS', { ...history, subjects: ['convoke.op.>', 'convoke.wf.>'], max_msgs_per_subject: 2 }],
    ['CONVOKE_OPS', { ...history, subjects: ['convoke.op.>', 'convoke.wf.>'], allow_rollup_hdrs: true }],
    // A byte cap evicts on nats-server 2.9 even under discard-new: every write at the cap drops the oldest message.
    ['CONVOKE_OPS', { ...history, subjects: ['convoke.op.>', 'convoke.wf.>'], max_bytes: 1_000_000 }],
    ['CONVOKE_OPS_TOMBS', { ...history, subjects: ['convoke.tomb.>'], max_bytes: 1_000_000 }],
    ['CONVOKE_OPS_TOMBS', { ...history, subjects: ['convoke.tomb.>'], max_age: nanos(60_000) }],
    ['CONVOKE_OPS_OPEN', { ...history, discard: DiscardPolicy.Old, subjects: ['convoke.open.>', 'convoke.openset'], max_msgs_per_subject: 1, max_msgs: 100 }],
    ['CONVOKE_OPS_INDEX', { ...history, discard: DiscardPolicy.Old, subjects: ['convoke.idx.*'], max_msgs_per_subject: 1, max_age: nanos(60_000) }],
    ['CONVOKE_OPS_INDEX', { ...history, discard: DiscardPolicy.Old, subjects: ['convoke.idx.*'], max_msgs_per_subject: 1, max_msgs: 100 }],
  ];
  try {
    for (const [name, config] of cases) {
      // An earlier case's open may have made this stream, as the store makes it.
      await jsm.streams.delete(name).catch(() => undefined);
      await jsm.streams.add({ name, ...config });
      await assert.rejects(
        JetStreamEventStore.open({ connection: nc, requestTimeoutMs }),
        (error: unknown) => error instanceof AdapterError && error.kind === 'unsupported' && error.message.includes(name) && /evict/.test(error.message),
        `${name} ${JSON.stringify(config)}`,
      );
      await jsm.streams.delete(name);
    }
    // The same stream without those limits (as an operator may make it) opens, and keeps what it stores.
    await jsm.streams.delete('CONVOKE_OPS');
    await jsm.streams.add({ name: 'CONVOKE_OPS', ...history, subjects: ['convoke.op.>', 'convoke.wf.>'] });
    const store = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs });
    try {
      const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
      const id = newOperationId('kept');
      let outcome = await store.create(id, makeTransition(guard, 'create'));
      for (const tag of ['a', 'b', 'c']) {
        expectOk(outcome, tag);
        outcome = await store.append(id, outcome.revision, makeTransition(guard, tag));
      }
      assert.deepEqual(
        (await readOk(store, id)).transitions.map((s) => s.transition.causation.messageId),
        ['create', 'a', 'b', 'c'],
      );
    } finally {
      await store.close();
    }
  } finally {
    await nc.close();
    await server.dispose();
  }
});

test('jetstream: a message with the tombstone header published on a subject by another client is no tombstone: the log answers unavailable, never expired', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const forge = async (subject: string) => {
      const h = headers();
      h.set('Convoke-Tombstone', '1');
      return (await jetstream(nc).publish(subject, '', { headers: h })).seq;
    };
    const live = newOperationId('forged-live');
    const created = await store.create(live, makeTransition(guard, 'create'));
    expectOk(created, 'create');
    await forge(`convoke.op.${live}`);
    const never = newOperationId('forged-never');
    await forge(`convoke.op.${never}`);
    const answers = {
      read: await store.read(live),
      readAfter: await store.readAfter(live, created.revision),
      append: await store.append(live, created.revision, makeTransition(guard, 'after')),
      'create over it': await store.create(live, makeTransition(guard, 'again')),
      'create of a key never created': await store.create(never, makeTransition(guard, 'first')),
      'read of a key never created': await store.read(never),
    };
    for (const [what, answer] of Object.entries(answers)) assert.equal(answer.kind, 'unavailable', `${what}: ${JSON.stringify(answer)}`);
    // The store's own tombstone is still one: after it, the key reads expired.
    expectOk(await store.tombstone(live), 'tombstone');
    assert.equal((await store.read(live)).kind, 'expired');
    assert.equal((await store.create(live, makeTransition(guard, 'again'))).kind, 'expired');
  }));

test('jetstream: a subject under the log prefixes that names no operation or instance, published by another client, is listed as none', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const live = newOperationId('listed-live');
    expectOk(await store.create(live, makeTransition(guard, 'create')), 'create');
    const js = jetstream(nc);
    for (const subject of [`convoke.op.${live}.extra`, 'convoke.op.not-an-operation', `convoke.wf.wf${'0'.repeat(64)}.x`, 'convoke.wf.nothing'])
      await js.publish(subject, '{}');
    const operations: string[] = [];
    for await (const id of store.operationIds()) operations.push(id);
    assert.deepEqual(operations, [live]);
    const instances: string[] = [];
    for await (const id of store.workflowInstanceIds()) instances.push(id);
    assert.deepEqual(instances, []);
  }));

test('jetstream: a message published first under the message id of a write the store is about to make never makes that write answer stored', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const js = jetstream(nc);
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    // The store's Nats-Msg-Id of a write: SHA-256 over the operation, the expected sequence and the body.
    const msgIdOf = (operationId: string, expectedSeq: number, transition: Transition) =>
      createHash('sha256').update(`${operationId}\u0000${expectedSeq}\u0000`).update(JSON.stringify(transition)).digest('hex');
    const squat = (subject: string, msgID: string) => js.publish(subject, JSON.stringify(makeTransition(guard, 'squatter')), { msgID });

    // On the operation's own subject: the log holds the squatter's message where the create would have been.
    const own = newOperationId('squat-own');
    const ownCreate = makeTransition(guard, 'create');
    const squatted = await squat(`convoke.op.${own}`, msgIdOf(own, 0, ownCreate));
    const created = await store.create(own, ownCreate);
    assert.equal(created.kind, 'unavailable', JSON.stringify(created));
    assert.match('description' in created ? created.description : '', new RegExp(`message ${squatted.seq} .*this store did not write`));

    // On another subject of the stream: the create was deduplicated away, nothing of it is stored.
    const other = newOperationId('squat-other');
    const otherCreate = makeTransition(guard, 'create');
    await squat(`convoke.op.${newOperationId('elsewhere')}`, msgIdOf(other, 0, otherCreate));
    const refused = await store.create(other, otherCreate);
    assert.equal(refused.kind, 'unavailable', JSON.stringify(refused));
    assert.match('description' in refused ? refused.description : '', /this store did not write/);
    assert.equal((await store.read(other)).kind, 'not-found');

    // An append: squatted at the revision it expects.
    const live = newOperationId('squat-append');
    const first = await store.create(live, makeTransition(guard, 'create'));
    expectOk(first, 'create');
    const next = makeTransition(guard, 'next');
    await squat(`convoke.op.${live}`, msgIdOf(live, Number(first.revision), next));
    const appended = await store.append(live, first.revision, next);
    assert.equal(appended.kind, 'unavailable', JSON.stringify(appended));
  }));

test('jetstream: an operations stream given limits that evict, or a smaller max_msg_size, after the store opened refuses further writes as unavailable, naming the limit, until they are taken back', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const jsm = await jetstreamManager(nc);
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const operation = await openOperation(store, 'edited');
    const id = operation.id;
    const edits: Array<[Partial<StreamConfig>, RegExp]> = [
      [{ max_age: nanos(3_600_000) }, /max_age 3600000 ms/],
      [{ max_msgs_per_subject: 10 }, /max_msgs_per_subject 10/],
      // Not evicting, but below what the store told its users at open a transition may be (limits.transitionBytesMax):
      // a coordinator budgeted for it would see its larger transitions refused.
      [{ max_msg_size: 4096 }, /max_msg_size 4096/],
    ];
    const kept = [operation.revision];
    for (const [edit, named] of edits) {
      const { config } = await jsm.streams.info('CONVOKE_OPS');
      await jsm.streams.update('CONVOKE_OPS', { ...config, ...edit });
      await delay(readingAgeMs);
      const answers = {
        append: await store.append(id, operation.revision, makeTransition(guard, 'after the edit')),
        create: await store.create(newOperationId('edited-new'), makeTransition(guard, 'create')),
        tombstone: await store.tombstone(id),
      };
      for (const [what, answer] of Object.entries(answers)) {
        assertRefused(answer, named, what);
        assertRefused(answer, /CONVOKE_OPS/, what);
      }
      assert.deepEqual(
        (await readOk(store, id)).transitions.map((s) => s.revision),
        kept,
        'nothing was written, and the log still reads',
      );
      // Taken back: writes go on.
      await jsm.streams.update('CONVOKE_OPS', config);
      await delay(readingAgeMs);
      await operation.appendGoesOn('once the limit is gone');
      kept.push(operation.revision);
    }
  }));

test('jetstream: an operations stream with a message cap refuses new operations while a reserve remains, so the open ones still take their appends; a cap too small for the reserve is refused at open', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const history = { storage: StorageType.File, retention: RetentionPolicy.Limits, discard: DiscardPolicy.New, subjects: ['convoke.op.>', 'convoke.wf.>'] };
  try {
    await jsm.streams.add({ name: 'CONVOKE_OPS', ...history, max_msgs: 100 });
    await assert.rejects(
      JetStreamEventStore.open({ connection: nc, requestTimeoutMs }),
      (error: unknown) => error instanceof AdapterError && error.kind === 'unsupported' && /CONVOKE_OPS has max_msgs 100/.test(error.message),
    );
    await jsm.streams.delete('CONVOKE_OPS');
    // The reserve is the larger of a tenth of the cap and one operation's closing appends at the largest fan-out (1 033).
    const maxMsgs = 2_100;
    const reserve = 1_033;
    await jsm.streams.add({ name: 'CONVOKE_OPS', ...history, max_msgs: maxMsgs });
    const store = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs });
    try {
      const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
      const open: Array<{ id: string; revision: string }> = [];
      const first = newOperationId('capped');
      const created = await store.create(first, makeTransition(guard, 'create'));
      expectOk(created, 'create');
      open.push({ id: first, revision: created.revision });
      // Other messages fill the stream to a few short of where creates stop.
      const filler = maxMsgs - reserve - 5;
      for (let i = 0; i < filler; i += 100) {
        await Promise.all(Array.from({ length: Math.min(100, filler - i) }, () => js.publish('convoke.op.filler', 'x')));
      }
      let refused: { kind: string; description?: string } | undefined;
      for (let i = 0; i < 10 && refused === undefined; i++) {
        const id = newOperationId('capped');
        const outcome = await store.create(id, makeTransition(guard, 'create'));
        if (outcome.kind === 'ok') open.push({ id, revision: outcome.revision });
        else refused = outcome;
      }
      assert.equal(refused?.kind, 'unavailable', JSON.stringify(refused));
      assert.match(refused?.description ?? '', /CONVOKE_OPS holds \d+ messages of its max_msgs 2100; the last 1033 are kept/);
      const held = (await jsm.streams.info('CONVOKE_OPS')).state.messages;
      assert.ok(held <= maxMsgs - reserve, `creates stopped at the reserve (${held} messages)`);
      // The open operations still take their appends, far into the reserve.
      for (let round = 0; round < 25; round++) {
        for (const operation of open) {
          const appended = await store.append(operation.id, operation.revision, makeTransition(guard, `close ${round}`));
          expectOk(appended, `append ${round} to ${operation.id}`);
          operation.revision = appended.revision;
        }
      }
      const again = await store.create(newOperationId('capped'), makeTransition(guard, 'create'));
      assert.equal(again.kind, 'unavailable', 'still no new operation');
      assert.ok((await jsm.streams.info('CONVOKE_OPS')).state.messages > maxMsgs - reserve + 25, 'the appends went into the reserve');
    } finally {
      await store.close();
    }
  } finally {
    await nc.close();
    await server.dispose();
  }
});

test('jetstream: a tombstone or open-set stream given limits that evict after the store opened refuses the writes that need it, naming the stream, until they are taken back', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const jsm = await jetstreamManager(nc);
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const operation = await openOperation(store, 'edited');
    const id = operation.id;
    const edits: Array<[string, RegExp, 'tombstone' | 'create']> = [
      ['CONVOKE_OPS_TOMBS', /stream CONVOKE_OPS_TOMBS now has limits that evict \(max_age 3600000 ms\).*tombstones are refused/, 'tombstone'],
      ['CONVOKE_OPS_OPEN', /stream CONVOKE_OPS_OPEN now has limits that evict \(max_age 3600000 ms\).*new operations are refused/, 'create'],
    ];
    for (const [stream, named, refusedWrite] of edits) {
      const { config } = await jsm.streams.info(stream);
      await jsm.streams.update(stream, { ...config, max_age: nanos(3_600_000) });
      await delay(readingAgeMs);
      const refused =
        refusedWrite === 'tombstone' ? await store.tombstone(id) : await store.create(newOperationId('edited-new'), makeTransition(guard, 'create'));
      assertRefused(refused, named, stream);
      // Appends need neither stream: they go on.
      await operation.appendGoesOn(`beside ${stream}`);
      await jsm.streams.update(stream, config);
    }
    await delay(readingAgeMs);
    expectOk(await store.create(newOperationId('edited-new'), makeTransition(guard, 'create')), 'create once restored');
    expectOk(await store.tombstone(id), 'tombstone once restored');
  }));

test('jetstream: a create refused while the open-set stream has limits that evict names what it refused: a workflow instance, or an operation', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const jsm = await jetstreamManager(nc);
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const { config } = await jsm.streams.info('CONVOKE_OPS_OPEN');
    await jsm.streams.update('CONVOKE_OPS_OPEN', { ...config, max_age: nanos(3_600_000) });
    await delay(readingAgeMs);
    const instance = `wf${randomBytes(32).toString('hex')}`;
    const refusedInstance = await store.create(instance, makeTransition(guard, 'start'));
    assert.equal(refusedInstance.kind, 'unavailable', JSON.stringify(refusedInstance));
    const instanceText = 'description' in refusedInstance ? refusedInstance.description : '';
    assert.match(instanceText, /stream CONVOKE_OPS_OPEN now has limits that evict .*; new workflow instances are refused until it is restored/);
    assert.doesNotMatch(instanceText, /operations are refused/);
    const refusedOperation = await store.create(newOperationId('refused'), makeTransition(guard, 'create'));
    assert.match('description' in refusedOperation ? refusedOperation.description : '', /; new operations are refused until it is restored/);
    await jsm.streams.update('CONVOKE_OPS_OPEN', config);
    await delay(readingAgeMs);
    expectOk(await store.create(instance, makeTransition(guard, 'start')), 'the instance once restored');
  }));

test('jetstream: creates made at once against an operations stream with a message cap stop at its reserve: each counts against the room the last reading left', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  try {
    const maxMsgs = 2_100;
    const reserve = 1_033;
    await jsm.streams.add({
      name: 'CONVOKE_OPS',
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.New,
      subjects: ['convoke.op.>', 'convoke.wf.>'],
      max_msgs: maxMsgs,
    });
    // Room for five more messages before creates must stop.
    const room = 5;
    const filler = maxMsgs - reserve - room;
    for (let i = 0; i < filler; i += 100) await Promise.all(Array.from({ length: Math.min(100, filler - i) }, () => js.publish('convoke.op.filler', 'x')));
    const store = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs });
    try {
      const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
      const outcomes = await Promise.all(Array.from({ length: 40 }, (_, i) => store.create(newOperationId(`at-once-${i}`), makeTransition(guard, 'create'))));
      const created = outcomes.filter((outcome) => outcome.kind === 'ok').length;
      for (const outcome of outcomes.filter((o) => o.kind !== 'ok')) {
        assert.equal(outcome.kind, 'unavailable', JSON.stringify(outcome));
        assert.match('description' in outcome ? outcome.description : '', /max_msgs 2100; the last 1033 are kept/);
      }
      const held = (await jsm.streams.info('CONVOKE_OPS')).state.messages;
      assert.ok(
        held <= maxMsgs - reserve,
        `${created} of 40 creates went in: the stream holds ${held} messages, past the ${maxMsgs - reserve} creates stop at`,
      );
      assert.ok(created > 0, 'the room left was used');
    } finally {
      await store.close();
    }
  } finally {
    await nc.close();
    await server.dispose();
  }
});

test('jetstream: an index stream given limits that evict, or subjects its rows no longer land in, after the store opened refuses new operations, naming the stream, until it is restored', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const jsm = await jetstreamManager(nc);
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const operation = await openOperation(store, 'indexed');
    const { config } = await jsm.streams.info('CONVOKE_OPS_INDEX');
    const edits: Array<[Partial<StreamConfig>, RegExp]> = [
      [{ max_age: nanos(3_600_000) }, /stream CONVOKE_OPS_INDEX now has limits that evict \(max_age 3600000 ms\).*; new operations are refused/],
      [{ max_msgs: 10_000 }, /stream CONVOKE_OPS_INDEX now has limits that evict \(discard-old with max_msgs 10000\)/],
      [{ subjects: ['convoke.idx.elsewhere.*'] }, /stream CONVOKE_OPS_INDEX now has no max_msgs_per_subject 1 and subject convoke\.idx\.\*/],
    ];
    for (const [edit, named] of edits) {
      await jsm.streams.update('CONVOKE_OPS_INDEX', { ...config, ...edit });
      await delay(readingAgeMs);
      const refused = await store.create(newOperationId('indexed-new'), makeTransition(guard, 'create'));
      assertRefused(refused, named, JSON.stringify(edit));
      // The open operations' appends go on: their history is whole, and a lost row is rebuilt from it.
      await operation.appendGoesOn(`beside ${JSON.stringify(edit)}`);
      await jsm.streams.update('CONVOKE_OPS_INDEX', config);
    }
    // Deleted, it takes no rows at all: the same refusal, appends going on.
    await jsm.streams.delete('CONVOKE_OPS_INDEX');
    await delay(readingAgeMs);
    const refused = await store.create(newOperationId('indexed-new'), makeTransition(guard, 'create'));
    assert.match(
      'description' in refused ? refused.description : '',
      /stream CONVOKE_OPS_INDEX is missing \(deleted since the store opened\): it takes no rows; new operations are refused until it is made again/,
    );
    await operation.appendGoesOn('beside no index stream');
    await jsm.streams.add(config);
    await delay(readingAgeMs);
    expectOk(await store.create(newOperationId('indexed-new'), makeTransition(guard, 'create')), 'create once restored');
  }));

/** Deletes stream `name` and makes it anew, empty, with its configuration: answers its creation instants, before and after. */
async function recreateStream(jsm: Awaited<ReturnType<typeof jetstreamManager>>, name: string): Promise<{ before: string; after: string }> {
  const { config, created: before } = await jsm.streams.info(name);
  await jsm.streams.delete(name);
  const { created: after } = await jsm.streams.add(config);
  return { before, after };
}

test('jetstream: an operations stream deleted and made anew under a running store refuses every write, naming the stream and both its creations: no key is created again, no open operation starts a new log', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const jsm = await jetstreamManager(nc);
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const open = newOperationId('open');
    const created = await store.create(open, makeTransition(guard, 'create'));
    expectOk(created, 'create');
    const tombstoned = newOperationId('tombstoned');
    expectOk(await store.create(tombstoned, makeTransition(guard, 'create')), 'create');
    expectOk(await store.tombstone(tombstoned), 'tombstone');
    const { before, after } = await recreateStream(jsm, 'CONVOKE_OPS');
    await delay(readingAgeMs);
    const answers = {
      append: await store.append(open, created.revision, makeTransition(guard, 'after the recreation')),
      'create of the open key': await store.create(open, makeTransition(guard, 'create')),
      'create of the tombstoned key': await store.create(tombstoned, makeTransition(guard, 'create')),
      'create of a new key': await store.create(newOperationId('new'), makeTransition(guard, 'create')),
      tombstone: await store.tombstone(open),
    };
    for (const [what, answer] of Object.entries(answers)) {
      assert.equal(answer.kind, 'unavailable', `${what}: ${JSON.stringify(answer)}`);
      const text = 'description' in answer ? answer.description : '';
      assert.ok(text.includes(`stream CONVOKE_OPS was recreated at ${after} (the store opened on one created at ${before})`), `${what}: ${text}`);
      assert.match(text, /writes are refused/, what);
    }
    assert.equal((await jsm.streams.info('CONVOKE_OPS')).state.messages, 0, 'nothing was written into the new stream');
  }));

test('jetstream: a store does not open on an operations stream younger than its key history unless that stream is accepted by its creation instant; accepted, no key used before is created again', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
  try {
    const first = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, indexRowDelayMs: 0 });
    const open = newOperationId('open');
    const tombstoned = newOperationId('tombstoned');
    try {
      // Admissions, so the index holds the open one's row.
      expectOk(await first.create(open, admission(open, guard)), 'create');
      expectOk(await first.create(tombstoned, admission(tombstoned, guard)), 'create');
      expectOk(await first.tombstone(tombstoned), 'tombstone');
    } finally {
      await first.close();
    }
    const { after } = await recreateStream(jsm, 'CONVOKE_OPS');
    const refusedAt = (accepted?: string) =>
      assert.rejects(
        JetStreamEventStore.open({ connection: nc, requestTimeoutMs, ...(accepted === undefined ? {} : { acceptRecreated: accepted }) }),
        (error: unknown) =>
          error instanceof AdapterError &&
          error.kind === 'unavailable' &&
          error.message.includes(`stream CONVOKE_OPS was created at ${after}, after`) &&
          /CONVOKE_OPS_TOMBS/.test(error.message) &&
          error.message.includes(`acceptRecreated ${after}`),
        `accepted ${String(accepted)}`,
      );
    await refusedAt();
    // Accepting another instant accepts nothing: a stream recreated again is refused again.
    await refusedAt('2020-01-01T00:00:00Z');
    const accepted = await JetStreamEventStore.open({ connection: nc, requestTimeoutMs, acceptRecreated: after });
    try {
      const again = await accepted.create(tombstoned, makeTransition(guard, 'create'));
      assert.equal(again.kind, 'expired', `the tombstoned key: ${JSON.stringify(again)}`);
      const lost = await accepted.create(open, makeTransition(guard, 'create'));
      assert.equal(lost.kind, 'unavailable', `the key whose log was lost: ${JSON.stringify(lost)}`);
      assert.match('description' in lost ? lost.description : '', /held a log in CONVOKE_OPS before it was recreated/);
      assert.equal((await jsm.streams.info('CONVOKE_OPS')).state.messages, 0, 'neither key was created again');
      expectOk(await accepted.create(newOperationId('new'), makeTransition(guard, 'create')), 'a new key');
    } finally {
      await accepted.close();
    }
  } finally {
    await nc.close();
    await server.dispose();
  }
});

test('jetstream: an open-set, tombstone or operations stream deleted under a running store refuses the writes that need it, naming the stream and what to do; appends go on while the operations stream is there', () =>
  withStoreAndClient(async ({ store, nc }) => {
    const jsm = await jetstreamManager(nc);
    const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
    const operation = await openOperation(store, 'deleted');
    const id = operation.id;
    const descriptionOf = (answer: { kind: string; description?: string }) => answer.description ?? '';

    // The open set's marks: creates are refused, appends go on; made anew, it is restored.
    const { config: openSet } = await jsm.streams.info('CONVOKE_OPS_OPEN');
    await jsm.streams.delete('CONVOKE_OPS_OPEN');
    await delay(readingAgeMs);
    assertRefused(
      await store.create(newOperationId('unmarked'), makeTransition(guard, 'create')),
      /^stream CONVOKE_OPS_OPEN is missing \(deleted since the store opened\).*; new operations are refused until it is made again/,
      'create',
    );
    await operation.appendGoesOn('beside no open set');
    await jsm.streams.add(openSet);
    await delay(readingAgeMs);
    expectOk(await store.create(newOperationId('marked'), makeTransition(guard, 'create')), 'create once the open set is made again');

    // The tombstone key records: tombstones are refused, appends go on; made anew, its records are still gone.
    const { config: tombs } = await jsm.streams.info('CONVOKE_OPS_TOMBS');
    await jsm.streams.delete('CONVOKE_OPS_TOMBS');
    await delay(readingAgeMs);
    assertRefused(
      await store.tombstone(id),
      /^stream CONVOKE_OPS_TOMBS is missing \(deleted since the store opened\).*; tombstones are refused until it is restored from a backup/,
      'tombstone',
    );
    await operation.appendGoesOn('beside no tombstone stream');
    const { created: remade } = await jsm.streams.add(tombs);
    await delay(readingAgeMs);
    const stillUntombed = await store.tombstone(id);
    assert.ok(
      descriptionOf(stillUntombed as { kind: string }).startsWith(`stream CONVOKE_OPS_TOMBS was recreated at ${remade}`),
      JSON.stringify(stillUntombed),
    );

    // The logs themselves: nothing can be written.
    await jsm.streams.delete('CONVOKE_OPS');
    await delay(readingAgeMs);
    const answers = {
      append: await store.append(id, operation.revision, makeTransition(guard, 'beside no operations stream')),
      create: await store.create(newOperationId('nowhere'), makeTransition(guard, 'create')),
    };
    for (const [what, answer] of Object.entries(answers))
      assertRefused(answer, /^stream CONVOKE_OPS is missing \(deleted since the store opened\).*; writes are refused until it is restored from a backup/, what);
  }));

test('jetstream: stores opened at once on a fresh server all open, whichever of their stream adds the server answers as a subject overlap', async () => {
  const server = await startJetStreamServer();
  const nc = await connect({ servers: server.url });
  try {
    const jsm = await jetstreamManager(nc);
    // The rule the race relies on: an overlap with the stream of that very name is another client's add that won.
    await jsm.streams.add({ name: 'RACED', subjects: ['raced.>'] });
    const overlap = await jsm.streams.add({ name: 'OTHER', subjects: ['raced.>'] }).then(
      () => undefined,
      (error: unknown) => error,
    );
    assert.equal((overlap as { code?: number } | undefined)?.code, 10065, String(overlap));
    assert.equal(await addedMeanwhile(jsm, 'RACED', overlap), true, 'the named stream is there: another client made it');
    assert.equal(await addedMeanwhile(jsm, 'OTHER', overlap), false, 'another stream holds the subjects: the error stands');
    assert.equal(await addedMeanwhile(jsm, 'RACED', new Error('not the server')), false);
    // Several processes opening one store at once (convoke serve beside convoke serve).
    for (let round = 0; round < 3; round++) {
      const prefix = `race${round}`;
      const opened = await Promise.allSettled(
        Array.from({ length: 4 }, () => JetStreamEventStore.open({ connection: nc, streamName: `RACE_${round}`, subjectPrefix: prefix })),
      );
      for (const outcome of opened) {
        assert.equal(outcome.status, 'fulfilled', outcome.status === 'rejected' ? String(outcome.reason) : '');
        if (outcome.status === 'fulfilled') await outcome.value.close();
      }
    }
  } finally {
    await nc.close();
    await server.dispose();
  }
});
