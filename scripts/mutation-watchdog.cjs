// Preloaded into each test file's process during `npm run mutate` (stryker.config.json tap.nodeArgs),
// never in npm test. A mutant can make a test wait forever (a promise that never settles while a
// store's poll timer keeps the process alive); Node 20 has no per-test timeout for a file run
// directly. After CONVOKE_MUTATION_FILE_MS (20 s; an unmutated file takes under 8 s on a loaded
// machine; scripts/mutate.js gives the workflow test files 45 s) this reports a failed test in TAP and exits, so the mutant counts as detected without
// waiting for Stryker's much longer run timeout. The timer is unref'd: it never keeps a finished file alive.
'use strict';
const limitMs = Number(process.env.CONVOKE_MUTATION_FILE_MS ?? 20_000);
setTimeout(() => {
  process.stdout.write(`\nnot ok 9999 - mutation watchdog: the test file did not finish within ${limitMs} ms\n`, () => process.exit(1));
}, limitMs).unref();
