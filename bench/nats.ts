/**
 * `npm run bench -- nats`: convoke on NATS in durable mode — `convoke serve` (child process,
 * jetstream store) and 5 `convoke peer` processes, quorum 3 — driven through the NATS command API
 * from this process: decided operations per second and p50/p99 decision latency (invoke sent to
 * reply at the decision), closed loop; then p99 in an open loop at half that throughput.
 *
 * Besides throughput and latency it prints, for the closed loop of the median round, the messages
 * each stream stored, nats-server's traffic (messages and bytes in and out, from its /varz
 * counters) and the CPU of every process, all per decided operation: what a reader needs to see
 * where convoke's extra cost goes.
 *
 * The baseline, measured in the same run on the same server: a scatter-gather written directly on
 * nats.js with no convoke — publish 5 requests with JetStream acks into a requests stream, 5 peer
 * processes (this file, `--baseline-peer`) pull them and publish their replies with JetStream acks
 * into a results stream, and this process pulls the replies and counts to 3. No admission, no
 * event log, no leases, fences or decision record. Baseline and convoke phases alternate for
 * `--rounds N` rounds (default 5); the reported ratio is the median of the rounds' ratios.
 *
 * `convoke serve` logs at its default level (info: admissions, decisions, settlements) into a
 * file, as a service manager would take its standard error: a pipe read by this busy process
 * would fill and make the server wait on it, which measures this process, not the server.
 *
 * Before the first round each contender runs its closed loop unmeasured for `--warmup S` seconds
 * (default 10). Measured from a cold start, both ramp up over several seconds on this 2-core
 * machine (optimizing compilation competes with the load for the cores; caches and buffers
 * fill) — convoke, with far more code, for about twice as long — so without it round 1 measured
 * warm-up, not the runtime a long-running service has.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { JsonObject } from '../src/contract/json.js';
import { peerIds, reviewBundle } from '../src/deployment/examples.js';
import { NatsDeploymentFixture, resultOf } from '../test/support/nats-deployment-fixture.js';
import { closedLoop, fixed, parseRates, percentile, printRows, summarize } from './stats.js';

export interface NatsBenchOptions {
  json: boolean;
  seconds?: number;
  concurrency?: number;
  /** Baseline and convoke phases alternate this many times (default 5); the ratio is their median. */
  rounds?: number;
  /** Unmeasured closed-loop seconds per contender before round 1 (default 10). */
  warmupSeconds?: number;
  /** Offered rates (operations per second) for a latency curve after the rounds: each contender, each rate, one open-loop phase. */
  rates?: number[];
  /** The coordinator's resultBatchMs (absent: its default), to measure with result batching off (0) or wider. */
  resultBatchMs?: number;
}

const peerCount = 5;
const quorum = 3;
const warmupOperations = 50;
const thisFile = fileURLToPath(import.meta.url);
const encoder = new TextEncoder();

interface Run {
  name: string;
  opsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  operations: number;
  halfLoad?: OpenLoopResult;
  /** CPU milliseconds (user + system) per decided operation in the closed loop, by role; empty where /proc is not readable. */
  cpuMsPerOperation: Record<string, number>;
  /** Messages each JetStream stream stored per decided operation in the closed loop (streams that stored any). */
  storedPerOperation: Record<string, number>;
  /** What nats-server received and sent per decided operation in the closed loop (its /varz counters); undefined without them. */
  trafficPerOperation: Traffic | undefined;
}

// ── nats-server traffic per operation ───────────────────────────────────────

interface Traffic {
  messagesIn: number;
  messagesOut: number;
  bytesIn: number;
  bytesOut: number;
}

