/**
 * Workflow instance streams on an operation EventStore (memory, SQLite): the same store, the same
 * create-if-absent, expected-revision CAS and time guard at its serialization point. The stores
 * keep any transition of the stored shape ({events: [{type, v}], timeGuard, causation.command},
 * adapters/store/codec.ts) as its JSON body; a workflow transition has that shape. What a read
 * answers is checked against the workflow schema by the aggregate (checkLog) before it is folded,
 * so the one cast below is never trusted unchecked.
 *
 * Stream ids are instance ids (`wf` + 64 hex): the view refuses any other id, and tells its
 * watcher only of workflow streams.
 *
 * The store's workflow instances index is fed from here: each create and append hands the store
 * the instance's index row after the transition (index-row.ts), from the record the kernel
 * derives for it anyway (RecordAfter), so the store never folds an instance's log.
 */
import { invalidInput } from '../../contract/errors.js';
import type { Transition } from '../../events/types.js';
import type { EventStore, WorkflowRowAfter } from '../../adapters/store/types.js';
import type { ReadOutcome, RecordAfter, StreamStore, TailOutcome } from '../../kernel/types.js';
import { isWorkflowInstanceId } from '../ids.js';
import type { WorkflowTransition } from './events.js';
import { workflowIndexRow } from './index-row.js';
import type { WorkflowRecord } from './record.js';

function checked(id: string): string {
  if (!isWorkflowInstanceId(id)) throw invalidInput(`not a workflow instance id: ${JSON.stringify(id.slice(0, 80))}`);
  return id;
}

/** The stored form: the store's interface names the operation transition, whose shape this shares. */
const stored = (transition: WorkflowTransition): Transition => transition as unknown as Transition;

/** The index row after a stored transition, from the committing side's record after it. */
function rowAfter(after: RecordAfter<WorkflowTransition, WorkflowRecord> | undefined): WorkflowRowAfter | undefined {
  if (after === undefined) return undefined;
  return (storedTransition) => {
    const record = after(storedTransition as unknown as Parameters<typeof after>[0]);
    return record && workflowIndexRow(record);
  };
}

/** The instance streams of a store, with the instances it lists as running (what a worker resumes at start-up). */
export interface WorkflowStore extends StreamStore<WorkflowTransition, WorkflowRecord> {
  /** Every instance that may be running (EventStore.runningWorkflowIds): a superset, never missing one. */
  runningIds?(): AsyncIterable<string>;
  /** The instance was read and found ended: the store drops what it kept of it as running. */
  ended?(instanceId: string): Promise<void>;
  /**
   * How many of the principal's instances are running, counted no further than `atMost`: from
   * the store's workflow instances index (WorkflowIndexStore.countRunning), which every client of
   * the store writes — what a start's bound counts (running-bound.ts).
   */
  runningOf(principalId: string, atMost: number): Promise<number>;
  /**
   * The most bytes one transition may take in the store (EventStore.limits): a larger one is
   * refused. The interpreter holds a fact for a later transition only when it would fit one alone.
   */
  readonly transitionBytesMax: number;
  /**
   * The most transitions one instance's log may hold in the store (EventStore.limits): the
   * executor runs an instance on at most half of them, keeping the rest for its end and what
   * follows it (executor.ts runningTransitionsMax).
   */
  readonly transitionsMax: number;
}

export function workflowStreams(store: EventStore): WorkflowStore & { readonly name: string; readonly durable: boolean } {
  const readAfter = store.readAfter;
  return {
    runningIds: async function* () {
      for await (const id of store.runningWorkflowIds()) if (isWorkflowInstanceId(id)) yield id;
    },
    ended: (instanceId) => store.workflowEnded(checked(instanceId)),
    runningOf: (principalId, atMost) => store.workflowIndex.countRunning(principalId, atMost),
    transitionBytesMax: store.limits.transitionBytesMax,
    transitionsMax: store.limits.transitionsMax,
    name: store.name,
    durable: store.capabilities.durable,
    create: (id, transition, after) => store.create(checked(id), stored(transition), rowAfter(after)),
    append: (id, expectedRevision, transition, after) => store.append(checked(id), expectedRevision, stored(transition), rowAfter(after)),
    read: async (id) => (await store.read(checked(id))) as unknown as ReadOutcome<WorkflowTransition>,
    // Only where the store reads tails: without it the kernel reads whole logs.
    ...(readAfter === undefined
      ? {}
      : {
          readAfter: async (id: string, revision: string) => (await readAfter.call(store, checked(id), revision)) as unknown as TailOutcome<WorkflowTransition>,
        }),
    watch: (listener) =>
      store.watch((id, revision) => {
        if (isWorkflowInstanceId(id)) listener(id, revision);
      }),
  };
}
