/**
 * Store benchmark: sequential single-writer appends through each EventStore adapter (many
 * operations, each a create + 9 appends), against the raw baseline of the same backend measured
 * in the same run:
 *   memory     — a Map of arrays holding a JSON copy of each transition (what isolation costs)
 *   sqlite     — plain better-sqlite3 INSERT, one transaction per row, same file pragmas
 *   jetstream  — plain `js.publish` awaiting the PubAck, to a file stream on the same server
 * Prints adapter | appends/s | p50 ms | p99 ms | baseline/s | ratio, or JSON. Target ratio ≥ 0.5.
 * Each side is measured for `seconds` (default 3) in alternating 250 ms slices, after a warm-up.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { connect } from '@nats-io/transport-node';
import { DiscardPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { DomainEvent, Transition } from '../src/events/types.js';
import { SystemClock } from '../src/contract/clock.js';
import { MemoryEventStore } from '../src/adapters/store/memory.js';
import { SqliteEventStore } from '../src/adapters/store/sqlite.js';
import { JetStreamEventStore } from '../src/adapters/store/jetstream.js';
import type { EventStore } from '../src/adapters/store/types.js';
import { startJetStreamServer } from '../test/support/jetstream-server.js';

export interface StoresBenchOptions {
  json: boolean;
  seconds?: number;
}

interface Row {
  adapter: string;
  appendsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  baselinePerSecond: number;
  ratio: number;
  baseline: string;
  appends: number;
}

const appendsPerOperation = 10; // create + 9 appends
const warmupMs = 300;
const sliceMs = 250;

function benchTransition(i: number): Transition {
  const nowMs = Date.now();
  return {
    events: [
      { type: 'dispatch-recorded', v: 1, branchId: `b${i % 8}`, attempt: 1, fence: 1, receipt: 'stored', detail: 'x'.repeat(200) },
      {
        type: 'result-accepted',
        v: 1,
        branchId: `b${i % 8}`,
        peerId: 'alfa',
        attempt: 1,
        fence: 1,
        status: 'success',
        retryable: false,
        retryAtMs: null,
        result: { ok: true, score: i, note: 'y'.repeat(120) },
        subject: 'demo.v1.lab.review.op.result.alfa',
      } as DomainEvent,
    ],
    timeGuard: { notBeforeMs: nowMs - 3_600_000, notAfterMs: nowMs + 3_600_000 },
    causation: { command: 'bench', messageId: `m${i}` },
  };
}

const opId = () => 'op' + randomUUID().replaceAll('-', '') + randomUUID().replaceAll('-', '');

function percentile(sortedMs: number[], p: number): number {
  if (sortedMs.length === 0) return Number.NaN;
  return sortedMs[Math.min(sortedMs.length - 1, Math.floor((p / 100) * sortedMs.length))] ?? Number.NaN;
}

interface Slice {
  count: number;
  elapsedMs: number;
  latenciesMs: number[];
}

/** Runs whole operations (create + 9 appends) until the slice is up. */
async function storeSlice(store: EventStore, sliceMs: number, first: number): Promise<Slice> {
  const latenciesMs: number[] = [];
  const startMs = performance.now();
  let i = first;
  while (performance.now() - startMs < sliceMs) {
    const id = opId();
    let revision = '';
    for (let k = 0; k < appendsPerOperation; k++, i++) {
      const t0 = performance.now();
      const outcome = k === 0 ? await store.create(id, benchTransition(i)) : await store.append(id, revision, benchTransition(i));
      latenciesMs.push(performance.now() - t0);
      if (outcome.kind !== 'ok') throw new Error(`${store.name} bench append failed: ${JSON.stringify(outcome)}`);
      revision = outcome.revision;
    }
  }
  return { count: latenciesMs.length, elapsedMs: performance.now() - startMs, latenciesMs };
}

/** Runs `write(i)` back to back until the slice is up. */
async function baselineSlice(write: (i: number) => unknown, sliceMs: number, first: number): Promise<Slice> {
  const startMs = performance.now();
  let i = first;
  while (performance.now() - startMs < sliceMs) await write(i++);
  return { count: i - first, elapsedMs: performance.now() - startMs, latenciesMs: [] };
}

/**
 * Adapter and baseline run in alternating slices, so both see the same disk and CPU weather
 * (fsync latency on a shared VM disk swings several-fold within seconds).
 */
async function row(adapter: string, baseline: string, store: EventStore, durationMs: number, baselineWrite: (i: number) => unknown): Promise<Row> {
  await storeSlice(store, warmupMs, 0);
  await baselineSlice(baselineWrite, warmupMs, 0);
  const measured: Slice = { count: 0, elapsedMs: 0, latenciesMs: [] };
  const base: Slice = { count: 0, elapsedMs: 0, latenciesMs: [] };
  while (measured.elapsedMs < durationMs) {
    const a = await storeSlice(store, sliceMs, 1_000_000 + measured.count);
    measured.count += a.count;
    measured.elapsedMs += a.elapsedMs;
    measured.latenciesMs.push(...a.latenciesMs);
    const b = await baselineSlice(baselineWrite, sliceMs, 1_000_000 + base.count);
    base.count += b.count;
    base.elapsedMs += b.elapsedMs;
  }
  const sorted = measured.latenciesMs.sort((x, y) => x - y);
  const appendsPerSecond = measured.count / (measured.elapsedMs / 1000);
  const baselinePerSecond = base.count / (base.elapsedMs / 1000);
  return {
    adapter,
    appendsPerSecond,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    baselinePerSecond,
    ratio: appendsPerSecond / baselinePerSecond,
    baseline,
    appends: measured.count,
  };
}