/** nats-server's cumulative message and byte counters (monitoring /varz); undefined if unreadable. */
async function serverCounters(monitorUrl: string | undefined): Promise<Traffic | undefined> {
  if (monitorUrl === undefined) return undefined;
  try {
    const varz = (await (await fetch(`${monitorUrl}/varz`)).json()) as { in_msgs: number; out_msgs: number; in_bytes: number; out_bytes: number };
    return { messagesIn: varz.in_msgs, messagesOut: varz.out_msgs, bytesIn: varz.in_bytes, bytesOut: varz.out_bytes };
  } catch {
    return undefined;
  }
}

function trafficPer(before: Traffic | undefined, after: Traffic | undefined, operations: number): Traffic | undefined {
  if (before === undefined || after === undefined) return undefined;
  const per = (key: keyof Traffic) => (after[key] - before[key]) / operations;
  return { messagesIn: per('messagesIn'), messagesOut: per('messagesOut'), bytesIn: per('bytesIn'), bytesOut: per('bytesOut') };
}

// ── messages stored per operation ───────────────────────────────────────────

/** Every stream's message count, read through the admin connection. */
async function streamCounts(jsm: JetStreamManager): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for await (const info of jsm.streams.list()) counts.set(info.config.name, info.state.messages);
  return counts;
}

function storedPer(before: Map<string, number>, after: Map<string, number>, operations: number): Record<string, number> {
  const perOp: Record<string, number> = {};
  for (const [name, count] of after) {
    const added = count - (before.get(name) ?? 0);
    if (added > 0) perOp[name] = added / operations;
  }
  return perOp;
}

// ── CPU per operation ───────────────────────────────────────────────────────

/** Cumulative user + system CPU ms of a process (all its threads), from /proc (Linux; 10 ms ticks); undefined elsewhere. */
export function cpuMsOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // clock ticks at USER_HZ 100
  } catch {
    return undefined;
  }
}

type Roles = Record<string, (number | undefined)[]>;

/** Samples every role's processes; `stop()` answers CPU ms per operation for each role it could read. */
function cpuMeter(roles: Roles): { stop(operations: number): Record<string, number> } {
  const read = () => Object.fromEntries(Object.entries(roles).map(([role, pids]) => [role, pids.map(cpuMsOf)]));
  const before = read();
  const self = process.cpuUsage();
  return {
    stop: (operations) => {
      const after = read();
      const perOp: Record<string, number> = {};
      for (const [role, values] of Object.entries(after)) {
        const start = before[role]!;
        if (values.some((v, i) => v === undefined || start[i] === undefined)) continue;
        perOp[role] = values.reduce<number>((sum, v, i) => sum + (v! - start[i]!), 0) / operations;
      }
      const client = process.cpuUsage(self);
      perOp.client = (client.user + client.system) / 1000 / operations;
      perOp.total = Object.values(perOp).reduce((a, b) => a + b, 0);
      return perOp;
    },
  };
}

/**
 * The machine's speed drifts between seconds (other tenants, CPU frequency), so one baseline
 * phase followed by one convoke phase measures the drift as much as convoke. The phases alternate
 * instead — baseline, convoke, baseline, convoke, … — and each round's ratio compares two phases
 * measured back to back; the summary takes the median round.
 */
