/**
 * A second SQLite client in its own process (forked by test/support/forked-sqlite.ts): it opens
 * its own better-sqlite3 connection on the same file, so races and follow-from-another-process
 * are real cross-process contention on SQLite's locks, not two calls on one connection.
 *
 * The parent's injected clock drives this process's clock: every request carries the parent's
 * nowMs, so both clients write against the same test time.
 */
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import type { StoreLimits } from '../../src/adapters/store/types.js';
import { VirtualClock } from '../../src/contract/clock.js';

export interface ChildRequest {
  id: number;
  nowMs: number;
  method:
    | 'create'
    | 'append'
    | 'read'
    | 'tombstone'
    | 'operationIds'
    | 'runningWorkflowIds'
    | 'workflowEnded'
    | 'workflowInstanceIds'
    | 'close'
    | 'indexList'
    | 'indexGet'
    | 'indexRebuild'
    | 'indexStuck'
    | 'indexOpenIds'
    | 'workflowCountRunning';
  args: unknown[];
}

export interface ChildReply {
  id: number;
  result?: unknown;
  error?: string;
}

const send = (message: unknown) => process.send?.(message);

async function main(): Promise<void> {
  const [path, limitsJson] = process.argv.slice(2);
  if (!path) throw new Error('usage: sqlite-child <path> [limits-json]');
  const clock = new VirtualClock();
  const limits = limitsJson ? (JSON.parse(limitsJson) as Partial<StoreLimits>) : undefined;
  const store = new SqliteEventStore({ path, clock, limits, busyTimeoutMs: 5000 });
  process.on('message', (raw) => {
    const request = raw as ChildRequest;
    clock.set(request.nowMs);
    void handle(store, request).then(
      (result) => send({ id: request.id, result } satisfies ChildReply),
      (error: unknown) => send({ id: request.id, error: String(error) } satisfies ChildReply),
    );
  });
  process.on('disconnect', () => void store.close().finally(() => process.exit(0)));
  send({ ready: true });
}

async function handle(store: SqliteEventStore, request: ChildRequest): Promise<unknown> {
  const a = request.args as [string, never, never];
  switch (request.method) {
    case 'create':
      return store.create(a[0], a[1]);
    case 'append':
      return store.append(a[0], a[1], a[2]);
    case 'read':
      return store.read(a[0]);
    case 'tombstone':
      return store.tombstone(a[0]);
    case 'operationIds': {
      const ids: string[] = [];
      for await (const id of store.operationIds()) ids.push(id);
      return ids;
    }
    case 'runningWorkflowIds': {
      const ids: string[] = [];
      for await (const id of store.runningWorkflowIds()) ids.push(id);
      return ids;
    }
    case 'workflowInstanceIds': {
      const ids: string[] = [];
      for await (const id of store.workflowInstanceIds()) ids.push(id);
      return ids;
    }
    case 'workflowEnded':
      await store.workflowEnded(a[0]);
      return null;
    case 'close':
      await store.close();
      return null;
    case 'indexList':
      return store.index.list(a[0] as never);
    case 'indexGet':
      return (await store.index.get(a[0])) ?? null;
    case 'indexRebuild':
      return (await store.index.rebuild(a[0])) ?? null;
    case 'indexStuck':
      return store.index.countStuck(a[0] as never, a[1]);
    case 'workflowCountRunning':
      return store.workflowIndex.countRunning(a[0], a[1]);
    case 'indexOpenIds': {
      const ids: string[] = [];
      for await (const id of store.index.openOperationIds()) ids.push(id);
      return ids;
    }
  }
}

main().catch((error: unknown) => {
  send({ ready: false, error: String(error) });
  process.exit(1);
});
