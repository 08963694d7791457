/**
 * The aggregate kernel with a second aggregate (a toy approval request, test/support/approval.ts)
 * over the memory and the SQLite store: the per-stream queue keeps submission order, a CAS
 * conflict reloads and decides again, timers are data turned into commands, another process's
 * append reloads the record and answers waiters, and a decided transition the aggregate's
 * machine forbids is refused before it is stored. The kernel is the same one the operation
 * aggregate runs on; nothing in it changed for this aggregate.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { flushMicrotasks, VirtualClock } from '../../src/contract/clock.js';
import { AdapterError, AssertionFailure } from '../../src/contract/errors.js';
import { guardBetween, openEndedMs } from '../../src/events/guard.js';
import { Kernel, type KernelHooks, type Stream } from '../../src/kernel/index.js';
import type { Aggregate, AppendOutcome, RecordAfter, StreamStore } from '../../src/kernel/index.js';
import { dueRetryMaxMs, dueRetryMs, newStream, reloadRetryMs } from '../../src/kernel/kernel.js';
import {
  approvalAggregate,
  approvalStore,
  approvalStream,
  decideApproval,
  requestApproval,
  transitionOf,
  type ApprovalRecord,
  type ApprovalTransition,
} from '../support/approval.js';

type ApprovalKernel = Kernel<ApprovalRecord, ApprovalTransition>;

interface Rig {
  clock: VirtualClock;
  store: EventStore;
  /** A kernel of its own, as another process on the same store would have. */
  kernel(): ApprovalKernel;
  close(): Promise<void>;
}

async function rig(backend: 'memory' | 'sqlite'): Promise<Rig> {
  const clock = new VirtualClock();
  let store: EventStore;
  let remove = () => {};
  if (backend === 'memory') store = new MemoryEventStore({ clock });
  else {
    const dir = mkdtempSync(join(tmpdir(), 'convoke-kernel-'));
    store = new SqliteEventStore({ path: join(dir, 'approvals.db'), clock, synchronous: 'normal', followIntervalMs: 10 });
    remove = () => rmSync(dir, { recursive: true, force: true });
  }
  const streams = approvalStore(store);
  const kernels: ApprovalKernel[] = [];
  return {
    clock,
    store,
    kernel: () => {
      const kernel = new Kernel<ApprovalRecord, ApprovalTransition>({
        aggregate: approvalAggregate,
        store: () => streams,
        clock,
        finishedCacheMax: 16,
        // The timer the record asks for becomes the expire command.
        hooks: { due: async () => (record) => transitionOf(decideApproval({ kind: 'expire', nowMs: clock.nowMs() }, record)) },
      });
      kernels.push(kernel);
      return kernel;
    },
    close: async () => {
      for (const kernel of kernels) await kernel.close();
      await store.close();
      remove();
    },
  };
}

const make = (record: ApprovalRecord): Stream<ApprovalRecord> => newStream(approvalStream(record.requestId), record, record.revision);

async function created(kernel: ApprovalKernel, clock: VirtualClock, requestId: string, needed: number, ttlMs: number): Promise<Stream<ApprovalRecord>> {
  const outcome = await kernel.create(approvalStream(requestId), requestApproval(requestId, needed, clock.nowMs(), ttlMs), make);
  assert.equal(outcome.kind, 'ok');
  return (outcome as { stream: Stream<ApprovalRecord> }).stream;
}

function approve(kernel: ApprovalKernel, stream: Stream<ApprovalRecord>, clock: VirtualClock, by: string, decisions?: { count: number }): Promise<void> {
  return kernel.commit(stream, (record) => {
    if (decisions) decisions.count++;
    return transitionOf(decideApproval({ kind: 'approve', by, nowMs: clock.nowMs() }, record));
  });
}

async function logEvents(store: EventStore, id: string): Promise<string[]> {
  const read = await approvalStore(store).read(id);
  assert.equal(read.kind, 'ok');
  if (read.kind !== 'ok') return [];
  return read.transitions.flatMap((t) => t.transition.events.map((e) => (e.type === 'approved' ? `${e.type}:${e.by}` : e.type)));
}

