/**
 * CLI contexts (src/cli/contexts.ts): add, ls, show, select and rm on a real file; the file is
 * validated (the field named), never holds a password (URLs with one are refused), is refused
 * when others may write it; a password file readable by others is refused; `show` never prints a
 * password; store commands take their store, and a jetstream store its user and password, from
 * the context in effect, a flag winning over it; a missing file or context is an error and no
 * file is created.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { demoCommand } from '../../src/cli/commands/demo.js';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { main } from '../../src/cli/main.js';
import { carriesPassword, chooseContext, contextsFilePath } from '../../src/cli/contexts.js';
import { resolveConnection } from '../../src/cli/connection.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { captureIo } from '../support/cli-io.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import { fileURLToPath } from 'node:url';

const reviewBundle = join(fileURLToPath(new URL('../../../', import.meta.url)), 'examples', 'review.bundle.json');

let dir: string;
let file: string;
let db: string;

const run = async (...args: string[]) => {
  const io = captureIo();
  const code = await main(['node', 'convoke', ...args], io);
  return { code, out: io.out(), err: io.err() };
};
const ctx = (...args: string[]) => run('context', ...args, '--contexts', file);

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'convoke-contexts-'));
  await chmod(dir, 0o700);
  file = join(dir, 'config', 'contexts.json');
  db = join(dir, 'ops.db');
  assert.equal(await demoCommand({ scenario: 'default', store: `sqlite:${db}`, peers: 3, quorum: 2, json: true, seed: 3, approveRate: 1 }, captureIo()), 0);
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('add, ls, select, show and rm: the first added is selected; the file is owner-only; a second add of a name is a conflict', async () => {
  assert.equal((await ctx('add', 'local', '--store', `sqlite:${db}`, '--description', 'the demo store')).code, 0);
  assert.equal((await stat(file)).mode & 0o777, 0o600);
  assert.equal((await stat(join(dir, 'config'))).mode & 0o777, 0o700);
  assert.equal((await ctx('add', 'other', '--store', `sqlite:${join(dir, 'other.db')}`)).code, 0);
  const again = await ctx('add', 'other', '--store', 'sqlite:x.db');
  assert.equal(again.code, exitCodes.conflict, again.err);
  assert.match(again.err, /--force/);
  const listed = await ctx('ls');
  assert.match(listed.out, /^\* local /m);
  assert.match(listed.out, /^ {2}other /m);
  assert.equal((await ctx('select', 'other')).code, 0);
  assert.equal(JSON.parse(await readFile(file, 'utf8')).selected, 'other');
  const shown = await ctx('show', '--json');
  assert.equal(JSON.parse(shown.out).name, 'other');
  assert.equal((await ctx('rm', 'other')).code, 0);
  assert.match((await ctx('ls')).out, /local/);
  assert.doesNotMatch((await ctx('ls')).out, /other/);
  assert.equal((await ctx('select', 'local')).code, 0);
});

test('store commands use the selected context, --context picks another, and --store wins over both', async () => {
  const listed = await run('list', '--contexts', file, '--json');
  assert.equal(listed.code, 0, listed.err);
  const [row] = JSON.parse(listed.out).operations as { operationId: string }[];
  assert.ok(row);
  const inspected = await run('inspect', row.operationId.slice(0, 10), '--contexts', file);
  assert.equal(inspected.code, 0, inspected.err);
  assert.match(inspected.out, new RegExp(row.operationId));
  assert.equal((await run('get', row.operationId.slice(0, 10), '--contexts', file, '--json')).code, 0);
  assert.equal((await run('replay', '--contexts', file, '--json')).code, 0);

  assert.equal((await ctx('add', 'gone', '--store', `sqlite:${join(dir, 'gone.db')}`)).code, 0);
  const missing = await run('list', '--contexts', file, '--context', 'gone');
  assert.equal(missing.code, exitCodes.invalidInput);
  assert.match(missing.err, /no sqlite store at .*gone\.db/);
  assert.equal(existsSync(join(dir, 'gone.db')), false);
  assert.equal((await run('list', '--contexts', file, '--context', 'gone', '--store', `sqlite:${db}`)).code, 0);
});

test('a missing contexts file or context is an error naming it, and nothing is created', async () => {
  const absent = join(dir, 'absent', 'contexts.json');
  const noFile = await run('list', '--contexts', absent);
  assert.equal(noFile.code, exitCodes.invalidInput);
  assert.match(noFile.err, /no contexts file at .*absent/);
  assert.equal(existsSync(absent), false);
  const noContext = await run('inspect', 'op1234', '--contexts', file, '--context', 'prod');
  assert.equal(noContext.code, exitCodes.invalidInput);
  assert.match(noContext.err, /no context \\"prod\\".*\\"local\\"/);
  const noStore = await ctx('add', 'bare', '--description', 'no store');
  assert.equal(noStore.code, 0);
  const needs = await run('tail', '--contexts', file, '--context', 'bare');
  assert.equal(needs.code, exitCodes.invalidInput);
  assert.match(needs.err, /tail needs a store.*context \\"bare\\" has none/);
});

test('the file is validated with the field named; URLs with a password are refused; a file others may write is refused', async () => {
  const bad = join(dir, 'bad.json');
  const write = async (value: unknown, mode = 0o600) => {
    await writeFile(bad, JSON.stringify(value));
    await chmod(bad, mode);
    return run('list', '--contexts', bad);
  };
  const typo = await write({ contexts: { ops: { store: `sqlite:${db}`, passwrd: 'x' } } });
  assert.equal(typo.code, exitCodes.invalidInput);
  assert.match(typo.err, /\/contexts\/ops must NOT have additional properties \\"passwrd\\"/);
  const variable = await write({ contexts: { ops: { passwordEnv: 'not a name' } } });
  assert.match(variable.err, /\/contexts\/ops\/passwordEnv must match pattern/);
  const both = await write({ contexts: { ops: { passwordEnv: 'A', passwordFile: '/p' } } });
  assert.match(both.err, /\/contexts\/ops must NOT be valid/);
  const selected = await write({ selected: 'prod', contexts: {} });
  assert.match(selected.err, /\/selected names \\"prod\\"/);
  for (const url of [
    'jetstream:nats://127.0.0.1:4222?user=ops&pass=hunter2',
    'jetstream:nats://ops:hunter2@127.0.0.1:1',
    'esdb://admin:hunter2@127.0.0.1:2113',
  ]) {
    const leaked = await write({ contexts: { ops: { store: url } } });
    assert.equal(leaked.code, exitCodes.invalidInput);
    assert.match(leaked.err, /\/contexts\/ops\/store carries a password/);
    assert.doesNotMatch(leaked.err, /hunter2/);
  }
  for (const flag of [
    ['--nats', 'nats://ops:hunter2@127.0.0.1:4222'],
    ['--store', 'jetstream:nats://ops:hunter2@127.0.0.1:1'],
  ]) {
    const added = await ctx('add', 'leaky', ...flag);
    assert.equal(added.code, exitCodes.invalidInput, flag.join(' '));
    assert.doesNotMatch(added.err, /hunter2/);
  }
  const writable = await write({ contexts: { ops: { store: `sqlite:${db}` } } }, 0o620);
  assert.equal(writable.code, exitCodes.invalidInput);
  assert.match(writable.err, /writable by group or others \(mode 0620\)/);
});

test('a password file readable by others is refused; show says where a password is, never what it is', async () => {
  const secret = 'Pw-0123456789-not-to-be-shown';
  const passwordFile = join(dir, 'ops.password');
  await writeFile(passwordFile, `${secret}\n`);
  await chmod(passwordFile, 0o644);
  const open = await ctx('add', 'filed', '--user', 'ops', '--password-file', passwordFile);
  assert.equal(open.code, exitCodes.invalidInput);
  assert.match(open.err, /readable or writable by group or others \(mode 0644\): chmod 600/);
  await chmod(passwordFile, 0o600);
  assert.equal((await ctx('add', 'filed', '--user', 'ops', '--password-file', passwordFile)).code, 0);
  process.env.CONVOKE_TEST_CONTEXT_PASSWORD = secret;
  try {
    assert.equal((await ctx('add', 'envd', '--user', 'ops', '--password-env', 'CONVOKE_TEST_CONTEXT_PASSWORD')).code, 0);
    const outputs = [await ctx('show', 'filed'), await ctx('show', 'envd'), await ctx('show', 'envd', '--json'), await ctx('ls'), await ctx('ls', '--json')];
    for (const o of outputs) assert.doesNotMatch(o.out + o.err, new RegExp(secret));
    assert.match(outputs[0]!.out, /password file .*ops\.password: mode 0600 \(value not shown\)/);
    assert.match(outputs[1]!.out, /environment variable CONVOKE_TEST_CONTEXT_PASSWORD: set \(value not shown\)/);
    assert.doesNotMatch(await readFile(file, 'utf8'), new RegExp(secret));
  } finally {
    delete process.env.CONVOKE_TEST_CONTEXT_PASSWORD;
  }
});

test('a jetstream store logs in with the context user and password (file or variable), never in the URL', async () => {
  const secret = 'p0b9a8c7d6e5f4a3b2c1';
  const server = await startJetStreamServer({ users: [{ user: 'ops', password: secret }] });
  try {
    const passwordFile = join(dir, 'js.password');
    await writeFile(passwordFile, secret, { mode: 0o600 });
    const store = `jetstream:nats://127.0.0.1:${server.port}`;
    assert.equal((await ctx('add', 'js-file', '--store', store, '--user', 'ops', '--password-file', passwordFile)).code, 0);
    assert.equal((await ctx('add', 'js-env', '--store', store, '--user', 'ops', '--password-env', 'CONVOKE_TEST_JS_PASSWORD')).code, 0);
    const viaFile = await run('list', '--contexts', file, '--context', 'js-file', '--json');
    assert.equal(viaFile.code, 0, viaFile.err);
    assert.deepEqual(JSON.parse(viaFile.out).operations, []);
    const unset = await run('list', '--contexts', file, '--context', 'js-env');
    assert.equal(unset.code, exitCodes.invalidInput);
    assert.match(unset.err, /environment variable CONVOKE_TEST_JS_PASSWORD .* is not set/);
    process.env.CONVOKE_TEST_JS_PASSWORD = secret;
    try {
      assert.equal((await run('list', '--contexts', file, '--context', 'js-env', '--json')).code, 0);
    } finally {
      delete process.env.CONVOKE_TEST_JS_PASSWORD;
    }
    const noPassword = await run('list', '--contexts', file, '--store', store);
    assert.notEqual(noPassword.code, 0);
  } finally {
    await server.dispose();
  }
});

test('which file and which context: the flag, then the environment, then the XDG default; a flag wins over the context', async () => {
  assert.deepEqual(contextsFilePath(undefined, { XDG_CONFIG_HOME: '/xdg', HOME: '/home/u' }), { path: '/xdg/convoke/contexts.json', named: false });
  assert.deepEqual(contextsFilePath(undefined, { HOME: '/home/u' }), { path: '/home/u/.config/convoke/contexts.json', named: false });
  assert.deepEqual(contextsFilePath(undefined, { CONVOKE_CONTEXTS: '/e.json', XDG_CONFIG_HOME: '/xdg' }), { path: '/e.json', named: true });
  assert.deepEqual(contextsFilePath('/f.json', { CONVOKE_CONTEXTS: '/e.json' }), { path: '/f.json', named: true });
  const empty = join(dir, 'empty-config');
  assert.equal((await chooseContext({}, { XDG_CONFIG_HOME: empty })).context, undefined, 'no default file: no context, no error');
  await assert.rejects(chooseContext({ context: 'x' }, { XDG_CONFIG_HOME: empty }), /no contexts file/);
  assert.equal((await chooseContext({}, { CONVOKE_CONTEXTS: file, CONVOKE_CONTEXT: 'filed' })).name, 'filed');
  assert.equal((await chooseContext({ context: 'envd' }, { CONVOKE_CONTEXTS: file, CONVOKE_CONTEXT: 'filed' })).name, 'envd');
  const connection = await resolveConnection({ contexts: file, context: 'envd', user: 'someone-else', passwordEnv: 'OTHER' }, {});
  assert.equal(connection.user, 'someone-else');
  assert.deepEqual(connection.login, { kind: 'env', name: 'OTHER' });
  assert.deepEqual(connection.storeAuth, { user: 'ops', login: { kind: 'env', name: 'CONVOKE_TEST_CONTEXT_PASSWORD' } });
  for (const url of ['nats://a:b@h:4222', 'nats://h:4222,nats://a:b@h2:4222', 'jetstream:nats://h:4222?password=x', 'jetstream:nats://a:b@h:4222'])
    assert.ok(carriesPassword(url), url);
  for (const url of ['nats://a@h:4222', 'jetstream:nats://h:4222?user=ops&stream=S', 'sqlite:/p:q@r.db']) assert.ok(!carriesPassword(url), url);
});

/** A contexts file of its own for the commands that start something (serve, peer, demo, workflow run). */
async function startersFile(): Promise<string> {
  const path = join(dir, 'starters.json');
  const contexts = {
    everything: { store: `sqlite:${db}`, nats: 'nats://127.0.0.1:1', user: 'ops', principal: 'ops', passwordEnv: 'CONVOKE_TEST_UNSET' },
    demostore: { store: `sqlite:${join(dir, 'demo-from-context.db')}` },
    peerish: { nats: 'nats://127.0.0.1:1', user: 'alfa', passwordEnv: 'CONVOKE_TEST_UNSET' },
    principal: { nats: 'nats://127.0.0.1:1', principal: 'billing' },
    remote: { endpoint: 'http://127.0.0.1:1', tokenEnv: 'CONVOKE_TEST_UNSET', store: `sqlite:${db}` },
    bare: { description: 'nothing to connect with' },
  };
  await writeFile(path, JSON.stringify({ selected: 'everything', contexts }), { mode: 0o600 });
  return path;
}

