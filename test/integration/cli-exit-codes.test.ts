/**
 * Every command's exit code for every class of failure it can meet (exit-codes.ts, docs/cli.md):
 * local commands and store commands against real files, a real SQLite store and an unreachable
 * JetStream; workflow documents and bundles convoke does not run, a workflow instance still running,
 * faulted or started again with another input; invoke, get, cancel and workflow start and get
 * against a real nats-server whose command subjects are answered
 * by a stand-in coordinator that replies each AdapterError kind in turn (the real coordinator's
 * answers are in cli-nats.test.ts), a reply that breaks the schema, no coordinator at all, and a
 * wrong password.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import Database from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { demoCommand } from '../../src/cli/commands/demo.js';
import { exitCodes } from '../../src/cli/exit-codes.js';
import type { CliIo } from '../../src/cli/io.js';
import { main } from '../../src/cli/main.js';
import { adapterErrorKinds, httpStatusOf, type AdapterErrorKind } from '../../src/contract/errors.js';
import { startNatsServer, type NatsServer } from '../support/nats-server.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const bundle = join(repoRoot, 'examples', 'review.bundle.json');
const password = 'p5f3e9a0c1d2b4';
const unreachable = 'jetstream:nats://127.0.0.1:1';

let dir: string;
let db: string;
let failedId: string;
let server: NatsServer;
let coordinator: NatsConnection;
/** What the stand-in coordinator answers next. */
let answer: unknown = {};

async function run(...args: string[]): Promise<{ code: number; err: string }> {
  let err = '';
  const io: CliIo = { stdout: { write: () => true }, stderr: { write: (s: string) => (err += s) }, readStdin: async () => new Uint8Array() };
  return { code: await main(['node', 'convoke', ...args], io), err };
}

/** Runs a command and keeps what it writes to both streams. */
async function runShown(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) }, readStdin: async () => new Uint8Array() };
  return { code: await main(['node', 'convoke', ...args], io), out, err };
}

async function expectCode(expected: number, args: string[]): Promise<void> {
  const { code, err } = await run(...args);
  assert.equal(code, expected, `convoke ${args.join(' ')} → ${code}: ${err}`);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'convoke-exit-'));
  // No contexts file of the machine's user is read: every connection here is on the command line.
  process.env.XDG_CONFIG_HOME = join(dir, 'config');
  process.env.CONVOKE_TEST_BILLING = password;
  db = join(dir, 'ops.db');
  const io: CliIo & { text: string } = {
    text: '',
    stdout: { write: (s: string) => (io.text += s) },
    stderr: { write: () => true },
    readStdin: async () => new Uint8Array(),
  };
  // approve-rate 0: every reviewer rejects, so the decision is failed.
  assert.equal(await demoCommand({ scenario: 'default', store: `sqlite:${db}`, peers: 3, quorum: 2, json: true, seed: 5, approveRate: 0 }, io), 0);
  failedId = /"operationId":\s*"(op[0-9a-f]{64})"/.exec(io.text)![1]!;
  server = await startNatsServer({ users: [{ user: 'billing', password }] });
  coordinator = await connect({ servers: server.url, user: 'billing', pass: password });
  coordinator.subscribe('convoke.cmd.billing.*', { callback: (_error, message) => void message.respond(JSON.stringify(answer)) });
  await coordinator.flush();
});

after(async () => {
  await coordinator?.close();
  await server?.dispose();
  await rm(dir, { recursive: true, force: true });
  delete process.env.CONVOKE_TEST_BILLING;
});

test('local commands: a missing or invalid file or argument is 2', async () => {
  const missing = join(dir, 'missing.json');
  const cases = [
    ['canonicalize', missing],
    ['bundle', 'check', missing],
    ['workflow', 'validate', missing],
    ['workflow', 'run', missing],
    ['id', 'operation', '--principal', 'p', '--contract-digest', 'sha256:x', '--key', 'k'],
    ['demo', '--scenario', 'nope'],
    ['serve', '--config', missing],
    ['peer', '--config', missing],
    ['invoke', '--nats', server.url, '--user', 'billing', '--contract', missing, '--interaction', 'review', '--key', 'k', '--input', '{}'],
    ['no-such-command'],
  ];
  for (const args of cases) await expectCode(exitCodes.invalidInput, args);
  await expectCode(exitCodes.unavailable, ['demo', '--store', unreachable]);
});

