/**
 * Several workers on one store (SQLite; JetStream on a real nats-server): the worker lease.
 * Both executors load every instance; only the lease's holder drives it, so each task runs once
 * and the HTTP stub sees each call once while both live. Killed mid-call, the holder's lease
 * ends by the clock and the other worker takes over — no earlier — and finishes: an idempotent
 * call in flight is made again, a POST without an Idempotency-Key is not (its answer is
 * "outcome unknown").
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { WorkflowEvent, WorkflowTransition } from '../../src/workflow/exec/events.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { assertReplayEqual, harness, yaml } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

/**
 * While both workers live, a lease far longer than the test: the holder's renewals (every third of
 * it) cannot come late enough for the other to take over, however loaded the machine, so only the
 * lease rule decides who drives. The takeover test needs a lease that ends soon after the kill.
 */
const liveLeaseMs = 60_000;
const takeoverLeaseMs = 2_000;

/** A loopback HTTP stub counting requests by method and path; a held path is answered only when released. */
async function stub() {
  const seen = new Map<string, number>();
  const held = new Set<string>();
  const waiting: ServerResponse[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const key = `${req.method} ${req.url}`;
    seen.set(key, (seen.get(key) ?? 0) + 1);
    const answer = () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ key: req.url?.split('/')[1] ?? '' }));
    };
    if (held.has(key) && seen.get(key) === 1) waiting.push(res);
    else setTimeout(answer, 20);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    hold: (key: string) => held.add(key),
    close: () => {
      for (const res of waiting) res.destroy();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const document = (base: string, method = 'post') =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: two-calls, version: '1.0.0' }
do:
  - first:
      call: http
      with: { method: ${method}, endpoint: '${base}/{key}/first' }
  - carry:
      set: { key: '\${ .key }', carried: true }
  - second:
      call: http
      with: { method: post, endpoint: '${base}/{key}/second' }
