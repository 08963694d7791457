#!/usr/bin/env node
// The `prepare` script (run by `npm install` in a checkout and by `npm pack`). Builds what the
// package ships: dist/src compiled afresh from src/ alone (tsconfig.build.json), so
// no output of a deleted source file, no test or bench code and no source map (src/ is not
// shipped) ends up in the tarball. In a git checkout it records the commit in
// dist/src/build-info.json (the `commit` label of `convoke_build_info`), and copies the vendored
// Serverless Workflow schema's LICENSE beside its module.
import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
rmSync(join(root, 'dist', 'src'), { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
if (result.status === 0) {
  // The vendored DSL schema's license travels beside it (src/ is not shipped).
  const schema = join('src', 'workflow', 'dsl', 'schema', 'LICENSE');
  copyFileSync(join(root, schema), join(root, 'dist', schema));
  const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' });
  const commit = head.status === 0 ? head.stdout.trim() : '';
  if (/^[0-9a-f]{40}$/.test(commit)) writeFileSync(join(root, 'dist', 'src', 'build-info.json'), JSON.stringify({ commit }) + '\n');
}
process.exit(result.status ?? 1);