test('store commands: 0, and 2 for a missing store file or a bad id, 4 for an unreachable store, 9 for no such operation', async () => {
  const store = `sqlite:${db}`;
  const nowhere = `sqlite:${join(dir, 'nowhere.db')}`;
  const absent = `op${'0'.repeat(10)}`;
  const byId = [
    ['inspect', failedId],
    ['get', failedId],
    ['replay', failedId],
  ];
  for (const [command, id] of byId) {
    await expectCode(exitCodes.ok, [command!, id!.slice(0, 12), '--store', store]);
    await expectCode(exitCodes.invalidInput, [command!, id!, '--store', nowhere]);
    await expectCode(exitCodes.invalidInput, [command!, 'not-an-id', '--store', store]);
    await expectCode(exitCodes.unavailable, [command!, id!, '--store', unreachable]);
    await expectCode(exitCodes.notFound, [command!, absent, '--store', store]);
  }
  await expectCode(exitCodes.ok, ['list', '--store', store]);
  await expectCode(exitCodes.invalidInput, ['list', '--store', nowhere]);
  await expectCode(exitCodes.invalidInput, ['list', '--store', store, '--phase', 'nope']);
  await expectCode(exitCodes.unavailable, ['list', '--store', unreachable]);
  await expectCode(exitCodes.invalidInput, ['tail', '--store', nowhere]);
  await expectCode(exitCodes.invalidInput, ['tail', '--store', 'memory:']);
  await expectCode(exitCodes.unavailable, ['tail', '--store', unreachable]);
  await expectCode(exitCodes.invalidInput, ['inspect', failedId]);
  await expectCode(exitCodes.ok, ['prune', '--store', store, '--keep', '30d', '--dry-run']);
  await expectCode(exitCodes.invalidInput, ['prune', '--store', nowhere, '--keep', '30d']);
  await expectCode(exitCodes.invalidInput, ['prune', '--store', store, '--keep', '5m']);
  await expectCode(exitCodes.invalidInput, ['prune', '--store', store]);
  await expectCode(exitCodes.unavailable, ['prune', '--store', unreachable, '--keep', '30d']);
});

test('a store command that finds no operation is 9 whether a full id or a prefix names it, its error naming the store, not a principal', async () => {
  const store = `sqlite:${db}`;
  const full = `op${'0'.repeat(64)}`;
  const prefix = `op${'0'.repeat(10)}`;
  for (const command of ['get', 'inspect', 'replay']) {
    const named = await run(command, full, '--store', store);
    assert.equal(named.code, exitCodes.notFound, `convoke ${command} ${full}: ${named.err}`);
    assert.deepEqual(JSON.parse(named.err), { kind: 'invalid-input', description: `no operation ${full} in this store` });
    const typed = await run(command, prefix, '--store', store);
    assert.equal(typed.code, exitCodes.notFound, `convoke ${command} ${prefix}: ${typed.err}`);
    assert.deepEqual(JSON.parse(typed.err), { kind: 'invalid-input', description: `no operation ${prefix}… in this store` });
  }
});

