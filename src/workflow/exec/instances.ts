/**
 * Workflow instances as the facades see them (runtime/workflow-service.ts): start a bundle's
 * pipeline or workflow by name, get and wait for an instance (its principal only; another
 * principal's is not found, as operations are), and cancel where the bundle declares caller
 * cancellation. A thin layer over the executor: the instance is the executor's aggregate, and the
 * WorkflowInstance is a view of its record plus each stage's operation as the contract runtime
 * reports it now.
 *
 * Which document a name runs is the wiring's: `definition` resolves a bundle's workflow (the
 * lowered pipeline, or the standalone workflow) — the workflow language lives outside this layer.
 */
import { AdapterError, AssertionFailure, isAdapterError, unsupported } from '../../contract/errors.js';
import type { JsonValue } from '../../contract/json.js';
import type { ContractRef } from '../../contract/types.js';
import type { DecisionView, SettlementView } from '../../projections/views.js';
import { strangerAnsweredFirst, unreadableAnswer, WorkflowInstanceNotFound } from '../../runtime/errors.js';
import type { InvocationService } from '../../runtime/service.js';
import type {
  WorkflowChildInstance,
  WorkflowInspection,
  WorkflowInspectionUpdate,
  WorkflowInstance,
  WorkflowInstanceService,
  WorkflowStage,
  WorkflowStartRequest,
} from '../../runtime/workflow-service.js';
import type { EventStore } from '../../adapters/store/types.js';
import type { Clock } from '../../contract/clock.js';
import { workflowStuckBoundsDefault, type WorkflowStuckBounds } from '../../events/workflow-index.js';
import { listWorkflowInstances, type WorkflowListPage, type WorkflowListRequest } from '../../runtime/workflow-list.js';
import { isWorkflowInstanceId } from '../ids.js';
import { liveInspection } from './inspection.js';
import type { LiveInspection } from '../../runtime/live-inspection.js';
import { workflowStreams } from './streams.js';
import { pruneWorkflowInstances } from './retention.js';
import type { InstancePruneTally, PruneRequest } from '../../runtime/retention.js';
import { isObject } from './document.js';
import type { WorkflowExecutor } from './executor.js';
import { currentTask } from './index-row.js';
import type { WorkflowRecord } from './record.js';
import { StreamFeed } from '../../runtime/stream-feed.js';

export interface WorkflowDefinition {
  /** The document an instance runs (standalone Serverless Workflow 1.0.3). */
  document: JsonValue;
  cancellation: 'none' | 'caller';
}

export interface WorkflowInstancesOptions {
  executor: WorkflowExecutor;
  /** The deployed bundle with this digest, or undefined. */
  bundleOf(digest: string): ContractRef | undefined;
  /** The named pipeline or workflow of the deployed bundle with this digest, or undefined. */
  definition(digest: string, workflow: string): WorkflowDefinition | undefined;
  /** Where stages' decisions and settlements are read, and a cancelled instance's open stages cancelled. */
  operations?: Pick<InvocationService, 'get' | 'cancel'>;
  /** The store's workflow instances index and logs, for list, inspect and follow; without it they are unavailable. */
  listing?: { store: EventStore; clock: Clock; operators: ReadonlySet<string>; stuckBounds?: WorkflowStuckBounds };
}

const cancelReason = 'cancelled by the caller that started it';

export class WorkflowInstances implements WorkflowInstanceService {
  constructor(private readonly options: WorkflowInstancesOptions) {}

  async start(principalId: string, request: Omit<WorkflowStartRequest, 'waitMs'>): Promise<{ instance: WorkflowInstance; created: boolean }> {
    const deployed = this.options.bundleOf(request.bundle.digest);
    if (!deployed) throw unsupported(`bundle digest ${request.bundle.digest} is not deployed here`);
    if (deployed.id !== request.bundle.id || deployed.version !== request.bundle.version)
      throw new AdapterError(
        'invalid-input',
        `bundle digest ${request.bundle.digest} is ${deployed.id}@${deployed.version}, not ${request.bundle.id}@${request.bundle.version}`,
      );
    const definition = this.options.definition(request.bundle.digest, request.workflow);
    if (!definition) throw new AdapterError('invalid-input', `bundle ${deployed.id}@${deployed.version} has no pipeline or workflow "${request.workflow}"`);
    const { instanceId, created } = await this.options.executor.start({
      principalId,
      bundleDigest: request.bundle.digest,
      invocationKey: request.invocationKey,
      document: definition.document,
      input: request.input,
    });
    return { instance: await this.view(await this.visible(principalId, instanceId)), created };
  }

