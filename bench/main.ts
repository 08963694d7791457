/** `npm run bench -- <core|stores|nats|http|list|workflow|listen|json|all> [--json] [--seconds N] [--rounds N (nats)] [--warmup S (nats)] [--rates R,R,… (nats)] [--concurrency N (nats)] [--result-batch-ms N (nats)]`. */
import { limits } from '../src/contract/limits.js';
import { parseRates } from './stats.js';

const args = process.argv.slice(2);
const which = args.find((a) => !a.startsWith('--')) ?? 'core';
const json = args.includes('--json');
/** The number after `--name`, if given; exits 2 with `must` when it fails `valid`. */
function numberOption(name: string, valid: (n: number) => boolean, must: string): number | undefined {
  const at = args.indexOf(name);
  if (at < 0) return undefined;
  const value = Number(args[at + 1]);
  if (!valid(value)) {
    process.stderr.write(`${name} must be ${must}\n`);
    process.exit(2);
  }
  return value;
}
const positiveInteger = (n: number) => Number.isSafeInteger(n) && n > 0;

const seconds = numberOption('--seconds', (n) => Number.isFinite(n) && n > 0, 'a positive number of seconds');
const rounds = numberOption('--rounds', positiveInteger, 'a positive integer');
const warmupSeconds = numberOption('--warmup', (n) => Number.isFinite(n) && n >= 0, 'a number of seconds (0 or more)');
const concurrency = numberOption('--concurrency', positiveInteger, 'a positive integer');
const resultBatchMs = numberOption(
  '--result-batch-ms',
  (n) => Number.isSafeInteger(n) && n >= 0 && n <= limits.resultBatchMsMax,
  `an integer from 0 to ${limits.resultBatchMsMax}`,
);
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
  nats: async () =>
    (await import('./nats.js')).natsBench({
      ...options,
      ...(rounds === undefined ? {} : { rounds }),
      ...(warmupSeconds === undefined ? {} : { warmupSeconds }),
      ...(rates === undefined ? {} : { rates }),
      ...(concurrency === undefined ? {} : { concurrency }),
      ...(resultBatchMs === undefined ? {} : { resultBatchMs }),
    }),
  http: async () => (await import('./http.js')).httpBench(options),
  list: async () => (await import('./list.js')).listBench({ json, args }),
  workflow: async () => (await import('./workflow.js')).workflowBench(options),
  listen: async () => (await import('./listen.js')).listenBench(options),
  json: async () => (await import('./json.js')).jsonBench({ json }),
};

// `all` leaves out `list`, which fills a 100 000-operation store first (minutes).
const selected = which === 'all' ? Object.keys(suites).filter((name) => name !== 'list') : [which];
for (const name of selected) {
  const run = suites[name];
  if (!run) {
    process.stderr.write(`unknown benchmark "${name}"; choose one of: ${Object.keys(suites).join(', ')}, all\n`);
    process.exit(2);
  }
  await run();
}