export async function natsBench(options: NatsBenchOptions): Promise<void> {
  const seconds = options.seconds ?? 5;
  const concurrency = options.concurrency ?? 32;
  const rounds = options.rounds ?? 5;
  const warmupSeconds = options.warmupSeconds ?? 10;
  process.stderr.write(
    `nats: durable mode, ${peerCount} peer processes, quorum ${quorum}, jetstream store, ${concurrency} in flight, ${seconds} s per phase, ${rounds} rounds after ${warmupSeconds} s of warm-up each, ${batching(options.resultBatchMs)}\n`,
  );
  const fixture = await startDeployment(options.resultBatchMs);
  try {
    const baseline = await startBaseline(fixture);
    try {
      const convoke = await startConvoke(fixture, baseline.jsm);
      if (warmupSeconds > 0) {
        process.stderr.write(`  warm-up: ${warmupSeconds} s closed loop per contender, not measured\n`);
        await baseline.warm(warmupSeconds, concurrency);
        await convoke.warm(warmupSeconds, concurrency);
      }
      const results: Round[] = [];
      for (let round = 1; round <= rounds; round++) {
        process.stderr.write(`  round ${round}/${rounds}\n`);
        const b = await baseline.measure(seconds, concurrency);
        const c = await convoke.measure(seconds, concurrency);
        results.push({ round, baseline: b, convoke: c, ratio: c.opsPerSecond / b.opsPerSecond });
      }
      const curve: CurvePoint[] = [];
      for (const rate of options.rates ?? []) {
        process.stderr.write(`  latency at ${rate} operations/s offered\n`);
        curve.push({ ratePerSecond: rate, baseline: await baseline.offer(seconds, rate), convoke: await convoke.offer(seconds, rate) });
      }
      report(options.json, { seconds, concurrency, warmupSeconds, resultBatchMs: options.resultBatchMs, rounds: results, curve });
    } finally {
      await baseline.stop();
    }
  } finally {
    await fixture.dispose();
  }
}

interface CurvePoint {
  ratePerSecond: number;
  baseline: OpenLoopResult;
  convoke: OpenLoopResult;
}

interface Round {
  round: number;
  baseline: Run;
  convoke: Run;
  ratio: number;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0
    ? Number.NaN
    : sorted.length % 2 === 1
      ? sorted[(sorted.length - 1) / 2]!
      : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
};

const batching = (resultBatchMs: number | undefined) =>
  resultBatchMs === undefined ? 'result batching at its default' : resultBatchMs === 0 ? 'result batching off' : `result batching ${resultBatchMs} ms`;

function report(
  json: boolean,
  r: { seconds: number; concurrency: number; warmupSeconds: number; resultBatchMs: number | undefined; rounds: Round[]; curve: CurvePoint[] },
): void {
  const medianRound = [...r.rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor((r.rounds.length - 1) / 2)]!;
  const summary = {
    throughputRatio: median(r.rounds.map((x) => x.ratio)),
    convokeOpsPerSecond: median(r.rounds.map((x) => x.convoke.opsPerSecond)),
    baselineOpsPerSecond: median(r.rounds.map((x) => x.baseline.opsPerSecond)),
    convokeP99HalfLoadMs: median(r.rounds.map((x) => x.convoke.halfLoad?.p99Ms ?? Number.NaN)),
    baselineP99HalfLoadMs: median(r.rounds.map((x) => x.baseline.halfLoad?.p99Ms ?? Number.NaN)),
  };
  const halfLoad = (m: Run) => (m.halfLoad ? `${fixed(m.halfLoad.p99Ms)} (@${fixed(m.halfLoad.ratePerSecond, 0)}/s)` : '-');
  const rows = r.rounds.flatMap((x) => [
    [x.round, 'baseline', fixed(x.baseline.opsPerSecond, 0), fixed(x.baseline.p50Ms), fixed(x.baseline.p99Ms), halfLoad(x.baseline), x.baseline.operations, ''],
    [
      x.round,
      'convoke',
      fixed(x.convoke.opsPerSecond, 0),
      fixed(x.convoke.p50Ms),
      fixed(x.convoke.p99Ms),
      halfLoad(x.convoke),
      x.convoke.operations,
      fixed(x.ratio, 3),
    ],
  ]);
  rows.push(['median', 'baseline', fixed(summary.baselineOpsPerSecond, 0), '', '', fixed(summary.baselineP99HalfLoadMs), '', '']);
  rows.push(['median', 'convoke', fixed(summary.convokeOpsPerSecond, 0), '', '', fixed(summary.convokeP99HalfLoadMs), '', fixed(summary.throughputRatio, 3)]);
  printRows(
    json,
    `NATS durable mode — ${peerCount} peer processes, quorum ${quorum}, ${r.concurrency} in flight, ${r.seconds} s per phase, phases alternating after ${r.warmupSeconds} s of warm-up each (one nats-server)\n` +
      `baseline: scatter-gather on nats.js (JetStream acks, no convoke); convoke: command API, jetstream store, ${batching(r.resultBatchMs)}`,
    ['round', 'run', 'decided ops/s', 'p50 ms', 'p99 ms', 'p99 ms at half load', 'operations', 'throughput ratio'],
    rows,
    { ...r, summary },
  );
  if (!json && r.curve.length > 0) {
    const cells = (m: OpenLoopResult) => [fixed(m.p50Ms), fixed(m.p90Ms), fixed(m.p99Ms), fixed(m.maxMs)];
    printRows(
      false,
      `Decision latency against offered rate (open loop, ${r.seconds} s per rate and contender, after the rounds; ms)`,
      ['offered/s', 'baseline p50', 'p90', 'p99', 'max', 'convoke p50', 'p90', 'p99', 'max'],
      r.curve.map((c) => [c.ratePerSecond, ...cells(c.baseline), ...cells(c.convoke)]),
      undefined,
    );
  }
  if (!json) reportMedianRound(medianRound);
}

