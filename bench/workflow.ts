/**
 * `npm run bench -- workflow`: a three-stage pipeline of contract calls run by the workflow
 * executor (embedded: the calls go in-process through the coordinator), against the same three
 * calls made back to back by a client (invoke, wait for the decision, next) in the same run and
 * process, samples interleaved so both see the same machine. Prints p50/p95 of both, the ratio
 * of the p50s (target ≤ 1.3) and the CPU per instance (process.cpuUsage: every thread, the jq
 * worker's included) next to the CPU of the client's three calls, and what each instance wrote to
 * its own stream (appends and events, besides its three operations' logs, which the client's
 * calls write too).
 *
 * Memory store, three in-process peers that approve at once, quorum 2 of 3. Instances start as
 * convoke serve starts them (under a digest of the document computed once, as a deployment's
 * bundle digest is), through the executor's start and wait.
 *
 * `--setup nats` measures the same comparison as a deployment runs it (bench/workflow-nats.ts);
 * this file holds what both settings share: the pipeline document, the interleaved samples and
 * the report.
 */
import { parse as parseYaml } from 'yaml';
import { MemoryEventStore } from '../src/adapters/store/memory.js';
import { digestOf } from '../src/contract/canonical.js';
import { SystemClock } from '../src/contract/clock.js';
import type { JsonValue } from '../src/contract/json.js';
import type { ContractRef } from '../src/contract/types.js';
import { createEmbedded, type Embedded } from '../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../src/deployment/examples.js';
import { seededRandom } from '../src/runtime/random.js';
import { WorkflowExecutor } from '../src/workflow/exec/executor.js';
import { JqWorkerEvaluator } from '../src/workflow/exec/jq.js';
import { workflowStreams } from '../src/workflow/exec/streams.js';
import { fixed, percentile, printRows } from './stats.js';

const caller = { principalId: 'bench', senderPeerId: null };

interface Pinned {
  document: JsonValue;
  bundleDigest: string;
}

/** The pipeline's name, as its document and a bundle's `workflows` section name it. */
export const pipelineName = 'three-stages';

/**
 * Three stages, each a review of the previous stage's operation id (the first reviews the input's
 * `doc`). Inside a bundle a call of the bundle's own contract names no digest (`ref` without one).
 */
export function pipeline(ref: Pick<ContractRef, 'id' | 'version'> & { digest?: string }): JsonValue {
  const digest = ref.digest === undefined ? '' : `, digest: '${ref.digest}'`;
  const stage = (name: string, document: string) => `  - ${name}:
      call: invoke-contract
      with:
        contract: { id: ${ref.id}, version: '${ref.version}'${digest} }
        interaction: review
        input: { document: '${document}' }`;
  return parseYaml(`document: { dsl: '1.0.3', namespace: bench, name: ${pipelineName}, version: '1.0.0' }
do:
${stage('review', '${ .doc }')}
${stage('publish', '${ .operationId }')}
${stage('notify', '${ .operationId }')}
`) as JsonValue;
}

/** The client's three calls: each invoked, its decision awaited, then the next (its input the previous operation's id). */
async function clientTriple(embedded: Embedded, key: string): Promise<void> {
  let document = `doc-${key}`;
  for (const stage of ['review', 'publish', 'notify']) {
    const request = { contract: embedded.bundle.ref, interaction: 'review', invocationKey: `${key}-${stage}`, input: { document } };
    const { result } = await embedded.coordinator.invoke(caller, request);
    const decided = await embedded.coordinator.wait('bench', result.operationId, 'decision', 30_000);
    if (decided.result.decision?.outcome !== 'success') throw new Error(`client stage ${stage}: ${decided.result.decision?.outcome ?? 'no decision'}`);
    document = result.operationId;
  }
}

/**
 * One instance, started as convoke serve starts a deployed bundle's workflow (WorkflowInstances):
 * under a digest computed once, when the document is loaded. Without one, each start would digest
 * the document itself (canonical JSON and SHA-256: what `convoke workflow run` does, once per process).
 */
async function pipelineRun(executor: WorkflowExecutor, pinned: Pinned, key: string): Promise<string> {
  const { document, bundleDigest } = pinned;
  const { instanceId } = await executor.start({ principalId: 'bench', bundleDigest, invocationKey: key, document, input: { doc: `doc-${key}` } });
  const record = await executor.wait(instanceId, 30_000);
  if (record.status !== 'completed') throw new Error(`pipeline ${key}: ${record.status} ${JSON.stringify(record.error)}`);
  return instanceId;
}

/** What the pipeline's instances wrote to their own streams: stored transitions (appends) and events per instance. */
async function instanceLogs(store: MemoryEventStore, ids: readonly string[]): Promise<{ appends: number; events: number }> {
  let appends = 0;
  let events = 0;
  const streams = workflowStreams(store);
  for (const id of ids) {
    const read = await streams.read(id);
    if (read.kind !== 'ok') throw new Error(`pipeline instance ${id}: ${read.kind}`);
    appends += read.transitions.length;
    for (const stored of read.transitions) events += stored.transition.events.length;
  }
  return { appends: appends / ids.length, events: events / ids.length };
}

/** One side's samples: the wall time of each and the CPU (µs) its `sample` meter read across it. */
export interface Sampled {
  ms: number[];
  cpuUs: number[];
}

