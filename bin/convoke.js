#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm install` through the prepare script).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const entry = join(root, 'dist', 'src', 'cli', 'main.js');
if (!existsSync(entry)) {
  process.stderr.write('convoke: dist/ is missing; run `npm install` (or `npm run build`) in the package first\n');
  process.exit(1);
}
// A reader that stops early (`convoke inspect … | head`) closes the pipe: that ends the output,
// it is not a crash.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});
const { main } = await import(entry);
process.exitCode = await main(process.argv);
