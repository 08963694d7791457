/**
 * The CLI keeps its word on a store (no NATS): missing files are errors and are not created;
 * `tail --store memory:` says why instead of exiting 13; short ids and unique prefixes are
 * accepted, an ambiguous prefix lists its candidates; the exit code table has one code per
 * meaning; replay draws progress only on a terminal; tables fit the width (an operation with 24
 * branches); demo names its real store and each scenario's real rule; tail never prints a store
 * URL's password.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { demoCommand } from '../../src/cli/commands/demo.js';
import { inspectCommand, replayCommand, resolveOperationId, tailCommand } from '../../src/cli/commands/ops.js';
import { exitCodeOfError, exitCodes } from '../../src/cli/exit-codes.js';
import { main } from '../../src/cli/main.js';
import { renderTable } from '../../src/cli/table.js';
import { adapterErrorKinds, AdapterError, isAdapterError } from '../../src/contract/errors.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { OperationNotFound } from '../../src/runtime/errors.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { captureIo } from '../support/cli-io.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

async function withDir<T>(run: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-cli-'));
  try {
    return await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A store stub that only lists ids: all resolveOperationId reads. */
const listing = (ids: string[]) =>
  ({
    operationIds: async function* () {
      yield* ids;
    },
  }) as unknown as EventStore;
const hex = (digit: string, tail: string) => `op${digit.repeat(64 - tail.length)}${tail}`;

test("exit codes: one per AdapterError kind, all distinct from success, not found, pending, outcome and Node's 13", () => {
  const codes = adapterErrorKinds.map((kind) => exitCodeOfError(new AdapterError(kind, 'x')));
  const all = [...codes, exitCodes.ok, exitCodes.failure, exitCodes.notFound, exitCodes.pending, exitCodes.outcomeNotSuccess];
  assert.equal(new Set(all).size, all.length, JSON.stringify(all));
  assert.ok(!all.includes(13));
  assert.equal(exitCodeOfError(new OperationNotFound('op1')), exitCodes.notFound);
  assert.equal(exitCodeOfError(new Error('a bug')), exitCodes.failure);
});

test('inspect --store sqlite:MISSING is an error, and the file is not created', async () => {
  await withDir(async (dir) => {
    const path = join(dir, 'missing.db');
    const io = captureIo();
    assert.equal(await main(['node', 'convoke', 'inspect', `op${'a'.repeat(64)}`, '--store', `sqlite:${path}`], io), exitCodes.invalidInput);
    assert.match(io.err(), /no sqlite store at .*missing\.db/);
    assert.equal(existsSync(path), false);
    assert.equal(existsSync(`${path}-wal`), false);
  });
});