  async get(principalId: string, instanceId: string): Promise<WorkflowInstance> {
    return this.view(await this.visible(principalId, instanceId));
  }

  async wait(principalId: string, instanceId: string, waitMs: number, signal?: AbortSignal): Promise<{ instance: WorkflowInstance; finished: boolean }> {
    await this.visible(principalId, instanceId);
    const executor = this.options.executor;
    const held = await executor.load(instanceId);
    if (!held) throw new WorkflowInstanceNotFound(instanceId);
    // Pruned while it waited: answered as any pruned instance is, at once.
    await executor.kernel
      .wait(held, (record) => record.status !== 'running', signal?.aborted ? 0 : waitMs, signal)
      .catch((error: unknown) => {
        throw isAdapterError(error) && error.kind === 'expired' ? new WorkflowInstanceNotFound(instanceId) : error;
      });
    // Both from the record as it is now: an end committed since the kernel's wait answered is in
    // the body, and so finished (an ended instance never runs again).
    const record = held.record;
    return { instance: await this.view(record), finished: record.status !== 'running' };
  }

  async cancel(principalId: string, instanceId: string): Promise<WorkflowInstance> {
    const record = await this.visible(principalId, instanceId);
    if (this.cancellationOf(record) !== 'caller')
      throw unsupported(`workflow "${record.started.workflowName}" does not declare caller cancellation (the bundle's workflowCancellation)`);
    if (record.status !== 'running') return this.view(record);
    const cancelled = await this.options.executor.cancel(instanceId, cancelReason);
    // The cancel's commit ends a running instance whatever holds its lease (decideCancel checks no
    // lease and its guard is open), re-decides on a conflict (an instance another worker ended is
    // answered as it ended) and throws otherwise; children are disposed of after the end, not
    // before it. So it has ended here, and the cancel answers it (HTTP 200, never 202).
    if (cancelled.status === 'running') throw new AssertionFailure(`workflow instance ${instanceId}: a cancellation that returned left it running`);
    // Ended by itself (completed, faulted: its timeout) since it was looked at, the cancel answers it
    // as it ended, and its open calls run on, as they do when the cancel comes after that end.
    if (cancelled.status === 'cancelled') await this.cancelOpenStages(principalId, cancelled);
    return this.view(cancelled);
  }

  async list(principalId: string, request: WorkflowListRequest): Promise<WorkflowListPage> {
    const listing = this.listing();
    return listWorkflowInstances(
      {
        index: listing.store.workflowIndex,
        nowMs: listing.clock.nowMs(),
        bounds: listing.stuckBounds ?? workflowStuckBoundsDefault,
        principalId: listing.operators.has(principalId) ? undefined : principalId,
      },
      request,
    );
  }

  /** The record and the whole log as stored: every transition, applied or void (guard-on-fold stores). */
  async inspect(principalId: string, instanceId: string): Promise<WorkflowInspection> {
    return (await this.inspectLive(principalId, instanceId)).first;
  }

  async inspectLive(principalId: string, instanceId: string): Promise<LiveInspection<WorkflowInspection, WorkflowInspectionUpdate>> {
    const listing = this.listing();
    if (!isWorkflowInstanceId(instanceId)) throw new WorkflowInstanceNotFound(instanceId);
    const visible = (owner: string) => owner === principalId || listing.operators.has(principalId);
    const inspecting = liveInspection(
      {
        store: workflowStreams(listing.store),
        view: (record) => this.view(record),
        visible: (record) => visible(record.started.principalId),
      },
      instanceId,
    ).catch(async (error: unknown) => {
      throw await this.unreadable(error, instanceId, visible);
    });
    // The whole log is read here: a stranger is answered by the index row, not after it (strangerAnsweredFirst).
    return strangerAnsweredFirst(
      inspecting,
      () => listing.store.workflowIndex.get(instanceId),
      visible,
      () => new WorkflowInstanceNotFound(instanceId),
    );
  }