test('a store file that is not a convoke store is 2, like a missing one, and is left as it was; a locked one is 4', async () => {
  const text = join(dir, 'notes.txt');
  const empty = join(dir, 'empty.db');
  const other = join(dir, 'other.db');
  await writeFile(text, 'not a database\n');
  await writeFile(empty, '');
  const foreign = new Database(other);
  foreign.exec('CREATE TABLE things (x)');
  foreign.close();
  for (const [path, why] of [
    [text, /is not a SQLite database/],
    [empty, /is not a convoke store \(it holds no tables\)/],
    [other, /is a SQLite database but not a convoke store: it has table things and no convoke meta table/],
  ] as const) {
    for (const args of [['list'], ['tail'], ['replay'], ['inspect', failedId], ['get', failedId]]) {
      const { code, err } = await run(...args, '--store', `sqlite:${path}`);
      assert.equal(code, exitCodes.invalidInput, `${args[0]} ${path} → ${code}: ${err}`);
      assert.match(err, why);
    }
  }
  assert.equal((await stat(empty)).size, 0, 'the empty file is still empty');
  const reread = new Database(other, { readonly: true });
  assert.deepEqual(reread.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all(), [{ name: 'things' }]);
  reread.close();
  // demo and serve write a store: a file that is not a convoke store is the argument's fault there too, and is
  // left as it was; so is a directory that does not exist (no retry creates it).
  const otherBytes = await readFile(other);
  for (const [path, why] of [
    [text, /is not a SQLite database/],
    [other, /is a SQLite database but not a convoke store: it has table things/],
    [join(dir, 'nodir', 'd.db'), /the directory .*nodir does not exist/],
  ] as const) {
    const { code, err } = await run('demo', '--store', `sqlite:${path}`);
    assert.equal(code, exitCodes.invalidInput, `demo ${path} → ${code}: ${err}`);
    assert.match(err, why);
  }
  assert.deepEqual(await readFile(other), otherBytes, "the other program's database is unchanged");
  // A convoke store another process holds locked past the busy timeout is unavailable: it is a store, just not now.
  const locker = new Database(db);
  locker.exec('BEGIN EXCLUSIVE');
  try {
    const { code, err } = await run('list', '--store', `sqlite:${db}`);
    assert.equal(code, exitCodes.unavailable, err);
  } finally {
    locker.exec('ROLLBACK');
    locker.close();
  }
});

test('a decision that is not success: 0, or 11 with --fail-on-outcome', async () => {
  await expectCode(exitCodes.ok, ['get', failedId, '--store', `sqlite:${db}`]);
  await expectCode(exitCodes.outcomeNotSuccess, ['get', failedId, '--store', `sqlite:${db}`, '--fail-on-outcome']);
});

test('demo: a decision that is not success is still 0; the pipeline scenario whose instance faulted is 11; docs/cli.md lists both, and 10', async () => {
  // approve-rate 0: every reviewer rejects — the review is decided failed (still 0), and the pipeline's review stage faults its instance.
  await expectCode(exitCodes.ok, ['demo', '--peers', '3', '--quorum', '2', '--approve-rate', '0']);
  await expectCode(exitCodes.outcomeNotSuccess, ['demo', '--scenario', 'pipeline', '--peers', '3', '--quorum', '2', '--approve-rate', '0']);
  const docs = await readFile(join(repoRoot, 'docs', 'cli.md'), 'utf8');
  const row = /^\| `demo` +\| (0\b.*?) *\|$/m.exec(docs)?.[1] ?? '';
  const codes = [...row.matchAll(/(?:^|, )(\d+)/g)].map((m) => Number(m[1]));
  // 10: the operation (or the pipeline's instance) had not reached its end when the demo's wait ended — not provoked here.
  assert.deepEqual(codes, [exitCodes.ok, exitCodes.invalidInput, exitCodes.denied, exitCodes.unavailable, exitCodes.pending, exitCodes.outcomeNotSuccess], row);
});

test('context: 0, 5 for adding a name that exists, 2 for a context or file that does not exist', async () => {
  const file = join(dir, 'contexts', 'contexts.json');
  await expectCode(exitCodes.ok, ['context', 'add', 'a', '--store', `sqlite:${db}`, '--contexts', file]);
  await expectCode(exitCodes.conflict, ['context', 'add', 'a', '--store', `sqlite:${db}`, '--contexts', file]);
  await expectCode(exitCodes.invalidInput, ['context', 'show', 'b', '--contexts', file]);
  await expectCode(exitCodes.invalidInput, ['context', 'select', 'a', '--contexts', join(dir, 'none.json')]);
  await expectCode(exitCodes.invalidInput, ['list', '--context', 'a', '--contexts', join(dir, 'none.json')]);
});

