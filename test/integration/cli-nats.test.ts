/**
 * The CLI's word over a real deployment (nats-server, `convoke serve` on SQLite, `convoke peer`
 * processes), each command a separate process: invoke's exit codes (a failed decision is 0, or
 * 11 with --fail-on-outcome; pending is 10; no server is 4), `get` and `cancel` as the invoking
 * principal with the short id `tail` prints (resolved through --store), 422 unsupported as exit 7,
 * another principal's operation as 9, and `get --store` as an operator; the same through a CLI
 * context that names the servers, user, password variable and store.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { JsonObject } from '../../src/contract/json.js';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { passwordVariableOf } from '../../src/deployment/nats/permissions.js';
import { deploymentForSuite, e2eBundle, reviewerPeers, reviewerSpec, spawnCli, type NatsFixtureOptions } from '../support/nats-deployment-fixture.js';

const reviewers = ['alfa', 'bravo', 'charlie'];

interface Reply {
  status: number;
  result?: { operationId: string; decision: { outcome: string; reason: string } | null };
  error?: { kind: string };
}

/** The e2e bundle and reviewers, with a `stoppable` interaction the callers may cancel. */
function stoppableDeployment(): NatsFixtureOptions {
  const bundle = e2eBundle();
  const interactions = bundle.interactions as JsonObject;
  // 45 s to its deadline: a loaded machine takes seconds per CLI process, and a stoppable operation
  // must still be open when cancel arrives (its peers answer only after 60 s).
  interactions.stoppable = { ...(interactions.allok as JsonObject), cancellation: 'caller', timeoutMs: 45_000 };
  const peers = reviewerPeers(reviewers);
  // "slow" answers after 60 s: long past the test, so a stoppable operation stays open until cancelled.
  for (const peerId of reviewers) peers[peerId]!.interactions.stoppable = reviewerSpec(peerId, 60_000);
  return { mode: 'core', store: 'sqlite', bundle, groups: { reviewers }, peers, commandClients: ['billing', 'mallory'] };
}

