/**
 * NATS credentials files end to end: a nats-server in operator (JWT) mode (test/support/nats-jwt.ts:
 * an operator, accounts and users minted with nkeys; no passwords anywhere), whose users' JWTs
 * carry the deployment's permission plan. `convoke serve` logs in with the coordinator's .creds
 * from a context (its jetstream: store borrowing that login), `convoke peer` with its own, and the
 * command principal invokes and gets with its .creds from the selected context or from --creds;
 * a peer config and a serve config can name their own .creds file instead;
 * an operator lists the JetStream store with an operator's .creds. A user of an account the server
 * does not trust is refused (exit 3, denied); a credentials file others may read, or one that is
 * not a credentials file, is refused before anything connects (exit 2).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { loadBundle } from '../../src/contract/bundle.js';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { natsPrincipalPlan } from '../../src/deployment/nats/permissions.js';
import { e2eBundle, spawnCli, waitForLine, type PeerProcess } from '../support/nats-deployment-fixture.js';
import { startServe, type ServeProcess } from '../support/http-server.js';
import { startOperatorModeServer, type OperatorModeServer } from '../support/nats-jwt.js';

interface Reply {
  status: number;
  result?: { operationId: string; decision: { outcome: string } | null };
}

let dir: string;
let nats: OperatorModeServer;
let serve: ServeProcess | undefined;
let peer: PeerProcess | undefined;
let contexts: string;
const bundle = e2eBundle();
const namespace = loadBundle(bundle).bundle.subjectNamespace;
const noPasswords = { CONVOKE_NATS_PASSWORD: '' };

/** The deployment's files: no passwordEnv anywhere, and servers nothing listens on — the contexts give both. */
async function writeDeployment(): Promise<void> {
  await writeFile(join(dir, 'bundle.json'), JSON.stringify(bundle));
  await writeFile(
    join(dir, 'serve.json'),
    JSON.stringify({
      store: `jetstream:${nats.url}`,
      transport: { kind: 'nats', servers: 'nats://127.0.0.1:1', user: 'coordinator', mode: 'core', manageStreams: true },
      bundles: ['bundle.json'],
      directory: { groups: { reviewers: ['alfa'] } },
      policy: { rules: [{ effect: 'allow' }], ttlMs: 60_000 },
      attestations: [{ namespace, exclusivePeerPublishers: true }],
      deployment: { account: 'test', system: 'convoke', domain: 'creds' },
      http: {
        host: '127.0.0.1',
        port: 0,
        bodyLimitBytes: 65536,
        waitMsMax: 30_000,
        principals: [{ principalId: 'web', tokenSha256: createHash('sha256').update('unused', 'utf8').digest('hex') }],
      },
    }),
  );
  await writeFile(
    join(dir, 'peer-alfa.json'),
    JSON.stringify({
      peerId: 'alfa',
      namespace,
      nats: { servers: 'nats://127.0.0.1:1', credsFile: 'alfa.creds' },
      durable: false,
      interactions: { allok: { result: { verdict: 'approve' } } },
    }),
  );
  const c = nats.creds;
  // The peer's config names its own credentials file (relative to the config); the context gives the servers.
  await copyFile(c.alfa!, join(dir, 'alfa.creds'));
  await chmod(join(dir, 'alfa.creds'), 0o600);
  const named = {
    coord: { nats: nats.url, creds: c.coordinator },
    alfa: { nats: nats.url },
    billing: { nats: nats.url, user: 'billing', creds: c.billing },
    ops: { store: `jetstream:${nats.url}`, creds: c.ops },
  };
  await writeFile(contexts, JSON.stringify({ selected: 'billing', contexts: named }), { mode: 0o600 });
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'convoke-creds-'));
  await chmod(dir, 0o700);
  contexts = join(dir, 'contexts.json');
  const plan = natsPrincipalPlan({
    namespaces: [namespace],
    coordinator: { user: 'coordinator', coordinatorId: 'coordinator', manageStreams: true, jetstreamStore: {} },
    peers: { alfa: [namespace] },
    commandClients: ['billing'],
  });
  nats = await startOperatorModeServer(dir, [...plan.map((p) => ({ name: p.user, permissions: p.permissions })), { name: 'ops' }]);
  await writeDeployment();
  serve = await startServe(join(dir, 'serve.json'), { args: ['--context', 'coord', '--contexts', contexts], readyTimeoutMs: 90_000, env: noPasswords });
  peer = spawnCli(['peer', '--config', join(dir, 'peer-alfa.json'), '--context', 'alfa', '--contexts', contexts], noPasswords);
  await waitForLine(peer, /convoke peer alfa ready/, 60_000);
});

after(async () => {
  await peer?.stop();
  await serve?.stop(5_000);
  await nats?.dispose();
  await rm(dir, { recursive: true, force: true });
});

const cli = async (args: string[]) => {
  const child = spawnCli(args, { ...noPasswords, CONVOKE_CONTEXTS: contexts });
  const { code } = await child.exited;
  return { code, output: child.output() };
};
const reply = (output: string) => JSON.parse(output.slice(output.indexOf('{'))) as Reply;
const invokeArgs = (key: string) => [
  'invoke',
  '--contract',
  join(dir, 'bundle.json'),
  '--interaction',
  'allok',
  '--key',
  key,
  '--input',
  '{"document":"d"}',
  '--wait-ms',
  '15000',
  '--json',
];

