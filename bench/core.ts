/**
 * `npm run bench -- core`: decided operations per second in memory mode (5 in-process peers,
 * quorum 3, memory store, in-process bus), with p50/p99 admission-to-decision latency, beside a
 * baseline measured in the same run: a hand-rolled scatter-gather on the same bus (publish 5
 * requests, count 3 replies) with no admission, log, fences or decision record.
 */
import { SystemClock } from '../src/contract/clock.js';
import { createEmbedded } from '../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../src/deployment/examples.js';
import { MemoryBus } from '../src/adapters/transport/memory.js';
import { closedLoop, fixed, printRows, summarize } from './stats.js';

export interface CoreBenchOptions {
  json: boolean;
  seconds?: number;
  concurrency?: number;
}

async function convokeRun(seconds: number, concurrency: number) {
  const peers = peerIds(5);
  const embedded = await createEmbedded({
    clock: new SystemClock(),
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 3 }, timeoutMs: 30_000, leaseMs: 30_000 }),
    groups: { reviewers: peers },
  });
  for (const p of peers) await embedded.addPeer(p, { review: () => ({ verdict: 'approve' }) });
  const caller = { principalId: 'bench', senderPeerId: null };
  const one = async (i: number) => {
    const { result } = await embedded.coordinator.invoke(caller, {
      contract: embedded.bundle.ref,
      interaction: 'review',
      invocationKey: `k${i}`,
      input: { document: 'd' },
    });
    const waited = await embedded.coordinator.wait('bench', result.operationId, 'decision', 30_000);
    if (waited.result.decision?.outcome !== 'success') throw new Error(`unexpected decision ${JSON.stringify(waited.result.decision)}`);
  };
  for (let i = 0; i < 500; i++) await one(-1 - i); // warm-up
  const m = await closedLoop(seconds, concurrency, one, (n) => process.stderr.write(`\r  convoke: ${n} decided`));
  process.stderr.write('\n');
  await embedded.close();
  return summarize({ ...m, name: 'convoke memory mode' });
}

async function baselineRun(seconds: number, concurrency: number) {
  const bus = new MemoryBus();
  const peers = peerIds(5);
  const coordinator = bus.connect('coordinator');
  const waiting = new Map<string, { count: number; done: () => void }>();
  await coordinator.subscribe('base.*.result.*', (m) => {
    const op = m.subject.split('.')[1]!;
    const entry = waiting.get(op);
    const reply = JSON.parse(new TextDecoder().decode(m.data)) as { verdict: string };
    if (entry && reply.verdict === 'approve' && ++entry.count === 3) {
      waiting.delete(op);
      entry.done();
    }
  });
  for (const p of peers) {
    const c = bus.connect(p);
    await c.subscribe(`base.*.request.${p}`, async (m) => {
      JSON.parse(new TextDecoder().decode(m.data));
      await c.publish(m.subject.replace('.request.', '.result.'), new TextEncoder().encode(JSON.stringify({ verdict: 'approve' })));
    });
  }
  const one = (i: number) =>
    new Promise<void>((resolve) => {
      const op = `op${i}`;
      waiting.set(op, { count: 0, done: resolve });
      for (const p of peers) void coordinator.publish(`base.${op}.request.${p}`, new TextEncoder().encode(JSON.stringify({ document: 'd', op })));
    });
  const m = await closedLoop(seconds, concurrency, one);
  return summarize({ ...m, name: 'baseline scatter-gather' });
}

export async function coreBench(options: CoreBenchOptions): Promise<void> {
  const seconds = options.seconds ?? 5;
  const concurrency = options.concurrency ?? 64;
  process.stderr.write(`core: 5 peers, quorum 3, ${concurrency} in flight, ${seconds} s each\n`);
  const baseline = process.env.CONVOKE_BENCH_SKIP_BASELINE
    ? { name: 'baseline (skipped)', opsPerSecond: Number.NaN, p50Ms: Number.NaN, p99Ms: Number.NaN, operations: 0 }
    : await baselineRun(seconds, concurrency);
  const convoke = await convokeRun(seconds, concurrency);
  const ratio = convoke.opsPerSecond / baseline.opsPerSecond;
  printRows(
    options.json,
    'core (memory mode, one process)',
    ['run', 'decided ops/s', 'p50 ms', 'p99 ms', 'operations', 'ratio to baseline'],
    [
      [baseline.name, fixed(baseline.opsPerSecond, 0), fixed(baseline.p50Ms), fixed(baseline.p99Ms), baseline.operations, '1.00'],
      [convoke.name, fixed(convoke.opsPerSecond, 0), fixed(convoke.p50Ms), fixed(convoke.p99Ms), convoke.operations, fixed(ratio)],
    ],
    { baseline, convoke, ratio, target: { opsPerSecond: 10_000 } },
  );
}