/** CPU µs (user + system) this process has used so far, every thread (the jq worker's included). */
const processCpuUs = (): number => {
  const used = process.cpuUsage();
  return used.user + used.system;
};

/** Runs one sample: its wall time, and what the cumulative CPU meter `cpuUs` moved across it. */
export async function sample(into: Sampled, run: () => Promise<unknown>, cpuUs: () => number = processCpuUs): Promise<void> {
  const cpu = cpuUs();
  const start = performance.now();
  await run();
  into.ms.push(performance.now() - start);
  into.cpuUs.push(cpuUs() - cpu);
}

/**
 * Pairs of samples, one of each side, until `seconds` pass. Which side goes first alternates, so
 * that neither always runs right after the other's garbage (or, distributed, the late answers of
 * the other's calls).
 */
export async function interleave(seconds: number, client: (i: number) => Promise<void>, flow: (i: number) => Promise<void>): Promise<void> {
  const endMs = Date.now() + seconds * 1000;
  for (let i = 0; Date.now() < endMs; i++) {
    if (i % 2 === 0) {
      await client(i);
      await flow(i);
    } else {
      await flow(i);
      await client(i);
    }
  }
}

const median = (values: number[]) =>
  percentile(
    [...values].sort((a, b) => a - b),
    50,
  );

/** Measured seconds of interleaved samples, in either setting, unless `--seconds` says otherwise. */
export const defaultSeconds = 20;
/** The p50 ratio aimed at: the pipeline at most 30 % slower than the client's three calls. */
export const target = 1.3;

/** The bench's embedded deployment: a memory store, quorum 2 of 3 of in-process peers that approve at once (bench/tools use it too). */
export async function embeddedReview(): Promise<{ clock: SystemClock; store: MemoryEventStore; embedded: Embedded }> {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const peers = peerIds(3);
  const embedded = await createEmbedded({
    clock,
    store,
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 2 }, timeoutMs: 30_000 }),
    groups: { reviewers: peers },
  });
  for (const peerId of peers) await embedded.addPeer(peerId, { review: () => ({ verdict: 'approve' }) });
  return { clock, store, embedded };
}

export async function workflowBench(options: { json: boolean; seconds?: number }): Promise<void> {
  const { clock, store, embedded } = await embeddedReview();
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const executor = new WorkflowExecutor({ store: workflowStreams(store), clock, random: seededRandom(1), evaluator, invocations: embedded.coordinator });
  const document = pipeline(embedded.bundle.ref);
  const pinned: Pinned = { document, bundleDigest: digestOf(document) };
  const client: Sampled = { ms: [], cpuUs: [] };
  const flow: Sampled = { ms: [], cpuUs: [] };
  const instances: string[] = [];
  let logs = { appends: Number.NaN, events: Number.NaN };
  try {
    for (let i = 0; i < 30; i++) {
      await clientTriple(embedded, `warm-c${i}`);
      await pipelineRun(executor, pinned, `warm-p${i}`);
    }
    await interleave(
      options.seconds ?? defaultSeconds,
      (i) => sample(client, () => clientTriple(embedded, `c${i}`)),
      (i) => sample(flow, async () => instances.push(await pipelineRun(executor, pinned, `p${i}`))),
    );
    logs = await instanceLogs(store, instances.slice(-100));
  } finally {
    await executor.close();
    await evaluator.close();
    await embedded.close();
  }
  report(options.json, client, flow, logs);
}

/** A side's latency: its number of samples and their p50 and p95. */
export function latency(s: Sampled): { samples: number; p50Ms: number; p95Ms: number } {
  const sorted = [...s.ms].sort((a, b) => a - b);
  return { samples: s.ms.length, p50Ms: percentile(sorted, 50), p95Ms: percentile(sorted, 95) };
}

/** The report's title line: the setting, the comparison, its p50 ratio against the target and what an instance wrote to its own stream. */
export function title(setting: string, ratio: number, logs: { appends: number; events: number }): string {
  return (
    `${setting} — three contract calls: a workflow pipeline vs a client calling back to back (p50 ratio ${fixed(ratio)}, target ≤ ${target}; ` +
    `the instance's own stream: ${fixed(logs.appends, 1)} appends, ${fixed(logs.events, 1)} events)`
  );
}

function report(json: boolean, client: Sampled, flow: Sampled, logs: { appends: number; events: number }): void {
  const stats = (s: Sampled) => ({ ...latency(s), cpuUsMedian: median(s.cpuUs) });
  const c = stats(client);
  const w = stats(flow);
  const ratio = w.p50Ms / c.p50Ms;
  const data = {
    setup: 'embedded',
    client: c,
    pipeline: w,
    p50Ratio: ratio,
    target,
    cpuPerInstanceUs: w.cpuUsMedian,
    appendsPerInstance: logs.appends,
    eventsPerInstance: logs.events,
  };
  printRows(
    json,
    title('embedded (memory store, in-process peers)', ratio, logs),
    ['run', 'samples', 'p50 ms', 'p95 ms', 'cpu µs (median, all threads)'],
    [
      ['client, 3 calls back to back', c.samples, fixed(c.p50Ms), fixed(c.p95Ms), fixed(c.cpuUsMedian, 0)],
      ['workflow pipeline, 3 stages', w.samples, fixed(w.p50Ms), fixed(w.p95Ms), fixed(w.cpuUsMedian, 0)],
    ],
    data,
  );
}