test('tail --store memory: says why and exits 2, not a silent 13', () => {
  const run = spawnSync(process.execPath, [join(repoRoot, 'bin', 'convoke.js'), 'tail', '--store', 'memory:'], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(run.status, exitCodes.invalidInput, run.stderr);
  assert.match(run.stderr, /memory: store lives inside the process/);
});

test('short ids: the full id, `op0123456789ab…` as tail prints it, a unique prefix with or without op; ambiguous lists candidates; none is not found', async () => {
  const a = hex('1', 'a');
  const b = hex('1', 'b');
  const c = hex('2', 'c');
  const store = listing([a, b, c]);
  assert.equal(await resolveOperationId(store, c), c);
  assert.equal(await resolveOperationId(store, `${c.slice(0, 14)}…`), c);
  assert.equal(await resolveOperationId(store, c.slice(2, 10)), c);
  assert.equal(await resolveOperationId(store, a.slice(0, 66).toUpperCase()), a);
  await assert.rejects(
    resolveOperationId(store, a.slice(0, 20)),
    (e: unknown) =>
      isAdapterError(e) && e.kind === 'invalid-input' && e.description!.includes(a) && e.description!.includes(b) && /ambiguous/.test(e.description!),
  );
  await assert.rejects(resolveOperationId(store, 'op3333'), (e: unknown) => e instanceof OperationNotFound);
  await assert.rejects(resolveOperationId(store, 'op1'), (e: unknown) => isAdapterError(e) && /not an operation id/.test(e.description!));
});

test('replay draws a progress bar only on a terminal: no carriage return into a pipe', async () => {
  await withDir(async (dir) => {
    const store = `sqlite:${join(dir, 'ops.db')}`;
    for (let i = 0; i < 51; i++)
      assert.equal(await demoCommand({ scenario: 'default', store, peers: 1, quorum: 1, json: true, seed: i, approveRate: 1 }, captureIo()), 0);
    const piped = captureIo();
    assert.equal(await replayCommand(undefined, { store, json: false }, piped), 0);
    assert.doesNotMatch(piped.err(), /\r/);
    const terminal = captureIo({ stderrIsTerminal: true });
    assert.equal(await replayCommand(undefined, { store, json: false }, terminal), 0);
    assert.match(terminal.err(), /\r\[#+\] 51\/51/);
    // A short id from the listing replays that one operation.
    const first = /^(op[0-9a-f]{64})/m.exec(piped.out())![1]!;
    const one = captureIo();
    assert.equal(await replayCommand(`${first.slice(0, 14)}…`, { store, json: true }, one), 0);
    assert.equal((JSON.parse(one.out()) as { replayed: number }).replayed, 1);
  });
});

test('tables fit the width: inspect of an operation with 24 branches prints no line longer than the terminal', async () => {
  await withDir(async (dir) => {
    const path = join(dir, 'wide.db');
    const clock = new SystemClock();
    const peers = peerIds(24);
    const embedded = await createEmbedded({
      clock,
      store: new SqliteEventStore({ path, clock }),
      bundle: reviewBundle({ completion: { mode: 'all-successful' }, timeoutMs: 10_000 }),
      groups: { reviewers: peers },
    });
    let operationId: string;
    try {
      for (const peerId of peers)
        await embedded.addPeer(peerId, { review: async () => ({ verdict: 'approve', note: `${peerId} read the whole document and has nothing to add` }) });
      const { result } = await embedded.coordinator.invoke(
        { principalId: 'wide', senderPeerId: null },
        { contract: embedded.bundle.ref, interaction: 'review', invocationKey: 'wide-1', input: { document: 'wide' } },
      );
      operationId = result.operationId;
      await embedded.coordinator.wait('wide', operationId, 'settled', 10_000);
    } finally {
      await embedded.close();
    }
    for (const columns of [80, 132]) {
      const io = captureIo({ columns });
      assert.equal(await inspectCommand(operationId, { store: `sqlite:${path}`, json: false }, io), 0);
      const longest = Math.max(
        ...io
          .out()
          .split('\n')
          .map((line) => line.length),
      );
      assert.ok(longest <= columns, `longest line ${longest} > ${columns}`);
      // Nothing is cut: every branch's id is still there, and the closing event wraps instead of ending early.
      for (const peerId of peers) assert.match(io.out(), new RegExp(`\\b${peerId}\\b`));
    }
  });
});

test('renderTable wraps the widest column within the width and keeps every character', () => {
  const detail = Array.from({ length: 24 }, (_, i) => `branch-${i}:detached`).join(', ');
  const text = renderTable(['rev', 'event', 'detail'], [[7, 'decision-closed', detail]], 60);
  for (const line of text.split('\n')) assert.ok(line.length <= 60, line);
  assert.equal(text.replace(/\s+/g, '').includes(detail.replace(/\s+/g, '')), true);
  // Unbounded (the default), it is one line as before.
  assert.equal(renderTable(['a'], [['x'.repeat(300)]]).split('\n').length, 4);
});

test('demo on sqlite: names the sqlite store, never "memory store"; each scenario header states its real rule', async () => {
  await withDir(async (dir) => {
    const io = captureIo();
    assert.equal(
      await demoCommand({ scenario: 'default', store: `sqlite:${join(dir, 'demo.db')}`, peers: 3, quorum: 2, json: false, seed: 1, approveRate: 1 }, io),
      0,
    );
    const header = io.out().split('\n')[0]!;
    assert.match(header, /embedded: sqlite store/);
    assert.doesNotMatch(header, /memory store/);
    assert.match(header, /rule: quorum \(2 of 3\)/);
  });
  const headerOf = async (scenario: string, peers: number, quorum: number) => {
    const io = captureIo();
    await demoCommand({ scenario, peers, quorum, json: false, seed: 1, approveRate: 1 }, io);
    return io.out().split('\n')[0]!;
  };
  assert.match(await headerOf('lease-expiry', 3, 3), /rule: all successful \(3 of 3\)/);
  assert.match(await headerOf('one-eligible-failover', 3, 3), /rule: first success \(1 of 1\), one eligible peer at a time/);
  assert.match(await headerOf('cancel-siblings', 3, 3), /rule: first success \(1 of 3\)/);
  const revocation = await headerOf('revocation', 5, 3);
  assert.match(revocation, /rule: quorum \(2 of 5\)/);
  assert.doesNotMatch(revocation, /quorum 3/);
});

test('tail never prints the password of a jetstream store URL', async () => {
  const password = 's3cret-Pa55word';
  const server = await startJetStreamServer({ users: [{ user: 'ops', password }] });
  try {
    const io = captureIo();
    const url = `jetstream:nats://ops:${password}@127.0.0.1:${server.port}`;
    assert.equal(await tailCommand({ store: url, json: false }, io, Promise.resolve()), 0);
    const queryIo = captureIo();
    assert.equal(
      await tailCommand({ store: `jetstream:nats://127.0.0.1:${server.port}?user=ops&pass=${password}`, json: false }, queryIo, Promise.resolve()),
      0,
    );
    for (const text of [io.err(), io.out(), queryIo.err(), queryIo.out()]) assert.doesNotMatch(text, new RegExp(password));
    assert.match(io.err(), /following jetstream:nats:\/\/ops:\*\*\*@127\.0\.0\.1/);
  } finally {
    await server.dispose();
  }
});