/** Real-time bound for what a store's polling delivers (SQLite notices are polled). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms))),
  ]).finally(() => clearTimeout(timer));
}

for (const backend of ['memory', 'sqlite'] as const) {
  test(`kernel (${backend}): work on one stream runs in submission order, even when earlier work is slower`, async () => {
    const r = await rig(backend);
    try {
      const kernel = r.kernel();
      const stream = await created(kernel, r.clock, 'queue', 9, 60_000);
      const approvers = ['a', 'b', 'c', 'd'];
      // The first submitted waits longest before deciding: without the queue, 'd' would commit first.
      await Promise.all(
        approvers.map((by, i) =>
          kernel.enqueue(stream, async () => {
            await new Promise((resolve) => setTimeout(resolve, 5 * (approvers.length - i)));
            await approve(kernel, stream, r.clock, by);
          }),
        ),
      );
      assert.deepEqual(await logEvents(r.store, stream.id), ['approval-requested', 'approved:a', 'approved:b', 'approved:c', 'approved:d']);
      assert.deepEqual(stream.record.approvers, approvers);
    } finally {
      await r.close();
    }
  });

  test(`kernel (${backend}): a CAS conflict with another process reloads the record and decides the command again`, async () => {
    const r = await rig(backend);
    try {
      const first = r.kernel();
      const second = r.kernel();
      const stream = await created(first, r.clock, 'cas', 2, 60_000);
      const theirs = await second.load(stream.id, make);
      assert.ok(theirs);
      await approve(second, theirs, r.clock, 'x');
      // The first process still holds the record without x: its append at that revision conflicts.
      assert.deepEqual(stream.record.approvers, []);
      const decisions = { count: 0 };
      await approve(first, stream, r.clock, 'y', decisions);
      assert.equal(decisions.count, 2, 'decided on the stale record, then again on the reloaded one');
      assert.deepEqual(stream.record.approvers, ['x', 'y']);
      assert.equal(stream.record.state, 'granted', 'the second decision saw x and granted with y');
      assert.deepEqual(await logEvents(r.store, stream.id), ['approval-requested', 'approved:x', 'approved:y', 'granted']);
    } finally {
      await r.close();
    }
  });

  test(`kernel (${backend}): the record's due instant is armed as a timer and turned into a command at that instant`, async () => {
    const r = await rig(backend);
    try {
      const kernel = r.kernel();
      const stream = await created(kernel, r.clock, 'timer', 2, 1000);
      const closed = kernel.wait(stream, (record) => record.state !== 'pending', 10_000);
      await r.clock.advance(999);
      assert.equal(stream.record.state, 'pending', 'nothing is due before the instant');
      await r.clock.advance(1);
      assert.equal(await closed, true, 'the waiter was answered by the timer-driven commit');
      assert.equal(stream.record.state, 'lapsed');
      const read = await r.store.read(stream.id);
      assert.ok(read.kind === 'ok');
      assert.deepEqual(read.transitions.at(-1)?.transition.timeGuard, { notBeforeMs: stream.record.expiresAtMs, notAfterMs: openEndedMs });
      assert.equal(stream.dueAtMs, undefined, 'a lapsed request asks for no timer');
    } finally {
      await r.close();
    }
  });

  test(`kernel (${backend}): another process's append reloads the record and answers this process's waiters`, async () => {
    const r = await rig(backend);
    try {
      const watching = r.kernel();
      await watching.watch();
      const other = r.kernel();
      const stream = await created(watching, r.clock, 'watch', 2, 60_000);
      const granted = watching.wait(stream, (record) => record.state === 'granted', 60_000);
      const theirs = await other.load(stream.id, make);
      assert.ok(theirs);
      await approve(other, theirs, r.clock, 'p');
      await approve(other, theirs, r.clock, 'q');
      assert.equal(await within(granted, 5000, 'the reload after the notice'), true);
      assert.deepEqual(stream.record.approvers, ['p', 'q']);
      assert.equal(approvalAggregate.revision(stream.record), approvalAggregate.revision(theirs.record));
    } finally {
      await r.close();
    }
  });

  test(`kernel (${backend}): a decided transition the aggregate's machine forbids is refused before it is stored`, async () => {
    const r = await rig(backend);
    try {
      const kernel = r.kernel();
      const stream = await created(kernel, r.clock, 'legal', 1, 60_000);
      await approve(kernel, stream, r.clock, 'a');
      assert.equal(stream.record.state, 'granted');
      const before = await logEvents(r.store, stream.id);
      // A faulty decider: a lapse after the grant, which the approval machine does not allow.
      await assert.rejects(
        kernel.commit(stream, () => ({
          events: [{ type: 'lapsed', v: 1 }],
          timeGuard: { notBeforeMs: 0, notAfterMs: openEndedMs },
          causation: { command: 'faulty' },
        })),
        AssertionFailure,
      );
      assert.deepEqual(await logEvents(r.store, stream.id), before, 'nothing was appended');
    } finally {
      await r.close();
    }
  });
}

test('kernel: a committed transition is applied once, when the store asks for the record inside its write and when it does not', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const inner = approvalStore(store);
  let applies = 0;
  const asked: (ApprovalRecord | undefined)[] = [];
  const counting = { ...approvalAggregate, apply: (...args: Parameters<typeof approvalAggregate.apply>) => (applies++, approvalAggregate.apply(...args)) };
  let ask = true;
  // A store that keeps a projection: it asks for the record after what it stored, twice, as an index writer may.
  const streams: StreamStore<ApprovalTransition, ApprovalRecord> = {
    ...inner,
    create: async (id, t, after) => answered(await inner.create(id, t), t, after),
    append: async (id, revision, t, after) => answered(await inner.append(id, revision, t), t, after),
  };
  function answered(outcome: AppendOutcome, transition: ApprovalTransition, after: RecordAfter<ApprovalTransition, ApprovalRecord> | undefined): AppendOutcome {
    if (ask && outcome.kind === 'ok' && after) {
      for (let i = 0; i < 2; i++) asked.push(after({ revision: outcome.revision, committedAtMs: outcome.committedAtMs, transition }));
    }
    return outcome;
  }
  const kernel = new Kernel<ApprovalRecord, ApprovalTransition>({
    aggregate: counting,
    store: () => streams,
    clock,
    finishedCacheMax: 16,
    hooks: { due: async () => undefined },
  });
  try {
    const stream = await created(kernel, clock, 'once', 3, 60_000);
    assert.equal(applies, 1, 'the creation: applied once, for the store and the kernel');
    assert.equal(asked.at(-1), stream.record, 'the store was handed the record the kernel holds');
    await approve(kernel, stream, clock, 'a');
    assert.equal(applies, 2, 'an append: applied once');
    assert.equal(asked.at(-1), stream.record);
    ask = false;
    await approve(kernel, stream, clock, 'b');
    assert.equal(applies, 3, 'a store that does not ask: the kernel applies it itself, once');
    assert.deepEqual(stream.record.approvers, ['a', 'b']);
  } finally {
    await kernel.close();
    await store.close();
  }
});

test('kernel: a check that applied the transition answers the record after it, and the kernel does not apply it again', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  let applies = 0;
  let answered = 0;
  const preparing: Aggregate<ApprovalRecord, ApprovalTransition> = {
    ...approvalAggregate,
    apply: (...args: Parameters<typeof approvalAggregate.apply>) => (applies++, approvalAggregate.apply(...args)),
    // Checks by applying at the instant the kernel expects, as the workflow aggregate does, and answers from that.
    check: (record, transition, atMs) => {
      approvalAggregate.check?.(record, transition, atMs);
      const applied = approvalAggregate.apply(record, { revision: record.revision, committedAtMs: atMs, transition });
      return (stored) => {
        answered++;
        return applied && stored.committedAtMs === atMs ? { ...applied, revision: stored.revision } : approvalAggregate.apply(record, stored);
      };
    },
  };
  const kernel = new Kernel<ApprovalRecord, ApprovalTransition>({
    aggregate: preparing,
    store: () => approvalStore(store),
    clock,
    finishedCacheMax: 16,
    hooks: { due: async () => undefined },
  });
  try {
    const stream = await created(kernel, clock, 'prepared', 3, 60_000);
    assert.equal(applies, 1, 'the creation (nothing to check it against): applied');
    await approve(kernel, stream, clock, 'a');
    await approve(kernel, stream, clock, 'b');
    assert.equal(applies, 1, 'each append: the check answered the record, apply was not asked again');
    assert.equal(answered, 2);
    const read = await approvalStore(store).read(stream.id);
    assert.equal(read.kind, 'ok');
    if (read.kind === 'ok') assert.deepEqual(stream.record, approvalAggregate.fold(read.transitions), 'the record is the fold of its log');
  } finally {
    await kernel.close();
    await store.close();
  }
});

/** The approval streams of `store`, counting the transitions each whole read and each tail read returned. */
function countingStreams(store: EventStore): {
  streams: StreamStore<ApprovalTransition>;
  counts: { read: number; readAfter: number; reads: number; tails: number };
} {
  const inner = approvalStore(store);
  const counts = { read: 0, readAfter: 0, reads: 0, tails: 0 };
  const readAfter = inner.readAfter;
  assert.ok(readAfter, 'the store reads tails');
  return {
    counts,
    streams: {
      ...inner,
      read: async (id) => {
        const read = await inner.read(id);
        counts.reads++;
        if (read.kind === 'ok') counts.read += read.transitions.length;
        return read;
      },
      readAfter: async (id, revision) => {
        const read = await readAfter(id, revision);
        counts.tails++;
        if (read.kind === 'ok') counts.readAfter += read.transitions.length;
        return read;
      },
    },
  };
}

