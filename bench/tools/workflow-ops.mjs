// node bench/tools/workflow-ops.mjs <checkout root> <pipeline|client|executor|both|interleaved|timeline> <warm> <count> [batch]
// The workload of `npm run bench -- workflow`, one side at a time and a fixed number of times, one
// after the other: `pipeline` runs the three-stage contract pipeline through the workflow
// executor (embedded, memory store, quorum 2 of 3), `client` the same three calls made back to
// back, `executor` the pipeline with its contract calls answered at once by a stub (the same
// answer a decided operation gives, no coordinator): the executor's own cost alone, with no timer
// or peer whose timing a slowed process (valgrind) changes; `both` runs `client` then `executor`
// each time, the two sharing nothing but the process and its memory store: their cost together
// against the sum of each alone is what each costs the other in one process (caches, branch
// history, garbage collection), and it prints each side's time per run; with `batch` B it runs B
// of the client's triples, then B stub instances, and so on: the same work with one switch
// between the sides per B runs instead of one per run; `interleaved` runs the stub instance with
// one of the client's calls made inside each of its contract calls (the real call's work, in the
// pipeline's order, its answer still the stub's): against `both`, what taking turns at every
// stage costs; `timeline` runs `client` and `pipeline` alternately with their contract calls
// timed, and prints the mean µs of each stretch of an instance (start → first invoke, an invoke,
// a wait for the decision, decision → next invoke, last decision → instance ended) and of a
// client's call. Built for profiles (`node --cpu-prof`) and instruction counts
// (callgrind), which the interleaved bench cannot attribute to one side: under `valgrind --tool=callgrind
// --instr-atstart=no`, CONVOKE_CALLGRIND=1 counts the measured runs alone (instrumentation on after
// the warm-up, off before shutdown). Prints the time, the CPU per run (every thread) and, for
// `pipeline`, the appends, events and jq worker evaluations per instance.
import { execFileSync } from 'node:child_process';
import { embeddedReview, threeStages } from './embedded-review.mjs';

const [root, mode, warmArg, countArg, batchArg] = process.argv.slice(2);
if (!['pipeline', 'client', 'executor', 'both', 'interleaved', 'timeline'].includes(mode))
  throw new Error('usage: workflow-ops.mjs <root> <pipeline|client|executor|both|interleaved|timeline> <warm> <count> [batch]');
const batch = batchArg === undefined ? 1 : Number(batchArg);
if (!Number.isSafeInteger(batch) || batch < 1 || (batch > 1 && mode !== 'both')) throw new Error('batch: a positive integer, for `both` only');
const mod = (p) => import(`${root}/dist/src/${p}`);
const { digestOf } = await mod('contract/canonical.js');
const { operationId } = await mod('contract/ids.js');
const { seededRandom } = await mod('runtime/random.js');
const { WorkflowExecutor } = await mod('workflow/exec/executor.js');
const { JqWorkerEvaluator } = await mod('workflow/exec/jq.js');
const { workflowStreams } = await mod('workflow/exec/streams.js');

const { clock, store, embedded } = await embeddedReview(root);
// Counts what reaches the jq worker (a path answered in-process never does).
const jq = new JqWorkerEvaluator({ deadlineMs: 5000 });
let jqCalls = 0;
const evaluator = { evaluate: (...args) => (jqCalls++, jq.evaluate(...args)), close: () => jq.close() };
/** A contract runtime that decides every call at once, as the coordinator answers a decided operation. */
const decided = (principalId, request) => ({
  operationId: operationId(principalId, request.contract.digest, request.invocationKey),
  decision: { outcome: 'success', reason: 'threshold', closedAtMs: clock.nowMs(), successVotes: 2, failedUnits: 0, units: 3, threshold: 2 },
  settlement: { status: 'complete', siblings: [{ branchId: 'charlie', disposition: 'detached' }] },
  output: { counts: { approve: 2 }, total: 2 },
  outputError: null,
});
/** `timeline`: the stretches of each run, named by the marks that bound them ([name, µs] pairs, in order). */
const marks = [];
const mark = mode === 'timeline' ? (name) => marks.push([name, Number(process.hrtime.bigint()) / 1000]) : () => {};
/** The coordinator as the pipeline calls it, its invokes and waits marked (`timeline`). */
const markedCoordinator = {
  invoke: async (...args) => (mark('invoke'), await embedded.coordinator.invoke(...args).finally(() => mark('invoked'))),
  wait: async (...args) => (mark('wait'), await embedded.coordinator.wait(...args).finally(() => mark('decided'))),
  get: (...args) => embedded.coordinator.get(...args),
  cancel: (...args) => embedded.coordinator.cancel(...args),
};
/** One of the client's calls: invoked, its decision awaited (the `interleaved` mode makes one inside each stub call). */
const clientCall = async (request) => {
  mark('client invoke');
  const { result } = await embedded.coordinator.invoke(caller, request);
  mark('client invoked');
  const waited = await embedded.coordinator.wait('bench', result.operationId, 'decision', 30_000);
  mark('client decided');
  if (waited.result.decision?.outcome !== 'success') throw new Error(`${request.invocationKey}: ${JSON.stringify(waited.result.decision)}`);
  return result.operationId;
};
const stub = {
  invoke: async (caller, request) => {
    if (mode === 'interleaved')
      await clientCall({ contract: ref, interaction: 'review', invocationKey: `client-${request.invocationKey}`, input: request.input });
    return { result: decided(caller.principalId, request) };
  },
  wait: async () => {
    throw new Error('the stub decides every call at once');
  },
  get: async () => undefined,
  cancel: async () => {
    throw new Error('the stub cancels nothing');
  },
};
const invocations = mode === 'executor' || mode === 'both' || mode === 'interleaved' ? stub : mode === 'timeline' ? markedCoordinator : embedded.coordinator;
const executor = new WorkflowExecutor({ store: workflowStreams(store), clock, random: seededRandom(1), evaluator, invocations });
const ref = embedded.bundle.ref;
const document = await threeStages(root, ref);
const bundleDigest = digestOf(document);
const caller = { principalId: 'bench', senderPeerId: null };
const ids = [];

