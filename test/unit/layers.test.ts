/**
 * The layer rules (.dependency-cruiser.cjs) hold on src/, and they fail when a forbidden import is
 * added: each test cruises a temporary copy of src/ with the same config and tsconfig.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { appendFileSync, closeSync, cpSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const cruiser = join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

/** A copy of src/ with the layer config; `edits` append import lines to files of the copy. */
function copyOfSrc(edits: Record<string, string>): { dir: string; dispose(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-layers-'));
  cpSync(join(root, 'src'), join(dir, 'src'), { recursive: true });
  cpSync(join(root, '.dependency-cruiser.cjs'), join(dir, '.dependency-cruiser.cjs'));
  cpSync(join(root, 'tsconfig.json'), join(dir, 'tsconfig.json'));
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  for (const [file, line] of Object.entries(edits)) appendFileSync(join(dir, file), `\n${line}\n`);
  return { dir, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Runs depcruise as `npm run depcheck` does; violations are its `error RULE: FROM → TO` lines. Its
 * output goes to a file, not a pipe: it exits with its violation count, which would cut a pipe short.
 */
function cruise(dir: string): Promise<{ code: number | null; violations: string[]; output: string }> {
  const file = join(dir, 'depcruise.out');
  const fd = openSync(file, 'w');
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [cruiser, 'src', '--config', '.dependency-cruiser.cjs', '--output-type', 'err'], {
      cwd: dir,
      stdio: ['ignore', fd, fd],
    });
    child.on('error', fail);
    child.on('close', (code) => {
      closeSync(fd);
      const output = readFileSync(file, 'utf8');
      const violations = [...output.matchAll(/^ *error ([a-z-]+): (\S+) →\s+(\S+)/gm)].map((m) => `${m[1]} ${m[2]} -> ${m[3]}`);
      done({ code, violations, output });
    });
  });
}

test('src/ keeps every layer rule: no violation, no cycle', { timeout: 180_000 }, async () => {
  const copy = copyOfSrc({});
  try {
    const { code, violations, output } = await cruise(copy.dir);
    assert.deepEqual(violations, []);
    assert.equal(code, 0, output);
    assert.match(output, /no dependency violations found/);
  } finally {
    copy.dispose();
  }
});

test('the dependency check fails when a forbidden import or a cycle is added', { timeout: 180_000 }, async () => {
  const copy = copyOfSrc({
    'src/adapters/store/memory.ts': "import '../../runtime/coordinator.js';",
    'src/peer/effect-sink.ts': "import '../runtime/coordinator.js';",
    'src/http/errors.ts': "import '../deployment/config.js';",
    'src/projections/views.ts': "import '../adapters/store/memory.js';",
    'src/runtime/metrics.ts': "import '../nats-api/commands.js';",
    'src/contract/errors.ts': "import './limits.js';",
  });
  try {
    const { code, violations, output } = await cruise(copy.dir);
    assert.notEqual(code, 0, output);
    const seen = new Set(violations);
    for (const expected of [
      'adapters-implement-lower-interfaces src/adapters/store/memory.ts -> src/runtime/coordinator.ts',
      'peer-sdk-standalone src/peer/effect-sink.ts -> src/runtime/coordinator.ts',
      'http-facade src/http/errors.ts -> src/deployment/config.ts',
      'projections-over-machines src/projections/views.ts -> src/adapters/store/memory.ts',
      'runtime-core-below-facades src/runtime/metrics.ts -> src/nats-api/commands.ts',
      'no-cycles src/contract/errors.ts -> src/contract/limits.ts',
    ]) {
      assert.ok(seen.has(expected), `expected "${expected}" among:\n${[...seen].join('\n')}`);
    }
    assert.ok(
      violations.some((v) => v.startsWith('peer-sdk-reaches-no-runtime src/peer/')),
      `the peer SDK reaching the coordinator transitively is reported:\n${output}`,
    );
  } finally {
    copy.dispose();
  }
});