function approvalKernel(
  clock: VirtualClock,
  streams: StreamStore<ApprovalTransition>,
  hooks: Partial<KernelHooks<ApprovalRecord, ApprovalTransition, Stream<ApprovalRecord>>> = {},
) {
  return new Kernel<ApprovalRecord, ApprovalTransition>({
    aggregate: approvalAggregate,
    store: () => streams,
    clock,
    finishedCacheMax: 16,
    hooks: { due: async () => undefined, ...hooks },
  });
}

for (const backend of ['memory', 'sqlite'] as const) {
  test(`kernel (${backend}): a process following another's appends reads only what was stored after the record it holds, and holds the fold of the whole log`, async () => {
    const r = await rig(backend);
    const { streams, counts } = countingStreams(r.store);
    const extended: number[] = [];
    const follower = approvalKernel(r.clock, streams, { extended: (_stream, tail) => void extended.push(tail.length) });
    try {
      await follower.watch();
      const writer = r.kernel();
      const approvals = 40;
      const stream = await created(writer, r.clock, 'follow', approvals + 1, 600_000);
      const held = await follower.load(stream.id, make);
      assert.ok(held);
      assert.deepEqual([counts.reads, counts.read], [1, 1], 'loaded: the whole log, once');
      for (let i = 0; i < approvals; i++) {
        await approve(writer, stream, r.clock, `a${i}`);
        // Every few appends the follower catches up, so it follows by many tails of one or more transitions.
        if (i % 3 === 2 || i === approvals - 1) {
          const revision = stream.record.revision;
          await within(
            follower.wait(held, (record) => record.revision === revision, 60_000),
            5000,
            `the follower at ${revision}`,
          );
        }
      }
      const whole = await approvalStore(r.store).read(stream.id);
      assert.ok(whole.kind === 'ok');
      assert.deepEqual(held.record, approvalAggregate.fold(whole.transitions), 'the fold of the whole log');
      assert.deepEqual([...held.known].sort(), whole.transitions.map((s) => s.revision).sort(), 'every revision of the log is known');
      assert.deepEqual([counts.reads, counts.read], [1, 1], 'no whole log read again');
      assert.equal(counts.readAfter, approvals, 'each appended transition read once, in a tail');
      assert.equal(
        extended.reduce((sum, n) => sum + n, 0),
        approvals,
        'the extended hook saw every tail',
      );
    } finally {
      await follower.close();
      await r.close();
    }
  });

  test(`kernel (${backend}): a log that no longer holds the record's revision (diverged) is read whole, and the writes it lost are told`, async () => {
    const r = await rig(backend);
    const { streams, counts } = countingStreams(r.store);
    const lost: string[][] = [];
    const reread: number[] = [];
    let current = streams;
    const follower = new Kernel<ApprovalRecord, ApprovalTransition>({
      aggregate: approvalAggregate,
      store: () => current,
      clock: r.clock,
      finishedCacheMax: 16,
      hooks: {
        due: async () => undefined,
        lostWrites: (_stream, revisions) => void lost.push([...revisions]),
        reread: (_stream, log) => void reread.push(log.length),
      },
    });
    const restored = new MemoryEventStore({ clock: r.clock });
    try {
      const writer = r.kernel();
      const stream = await created(writer, r.clock, 'diverged', 5, 600_000);
      for (const by of ['a', 'b']) await approve(writer, stream, r.clock, by);
      const held = await follower.load(stream.id, make);
      assert.ok(held);
      // The store comes back with the log as it was before the last append (its acknowledged write lost).
      const log = await r.store.read(stream.id);
      assert.ok(log.kind === 'ok');
      const kept = log.transitions.slice(0, -1);
      let revision: string | undefined;
      for (const stored of kept) {
        const outcome =
          revision === undefined ? await restored.create(stream.id, stored.transition) : await restored.append(stream.id, revision, stored.transition);
        assert.equal(outcome.kind, 'ok');
        if (outcome.kind === 'ok') revision = outcome.revision;
      }
      const shorter = countingStreams(restored);
      current = shorter.streams;
      await assert.rejects(follower.reload(held), /lost acknowledged writes/);
      assert.deepEqual([shorter.counts.tails, shorter.counts.reads], [1, 1], 'the tail answered diverged, then the whole log was read');
      assert.deepEqual(lost, [[log.revision]], 'the revision the log no longer holds');
      assert.deepEqual(reread.at(-1), kept.length);
      assert.deepEqual(held.record.approvers, ['a'], 'the record is the shorter log');
      assert.equal(counts.tails, 0);
    } finally {
      await follower.close();
      await restored.close();
      await r.close();
    }
  });
}

