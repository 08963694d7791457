/**
 * `npm run bench -- <core|stores|nats|http|list|workflow|listen|json|all> [--json] [--seconds N]
 * [--rounds N (nats)] [--warmup S (nats; workflow --setup nats)] [--rates R,R,… (nats)]
 * [--concurrency N (nats)] [--result-batch-ms N (nats)] [--setup embedded|nats (workflow)]
 * [--store jetstream|sqlite (workflow --setup nats)]`.
 *
 * `workflow --setup embedded` (the default) runs the pipeline and the client's calls in this
 * process (bench/workflow.ts); `--setup nats` as a deployment runs them: nats-server, `convoke
 * serve` on the `--store` (default jetstream) and peer processes (bench/workflow-nats.ts).
 */
import { limits } from '../src/contract/limits.js';
import { parseRates } from './stats.js';

const args = process.argv.slice(2);
/** Options followed by a value (list.ts reads its own three): the benchmark's name is the first other argument. */
const valued = new Set([
  '--seconds',
  '--rounds',
  '--warmup',
  '--rates',
  '--concurrency',
  '--result-batch-ms',
  '--setup',
  '--store',
  '--sizes',
  '--stores',
  '--jetstream-sizes',
]);
const which = args.find((a, i) => !a.startsWith('--') && !valued.has(args[i - 1] ?? '')) ?? 'core';
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
/** The word after `--name`, if given; exits 2 unless it is one of `choices`. */
function choiceOption<T extends string>(name: string, choices: readonly T[]): T | undefined {
  const at = args.indexOf(name);
  if (at < 0) return undefined;
  const value = args[at + 1];
  if (!choices.includes(value as T)) {
    process.stderr.write(`${name} must be one of ${choices.join(', ')}\n`);
    process.exit(2);
  }
  return value as T;
}

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
const setup = choiceOption('--setup', ['embedded', 'nats'] as const) ?? 'embedded';
const store = choiceOption('--store', ['jetstream', 'sqlite'] as const);
if (store !== undefined && setup !== 'nats') {
  process.stderr.write('--store applies to workflow --setup nats (the embedded setting runs on the memory store)\n');
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
  workflow: async () =>
    setup === 'nats'
      ? (await import('./workflow-nats.js')).workflowNatsBench({
          ...options,
          ...(store === undefined ? {} : { store }),
          ...(warmupSeconds === undefined ? {} : { warmupSeconds }),
        })
      : (await import('./workflow.js')).workflowBench(options),
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
