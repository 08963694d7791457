/**
 * `convoke workflow run`'s egress flags over the built binary: without them calls go anywhere (one
 * user, their own machine: today's behaviour); with --http-allow only the origins listed, and
 * private addresses only with --http-private; a bad entry, or --http-private alone, is invalid
 * input before anything runs.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { repoRoot } from '../support/assertions.js';

/** The CLI as a child process, run asynchronously: the stub answers in this process meanwhile. */
function convoke(args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(repoRoot(), 'bin', 'convoke.js'), ...args], { encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ status: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}

test('workflow run: no flags, calls go anywhere; --http-allow restricts to its origins, private ones with --http-private', async () => {
  let reached = 0;
  const service = createServer((_request, response) => {
    reached++;
    response.setHeader('content-type', 'application/json');
    response.end('{"ok":true}');
  });
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
  const dir = await mkdtemp(join(tmpdir(), 'convoke-egress-cli-'));
  try {
    const file = join(dir, 'callback.yaml');
    await writeFile(
      file,
      `document: { dsl: '1.0.3', namespace: test, name: callback, version: '1.0.0' }
do:
  - notify:
      call: http
      with: { method: get, endpoint: '\${ .callbackUrl }' }
`,
    );
    const run = (...flags: string[]) => convoke(['workflow', 'run', file, '--input', JSON.stringify({ callbackUrl: `${origin}/x` }), ...flags]);
    const open = await run();
    assert.equal(open.status, exitCodes.ok, open.stderr);
    assert.deepEqual(JSON.parse(open.stdout), { ok: true });
    const allowedPrivate = await run('--http-allow', origin, '--http-private');
    assert.equal(allowedPrivate.status, exitCodes.ok, allowedPrivate.stderr);
    assert.equal(reached, 2);
    const listedNotPrivate = await run('--http-allow', origin);
    assert.equal(listedNotPrivate.status, exitCodes.outcomeNotSuccess, listedNotPrivate.stderr);
    assert.match(listedNotPrivate.stderr, /errors\/authorization.*"status":403.*privateNetworks is off/);
    const unlisted = await run('--http-allow', 'https://api.example.com', '--http-private');
    assert.equal(unlisted.status, exitCodes.outcomeNotSuccess, unlisted.stderr);
    assert.match(unlisted.stderr, /not in the egress policy's allow list/);
    assert.equal(reached, 2, 'the refused calls never reached the service');
    const bad = await run('--http-allow', 'https://api.example.com/v1');
    assert.equal(bad.status, exitCodes.invalidInput, bad.stderr);
    assert.match(bad.stderr, /--http-allow\[0\] \\"https:\/\/api\.example\.com\/v1\\": an entry is an origin/);
    const alone = await run('--http-private');
    assert.equal(alone.status, exitCodes.invalidInput, alone.stderr);
    assert.match(alone.stderr, /--http-private goes with --http-allow/);
  } finally {
    await rm(dir, { recursive: true, force: true });
    await new Promise((resolve) => service.close(resolve));
  }
});