for (const backend of ['memory', 'sqlite'] as const) {
  test(`kernel (${backend}): a reload after a notice that fails is tried again, backing off, until it reads what the notice told of, though no other notice comes`, async () => {
    const r = await rig(backend);
    const inner = approvalStore(r.store);
    const readAfter = inner.readAfter;
    assert.ok(readAfter);
    // The store refuses the follower's next `failing` reads, whole or tail.
    let failing = 0;
    const refused = { kind: 'unavailable' as const, description: 'the store is not answering' };
    const flaky: StreamStore<ApprovalTransition> = {
      ...inner,
      read: async (id) => (failing > 0 ? (failing--, refused) : inner.read(id)),
      readAfter: async (id, revision) => (failing > 0 ? (failing--, refused) : readAfter(id, revision)),
    };
    const failures: string[] = [];
    const follower = approvalKernel(r.clock, flaky, { failed: (stage) => void failures.push(stage) });
    try {
      await follower.watch();
      const writer = r.kernel();
      const stream = await created(writer, r.clock, 'retry', 3, 600_000);
      const held = await follower.load(stream.id, make);
      assert.ok(held);
      failing = 2;
      // The writer's last append: its notice's reload fails, and nothing else will be told.
      await approve(writer, stream, r.clock, 'p');
      const revision = stream.record.revision;
      const caughtUp = follower.wait(held, (record) => record.revision === revision, 600_000);
      await within(
        (async () => {
          while (failures.length < 1) await new Promise((resolve) => setTimeout(resolve, 5));
        })(),
        5000,
        'the failed reload',
      );
      assert.notEqual(held.record.revision, revision, 'still behind after the failure');
      // Tried again after reloadRetryMs (failing once more), then after twice that, and read.
      await r.clock.advance(reloadRetryMs);
      assert.deepEqual(failures, ['reload', 'reload'], 'the first retry, refused');
      await r.clock.advance(reloadRetryMs);
      assert.notEqual(held.record.revision, revision, 'the second retry waits twice as long');
      await r.clock.advance(reloadRetryMs);
      assert.equal(await within(caughtUp, 5000, 'the retried reload'), true);
      assert.deepEqual(failures, ['reload', 'reload']);
      assert.deepEqual(held.record.approvers, ['p']);
    } finally {
      await follower.close();
      await r.close();
    }
  });
}

