/** `convoke inspect`, `convoke workflow inspect` and `convoke replay` over workflow instance streams (`wf…` ids). */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { main } from '../../src/cli/main.js';
import type { Stored } from '../../src/kernel/types.js';
import type { WorkflowEvent, WorkflowTransition } from '../../src/workflow/exec/events.js';
import { replayWorkflowLog } from '../../src/workflow/exec/replay.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { SystemClock, VirtualClock } from '../../src/contract/clock.js';
import { replayInstances } from '../../src/cli/commands/workflow-ops.js';
import { bareStarted, harness, quickDocument } from './support.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';
import { captureIo } from '../support/cli-io.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import Database from 'better-sqlite3';

test('convoke inspect, workflow inspect and replay read a workflow instance from the store', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-ops-'));
  try {
    const file = join(dir, 'wf.yaml');
    await writeFile(
      file,
      `document: { dsl: '1.0.3', namespace: test, name: ops, version: '1.0.0' }\ndo:\n  - pause:\n      wait: { milliseconds: 20 }\n  - add:\n      set: { n: '\${ .n + 1 }' }\n`,
    );
    const store = `sqlite:${join(dir, 'wf.db')}`;
    const run = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', file, '--input', '{"n":1}', '--store', store, '--json'], run), exitCodes.ok, run.err());
    const instanceId = JSON.parse(run.out()).instanceId as string;

    const inspect = captureIo();
    assert.equal(await main(['node', 'convoke', 'inspect', instanceId, '--store', store], inspect), 0, inspect.err());
    for (const expected of ['workflow-started', 'lease-acquired', 'timer-fired', 'task-completed', 'workflow-completed', 'status completed'])
      assert.ok(inspect.out().includes(expected), `inspect shows ${expected}:\n${inspect.out()}`);
    const startLine = inspect
      .out()
      .split('\n')
      .find((line) => line.includes('workflow-started'));
    assert.match(startLine ?? '', /ops key "[^"]+" by [^,]+, input \{"n":1\}, keys 3, format 2$/, 'the start shows its task key scheme');
    const alias = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'inspect', instanceId, '--store', store, '--json'], alias), 0, alias.err());
    const shown = JSON.parse(alias.out());
    assert.equal(shown.record.status, 'completed');
    assert.deepEqual(shown.record.output, { n: 2 });
    assert.equal(shown.problem, null);

    const replay = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', instanceId, '--store', store, '--json'], replay), 0, replay.err());
    assert.deepEqual(JSON.parse(replay.out()).rows[0], {
      kind: 'workflow-instance',
      instanceId,
      transitions: shown.transitions.length,
      status: 'completed',
      problem: null,
    });

    // Without an id, the whole store: its operations (none here) and its workflow instances.
    const all = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', '--store', store, '--json'], all), 0, all.err());
    const whole = JSON.parse(all.out()) as { replayed: number; differences: number; rows: Record<string, unknown>[] };
    assert.deepEqual(whole.rows, [
      { kind: 'workflow-instance', instanceId, transitions: shown.transitions.length, status: 'completed', problem: null, repaired: false },
    ]);
    assert.equal(whole.differences, 0);
    // The table of a store holding only workflow instances names them and their status, no operation column.
    const table = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', '--store', store], table), 0, table.err());
    assert.match(table.out(), /^workflow instance\s+transitions\s+status\s+result$/m);
    assert.doesNotMatch(table.out(), /^operation\s|phase|outcome/m, table.out());
    assert.match(table.out(), /replayed 0 operations and 1 workflow instance in \d+ ms: 1 ok, 0 with differences/);

    const unknown = workflowInstanceId('nobody', `sha256:${'0'.repeat(64)}`, 'ops', 'none');
    const missing = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', unknown, '--store', store], missing), exitCodes.notFound);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('workflow inspect shows why a cancelled instance was cancelled (its record keeps the reason), and nothing of the kind for another', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-reason-'));
  try {
    const path = join(dir, 'wf.db');
    const store = new SqliteEventStore({ path, clock: new SystemClock() });
    const digest = `sha256:${'0'.repeat(64)}`;
    const open = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
    const ids: string[] = [];
    for (const key of ['cancelled', 'running']) {
      const id = workflowInstanceId('alice', digest, 'w', key);
      const started: WorkflowEvent = {
        type: 'workflow-started',
        v: 1,
        instanceId: id,
        principalId: 'alice',
        invocationKey: key,
        workflowName: 'w',
        bundleDigest: digest,
        document: { do: [] },
        input: {},
        timeoutMs: null,
      };
      // The cancelled one had a child instance, found closed when its parent's cancel released it.
      const child = workflowInstanceId('alice', digest, 'sub', 'child');
      const released: WorkflowEvent[] = [
        {
          type: 'subworkflow-bound',
          v: 1,
          at: '/do/0/s',
          ref: '/do/0/s',
          instanceId: child,
          invocationKey: 'child',
          workflow: 'sub',
          iterations: [],
          attempt: 1,
        },
        { type: 'subworkflow-disposed', v: 1, at: '/do/0/s', instanceId: child, by: '/', disposition: 'already-closed', detail: 'it had completed' },
      ];
      const events: WorkflowEvent[] =
        key === 'cancelled' ? [started, ...released, { type: 'workflow-cancelled', v: 1, reason: 'cancelled by the caller that started it' }] : [started];
      assert.equal((await workflowStreams(store).create(id, { events, timeGuard: open, causation: { command: 'start' } })).kind, 'ok');
      ids.push(id);
    }
    await store.close();
    const [cancelled, running] = ids as [string, string];
    const text = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'inspect', cancelled, '--store', `sqlite:${path}`], text), 0, text.err());
    assert.match(text.out(), /^reason +cancelled by the caller that started it$/m, text.out());
    // What its parent's release found is said as that, not as something the parent did to it.
    assert.match(text.out(), /^child +\/do\/0\/s: workflow instance wf[0-9a-f]{64} \(sub\) not started, released by its parent: already-closed$/m, text.out());
    const json = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'inspect', cancelled, '--store', `sqlite:${path}`, '--json'], json), 0, json.err());
    assert.equal(JSON.parse(json.out()).record.cancelReason, 'cancelled by the caller that started it');
    const other = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'inspect', running, '--store', `sqlite:${path}`], other), 0, other.err());
    assert.doesNotMatch(other.out(), /^reason /m, other.out());
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('inspect shows the task key scheme a start records: keys 2, and for a start written before schemes were recorded keys 1 (not recorded)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-keys-'));
  try {
    const path = join(dir, 'wf.db');
    const store = new SqliteEventStore({ path, clock: new SystemClock() });
    const ids: string[] = [];
    for (const keys of [undefined, 2 as const]) {
      const id = workflowInstanceId('alice', `sha256:${'0'.repeat(64)}`, 'w', `k${keys ?? 1}`);
      const started: WorkflowEvent = {
        type: 'workflow-started',
        v: 1,
        instanceId: id,
        principalId: 'alice',
        invocationKey: `k${keys ?? 1}`,
        workflowName: 'w',
        bundleDigest: `sha256:${'0'.repeat(64)}`,
        document: { do: [] },
        input: {},
        timeoutMs: null,
        ...(keys ? { keys } : {}),
      };
      const open = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
      const created = await workflowStreams(store).create(id, { events: [started], timeGuard: open, causation: { command: 'start' } });
      assert.equal(created.kind, 'ok');
      ids.push(id);
    }
    await store.close();
    const lines: string[] = [];
    for (const id of ids) {
      const inspect = captureIo();
      assert.equal(await main(['node', 'convoke', 'inspect', id, '--store', `sqlite:${path}`], inspect), 0, inspect.err());
      lines.push(
        inspect
          .out()
          .split('\n')
          .find((line) => line.includes('workflow-started')) ?? '',
      );
    }
    assert.match(lines[0] ?? '', /, keys 1 \(not recorded\), format 1$/);
    assert.match(lines[1] ?? '', /, keys 2, format 1$/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('replay reports a log the machines refuse, a transition that fails its schema, and void transitions', () => {
  const open = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };
  const stored = (revision: number, events: WorkflowEvent[], timeGuard = open): Stored<WorkflowTransition> => ({
    revision: String(revision),
    committedAtMs: 1000 + revision,
    transition: { events, timeGuard, causation: { command: 'test' } },
  });
  const started = bareStarted({ timeoutMs: 500 });
  const good = replayWorkflowLog([stored(1, [started]), stored(2, [{ type: 'task-started', v: 1, at: '/do/0/a', ref: '/do/0/a', name: 'a', input: {} }])]);
  assert.equal(good.problem, null);
  assert.equal(good.record?.started.deadlineMs, 1001 + 500);

  const illegal = replayWorkflowLog([stored(1, [started]), stored(2, [{ type: 'task-completed', v: 1, at: '/do/0/a', output: null }])]);
  assert.match(illegal.problem ?? '', /fold failed/);

  const bad = stored(2, [{ type: 'timer-fired', v: 1, at: '' }]);
  assert.match(replayWorkflowLog([stored(1, [started]), bad]).problem ?? '', /revision 2 fails its schema/);

  const late = stored(2, [{ type: 'workflow-completed', v: 1, output: null }], { notBeforeMs: 0, notAfterMs: 500 });
  const voided = replayWorkflowLog([stored(1, [started]), late]);
  assert.deepEqual(voided.applied, [true, false]);
  assert.equal(voided.record?.status, 'running');
  assert.equal(voided.problem, null);
});

test('convoke workflow list reads the instances index from the store: a table with the count, --json with every row, filters', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-list-'));
  try {
    const file = join(dir, 'wf.yaml');
    await writeFile(file, `document: { dsl: '1.0.3', namespace: test, name: listed, version: '1.0.0' }\ndo:\n  - add:\n      set: { n: '\${ .n + 1 }' }\n`);
    const failing = join(dir, 'fail.yaml');
    await writeFile(
      failing,
      `document: { dsl: '1.0.3', namespace: test, name: failing, version: '1.0.0' }\ndo:\n  - boom:\n      raise:\n        error: { type: 'https://example.com/boom', status: 500 }\n`,
    );
    const store = `sqlite:${join(dir, 'wf.db')}`;
    const ids: string[] = [];
    for (const [doc, key] of [
      [file, 'a'],
      [file, 'b'],
      [failing, 'c'],
    ] as const) {
      const run = captureIo();
      await main(['node', 'convoke', 'workflow', 'run', doc, '--input', '{"n":1}', '--store', store, '--key', key, '--json'], run);
      ids.push((JSON.parse(run.out() || run.err().slice(run.err().indexOf('{'))) as { instanceId: string }).instanceId);
    }

    const json = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store, '--json'], json), 0, json.err());
    const page = JSON.parse(json.out()) as { instances: { instanceId: string; status: string; workflowName: string }[] };
    assert.deepEqual(page.instances.map((r) => r.instanceId).sort(), [...ids].sort());

    const faulted = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store, '--status', 'faulted', '--json'], faulted), 0, faulted.err());
    assert.deepEqual(
      (JSON.parse(faulted.out()) as typeof page).instances.map((r) => [r.instanceId, r.workflowName]),
      [[ids[2], 'failing']],
    );

    const table = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store, '--workflow', 'listed'], table), 0, table.err());
    assert.match(table.out(), /instance/);
    assert.match(table.out(), /\n2 instances\n/);
    assert.equal((table.out().match(/completed/g) ?? []).length, 2, table.out());
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('convoke workflow list shows a next due instant past what a date holds (a wait of up to 2^53 − 1 ms) as its milliseconds, never failing', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-far-'));
  try {
    const file = join(dir, 'far.yaml');
    // Due at about 8.8e15 ms: a safe integer, past the 8.64e15 ms a Date holds.
    await writeFile(file, `document: { dsl: '1.0.3', namespace: test, name: far, version: '1.0.0' }\ndo:\n  - nap:\n      wait: '\${ .d }'\n`);
    const store = `sqlite:${join(dir, 'wf.db')}`;
    const farMs = 8_800_000_000_000_000;
    const run = captureIo();
    const input = JSON.stringify({ d: { milliseconds: farMs - Date.now() } });
    await main(['node', 'convoke', 'workflow', 'run', file, '--input', input, '--store', store, '--wait-ms', '500'], run);
    const json = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store, '--json'], json), 0, json.err());
    const [row] = (JSON.parse(json.out()) as { instances: { status: string; nextDueMs: number }[] }).instances;
    assert.equal(row?.status, 'running');
    assert.ok((row?.nextDueMs ?? 0) > 8.64e15, `due at ${row?.nextDueMs}`);
    const table = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store], table), 0, table.err());
    assert.match(table.out(), new RegExp(`${row?.nextDueMs} ms`), table.out());
    assert.match(table.out(), /\n1 instance\n/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("convoke workflow list counts stuck by the deployment's workflows.stuck bounds given with --config, and by the defaults without", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-stuck-'));
  try {
    const file = join(dir, 'wf.yaml');
    await writeFile(file, `document: { dsl: '1.0.3', namespace: test, name: waiting, version: '1.0.0' }\ndo:\n  - add:\n      set: { n: 1 }\n`);
    const path = join(dir, 'wf.db');
    const store = `sqlite:${path}`;
    const run = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', file, '--store', store, '--key', 'a', '--json'], run), 0, run.err());
    const instanceId = (JSON.parse(run.out()) as { instanceId: string }).instanceId;
    // Its row as a running instance whose timer was due 20 s ago, no worker holding it: stuck
    // past a 1 s timer grace, not yet past the default 60 s.
    const dueMs = Date.now() - 20_000;
    const db = new Database(path);
    db.prepare(
      "UPDATE workflow_index SET status = 'running', next_due_ms = ?, lease_until_ms = NULL, row = json_set(row, '$.status', 'running', '$.endedAtMs', json('null'), '$.nextDueMs', ?, '$.lease', json('null')) WHERE instance_id = ?",
    ).run(dueMs, dueMs, instanceId);
    db.close();
    const config = join(dir, 'serve.json');
    await writeFile(config, JSON.stringify(minimalServeConfig({ store, workflows: { stuck: { timerGraceMs: 1_000 } } })));
    const stuckIds = async (...extra: string[]) => {
      const io = captureIo();
      assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store, '--stuck', '--json', ...extra], io), 0, io.err());
      return (JSON.parse(io.out()) as { instances: { instanceId: string; stuck: string[] }[] }).instances.map((r) => [r.instanceId, r.stuck]);
    };
    assert.deepEqual(await stuckIds(), [], 'not stuck by the default bounds');
    assert.deepEqual(await stuckIds('--config', config), [[instanceId, ['timer-overdue']]], "stuck by the config's bounds");
    // A config that is not one is exit 2, before any store is read.
    await writeFile(config, JSON.stringify(minimalServeConfig({ workflows: { stuck: { timerGraceMs: -1 } } })));
    const bad = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store, '--config', config], bad), exitCodes.invalidInput, bad.out());
    assert.match(bad.err(), /timerGraceMs/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('convoke replay --fix-index without an id rebuilds every workflow instance index row from its log, SQLite: a tampered, a missing and an orphan row; progress on a terminal only', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-fix-'));
  try {
    const file = join(dir, 'wf.yaml');
    await writeFile(file, `document: { dsl: '1.0.3', namespace: test, name: fixed, version: '1.0.0' }\ndo:\n  - add:\n      set: { n: '\${ .n + 1 }' }\n`);
    const path = join(dir, 'wf.db');
    const store = `sqlite:${path}`;
    const ids: string[] = [];
    for (const key of ['a', 'b', 'c']) {
      const run = captureIo();
      assert.equal(await main(['node', 'convoke', 'workflow', 'run', file, '--input', '{"n":1}', '--store', store, '--key', key, '--json'], run), 0, run.err());
      ids.push((JSON.parse(run.out()) as { instanceId: string }).instanceId);
    }
    const [tampered, dropped, copied] = ids as [string, string, string];
    const orphan = `wf${'e'.repeat(64)}`;
    const db = new Database(path);
    db.prepare("UPDATE workflow_index SET status = 'running', row = json_set(row, '$.status', 'running') WHERE instance_id = ?").run(tampered);
    db.prepare('DELETE FROM workflow_index WHERE instance_id = ?').run(dropped);
    db.prepare(
      "INSERT INTO workflow_index SELECT ?, principal_id, workflow_name, status, started_at_ms, deadline_ms, next_due_ms, lease_until_ms, json_set(row, '$.instanceId', ?) FROM workflow_index WHERE instance_id = ?",
    ).run(orphan, orphan, copied);
    db.close();

    const check = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', '--store', store, '--json'], check), 1, check.err());
    const report = JSON.parse(check.out()) as { differences: number; repaired: number; rows: { instanceId: string; problem: string | null }[] };
    const problem = (id: string) => report.rows.find((r) => r.instanceId === id)?.problem ?? '';
    assert.match(problem(tampered), /workflow index row \(revision \d+\) differs from its log's; --fix-index writes it again/);
    assert.match(problem(dropped), /workflow index row \(missing\) differs/);
    assert.match(problem(orphan), /a workflow index row without a live log/);
    assert.equal(problem(copied), '');
    assert.equal(report.differences, 3);
    assert.equal(check.err(), '', 'no progress drawn off a terminal');

    const fix = captureIo({ stderrIsTerminal: true });
    assert.equal(await main(['node', 'convoke', 'replay', '--store', store, '--fix-index'], fix), 0, fix.out() + fix.err());
    assert.match(fix.out(), /3 index rows rebuilt/);
    assert.match(fix.err(), /\r\[#+\] 3\/3 workflow instances\n/, 'progress on a terminal');
    const fixedJson = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', '--store', store, '--json'], fixedJson), 0, fixedJson.out());
    assert.equal((JSON.parse(fixedJson.out()) as { differences: number }).differences, 0);
    const listed = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store, '--json'], listed), 0, listed.err());
    const page = JSON.parse(listed.out()) as { instances: { instanceId: string; status: string }[] };
    assert.deepEqual(page.instances.map((r) => [r.instanceId, r.status]).sort(), ids.map((id) => [id, 'completed']).sort());
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** test/parent runs test/child (adding 1 to its `n`) as a `run: workflow` task: the two documents' files in `dir`. */
async function parentAndChild(dir: string): Promise<{ parentFile: string; childFile: string }> {
  const parentFile = join(dir, 'parent.yaml');
  const childFile = join(dir, 'child.yaml');
  await writeFile(
    parentFile,
    `document: { dsl: '1.0.3', namespace: test, name: parent, version: '1.0.0' }\ndo:\n  - delegate:\n      run:\n        workflow: { namespace: test, name: child, version: '1.0.0' }\n`,
  );
  await writeFile(childFile, `document: { dsl: '1.0.3', namespace: test, name: child, version: '1.0.0' }\ndo:\n  - add:\n      set: { n: '\${ .n + 1 }' }\n`);
  return { parentFile, childFile };
}

test('a child instance’s index row names its parent; replay --fix-index writes the same row the live path wrote, and a row from before parent existed still reads', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-fix-parent-'));
  try {
    const { parentFile, childFile } = await parentAndChild(dir);
    const path = join(dir, 'wf.db');
    const store = `sqlite:${path}`;
    const run = captureIo();
    assert.equal(
      await main(['node', 'convoke', 'workflow', 'run', parentFile, '--with', childFile, '--input', '{"n":1}', '--store', store, '--json'], run),
      0,
      run.err(),
    );
    const shown = JSON.parse(run.out()) as { instanceId: string; childInstances: { instanceId: string }[] };
    const parentId = shown.instanceId;
    const childId = shown.childInstances[0]?.instanceId as string;
    const rowOf = (db: Database.Database, id: string) => (db.prepare('SELECT row FROM workflow_index WHERE instance_id = ?').get(id) as { row: string }).row;
    let db = new Database(path);
    const liveChild = JSON.parse(rowOf(db, childId)) as { parent: unknown };
    const liveParent = JSON.parse(rowOf(db, parentId)) as { parent: unknown };
    assert.deepEqual(liveChild.parent, { instanceId: parentId, at: '/do/0/delegate' });
    assert.equal(liveParent.parent, null);
    // Rows as written before `parent` existed: the parent's still agrees with its log, the child's no longer does.
    db.prepare("UPDATE workflow_index SET row = json_remove(row, '$.parent')").run();
    db.close();

    const inspect = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'inspect', parentId, '--store', store, '--json'], inspect), 0, inspect.err());
    const inspected = JSON.parse(inspect.out()) as { parent: unknown; childInstances: unknown[] };
    assert.equal(inspected.parent, null);
    assert.deepEqual(inspected.childInstances, [{ at: '/do/0/delegate', instanceId: childId, workflow: 'child', status: 'completed', disposition: null }]);
    const text = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'inspect', parentId, '--store', store], text), 0, text.err());
    assert.match(text.out(), new RegExp(`child /do/0/delegate: workflow instance ${childId} \\(child\\) completed`));

    const check = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', '--store', store, '--json'], check), 1, check.err());
    const report = JSON.parse(check.out()) as { differences: number; rows: { instanceId: string; problem: string | null }[] };
    assert.deepEqual(
      report.rows.filter((r) => r.problem !== null).map((r) => r.instanceId),
      [childId],
      'only the child’s older row differs from its log (the parent’s reads with parent null)',
    );
    const fix = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', childId, '--store', store, '--fix-index'], fix), 0, fix.out() + fix.err());
    db = new Database(path);
    assert.deepEqual(JSON.parse(rowOf(db, childId)), liveChild, 'the rebuilt row is the row the live path wrote');
    db.close();
    const clean = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', '--store', store, '--json'], clean), 0, clean.out());
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('convoke replay of a store holding operations and workflow instances shows each kind under its own columns; workflow list names its child operations column', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-mixed-'));
  try {
    const { parentFile, childFile } = await parentAndChild(dir);
    const store = `sqlite:${join(dir, 'mixed.db')}`;
    const demo = captureIo();
    assert.equal(
      await main(['node', 'convoke', 'demo', '--store', store, '--peers', '3', '--quorum', '2', '--approve-rate', '1', '--json'], demo),
      0,
      demo.err(),
    );
    const operationId = /"operationId":\s*"(op[0-9a-f]{64})"/.exec(demo.out())![1]!;
    const run = captureIo();
    assert.equal(
      await main(['node', 'convoke', 'workflow', 'run', parentFile, '--with', childFile, '--input', '{"n":1}', '--store', store, '--json'], run),
      0,
      run.err(),
    );
    const ran = JSON.parse(run.out()) as { instanceId: string; childInstances: { instanceId: string }[] };
    const [parentId, childId] = [ran.instanceId, ran.childInstances[0]!.instanceId];

    const table = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', '--store', store], table), 0, table.err());
    const lines = table.out().split('\n');
    const operations = lines.findIndex((line) => /^operation\s+transitions\s+phase\s+outcome\s+result$/.test(line));
    const instances = lines.findIndex((line) => /^workflow instance\s+transitions\s+status\s+result$/.test(line));
    assert.ok(operations >= 0 && instances > operations, table.out());
    const at = (id: string) => lines.findIndex((line) => line.startsWith(id));
    assert.ok(at(operationId) > operations && at(operationId) < instances, `the operation under the operations' columns:\n${table.out()}`);
    assert.match(lines[at(operationId)] ?? '', /\ssettled\s+success\s+ok$/);
    for (const id of [parentId, childId]) {
      assert.ok(at(id) > instances, `${id} under the instances' columns:\n${table.out()}`);
      assert.match(lines[at(id)] ?? '', /\scompleted\s+ok$/);
    }
    assert.match(table.out(), /replayed 1 operation and 2 workflow instances in \d+ ms: 3 ok, 0 with differences/);

    const json = captureIo();
    assert.equal(await main(['node', 'convoke', 'replay', '--store', store, '--json'], json), 0, json.err());
    const rows = (JSON.parse(json.out()) as { rows: Record<string, unknown>[] }).rows;
    assert.deepEqual(Object.keys(rows[0]!), ['kind', 'operationId', 'transitions', 'phase', 'outcome', 'problem', 'repaired']);
    assert.deepEqual([rows[0]!.kind, rows[0]!.operationId, rows[0]!.phase, rows[0]!.outcome], ['operation', operationId, 'settled', 'success']);
    for (const row of rows.slice(1)) assert.deepEqual(Object.keys(row), ['kind', 'instanceId', 'transitions', 'status', 'problem', 'repaired']);
    assert.deepEqual(
      rows
        .slice(1)
        .map((r) => [r.kind, r.instanceId, r.status])
        .sort(),
      [...[parentId, childId].map((id) => ['workflow-instance', id, 'completed']).sort()],
    );

    // workflow list: the count column says what it counts (the parent's child is an instance, listed as a row of its own).
    const list = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store], list), 0, list.err());
    const header = list.out().split('\n')[0] ?? '';
    assert.match(header, /\s{2}child ops\s{2}/, header);
    assert.doesNotMatch(header, /children/, header);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('inspect, workflow inspect and replay take a workflow instance by a unique prefix, as workflow list shows it; an unknown prefix is 9, a short one 2', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-prefix-'));
  try {
    const file = join(dir, 'wf.yaml');
    await writeFile(file, `document: { dsl: '1.0.3', namespace: test, name: prefix, version: '1.0.0' }\ndo:\n  - add:\n      set: { n: 1 }\n`);
    const store = `sqlite:${join(dir, 'wf.db')}`;
    const ids: string[] = [];
    for (const key of ['a', 'b', 'c']) {
      const run = captureIo();
      assert.equal(await main(['node', 'convoke', 'workflow', 'run', file, '--key', key, '--store', store, '--json'], run), exitCodes.ok, run.err());
      ids.push((JSON.parse(run.out()) as { instanceId: string }).instanceId);
    }
    const [id] = ids as [string];
    // The shortest prefix naming one of the three: wf and as many hex as that takes (at least 4).
    let length = 6;
    while (ids.some((other) => other !== id && other.startsWith(id.slice(0, length)))) length++;
    for (const typed of [`${id.slice(0, length)}…`, id.slice(0, length), id.slice(0, 20).toUpperCase()]) {
      for (const args of [
        ['inspect', typed],
        ['workflow', 'inspect', typed],
        ['replay', typed],
      ]) {
        const io = captureIo();
        assert.equal(await main(['node', 'convoke', ...args, '--store', store, '--json'], io), exitCodes.ok, `${args.join(' ')}: ${io.err()}`);
        assert.ok(io.out().includes(id), `${args.join(' ')} names ${id}`);
        assert.ok(!ids.some((other) => other !== id && io.out().includes(other)), `${args.join(' ')} shows no other instance`);
      }
    }
    const unknown = captureIo();
    const absent = ids.some((other) => other.startsWith('wf0000')) ? 'wfffff0' : 'wf0000';
    assert.equal(await main(['node', 'convoke', 'workflow', 'inspect', absent, '--store', store], unknown), exitCodes.notFound);
    // As every error: its {kind, description} on stderr, and nothing else.
    assert.deepEqual(JSON.parse(unknown.err()), { kind: 'invalid-input', description: `no workflow instance ${absent}… in this store` });
    const short = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'inspect', 'wf12', '--store', store], short), exitCodes.invalidInput);
    assert.match(short.err(), /nor a prefix of one \(wf \+ 4\.\.63 hex\)/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** The store, its workflowInstanceIds() answering `ids` instead. */
const listing = (store: EventStore, ids: readonly string[]): EventStore =>
  new Proxy(store, {
    get: (target, key) => {
      if (key === 'workflowInstanceIds')
        return async function* () {
          yield* ids;
        };
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });

test('replay of a whole store skips a pruned instance, even one listed before it was pruned, and keeps the row of a live log it was not listed', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const h = harness({ store, clock });
  const ids: string[] = [];
  for (const key of ['pruned', 'kept'])
    ids.push((await h.executor.start({ principalId: 'alice', invocationKey: key, document: quickDocument, input: {} })).instanceId);
  await clock.advance(0);
  await h.close();
  const [pruned, kept] = ids as [string, string];
  assert.equal((await store.tombstone(pruned)).kind, 'ok');
  const summary = (rows: { instanceId: string; status: string; problem: string | null }[]) => rows.map((r) => [r.instanceId, r.status, r.problem]);
  const ok = [[kept, 'completed', null]];

  assert.deepEqual(summary(await replayInstances(store, false)), ok);
  assert.deepEqual(summary(await replayInstances(listing(store, [pruned, kept]), false)), ok, 'listed, then pruned before its read: skipped');
  // Not listed, yet its log reads (a store whose tombstone stopped after its key record): replayed, its index row kept even by --fix-index.
  assert.deepEqual(summary(await replayInstances(listing(store, [pruned]), true)), ok);
  assert.equal((await store.workflowIndex.get(kept))?.status, 'completed');
  await store.close();
});
