/**
 * `npm run bench -- list [--json] [--sizes 1000,100000] [--stores sqlite,jetstream] [--jetstream-sizes N,…]`:
 * the time of one page (50 rows) of the operations index at each size — the first page, a page
 * deep in the list (by cursor), one principal's page, a principal's phase, the stuck page — and
 * of the stuck counts (the gauge's countStuck), so that a page's cost can be seen not to grow
 * with the number of stored operations. Operations are admitted through the store itself (each
 * create maintains its row, as in a deployment); reads are what is timed.
 *
 * SQLite: a temporary file with synchronous=normal to fill it faster. JetStream: a nats-server on
 * free ports, filled by one client; the pages are read by a second, fresh client, whose first
 * page starts its in-memory view of the index (jetstream-index-feed.ts) — that start is timed on
 * its own, with the heap it added (run node with --expose-gc for a settled figure), and every
 * page after it reads from the view. That first view writes a snapshot of itself
 * (jetstream-index-snapshot.ts); then 1 % more operations are admitted and a third client's
 * first page is timed the same way: its view starts from the snapshot plus that tail. Both
 * starts are in the same run, on the same server. `--jetstream-sizes` overrides `--sizes` for
 * JetStream.
 *
 * One-shot first pages (what `convoke list` pays): a fresh client per read, whose first page
 * (unfiltered, one principal, one interaction, an outcome no operation has, the stuck page) is
 * timed — on JetStream from the paged snapshot (jetstream-index-pages.ts) right after a
 * generation is written and again with a tail of `oneShotTail` rows stored after it, on SQLite
 * a second store client of the same file.
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
import { connect } from '@nats-io/transport-node';

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

/** Admits `count` operations, `inFlight` at a time (the SQLite store serializes them anyway). */
async function fill(store: EventStore, count: number, inFlight: number, setTime?: (i: number) => void, from = 0): Promise<void> {
  const createOne = async (i: number) => {
    setTime?.(i);
    const outcome = await store.create(
      idOf(i),
      admission(idOf(i), guard, { principalId: `svc-${i % principals}`, interaction: i % 2 === 0 ? 'review' : 'quick', timeoutMs: 60_000 }),
    );
    if (outcome.kind !== 'ok') throw new Error(`create ${i}: ${outcome.kind} ${outcome.description}`);
  };
  for (let i = from; i < from + count; i += inFlight)
    await Promise.all(Array.from({ length: Math.min(inFlight, from + count - i) }, (_, k) => createOne(i + k)));
  // An open operation's row waits for a later one (indexRowDelayMs): written now, as a deployment's would be within a second.
  if (store instanceof JetStreamEventStore) await store.index.writeWaiting();
}

/** Median and 95th percentile of `runs` timed reads, in ms, and the rows the last one answered. */
async function timeReads(runs: number, read: () => Promise<number>): Promise<{ medianMs: number; p95Ms: number; rows: number }> {
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    rows = await read();
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { medianMs: times[Math.floor(times.length / 2)] ?? 0, p95Ms: times[Math.floor(times.length * 0.95)] ?? 0, rows };
}

const runsPerCase = 200;
/** Fresh clients per one-shot case. */
const oneShotRuns = 7;
/** Rows stored after the paged snapshot for the second round of one-shot pages (the tail bound with a view running is tailMin, 1 000). */
const oneShotTail = 1000;

const oneShotCases: { name: string; query: (nowMs: number) => IndexQuery }[] = [
  { name: 'first page', query: () => ({ limit: pageRows }) },
  { name: 'one principal', query: () => ({ limit: pageRows, principalId: 'svc-7' }) },
  { name: 'one interaction', query: () => ({ limit: pageRows, interaction: 'review' }) },
  { name: 'outcome failed (none)', query: () => ({ limit: pageRows, outcome: 'failed' }) },
  { name: 'stuck', query: (nowMs) => ({ limit: pageRows, stuck: { nowMs: nowMs + 3_600_000, bounds: stuckBoundsDefault } }) },
];

/** Each one-shot case: a fresh client from `open` per read, its first page timed (the open is not). */
async function measureOneShot(storeName: string, size: number, label: string, open: () => Promise<EventStore>, nowMs: number): Promise<Measurement[]> {
  const out: Measurement[] = [];
  for (const c of oneShotCases) {
    const times: number[] = [];
    let rows = 0;
    let pagesRead = 0;
    for (let i = 0; i < oneShotRuns; i++) {
      const store = await open();
      try {
        const started = performance.now();
        rows = (await store.index.list(c.query(nowMs))).rows.length;
        times.push(performance.now() - started);
        if (store instanceof JetStreamEventStore) {
          if (store.index.rowsDelivered > 0) throw new Error('a one-shot page started a view');
          pagesRead = store.index.paged.read;
        }
      } finally {
        await store.close();
      }
    }
    times.sort((a, b) => a - b);
    const pages = storeName === 'jetstream' ? `, ${pagesRead} pages read` : '';
    out.push({
      store: storeName,
      operations: size,
      case: `one-shot ${label}: ${c.name}${pages}`,
      rows,
      medianMs: times[Math.floor(times.length / 2)] ?? 0,
      p95Ms: times.at(-1) ?? 0,
    });
    progress(out.at(-1));
  }
  return out;
}

