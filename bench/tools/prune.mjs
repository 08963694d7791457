// node bench/tools/prune.mjs <checkout root> <sqlite|memory|jetstream> <settled> [open]
// What `convoke prune` costs: <settled> operations, each admitted and settled in six transitions
// (the conformance suite's admission and lifecycle), and [open] (default a tenth of them) left
// open, written to a fresh store on a virtual clock (JetStream: a nats-server of its own, on a free
// loopback port, stamping its own time); then one prune two hours later with a period
// of an hour (every settled one goes, every open one stays), timed. Prints the seeding time, the
// prune's time and rate, and for SQLite the file's pages in use before and after (a pruned log's
// pages are free for reuse; the file shrinks only by VACUUM). Run from a built checkout
// (`npx tsc -p tsconfig.json`).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';

const [root, kind, settledArg, openArg] = process.argv.slice(2);
const settled = Number(settledArg);
const open = openArg === undefined ? Math.floor(settled / 10) : Number(openArg);
if (!['sqlite', 'memory', 'jetstream'].includes(kind) || !Number.isSafeInteger(settled) || !Number.isSafeInteger(open))
  throw new Error('usage: prune.mjs <checkout root> <sqlite|memory|jetstream> <settled> [open]');
const mod = (p) => import(`${root}/dist/${p}`);
const { VirtualClock } = await mod('src/contract/clock.js');
const { MemoryEventStore } = await mod('src/adapters/store/memory.js');
const { SqliteEventStore } = await mod('src/adapters/store/sqlite.js');
const { JetStreamEventStore } = await mod('src/adapters/store/jetstream.js');
const { startJetStreamServer } = await mod('test/support/jetstream-server.js');
const { pruneOperations } = await mod('src/runtime/retention.js');
const { admission, lifecycle } = await mod('test/conformance/index.js');
const { newOperationId } = await mod('test/conformance/store.js');

const dir = mkdtempSync(join(tmpdir(), 'convoke-prune-bench-'));
const path = join(dir, 'ops.db');
const clock = new VirtualClock(Date.now());
process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;
const server = kind === 'jetstream' ? await startJetStreamServer() : undefined;
const store =
  kind === 'sqlite'
    ? new SqliteEventStore({ path, clock, synchronous: 'normal' })
    : server
      ? await JetStreamEventStore.open({ servers: server.url, requestTimeoutMs: 5000 })
      : new MemoryEventStore({ clock });
const pagesInUse = () => {
  if (kind !== 'sqlite') return null;
  const db = new Database(path, { readonly: true });
  try {
    return db.pragma('page_count', { simple: true }) - db.pragma('freelist_count', { simple: true });
  } finally {
    db.close();
  }
};
try {
  const guard = { notBeforeMs: clock.nowMs() - 3_600_000, notAfterMs: clock.nowMs() + 3_600_000 };
  const seedStarted = performance.now();
  for (let i = 0; i < settled + open; i++) {
    const id = newOperationId(`prune-${i}`);
    let outcome = await store.create(id, admission(id, guard));
    if (outcome.kind !== 'ok') throw new Error(`create: ${JSON.stringify(outcome)}`);
    if (i >= settled) continue;
    for (const next of lifecycle(guard)) {
      outcome = await store.append(id, outcome.revision, next);
      if (outcome.kind !== 'ok') throw new Error(`append: ${JSON.stringify(outcome)}`);
    }
  }
  const seedMs = performance.now() - seedStarted;
  const before = pagesInUse();
  const cpu = process.cpuUsage();
  const started = performance.now();
  const tally = await pruneOperations({ store, nowMs: clock.nowMs() + 2 * 3_600_000, keepMs: 3_600_000 });
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  if (tally.pruned !== settled || tally.open !== open || tally.failures.length > 0) throw new Error(`unexpected tally: ${JSON.stringify(tally)}`);
  console.log(
    JSON.stringify({
      kind,
      settled,
      open,
      seedMs: Math.round(seedMs),
      pruneMs: Math.round(ms),
      prunedPerSecond: Math.round((settled / ms) * 1000),
      cpuMs: Math.round((used.user + used.system) / 1000),
      pagesInUseBefore: before,
      pagesInUseAfter: pagesInUse(),
    }),
  );
} finally {
  await store.close();
  await server?.dispose();
  rmSync(dir, { recursive: true, force: true });
}