  /** A read of the instance that failed, as `visible`'s principal is answered it (runtime/errors.ts unreadableAnswer). */
  private unreadable(error: unknown, instanceId: string, visible: (owner: string) => boolean): Promise<unknown> {
    // Without the index (no listing) nothing written says whose it is: not found.
    const index = this.options.listing?.store.workflowIndex;
    return unreadableAnswer(
      error,
      async () => index?.get(instanceId),
      visible,
      () => new WorkflowInstanceNotFound(instanceId),
    );
  }

  /** Every follower's notices from one watch of the store's workflow streams, opened with the first and closed with the last. */
  private readonly feed = new StreamFeed((listener) => workflowStreams(this.listing().store).watch((instanceId) => listener(instanceId)));

  followInstance(instanceId: string, listener: () => void): Promise<{ close(): Promise<void> }> {
    return this.feed.follow(instanceId, listener);
  }

  followInstances(listener: () => void): Promise<{ close(): Promise<void> }> {
    return this.feed.followAll(listener);
  }

  async prune(request: Omit<PruneRequest<InstancePruneTally>, 'store'>): Promise<InstancePruneTally> {
    return pruneWorkflowInstances({ store: this.listing().store, ...request });
  }

  forget(instanceId: string): void {
    this.options.executor.kernel.letGoPruned(instanceId);
  }

  private listing(): NonNullable<WorkflowInstancesOptions['listing']> {
    const listing = this.options.listing;
    if (!listing) throw new AdapterError('unavailable', 'this runtime keeps no workflow instances index');
    return listing;
  }

  /** The view of a record as stored (tests compare it for the live record and the replayed one). */
  async view(record: WorkflowRecord): Promise<WorkflowInstance> {
    const digest = record.started.bundleDigest;
    return {
      instanceId: record.instanceId,
      bundle: this.options.bundleOf(digest) ?? { id: '', version: '', digest },
      workflow: record.started.workflowName,
      invocationKey: record.started.invocationKey,
      status: record.status,
      currentTask: currentTask(record),
      stages: await this.stages(record),
      output: record.status === 'completed' ? record.output : null,
      error: record.error,
      cancellation: this.cancellationOf(record),
      startedAtMs: record.startedAtMs,
      endedAtMs: record.endedAtMs,
      parent: record.started.parent ? { instanceId: record.started.parent.instanceId, at: record.started.parent.at } : null,
      childInstances: await this.childInstances(record),
    };
  }

  /** The child instances (`run: workflow`) in the order their tasks started, each with its status now. */
  private async childInstances(record: WorkflowRecord): Promise<WorkflowChildInstance[]> {
    const order = (at: string) => record.tasks[at]?.startedSeq ?? Number.MAX_SAFE_INTEGER;
    const children = Object.entries(record.subworkflows).sort(([a], [b]) => order(a) - order(b));
    return Promise.all(
      children.map(async ([at, child]) => ({
        at,
        instanceId: child.instanceId,
        workflow: child.workflow,
        status: await this.statusOf(child.instanceId),
        disposition: child.disposition?.disposition ?? null,
      })),
    );
  }

  /**
   * An instance's status now: its index row (no instance is loaded to read it), else its record;
   * null when there is none (never started), `pruned` when retention expired it (a parent kept by
   * retention outlives the child it ran: the parent stays readable).
   */
  private async statusOf(instanceId: string): Promise<WorkflowChildInstance['status']> {
    const index = this.options.listing?.store.workflowIndex;
    const row = index ? await index.get(instanceId) : undefined;
    if (row) return row.status;
    try {
      return (await this.options.executor.get(instanceId))?.status ?? null;
    } catch (error) {
      if (isAdapterError(error) && error.kind === 'expired') return 'pruned';
      throw error;
    }
  }

  private cancellationOf(record: WorkflowRecord): 'none' | 'caller' {
    return this.options.definition(record.started.bundleDigest, record.started.workflowName)?.cancellation ?? 'none';
  }

