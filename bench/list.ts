/**
 * `npm run bench -- list [--json] [--sizes 1000,100000] [--jetstream-sizes 1000,10000]`: the time
 * of one page (50 rows) of the operations index on SQLite at each size — the first page, a page
 * deep in the list (by cursor), one principal's page, a phase's page and the stuck page — so that
 * a page's cost can be seen not to grow with the number of stored operations. Operations are
 * admitted through the store itself (each create maintains its row, as in a deployment) into a
 * temporary file with synchronous=normal to fill it faster; reads are what is timed. With
 * `--jetstream-sizes` the same on a JetStream store (a nats-server on free ports), whose index
 * reads every row per page.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { SqliteEventStore } from '../src/adapters/store/sqlite.js';
import { JetStreamEventStore } from '../src/adapters/store/jetstream.js';
import type { EventStore } from '../src/adapters/store/types.js';
import { SystemClock, VirtualClock } from '../src/contract/clock.js';
import { stuckBoundsDefault, type IndexQuery } from '../src/events/operation-index.js';
import { renderTable } from '../src/cli/table.js';
import { admission } from '../test/conformance/index.js';
import { startJetStreamServer } from '../test/support/jetstream-server.js';

const principals = 16;
const pageRows = 50;
const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };

interface Case {
  name: string;
  query(store: EventStore, nowMs: number): Promise<IndexQuery>;
}

const cases: Case[] = [
  { name: 'first page, all principals', query: async () => ({ limit: pageRows }) },
  {
    name: 'a page half-way down (cursor)',
    query: async (store) => {
      // Walk to the middle once (not timed); the timed read starts there.
      let after: IndexQuery['after'];
      const probe = await store.index.list({ limit: 1 });
      const top = probe.rows[0];
      if (!top) return { limit: pageRows };
      let page = await store.index.list({ limit: 500 });
      for (let i = 0; i < 100 && page.next; i++) {
        after = page.next;
        page = await store.index.list({ limit: 500, after });
      }
      return { limit: pageRows, ...(after ? { after } : {}) };
    },
  },
  { name: 'one principal', query: async () => ({ limit: pageRows, principalId: 'svc-7' }) },
  { name: 'one principal, phase admitted', query: async () => ({ limit: pageRows, principalId: 'svc-7', phase: 'admitted' }) },
  {
    name: 'stuck (every operation is)',
    query: async (_store, nowMs) => ({ limit: pageRows, stuck: { nowMs: nowMs + 3_600_000, bounds: stuckBoundsDefault } }),
  },
];

const idOf = (i: number) => 'op' + createHash('sha256').update(`bench-list-${i}`).digest('hex');

async function fill(store: EventStore, count: number, setTime?: (i: number) => void): Promise<void> {
  for (let i = 0; i < count; i++) {
    setTime?.(i);
    const outcome = await store.create(
      idOf(i),
      admission(idOf(i), guard, { principalId: `svc-${i % principals}`, interaction: i % 2 === 0 ? 'review' : 'quick', timeoutMs: 60_000 }),
    );
    if (outcome.kind !== 'ok') throw new Error(`create ${i}: ${outcome.kind} ${outcome.description}`);
  }
}

/** Median and 95th percentile of `runs` timed pages, in ms. */
async function timePages(store: EventStore, query: IndexQuery, runs: number): Promise<{ medianMs: number; p95Ms: number; rows: number }> {
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    const page = await store.index.list(query);
    times.push(performance.now() - started);
    rows = page.rows.length;
  }
  times.sort((a, b) => a - b);
  return { medianMs: times[Math.floor(times.length / 2)] ?? 0, p95Ms: times[Math.floor(times.length * 0.95)] ?? 0, rows };
}

interface Measurement {
  store: string;
  operations: number;
  case: string;
  rows: number;
  medianMs: number;
  p95Ms: number;
}

async function measureSqlite(size: number): Promise<Measurement[]> {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-bench-list-'));
  const clock = new VirtualClock(1_800_000_000_000);
  const store = new SqliteEventStore({ path: join(dir, 'ops.db'), clock, synchronous: 'normal', limits: { operationsMax: Math.max(size, 1000) } });
  try {
    const filling = performance.now();
    await fill(store, size, () => clock.set(clock.nowMs() + 1));
    process.stderr.write(`sqlite: ${size} operations admitted in ${((performance.now() - filling) / 1000).toFixed(1)} s\n`);
    const out: Measurement[] = [];
    for (const c of cases) {
      const query = await c.query(store, clock.nowMs());
      const t = await timePages(store, query, 200);
      out.push({ store: 'sqlite', operations: size, case: c.name, ...t });
      progress(out.at(-1));
    }
    return out;
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function measureJetStream(size: number): Promise<Measurement[]> {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url, limits: { operationsMax: Math.max(size, 1000) } });
  try {
    const filling = performance.now();
    await fill(store, size);
    process.stderr.write(`jetstream: ${size} operations admitted in ${((performance.now() - filling) / 1000).toFixed(1)} s\n`);
    const out: Measurement[] = [];
    for (const c of cases) {
      const query = await c.query(store, new SystemClock().nowMs());
      const t = await timePages(store, query, 5);
      out.push({ store: 'jetstream', operations: size, case: c.name, ...t });
      progress(out.at(-1));
    }
    return out;
  } finally {
    await store.close();
    await server.dispose();
  }
}

/** Each figure as soon as it is measured (a long run stopped early keeps what it measured). */
function progress(m: Measurement | undefined): void {
  if (m) process.stderr.write(`${m.store} ${m.operations}: ${m.case}: ${m.rows} rows, median ${m.medianMs.toFixed(3)} ms, p95 ${m.p95Ms.toFixed(3)} ms\n`);
}

function sizesOption(args: string[], name: string, fallback: number[]): number[] {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const sizes = (args[at + 1] ?? '').split(',').map(Number);
  if (sizes.length === 0 || !sizes.every((n) => Number.isSafeInteger(n) && n > 0))
    throw new Error(`${name} must be a comma-separated list of positive integers`);
  return sizes;
}

export async function listBench(options: { json: boolean; args: string[] }): Promise<void> {
  const results: Measurement[] = [];
  for (const size of sizesOption(options.args, '--sizes', [1_000, 100_000])) results.push(...(await measureSqlite(size)));
  for (const size of sizesOption(options.args, '--jetstream-sizes', [])) results.push(...(await measureJetStream(size)));
  if (options.json) {
    process.stdout.write(JSON.stringify(results, null, 2) + '\n');
    return;
  }
  process.stdout.write(`\nOne page (${pageRows} rows) of the operations index; median and p95 over 200 reads (SQLite) or 5 (JetStream)\n`);
  process.stdout.write(
    renderTable(
      ['store', 'operations', 'page', 'rows', 'median ms', 'p95 ms'],
      results.map((r) => [r.store, r.operations, r.case, r.rows, r.medianMs.toFixed(3), r.p95Ms.toFixed(3)]),
    ),
  );
}
