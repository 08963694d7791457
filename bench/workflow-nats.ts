/**
 * `npm run bench -- workflow --setup nats [--store jetstream|sqlite] [--seconds N] [--warmup S]`:
 * the workflow bench's comparison (bench/workflow.ts) as users deploy convoke, where the embedded
 * setting's nearly free in-process calls leave the executor's bookkeeping to dominate.
 *
 * The deployment (bench/nats.ts startBenchDeployment): one nats-server with JetStream and the
 * deployment's permissions, `convoke serve` as a child process in durable mode on the `--store`
 * (default jetstream), three `convoke peer` processes that approve at once, quorum 2 of 3, and one
 * command principal. The bundle holds the same three-stage pipeline as the embedded setting in its
 * `workflows` section (review, publish, notify; each stage's input the previous stage's operation id).
 *
 * Both sides are driven from this process over the NATS command API, as a client would:
 *
 * - the client: three `invoke` commands back to back, each waiting for its decision in the command
 *   itself (`waitFor: decision`, `waitMs`: one round trip per call), its outcome checked to be
 *   success, its operation id the next call's input;
 * - the pipeline: one `workflow-start` waiting (`waitMs`) for the instance to end, answered 200 with
 *   the instance completed and its three stages decided success; the serve process's executor
 *   makes the three calls.
 *
 * Each sample is the wall time of one side's round trips. Both sides run unmeasured first, pairs
 * interleaved for `--warmup S` seconds (default 10: measured from a cold start, every process ramps
 * up for seconds on a 2-core machine), then pairs of samples alternating which side goes first for
 * `--seconds` (as the embedded setting).
 *
 * CPU: the serve process's user + system time (/proc/<pid>/stat, all its threads) read before and
 * after each sample. It moves in 10 ms ticks, coarser than a sample, so the report gives the mean
 * per sample over the run (each side's total over its samples), not a median. Work the serve
 * process does outside every sample is not counted; work left over from one sample (the third
 * peer's late answer to a call decided by two, stored after the decision) may fall into the next,
 * which the alternation shares between the sides. The peers and nats-server are not counted.
 */
import { randomBytes } from 'node:crypto';
import type { ContractRef } from '../src/contract/types.js';
import { peerIds, reviewBundle } from '../src/deployment/examples.js';
import { commandTimeoutMs } from '../src/nats-api/commands.js';
import { sendWorkflowCommand } from '../src/nats-api/workflow-commands.js';
import { resultOf, type CommandClient, type NatsDeploymentFixture } from '../test/support/nats-deployment-fixture.js';
import { cpuMsOf, startBenchDeployment } from './nats.js';
import { fixed, printRows } from './stats.js';
import { defaultSeconds, interleave, latency, pipeline, pipelineName, sample, target, title, type Sampled } from './workflow.js';

export interface WorkflowNatsBenchOptions {
  json: boolean;
  seconds?: number;
  /** Unmeasured seconds of interleaved pairs before the samples (default 10). */
  warmupSeconds?: number;
  /** The serve process's store (default jetstream). */
  store?: 'jetstream' | 'sqlite';
}

const peerCount = 3;
const quorum = 2;
/** How long a command waits for its decision or its instance's end: far above either, so a sample never ends early. */
const waitMs = 30_000;
/** Instances whose stored logs are read for appends and events per instance (each read opens the store as admin). */
const logsRead = 20;

/** The client's three calls: each invoked and its decision awaited in one round trip, its operation id the next call's input. */
async function clientTriple(client: CommandClient, key: string): Promise<void> {
  let document = `doc-${key}`;
  for (const stage of ['review', 'publish', 'notify']) {
    const result = resultOf(await client.invoke('review', { document }, { key: `${key}-${stage}`, waitFor: 'decision', waitMs }));
    if (result.decision?.outcome !== 'success') throw new Error(`client stage ${stage}: ${result.decision?.outcome ?? 'no decision'}`);
    document = result.operationId;
  }
}

/** One instance of the deployed pipeline, started and awaited in one round trip; answers its id. */
async function pipelineRun(client: CommandClient, bundle: ContractRef, key: string): Promise<string> {
  const body = { bundle, workflow: pipelineName, invocationKey: key, input: { doc: `doc-${key}` }, waitMs };
  const reply = await sendWorkflowCommand(client.transport, client.principal, 'workflow-start', body, commandTimeoutMs(waitMs));
  if (!('instance' in reply)) throw new Error(`pipeline ${key}: status ${reply.status} ${JSON.stringify(reply.error)}`);
  if ('omitted' in reply) throw new Error(`pipeline ${key}: the reply left out ${reply.omitted.members.join(', ')}`);
  const { instance } = reply;
  if (reply.status !== 200 || instance.status !== 'completed')
    throw new Error(`pipeline ${key}: ${reply.status} ${instance.status} ${JSON.stringify(instance.error)}`);
  const outcomes = instance.stages.map((s) => s.decision?.outcome);
  if (outcomes.length !== 3 || outcomes.some((o) => o !== 'success')) throw new Error(`pipeline ${key}: stages ${JSON.stringify(outcomes)}`);
  return instance.instanceId;
}