  /**
   * The record, when this principal started it; not found otherwise, exactly like an unknown id —
   * an id that is no instance id included (the store would refuse it as invalid input).
   */
  private async visible(principalId: string, instanceId: string): Promise<WorkflowRecord> {
    if (!isWorkflowInstanceId(instanceId)) throw new WorkflowInstanceNotFound(instanceId);
    const own = (record: WorkflowRecord) => record.started.principalId === principalId;
    // Another principal's instance read from the store is answered 404 without being held: a
    // stranger's reads neither fill this worker's cache nor resume the instance here.
    const loading = this.options.executor.get(instanceId, own).catch(async (error: unknown) => {
      // A pruned instance (tombstoned, src/workflow/exec/retention.ts) is gone, as a pruned operation is: not found, to anyone.
      if (isAdapterError(error) && error.kind === 'expired') return undefined;
      // An unreadable log is unavailable to its owner only; to anyone else it is not found (unreadableAnswer).
      throw await this.unreadable(error, instanceId, (owner) => owner === principalId);
    });
    // One held here answers its principal at once; otherwise a stranger's read is answered by the index row, not after the log (strangerAnsweredFirst).
    const index = this.options.listing?.store.workflowIndex;
    const held = index !== undefined && this.options.executor.holds(instanceId);
    const row = index === undefined || held ? undefined : () => index.get(instanceId);
    const record = await strangerAnsweredFirst(
      loading,
      row,
      (owner) => owner === principalId,
      () => new WorkflowInstanceNotFound(instanceId),
    );
    if (record && own(record)) return record;
    // A stranger's 404 for one held here waits for the row lookup an absent id's waits for: its
    // time would otherwise tell the stranger that an instance it computed the id of runs here.
    if (held) await index.get(instanceId).catch(() => undefined);
    throw new WorkflowInstanceNotFound(instanceId);
  }

  /** Each contract call in the order its task started, with its operation's decision and settlement. */
  private async stages(record: WorkflowRecord): Promise<WorkflowStage[]> {
    const order = (at: string) => record.tasks[at]?.startedSeq ?? Number.MAX_SAFE_INTEGER;
    const children = Object.entries(record.children).sort(([a], [b]) => order(a) - order(b));
    return Promise.all(
      children.map(async ([at, child]) => {
        const known = await this.operationState(record, at, child.operationId);
        const task = record.tasks[at]?.name ?? '';
        return { at, stage: stageOf(child.ref) ?? task, task, operationId: child.operationId, invocationKey: child.invocationKey, ...known };
      }),
    );
  }

  /** Now, from the contract runtime; else what the instance recorded of the call's answer; else unknown. */
  private async operationState(
    record: WorkflowRecord,
    at: string,
    operationId: string,
  ): Promise<{ decision: DecisionView | null; settlement: SettlementView | null }> {
    const operations = this.options.operations;
    if (operations) {
      try {
        const result = await operations.get(record.started.principalId, operationId);
        return { decision: result.decision, settlement: result.settlement };
      } catch {
        // Not admitted (yet), or the contract runtime cannot say now: fall back to the log.
      }
    }
    const step = record.steps[`${at}>invoke`];
    const answer = step && 'ok' in step && isObject(step.ok) ? step.ok : undefined;
    return {
      decision: (answer?.decision ?? null) as unknown as DecisionView | null,
      settlement: (answer?.settlement ?? null) as unknown as SettlementView | null,
    };
  }

  /**
   * A cancelled instance's contract calls still waiting for their answer: each operation is
   * cancelled where its interaction declares caller cancellation; any other is left to finish
   * (detached), which its own decision and settlement record.
   */
  private async cancelOpenStages(principalId: string, record: WorkflowRecord): Promise<void> {
    const operations = this.options.operations;
    if (!operations) return;
    const open = Object.entries(record.children).filter(([at]) => record.steps[`${at}>invoke`] === undefined);
    await Promise.all(open.map(([, child]) => operations.cancel(principalId, child.operationId).catch(() => undefined)));
  }
}

/**
 * The name of the top-level task a task is part of (a pipeline's stage), from the task's pointer
 * (its `ref`, which carries none of its key's markers): `/do/1/publish/do/1/invoke` → publish,
 * `/do/0/a~0b` → a~b, `/do/0/a~1b` → a/b.
 */
function stageOf(ref: string): string | undefined {
  const match = /^\/do\/[0-9]+\/([^/]+)/.exec(ref);
  return match?.[1]?.replace(/~1/g, '/').replace(/~0/g, '~');
}
