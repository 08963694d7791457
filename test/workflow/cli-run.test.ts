/** `convoke workflow run`: output and exit codes, on memory and on a SQLite store it resumes from. */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { main } from '../../src/cli/main.js';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { captureIo } from '../support/cli-io.js';

const head = `document: { dsl: '1.0.3', namespace: test, name: cli, version: '1.0.0' }\n`;

test('convoke workflow run prints the output (0), a fault (11), a refusal (7); the same store and key find the finished instance', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-'));
  try {
    const greet = join(dir, 'greet.yaml');
    await writeFile(greet, `${head}do:\n  - greet:\n      set:\n        greeting: '\${ "Hello \\(.name)!" }'\n`);
    const io = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', greet, '--input', '{"name":"Ada"}'], io), exitCodes.ok, io.err());
    assert.deepEqual(JSON.parse(io.out()), { greeting: 'Hello Ada!' });

    const store = `sqlite:${join(dir, 'wf.db')}`;
    const first = captureIo();
    assert.equal(
      await main(['node', 'convoke', 'workflow', 'run', greet, '--input', '{"name":"Bo"}', '--store', store, '--json'], first),
      exitCodes.ok,
      first.err(),
    );
    const again = captureIo();
    assert.equal(
      await main(['node', 'convoke', 'workflow', 'run', greet, '--input', '{"name":"Bo"}', '--store', store, '--json'], again),
      exitCodes.ok,
      again.err(),
    );
    assert.equal(JSON.parse(again.out()).instanceId, JSON.parse(first.out()).instanceId);
    const conflicting = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', greet, '--input', '{"name":"Cy"}', '--store', store], conflicting), exitCodes.conflict);

    const failing = join(dir, 'raise.yaml');
    await writeFile(failing, `${head}do:\n  - no:\n      raise:\n        error: { type: https://example.com/errors/no, status: 409, title: No }\n`);
    const faulted = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', failing], faulted), exitCodes.outcomeNotSuccess);
    assert.equal(JSON.parse(faulted.err()).error.instance, '/do/0/no');

    const shell = join(dir, 'shell.yaml');
    await writeFile(shell, `${head}do:\n  - sh:\n      run: { shell: { command: 'rm -rf /' } }\n`);
    const refused = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', shell], refused), exitCodes.unsupported);
    assert.match(refused.err(), /\/do\/0\/sh: run \(shell\) is not supported/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** order.yaml runs shop/double as its child; double.yaml and triple.yaml are workflows it may be given beside it. */
async function shopDocuments(dir: string): Promise<{ order: string; double: string; triple: string }> {
  const order = join(dir, 'order.yaml');
  const double = join(dir, 'double.yaml');
  const triple = join(dir, 'triple.yaml');
  await writeFile(
    order,
    `document: { dsl: '1.0.3', namespace: shop, name: order, version: '1.0.0' }\ndo:\n` +
      `  - price:\n      run:\n        workflow: { namespace: shop, name: double, version: '1.0.0', input: { n: '\${ .quantity }' } }\n` +
      `  - total:\n      set: { total: '\${ .doubled + 1 }' }\n`,
  );
  await writeFile(
    double,
    `document: { dsl: '1.0.3', namespace: shop, name: double, version: '1.0.0' }\ndo:\n  - twice:\n      set: { doubled: '\${ .n * 2 }' }\n`,
  );
  await writeFile(
    triple,
    `document: { dsl: '1.0.3', namespace: shop, name: triple, version: '1.0.0' }\ndo:\n  - thrice:\n      set: { tripled: '\${ .n * 3 }' }\n`,
  );

  return { order, double, triple };
}

test('convoke workflow run --with: a run: workflow task runs another document by its namespace, name and version as a child instance', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-with-'));
  try {
    const { order, double, triple } = await shopDocuments(dir);
    const store = `sqlite:${join(dir, 'wf.db')}`;
    const run = captureIo();
    const args = ['node', 'convoke', 'workflow', 'run', order, '--with', triple, '--with', double, '--input', '{"quantity":3}', '--store', store, '--json'];
    assert.equal(await main(args, run), exitCodes.ok, run.err());
    const shown = JSON.parse(run.out()) as {
      instanceId: string;
      output: unknown;
      childInstances: { at: string; instanceId: string; workflow: string; status: string }[];
    };
    assert.deepEqual(shown.output, { total: 7 });
    assert.equal(shown.childInstances.length, 1);
    assert.deepEqual(
      { ...shown.childInstances[0], instanceId: '' },
      { at: '/do/0/price', instanceId: '', workflow: 'double', status: 'completed', disposition: null },
    );

    // The child is an instance of its own, naming its parent.
    const child = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'inspect', shown.childInstances[0]!.instanceId, '--store', store], child), 0, child.err());
    assert.match(child.out(), new RegExp(`parent ${shown.instanceId} at /do/0/price`));

    // The same documents and key find the same instance; other documents under the key are another bundle, another instance.
    const again = captureIo();
    assert.equal(await main(args, again), exitCodes.ok, again.err());
    assert.equal((JSON.parse(again.out()) as { instanceId: string }).instanceId, shown.instanceId);
    const other = captureIo();
    assert.equal(
      await main(['node', 'convoke', 'workflow', 'run', order, '--with', double, '--input', '{"quantity":3}', '--store', store, '--json'], other),
      exitCodes.ok,
    );
    assert.notEqual((JSON.parse(other.out()) as { instanceId: string }).instanceId, shown.instanceId);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("convoke workflow run --with: a --with document's run: workflow may name FILE's own workflow, which a bundle would pin beside it too", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-back-'));
  try {
    // countdown runs relay while n > 0; relay runs countdown with n − 1: FILE named by the document it gave.
    const countdown = join(dir, 'countdown.yaml');
    await writeFile(
      countdown,
      `document: { dsl: '1.0.3', namespace: test, name: countdown, version: '1.0.0' }
do:
  - more:
      if: \${ .n > 0 }
      run:
        workflow: { namespace: test, name: relay, version: '1.0.0', input: { n: '\${ .n }' } }
  - done:
      set: { reached: true }
`,
    );
    const relay = join(dir, 'relay.yaml');
    await writeFile(
      relay,
      `document: { dsl: '1.0.3', namespace: test, name: relay, version: '1.0.0' }
do:
  - back:
      run:
        workflow: { namespace: test, name: countdown, version: '1.0.0', input: { n: '\${ .n - 1 }' } }
`,
    );
    const run = captureIo();
    const args = ['node', 'convoke', 'workflow', 'run', countdown, '--with', relay, '--input', '{"n":2}', '--wait-ms', '15000', '--json'];
    assert.equal(await main(args, run), exitCodes.ok, run.err());
    const shown = JSON.parse(run.out()) as { status: string; output: unknown };
    assert.equal(shown.status, 'completed');
    assert.deepEqual(shown.output, { reached: true });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('convoke workflow run --with refuses, before anything runs, a reference to no given document, the same workflow twice, and a given document that is not valid', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-with-'));
  try {
    const { order, double } = await shopDocuments(dir);
    // Without the child's document the reference resolves to nothing: refused before anything runs.
    const alone = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', order, '--input', '{"quantity":3}'], alone), exitCodes.unsupported, alone.out());
    assert.match(alone.err(), /\/do\/0\/price\/run\/workflow: the workflow shop\/double@1\.0\.0 is not pinned beside this one/);

    // The same workflow twice, and a --with document that is not a valid workflow, are refused naming the file.
    const twice = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', order, '--with', double, '--with', double], twice), exitCodes.invalidInput);
    assert.match(twice.err(), /--with .*double\.yaml: shop\/double\/1\.0\.0 is also --with/);
    const broken = join(dir, 'broken.yaml');
    await writeFile(
      broken,
      `document: { dsl: '1.0.3', namespace: shop, name: broken, version: '1.0.0' }\ndo:\n  - nowhere:\n      run:\n        workflow: { namespace: shop, name: missing, version: '1.0.0' }\n`,
    );
    const refused = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', order, '--with', double, '--with', broken], refused), exitCodes.unsupported);
    assert.match(refused.err(), /--with .*broken\.yaml: \/do\/0\/nowhere\/run\/workflow/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("convoke workflow run refuses a document the DSL 1.0.3 schema refuses (2) as a bundle's check does, naming the file and the JSON Pointer, before the store is opened; a --with document too", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-schema-'));
  try {
    const db = join(dir, 'wf.db');
    const run = async (args: string[]) => {
      const io = captureIo();
      const code = await main(['node', 'convoke', 'workflow', 'run', ...args, '--store', `sqlite:${db}`], io);
      return { code, error: io.err() === '' ? undefined : (JSON.parse(io.err()) as { kind: string; description: string }), out: io.out() };
    };
    // No namespace and no version: the executor's own check reads neither, the schema requires both.
    const nameless = join(dir, 'nons.yaml');
    await writeFile(nameless, `document: { dsl: '1.0.3', name: nons }\ndo:\n  - a:\n      set: { x: 1 }\n`);
    const refused = await run([nameless]);
    assert.equal(refused.code, exitCodes.invalidInput, JSON.stringify(refused));
    assert.equal(refused.error?.kind, 'invalid-input');
    assert.equal(refused.error?.description, `${nameless}: not a valid Serverless Workflow 1.0.3 document: /document must have required property 'namespace'`);
    assert.equal(refused.out, '');
    assert.equal(existsSync(db), false, 'nothing was stored: the store was never opened');

    // A --with document the schema refuses (a task's metadata must be an object) is named by its flag.
    const { order, double } = await shopDocuments(dir);
    const odd = join(dir, 'odd.yaml');
    await writeFile(odd, `document: { dsl: '1.0.3', namespace: shop, name: odd, version: '1.0.0' }\ndo:\n  - a:\n      set: { x: 1 }\n      metadata: 5\n`);
    const pinned = await run([order, '--with', double, '--with', odd, '--input', '{"quantity":3}']);
    assert.equal(pinned.code, exitCodes.invalidInput, JSON.stringify(pinned));
    assert.equal(pinned.error?.description, `--with ${odd}: not a valid Serverless Workflow 1.0.3 document: /do/0/a/metadata must be object`);
    assert.equal(existsSync(db), false, 'nothing was stored: the store was never opened');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("convoke workflow run refuses an expression jq does not compile (2) naming its pointer and jq's message, before the store is opened; a runtime error is not one", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-jq-'));
  try {
    const db = join(dir, 'wf.db');
    const run = async (name: string, body: string, more: string[] = []) => {
      const file = join(dir, name);
      await writeFile(file, `${head}do:\n${body}`);
      const io = captureIo();
      const code = await main(['node', 'convoke', 'workflow', 'run', file, ...more, '--store', `sqlite:${db}`], io);
      return { code, error: io.err() === '' ? undefined : (JSON.parse(io.err()) as { kind: string; description: string; status?: string }), out: io.out() };
    };
    // Found before anything runs: the instance would otherwise fault (11) when it reaches the task.
    const syntax = await run('syntax.yaml', `  - a:\n      set: { x: '\${ .a | }' }\n`);
    assert.equal(syntax.code, exitCodes.invalidInput, JSON.stringify(syntax));
    assert.equal(syntax.error?.kind, 'invalid-input');
    assert.equal(syntax.error?.description, '/do/0/a/set/x: not a valid jq expression: syntax error: unexpected end of the expression');
    assert.equal(existsSync(db), false, 'nothing was stored: the store was never opened');
    // A field the DSL reads as bare jq, a function and a variable jq does not know, each at its own line and column.
    const bare = await run('bare.yaml', `  - a:\n      set: { x: 1 }\n  - b:\n      if: '.x == 1 and'\n      set: { y: 2 }\n`);
    assert.equal(bare.error?.description, '/do/1/b/if: not a valid jq expression: syntax error: unexpected end of the expression', JSON.stringify(bare));
    const undefinedFunction = await run('function.yaml', `  - a:\n      set: { x: '\${ .a | frobnicate(1) }' }\n`);
    assert.equal(undefinedFunction.error?.description, '/do/0/a/set/x: not a valid jq expression: frobnicate/1 is not defined at line 1, column 7');
    const undefinedVariable = await run('variable.yaml', `  - a:\n      output: { as: '\${ $outptu }' }\n      set: { x: 1 }\n`);
    assert.equal(undefinedVariable.error?.description, '/do/0/a/output/as: not a valid jq expression: $outptu is not defined at line 1, column 2');
    assert.equal(existsSync(db), false, 'nothing was stored: the store was never opened');

    // Every variable the executor binds compiles: its own, a for's and a catch's names (the defaults and chosen ones).
    const bound = await run(
      'bound.yaml',
      `  - each:\n      for: { each: pet, at: n, in: '\${ [1, 2] }' }\n      do:\n        - add:\n            set: { v: '\${ [$pet, $n, $input, $context, $workflow.id != null, $runtime] | length }' }\n` +
        `  - guarded:\n      try:\n        - fail:\n            raise: { error: { type: https://example.com/e, status: 400 } }\n` +
        `      catch: { as: oops, when: '\${ $oops.status == 400 }', do: [ { note: { set: { status: '\${ $oops.status }' } } } ] }\n`,
    );
    assert.equal(bound.code, exitCodes.ok, JSON.stringify(bound));
    assert.deepEqual(JSON.parse(bound.out), { status: 400 });

    // A runtime error is the instance's fault, as before: jq compiled it.
    const runtime = await run('runtime.yaml', `  - a:\n      set: { x: '\${ error("boom") }' }\n`, ['--key', 'runtime']);
    assert.equal(runtime.code, exitCodes.outcomeNotSuccess, JSON.stringify(runtime));
    assert.equal(runtime.error?.status, 'faulted');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("convoke workflow run --running-bound: past the principal's running instances on the store nothing starts (4, naming the flag); an instance that exists is still answered", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-bound-'));
  try {
    const waiting = join(dir, 'wait.yaml');
    await writeFile(waiting, `${head}do:\n  - hold:\n      wait: { hours: 1 }\n`);
    const store = `sqlite:${join(dir, 'wf.db')}`;
    const run = async (key: string, ...flags: string[]) => {
      const io = captureIo();
      const code = await main(['node', 'convoke', 'workflow', 'run', waiting, '--store', store, '--key', key, '--wait-ms', '0', ...flags], io);
      return { code, err: io.err() };
    };
    // Left running (10): each holds a place under the bound.
    assert.equal((await run('a')).code, exitCodes.pending);
    assert.equal((await run('b', '--running-bound', '2')).code, exitCodes.pending);
    const refused = await run('c', '--running-bound', '2');
    assert.equal(refused.code, exitCodes.unavailable, refused.err);
    assert.match(refused.err, /holds 2 running workflow instances, its bound \(2, --running-bound\): nothing was started/);
    // At the bound, a run of an instance that exists is answered with it (it creates nothing).
    assert.equal((await run('a', '--running-bound', '2')).code, exitCodes.pending);
    // Nothing of the refused start was stored: with room, it starts as new.
    assert.equal((await run('c', '--running-bound', '3')).code, exitCodes.pending);
    const list = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store, '--json'], list), exitCodes.ok, list.err());
    assert.equal(JSON.parse(list.out()).instances.length, 3);
    for (const bound of ['0', '10001']) {
      const outOfRange = await run('d', '--running-bound', bound);
      assert.equal(outOfRange.code, exitCodes.invalidInput, outOfRange.err);
      assert.match(outOfRange.err, new RegExp(`bounded by 1 to 10000, not ${bound}`));
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('convoke workflow run --store: the help names every store it opens, and it opens a jetstream: store as it does sqlite: (an unreachable one is 4, not a refused URL)', async () => {
  const help = captureIo();
  assert.equal(await main(['node', 'convoke', 'workflow', 'run', '--help'], help), exitCodes.ok, help.err());
  const store = /--store <url>\s+([\s\S]*?)\n\s+--key/.exec(help.out())?.[1]?.replace(/\s+/g, ' ') ?? '';
  for (const scheme of ['memory:', 'sqlite:PATH', 'jetstream:nats://HOST:PORT', 'esdb://'])
    assert.ok(store.includes(scheme), `--store names ${scheme}: ${store}`);
  assert.match(store, /jetstream: or esdb: store logs in with the --context's login/);

  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-store-'));
  try {
    const file = join(dir, 'wf.yaml');
    await writeFile(file, `${head}do:\n  - add:\n      set: { n: 1 }\n`);
    const run = async (url: string) => {
      const io = captureIo();
      return { code: await main(['node', 'convoke', 'workflow', 'run', file, '--store', url], io), err: io.err() };
    };
    const unreachable = await run('jetstream:nats://127.0.0.1:1');
    assert.equal(unreachable.code, exitCodes.unavailable, unreachable.err);
    assert.match(unreachable.err, /"kind":"unavailable","description":"jetstream: /);
    const unknown = await run('nowhere:x');
    assert.equal(unknown.code, exitCodes.invalidInput, unknown.err);
    assert.match(unknown.err, /use memory:, sqlite:PATH, jetstream:nats:\/\/host:port or esdb:\/\/host:port/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('convoke workflow run, start and get: a number option that is not one is exit 2 naming the option and its value', async () => {
  const file = join(tmpdir(), 'never-read.yaml');
  const cases = [
    ['workflow', 'run', file, '--wait-ms', 'soon'],
    ['workflow', 'run', file, '--seed', '1.5'],
    ['workflow', 'run', file, '--running-bound', '-1'],
    ['workflow', 'start', file, '--workflow', 'w', '--key', 'k', '--wait-ms', '10s'],
    ['workflow', 'get', `wf${'0'.repeat(64)}`, '--wait-ms', 'ten'],
  ];
  for (const args of cases) {
    const io = captureIo();
    assert.equal(await main(['node', 'convoke', ...args], io), exitCodes.invalidInput, io.err());
    const [option, value] = args.slice(-2) as [string, string];
    assert.ok(io.err().includes(option) && io.err().includes(value), `convoke ${args.join(' ')}: ${io.err()}`);
    assert.equal(io.err().trim().split('\n').length, 1, io.err());
    assert.equal(io.out(), '');
  }
});

test('convoke workflow run refuses a document.dsl other than 1.0.3 as unsupported (7) naming what it read, a YAML number (dsl: 1.0) too; a missing one or name is 2 naming it', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-dsl-'));
  try {
    const run = async (header: string) => {
      const file = join(dir, 'wf.yaml');
      await writeFile(file, `document: ${header}\ndo:\n  - add:\n      set: { n: 1 }\n`);
      const io = captureIo();
      return { code: await main(['node', 'convoke', 'workflow', 'run', file], io), err: io.err() };
    };
    for (const [dsl, shown] of [
      ["'1.0.0'", '"1.0.0"'],
      ['1.0', '1'],
      ['0.8', '0.8'],
    ] as const) {
      const refused = await run(`{ dsl: ${dsl}, namespace: test, name: cli, version: '1.0.0' }`);
      assert.equal(refused.code, exitCodes.unsupported, refused.err);
      assert.ok(JSON.parse(refused.err).description.includes(`document.dsl is ${shown}`), refused.err);
    }
    const noDsl = await run(`{ namespace: test, name: cli, version: '1.0.0' }`);
    assert.equal(noDsl.code, exitCodes.invalidInput, noDsl.err);
    assert.match(noDsl.err, /needs document\.dsl/);
    const noName = await run(`{ dsl: '1.0.3', namespace: test, version: '1.0.0' }`);
    assert.equal(noName.code, exitCodes.invalidInput, noName.err);
    assert.match(noName.err, /needs document\.name/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('convoke workflow run given a bundle instead of a workflow document says so in one line, and names workflow lower', async () => {
  const bundle = join(fileURLToPath(new URL('../../../', import.meta.url)), 'examples', 'review-publish.bundle.yaml');
  const io = captureIo();
  assert.equal(await main(['node', 'convoke', 'workflow', 'run', bundle], io), exitCodes.invalidInput, io.err());
  assert.equal(io.err().trim().split('\n').length, 1, io.err());
  const { description } = JSON.parse(io.err()) as { description: string };
  assert.match(description, /review-publish\.bundle\.yaml is a contract bundle, not a workflow document/);
  assert.match(description, /convoke workflow lower/);
  assert.equal(io.out(), '');
});

test('convoke workflow run --key is 1 to 256 bytes of UTF-8, as a facade start’s and an operation’s key: empty or longer is 2, nothing recorded', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-cli-'));
  try {
    const greet = join(dir, 'greet.yaml');
    await writeFile(greet, `${head}do:\n  - greet:\n      set: { done: true }\n`);
    const store = `sqlite:${join(dir, 'wf.db')}`;
    // 64 four-byte characters are 256 bytes; one more byte is past the bound in 65 characters, far below 256.
    const fits = '\u{1F600}'.repeat(64);
    for (const key of ['', `${fits}x`, 'é'.repeat(129)]) {
      const io = captureIo();
      assert.equal(await main(['node', 'convoke', 'workflow', 'run', greet, '--key', key, '--store', store], io), exitCodes.invalidInput, io.err());
      assert.match(io.err(), /invocationKey must be 1\.\.256 bytes \(got \d+\)/);
    }
    const listed = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'list', '--store', store, '--json'], listed), exitCodes.ok, listed.err());
    assert.deepEqual(JSON.parse(listed.out()).instances, [], 'nothing was recorded');
    const io = captureIo();
    assert.equal(await main(['node', 'convoke', 'workflow', 'run', greet, '--key', fits, '--store', store], io), exitCodes.ok, io.err());
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