test('kernel: a due command that failed is tried again by the one timer the instance holds, though a commit armed another while it ran', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  let dues = 0;
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  const failures: Array<[string, unknown]> = [];
  const kernel = approvalKernel(clock, approvalStore(store), {
    failed: (stage, error) => void failures.push([stage, error]),
    // The first due command waits (a policy slow to answer), then fails; the next lapses the request.
    due: async () => {
      dues++;
      if (dues === 1) {
        await gate;
        throw new Error('the policy could not answer');
      }
      return (record) => transitionOf(decideApproval({ kind: 'expire', nowMs: clock.nowMs() }, record));
    },
  });
  try {
    const stream = await created(kernel, clock, 'due-retry', 3, 1000);
    await clock.advance(1000);
    assert.equal(dues, 1, 'the due instant turned into a command, which waits');
    // Meanwhile another command commits: the record moved, and its due instant (now) is armed again.
    await kernel.commit(stream, () => ({
      events: [{ type: 'approved', v: 1, by: 'a' }],
      timeGuard: guardBetween(0, openEndedMs),
      causation: { command: 'approve' },
    }));
    release();
    await flushMicrotasks();
    assert.equal(clock.pendingTimers(), 1, 'the retry replaced the timer armed meanwhile: one timer for the instance');
    // The failure is told (counted and logged by the kernel's user), not only retried.
    assert.deepEqual(
      failures.map(([stage, error]) => [stage, String(error)]),
      [['due', 'Error: the policy could not answer']],
    );
    assert.equal(stream.dueAtMs, clock.nowMs() + dueRetryMs, 'dueAtMs is the instant of the timer armed');
    await clock.advance(dueRetryMs - 1);
    assert.equal(dues, 1, 'nothing fires before the retry');
    await clock.advance(1);
    assert.equal(dues, 2, 'the retry, once');
    assert.equal(stream.record.state, 'lapsed');
    await clock.advance(60_000);
    assert.equal(dues, 2, 'no second timer fires the due command again');
    assert.equal(clock.pendingTimers(), 0);
    assert.equal(stream.dueAtMs, undefined);
  } finally {
    await kernel.close();
    await store.close();
  }
});

