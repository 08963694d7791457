/**
 * Opening a SQLite file another process holds a lock on (src/adapters/store/sqlite-open.ts): the
 * open waits, bounded by the busy timeout, including where SQLite itself answers SQLITE_BUSY
 * without waiting (converting a file that is not in WAL mode yet while another connection writes
 * to it: peers started together on one new effect-sink file); past the bound it fails with a typed
 * `unavailable` naming the file. `convoke peer` keeps trying, bounded by `effectSinkWaitMs`, while
 * its sqlite sink stays locked. Each lock is held by a real second process.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SystemClock, VirtualClock } from '../../src/contract/clock.js';
import { openEffectSinkWaiting } from '../../src/cli/commands/peer.js';
import { AdapterError } from '../../src/contract/errors.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { SqliteEffectSink } from '../../src/peer/sqlite-effect-sink.js';
import { holdSqliteLock, type LockHolder } from '../support/sqlite-lock-holder.js';

const key = { operationId: 'op1', branchId: 'alfa' };

function tempFile(t: { after(fn: () => void | Promise<void>): void }, holders: LockHolder[] = []): string {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-sqlite-open-'));
  t.after(async () => {
    for (const holder of holders) await holder.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return join(dir, 'effects.db');
}

/** The test's precondition: right now another connection holds the write lock (a write cannot start, even briefly). */
function assertWriteLocked(path: string): void {
  const probe = new Database(path, { timeout: 0 });
  try {
    assert.throws(() => probe.exec('BEGIN IMMEDIATE'), { code: 'SQLITE_BUSY' });
  } finally {
    probe.close();
  }
}

function journalMode(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    return db.pragma('journal_mode', { simple: true }) as string;
  } finally {
    db.close();
  }
}

test('a sink opened while another process writes to the file before it is in WAL mode waits for that lock, though SQLite answers the WAL upgrade BUSY without waiting', async (t) => {
  const holders: LockHolder[] = [];
  const path = tempFile(t, holders);
  holders.push(await holdSqliteLock(path, 'rollback-writer', 1500));
  assertWriteLocked(path);
  const sink = new SqliteEffectSink({ path, busyTimeoutMs: 30_000 });
  t.after(() => sink.close());
  await holders[0]!.released;
  assert.deepEqual(await sink.commit(key, 1, 1, () => ({ ok: true })), { value: { ok: true }, repeated: false });
  assert.equal(journalMode(path), 'wal');
});

test('a sink opened while another process holds the WAL write lock waits for it', async (t) => {
  const holders: LockHolder[] = [];
  const path = tempFile(t, holders);
  holders.push(await holdSqliteLock(path, 'wal-writer', 1500));
  assertWriteLocked(path);
  const sink = new SqliteEffectSink({ path, busyTimeoutMs: 30_000 });
  t.after(() => sink.close());
  assert.deepEqual(await sink.commit(key, 1, 1, () => ({ ok: true })), { value: { ok: true }, repeated: false });
});

test('a store opened while another process writes to the file before it is in WAL mode waits for that lock too', async (t) => {
  const holders: LockHolder[] = [];
  const path = tempFile(t, holders);
  holders.push(await holdSqliteLock(path, 'rollback-writer', 1500));
  assertWriteLocked(path);
  const store = new SqliteEventStore({ path, clock: new VirtualClock(), busyTimeoutMs: 30_000 });
  await store.close();
  assert.equal(journalMode(path), 'wal');
});

for (const mode of ['rollback-writer', 'wal-writer'] as const) {
  test(`a file another process keeps locked (${mode}) past the busy timeout fails to open with unavailable, naming the file and the bound`, async (t) => {
    const holders: LockHolder[] = [];
    const path = tempFile(t, holders);
    holders.push(await holdSqliteLock(path, mode, 'forever'));
    assertWriteLocked(path);
    assert.throws(
      () => new SqliteEffectSink({ path, busyTimeoutMs: 300 }),
      (error: unknown) => {
        assert.ok(error instanceof AdapterError, String(error));
        assert.equal(error.kind, 'unavailable');
        assert.ok(error.description?.includes(`effect sink: could not open ${path} within its busy timeout of 300 ms`), error.description);
        assert.match(String((error.cause as { code?: unknown }).code), /^SQLITE_BUSY/);
        return true;
      },
    );
  });
}

