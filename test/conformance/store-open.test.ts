/**
 * openStore: each scheme opens its adapter; an unknown scheme is invalid-input. A sqlite: URL opens
 * a convoke store (of any schema version) or creates one where nothing is yet, and refuses any other
 * file before writing to it (another program's database, a peer's effect sink).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { AdapterError } from '../../src/contract/errors.js';
import { openStore } from '../../src/adapters/store/open.js';
import { SqliteEffectSink } from '../../src/peer/sqlite-effect-sink.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { expectOk, makeTransition, newOperationId } from './store.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;
const clock = new VirtualClock();

test('openStore: memory: and sqlite:PATH open their adapters', async () => {
  const memory = await openStore('memory:', { clock });
  assert.equal(memory.name, 'memory');
  await memory.close();
  const dir = await mkdtemp(join(tmpdir(), 'convoke-open-'));
  try {
    for (const url of [`sqlite:${join(dir, 'a.db')}`, `sqlite://${join(dir, 'b.db')}`]) {
      const store = await openStore(url, { clock });
      assert.equal(store.name, 'sqlite');
      assert.equal(store.capabilities.durable, true);
      await store.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('openStore: jetstream:nats://host:port?stream= opens a JetStream store', async () => {
  const server = await startJetStreamServer();
  try {
    const store = await openStore(`jetstream:${server.url}?stream=OPEN_TEST`, { clock });
    assert.equal(store.name, 'jetstream');
    assert.equal(store.capabilities.guard, 'on-fold');
    await store.close();
  } finally {
    await server.dispose();
  }
});

test('openStore: esdb:// and eventstoredb:// build an EventStoreDB store (connection is lazy)', async () => {
  for (const url of ['esdb://127.0.0.1:1?tls=false', 'eventstoredb://127.0.0.1:1?tls=false']) {
    const store = await openStore(url, { clock });
    assert.equal(store.name, 'eventstoredb');
    await store.close();
  }
});

test('openStore: an unknown scheme or a malformed URL is invalid-input', async () => {
  for (const url of ['redis://localhost', 'nope', '', 'sqlite:', 'jetstream:not a url', 'jetstream:http://x:1']) {
    await assert.rejects(openStore(url, { clock }), (error: unknown) => error instanceof AdapterError && error.kind === 'invalid-input', url);
  }
});

const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-open-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** `text` matched literally in a RegExp. */
function escaped(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** openStore(url) rejects with an AdapterError of `kind` whose description matches `why`. */
async function refused(url: string, kind: string, why: RegExp, mustExist = false): Promise<void> {
  await assert.rejects(openStore(url, { clock, mustExist }), (error: unknown) => {
    assert.ok(error instanceof AdapterError, String(error));
    assert.equal(error.kind, kind, error.message);
    assert.match(error.description ?? '', why);
    return true;
  });
}

/** A store at `path` holding one operation: opened through the URL, written, closed; its id. */
async function storeWithOperation(path: string): Promise<string> {
  const store = await openStore(`sqlite:${path}`, { clock });
  const id = newOperationId('open');
  expectOk(await store.create(id, makeTransition(guard, 'kept')), 'create');
  await store.close();
  return id;
}

async function assertHolds(path: string, id: string, mustExist = false): Promise<void> {
  const store = await openStore(`sqlite:${path}`, { clock, mustExist });
  try {
    const read = await store.read(id);
    expectOk(read, 'read');
    assert.equal(read.transitions.length, 1);
  } finally {
    await store.close();
  }
}

test('openStore sqlite: a path where no file is becomes a new store that works, and reopens with its data (also for the read commands)', async (t) => {
  const path = join(await tempDir(t), 'new.db');
  const id = await storeWithOperation(path);
  await assertHolds(path, id);
  await assertHolds(path, id, true);
});

test('openStore sqlite: a store of an older schema version opens and is brought up to date, with its data', async (t) => {
  const path = join(await tempDir(t), 'old.db');
  const id = await storeWithOperation(path);
  // What a build of schema 1 wrote: operations, transitions and meta, user_version 1.
  const db = new Database(path);
  db.exec(
    'DROP TABLE operation_index; DROP TABLE index_meta; DROP TABLE workflow_running; DROP TABLE workflow_meta; DROP TABLE workflow_index; DROP TABLE tombstones',
  );
  db.pragma('user_version = 1');
  db.close();
  await assertHolds(path, id);
  const reread = new Database(path, { readonly: true });
  assert.equal(reread.pragma('user_version', { simple: true }), 4);
  reread.close();
});

test('openStore sqlite: a zero-length file, or a SQLite database with nothing in it, becomes a new store; the read commands refuse both', async (t) => {
  const dir = await tempDir(t);
  const empty = join(dir, 'empty.db');
  const blank = join(dir, 'blank.db');
  const fresh = new Database(blank);
  fresh.pragma('page_size = 8192');
  fresh.exec('VACUUM');
  fresh.close();
  assert.ok(readFileSync(blank).length > 0, 'the blank database has a header');
  await writeFile(empty, '');
  for (const path of [empty, blank]) {
    await refused(`sqlite:${path}`, 'invalid-input', /is not a convoke store \(it holds no tables\)/, true);
    const id = await storeWithOperation(path);
    await assertHolds(path, id, true);
  }
});

test("openStore sqlite: another program's SQLite database is refused with invalid-input and left byte for byte as it was", async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'crm.db');
  const db = new Database(path);
  db.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('Ada')");
  db.close();
  const before = sha256(path);
  const why = new RegExp(`^${escaped(path)} is a SQLite database but not a convoke store: it has table customers and no convoke meta table`);
  for (const [url, mustExist] of [
    [`sqlite:${path}`, false],
    [`sqlite://${path}`, false],
    [`sqlite:${path}`, true],
  ] as const) {
    await refused(url, 'invalid-input', why, mustExist);
    assert.equal(sha256(path), before, `${url}${mustExist ? ' (mustExist)' : ''} left the file as it was`);
    assert.ok(!existsSync(`${path}-wal`), 'no write-ahead log was started');
  }
});

