// node bench/tools/sqlite-creates.mjs <checkout root> [count] [rounds]
// SQLite creates of the list benchmark's admission in a loop (synchronous=normal, a fresh file per
// round), each folded into a record as the kernel does with a create: handed to the store as the
// committing side's record (RecordAfter) where the build takes one, applied after the create
// where it does not (a build from before the hand-off ignores the argument and folds itself).
// Prints creates/s and CPU per create for each round; run it against two builds' dist/ in
// alternation to compare them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';

const [root, countArg, roundsArg] = process.argv.slice(2);
const count = Number(countArg ?? 2000);
const rounds = Number(roundsArg ?? 3);
const mod = (p) => import(`${root}/dist/${p}`);
const { SqliteEventStore } = await mod('src/adapters/store/sqlite.js');
const { VirtualClock } = await mod('src/contract/clock.js');
const { applyStored } = await mod('src/projections/record.js');
const { admission } = await mod('test/conformance/index.js');

const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
for (let round = 0; round < rounds; round++) {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-creates-'));
  const clock = new VirtualClock(1_800_000_000_000);
  const store = new SqliteEventStore({ path: join(dir, 'ops.db'), clock, synchronous: 'normal', limits: { operationsMax: count + 1 } });
  const transitions = [];
  for (let i = 0; i < count; i++) {
    const id = 'op' + createHash('sha256').update(`creates-${round}-${i}`).digest('hex');
    transitions.push([id, admission(id, guard, { principalId: `svc-${i % 16}` })]);
  }
  const started = performance.now();
  const cpu = process.cpuUsage();
  for (const [id, transition] of transitions) {
    clock.set(clock.nowMs() + 1);
    let record;
    const after = (stored) => (record ??= applyStored(undefined, stored));
    const outcome = await store.create(id, transition, after);
    if (outcome.kind !== 'ok') throw new Error(`${outcome.kind}: ${outcome.description}`);
    after({ revision: outcome.revision, committedAtMs: outcome.committedAtMs, transition });
  }
  const used = process.cpuUsage(cpu);
  const seconds = (performance.now() - started) / 1000;
  const cpuUs = (used.user + used.system) / count;
  process.stdout.write(
    `${root}: ${count} creates in ${seconds.toFixed(2)} s: ${Math.round(count / seconds)} creates/s, ${cpuUs.toFixed(0)} µs CPU per create\n`,
  );
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
