/** Operator tools over a real SQLite store: inspect, replay (and a corrupted log must fail replay). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { demoCommand } from '../../src/cli/commands/demo.js';
import { inspectCommand, replayCommand } from '../../src/cli/commands/ops.js';
import { captureIo } from '../support/cli-io.js';

test('inspect shows every stored transition and the projected record; replay rebuilds through the machines', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-ops-'));
  try {
    const store = `sqlite:${join(dir, 'ops.db')}`;
    const demoIo = captureIo();
    assert.equal(await demoCommand({ scenario: 'cancel-siblings', store, peers: 3, quorum: 1, json: true, seed: 1, approveRate: 1 }, demoIo), 0);
    const operationId = (JSON.parse(demoIo.out()) as { result: { operationId: string } }).result.operationId;
    const io = captureIo();
    assert.equal(await inspectCommand(operationId, { store, json: false }, io), 0);
    for (const text of ['operation-admitted', 'decision-closed', 'cancel-result-accepted', 'settlement-completed', 'applied', 'Record: phase settled'])
      assert.match(io.out(), new RegExp(text));
    const replayIo = captureIo();
    assert.equal(await replayCommand(undefined, { store, json: true }, replayIo), 0);
    assert.deepEqual(JSON.parse(replayIo.out()).differences, 0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('replay exits non-zero when a stored transition no longer matches its schema', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-ops-'));
  try {
    const path = join(dir, 'ops.db');
    const store = `sqlite:${path}`;
    const demoIo = captureIo();
    await demoCommand({ scenario: 'default', store, peers: 3, quorum: 2, json: true, seed: 2, approveRate: 1 }, demoIo);
    const db = new Database(path);
    const row = db.prepare("SELECT rowid, body FROM transitions WHERE body LIKE '%decision-closed%'").get() as { rowid: number; body: string };
    db.prepare('UPDATE transitions SET body = ? WHERE rowid = ?').run(row.body.replace('"outcome":"success"', '"outcome":"splendid"'), row.rowid);
    db.close();
    const io = captureIo();
    assert.equal(await replayCommand(undefined, { store, json: false }, io), 1);
    assert.match(io.out(), /fails its schema/);
    assert.match(io.out(), /1 with differences/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('inspect refuses something that is not an operation id', async () => {
  const io = captureIo();
  await assert.rejects(inspectCommand('nope', { store: 'memory:', json: false }, io), /not an operation id/);
});