test("openStore sqlite: a database with convoke's table names but not its meta columns or schema version is not a store either", async (t) => {
  const dir = await tempDir(t);
  const lookalike = join(dir, 'lookalike.db');
  const db = new Database(lookalike);
  db.exec('CREATE TABLE operations (x); CREATE TABLE transitions (x); CREATE TABLE meta (key TEXT, value TEXT)');
  db.close();
  const unversioned = join(dir, 'unversioned.db');
  await storeWithOperation(unversioned);
  const reset = new Database(unversioned);
  reset.pragma('user_version = 0');
  reset.pragma('journal_mode = DELETE');
  reset.close();
  for (const [path, why] of [
    [
      lookalike,
      /it has tables meta, operations, transitions, and a meta table that is not convoke's \(no last_committed_at_ms, last_rowid, operations_count\)/,
    ],
    [unversioned, /but no convoke schema version \(user_version 0\)/],
  ] as const) {
    const before = sha256(path);
    await refused(`sqlite:${path}`, 'invalid-input', why);
    assert.equal(sha256(path), before, path);
  }
});

test("openStore sqlite: a peer's effect sink file is refused as one, and left as it was", async (t) => {
  const path = join(await tempDir(t), 'effects.db');
  const sink = new SqliteEffectSink({ path });
  await sink.commit({ operationId: 'op1', branchId: 'alfa' }, 1, 1, () => ({ applied: true }));
  sink.close();
  const before = sha256(path);
  const why = new RegExp(`^${escaped(path)} is a convoke effect sink, not a convoke store: point`);
  await refused(`sqlite:${path}`, 'invalid-input', why);
  await refused(`sqlite:${path}`, 'invalid-input', why, true);
  assert.equal(sha256(path), before);
  // The sink is in WAL mode: looking at it read-only may leave an empty log beside it, never a write.
  assert.ok(!existsSync(`${path}-wal`) || statSync(`${path}-wal`).size === 0, 'nothing was written to its log');
});

test('openStore sqlite: a file that is not SQLite is refused with invalid-input and left as it was', async (t) => {
  const path = join(await tempDir(t), 'notes.txt');
  await writeFile(path, 'shopping list: milk, eggs\n'.repeat(200));
  const before = sha256(path);
  await refused(`sqlite:${path}`, 'invalid-input', /notes\.txt is not a SQLite database/);
  await refused(`sqlite:${path}`, 'invalid-input', /notes\.txt is not a SQLite database/, true);
  assert.equal(sha256(path), before);
});

test('openStore sqlite: a missing directory, or a directory as the path, is invalid-input naming it, not unavailable', async (t) => {
  const dir = await tempDir(t);
  const missing = join(dir, 'nodir', 'deeper');
  await refused(`sqlite:${join(missing, 'd.db')}`, 'invalid-input', new RegExp(`the directory ${escaped(missing)} does not exist`));
  assert.ok(!existsSync(join(dir, 'nodir')));
  await writeFile(join(dir, 'file'), 'x');
  await refused(`sqlite:${join(dir, 'file', 'd.db')}`, 'invalid-input', /file is not a directory/);
  await refused(`sqlite:${dir}`, 'invalid-input', /is a directory/);
});

test('openStore sqlite: a store whose schema is newer than this build is unsupported, not unavailable', async (t) => {
  const path = join(await tempDir(t), 'newer.db');
  await storeWithOperation(path);
  const db = new Database(path);
  db.pragma('user_version = 99');
  db.close();
  await refused(`sqlite:${path}`, 'unsupported', /schema 99 is newer than this build/);
});