describe('convoke invoke, get and cancel over NATS', { timeout: 180_000 }, () => {
  const deployment = deploymentForSuite(stoppableDeployment(), { startUp: (f) => Promise.all([f.startServe(), f.startPeers()]) });

  const store = () => `sqlite:${join(deployment.fixture.dir, 'ops.db')}`;
  const as = (user: string) => ['--nats', deployment.fixture.url, '--user', user, '--password-env', passwordVariableOf(user)];
  const cli = async (args: string[]) => {
    const child = spawnCli(args, deployment.fixture.env());
    const { code } = await child.exited;
    return { code, output: child.output() };
  };
  const invoke = (interaction: string, key: string, input: JsonObject, extra: string[] = []) =>
    cli([
      'invoke',
      ...as('billing'),
      '--contract',
      join(deployment.fixture.dir, 'bundle.json'),
      '--interaction',
      interaction,
      '--key',
      key,
      '--input',
      JSON.stringify(input),
      '--json',
      ...extra,
    ]);
  const reply = (output: string) => JSON.parse(output.slice(output.indexOf('{'))) as Reply;

  it('invoke: a failed decision exits 0, or 11 with --fail-on-outcome; a success exits 0 either way', async () => {
    const input = { document: 'd', rejectBy: ['alfa', 'bravo'] };
    const plain = await invoke('fraction', 'cli-failed', input, ['--wait-ms', '10000']);
    assert.equal(plain.code, exitCodes.ok, plain.output);
    assert.equal(reply(plain.output).result?.decision?.outcome, 'failed');
    const strict = await invoke('fraction', 'cli-failed', input, ['--wait-ms', '10000', '--fail-on-outcome']);
    assert.equal(strict.code, exitCodes.outcomeNotSuccess, strict.output);
    const success = await invoke('allok', 'cli-success', { document: 'd' }, ['--wait-ms', '10000', '--fail-on-outcome']);
    assert.equal(success.code, exitCodes.ok, success.output);
  });

  it('invoke: a result still pending when the wait ends exits 10, never 0', async () => {
    const pending = await invoke('stoppable', 'cli-pending', { document: 'd', slow: reviewers }, ['--wait-ms', '0']);
    assert.equal(pending.code, exitCodes.pending, pending.output);
    assert.equal(reply(pending.output).status, 202);
  });

  it('get and cancel take the short id tail prints (through --store); cancel closes it as cancelled; get --store reads it as an operator', async () => {
    const started = await invoke('stoppable', 'cli-cancel', { document: 'd', slow: reviewers }, ['--wait-ms', '0']);
    const operationId = reply(started.output).result!.operationId;
    const short = `${operationId.slice(0, 14)}…`;

    const withoutStore = await cli(['get', short, ...as('billing')]);
    assert.equal(withoutStore.code, exitCodes.invalidInput, withoutStore.output);
    assert.match(withoutStore.output, /--store/);

    const open = await cli(['get', short, ...as('billing'), '--store', store(), '--json']);
    assert.equal(open.code, exitCodes.pending, open.output);
    assert.equal(reply(open.output).result?.operationId, operationId);

    const cancelled = await cli(['cancel', short, ...as('billing'), '--store', store(), '--json']);
    assert.equal(cancelled.code, exitCodes.ok, cancelled.output);
    assert.deepEqual([reply(cancelled.output).result?.decision?.outcome, reply(cancelled.output).result?.decision?.reason], ['failed', 'cancelled']);

    const decided = await cli(['get', operationId, ...as('billing'), '--fail-on-outcome']);
    assert.equal(decided.code, exitCodes.outcomeNotSuccess, decided.output);
    assert.match(decided.output, /failed \(cancelled\)/);

    const operator = await cli(['get', operationId.slice(0, 20), '--store', store()]);
    assert.equal(operator.code, exitCodes.ok, operator.output);
    assert.match(operator.output, /failed \(cancelled\)/);

    const stranger = await cli(['get', operationId, ...as('mallory')]);
    assert.equal(stranger.code, exitCodes.notFound, stranger.output);
  });

  it('a context carries servers, user, password variable and store: invoke, get by short id and cancel name only the context', async () => {
    const contexts = join(deployment.fixture.dir, 'contexts.json');
    const billing = { nats: deployment.fixture.url, user: 'billing', passwordEnv: passwordVariableOf('billing'), store: store() };
    await writeFile(contexts, JSON.stringify({ selected: 'billing', contexts: { billing, nowhere: { ...billing, nats: 'nats://127.0.0.1:1' } } }), {
      mode: 0o600,
    });
    const input = JSON.stringify({ document: 'd', slow: reviewers });
    const bundle = join(deployment.fixture.dir, 'bundle.json');
    const started = await cli([
      'invoke',
      '--contexts',
      contexts,
      '--context',
      'billing',
      '--contract',
      bundle,
      '--interaction',
      'stoppable',
      '--key',
      'ctx-1',
      '--input',
      input,
      '--wait-ms',
      '0',
      '--json',
    ]);
    assert.equal(started.code, exitCodes.pending, started.output);
    const operationId = reply(started.output).result!.operationId;
    const open = await cli(['get', operationId.slice(2, 12), '--contexts', contexts, '--json']);
    assert.equal(open.code, exitCodes.pending, open.output);
    assert.equal(reply(open.output).result?.operationId, operationId);
    const cancelled = await cli(['cancel', operationId.slice(0, 12), '--contexts', contexts, '--json']);
    assert.equal(cancelled.code, exitCodes.ok, cancelled.output);
    assert.equal(reply(cancelled.output).result?.decision?.reason, 'cancelled');
    const nowhere = await cli(['get', operationId, '--contexts', contexts, '--context', 'nowhere']);
    assert.equal(nowhere.code, exitCodes.unavailable, nowhere.output);
  });

  it('cancel of an interaction without caller cancellation exits 7 (unsupported); no server reachable exits 4 (unavailable)', async () => {
    const done = await invoke('allok', 'cli-not-cancellable', { document: 'd' }, ['--wait-ms', '10000']);
    const operationId = reply(done.output).result!.operationId;
    const refused = await cli(['cancel', operationId, ...as('billing')]);
    assert.equal(refused.code, exitCodes.unsupported, refused.output);
    assert.match(refused.output, /unsupported/);

    const nowhere = await cli(['get', operationId, '--nats', 'nats://127.0.0.1:1', '--user', 'billing', '--password-env', passwordVariableOf('billing')]);
    assert.equal(nowhere.code, exitCodes.unavailable, nowhere.output);
  });
});