/** What the instances wrote to their own streams (appends and events per instance), read from the store as admin. */
async function instanceLogs(fixture: NatsDeploymentFixture, ids: readonly string[]): Promise<{ appends: number; events: number }> {
  let appends = 0;
  let events = 0;
  for (const id of ids) {
    const transitions = await fixture.log(id);
    appends += transitions.length;
    for (const stored of transitions) events += stored.transition.events.length;
  }
  return { appends: appends / ids.length, events: events / ids.length };
}

export async function workflowNatsBench(options: WorkflowNatsBenchOptions): Promise<void> {
  const store = options.store ?? 'jetstream';
  const seconds = options.seconds ?? defaultSeconds;
  const warmupSeconds = options.warmupSeconds ?? 10;
  const setting = `NATS durable mode (convoke serve on a ${store} store, ${peerCount} peer processes, quorum ${quorum}, command API)`;
  process.stderr.write(`workflow: ${setting}, ${warmupSeconds} s of warm-up, ${seconds} s measured\n`);
  const bundle = reviewBundle({ completion: { mode: 'quorum', count: quorum }, timeoutMs: 30_000 });
  bundle.workflows = { [pipelineName]: pipeline(bundle.contract as { id: string; version: string }) };
  const fixture = await startBenchDeployment({ bundle, peers: peerIds(peerCount), store });
  const client: Sampled = { ms: [], cpuUs: [] };
  const flow: Sampled = { ms: [], cpuUs: [] };
  const instances: string[] = [];
  let logs = { appends: Number.NaN, events: Number.NaN };
  try {
    const bench = await fixture.client('bench');
    const ref = fixture.contract;
    const pid = fixture.serve?.child.pid;
    const serveCpuUs = () => (cpuMsOf(pid) ?? Number.NaN) * 1000;
    // Keys unique to this run, so that no command finds an earlier operation or instance.
    const prefix = randomBytes(4).toString('hex');
    process.stderr.write(`  warm-up: ${warmupSeconds} s of interleaved pairs, not measured\n`);
    await interleave(
      warmupSeconds,
      (i) => clientTriple(bench, `${prefix}-warm-c${i}`),
      async (i) => void (await pipelineRun(bench, ref, `${prefix}-warm-p${i}`)),
    );
    process.stderr.write(`  measuring: ${seconds} s of interleaved pairs\n`);
    await interleave(
      seconds,
      (i) => sample(client, () => clientTriple(bench, `${prefix}-c${i}`), serveCpuUs),
      (i) => sample(flow, async () => instances.push(await pipelineRun(bench, ref, `${prefix}-p${i}`)), serveCpuUs),
    );
    logs = await instanceLogs(fixture, instances.slice(-logsRead));
  } finally {
    await fixture.dispose();
  }
  report(options.json, { setting, store, seconds, warmupSeconds }, client, flow, logs);
}

function report(
  json: boolean,
  run: { setting: string; store: string; seconds: number; warmupSeconds: number },
  client: Sampled,
  flow: Sampled,
  logs: { appends: number; events: number },
): void {
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const stats = (s: Sampled) => ({ ...latency(s), serveCpuUsMean: mean(s.cpuUs) });
  const c = stats(client);
  const w = stats(flow);
  const ratio = w.p50Ms / c.p50Ms;
  const data = {
    setup: 'nats',
    store: run.store,
    mode: 'durable',
    peers: peerCount,
    quorum,
    seconds: run.seconds,
    warmupSeconds: run.warmupSeconds,
    client: c,
    pipeline: w,
    p50Ratio: ratio,
    target,
    serveCpuPerInstanceUs: w.serveCpuUsMean,
    appendsPerInstance: logs.appends,
    eventsPerInstance: logs.events,
  };
  printRows(
    json,
    title(run.setting, ratio, logs),
    ['run', 'samples', 'p50 ms', 'p95 ms', 'serve cpu µs per sample (mean, /proc)'],
    [
      ['client, 3 invoke commands back to back', c.samples, fixed(c.p50Ms), fixed(c.p95Ms), fixed(c.serveCpuUsMean, 0)],
      ['workflow pipeline, 1 workflow-start', w.samples, fixed(w.p50Ms), fixed(w.p95Ms), fixed(w.serveCpuUsMean, 0)],
    ],
    data,
  );
}
