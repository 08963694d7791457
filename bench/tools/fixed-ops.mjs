// node bench/tools/fixed-ops.mjs <checkout root> <layout: new|old> <warm> <count>
// A fixed number of memory-mode operations (5 peers, quorum 3), batches of 50 in flight, with
// deadlines long enough to survive valgrind's slowdown. Built to count instructions per operation
// with callgrind, which a loaded machine does not disturb (docs/performance.md): run it with count
// 0 and with count N, and divide the difference by N. `old` loads the module paths from before the
// runtime split (runtime/clock, runtime/embedded, runtime/examples). An optional fifth argument
// slows the clock by that factor (timers too), so that under valgrind at a high load average an
// admission still reaches the store inside its time guard.
import { execFileSync } from 'node:child_process';

const [root, layout, warmArg, countArg, slowArg] = process.argv.slice(2);
const mod = (p) => import(`${root}/dist/src/${p}`);
const clockMod = layout === 'new' ? await mod('contract/clock.js') : await mod('runtime/clock.js');
const { createEmbedded } = layout === 'new' ? await mod('deployment/embedded.js') : await mod('runtime/embedded.js');
const { peerIds, reviewBundle } = layout === 'new' ? await mod('deployment/examples.js') : await mod('runtime/examples.js');
const peers = peerIds(5);
const slow = Number(slowArg ?? 1);
const startMs = Date.now();
const slowClock = {
  nowMs: () => startMs + Math.floor((Date.now() - startMs) / slow),
  at(atMs, fn) {
    const timer = setTimeout(fn, Math.min(2 ** 31 - 1, Math.max(0, (atMs - slowClock.nowMs()) * slow)));
    return { cancel: () => clearTimeout(timer) };
  },
};
const embedded = await createEmbedded({
  clock: slow === 1 ? new clockMod.SystemClock() : slowClock,
  bundle: reviewBundle({ completion: { mode: 'quorum', count: 3 }, timeoutMs: 3_600_000, leaseMs: 3_600_000, renewIntervalMs: 1_000_000 }),
  groups: { reviewers: peers },
});
for (const p of peers) await embedded.addPeer(p, { review: () => ({ verdict: 'approve' }) });
const caller = { principalId: 'bench', senderPeerId: null };
const one = async (i) => {
  const { result } = await embedded.coordinator.invoke(caller, {
    contract: embedded.bundle.ref,
    interaction: 'review',
    invocationKey: `k${i}`,
    input: { document: 'd' },
  });
  const waited = await embedded.coordinator.wait('bench', result.operationId, 'decision', 3_600_000);
  if (waited.result.decision?.outcome !== 'success') throw new Error(JSON.stringify(waited.result.decision));
};
const batch = async (from, n) => {
  const all = [];
  for (let i = 0; i < n; i++) all.push(one(from + i));
  await Promise.all(all);
};
const warm = Number(warmArg),
  count = Number(countArg);
for (let i = 0; i < warm; i += 50) await batch(-1_000_000 + i, 50);
// Under `valgrind --tool=callgrind --instr-atstart=no`, CONVOKE_CALLGRIND=1 counts the measured
// operations alone: instrumentation is switched on after the warm-up and off before shutdown.
const callgrind = (state) => {
  if (process.env.CONVOKE_CALLGRIND === '1') execFileSync('callgrind_control', ['-i', state, String(process.pid)], { stdio: 'ignore' });
};
callgrind('on');
const t0 = process.hrtime.bigint();
for (let i = 0; i < count; i += 50) await batch(i, 50);
const ms = Number(process.hrtime.bigint() - t0) / 1e6;
callgrind('off');
console.log(JSON.stringify({ root, count, ms, opsPerS: Math.round((count / ms) * 1000) }));
await embedded.close();
process.exit(0);
