// node bench/tools/jq-evaluations.mjs <checkout root> <count> [principals] [concurrency]
// jq evaluations that no in-process path answers (`.n + 1`, `[.xs[] | . * 2] | add`, a string
// interpolation), through the JqWorkerEvaluator of the checkout, one worker: `count` of them in
// all, from `principals` principals taking turns at submitting, `concurrency` in flight at a
// time (so the evaluator's queue holds that many). Prints the time and the CPU (every thread)
// per evaluation, and the main thread's own CPU per evaluation (where Linux's /proc gives it: the
// event loop's share, which the evaluator's bookkeeping costs). The principal is passed as a
// fourth argument; an evaluator that takes none ignores it.
import { readFileSync } from 'node:fs';

const [root, countArg, principalsArg, concurrencyArg] = process.argv.slice(2);
const count = Number(countArg ?? 10_000);
const principals = Number(principalsArg ?? 4);
const concurrency = Number(concurrencyArg ?? 64);
const { JqWorkerEvaluator } = await import(`${root}/dist/src/workflow/exec/jq.js`);

const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000, workers: 1 });
const programs = ['.n + 1', '[.xs[] | . * 2] | add', '"item \\(.n) of \\(.xs | length)"', '.xs | map(select(. > 2)) | length'];
const input = (i) => ({ n: i, xs: [1, 2, 3, 4, 5] });
// The worker's start-up (loading jq-wasm) is not what this measures.
await evaluator.evaluate('.n + 1', input(0), {}, 'warm-up');

let next = 0;
let checksum = 0;
const lane = async () => {
  for (let i = next++; i < count; i = next++) {
    const result = await evaluator.evaluate(programs[i % programs.length], input(i), {}, `principal-${i % principals}`);
    checksum += typeof result === 'number' ? result : String(result).length;
  }
};
// The main thread's CPU time in clock ticks (utime + stime of its stat line), or undefined without /proc.
const mainTicks = () => {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'latin1');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
};
const ticksPerSecond = 100;
const mainAtStart = mainTicks();
const cpu = process.cpuUsage();
const started = performance.now();
await Promise.all(Array.from({ length: concurrency }, lane));
const ms = performance.now() - started;
const used = process.cpuUsage(cpu);
const mainAtEnd = mainTicks();
await evaluator.close();
console.log(
  JSON.stringify({
    count,
    principals,
    concurrency,
    ms: Math.round(ms),
    usPerEvaluation: Math.round((ms * 1000) / count),
    cpuUsPerEvaluation: Math.round((used.user + used.system) / count),
    ...(mainAtStart === undefined || mainAtEnd === undefined
      ? {}
      : { mainThreadCpuUsPerEvaluation: Math.round(((mainAtEnd - mainAtStart) * 1e6) / ticksPerSecond / count) }),
    checksum,
  }),
);