/** Where the median round's time and traffic went: messages stored, broker traffic and CPU per operation. */
function reportMedianRound(medianRound: Round): void {
  {
    const { baseline, convoke } = medianRound;
    const rows = [
      ...Object.entries(baseline.storedPerOperation).map(([name, n]) => [name, fixed(n), '']),
      ...Object.entries(convoke.storedPerOperation).map(([name, n]) => [name, '', fixed(n)]),
    ];
    const total = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);
    rows.push(['total', fixed(total(baseline.storedPerOperation)), fixed(total(convoke.storedPerOperation))]);
    printRows(
      false,
      `Messages stored per decided operation in the closed loop of the median round (${medianRound.round}), by stream (read from the server's stream state)`,
      ['stream', 'baseline', 'convoke'],
      rows,
      undefined,
    );
  }
  if (medianRound.baseline.trafficPerOperation && medianRound.convoke.trafficPerOperation) {
    const b = medianRound.baseline.trafficPerOperation;
    const c = medianRound.convoke.trafficPerOperation;
    const kb = (n: number) => fixed(n / 1024);
    printRows(
      false,
      `nats-server traffic per decided operation in the closed loop of the median round (${medianRound.round}) (its /varz counters)`,
      ['', 'baseline', 'convoke'],
      [
        ['messages in', fixed(b.messagesIn), fixed(c.messagesIn)],
        ['messages out', fixed(b.messagesOut), fixed(c.messagesOut)],
        ['KiB in', kb(b.bytesIn), kb(c.bytesIn)],
        ['KiB out', kb(b.bytesOut), kb(c.bytesOut)],
      ],
      undefined,
    );
  }
  if (Object.keys(medianRound.convoke.cpuMsPerOperation).length > 1) {
    const { baseline, convoke } = medianRound;
    const roles = [...new Set([...Object.keys(baseline.cpuMsPerOperation), ...Object.keys(convoke.cpuMsPerOperation)])];
    printRows(
      false,
      `CPU per decided operation in the closed loop of the median round (${medianRound.round}) (ms, user + system, from /proc)`,
      ['process', 'baseline', 'convoke'],
      roles.map((role) => [role, fixed(baseline.cpuMsPerOperation[role] ?? Number.NaN), fixed(convoke.cpuMsPerOperation[role] ?? Number.NaN)]),
      undefined,
    );
  }
}

// ── convoke ──────────────────────────────────────────────────────────────────

async function startDeployment(resultBatchMs: number | undefined): Promise<NatsDeploymentFixture> {
  const peers = peerIds(peerCount);
  const bundle = reviewBundle({ completion: { mode: 'quorum', count: quorum }, timeoutMs: 30_000, leaseMs: 30_000, renewIntervalMs: 10_000 });
  return startBenchDeployment({ bundle, peers, store: 'jetstream', ...(resultBatchMs === undefined ? {} : { resultBatchMs }) });
}

