#!/usr/bin/env node
// The `prepare` script (run by `npm install` in a checkout and by `npm pack`). Builds what the
// package ships: dist/src compiled afresh from src/ alone (tsconfig.build.json), so
// no output of a deleted source file, no test or bench code and no source map (src/ is not
// shipped) ends up in the tarball.
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
rmSync(join(root, 'dist', 'src'), { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
process.exit(result.status ?? 1);
