/** `npm run bench -- <core|stores|nats|http|all> [--json] [--seconds N] [--rounds N (nats)]`. */
const args = process.argv.slice(2);
const which = args.find((a) => !a.startsWith('--')) ?? 'core';
const json = args.includes('--json');
const secondsArg = args.indexOf('--seconds');
const seconds = secondsArg >= 0 ? Number(args[secondsArg + 1]) : undefined;
const roundsArg = args.indexOf('--rounds');
const rounds = roundsArg >= 0 ? Number(args[roundsArg + 1]) : undefined;
if (rounds !== undefined && !(Number.isSafeInteger(rounds) && rounds > 0)) {
  process.stderr.write(`--rounds must be a positive integer\n`);
  process.exit(2);
}
const options = seconds === undefined ? { json } : { json, seconds };

const suites: Record<string, () => Promise<void>> = {
  core: async () => {
    await (await import('./core.js')).coreBench(options);
    await (await import('./cpu-per-op.js')).cpuPerOp(options);
  },
  stores: async () => (await import('./stores.js')).storesBench(options),
  nats: async () => (await import('./nats.js')).natsBench(rounds === undefined ? options : { ...options, rounds }),
  http: async () => (await import('./http.js')).httpBench(options),
};

const selected = which === 'all' ? Object.keys(suites) : [which];
for (const name of selected) {
  const run = suites[name];
  if (!run) {
    process.stderr.write(`unknown benchmark "${name}"; choose one of: ${Object.keys(suites).join(', ')}, all\n`);
    process.exit(2);
  }
  await run();
}
