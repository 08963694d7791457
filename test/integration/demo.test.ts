/**
 * `convoke demo` scenarios that show a retry run on a durable store: memory mode has one attempt
 * (spec: "Memory mode keeps the same identities/completion rules but has one attempt"), so
 * without --store they get a temporary SQLite file, removed afterwards, and --store memory: is
 * refused rather than shown without its retry.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { demoCommand } from '../../src/cli/commands/demo.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { captureIo } from '../support/cli-io.js';

/**
 * The demo makes its store under os.tmpdir(), which reads TMPDIR at each call: pointed at a
 * directory of this test's own, what is left there is the demo's alone (a demo run elsewhere on
 * the machine at the same time cannot pass for it).
 */
async function inOwnTmpdir<T>(run: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-demo-test-'));
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    return await run(dir);
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
    await rm(dir, { recursive: true, force: true });
  }
}

test('a demo scenario that shows a retry runs on a temporary SQLite store, removed afterwards, and shows attempt 2 with fence 2', async () => {
  await inOwnTmpdir(async (dir) => {
    const io = captureIo();
    assert.equal(await demoCommand({ scenario: 'lease-expiry', peers: 3, quorum: 3, json: true, seed: 1, approveRate: 1 }, io), 0);
    const { result } = JSON.parse(io.out()) as { result: { branches: { branchId: string; attempt: number; fence: number; status: string }[] } };
    const charlie = result.branches.find((b) => b.branchId === 'charlie');
    assert.ok(charlie && charlie.attempt >= 2 && charlie.fence === charlie.attempt && charlie.status === 'success', JSON.stringify(result.branches));
    assert.equal(tmpdir(), dir, 'the demo made its store here');
    assert.deepEqual(await readdir(dir), [], 'the temporary store is removed');
  });
});

test('a demo scenario that shows a retry is refused on a memory store: memory mode has one attempt', async () => {
  for (const scenario of ['lease-expiry', 'one-eligible-failover']) {
    await assert.rejects(
      demoCommand({ scenario, store: 'memory:', peers: 3, quorum: 1, json: true, seed: 1, approveRate: 1 }, captureIo()),
      (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input' && /one attempt/.test(e.description ?? ''),
    );
  }
});

test('the other demo scenarios keep the memory store by default', async () => {
  const io = captureIo();
  assert.equal(await demoCommand({ scenario: 'default', peers: 3, quorum: 2, json: true, seed: 1, approveRate: 1 }, io), 0);
  const { result } = JSON.parse(io.out()) as { result: { decision: { outcome: string } } };
  assert.equal(result.decision.outcome, 'success');
});
