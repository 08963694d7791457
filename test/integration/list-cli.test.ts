/**
 * `convoke list` and the index checks of `convoke replay`, run as the built binary (bin/convoke.js
 * over dist/) against a real SQLite store written by an embedded deployment: every principal's
 * operations for an operator, filters, paging by the printed cursor, a table that fits $COLUMNS,
 * invalid parameters as exit 2 with a description, and replay finding a tampered index row, an
 * index row without a log, and a missing row, then --fix-index writing them again.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { repoRoot } from '../support/http-server.js';
import { minimalServeConfig } from '../support/config-fixtures.js';

let dir = '';
let path = '';
const principals = { 'svc-a': 4, 'svc-b': 3 };

function convoke(args: string[], env: Record<string, string> = {}) {
  const run = spawnSync(process.execPath, [join(repoRoot(), 'bin', 'convoke.js'), ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
  return { code: run.status, out: run.stdout, err: run.stderr };
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'convoke-list-'));
  path = join(dir, 'ops.db');
  const clock = new SystemClock();
  const store = new SqliteEventStore({ path, clock });
  const embedded = await createEmbedded({
    clock,
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 2 } }),
    groups: { reviewers: peerIds(3) },
    store,
  });
  try {
    for (const peer of peerIds(3)) await embedded.addPeer(peer, { review: () => ({ verdict: 'approve' }) });
    for (const [principalId, count] of Object.entries(principals)) {
      for (let i = 0; i < count; i++) {
        const { result } = await embedded.coordinator.invoke(
          { principalId, senderPeerId: null },
          { contract: embedded.bundle.ref, interaction: 'review', invocationKey: `k-${i}`, input: { document: `doc ${i}` } },
        );
        await embedded.coordinator.wait(principalId, result.operationId, 'settled', 10_000);
      }
    }
  } finally {
    await embedded.close();
  }
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Page {
  operations: { operationId: string; principalId: string; phase: string; outcome: string | null; stuck: string[] }[];
  nextCursor: string | null;
}

test("list: an operator sees every principal's operations; filters narrow; the cursor pages through each once", () => {
  const all = convoke(['list', '--store', `sqlite:${path}`, '--json']);
  assert.equal(all.code, 0, all.err);
  const page = JSON.parse(all.out) as Page;
  assert.equal(page.operations.length, 7);
  assert.equal(page.nextCursor, null);
  assert.deepEqual(new Set(page.operations.map((o) => o.principalId)), new Set(['svc-a', 'svc-b']));
  for (const o of page.operations) assert.equal(o.phase, 'settled');

  const b = JSON.parse(convoke(['list', '--store', `sqlite:${path}`, '--principal', 'svc-b', '--json']).out) as Page;
  assert.equal(b.operations.length, 3);
  assert.ok(b.operations.every((o) => o.principalId === 'svc-b'));
  const none = JSON.parse(convoke(['list', '--store', `sqlite:${path}`, '--outcome', 'open', '--json']).out) as Page;
  assert.equal(none.operations.length, 0, 'every operation is decided');

  const seen: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 10; i++) {
    const run = convoke(['list', '--store', `sqlite:${path}`, '--limit', '3', '--json', ...(cursor ? ['--cursor', cursor] : [])]);
    assert.equal(run.code, 0, run.err);
    const p = JSON.parse(run.out) as Page;
    seen.push(...p.operations.map((o) => o.operationId));
    cursor = p.nextCursor;
    if (cursor === null) break;
  }
  assert.deepEqual(
    seen,
    page.operations.map((o) => o.operationId),
    'the pages, in order, are the whole list once',
  );
});

test('list: the table fits the terminal width and names the next page', () => {
  const run = convoke(['list', '--store', `sqlite:${path}`, '--limit', '5'], { COLUMNS: '90' });
  assert.equal(run.code, 0, run.err);
  const lines = run.out.split('\n');
  assert.match(lines[0] ?? '', /operation\s+admitted\s+principal/);
  for (const line of lines) assert.ok(line.length <= 90, `line within 90 columns: ${JSON.stringify(line)}`);
  const wide = convoke(['list', '--store', `sqlite:${path}`, '--limit', '5'], { COLUMNS: '200' });
  assert.match(wide.out, /svc-[ab]\s+review\s+settled success complete\s+0\s+-/, 'at full width one line per operation');
  assert.equal(wide.out.split('\n').filter((l) => /^op[0-9a-f]{12}…/.test(l)).length, 5, wide.out);
  assert.match(run.out, /5 operations; next page:\n--cursor [A-Za-z0-9_-]{55}\n/);
  const stuck = convoke(['list', '--store', `sqlite:${path}`, '--stuck', '--json']);
  assert.equal(stuck.code, 0, stuck.err);
  assert.equal((JSON.parse(stuck.out) as Page).operations.length, 0, 'settled work is not stuck');
});

test("list: stuck counts by the deployment's stuck bounds given with --config, and by the defaults without", async () => {
  // A copy whose one operation waits 20 s for a delivery receipt: stuck past a 1 s bound, not yet past the default 60 s.
  const copy = join(dir, 'stuck.db');
  const source = new Database(path, { readonly: true });
  source.exec(`VACUUM INTO '${copy}'`);
  source.close();
  const db = new Database(copy);
  const { operation_id: id } = db.prepare('SELECT operation_id FROM operation_index LIMIT 1').get() as { operation_id: string };
  db.prepare('UPDATE operation_index SET outbox_pending_since_ms = ? WHERE operation_id = ?').run(Date.now() - 20_000, id);
  db.close();
  const config = join(dir, 'serve.json');
  await writeFile(config, JSON.stringify(minimalServeConfig({ store: `sqlite:${copy}`, stuck: { outboxPendingMs: 1_000 } })));
  const stuck = (...extra: string[]) => {
    const run = convoke(['list', '--store', `sqlite:${copy}`, '--stuck', '--json', ...extra]);
    assert.equal(run.code, 0, run.err);
    return (JSON.parse(run.out) as Page).operations.map((o) => [o.operationId, o.stuck]);
  };
  assert.deepEqual(stuck(), [], 'not stuck by the default bounds');
  assert.deepEqual(stuck('--config', config), [[id, ['outbox-pending']]], "stuck by the config's bounds");
});

test('list: invalid parameters exit 2 naming each problem; a missing store is an error, not created', () => {
  const run = convoke(['list', '--store', `sqlite:${path}`, '--phase', 'sideways', '--limit', '0', '--cursor', 'bogus', '--since', 'yesterday']);
  assert.equal(run.code, 2);
  const error = JSON.parse(run.err) as { kind: string; description: string };
  assert.equal(error.kind, 'invalid-input');
  for (const fragment of ['phase must be one of', 'limit must be an integer', 'cursor is not one', 'since must be'])
    assert.match(error.description, new RegExp(fragment));
  const missing = convoke(['list', '--store', `sqlite:${join(dir, 'missing.db')}`]);
  assert.equal(missing.code, 2);
  assert.match(missing.err, /does not exist/);
});

test('replay finds a tampered index row, a row without a log and a missing row; --fix-index writes them from the logs', () => {
  const db = new Database(path);
  const rows = db.prepare('SELECT operation_id FROM operation_index ORDER BY operation_id').all() as { operation_id: string }[];
  const [tampered, dropped] = [rows[0]!.operation_id, rows[1]!.operation_id];
  db.prepare("UPDATE operation_index SET phase = 'active', outcome = NULL WHERE operation_id = ?").run(tampered);
  db.prepare('DELETE FROM operation_index WHERE operation_id = ?').run(dropped);
  const orphan = `op${'e'.repeat(64)}`;
  db.prepare(
    'INSERT INTO operation_index SELECT ?, principal_id, contract_id, contract_version, interaction, phase, outcome, settlement, admitted_at_ms, decided_at_ms, settled_at_ms, deadline_ms, next_due_ms, open_branches, last_rejection_reason, last_rejection_at_ms, lease_expires_at_ms, outbox_pending_since_ms, revision FROM operation_index WHERE operation_id = ?',
  ).run(orphan, rows[2]!.operation_id);
  db.close();

  const check = convoke(['replay', '--store', `sqlite:${path}`, '--json']);
  assert.equal(check.code, 1, check.err);
  const report = JSON.parse(check.out) as { differences: number; rows: { operationId: string; problem: string | null }[] };
  const problem = (id: string) => report.rows.find((r) => r.operationId === id)?.problem ?? '';
  assert.match(problem(tampered), /index row differs from the log in phase \(index "active", log "settled"\), outcome/);
  assert.match(problem(dropped), /no index row/);
  assert.match(problem(orphan), /an index row without a live log/);
  assert.equal(report.differences, 3);

  const fix = convoke(['replay', '--store', `sqlite:${path}`, '--fix-index']);
  assert.equal(fix.code, 0, fix.out + fix.err);
  assert.match(fix.out, /3 index rows rebuilt/);
  const again = convoke(['replay', '--store', `sqlite:${path}`, '--json']);
  assert.equal(again.code, 0, again.out);
  assert.equal((JSON.parse(again.out) as { differences: number }).differences, 0);
  const listed = JSON.parse(convoke(['list', '--store', `sqlite:${path}`, '--json']).out) as Page;
  assert.equal(listed.operations.length, 7);
  assert.ok(listed.operations.every((o) => o.phase === 'settled'));
});
