/**
 * The EventStore interface (docs/design.md §2): one stream per operation, one stored Transition per
 * handled command, create-if-absent and append-with-expectedRevision as the compare-and-swap,
 * and a time guard checked at the store's authoritative serialization point.
 *
 * Every adapter (memory, sqlite, jetstream, eventstoredb) implements this and passes
 * test/conformance/store.ts.
 */
import type { StoredTransition, Transition } from '../../events/types.js';
import type { IndexPage, IndexQuery, OperationIndexRow, StuckBounds, StuckCounts } from '../../events/operation-index.js';
import type { OperationRecord } from '../../projections/record.js';
import type { WorkflowIndexPage, WorkflowIndexQuery, WorkflowIndexRow } from '../../events/workflow-index.js';

export type StoreFailureKind = 'conflict' | 'expired' | 'unavailable' | 'not-found' | 'invalid-input';

export type StoreFailure = { kind: StoreFailureKind; description: string };

export type AppendOutcome = { kind: 'ok'; revision: string; committedAtMs: number } | StoreFailure;

export type ReadOutcome =
  | { kind: 'ok'; revision: string; transitions: StoredTransition[] }
  | { kind: 'not-found'; description: string }
  /** A tombstoned operation: its key history is kept, its payload is gone; it is never recreated. */
  | { kind: 'expired'; description: string }
  | { kind: 'unavailable'; description: string };

/**
 * What a stream holds after a revision its reader saw stored (EventStore.readAfter): `ok` with the
 * stored transitions after it, in order (possibly none), and the log's last revision; `diverged`
 * when that revision is no longer where the reader saw it (the log came back shorter: the store
 * lost writes), so nothing read after it may be folded onto what the reader holds; or why the
 * stream cannot be read, as `read` answers it.
 */
export type TailOutcome =
  { kind: 'ok'; revision: string; transitions: StoredTransition[] } | { kind: 'diverged'; description: string } | Exclude<ReadOutcome, { kind: 'ok' }>;

export interface StoreCapabilities {
  /** Survives the process. */
  durable: boolean;
  /**
   * 'in-write': the guard is checked inside the serialized write and a failing transition is never
   * stored. 'on-fold': the server assigns each stored transition its timestamp in stream order and
   * the fold voids a transition whose guard that timestamp fails (the append answers `expired`).
   */
  guard: 'in-write' | 'on-fold';
}

export interface StoreLimits {
  /** Serialized bytes of one stored transition (including the admission transition). */
  transitionBytesMax: number;
  /** Operations (live and tombstoned) the store accepts before refusing new admissions. */
  operationsMax: number;
  /**
   * Transitions one operation's log may hold: the store refuses an append past it (invalid-input),
   * because it reads back at most this many. At most limits.transitionsStoredMax.
   */
  transitionsMax: number;
}

/**
 * The committing side's record after the transition a create or append stores (the kernel's
 * RecordAfter, src/kernel/types.ts): its record at the expected revision with the stored
 * transition applied. A store derives the operation's index row from it instead of folding the
 * transition a second time, and only when it names the operation at the revision just written;
 * otherwise it folds the log (adapters/store/index-states.ts). A store without an index ignores it.
 */
export type RecordAfter = (stored: StoredTransition) => OperationRecord | undefined;

/**
 * A workflow instance's index row after the transition a create or append stores, as the
 * committing side derives it (src/workflow/exec/streams.ts: the row of its record after it). The
 * store writes it only when it names the instance at the revision just written; a store cannot
 * fold an instance's log itself (the workflow projection lives above the adapters), so a row
 * missed (a crash between a log and a row written apart) stays behind until the instance's next
 * append or `convoke replay wf… --fix-index`.
 */
export type WorkflowRowAfter = (stored: StoredTransition) => WorkflowIndexRow | undefined;

/** What a create or append is handed for its index: an operation's record, or an instance's row (by the stream's family). */
export type IndexAfter = RecordAfter | WorkflowRowAfter;

export interface AppendListener {
  (operationId: string, stored: StoredTransition): void;
}

/** That an operation's stream reached `revision` (an append, or its tombstone, by any client of the store). */
export interface RevisionListener {
  (operationId: string, revision: string): void;
}

/**
 * The operations index a store keeps beside its logs (docs/design.md §11): one row per live
 * operation, derived from its log by src/projections/operation-index.ts and maintained from the
 * same appends. Failures throw an AdapterError (`unavailable`).
 */
export interface OperationIndexStore {
  /** One page, newest admission first, after `query.after`. */
  list(query: IndexQuery): Promise<IndexPage>;
  get(operationId: string): Promise<OperationIndexRow | undefined>;
  /** Derives the row from the log again and writes it (or removes it when the log has none); answers the row. */
  rebuild(operationId: string): Promise<OperationIndexRow | undefined>;
  /** Operations stuck at `nowMs`, per reason. */
  countStuck(nowMs: number, bounds: StuckBounds): Promise<StuckCounts>;
  /**
   * Every live operation that may be open, for recovery at start-up: each whose row is not
   * settled, and each whose log has no row (an admission whose row was never written — a crash
   * between the append and the row, on a store that writes them apart). A settled row is final:
   * phases only advance, so a row that lags its log by a revision never hides an open operation.
   * Settled operations are left out, which is what makes a restart cheap. In no particular order.
   */
  openOperationIds(): AsyncIterable<string>;
  /**
   * Starts what a long-running process keeps to answer pages and stuck counts, so that its first
   * ones do not wait for it (JetStream: its view, which also writes the paged snapshots one-shot
   * clients read). Absent where pages need nothing started.
   */
  warm?(): Promise<void>;
}