test('serve, peer, demo and workflow run take only the context --context names, never the selected one or $CONVOKE_CONTEXT', async () => {
  const starters = await startersFile();
  const before = JSON.parse((await run('list', '--store', `sqlite:${db}`, '--json')).out).operations.length as number;
  process.env.CONVOKE_CONTEXTS = starters;
  process.env.CONVOKE_CONTEXT = 'everything';
  try {
    const demo = await run('demo', '--json');
    assert.equal(demo.code, 0, demo.err);
    assert.equal(
      JSON.parse((await run('list', '--store', `sqlite:${db}`, '--json')).out).operations.length,
      before,
      "the selected context's store got nothing",
    );
    const unnamed = await run('demo', '--contexts', starters, '--context', 'demostore', '--json');
    assert.equal(unnamed.code, 0, unnamed.err);
    const written = await run('list', '--store', `sqlite:${join(dir, 'demo-from-context.db')}`, '--json');
    assert.equal(JSON.parse(written.out).operations.length, 1, "the named context's store holds the demo");
  } finally {
    delete process.env.CONVOKE_CONTEXT;
    delete process.env.CONVOKE_CONTEXTS;
  }
  const serveConfig = join(dir, 'serve-memory.json');
  await writeFile(serveConfig, JSON.stringify(minimalServeConfig({ bundles: [reviewBundle] })));
  const fileOnly = await run('serve', '--config', serveConfig, '--contexts', starters);
  assert.equal(fileOnly.code, exitCodes.invalidInput);
  assert.match(fileOnly.err, /serve takes a context only by name: give --context NAME/);
});