const pipeline = async (key) => {
  mark('start');
  const { instanceId } = await executor.start({ principalId: 'bench', bundleDigest, invocationKey: key, document, input: { doc: `doc-${key}` } });
  const record = await executor.wait(instanceId, 30_000);
  if (record.status !== 'completed') throw new Error(`${key}: ${record.status} ${JSON.stringify(record.error)}`);
  mark('ended');
  ids.push(instanceId);
};
const client = async (key) => {
  let input = `doc-${key}`;
  for (const name of ['review', 'publish', 'notify']) {
    input = await clientCall({ contract: ref, interaction: 'review', invocationKey: `${key}-${name}`, input: { document: input } });
  }
};
/** `both`: each side's time (ns) across the measured runs. */
const sides = { client: 0n, executor: 0n };
const timed = async (side, run) => {
  const start = process.hrtime.bigint();
  await run();
  sides[side] += process.hrtime.bigint() - start;
};
/** One run of the mode; `both` with a batch runs `batch` of each side per call, its keys from `i`. */
const one =
  mode === 'client'
    ? client
    : mode === 'both'
      ? async (key) => {
          await timed('client', async () => {
            for (let j = 0; j < batch; j++) await client(`${key}-${j}`);
          });
          await timed('executor', async () => {
            for (let j = 0; j < batch; j++) await pipeline(`${key}-${j}-executor`);
          });
        }
      : mode === 'timeline'
        ? async (key) => (await client(`${key}-client`), await pipeline(key))
        : pipeline;
const callgrind = (state) => {
  if (process.env.CONVOKE_CALLGRIND === '1') execFileSync('callgrind_control', ['-i', state, String(process.pid)], { stdio: 'ignore' });
};

const warm = Number(warmArg);
const count = Number(countArg);
for (let i = 0; i < warm; i += batch) await one(`warm-${i}`);
ids.length = 0;
marks.length = 0;
sides.client = 0n;
sides.executor = 0n;
const jqBefore = jqCalls;
callgrind('on');
const elu = performance.eventLoopUtilization();
const cpu = process.cpuUsage();
const t0 = process.hrtime.bigint();
for (let i = 0; i < count; i += batch) await one(`run-${i}`);
const ms = Number(process.hrtime.bigint() - t0) / 1e6;
const used = process.cpuUsage(cpu);
const busy = performance.eventLoopUtilization(elu).utilization;
callgrind('off');
let appends = 0;
let events = 0;
for (const id of ids) {
  const read = await workflowStreams(store).read(id);
  appends += read.transitions.length;
  for (const stored of read.transitions) events += stored.transition.events.length;
}
/** `timeline`: the mean µs of each stretch between two consecutive marks, named `from → to`. */
function stretches() {
  const sums = new Map();
  for (let i = 1; i < marks.length; i++) {
    const name = `${marks[i - 1][0]} → ${marks[i][0]}`;
    const sum = sums.get(name) ?? { us: 0, n: 0 };
    sum.us += marks[i][1] - marks[i - 1][1];
    sum.n += 1;
    sums.set(name, sum);
  }
  return Object.fromEntries([...sums].map(([name, { us, n }]) => [name, { meanUs: Number((us / n).toFixed(1)), n }]));
}
const per = (n) => (ids.length === 0 ? null : n / ids.length);
console.log(
  JSON.stringify({
    mode,
    count,
    ms: Math.round(ms),
    msPerRun: count === 0 ? null : ms / count,
    cpuUsPerRun: count === 0 ? null : Math.round((used.user + used.system) / count),
    systemUsPerRun: count === 0 ? null : Math.round(used.system / count),
    appendsPerInstance: per(appends),
    eventsPerInstance: per(events),
    jqPerInstance: per(jqCalls - jqBefore),
    eventLoopUtilization: Number(busy.toFixed(3)),
    ...(mode === 'both' ? { batch, clientMsPerRun: Number(sides.client) / 1e6 / count, executorMsPerRun: Number(sides.executor) / 1e6 / count } : {}),
    ...(mode === 'timeline' ? { stretchesUs: stretches() } : {}),
  }),
);
await executor.close();
await evaluator.close();
await embedded.close();
process.exit(0);
