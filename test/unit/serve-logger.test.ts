/**
 * The server's log on the process's own standard error (cli/commands/serve.ts serveLogger): written
 * asynchronously, yet a line logged right before an exit is not lost, and a burst of lines
 * arrives whole and in order.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { test } from 'node:test';

const at = (path: string) => JSON.stringify(pathToFileURL(fileURLToPath(new URL(path, import.meta.url))).href);

function runLogging(body: string): { status: number | null; lines: Array<Record<string, unknown>>; stderr: string } {
  const script = `import { serveLogger } from ${at('../../src/cli/commands/serve.js')};
import { processIo } from ${at('../../src/cli/io.js')};
const logger = serveLogger(processIo, 'info');
${body}`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
  const lines = run.stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { status: run.status, lines, stderr: run.stderr };
}

test('serve log: a line logged in the turn the process exits is written', () => {
  const run = runLogging(`logger.info({ event: 'last' }, 'last words'); process.exit(3);`);
  assert.equal(run.status, 3, run.stderr);
  assert.deepEqual(
    run.lines.map((l) => l.event),
    ['last'],
  );
});

test('serve log: a burst of lines arrives whole and in order', () => {
  const run = runLogging(`for (let i = 0; i < 5000; i++) logger.info({ event: 'burst', i }, 'line ' + i); process.exitCode = 0;`);
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.lines.length, 5000);
  assert.ok(run.lines.every((l, i) => l.i === i));
});
