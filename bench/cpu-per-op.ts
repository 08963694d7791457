/**
 * CPU microseconds per decided operation (5 in-process peers, quorum 3, memory mode), measured
 * with process.cpuUsage over serial batches: steadier than wall-clock throughput on a shared machine.
 * It counts all of the process's threads, the garbage collector's helpers included.
 */
import { SystemClock } from '../src/contract/clock.js';
import { createEmbedded } from '../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../src/deployment/examples.js';

export async function cpuPerOp(options: { json: boolean; operations?: number }): Promise<void> {
  const peers = peerIds(5);
  const embedded = await createEmbedded({
    clock: new SystemClock(),
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 3 }, timeoutMs: 30_000, leaseMs: 30_000 }),
    groups: { reviewers: peers },
  });
  for (const p of peers) await embedded.addPeer(p, { review: () => ({ verdict: 'approve' }) });
  const caller = { principalId: 'bench', senderPeerId: null };
  let n = 0;
  const batch = async (count: number) => {
    await Promise.all(
      Array.from({ length: count }, async () => {
        const { result } = await embedded.coordinator.invoke(caller, {
          contract: embedded.bundle.ref,
          interaction: 'review',
          invocationKey: `k${n++}`,
          input: { document: 'd' },
        });
        await embedded.coordinator.wait('bench', result.operationId, 'decision', 30_000);
      }),
    );
  };
  for (let i = 0; i < 20; i++) await batch(50); // warm-up
  const operations = options.operations ?? 4000;
  const samples: number[] = [];
  for (let done = 0; done < operations; done += 500) {
    const before = process.cpuUsage();
    await batch(500);
    const used = process.cpuUsage(before);
    samples.push((used.user + used.system) / 500);
  }
  await embedded.close();
  samples.sort((a, b) => a - b);
  const median = samples[Math.floor(samples.length / 2)]!;
  if (options.json) process.stdout.write(JSON.stringify({ cpuMicrosecondsPerOperation: median, samples }) + '\n');
  // process.cpuUsage counts every thread of the process (the collector's helpers too), so this is
  // not a bound on one core's throughput: the main thread's share is smaller.
  else process.stdout.write(`cpu per decided operation: ${median.toFixed(0)} µs, all threads (median of ${samples.length} batches of 500 in flight)\n`);
}
