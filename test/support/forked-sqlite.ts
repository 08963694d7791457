/**
 * An EventStore that is a SqliteEventStore in a forked child process (test/support/sqlite-child.ts):
 * the "second client" of the conformance suite's race and follow tests for sqlite.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Transition } from '../../src/events/types.js';
import type { Clock } from '../../src/contract/clock.js';
import type {
  AppendListener,
  AppendOutcome,
  EventStore,
  OperationIndexStore,
  WorkflowIndexStore,
  ReadOutcome,
  RevisionListener,
  StoreFailure,
  StoreLimits,
} from '../../src/adapters/store/types.js';
import type { IndexPage, OperationIndexRow, StuckCounts } from '../../src/events/operation-index.js';
import { resolveStoreLimits } from '../../src/adapters/store/limits.js';
import type { ChildReply, ChildRequest } from './sqlite-child.js';

/** Runs the child from source under tsx, or compiled under dist/, whichever this file is. */
function childEntry(): { path: string; execArgv: string[] } {
  const self = fileURLToPath(import.meta.url);
  const ext = extname(self);
  const path = self.slice(0, -ext.length).replace(/forked-sqlite$/, 'sqlite-child') + ext;
  return { path, execArgv: ext === '.ts' ? ['--import', 'tsx'] : [] };
}

export class ForkedSqliteClient implements EventStore {
  readonly name = 'sqlite (forked client)';
  readonly capabilities = { durable: true, guard: 'in-write' } as const;
  private nextId = 1;
  readonly index: OperationIndexStore = {
    list: (query) => this.call('indexList', [query]) as Promise<IndexPage>,
    get: async (operationId) => ((await this.call('indexGet', [operationId])) as OperationIndexRow | null) ?? undefined,
    rebuild: async (operationId) => ((await this.call('indexRebuild', [operationId])) as OperationIndexRow | null) ?? undefined,
    countStuck: (nowMs, bounds) => this.call('indexStuck', [nowMs, bounds]) as Promise<StuckCounts>,
    openOperationIds: () => this.openIds(),
  };
  /** Not forwarded to the child but the running count (what bounds a principal's starts): the tests that fork a client exercise operations. */
  readonly workflowIndex: WorkflowIndexStore = {
    list: () => Promise.reject(new Error('the forked SQLite client does not forward the workflow index')),
    get: () => Promise.reject(new Error('the forked SQLite client does not forward the workflow index')),
    put: () => Promise.reject(new Error('the forked SQLite client does not forward the workflow index')),
    countRunning: (principalId, atMost) => this.call('workflowCountRunning', [principalId, atMost]) as Promise<number>,
  };

  private async *openIds(): AsyncIterable<string> {
    yield* (await this.call('indexOpenIds', [])) as string[];
  }
  private readonly pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();

  private constructor(
    private readonly child: ChildProcess,
    private readonly clock: Clock,
    /** The child's store resolves the same limits from the same overrides. */
    readonly limits: Readonly<StoreLimits>,
  ) {
    child.on('message', (raw) => {
      const reply = raw as ChildReply;
      const waiter = this.pending.get(reply.id);
      if (!waiter) return;
      this.pending.delete(reply.id);
      if (reply.error !== undefined) waiter.reject(new Error(reply.error));
      else waiter.resolve(reply.result);
    });
    child.on('exit', () => {
      for (const waiter of this.pending.values()) waiter.reject(new Error('sqlite child exited'));
      this.pending.clear();
    });
  }

  static async open(path: string, clock: Clock, limits?: Partial<StoreLimits>): Promise<ForkedSqliteClient> {
    const entry = childEntry();
    const args = limits ? [path, JSON.stringify(limits)] : [path];
    const child = fork(entry.path, args, { execArgv: entry.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('sqlite child did not start in time')), 20_000);
      child.once('message', (message) => {
        clearTimeout(timer);
        const ready = message as { ready: boolean; error?: string };
        if (ready.ready) resolve();
        else reject(new Error(`sqlite child failed: ${ready.error}`));
      });
      child.once('exit', (code) => reject(new Error(`sqlite child exited with ${code}`)));
    });
    return new ForkedSqliteClient(child, clock, resolveStoreLimits(limits));
  }

  create(operationId: string, transition: Transition): Promise<AppendOutcome> {
    return this.call('create', [operationId, transition]) as Promise<AppendOutcome>;
  }

  append(operationId: string, expectedRevision: string, transition: Transition): Promise<AppendOutcome> {
    return this.call('append', [operationId, expectedRevision, transition]) as Promise<AppendOutcome>;
  }

  read(operationId: string): Promise<ReadOutcome> {
    return this.call('read', [operationId]) as Promise<ReadOutcome>;
  }

  async *operationIds(): AsyncIterable<string> {
    yield* (await this.call('operationIds', [])) as string[];
  }

  async *runningWorkflowIds(): AsyncIterable<string> {
    yield* (await this.call('runningWorkflowIds', [])) as string[];
  }

  async workflowEnded(instanceId: string): Promise<void> {
    await this.call('workflowEnded', [instanceId]);
  }

  async *workflowInstanceIds(): AsyncIterable<string> {
    yield* (await this.call('workflowInstanceIds', [])) as string[];
  }

  tombstone(operationId: string): Promise<AppendOutcome | StoreFailure> {
    return this.call('tombstone', [operationId]) as Promise<AppendOutcome | StoreFailure>;
  }

  async follow(_listener: AppendListener): Promise<{ close(): Promise<void> }> {
    throw new Error('follow the parent store instead: it polls the same file');
  }

  async watch(_listener: RevisionListener): Promise<{ close(): Promise<void> }> {
    throw new Error('watch the parent store instead: it polls the same file');
  }

  async close(): Promise<void> {
    if (!this.child.connected) return;
    await this.call('close', []).catch(() => undefined);
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.disconnect();
    await exited;
  }

  private call(method: ChildRequest['method'], args: unknown[]): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, nowMs: this.clock.nowMs(), method, args } satisfies ChildRequest);
    });
  }
}