test('workflow commands: 7 for what convoke does not run, 10 still running, 5 for a key reused with another input, 11 faulted, 9 for no such instance', async () => {
  const released = await readFile(join(repoRoot, 'examples', 'review-publish.bundle.yaml'), 'utf8');
  const shelled = released.replace('wait: { minutes: 10 }', "run: { shell: { command: 'sleep 600' } }");
  assert.notEqual(shelled, released, 'the example bundle still waits in embargoed-release');
  const shellBundle = join(dir, 'shell.bundle.yaml');
  await writeFile(shellBundle, shelled);
  for (const args of [
    ['bundle', 'check', shellBundle],
    ['workflow', 'validate', shellBundle],
    ['workflow', 'lower', shellBundle, 'embargoed-release'],
    ['workflow', 'graph', shellBundle, 'embargoed-release'],
  ])
    await expectCode(exitCodes.unsupported, args);
  const document = (name: string, task: string) => `document: { dsl: 1.0.3, namespace: exit, name: ${name}, version: 1.0.0 }\ndo:\n  - only:\n      ${task}\n`;
  const shell = join(dir, 'shell.yaml');
  const waits = join(dir, 'waits.yaml');
  const raises = join(dir, 'raises.yaml');
  await writeFile(shell, document('shell', "run: { shell: { command: 'true' } }"));
  await writeFile(waits, document('waits', 'wait: { minutes: 10 }'));
  await writeFile(raises, document('raises', 'raise: { error: { type: https://example.org/failed, status: 500 } }'));
  const store = `sqlite:${join(dir, 'workflows.db')}`;
  await expectCode(exitCodes.unsupported, ['workflow', 'run', shell, '--store', store]);
  await expectCode(exitCodes.pending, ['workflow', 'run', waits, '--store', store, '--key', 'w', '--wait-ms', '0']);
  await expectCode(exitCodes.conflict, ['workflow', 'run', waits, '--store', store, '--key', 'w', '--wait-ms', '0', '--input', '{"other":1}']);
  await expectCode(exitCodes.outcomeNotSuccess, ['workflow', 'run', raises, '--store', store]);
  await expectCode(exitCodes.ok, ['workflow', 'list', '--store', store]);
  await expectCode(exitCodes.invalidInput, ['workflow', 'list', '--store', store, '--status', 'nope']);
  await expectCode(exitCodes.unavailable, ['workflow', 'list', '--store', unreachable]);
  await expectCode(exitCodes.notFound, ['workflow', 'inspect', `wf${'0'.repeat(64)}`, '--store', store]);
  await expectCode(exitCodes.invalidInput, ['workflow', 'inspect', `wf${'0'.repeat(64)}`, '--store', `sqlite:${join(dir, 'nowhere.db')}`]);
  await expectCode(exitCodes.unavailable, ['workflow', 'inspect', `wf${'0'.repeat(64)}`, '--store', unreachable]);
});

/** The codes docs/cli.md promises, written out: a change to the table in exit-codes.ts must show here. */
const documented: Record<AdapterErrorKind, number> = {
  'invalid-input': 2,
  denied: 3,
  unavailable: 4,
  conflict: 5,
  expired: 6,
  unsupported: 7,
  'protocol-conflict': 8,
};

/** invoke, get, cancel and workflow start and get as billing; `extra` changes the connection (a later flag wins). */
const overNats = (...extra: string[]) => {
  const nats = ['--nats', server.url, '--user', 'billing', '--password-env', 'CONVOKE_TEST_BILLING', ...extra];
  return [
    ['invoke', ...nats, '--contract', bundle, '--interaction', 'review', '--key', 'k', '--input', '{"document":"x"}'],
    ['get', failedId, ...nats],
    ['cancel', failedId, ...nats],
    ['workflow', 'start', bundle, '--workflow', 'review-then-publish', '--key', 'k', ...nats],
    ['workflow', 'get', `wf${'0'.repeat(64)}`, ...nats],
  ];
};

test('invoke, get, cancel and workflow start and get: each AdapterError kind the coordinator answers is its own code, and 404 is 9', async () => {
  for (const args of overNats()) {
    for (const kind of adapterErrorKinds) {
      answer = { status: httpStatusOf(kind), error: { kind, description: `stand-in ${kind}` } };
      await expectCode(documented[kind], args);
    }
    answer = { status: 404, error: { kind: 'invalid-input', description: 'no operation' } };
    await expectCode(exitCodes.notFound, args);
  }
});

