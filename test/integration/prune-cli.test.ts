/**
 * `convoke prune`, run as the built binary (bin/convoke.js over dist/) against a real SQLite store
 * whose operations an embedded deployment settled on a clock set years back, and one it left open:
 * a dry run changes nothing; a prune tombstones the settled ones, keeps the open one, prints what
 * became of each as a table (or --json), and the pruned keys answer expired; a second prune finds
 * nothing more; a period under an hour or without a unit is exit 2 before the store is opened.
 * Workflow instances: a pruned one's `inspect` is exit 6 (`expired`) in one line, its kept
 * parent's shows it pruned, and `replay` of the store replays the kept one only (exit 0).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { SystemClock, VirtualClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { isWorkflowNamed } from '../../src/workflow/exec/document.js';
import Database from 'better-sqlite3';
import { repoRoot } from '../support/http-server.js';
import { harness, quickDocument, staysDocument } from '../workflow/support.js';

let dir = '';
let path = '';
const settled: string[] = [];
let open = '';
let recent = '';

function convoke(args: string[]) {
  const run = spawnSync(process.execPath, [join(repoRoot(), 'bin', 'convoke.js'), ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, COLUMNS: '100' },
  });
  return { code: run.status, out: run.stdout, err: run.stderr };
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'convoke-prune-'));
  path = join(dir, 'ops.db');
  // November 2023: every settlement is years older than any period the test gives.
  const clock = new VirtualClock(1_700_000_000_000);
  const store = new SqliteEventStore({ path, clock });
  const embedded = await createEmbedded({
    clock,
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 2 } }),
    groups: { reviewers: peerIds(3) },
    store,
    resultBatchMs: 0,
  });
  try {
    const handler = (input: unknown) => ((input as { document: string }).document === 'open' ? new Promise<never>(() => {}) : { verdict: 'approve' });
    for (const peer of peerIds(3)) await embedded.addPeer(peer, { review: handler });
    const invoke = async (key: string, document: string) =>
      (
        await embedded.coordinator.invoke(
          { principalId: 'svc-a', senderPeerId: null },
          { contract: embedded.bundle.ref, interaction: 'review', invocationKey: key, input: { document } },
        )
      ).result.operationId;
    for (let i = 0; i < 3; i++) settled.push(await invoke(`k-${i}`, `doc ${i}`));
    open = await invoke('k-open', 'open');
    await clock.advance(0);
    for (const id of settled) assert.equal((await embedded.coordinator.get('svc-a', id)).phase, 'settled');
  } finally {
    await embedded.close();
  }
  assert.ok(new SystemClock().nowMs() > clock.nowMs());
  // And one settled today, admitted after any cutoff the test gives.
  const today = new SystemClock();
  const later = await createEmbedded({
    clock: today,
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 2 } }),
    groups: { reviewers: peerIds(3) },
    store: new SqliteEventStore({ path, clock: today }),
  });
  try {
    for (const peer of peerIds(3)) await later.addPeer(peer, { review: () => ({ verdict: 'approve' }) });
    const request = { contract: later.bundle.ref, interaction: 'review', invocationKey: 'k-now', input: { document: 'now' } };
    recent = (await later.coordinator.invoke({ principalId: 'svc-a', senderPeerId: null }, request)).result.operationId;
    await later.coordinator.wait('svc-a', recent, 'settled', 10_000);
  } finally {
    await later.close();
  }
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Counts {
  examined: number;
  pruned: number;
  open: number;
  recent: number;
  failures: unknown[];
}
interface Tally {
  dryRun: boolean;
  operations: Counts;
  workflowInstances: Counts & { running: number };
}

test('prune: a dry run counts and changes nothing; a prune tombstones the settled operations and keeps the open one', () => {
  const store = `sqlite:${path}`;
  const dry = convoke(['prune', '--store', store, '--keep', '30d', '--dry-run', '--json']);
  assert.equal(dry.code, 0, dry.err);
  const counted = JSON.parse(dry.out) as Tally;
  const ops = counted.operations;
  assert.deepEqual([counted.dryRun, ops.examined, ops.pruned, ops.open, ops.failures.length], [true, 4, 3, 1, 0]);
  assert.deepEqual([counted.workflowInstances.examined, counted.workflowInstances.pruned], [0, 0]);
  assert.equal(convoke(['inspect', settled[0]!, '--store', store]).code, 0, 'a dry run changes nothing');

  const pruned = convoke(['prune', '--store', store, '--keep', '30d']);
  assert.equal(pruned.code, 0, pruned.err);
  assert.match(pruned.out, /settled or ended before \d{4}-\d\d-\d\dT/);
  assert.match(pruned.out, /\npruned\s+3\s+0\s/);
  assert.match(pruned.out, /\nkept: open or running\s+1\s+0\s/);
  assert.match(pruned.out, /4 operations and 0 workflow instances begun before the cutoff examined/);
  for (const line of pruned.out.split('\n')) assert.ok(line.length <= 100, `fits 100 columns: ${line}`);

  for (const id of settled) {
    const inspected = convoke(['inspect', id, '--store', store]);
    assert.equal(inspected.code, 6, `${id}: expired, ${inspected.err}`);
  }
  // Named alone, a pruned operation's replay says it was pruned (6), as for a workflow instance.
  const replayedOne = convoke(['replay', settled[0]!, '--store', store]);
  assert.equal(replayedOne.code, 6, replayedOne.err);
  assert.match(replayedOne.err, /was pruned: its log is gone, its key is kept/);
  const listed = JSON.parse(convoke(['list', '--store', store, '--json']).out) as { operations: { operationId: string }[] };
  assert.deepEqual(
    listed.operations.map((o) => o.operationId),
    [recent, open],
  );
  const replayed = convoke(['replay', '--store', store, '--json']);
  assert.equal(replayed.code, 0, replayed.out);

  const again = JSON.parse(convoke(['prune', '--store', store, '--keep', '30d', '--json']).out) as Tally;
  assert.deepEqual([again.operations.examined, again.operations.pruned, again.operations.open], [1, 0, 1], 'nothing more to prune');
});

test('prune: a period is a whole number and a unit, at least an hour; wrong ones are exit 2 naming the rule', () => {
  const store = `sqlite:${path}`;
  for (const [keep, why] of [
    ['59m', /at least an hour/],
    ['30', /a whole number and a unit/],
    ['1.5h', /a whole number and a unit/],
    ['-1d', /a whole number and a unit/],
  ] as const) {
    const run = convoke(['prune', '--store', store, '--keep', keep]);
    assert.equal(run.code, 2, `${keep}: ${run.err}`);
    assert.match(run.err, why);
  }
});

test("prune: the log decides, not the index: a row that says settled over an open log, or settled years ago over today's, is kept", () => {
  const store = `sqlite:${path}`;
  const db = new Database(path);
  try {
    db.prepare(
      "UPDATE operation_index SET phase = 'settled', outcome = 'success', settlement = 'complete', settled_at_ms = admitted_at_ms WHERE operation_id = ?",
    ).run(open);
    // Today's operation, its row moved years back: listed before the cutoff and settled before it, by the row alone.
    db.prepare('UPDATE operation_index SET admitted_at_ms = 1700000000000, settled_at_ms = 1700000000000 WHERE operation_id = ?').run(recent);
  } finally {
    db.close();
  }
  const run = convoke(['prune', '--store', store, '--keep', '30d', '--json']);
  assert.equal(run.code, 0, run.err);
  const tally = JSON.parse(run.out) as Tally;
  const ops = tally.operations;
  assert.deepEqual([ops.examined, ops.pruned, ops.open, ops.recent], [2, 0, 1, 1]);
  assert.equal(convoke(['inspect', recent, '--store', store]).code, 0, "today's operation keeps its log");
  assert.equal(convoke(['inspect', open, '--store', store]).code, 0, 'the open operation keeps its log');
});

/** A store whose parent instance ended 40 minutes ago and its child 90 minutes ago: a prune keeping an hour takes the child, keeps the parent. */
async function workflowStore(): Promise<{ store: string; parent: string; child: string }> {
  const file = join(dir, 'workflows.db');
  const clock = new VirtualClock(new SystemClock().nowMs() - 90 * 60_000);
  const sqlite = new SqliteEventStore({ path: file, clock });
  const h = harness({ store: sqlite, clock, workflows: (_document, ref) => (isWorkflowNamed(quickDocument, ref) ? quickDocument : undefined) });
  try {
    const document = staysDocument(50);
    const { instanceId: parent } = await h.executor.start({ principalId: 'alice', invocationKey: 'p', document, input: {} });
    await clock.advance(0);
    const child = Object.values((await h.executor.get(parent))!.subworkflows)[0]!.instanceId;
    await clock.advance(50 * 60_000);
    assert.deepEqual([(await h.executor.get(parent))?.status, (await h.executor.get(child))?.status], ['completed', 'completed']);
    return { store: `sqlite:${file}`, parent, child };
  } finally {
    await h.close();
  }
}

