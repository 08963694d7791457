/**
 * The server log's line writer (src/cli/line-writer.ts): the lines of one event-loop turn go out
 * in one write; a burst past the bound is written at once; what is held is written at an
 * orderly exit, even one that calls process.exit in the same turn.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { test } from 'node:test';
import { LineWriter } from '../../src/cli/line-writer.js';

test('line writer: the lines of one turn are written together when the turn ends', async () => {
  const writes: string[] = [];
  const writer = new LineWriter((text) => writes.push(text));
  try {
    writer.line('a\n');
    writer.line('b\n');
    assert.deepEqual(writes, [], 'nothing written within the turn');
    await nextTurn();
    assert.deepEqual(writes, ['a\nb\n'], 'one write for both lines');
    writer.line('c\n');
    writer.flush();
    assert.deepEqual(writes, ['a\nb\n', 'c\n'], 'flush writes what is held at once');
    await nextTurn();
    assert.equal(writes.length, 2, 'nothing written twice');
  } finally {
    writer.close();
  }
});

test('line writer: held lines past the bound are written at once', () => {
  const writes: string[] = [];
  const writer = new LineWriter((text) => writes.push(text), 8);
  try {
    writer.line('1234\n');
    assert.deepEqual(writes, []);
    writer.line('5678\n');
    assert.deepEqual(writes, ['1234\n5678\n']);
  } finally {
    writer.close();
  }
});

test('line writer: a process that exits in the turn it logged still writes the line', () => {
  const module = pathToFileURL(fileURLToPath(new URL('../../src/cli/line-writer.js', import.meta.url))).href;
  const script = `import { LineWriter } from ${JSON.stringify(module)};
const writer = new LineWriter((text) => process.stdout.write(text));
writer.line('last words\\n');
process.exit(3);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.status, 3, run.stderr);
  assert.equal(run.stdout, 'last words\n');
});
