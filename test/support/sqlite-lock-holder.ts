/**
 * Another process holding a lock on a SQLite file, for the open-under-contention tests: opening is
 * synchronous, so the connection that holds the lock must live in another process (its own event
 * loop lets go of the lock on its own timer while the test's thread is blocked opening).
 *
 * Modes:
 *   - `rollback-writer`: the file in rollback-journal mode (not WAL yet), a write transaction open
 *     (RESERVED lock). Converting the file to WAL needs a write lock; SQLite answers that upgrade
 *     SQLITE_BUSY at once instead of calling the busy handler.
 *   - `wal-writer`: the file in WAL mode, a write transaction open (the WAL write lock). Waiting for
 *     it goes through the busy handler.
 *
 * The holder creates no table and writes nothing: the file holds nothing, as when another peer is
 * creating the same sink, so the effect sink (which refuses a file holding another program's
 * tables) opens it as a new one once the lock is gone.
 *
 * The child sends {held: true} once it holds the lock, commits after `holdMs` (never when it is
 * `forever`), then keeps its connection open until the parent disconnects or kills it.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';

export type LockHolderMode = 'rollback-writer' | 'wal-writer';

export interface LockHolder {
  child: ChildProcess;
  /** Resolves when the holder has committed (never, for `forever`). */
  released: Promise<void>;
  stop(): Promise<void>;
}

/** Forks a holder on `path` and resolves once it holds the lock (from source under tsx or from dist/). */
export async function holdSqliteLock(path: string, mode: LockHolderMode, holdMs: number | 'forever'): Promise<LockHolder> {
  const self = fileURLToPath(import.meta.url);
  const child = fork(self, [path, mode, String(holdMs)], {
    execArgv: extname(self) === '.ts' ? ['--import', 'tsx'] : [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let onReleased!: () => void;
  const released = new Promise<void>((resolve) => (onReleased = resolve));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('lock holder did not take its lock in time')), 20_000);
    child.on('message', (message) => {
      const m = message as { held?: boolean; released?: boolean; error?: string };
      if (m.error !== undefined) reject(new Error(`lock holder failed: ${m.error}`));
      if (m.held) resolve();
      if (m.released) onReleased();
      clearTimeout(timer);
    });
    void exited.then(() => reject(new Error('lock holder exited before taking its lock')));
  });
  return {
    child,
    released,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

function main(): void {
  const [path, mode, hold] = process.argv.slice(2);
  if (!path || (mode !== 'rollback-writer' && mode !== 'wal-writer') || !hold) throw new Error('usage: sqlite-lock-holder <path> <mode> <holdMs|forever>');
  const db = new Database(path, { timeout: 10_000 });
  db.pragma(`journal_mode = ${mode === 'wal-writer' ? 'WAL' : 'DELETE'}`);
  db.exec('BEGIN IMMEDIATE');
  process.send?.({ held: true });
  if (hold !== 'forever')
    setTimeout(() => {
      db.exec('COMMIT');
      process.send?.({ released: true });
    }, Number(hold));
  process.once('disconnect', () => {
    db.close();
    process.exit(0);
  });
}

// Only when run as the child, never when imported for holdSqliteLock.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    main();
  } catch (error) {
    process.send?.({ error: String(error) });
    process.exit(1);
  }
}
