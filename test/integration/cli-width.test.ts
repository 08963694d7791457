/**
 * What a person reads fits a narrow terminal: every human-readable command's output and help,
 * given a 60-column io (tableWidthMin, the narrowest tables are drawn at), has no longer line and
 * loses no cell; `--json` is the same at any width.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { demoCommand } from '../../src/cli/commands/demo.js';
import { tableWidthMin, type CliIo } from '../../src/cli/io.js';
import { main } from '../../src/cli/main.js';
import { renderTable } from '../../src/cli/table.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
let dir: string;
let store: string;
let operationId: string;

async function run(columns: number | undefined, ...args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const io: CliIo = { stdout: { write: (s: string) => (out += s) }, stderr: { write: () => true }, readStdin: async () => new Uint8Array(), columns };
  return { code: await main(['node', 'convoke', ...args], io), out };
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'convoke-width-'));
  process.env.XDG_CONFIG_HOME = join(dir, 'config');
  store = `sqlite:${join(dir, 'ops.db')}`;
  let text = '';
  const io: CliIo = { stdout: { write: (s: string) => (text += s) }, stderr: { write: () => true }, readStdin: async () => new Uint8Array() };
  assert.equal(await demoCommand({ scenario: 'cancel-siblings', store, peers: 8, quorum: 1, json: true, seed: 2, approveRate: 1 }, io), 0);
  operationId = /"operationId":\s*"(op[0-9a-f]{64})"/.exec(text)![1]!;
  const contexts = join(dir, 'contexts.json');
  assert.equal(
    (await run(undefined, 'context', 'add', 'a-context-with-a-long-name', '--store', store, '--description', 'x '.repeat(40), '--contexts', contexts)).code,
    0,
  );
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('every human-readable output and help fits 60 columns', async () => {
  const contexts = join(dir, 'contexts.json');
  const commands = [
    ['inspect', operationId, '--store', store],
    ['get', operationId, '--store', store],
    ['list', '--store', store],
    ['replay', '--store', store],
    ['demo', '--scenario', 'cancel-siblings', '--peers', '8', '--quorum', '1'],
    ['bundle', 'check', join(repoRoot, 'examples', 'review.bundle.json')],
    ['context', 'ls', '--contexts', contexts],
    ['context', 'show', '--contexts', contexts],
    ['--help'],
    ...['invoke', 'get', 'cancel', 'inspect', 'list', 'tail', 'replay', 'demo'].map((command) => [command, '--help']),
    ['context', 'add', '--help'],
  ];
  for (const args of commands) {
    const { code, out } = await run(tableWidthMin, ...args);
    assert.equal(code, 0, args.join(' '));
    for (const line of out.split('\n')) assert.ok(line.length <= tableWidthMin, `convoke ${args.join(' ')}: ${line.length} columns: ${line}`);
  }
});

test('a table narrower than its header words wraps its headers and keeps every character of every cell', () => {
  const headers = ['operation', 'admitted', 'principal', 'interaction', 'state', 'open branches', 'next due', 'stuck'];
  const cells = ['op0123456789ab…', '2026-12-04T18:17:59Z', 'a-principal', 'review', 'settled success complete', 0, '-', ''];
  const text = renderTable(headers, [cells], tableWidthMin);
  const lines = text.split('\n');
  for (const line of lines) assert.ok(line.length <= tableWidthMin, line);
  // Wrapping moves characters onto continuation lines; none is dropped.
  const visible = (t: string) => t.replace(/[\s-]/g, '').length;
  assert.equal(visible(text), visible([...headers, ...cells.map(String)].join('')));
});

test('--json is the same whatever the width', async () => {
  for (const args of [
    ['list', '--store', store, '--json'],
    ['inspect', operationId, '--store', store, '--json'],
  ]) {
    assert.equal((await run(tableWidthMin, ...args)).out, (await run(undefined, ...args)).out);
  }
});