test('kernel: due commands failing in a row are told at the 1st, 2nd, 4th, 8th… failure, and a success starts the count again', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const told: number[] = [];
  let dues = 0;
  let failing = 9;
  const kernel = approvalKernel(clock, approvalStore(store), {
    failed: (stage) => void (stage === 'due' && told.push(dues)),
    due: async () => {
      dues++;
      if (failing > 0) {
        failing--;
        throw new Error('the store is restarting');
      }
      return (record) => transitionOf(decideApproval({ kind: 'expire', nowMs: clock.nowMs() }, record));
    },
  });
  try {
    const stream = await created(kernel, clock, 'due-told', 3, 1000);
    await clock.advance(1000);
    // Nine retries backing off from dueRetryMs: 100 ms, 200 ms, … 25.6 s, 51.1 s in all.
    for (let i = 0; i < 12 && stream.record.state !== 'lapsed'; i++) await clock.advance(dueRetryMaxMs);
    assert.equal(stream.record.state, 'lapsed', 'the tenth try lapsed it');
    assert.equal(dues, 10);
    assert.deepEqual(told, [1, 2, 4, 8], 'nine failures in a row, four told');
    assert.equal(stream.dueFailures, undefined, 'the success reset the count');
  } finally {
    await kernel.close();
    await store.close();
  }
});