test(
  'invoke through the selected context, get with --creds and a principal alone, list as an operator: the deployment runs on credentials only',
  { timeout: 120_000 },
  async () => {
    const invoked = await cli(invokeArgs('creds-1'));
    assert.equal(invoked.code, exitCodes.ok, invoked.output);
    const operationId = reply(invoked.output).result!.operationId;
    assert.equal(reply(invoked.output).result?.decision?.outcome, 'success');

    // The ops context has no user: the principal and the credentials alone identify the client.
    const got = await cli(['get', operationId, '--context', 'ops', '--nats', nats.url, '--principal', 'billing', '--creds', nats.creds.billing!, '--json']);
    assert.equal(got.code, exitCodes.ok, got.output);
    assert.equal(reply(got.output).result?.operationId, operationId);

    // The coordinator's store borrowed its context's credentials; an operator's read them back.
    const listed = await cli(['list', '--context', 'ops', '--json']);
    assert.equal(listed.code, exitCodes.ok, listed.output);
    assert.deepEqual(
      (JSON.parse(listed.output) as { operations: { operationId: string }[] }).operations.map((o) => o.operationId),
      [operationId],
    );
  },
);

test(
  "a workflow instance on the JetStream store: workflow run writes it, inspect, workflow inspect and replay read it, each logging in with the context's credentials",
  { timeout: 120_000 },
  async () => {
    const file = join(dir, 'greet.yaml');
    await writeFile(
      file,
      `document: { dsl: '1.0.3', namespace: test, name: greet, version: '1.0.0' }\ndo:\n  - greet:\n      set: { greeting: '\${ "Hello \\(.name)" }' }\n`,
    );
    const ran = await cli(['workflow', 'run', file, '--input', '{"name":"Ada"}', '--key', 'creds-wf', '--context', 'ops', '--json']);
    assert.equal(ran.code, exitCodes.ok, ran.output);
    const run = JSON.parse(ran.output.slice(ran.output.indexOf('{'))) as { instanceId: string; output: unknown };
    assert.deepEqual(run.output, { greeting: 'Hello Ada' });
    for (const args of [
      ['inspect', run.instanceId],
      ['workflow', 'inspect', run.instanceId],
      ['replay', run.instanceId],
    ]) {
      const read = await cli([...args, '--context', 'ops', '--json']);
      assert.equal(read.code, exitCodes.ok, `${args.join(' ')}: ${read.output}`);
      assert.match(read.output, new RegExp(run.instanceId), args.join(' '));
    }
    // The same reads with a stranger's credentials are denied: the login given is the one used.
    const denied = await cli(['inspect', run.instanceId, '--context', 'ops', '--creds', nats.strangerCreds]);
    assert.equal(denied.code, exitCodes.denied, denied.output);
  },
);

test("a user of an account the server does not trust is denied (exit 3), --creds winning over the context's", { timeout: 120_000 }, async () => {
  const invoked = await cli([...invokeArgs('creds-2'), '--creds', nats.strangerCreds]);
  assert.equal(invoked.code, exitCodes.denied, invoked.output);
  assert.match(invoked.output, /"kind":"denied"/);
  const listed = await cli(['list', '--context', 'ops', '--creds', nats.strangerCreds]);
  assert.equal(listed.code, exitCodes.denied, listed.output);
  const peerRefused = await cli(['peer', '--config', join(dir, 'peer-alfa.json'), '--context', 'alfa', '--creds', nats.strangerCreds]);
  assert.equal(peerRefused.code, exitCodes.denied, peerRefused.output);
});

test("a serve config that names its credentials file logs in with it, and one naming a stranger's is denied (exit 3)", { timeout: 120_000 }, async () => {
  await copyFile(nats.creds.coordinator!, join(dir, 'coord.creds'));
  await copyFile(nats.strangerCreds, join(dir, 'stranger.creds'));
  await chmod(join(dir, 'coord.creds'), 0o600);
  await chmod(join(dir, 'stranger.creds'), 0o600);
  const withCreds = async (credsFile: string) => {
    const config = JSON.parse(await readFile(join(dir, 'serve.json'), 'utf8')) as { transport: Record<string, unknown> };
    config.transport = { ...config.transport, servers: nats.url, credsFile };
    const path = join(dir, `serve-${credsFile}.json`);
    await writeFile(path, JSON.stringify(config));
    return path;
  };
  const own = await startServe(await withCreds('coord.creds'), { readyTimeoutMs: 90_000, env: noPasswords });
  try {
    const invoked = await cli(invokeArgs('creds-own'));
    assert.equal(invoked.code, exitCodes.ok, invoked.output);
  } finally {
    await own.stop(5_000);
  }
  const stranger = await cli(['serve', '--config', await withCreds('stranger.creds')]);
  assert.equal(stranger.code, exitCodes.denied, stranger.output);
});

test('a credentials file others may read, or that is not one, is refused before connecting (exit 2), the seed never shown', { timeout: 120_000 }, async () => {
  const open = join(dir, 'open.creds');
  await copyFile(nats.creds.billing!, open);
  await chmod(open, 0o644);
  const readable = await cli([...invokeArgs('creds-3'), '--creds', open]);
  assert.equal(readable.code, exitCodes.invalidInput, readable.output);
  assert.match(readable.output, /credentials file .*open\.creds is readable or writable by group or others \(mode 0644\): chmod 600/);

  const notCreds = join(dir, 'not.creds');
  await writeFile(notCreds, 'user: billing\npassword: hunter2\n', { mode: 0o600 });
  const wrong = await cli([...invokeArgs('creds-4'), '--creds', notCreds]);
  assert.equal(wrong.code, exitCodes.invalidInput, wrong.output);
  assert.match(wrong.output, /not\.creds is not a NATS credentials file/);

  const shown = await cli(['context', 'show', 'billing', '--json']);
  assert.equal(shown.code, 0, shown.output);
  assert.match(shown.output, /credentials file .*billing\.creds/);
  assert.doesNotMatch(shown.output, /SU[A-Z2-7]{50,}/, 'no seed');
});
