// node bench/tools/fixed-ops.mjs <checkout root> <layout: new|old> <warm> <count>
// A fixed number of memory-mode operations (5 peers, quorum 3), batches of 50 in flight, with
// deadlines long enough to survive valgrind's slowdown. Built to count instructions per operation
// with callgrind, which a loaded machine does not disturb (docs/performance.md): run it with count
// 0 and with count N, and divide the difference by N. `old` loads the module paths from before the
// runtime split (runtime/clock, runtime/embedded, runtime/examples).
const [root, layout, warmArg, countArg] = process.argv.slice(2);
const mod = (p) => import(`${root}/dist/src/${p}`);
const clockMod = layout === 'new' ? await mod('contract/clock.js') : await mod('runtime/clock.js');
const { createEmbedded } = layout === 'new' ? await mod('deployment/embedded.js') : await mod('runtime/embedded.js');
const { peerIds, reviewBundle } = layout === 'new' ? await mod('deployment/examples.js') : await mod('runtime/examples.js');
const peers = peerIds(5);
const embedded = await createEmbedded({
  clock: new clockMod.SystemClock(),
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
const t0 = process.hrtime.bigint();
for (let i = 0; i < count; i += 50) await batch(i, 50);
const ms = Number(process.hrtime.bigint() - t0) / 1e6;
console.log(JSON.stringify({ root, count, ms, opsPerS: Math.round((count / ms) * 1000) }));
await embedded.close();
process.exit(0);