test('prune of workflow instances: a pruned one is exit 6 to inspect, in one line; its kept parent shows it pruned; replay of the store is 0', async () => {
  const { store, parent, child } = await workflowStore();
  const pruned = convoke(['prune', '--store', store, '--keep', '1h', '--json']);
  assert.equal(pruned.code, 0, pruned.err);
  const instances = (JSON.parse(pruned.out) as Tally).workflowInstances;
  assert.deepEqual([instances.examined, instances.pruned, instances.recent], [2, 1, 1]);

  for (const command of [['inspect'], ['workflow', 'inspect']]) {
    const inspected = convoke([...command, child, '--store', store]);
    assert.equal(inspected.code, 6, `${command.join(' ')} of the pruned instance: expired, ${inspected.err}`);
    assert.equal(inspected.err.trim().split('\n').length, 1, `one line, no stack: ${inspected.err}`);
    assert.deepEqual(JSON.parse(inspected.err), { kind: 'expired', description: `workflow instance ${child} was pruned: its log is gone, its key is kept` });
  }
  const byPrefix = convoke(['inspect', child.slice(0, 20), '--store', store]);
  assert.equal(byPrefix.code, 9, `a prefix names no instance stored: ${byPrefix.err}`);

  const kept = convoke(['inspect', parent, '--store', store]);
  assert.equal(kept.code, 0, kept.err);
  // Wrapped to the terminal under its label: read as one line.
  assert.match(kept.out.replace(/\n +/g, ' '), new RegExp(`child /do/0/child: workflow instance ${child} \\(quick\\) pruned`));
  const shown = JSON.parse(convoke(['inspect', parent, '--store', store, '--json']).out) as { childInstances: { instanceId: string; status: string }[] };
  assert.deepEqual(
    shown.childInstances.map((c) => [c.instanceId, c.status]),
    [[child, 'pruned']],
  );

  const replayed = convoke(['replay', '--store', store, '--json']);
  assert.equal(replayed.code, 0, replayed.out);
  const report = JSON.parse(replayed.out) as { differences: number; rows: { instanceId: string; problem: string | null }[] };
  assert.deepEqual(
    report.rows.map((r) => [r.instanceId, r.problem]),
    [[parent, null]],
    'the pruned instance is not replayed, as a pruned operation is not',
  );
});