`);

interface Stores {
  a: EventStore;
  b: EventStore;
  /** Drops the first store's connection (the worker's process "dies" with it). */
  kill(): Promise<void>;
  close(): Promise<void>;
}

async function sqliteStores(clock: SystemClock): Promise<Stores> {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-wf-workers-'));
  const a = new SqliteEventStore({ path: join(dir, 'wf.db'), clock });
  const b = new SqliteEventStore({ path: join(dir, 'wf.db'), clock });
  return {
    a,
    b,
    kill: async () => a.close(),
    close: async () => {
      await b.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function jetStreamStores(): Promise<Stores> {
  const server = await startJetStreamServer();
  const a = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  const b = await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 2000 });
  return {
    a,
    b,
    kill: async () => a.close(),
    close: async () => {
      await b.close();
      await server.dispose();
    },
  };
}

async function log(store: EventStore, id: string): Promise<{ committedAtMs: number; transition: WorkflowTransition }[]> {
  const read = await store.read(id);
  assert.equal(read.kind, 'ok');
  return (read as unknown as { transitions: { committedAtMs: number; transition: WorkflowTransition }[] }).transitions;
}

const eventsOf = async (store: EventStore, id: string): Promise<WorkflowEvent[]> => (await log(store, id)).flatMap((s) => s.transition.events);

async function bothLive(stores: Stores) {
  const clock = new SystemClock();
  const http = await stub();
  const a = harness({ store: stores.a, clock, worker: 'worker-a', leaseMs: liveLeaseMs });
  const b = harness({ store: stores.b, clock, worker: 'worker-b', leaseMs: liveLeaseMs });
  try {
    await a.executor.watch();
    await b.executor.watch();
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const [starter, other] = i % 2 === 0 ? [a, b] : [b, a];
      const { instanceId } = await starter.executor.start({
        principalId: 'alice',
        invocationKey: `i${i}`,
        document: document(http.base),
        input: { key: `i${i}` },
      });
      await other.executor.load(instanceId);
      ids.push(instanceId);
    }
    const holders = new Set<string>();
    for (const id of ids) {
      for (const h of [a, b]) assert.equal((await h.executor.wait(id, 15_000)).status, 'completed');
      const events = await eventsOf(stores.b, id);
      const starts = events.filter((e) => e.type === 'task-started').map((e) => (e as { at: string }).at);
      assert.deepEqual(starts, ['/do/0/first', '/do/1/carry', '/do/2/second'], 'each task started once');
      assert.equal(events.filter((e) => e.type === 'call-started').length, 2, 'each call started once');
      holders.add((await a.executor.get(id))!.lease!.worker);
      await assertReplayEqual(a, id);
      await assertReplayEqual(b, id);
    }
    assert.deepEqual([...holders].sort(), ['worker-a', 'worker-b'], 'each worker led the instances it started');
    for (let i = 0; i < 6; i++) {
      assert.equal(http.seen.get(`POST /i${i}/first`), 1, `POST /i${i}/first made once`);
      assert.equal(http.seen.get(`POST /i${i}/second`), 1, `POST /i${i}/second made once`);
    }
  } finally {
    await a.close();
    await b.close();
    await http.close();
  }
}

/** A's worker dies with calls in flight; B takes over once A's lease has ended and finishes. */
async function oneKilled(stores: Stores) {
  const clock = new SystemClock();
  const http = await stub();
  http.hold('GET /get/first');
  http.hold('POST /post/first');
  const a = harness({ store: stores.a, clock, worker: 'worker-a', leaseMs: takeoverLeaseMs });
  const b = harness({ store: stores.b, clock, worker: 'worker-b', leaseMs: takeoverLeaseMs });
  try {
    await b.executor.watch();
    const started = await Promise.all(
      (['get', 'post'] as const).map((method) =>
        a.executor.start({ principalId: 'alice', invocationKey: method, document: document(http.base, method), input: { key: method } }),
      ),
    );
    const [getId, postId] = started.map((s) => s.instanceId) as [string, string];
    for (const id of [getId, postId]) await b.executor.load(id);
    while (!http.seen.has('GET /get/first') || !http.seen.has('POST /post/first')) await new Promise((r) => setTimeout(r, 10));
    await stores.kill();
    await a.close();

    const done: WorkflowRecord = await b.executor.wait(getId, 15_000);
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.equal(http.seen.get('GET /get/first'), 2, 'the idempotent GET in flight was made again');
    assert.equal(http.seen.get('POST /get/second'), 1);
    const faulted = await b.executor.wait(postId, 15_000);
    assert.equal(faulted.status, 'faulted');
    assert.equal(faulted.error?.title, 'Call outcome unknown');
    assert.equal(http.seen.get('POST /post/first'), 1, 'the POST without an Idempotency-Key was not made again');
    assert.equal(http.seen.has('POST /post/second'), false);
    for (const id of [getId, postId]) {
      const { endA, takeover } = leaseHistory(await log(stores.b, id));
      assert.ok(takeover, 'worker-b took the lease over');
      assert.equal(takeover.transition.timeGuard.notBeforeMs, endA, 'the takeover is guarded by the end of the lease A held');
      assert.ok(takeover.committedAtMs >= endA, 'the store committed the takeover no earlier than that end');
      await assertReplayEqual(b, id);
    }
  } finally {
    await a.close();
    await b.close();
    await http.close();
  }
}

/**
 * A cancel needs no lease: worker B cancels an instance worker A holds mid-call (its lease far from
 * ended) and the instance has ended when the cancel returns, so the cancel routes answer 200 with
 * it, never 202 "still running".
 */
async function cancelWhileHeld(stores: Stores) {
  const clock = new SystemClock();
  const http = await stub();
  http.hold('POST /held/first');
  const a = harness({ store: stores.a, clock, worker: 'worker-a', leaseMs: liveLeaseMs });
  const b = harness({ store: stores.b, clock, worker: 'worker-b', leaseMs: liveLeaseMs });
  try {
    await a.executor.watch();
    const { instanceId } = await a.executor.start({ principalId: 'alice', invocationKey: 'held', document: document(http.base), input: { key: 'held' } });
    await b.executor.load(instanceId);
    while (!http.seen.has('POST /held/first')) await new Promise((r) => setTimeout(r, 10));
    const held = (await b.executor.get(instanceId))!;
    assert.equal(held.lease?.worker, 'worker-a');
    assert.ok(held.lease.untilMs > clock.nowMs() + liveLeaseMs / 2, "worker-a's lease has not ended");
    const cancelled = await b.executor.cancel(instanceId, 'cancelled by the caller that started it');
    assert.equal(cancelled.status, 'cancelled');
    assert.equal((await a.executor.wait(instanceId, 5_000)).status, 'cancelled', 'the holder sees it cancelled');
    await assertReplayEqual(b, instanceId);
  } finally {
    await a.close();
    await b.close();
    await http.close();
  }
}

/** The end of worker-a's last lease, and the transition in which worker-b took the lease over. */
function leaseHistory(stored: { committedAtMs: number; transition: WorkflowTransition }[]) {
  let endA = Number.NaN;
  for (const entry of stored) {
    for (const event of entry.transition.events) {
      if (event.type === 'lease-acquired' && event.worker === 'worker-b') return { endA, takeover: entry };
      if (event.type === 'lease-acquired' || event.type === 'lease-renewed') endA = event.untilMs;
    }
  }
  return { endA, takeover: undefined };
}

async function withStores(open: () => Promise<Stores>, run: (stores: Stores) => Promise<void>): Promise<void> {
  const stores = await open();
  try {
    await run(stores);
  } finally {
    await stores.kill().catch(() => undefined);
    await stores.close();
  }
}

test('two workers on one SQLite file: each task runs once, each HTTP call is made once', () => withStores(() => sqliteStores(new SystemClock()), bothLive));
test('two workers on one SQLite file: the holder killed mid-call, the other takes over after its lease and finishes', () =>
  withStores(() => sqliteStores(new SystemClock()), oneKilled));
test("a cancel on another worker ends an instance the holder's unexpired lease holds (SQLite)", () =>
  withStores(() => sqliteStores(new SystemClock()), cancelWhileHeld));
test('two workers on JetStream: each task runs once, each HTTP call is made once', () => withStores(jetStreamStores, bothLive));
test('two workers on JetStream: the holder killed mid-call, the other takes over after its lease and finishes', () => withStores(jetStreamStores, oneKilled));