/** Every case's page, then the stuck counts, on `store`. */
async function measureCases(storeName: string, store: EventStore, size: number, nowMs: number): Promise<Measurement[]> {
  const out: Measurement[] = [];
  for (const c of cases) {
    const query = await c.query(store, nowMs);
    const t = await timeReads(runsPerCase, async () => (await store.index.list(query)).rows.length);
    out.push({ store: storeName, operations: size, case: c.name, ...t });
    progress(out.at(-1));
  }
  const later = nowMs + 3_600_000;
  const t = await timeReads(runsPerCase, async () => Object.values(await store.index.countStuck(later, stuckBoundsDefault)).reduce((a, b) => a + b, 0));
  out.push({ store: storeName, operations: size, case: 'stuck counts (countStuck, every reason)', ...t });
  progress(out.at(-1));
  return out;
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
    await fill(store, size, 1, () => clock.set(clock.nowMs() + 1));
    process.stderr.write(`sqlite: ${size} operations admitted in ${((performance.now() - filling) / 1000).toFixed(1)} s\n`);
    const oneShot = await measureOneShot(
      'sqlite',
      size,
      'a fresh client',
      async () => new SqliteEventStore({ path: join(dir, 'ops.db'), clock, limits: { operationsMax: Math.max(size, 1000) } }),
      clock.nowMs(),
    );
    return [...oneShot, ...(await measureCases('sqlite', store, size, clock.nowMs()))];
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function measureJetStream(size: number): Promise<Measurement[]> {
  const server = await startJetStreamServer();
  const limits = { operationsMax: Math.max(size + Math.ceil(size / 100) + oneShotTail, 1000) };
  const writer = await JetStreamEventStore.open({ servers: server.url, limits });
  let reader: JetStreamEventStore | undefined;
  try {
    const filling = performance.now();
    await fill(writer, size, 32);
    process.stderr.write(`jetstream: ${size} operations admitted in ${((performance.now() - filling) / 1000).toFixed(1)} s\n`);
    const nc = await connect({ servers: server.url });
    reader = await JetStreamEventStore.open({ connection: nc, limits });
    // The fresh client's first page starts its view: every row read once.
    const start = await timeViewStart(reader, size, "view start, no snapshot: a fresh client's first page");
    await reader.index.snapshotIdle();
    const tail = Math.max(1, Math.floor(size / 100));
    await fill(writer, tail, 32, undefined, size);
    const nc2 = await connect({ servers: server.url });
    const second = await JetStreamEventStore.open({ connection: nc2, limits });
    const fromSnapshot = await timeViewStart(second, size + tail, `view start from the snapshot + ${tail} rows after it`);
    process.stderr.write(
      `jetstream ${size}: the snapshot's view read ${second.index.rowsFromSnapshot} rows from the snapshot and ${second.index.rowsDelivered} from the stream\n`,
    );
    // Its view writes a generation of pages (its tail reached tailMin) before it closes, or the first view's is the newest.
    await second.close();
    await nc2.close();
    const oneShotOpen = async () =>
      JetStreamEventStore.open({ servers: server.url, limits, onNotice: (line) => process.stderr.write(`one-shot client: ${line}\n`) });
    const oneShot = await measureOneShot('jetstream', size + tail, 'from the pages, no tail', oneShotOpen, new SystemClock().nowMs());
    await fill(writer, oneShotTail, 32, undefined, size + tail);
    const oneShotTailed = await measureOneShot(
      'jetstream',
      size + tail + oneShotTail,
      `from the pages + ${oneShotTail} rows after them`,
      oneShotOpen,
      new SystemClock().nowMs(),
    );
    const out = [
      start,
      fromSnapshot,
      ...oneShot,
      ...oneShotTailed,
      ...(await measureCases('jetstream', reader, size + tail + oneShotTail, new SystemClock().nowMs())),
    ];
    process.stderr.write(`jetstream ${size}: the view read ${reader.index.rowsDelivered} rows from the stream in all (its start included)\n`);
    await reader.close();
    await nc.close();
    return out;
  } finally {
    await reader?.close();
    await writer.close();
    await server.dispose();
  }
}

/** A fresh client's first page: its view's start, timed with the heap it added. */
async function timeViewStart(store: JetStreamEventStore, size: number, name: string): Promise<Measurement> {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const started = performance.now();
  // The view itself (a list before it would read the paged snapshot instead), then its first page.
  await store.index.startView();
  const rows = (await store.index.list({ limit: pageRows })).rows.length;
  const startMs = performance.now() - started;
  gc?.();
  const heapMiB = (process.memoryUsage().heapUsed - heapBefore) / (1024 * 1024);
  const m = {
    store: 'jetstream',
    operations: size,
    case: `${name} (heap +${heapMiB.toFixed(0)} MiB${gc ? '' : ', no gc'})`,
    rows,
    medianMs: startMs,
    p95Ms: startMs,
  };
  progress(m);
  return m;
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
  const sizes = sizesOption(options.args, '--sizes', [1_000, 100_000]);
  const storesAt = options.args.indexOf('--stores');
  const stores = storesAt < 0 ? ['sqlite', 'jetstream'] : (options.args[storesAt + 1] ?? '').split(',');
  if (!stores.every((s) => s === 'sqlite' || s === 'jetstream')) throw new Error('--stores takes sqlite, jetstream or both (comma-separated)');
  if (stores.includes('sqlite')) for (const size of sizes) results.push(...(await measureSqlite(size)));
  if (stores.includes('jetstream')) for (const size of sizesOption(options.args, '--jetstream-sizes', sizes)) results.push(...(await measureJetStream(size)));
  if (options.json) {
    process.stdout.write(JSON.stringify(results, null, 2) + '\n');
    return;
  }
  process.stdout.write(`\nOne page (${pageRows} rows) of the operations index, and the stuck counts; median and p95 over ${runsPerCase} reads\n`);
  process.stdout.write(
    renderTable(
      ['store', 'operations', 'page', 'rows', 'median ms', 'p95 ms'],
      results.map((r) => [r.store, r.operations, r.case, r.rows, r.medianMs.toFixed(3), r.p95Ms.toFixed(3)]),
    ),
  );
}
