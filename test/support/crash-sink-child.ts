/**
 * A second (third, …) process committing effects to one SqliteEffectSink file, for the sink's
 * cross-process race tests: each child opens its own better-sqlite3 connection, so the race is on
 * SQLite's real file locks, not on one connection.
 *
 * Protocol (IPC): the child sends {ready}; the parent sends one SinkRaceOrder; the child starts
 * every commit of the order at once, each effect computing for `effectDelayMs` (so the computes
 * of competing processes overlap before any of them commits), and replies with one SinkRaceAnswer
 * per commit, in order. Then it closes the sink and exits.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isAdapterError } from '../../src/contract/errors.js';
import type { JsonValue } from '../../src/contract/json.js';
import { SqliteEffectSink } from '../../src/peer/sqlite-effect-sink.js';

export interface SinkRaceCommit {
  operationId: string;
  branchId: string;
  fence: number;
  attempt: number;
}

export interface SinkRaceOrder {
  commits: SinkRaceCommit[];
  effectDelayMs: number;
}

/** `computed`: this process ran the effect function (it passed the early, lock-free check). */
export type SinkRaceAnswer = ({ value: JsonValue; repeated: boolean } | { error: string }) & { computed: boolean };

/** Forks a child on `path`, from source under tsx or compiled under dist/, whichever this file is. */
export async function forkSinkChild(path: string, writer: string): Promise<{ child: ChildProcess; run(order: SinkRaceOrder): Promise<SinkRaceAnswer[]> }> {
  const self = fileURLToPath(import.meta.url);
  const child = fork(self, [path, writer], { execArgv: extname(self) === '.ts' ? ['--import', 'tsx'] : [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('sink child did not start in time')), 20_000);
    child.once('message', (message) => {
      clearTimeout(timer);
      const ready = message as { ready: boolean; error?: string };
      if (ready.ready) resolve();
      else reject(new Error(`sink child failed: ${ready.error}`));
    });
    void exited.then((code) => reject(new Error(`sink child exited with ${code}`)));
  });
  return {
    child,
    run: (order) =>
      new Promise((resolve, reject) => {
        child.once('message', (answers) => resolve(answers as SinkRaceAnswer[]));
        void exited.then((code) => reject(new Error(`sink child exited with ${code} before answering`)));
        child.send(order);
      }),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const [path, writer] = process.argv.slice(2);
  if (!path || !writer) throw new Error('usage: crash-sink-child <path> <writer>');
  const sink = new SqliteEffectSink({ path, writer, busyTimeoutMs: 10_000 });
  process.once('message', (raw) => {
    const order = raw as SinkRaceOrder;
    const commits = order.commits.map((c) => {
      let computed = false;
      return sink
        .commit({ operationId: c.operationId, branchId: c.branchId }, c.fence, c.attempt, async () => {
          computed = true;
          await sleep(order.effectDelayMs);
          return { writer, fence: c.fence };
        })
        .then(
          (answer): SinkRaceAnswer => ({ ...answer, computed }),
          (error: unknown): SinkRaceAnswer => ({ error: isAdapterError(error) ? error.kind : String(error), computed }),
        );
    });
    void Promise.all(commits).then((answers) => {
      sink.close();
      process.send?.(answers, () => process.disconnect());
    });
  });
  process.send?.({ ready: true });
}

// Only when run as the child, never when imported for forkSinkChild.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((error: unknown) => {
    process.send?.({ ready: false, error: String(error) });
    process.exit(1);
  });
}