test('kernel: a due command that keeps failing is tried again backing off, doubling from dueRetryMs to dueRetryMaxMs, and counts afresh after a success', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const tries: number[] = [];
  let refusing = true;
  const kernel = approvalKernel(clock, approvalStore(store), {
    due: async () => {
      tries.push(clock.nowMs());
      if (refusing) throw new AdapterError('invalid-input', 'the log has no room for it');
      return (record) => transitionOf(decideApproval({ kind: 'expire', nowMs: clock.nowMs() }, record));
    },
  });
  try {
    const stream = await created(kernel, clock, 'due-backoff', 3, 1000);
    await clock.advance(1000);
    const start = clock.nowMs();
    assert.equal(tries.length, 1);
    // An hour of a refusal that will not pass: the first retry as prompt as ever, then fewer and fewer.
    for (let t = 0; t < 3_600_000; t += 10_000) await clock.advance(10_000);
    const gaps = tries.slice(1).map((at, i) => at - (tries[i] ?? 0));
    assert.deepEqual(gaps.slice(0, 4), [dueRetryMs, 2 * dueRetryMs, 4 * dueRetryMs, 8 * dueRetryMs], 'doubling from dueRetryMs');
    assert.ok(
      gaps.every((gap) => gap <= dueRetryMaxMs),
      `never longer apart than ${dueRetryMaxMs} ms: ${gaps.join(', ')}`,
    );
    assert.equal(gaps.at(-1), dueRetryMaxMs, 'up to the cap');
    assert.ok(tries.length < 100, `${tries.length} tries in an hour, not one every ${dueRetryMs} ms (36 000)`);
    // The refusal passes: the next retry succeeds and the count starts again.
    refusing = false;
    await clock.advance(dueRetryMaxMs);
    assert.equal(stream.record.state, 'lapsed');
    assert.equal(stream.dueFailures, undefined);
    assert.ok(clock.nowMs() - start > 3_600_000);
  } finally {
    await kernel.close();
    await store.close();
  }
});

test('kernel: an instance created finished is held under the finished bound, as one that finishes later is', async () => {
  const r = await rig('memory');
  try {
    const kernel = r.kernel();
    const nowMs = r.clock.nowMs();
    // Born granted (a workflow child cancelled before its start is born ended the same way).
    for (let i = 0; i < 40; i++) {
      const requested = requestApproval(`born-${i}`, 1, nowMs, 60_000);
      const born: ApprovalTransition = { ...requested, events: [...requested.events, { type: 'approved', v: 1, by: 'a' }, { type: 'granted', v: 1 }] };
      const outcome = await kernel.create(approvalStream(`born-${i}`), born, make);
      assert.equal(outcome.kind, 'ok');
      assert.equal((outcome as { stream: Stream<ApprovalRecord> }).stream.record.state, 'granted');
    }
    assert.equal(kernel.held().length, 16, 'the 16 (finishedCacheMax) finished last are held, not every one ever created');
    assert.equal(kernel.cached(approvalStream('born-0')), undefined);
    assert.notEqual(kernel.cached(approvalStream('born-39')), undefined);
  } finally {
    await r.close();
  }
});

test('kernel: a finished instance passed over for eviction while a waiter held it leaves the cache when its last waiter does', async () => {
  const r = await rig('memory');
  try {
    const kernel = r.kernel();
    const finish = async (requestId: string) => {
      const stream = await created(kernel, r.clock, requestId, 1, 600_000);
      await approve(kernel, stream, r.clock, 'a');
      assert.equal(stream.record.state, 'granted');
      return stream;
    };
    const first = await finish('held');
    // A waiter for what the finished record will never show (a listen's verdict on an instance that ended meanwhile).
    const waited = kernel.wait(first, () => false, 5000);
    for (let i = 0; i < 40; i++) await finish(`later-${i}`);
    assert.equal(kernel.cached(approvalStream('held')), first, 'held while its waiter waits');
    await r.clock.advance(5000);
    assert.equal(await waited, false);
    assert.equal(kernel.cached(approvalStream('held')), undefined, 'let go once its waiter left');
    assert.equal(kernel.held().length, 16);
  } finally {
    await r.close();
  }
});