async function memoryRow(durationMs: number): Promise<Row> {
  const store = new MemoryEventStore({ clock: new SystemClock() });
  const streams = new Map<string, unknown[]>();
  let id = opId();
  const baselineWrite = (i: number) => {
    if (i % appendsPerOperation === 0) id = opId();
    const list = streams.get(id) ?? [];
    if (list.length === 0) streams.set(id, list);
    list.push(JSON.parse(JSON.stringify(benchTransition(i))));
  };
  try {
    return await row('memory', 'Map push of a JSON copy', store, durationMs, baselineWrite);
  } finally {
    await store.close();
  }
}

async function sqliteRow(durationMs: number): Promise<Row> {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-bench-sqlite-'));
  const store = new SqliteEventStore({ path: join(dir, 'store.db'), clock: new SystemClock() });
  // The raw baseline: same pragmas (WAL, synchronous FULL), one INSERT per transaction.
  const raw = new Database(join(dir, 'raw.db'));
  raw.pragma('journal_mode = WAL');
  raw.pragma('synchronous = FULL');
  raw.exec(
    'CREATE TABLE t (operation_id TEXT NOT NULL, revision INTEGER NOT NULL, committed_at_ms INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (operation_id, revision))',
  );
  const insert = raw.prepare('INSERT INTO t (operation_id, revision, committed_at_ms, body) VALUES (?, ?, ?, ?)');
  const insertOne = raw.transaction((id: string, revision: number, body: string) => insert.run(id, revision, Date.now(), body));
  let id = opId();
  const baselineWrite = (i: number) => {
    if (i % appendsPerOperation === 0) id = opId();
    insertOne(id, (i % appendsPerOperation) + 1, JSON.stringify(benchTransition(i)));
  };
  try {
    return await row('sqlite', 'better-sqlite3 INSERT, txn per row', store, durationMs, baselineWrite);
  } finally {
    await store.close();
    raw.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function jetstreamRow(durationMs: number): Promise<Row> {
  const server = await startJetStreamServer();
  const store = await JetStreamEventStore.open({ servers: server.url });
  const nc = await connect({ servers: server.url });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({
      name: 'BENCH_RAW',
      subjects: ['bench.raw.>'],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.New,
    });
    const js = jetstream(nc);
    let id = opId();
    const baselineWrite = (i: number) => {
      if (i % appendsPerOperation === 0) id = opId();
      return js.publish(`bench.raw.${id}`, JSON.stringify(benchTransition(i)));
    };
    return await row('jetstream', 'js.publish + PubAck, file stream', store, durationMs, baselineWrite);
  } finally {
    await store.close();
    await nc.close();
    await server.dispose();
  }
}

function render(rows: Row[]): string {
  const header = ['adapter', 'appends/s', 'p50 ms', 'p99 ms', 'baseline/s', 'ratio'];
  const lines = rows.map((r) => [
    r.adapter,
    r.appendsPerSecond.toFixed(0),
    r.p50Ms.toFixed(3),
    r.p99Ms.toFixed(3),
    r.baselinePerSecond.toFixed(0),
    r.ratio.toFixed(2),
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...lines.map((l) => (l[c] ?? '').length)));
  const fmt = (cells: string[]) => '| ' + cells.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join(' | ') + ' |';
  const rule = '|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|';
  const notes = rows.map(
    (r) => `  ${r.adapter}: baseline = ${r.baseline}; ${r.appends} appends measured; ratio ${r.ratio >= 0.5 ? 'meets' : 'BELOW'} the 0.5 target`,
  );
  return [fmt(header), rule, ...lines.map(fmt), '', ...notes].join('\n');
}

export async function storesBench(options: StoresBenchOptions): Promise<void> {
  const durationMs = Math.max(0.2, options.seconds ?? 3) * 1000;
  const rows = [await memoryRow(durationMs), await sqliteRow(durationMs), await jetstreamRow(durationMs)];
  if (options.json) console.log(JSON.stringify({ bench: 'stores', seconds: durationMs / 1000, rows }, null, 2));
  else console.log(render(rows));
}

// Runnable on its own: `node --import tsx bench/stores.ts [--json] [--seconds N]`.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const secondsAt = args.indexOf('--seconds');
  const seconds = secondsAt >= 0 ? Number(args[secondsAt + 1]) : undefined;
  process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;
  storesBench({ json: args.includes('--json'), seconds }).catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
