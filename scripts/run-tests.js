#!/usr/bin/env node
// Runs every compiled test file under node's built-in test runner (Node 20 has no glob support
// in `node --test`, so the files are listed here). Extra args filter by path substring.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const testRoot = join(root, 'dist', 'test');
const files = [];
const walk = (dir) => {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (name.endsWith('.test.js')) files.push(path);
  }
};
walk(testRoot);
const filters = process.argv.slice(2);
const selected = filters.length ? files.filter((f) => filters.some((x) => f.includes(x))) : files;
if (selected.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin:/usr/local/sbin`;
// The CLI reads the user's selected context (~/.config/convoke/contexts.json) when nothing names
// one: tests run with an empty config directory of their own, so a developer's contexts change nothing.
const configHome = mkdtempSync(join(tmpdir(), 'convoke-test-config-'));
process.env.XDG_CONFIG_HOME = configHome;
delete process.env.CONVOKE_CONTEXTS;
delete process.env.CONVOKE_CONTEXT;
const result = spawnSync(process.execPath, ['--test', '--test-concurrency=2', ...selected], { stdio: 'inherit', env: process.env });
rmSync(configHome, { recursive: true, force: true });
process.exit(result.status ?? 1);