/**
 * A durable-mode deployment for a bench, started and ready: nats-server (JetStream, monitoring,
 * the deployment's permissions), `convoke serve` on `store` and one `convoke peer` process per peer
 * that approves `review` at once, and the command principal `bench`. The serve process's log
 * (info: a line per admission, decision and settlement) goes to a file, as a service manager sends
 * it: a pipe read by this busy process would fill and make the server wait on it.
 */
export async function startBenchDeployment(options: {
  bundle: JsonObject;
  peers: string[];
  store: 'jetstream' | 'sqlite';
  resultBatchMs?: number;
}): Promise<NatsDeploymentFixture> {
  const { bundle, peers, store, resultBatchMs } = options;
  const fixture = await NatsDeploymentFixture.start({
    mode: 'durable',
    store,
    bundle,
    groups: { reviewers: peers },
    peers: Object.fromEntries(peers.map((p) => [p, { interactions: { review: { result: { verdict: 'approve' } } } }])),
    commandClients: ['bench'],
    waitMsMax: 30_000,
    monitoring: true,
    serveLogToFile: true,
    ...(resultBatchMs === undefined ? {} : { resultBatchMs }),
  });
  try {
    await Promise.all([fixture.startServe(), fixture.startPeers()]);
  } catch (error) {
    await fixture.dispose();
    throw error;
  }
  return fixture;
}

interface Contender {
  /** One phase: a few sequential operations, the closed loop (throughput, latency, CPU) and the open loop at half that throughput. */
  measure(seconds: number, concurrency: number): Promise<Run>;
  /** The closed loop, unmeasured. */
  warm(seconds: number, concurrency: number): Promise<void>;
  /** One open-loop phase at a fixed offered rate. */
  offer(seconds: number, ratePerSecond: number): Promise<OpenLoopResult>;
}

async function measurePhase(
  name: string,
  one: () => Promise<void>,
  roles: Roles,
  jsm: JetStreamManager,
  monitorUrl: string | undefined,
  seconds: number,
  concurrency: number,
): Promise<Run> {
  for (let i = 0; i < warmupOperations; i++) await one();
  const storedBefore = await streamCounts(jsm);
  const trafficBefore = await serverCounters(monitorUrl);
  const meter = cpuMeter(roles);
  let progressShown = false;
  const m = await closedLoop(seconds, concurrency, one, (n) => ((progressShown = true), process.stderr.write(`\r  ${name}: ${n} decided`)));
  if (progressShown) process.stderr.write('\n');
  const cpuMsPerOperation = meter.stop(m.operations);
  const trafficPerOperation = trafficPer(trafficBefore, await serverCounters(monitorUrl), m.operations);
  // Siblings that answer after the last decisions may still be storing: about 2 messages for each of the last operations in flight.
  const storedPerOperation = storedPer(storedBefore, await streamCounts(jsm), m.operations);
  const full = summarize({ ...m, name });
  const halfLoad = await openLoop(seconds, full.opsPerSecond / 2, one);
  return { ...full, halfLoad, cpuMsPerOperation, storedPerOperation, trafficPerOperation };
}

async function startConvoke(fixture: NatsDeploymentFixture, jsm: JetStreamManager): Promise<Contender> {
  const client = await fixture.client('bench');
  const prefix = randomBytes(4).toString('hex');
  let next = 0;
  const one = async () => {
    const r = resultOf(await client.invoke('review', { document: 'bench' }, { key: `${prefix}-${next++}`, waitFor: 'decision', waitMs: 30_000 }));
    if (r.decision?.outcome !== 'success') throw new Error(`unexpected decision ${JSON.stringify(r.decision)}`);
  };
  return {
    warm: async (seconds, concurrency) => void (await closedLoop(seconds, concurrency, one)),
    offer: (seconds, ratePerSecond) => openLoop(seconds, ratePerSecond, one),
    measure: (seconds, concurrency) =>
      measurePhase(
        'convoke over NATS (command API, jetstream store)',
        one,
        { 'nats-server': [fixture.server.process.pid], coordinator: [fixture.serve?.child.pid], peers: [...fixture.peers.values()].map((p) => p.child.pid) },
        jsm,
        fixture.server.monitorUrl,
        seconds,
        concurrency,
      ),
  };
}