test('invoke, get, cancel and workflow start and get: a reply that left members out (past max_payload) is shown with what was left out and exits by its status', async () => {
  const operationId = `op${'7'.repeat(64)}`;
  const instanceId = `wf${'8'.repeat(64)}`;
  const omitted = (read: string, members: string[]) => ({ members, replyBytes: 9000, maxPayload: 4096, read });
  const result = {
    operationId,
    contract: { id: 'lab.review', version: '1.0.0', digest: `sha256:${'9'.repeat(64)}` },
    interaction: 'review',
    invocationKey: 'k',
    phase: 'settled',
    admittedAtMs: 1,
    deadlineMs: 5001,
    decision: { outcome: 'success', reason: 'threshold', closedAtMs: 20, successVotes: 2, failedUnits: 0, units: 3, threshold: 2 },
    settlement: { status: 'complete', siblings: [] },
    branches: [{ branchId: 'alfa', peerId: 'alfa', status: 'success', attempt: 1, fence: 1 }],
    outputError: null,
  };
  const instance = {
    instanceId,
    bundle: result.contract,
    workflow: 'review-then-publish',
    invocationKey: 'k',
    status: 'completed',
    currentTask: null,
    stages: [],
    error: null,
    cancellation: 'none',
    startedAtMs: 1,
    endedAtMs: 2,
    parent: null,
    childInstances: [],
  };
  const [invoke, get, cancel, start, getInstance] = overNats('--json');
  for (const args of [invoke!, get!, cancel!]) {
    for (const [status, code] of [
      [200, exitCodes.ok],
      [202, exitCodes.pending],
    ] as const) {
      answer = { status, result, omitted: omitted(`GET /contract-invocations/${operationId}`, ['output', 'branches[].result']) };
      await expectCode(code, args);
    }
    // For a person: the table says what is not shown and where to read it.
    answer = { status: 200, result, omitted: omitted(`GET /contract-invocations/${operationId}`, ['output', 'branches[].result']) };
    const shown = await runShown(...args.filter((a) => a !== '--json'));
    assert.equal(shown.code, exitCodes.ok, shown.err);
    assert.match(
      shown.out,
      /left out +output, branches\[\]\.result: the reply is 9000 bytes, past the NATS server's max_payload \(4096\); read it in full with GET \/contract-invocations\/op7{64}/,
    );
    assert.match(shown.out, /success \(threshold\)/);
  }
  for (const args of [start!, getInstance!]) {
    answer = { status: 200, instance, omitted: omitted(`GET /workflow-instances/${instanceId}`, ['output']) };
    await expectCode(exitCodes.ok, args);
    const shown = await runShown(...args.filter((a) => a !== '--json'));
    assert.equal(shown.code, exitCodes.ok, shown.err);
    assert.match(
      shown.out,
      /left out +output: the reply is 9000 bytes, past the NATS server's max_payload \(4096\); read it in full with GET \/workflow-instances\/wf8{64}/,
    );
    assert.doesNotMatch(shown.out, /\noutput /);
  }
});

test('invoke, get, cancel and workflow start and get: 8 for a reply that breaks the reply schema, 3 for a wrong password, 4 for no coordinator or no server, 2 without a password', async () => {
  answer = { status: 200, result: { nonsense: true } };
  for (const args of overNats()) await expectCode(exitCodes.protocolConflict, args);
  process.env.CONVOKE_TEST_BILLING = 'wrong';
  try {
    for (const args of overNats()) await expectCode(exitCodes.denied, args);
  } finally {
    process.env.CONVOKE_TEST_BILLING = password;
  }
  for (const args of overNats('--principal', 'nobody')) await expectCode(exitCodes.unavailable, args);
  for (const args of overNats('--nats', 'nats://127.0.0.1:1')) await expectCode(exitCodes.unavailable, args);
  for (const args of overNats('--password-env', 'CONVOKE_TEST_UNSET')) await expectCode(exitCodes.invalidInput, args);
});
