/**
 * Spec: "Selection, claims and attempts" — fenced business effects: the sink rejects older fences
 * and honours the operation/branch idempotency key atomically at its own commit point, here across
 * processes sharing one SQLite file.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { VirtualClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import type { JsonValue } from '../../src/contract/json.js';
import { openStore } from '../../src/adapters/store/open.js';
import { SqliteEffectSink } from '../../src/peer/sqlite-effect-sink.js';
import { forkSinkChild, type SinkRaceAnswer, type SinkRaceCommit } from '../support/crash-sink-child.js';

const key = { operationId: 'op1', branchId: 'alfa' };

function tempSink(t: { after(fn: () => void): void }): { path: string; open(writer?: string): SqliteEffectSink } {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-sink-'));
  const path = join(dir, 'effects.db');
  const opened: SqliteEffectSink[] = [];
  t.after(() => {
    for (const sink of opened) sink.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    path,
    open: (writer) => {
      const sink = new SqliteEffectSink({ path, writer });
      opened.push(sink);
      return sink;
    },
  };
}

const isConflict = (e: unknown) => e instanceof AdapterError && e.kind === 'conflict';

test('an older fence than the committed one is rejected with conflict and its effect never applied', async (t) => {
  const sink = tempSink(t).open();
  await sink.commit(key, 2, 2, () => ({ n: 2 }));
  let computed = false;
  await assert.rejects(
    sink.commit(key, 1, 1, () => ((computed = true), { n: 1 })),
    isConflict,
  );
  assert.equal(computed, false, 'an older fence already visible is refused before computing');
  assert.deepEqual(
    sink.applied().map((e) => [e.fence, e.value]),
    [[2, { n: 2 }]],
  );
  assert.deepEqual(sink.committed(key), { fence: 2, attempt: 2, value: { n: 2 } });
});

test('the authoritative check is at the commit point: an older owner still computing loses to a newer fence', async (t) => {
  const sink = tempSink(t).open();
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  // The old owner starts first and passes the early check, then computes slowly.
  const old = sink.commit(key, 1, 1, async () => (await gate, { owner: 'old' }));
  await sink.commit(key, 2, 2, () => ({ owner: 'new' }));
  release();
  await assert.rejects(old, isConflict);
  assert.deepEqual(
    sink.applied().map((e) => e.value),
    [{ owner: 'new' }],
  );
});

test('a repeated commit at the committed fence returns the stored value and does not apply again', async (t) => {
  const sink = tempSink(t).open();
  assert.deepEqual(await sink.commit(key, 1, 1, () => ({ v: 'first' })), { value: { v: 'first' }, repeated: false });
  assert.deepEqual(await sink.commit(key, 1, 1, () => ({ v: 'second' })), { value: { v: 'first' }, repeated: true });
  // Two commits racing in one process: both compute, one commits, the other gets the winner's value.
  const other = { operationId: 'op1', branchId: 'bravo' };
  const answers = await Promise.all(['x', 'y'].map((v) => sink.commit(other, 1, 1, async () => (await Promise.resolve(), { v }))));
  assert.deepEqual(answers.map((a) => a.repeated).sort(), [false, true]);
  assert.deepEqual(answers[0]!.value, answers[1]!.value);
  assert.equal(sink.applied().length, 2);
});

test('a newer fence applies after an older one; the key keeps the newest; the log keeps both in order', async (t) => {
  const sink = tempSink(t).open();
  await sink.commit(key, 1, 1, () => 'a1');
  await sink.commit(key, 3, 2, () => 'a2');
  assert.deepEqual(sink.committed(key), { fence: 3, attempt: 2, value: 'a2' });
  assert.deepEqual(
    sink.applied().map((e) => [e.seq, e.fence, e.attempt, e.value]),
    [
      [1, 1, 1, 'a1'],
      [2, 3, 2, 'a2'],
    ],
  );
});

test('what is committed survives closing and reopening the file: a repeat after a restart is still a repeat', async (t) => {
  const files = tempSink(t);
  const first = files.open('first');
  await first.commit(key, 1, 1, () => ({ kept: true }));
  first.close();
  const second = files.open('second');
  assert.deepEqual(await second.commit(key, 1, 1, () => ({ kept: false })), { value: { kept: true }, repeated: true });
  assert.deepEqual(
    second.applied().map((e) => e.writer),
    ['first'],
  );
});

test('an effect that throws commits nothing: the same fence can still apply later', async (t) => {
  const sink = tempSink(t).open();
  await assert.rejects(
    sink.commit(key, 1, 1, () => Promise.reject(new Error('computing failed'))),
    /computing failed/,
  );
  assert.equal(sink.committed(key), undefined);
  assert.deepEqual(await sink.commit(key, 1, 1, () => 'ok'), { value: 'ok', repeated: false });
});

test('fence 0, a bad attempt and a non-JSON value are invalid-input; nothing is recorded', async (t) => {
  const sink = tempSink(t).open();
  const invalid = (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input';
  await assert.rejects(
    sink.commit(key, 0, 1, () => 1),
    invalid,
  );
  await assert.rejects(
    sink.commit(key, 1, 0, () => 1),
    invalid,
  );
  await assert.rejects(
    sink.commit(key, 1, 1, () => ({ n: Number.NaN }) as unknown as JsonValue),
    invalid,
  );
  assert.deepEqual(sink.applied(), []);
});

test('two processes racing on the same keys apply each effect exactly once and agree on its value', async (t) => {
  const files = tempSink(t);
  files.open('parent').close(); // the schema exists before the racers open it
  const children = await Promise.all(['racer-a', 'racer-b'].map((writer) => forkSinkChild(files.path, writer)));
  t.after(() => children.forEach((c) => c.child.kill('SIGKILL')));
  const commits: SinkRaceCommit[] = Array.from({ length: 40 }, (_, i) => ({ operationId: `op${i}`, branchId: 'alfa', fence: 1, attempt: 1 }));
  const [a, b] = await Promise.all(children.map((c) => c.run({ commits, effectDelayMs: 100 })));
  const applied = files.open('reader').applied();
  let bothComputed = 0;
  for (const [i, commit] of commits.entries()) {
    const answers = [a![i]!, b![i]!].map((x: SinkRaceAnswer) => {
      assert.ok(!('error' in x), `commit ${commit.operationId}: ${JSON.stringify(x)}`);
      return x;
    });
    if (answers.every((x) => x.computed)) bothComputed++;
    assert.deepEqual(answers.map((x) => x.repeated).sort(), [false, true], `${commit.operationId}: exactly one process applied it`);
    assert.deepEqual(answers[0]!.value, answers[1]!.value, `${commit.operationId}: the repeat returned the applied value`);
    assert.equal(applied.filter((e) => e.operationId === commit.operationId).length, 1, `${commit.operationId}: one applied effect`);
  }
  // The race was real: both processes computed the same effect and the commit point alone kept it single.
  t.diagnostic(`${bothComputed} of ${commits.length} keys were computed by both processes and applied once`);
  assert.ok(bothComputed > 0, 'in at least one key both processes passed the early check and computed');
});

test('two processes racing with different fences on one key never apply a fence below one already applied', async (t) => {
  const files = tempSink(t);
  files.open('parent').close();
  const children = await Promise.all(['older', 'newer'].map((writer) => forkSinkChild(files.path, writer)));
  t.after(() => children.forEach((c) => c.child.kill('SIGKILL')));
  const keys = Array.from({ length: 30 }, (_, i) => `op${i}`);
  const orders = [1, 2].map((fence) => ({ commits: keys.map((operationId) => ({ operationId, branchId: 'alfa', fence, attempt: fence })), effectDelayMs: 20 }));
  const [older, newer] = await Promise.all(children.map((c, i) => c.run(orders[i]!)));
  assert.ok(
    newer!.every((x) => !('error' in x) && !x.repeated),
    'the newer fence always applies',
  );
  const applied = files.open('reader').applied();
  for (const [i, operationId] of keys.entries()) {
    const fences = applied.filter((e) => e.operationId === operationId).map((e) => e.fence);
    // Either the old owner committed first (then the new one), or it lost with conflict.
    if ('error' in older![i]!) assert.deepEqual([older![i]!.error, fences], ['conflict', [2]], operationId);
    else assert.deepEqual(fences, [1, 2], operationId);
  }
});

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** `text` matched literally in a RegExp. */
function escaped(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Opening a sink at `path` throws invalid-input whose description matches `why`. */
function refused(path: string, why: RegExp): void {
  assert.throws(
    () => new SqliteEffectSink({ path }).close(),
    (error: unknown) => {
      assert.ok(error instanceof AdapterError, String(error));
      assert.equal(error.kind, 'invalid-input', error.message);
      assert.match(error.description ?? '', why);
      return true;
    },
  );
}

test('a path where no file is, a zero-length file or an empty database becomes a new sink that works and reopens with its effects', async (t) => {
  const files = tempSink(t);
  const dir = join(files.path, '..');
  const empty = join(dir, 'empty.db');
  writeFileSync(empty, '');
  const blank = join(dir, 'blank.db');
  const fresh = new Database(blank);
  fresh.exec('VACUUM');
  fresh.close();
  for (const path of [files.path, empty, blank]) {
    const first = new SqliteEffectSink({ path, writer: 'first' });
    assert.deepEqual(await first.commit(key, 1, 1, () => ({ at: path })), { value: { at: path }, repeated: false });
    first.close();
    const second = new SqliteEffectSink({ path, writer: 'second' });
    t.after(() => second.close());
    assert.deepEqual(await second.commit(key, 1, 1, () => 'again'), { value: { at: path }, repeated: true });
    assert.deepEqual(
      second.applied().map((e) => [e.writer, e.fence, e.value]),
      [['first', 1, { at: path }]],
    );
  }
});

test("another program's SQLite database is refused with invalid-input naming it, and left byte for byte as it was", (t) => {
  const { path } = tempSink(t);
  const db = new Database(path);
  db.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('Ada')");
  db.close();
  const before = sha256(path);
  refused(
    path,
    new RegExp(`^effect sink: ${escaped(path)} is a SQLite database but not an effect sink: it has table customers and no effect_keys or effects table`),
  );
  assert.equal(sha256(path), before);
  assert.ok(!existsSync(`${path}-wal`), 'no write-ahead log was started');
  const reread = new Database(path, { readonly: true });
  assert.deepEqual(reread.prepare('SELECT name FROM customers').all(), [{ name: 'Ada' }]);
  reread.close();
});

test('a convoke event store file given as the sink is refused as one, and left as it was', async (t) => {
  const { path } = tempSink(t);
  const store = await openStore(`sqlite:${path}`, { clock: new VirtualClock() });
  await store.close();
  const before = sha256(path);
  refused(path, new RegExp(`^effect sink: ${escaped(path)} is a convoke event store, not an effect sink`));
  assert.equal(sha256(path), before);
  // The store is in WAL mode: looking at it read-only may leave an empty log beside it, never a write.
  assert.ok(!existsSync(`${path}-wal`) || statSync(`${path}-wal`).size === 0, 'nothing was written to its log');
  // And the store still opens as one.
  await (await openStore(`sqlite:${path}`, { clock: new VirtualClock(), mustExist: true })).close();
});

test('a file that is not SQLite, a directory, or a path whose directory does not exist is invalid-input', (t) => {
  const { path } = tempSink(t);
  const dir = join(path, '..');
  writeFileSync(path, 'shopping list: milk, eggs\n'.repeat(200));
  const before = sha256(path);
  refused(path, new RegExp(`^effect sink: ${escaped(path)} is not a SQLite database`));
  assert.equal(sha256(path), before);
  const missing = join(dir, 'nodir', 'deeper');
  refused(join(missing, 'effects.db'), new RegExp(`^cannot create an effect sink at .*: the directory ${escaped(missing)} does not exist`));
  assert.ok(!existsSync(join(dir, 'nodir')), 'no directory was created');
  refused(dir, /is a directory: an effect sink path names a file/);
});