test('a context field a command cannot use is an error naming it, never ignored', async () => {
  const starters = await startersFile();
  const peerConfig = join(dir, 'peer.json');
  await writeFile(
    peerConfig,
    JSON.stringify({
      peerId: 'alfa',
      namespace: 'lab.v1.x',
      nats: { servers: 'nats://127.0.0.1:1' },
      durable: false,
      interactions: { review: { result: {} } },
    }),
  );
  const serveConfig = join(dir, 'serve-memory.json');
  await writeFile(serveConfig, JSON.stringify(minimalServeConfig({ bundles: [reviewBundle] })));
  const workflow = join(dir, 'noop.yaml');
  await writeFile(workflow, "document: { dsl: '1.0.3', namespace: test, name: noop, version: '1.0.0' }\ndo:\n  - done: { set: { ok: true } }\n");
  const refused: [string[], RegExp][] = [
    [['demo', '--context', 'everything'], /context \\"everything\\" has nats, principal, which demo cannot use/],
    [['demo', '--context', 'bare'], /demo --context writes the context's store: context \\"bare\\" has none/],
    [['peer', '--config', peerConfig, '--context', 'everything'], /has store, principal, which peer cannot use/],
    [['peer', '--config', peerConfig, '--context', 'remote'], /has store, endpoint, tokenEnv, which peer cannot use/],
    [['workflow', 'run', workflow, '--context', 'peerish'], /has nats, which workflow run cannot use/],
    [['serve', '--config', serveConfig, '--context', 'principal'], /has principal, which serve cannot use/],
    [['serve', '--config', serveConfig, '--context', 'peerish'], /gives nats, user, a password, but the config's transport is memory/],
    [['list', '--context', 'remote'], /has endpoint, tokenEnv, which list cannot use/],
    [['get', 'op1234', '--context', 'remote'], /has endpoint, tokenEnv, which get cannot use/],
    [['workflow', 'start', reviewBundle, '--workflow', 'w', '--key', 'k', '--context', 'remote'], /has endpoint, tokenEnv, which workflow start cannot use/],
  ];
  for (const [args, why] of refused) {
    const { code, err } = await run(...args, '--contexts', starters);
    assert.equal(code, exitCodes.invalidInput, `${args.join(' ')} → ${code}: ${err}`);
    assert.match(err, why, args.join(' '));
  }
  // Without a context, a missing login is named where it would have come from.
  const noLogin = await run('peer', '--config', peerConfig);
  assert.equal(noLogin.code, exitCodes.invalidInput);
  assert.match(noLogin.err, /nats.passwordEnv or nats.credsFile is needed \(or give convoke peer --creds, or a context with a password or credentials\)/);
  const workflowRun = await run('workflow', 'run', workflow, '--contexts', starters, '--context', 'demostore', '--json');
  assert.equal(workflowRun.code, 0, workflowRun.err);
  assert.equal(JSON.parse(workflowRun.out).status, 'completed');
});

test('the NATS clients share one set of options: workflow start and get take a context and say what it lacks, as invoke does', async () => {
  const starters = await startersFile();
  for (const command of [
    ['invoke', '--contract', reviewBundle, '--interaction', 'review', '--key', 'k', '--input', '{}'],
    ['workflow', 'start', reviewBundle, '--workflow', 'w', '--key', 'k'],
    ['workflow', 'get', `wf${'0'.repeat(64)}`],
  ]) {
    const named = command[0] === 'workflow' ? `workflow ${command[1]}` : command[0];
    const lacking = await run(...command, '--contexts', starters, '--context', 'bare');
    assert.equal(lacking.code, exitCodes.invalidInput, lacking.err);
    assert.match(lacking.err, new RegExp(`${named} needs --nats and --user, or a context with nats and user \\(context \\\\"bare\\\\" has none\\)`));
    // The selected context's servers are used: nothing listens there, so the NATS connection is unavailable.
    process.env.CONVOKE_TEST_UNSET = 'not-a-real-password';
    try {
      const unreachable = await run(...command, '--contexts', starters, '--context', 'peerish');
      assert.equal(unreachable.code, exitCodes.unavailable, unreachable.err);
      assert.match(unreachable.err, /127\.0\.0\.1:1/);
    } finally {
      delete process.env.CONVOKE_TEST_UNSET;
    }
  }
});

test('a context holds a credentials file or a token file only if its owner alone may read it; show never prints what is in them', async () => {
  const creds = join(dir, 'user.creds');
  const { formatCreds } = await import('../support/nats-jwt.js');
  const { nkeys } = await import('@nats-io/transport-node');
  const user = nkeys.createUser();
  // A syntactically complete JWT: the server would judge its signature; the file check reads its claims.
  const claims = Buffer.from(JSON.stringify({ sub: user.getPublicKey(), name: 'ops', nats: { type: 'user' } })).toString('base64url');
  await writeFile(creds, formatCreds(`eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.${claims}.c2ln`, user), { mode: 0o644 });
  const open = await ctx('add', 'jwt', '--nats', 'nats://127.0.0.1:1', '--creds', creds);
  assert.equal(open.code, exitCodes.invalidInput);
  assert.match(open.err, /credentials file .*user\.creds is readable or writable by group or others \(mode 0644\)/);
  await chmod(creds, 0o600);
  assert.equal((await ctx('add', 'jwt', '--nats', 'nats://127.0.0.1:1', '--creds', creds)).code, 0);
  const both = await ctx('add', 'two', '--creds', creds, '--password-env', 'X');
  assert.equal(both.code, exitCodes.invalidInput);
  assert.match(both.err, /give one of --password-env, --password-file and --creds/);
  const seed = new TextDecoder().decode(user.getSeed());
  const shown = [await ctx('show', 'jwt'), await ctx('show', 'jwt', '--json'), await ctx('ls')];
  for (const o of shown) assert.doesNotMatch(o.out + o.err, new RegExp(seed));
  assert.match(shown[0]!.out, /credentials file .*user\.creds: mode 0600 \(value not shown\)/);

  const token = join(dir, 'endpoint.token');
  await writeFile(token, 'a-bearer-token\n', { mode: 0o640 });
  const readable = await ctx('add', 'wf', '--endpoint', 'http://127.0.0.1:1', '--token-file', token);
  assert.equal(readable.code, exitCodes.invalidInput);
  assert.match(readable.err, /token file .*endpoint\.token is readable or writable by group or others \(mode 0640\)/);
  const inUrl = await ctx('add', 'wf', '--endpoint', 'http://u:a-bearer-token@127.0.0.1:1');
  assert.equal(inUrl.code, exitCodes.invalidInput);
  assert.match(inUrl.err, /endpoint carries a credential: .* tokenEnv or tokenFile/);
  const notCreds = join(dir, 'wrong.creds');
  await writeFile(
    notCreds,
    `-----BEGIN NATS USER JWT-----\nnot.a.jwt!\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`,
    { mode: 0o600 },
  );
  const malformed = await ctx('add', 'bad', '--creds', notCreds);
  assert.equal(malformed.code, exitCodes.invalidInput);
  assert.match(malformed.err, /the JWT block is not a JWT/);
  assert.doesNotMatch(malformed.err, new RegExp(seed));
  const schema = join(dir, 'creds-and-password.json');
  await writeFile(schema, JSON.stringify({ contexts: { ops: { creds, passwordEnv: 'X' } } }), { mode: 0o600 });
  assert.match((await run('list', '--contexts', schema)).err, /\/contexts\/ops must NOT be valid/);
});