/**
 * The workflow instances index a store keeps beside its logs: one row per instance, written from
 * the committing side's row with each append (WorkflowRowAfter). Failures throw an AdapterError
 * (`unavailable`).
 */
export interface WorkflowIndexStore {
  /** One page, newest start first, after `query.after`. */
  list(query: WorkflowIndexQuery): Promise<WorkflowIndexPage>;
  get(instanceId: string): Promise<WorkflowIndexRow | undefined>;
  /** Writes the row derived from the instance's log (a rebuild: replaces whatever the store holds), or removes it when undefined. */
  put(instanceId: string, row: WorkflowIndexRow | undefined): Promise<void>;
  /**
   * How many of the principal's instances the index holds as running, counted no further than
   * `atMost` (a start's bound: src/workflow/exec/running-bound.ts). It holds every row any
   * client of the store wrote before the call, as a page does. SQLite walks at most `atMost`
   * entries of the principal's running partial index, reading no row; the views (memory,
   * JetStream, EventStoreDB) read the size of the principal's running list.
   */
  countRunning(principalId: string, atMost: number): Promise<number>;
}

export interface EventStore {
  readonly name: string;
  readonly capabilities: StoreCapabilities;
  /**
   * What this store takes, as it enforces it: a create or append past limits.transitionBytesMax is
   * refused (invalid-input), and no larger one is ever stored. The configured limits, or lower
   * where the backend takes less (JetStream: the server's max_payload, or the operations stream's
   * own max_msg_size when it was made smaller). A wrapper answers its inner store's. Whoever
   * decides what goes into one transition (the workflow interpreter, the coordinator's transition
   * budget) reads it here.
   */
  readonly limits: Readonly<StoreLimits>;
  readonly index: OperationIndexStore;
  readonly workflowIndex: WorkflowIndexStore;
  /**
   * Create-if-absent: the first transition of a new stream. `conflict` if the stream exists, `expired` if tombstoned.
   * `after`: the committing side's record after the transition (RecordAfter), or for a workflow
   * instance its row (WorkflowRowAfter), for the index.
   */
  create(operationId: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome>;
  /** Append at expectedRevision (the revision returned by the last create/append/read). */
  append(operationId: string, expectedRevision: string, transition: Transition, after?: IndexAfter): Promise<AppendOutcome>;
  read(operationId: string): Promise<ReadOutcome>;
  /**
   * The stored transitions after `revision`, a revision this client saw stored, each as `read`
   * returns it: what a reader holding the fold up to `revision` lacks. Never a transition of a log
   * that does not hold `revision` where the reader saw it (`diverged`). Absent where a store cannot
   * say so cheaper than `read`: the reader reads the whole log.
   */
  readAfter?(operationId: string, revision: string): Promise<TailOutcome>;
  /** Every operation id with a live stream, in no particular order. */
  operationIds(): AsyncIterable<string>;
  /**
   * Every workflow instance (`wf…` stream) that may still be running — started, its end not
   * stored — without reading any history (workflow-running.ts): what a worker resumes at start-up.
   * Memory and SQLite answer exactly; a replay-stamped store may list an instance too many (a
   * writer died between its end and the mark's removal), never one too few. In no particular order.
   */
  runningWorkflowIds(): AsyncIterable<string>;
  /** The instance was read and found ended (or absent): whatever mark of it is left goes. */
  workflowEnded(instanceId: string): Promise<void>;
  /**
   * Every workflow instance stored, running or ended, in no particular order (`convoke replay` of
   * a whole store); not a tombstoned (pruned) one, as operationIds() lists no tombstoned operation.
   */
  workflowInstanceIds(): AsyncIterable<string>;
  /**
   * Drops an operation's payload and keeps a minimal tombstone of its key: later reads answer
   * `expired` and a create under the same id answers `expired`, never recreating it.
   */
  tombstone(operationId: string): Promise<AppendOutcome | StoreFailure>;
  /**
   * Where a server stamps committedAtMs with its own clock (guard 'on-fold'), an instant that clock
   * has reached: its reading where the server gives one, else the latest stamp it gave (a lower
   * bound). What is measured against committedAtMs (a prune's cutoff) is measured on it, not on a
   * client's clock that may run ahead. Absent where the store stamps with the writer's clock
   * (memory, SQLite: one host's): that clock is the caller's own. Failures throw `unavailable`.
   */
  nowMs?(): Promise<number>;
  /** Live notification of appends made through any client of this store (for `convoke tail`). */
  follow(listener: AppendListener): Promise<{ close(): Promise<void> }>;
  /**
   * Live notice of the revision each append reached, through any client of this store, without
   * the transition: coordinators sharing a store learn from it that a record they hold moved.
   * Cheaper than follow where the store can say less (JetStream: the stamp feed it already runs).
   * A tombstone is told too, by the revision it took (past the stream's last append; a read or
   * readAfter answers `expired` from then on): a process holding the stream lets go of its payload.
   */
  watch(listener: RevisionListener): Promise<{ close(): Promise<void> }>;
  close(): Promise<void>;
}