/** An effect sink file as a build of schema 99 would leave it: the sink's tables, user_version 99. */
function newerSink(path: string): void {
  new SqliteEffectSink({ path }).close();
  const db = new Database(path);
  db.pragma('user_version = 99');
  db.close();
}

test('a file whose schema is newer than this build is unsupported, not a transient failure', (t) => {
  const path = tempFile(t);
  newerSink(path);
  assert.throws(
    () => new SqliteEffectSink({ path }),
    (error: unknown) => error instanceof AdapterError && error.kind === 'unsupported' && /schema 99 is newer than this build/.test(error.message),
  );
  assert.throws(
    () => new SqliteEventStore({ path, clock: new VirtualClock() }),
    (error: unknown) => error instanceof AdapterError && error.kind === 'unsupported',
  );
});

test("convoke peer keeps trying to open a sink another process keeps locked beyond one open's busy timeout, and says so once", async (t) => {
  const holders: LockHolder[] = [];
  const path = tempFile(t, holders);
  holders.push(await holdSqliteLock(path, 'wal-writer', 1500));
  assertWriteLocked(path);
  const told: string[] = [];
  const sink = await openEffectSinkWaiting(
    { effectSink: `sqlite:${path}` },
    { clock: new SystemClock(), waitMs: 60_000, busyTimeoutMs: 100, onWaiting: (message) => told.push(message) },
  );
  t.after(() => (sink as SqliteEffectSink).close());
  assert.deepEqual(await sink.commit(key, 1, 1, () => ({ ok: true })), { value: { ok: true }, repeated: false });
  assert.equal(told.length, 1, told.join('\n'));
  assert.match(told[0]!, /^waiting for the effect sink, locked by another process: effect sink: could not open .* within its busy timeout of 100 ms/);
});

test('convoke peer gives up on a sink still locked after effectSinkWaitMs with unavailable', async (t) => {
  const holders: LockHolder[] = [];
  const path = tempFile(t, holders);
  holders.push(await holdSqliteLock(path, 'rollback-writer', 'forever'));
  await assert.rejects(
    openEffectSinkWaiting({ effectSink: `sqlite:${path}` }, { clock: new SystemClock(), waitMs: 400, busyTimeoutMs: 100 }),
    (error: unknown) =>
      error instanceof AdapterError &&
      error.kind === 'unavailable' &&
      /^the effect sink stayed locked for 400 ms \(effectSinkWaitMs\): effect sink: could not open/.test(error.description ?? ''),
  );
});

test('convoke peer does not wait on a sink that fails to open for any other reason', async (t) => {
  const path = tempFile(t);
  newerSink(path);
  const told: string[] = [];
  await assert.rejects(
    openEffectSinkWaiting({ effectSink: `sqlite:${path}` }, { clock: new VirtualClock(), waitMs: 60_000, onWaiting: (message) => told.push(message) }),
    (error: unknown) => error instanceof AdapterError && error.kind === 'unsupported',
  );
  assert.deepEqual(told, []);
});

test("convoke peer refuses a sqlite: effectSink that is another program's database at once, with invalid-input, and does not wait", async (t) => {
  const path = tempFile(t);
  const db = new Database(path);
  db.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('Ada')");
  db.close();
  const told: string[] = [];
  await assert.rejects(
    openEffectSinkWaiting({ effectSink: `sqlite:${path}` }, { clock: new VirtualClock(), waitMs: 60_000, onWaiting: (message) => told.push(message) }),
    (error: unknown) =>
      error instanceof AdapterError &&
      error.kind === 'invalid-input' &&
      error.description?.includes(`${path} is a SQLite database but not an effect sink`) === true,
  );
  assert.deepEqual(told, []);
});
