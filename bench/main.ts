/** `npm run bench -- <core|stores|nats|http|all> [--json] [--seconds N] [--rounds N (nats)] [--warmup S (nats)] [--rates R,R,… (nats)] [--concurrency N (nats)] [--result-batch-ms N (nats)]`. */
import { parseRates } from './stats.js';

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
const warmupArg = args.indexOf('--warmup');
const warmupSeconds = warmupArg >= 0 ? Number(args[warmupArg + 1]) : undefined;
if (warmupSeconds !== undefined && !(Number.isFinite(warmupSeconds) && warmupSeconds >= 0)) {
  process.stderr.write(`--warmup must be a number of seconds (0 or more)\n`);
  process.exit(2);
}
const concurrencyArg = args.indexOf('--concurrency');
const concurrency = concurrencyArg >= 0 ? Number(args[concurrencyArg + 1]) : undefined;
if (concurrency !== undefined && !(Number.isSafeInteger(concurrency) && concurrency > 0)) {
  process.stderr.write(`--concurrency must be a positive integer\n`);
  process.exit(2);
}
const batchArg = args.indexOf('--result-batch-ms');
const resultBatchMs = batchArg >= 0 ? Number(args[batchArg + 1]) : undefined;
if (resultBatchMs !== undefined && !(Number.isSafeInteger(resultBatchMs) && resultBatchMs >= 0 && resultBatchMs <= 1000)) {
  process.stderr.write(`--result-batch-ms must be an integer from 0 to 1000\n`);
  process.exit(2);
}
const ratesArg = args.indexOf('--rates');
let rates: number[] | undefined;
try {
  rates = ratesArg >= 0 ? parseRates(args[ratesArg + 1]) : undefined;
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n`);
  process.exit(2);
}
const options = seconds === undefined ? { json } : { json, seconds };

const suites: Record<string, () => Promise<void>> = {
  core: async () => {
    await (await import('./core.js')).coreBench(options);
    await (await import('./cpu-per-op.js')).cpuPerOp(options);
  },
  stores: async () => (await import('./stores.js')).storesBench(options),
  nats: async () => (await import('./nats.js')).natsBench({ ...options, ...(rounds === undefined ? {} : { rounds }), ...(warmupSeconds === undefined ? {} : { warmupSeconds }), ...(rates === undefined ? {} : { rates }), ...(concurrency === undefined ? {} : { concurrency }), ...(resultBatchMs === undefined ? {} : { resultBatchMs }) }),
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