// ── the baseline ─────────────────────────────────────────────────────────────

const baseStreams = { requests: 'BENCH_BASE_REQ', results: 'BENCH_BASE_RES' };

async function adminConnection(fixture: NatsDeploymentFixture): Promise<NatsConnection> {
  return connect({ servers: fixture.url, user: 'admin', pass: fixture.adminSecret() });
}

/** File-backed streams like convoke's: limits retention, discard new. */
async function createBaselineStreams(nc: NatsConnection): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const common = { storage: StorageType.File, retention: RetentionPolicy.Limits, discard: DiscardPolicy.New };
  await jsm.streams.add({ name: baseStreams.requests, subjects: ['base.*.request.*'], ...common });
  await jsm.streams.add({ name: baseStreams.results, subjects: ['base.*.result.*'], ...common });
  for (const p of peerIds(peerCount)) {
    await jsm.consumers.add(baseStreams.requests, {
      durable_name: `base-${p}`,
      filter_subject: `base.*.request.${p}`,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
    });
  }
  await jsm.consumers.add(baseStreams.results, {
    durable_name: 'base-coordinator',
    filter_subject: 'base.*.result.*',
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
  });
}

/** The baseline's streams, peer processes and result consumer, kept across rounds; `stop` removes them. */
async function startBaseline(fixture: NatsDeploymentFixture): Promise<Contender & { stop(): Promise<void>; jsm: JetStreamManager }> {
  const nc = await adminConnection(fixture);
  const peers: ChildProcess[] = [];
  let messages: ConsumerMessages | undefined;
  const stop = async () => {
    await messages?.close();
    for (const child of peers) child.kill('SIGTERM');
    await Promise.all(peers.map((child) => (child.exitCode === null ? new Promise((r) => child.once('exit', r)) : undefined)));
    const jsm = await jetstreamManager(nc);
    for (const s of Object.values(baseStreams)) await jsm.streams.delete(s).catch(() => undefined);
    await nc.close();
  };
  try {
    await createBaselineStreams(nc);
    for (const p of peerIds(peerCount)) peers.push(await startBaselinePeer(fixture, p));
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const waiting = new Map<string, { approvals: number; done: () => void }>();
    messages = await (
      await js.consumers.get(baseStreams.results, 'base-coordinator')
    ).consume({
      max_messages: 256,
      callback: (m) => {
        const op = m.subject.split('.')[1]!;
        const reply = JSON.parse(new TextDecoder().decode(m.data)) as { verdict: string };
        m.ack();
        const entry = waiting.get(op);
        if (entry && reply.verdict === 'approve' && ++entry.approvals === quorum) {
          waiting.delete(op);
          entry.done();
        }
      },
    });
    const prefix = randomBytes(4).toString('hex');
    let next = 0;
    const one = async () => {
      const op = `${prefix}${next++}`;
      const decided = new Promise<void>((done) => waiting.set(op, { approvals: 0, done }));
      const body = encoder.encode(JSON.stringify({ op, document: 'bench' }));
      await Promise.all(peerIds(peerCount).map((p) => js.publish(`base.${op}.request.${p}`, body, { msgID: `${op}.${p}` })));
      await decided;
    };
    return {
      stop,
      jsm,
      warm: async (seconds, concurrency) => void (await closedLoop(seconds, concurrency, one)),
      offer: (seconds, ratePerSecond) => openLoop(seconds, ratePerSecond, one),
      measure: (seconds, concurrency) =>
        measurePhase(
          'baseline scatter-gather (nats.js, JetStream acks, no convoke)',
          one,
          { 'nats-server': [fixture.server.process.pid], peers: peers.map((p) => p.pid) },
          jsm,
          fixture.server.monitorUrl,
          seconds,
          concurrency,
        ),
    };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

function startBaselinePeer(fixture: NatsDeploymentFixture, peerId: string): Promise<ChildProcess> {
  const args = thisFile.endsWith('.ts') ? ['--import', 'tsx', thisFile] : [thisFile];
  const child = spawn(process.execPath, [...args, '--baseline-peer', peerId, fixture.url], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, BENCH_NATS_ADMIN_PASSWORD: fixture.adminSecret() },
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      if (out.includes('ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`baseline peer ${peerId} exited with ${code}`)));
  });
}

/** A baseline peer process: pulls its requests, publishes the reply with a JetStream ack, then acks the request. */
async function baselinePeer(peerId: string, url: string): Promise<void> {
  const nc = await connect({ servers: url, user: 'admin', pass: process.env.BENCH_NATS_ADMIN_PASSWORD });
  const js = jetstream(nc);
  const reply = encoder.encode(JSON.stringify({ verdict: 'approve' }));
  const messages = await (
    await js.consumers.get(baseStreams.requests, `base-${peerId}`)
  ).consume({
    max_messages: 256,
    callback: (m) => {
      JSON.parse(new TextDecoder().decode(m.data));
      const op = m.subject.split('.')[1]!;
      void js.publish(`base.${op}.result.${peerId}`, reply, { msgID: `${op}.${peerId}.result` }).then(() => m.ack());
    },
  });
  process.stdout.write('ready\n');
  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
  await messages.close();
  await nc.close();
}

// ── open loop ────────────────────────────────────────────────────────────────

interface OpenLoopResult {
  ratePerSecond: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  operations: number;
}

/** Starts operations at a fixed rate for `seconds` (whatever their latency) and reports their latency percentiles. */
async function openLoop(seconds: number, ratePerSecond: number, one: () => Promise<void>): Promise<OpenLoopResult> {
  const latenciesMs: number[] = [];
  const running: Promise<void>[] = [];
  const start = performance.now();
  const total = Math.max(1, Math.floor(seconds * ratePerSecond));
  for (let i = 0; i < total; i++) {
    const dueAt = start + (i * 1000) / ratePerSecond;
    const waitMs = dueAt - performance.now();
    if (waitMs > 1) await new Promise((r) => setTimeout(r, waitMs));
    const t0 = performance.now();
    running.push(one().then(() => void latenciesMs.push(performance.now() - t0)));
  }
  await Promise.all(running);
  latenciesMs.sort((a, b) => a - b);
  return {
    ratePerSecond,
    p50Ms: percentile(latenciesMs, 50),
    p90Ms: percentile(latenciesMs, 90),
    p99Ms: percentile(latenciesMs, 99),
    maxMs: latenciesMs.at(-1) ?? Number.NaN,
    operations: latenciesMs.length,
  };
}

// Runnable on its own: `node --import tsx bench/nats.ts [--json] [--seconds N]`; `--baseline-peer` is internal.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--baseline-peer');
  if (at >= 0) await baselinePeer(args[at + 1]!, args[at + 2]!);
  else {
    const secondsAt = args.indexOf('--seconds');
    const roundsAt = args.indexOf('--rounds');
    const warmupAt = args.indexOf('--warmup');
    const ratesAt = args.indexOf('--rates');
    await natsBench({
      json: args.includes('--json'),
      ...(secondsAt >= 0 ? { seconds: Number(args[secondsAt + 1]) } : {}),
      ...(roundsAt >= 0 ? { rounds: Number(args[roundsAt + 1]) } : {}),
      ...(warmupAt >= 0 ? { warmupSeconds: Number(args[warmupAt + 1]) } : {}),
      ...(ratesAt >= 0 ? { rates: parseRates(args[ratesAt + 1]) } : {}),
    });
  }
}
