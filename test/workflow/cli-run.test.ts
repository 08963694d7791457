/** `convoke workflow run`: output and exit codes, on memory and on a SQLite store it resumes from. */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
