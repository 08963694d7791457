/**
 * The coordinator: admission, dispatch (outbox), result intake, deadlines and waiting, on the
 * aggregate kernel's commit pipeline (src/kernel). It owns no truth of its own: every change is a
 * Transition appended to the operation's stream with the expected revision as CAS, and the cached
 * record is exactly the fold of what was appended. Work on one operation is serialized through
 * its queue; operations are independent.
 *
 * Its parts: admission (admit.ts), the kernel (commit pipeline, operation cache, timers, store
 * notices, waiters), group commit (group-commit.ts), the outbox (outbox.ts) and peer intake
 * (intake.ts). The kernel and admission are reachable for tests and operators as fields.
 */
import { decisionAt, PolicyFailure, refusalError, type CheckedDecision } from '../contract/authorization.js';
import { AdapterError, AssertionFailure, isAdapterError } from '../contract/errors.js';
import { limits } from '../contract/limits.js';
import { isOperationId } from '../contract/ids.js';
import type { ContractRef, InvocationRequest, RuntimeContext, WaitFor } from '../contract/types.js';
import type { DomainEvent, StoredTransition, Transition } from '../events/types.js';
import {
  cancelUncarried,
  decideCancelOperation,
  decideDue,
  decideDurabilityLost,
  decideLogBudgetExhausted,
  selectionCandidates,
  type CandidateAuthorization,
} from '../domain/decide.js';
import { Kernel, storeError, type Stored } from '../kernel/index.js';
import type { EventStore } from '../adapters/store/types.js';
import { isCancelling, isClaimed, isRetrying, isSettled } from '../machines/index.js';
import { branchList, type BranchRecord, type OperationRecord } from '../projections/record.js';
import { invocationResult, reached, type InvocationResult } from '../projections/views.js';
import type { OperationInspection, OperationInspectionUpdate } from '../projections/inspection.js';
import type { LiveInspection } from './live-inspection.js';
import { liveOperationInspection } from './operation-inspection.js';
import type { AuthorizationDecision, Policy } from '../adapters/policy/types.js';
import { inboundPattern } from '../adapters/transport/subjects.js';
import type { Subscription } from '../adapters/transport/types.js';
import { Admission } from './admit.js';
import { contractBoundary, effectiveBoundary } from './boundary.js';
import type { Invoked } from './service.js';
import { OperationNotFound, strangerAnsweredFirst, unreadableAnswer } from './errors.js';
import { GroupCommit } from './group-commit.js';
import { newEntry, resultBatchMsDefault, type Caller, type CoordinatorDeps, type Decider, type OpEntry, type RuntimeHost, type SubmitOptions } from './host.js';
import { Metrics, observeOpenOperations } from './metrics.js';
import { OperationLog, silentLogger, type RejectionContext } from './operation-log.js';
import { disarmReconciles, dispatchCancels, dispatchRequests } from './outbox.js';
import { onPeerMessage } from './intake.js';
import { operationAggregate } from './operation-aggregate.js';
import { StreamFeed } from './stream-feed.js';
import { observeStuckOperations } from './stuck-metrics.js';
import { listOperations, type ListPage, type ListRequest } from './operation-list.js';
import { stuckBoundsDefault } from '../events/operation-index.js';
import { LogBudgetExhausted, logRoom, logSizeOf, resolveBudgets, transitionBytes, type Budgets, type TransitionKind } from './log-budget.js';

export type { Caller, CoordinatorDeps, Deployment } from './host.js';
export { storeError } from '../kernel/kernel.js';

/** Settled operations kept in memory for fast reads; older ones are reloaded from the store on demand. */
const settledCacheMaxDefault = 2048;

/** What a test or an operator may put in place of a coordinator's defaults, at construction. */
export interface CoordinatorSeams {
  /** Settled operations kept in memory (default 2048). */
  settledCacheMax?: number;
}

export class Coordinator implements RuntimeHost {
  readonly metrics: Metrics;
  /** The operation lifecycle as log lines (deps.logger; silent without one). */
  readonly log: OperationLog;
  readonly budgets: Budgets;
  /** The commit pipeline, the operation cache, timers, store notices and waiters. */
  readonly kernel: Kernel<OperationRecord, Transition, OpEntry>;
  readonly admission: Admission;
  private readonly batches: GroupCommit;
  private readonly paths = new Map<string, Promise<Subscription>>();
  /** Serialized sizes of transitions on their way to the store, measured once by the log-budget check. */
  private readonly sizes = new WeakMap<Transition, number>();
  /** Closing transitions on their way to the store past this process's ordinary room, by kind: counted once appended. */
  private readonly closingsPastRoom = new WeakMap<Transition, Exclude<TransitionKind, 'ordinary'>>();
  /** Readers following one operation's stream (the console's live updates). */
  /** Operation streams only: a workflow instance's appends move no operation a reader follows. */
  private readonly feed = new StreamFeed((listener) => this.deps.store.watch((id) => isOperationId(id) && listener(id)));
  private closed = false;

  constructor(
    readonly deps: CoordinatorDeps,
    seams: CoordinatorSeams = {},
  ) {
    this.metrics = deps.metrics ?? new Metrics();
    this.log = new OperationLog(deps.logger ?? silentLogger, () => deps.clock.nowMs());
    // Never a transition or count budget past what the store takes (log-budget.ts resolveBudgets).
    this.budgets = resolveBudgets(deps.budgets, deps.store.limits);
    this.kernel = new Kernel<OperationRecord, Transition, OpEntry>({
      aggregate: operationAggregate,
      // Read through deps on every call: a deployment's store is the one deps names now.
      store: () => this.deps.store,
      clock: deps.clock,
      finishedCacheMax: seams.settledCacheMax ?? settledCacheMaxDefault,
      hooks: {
        due: (entry) => this.dueCommand(entry),
        beforeAppend: (entry, transition) => this.checkLogRoom(entry, transition),
        committed: (entry, before, stored) => this.noteCommitted(entry, before, stored),
        reread: (entry, log) => void (entry.log = logSizeOf(log)),
        // A tail read after the record's revision: the log is what was counted and the tail.
        extended: (entry, tail) => {
          const added = logSizeOf(tail);
          entry.log = { transitions: entry.log.transitions + added.transitions, bytes: entry.log.bytes + added.bytes };
        },
        // Queued first: nothing of the operation (its due timers, its outbox) runs before it.
        loaded: (entry, log) => this.checkContinuity(entry, log[0]?.transition.events[0]),
        moved: (entry, loaded) => this.afterCommit(entry, loaded),
        failed: (stage, error) => this.failed('store', stage, error),
        lostWrites: (entry, lost) => this.closeLostWrites(entry, lost),
      },
    });
    this.batches = new GroupCommit(this.kernel, deps.clock, (reason, record) => this.rejected(reason, { record }), deps.resultBatchMs ?? resultBatchMsDefault);
    this.admission = new Admission(this);
    observeOpenOperations(this.metrics, () =>
      this.kernel.held().flatMap((e) => (e.record.settlement.status === 'pending' ? [{ decided: e.record.decision !== null }] : [])),
    );
    observeStuckOperations(this.metrics.registry, () => this.deps.store.index, deps.clock, deps.stuckBounds ?? stuckBoundsDefault);
  }

  /** A peer message refused: counted by reason and logged with what is known of it. */
  rejected(reason: string, context: RejectionContext = {}): void {
    this.metrics.rejections.inc({ reason });
    this.log.rejected(reason, context);
  }

  /** A store or transport failure at a stage: counted and logged. A policy failure is counted where it is asked (authorize) and only logged here. */
  failed(layer: 'store' | 'transport' | 'policy', stage: string, error?: unknown, record?: OperationRecord): void {
    if (layer !== 'policy') (layer === 'store' ? this.metrics.storeErrors : this.metrics.transportErrors).inc({ stage });
    this.log.failed(layer, stage, error, record);
  }

  async expiredInStore(operationId: string): Promise<boolean> {
    if ((await this.deps.store.read(operationId)).kind !== 'expired') return false;
    // Its payload is gone: a later command on it is answered as one on any tombstoned operation (load: expired).
    this.kernel.letGoPruned(operationId);
    return true;
  }

  /** A pruned operation (retention tombstoned it) is let go from memory: what reads it next meets its tombstone. */
  forgetPruned(operationId: string): void {
    this.kernel.letGoPruned(operationId);
  }

  /** Set once the coordinator stops accepting work. */
  get closing(): boolean {
    return this.closed;
  }

  /**
   * Admits (or finds) an invocation. `created` is false when the key already named this operation.
   * `boundary` is the one the caller waits for: its `waitFor`, or the interaction's when it names
   * none; one weaker than the interaction's is refused (invalid-input) before anything is admitted.
   */
  async invoke(caller: Caller, request: InvocationRequest): Promise<Invoked> {
    const declared = contractBoundary(this.deps.bundles, request.contract.digest, request.interaction);
    // An undeployed contract or interaction has no declared boundary; admission rejects it with the precise kind.
    const requested = declared === undefined ? undefined : effectiveBoundary(request.waitFor, declared);
    const answer = await this.admission.invoke(caller, request);
    if (requested === undefined) throw new AssertionFailure('an admitted invocation names a deployed interaction');
    return { ...answer, boundary: requested };
  }

  /**
   * Fails closed: an unavailable policy is an unavailable admission, never an allow, and an allow
   * whose validity ended before its answer arrived is refused as expired (decisionAt). Every
   * protected boundary asks through here.
   */
  async authorize(input: Parameters<Policy['authorize']>[0]): Promise<CheckedDecision> {
    let decision: AuthorizationDecision;
    try {
      decision = await this.deps.policy.authorize(input);
    } catch (error) {
      // Counted here, at every protected boundary alike, as what it is: never as a store error.
      this.metrics.policyErrors.inc({ action: input.action });
      if (isAdapterError(error)) throw new PolicyFailure(error.kind, error.description, { cause: error });
      throw new PolicyFailure('unavailable', `authorization unavailable: ${(error as Error).message}`, { cause: error });
    }
    return decisionAt(decision, this.deps.clock.nowMs());
  }

  /**
   * Whether the principal may start a new instance of the bundle's workflow (action
   * start-workflow); throws the refusal: denied, naming the policy's revision. An allow whose
   * validity ended before it arrived answers nothing, as a policy that could not answer does:
   * unavailable, to be asked again.
   */
  async authorizeWorkflowStart(principalId: string, bundle: ContractRef, workflow: string): Promise<void> {
    const context = this.context({ principalId, senderPeerId: null }, this.deps.clock.nowMs(), null);
    const decision = await this.authorize({ context, action: 'start-workflow', bundle, workflow, peerId: null, branchId: null, attempt: null });
    if (decision.allowed) return;
    if (decision.refusal === 'expired') throw new AdapterError('unavailable', decision.reason);
    throw refusalError(decision);
  }

  // ── effects: outbox, cancels, timers ─────────────────────────────────────

  /**
   * What follows a commit (the kernel has re-armed the due timer): pending requests and cancels
   * published. When recovering, uncertain (`unknown`) publications are reconciled too, with the
   * same identities, and so are cancels the transport rejected for a reason that may pass.
   */
  private afterCommit(entry: OpEntry, recovering: boolean): void {
    disarmReconciles(entry);
    const branches = branchList(entry.record);
    const due = (receipt: string | undefined) => receipt === 'pending' || (recovering && receipt === 'unknown');
    if (entry.record.decision === null && branches.some((b) => due(b.outbox.receipt) && isClaimed(b.state))) {
      void this.kernel
        .enqueue(entry, () => dispatchRequests(this, entry, recovering))
        .catch((error: unknown) => this.failed('transport', 'dispatch', error, entry.record));
    }
    const cancelDue = (cancel: BranchRecord['cancel']) => cancel?.receipt === 'pending' || (recovering && cancelUncarried(cancel));
    if (branches.some((b) => isCancelling(b.state) && cancelDue(b.cancel))) {
      void this.kernel.enqueue(entry, () => dispatchCancels(this, entry)).catch((error: unknown) => this.failed('transport', 'cancel', error, entry.record));
    }
  }

  /**
   * A due instant as a command: held results first, then the candidates' authorization, then the
   * pure decision. A reassignment the policy could not answer for, or answered with an allow
   * already expired, waits (decide.ts reassignment); when nothing else fell due the command fails,
   * so the kernel asks again after its due retry delay rather than at once — the branch's retry
   * instant has passed and would fire again at once.
   */
  private async dueCommand(entry: OpEntry): Promise<Decider> {
    await this.batches.releaseHeld(entry);
    const { authorizations, unanswered } = await this.candidateAuthorizations(entry.record);
    return (current) => {
      const transition = decideDue(current, this.deps.clock.nowMs(), authorizations);
      if (transition === undefined && unanswered !== undefined) throw unanswered;
      return transition;
    };
  }

  /**
   * Authorization for every candidate a due retry could select, asked before the pure decision,
   * in selection order up to the first allow. A policy that cannot answer for a candidate is
   * `unavailable` for it, and one whose allow had expired when it arrived is `expired` for it; in
   * either case the later ones are not asked: whether that candidate is authorized now is
   * unknown, so selection can neither pass it over nor fail the branch on it. Only a denial
   * passes a candidate over.
   */
  private async candidateAuthorizations(record: OperationRecord): Promise<{ authorizations: CandidateAuthorization; unanswered?: AdapterError }> {
    const nowMs = this.deps.clock.nowMs();
    const answers = new Map<string, { allowed: boolean; expiresAtMs: number } | 'unavailable' | 'expired'>();
    // Why a candidate has no answer to decide on (the policy could not answer, or its allow arrived expired).
    let unanswered: AdapterError | undefined;
    const context = this.context({ principalId: record.principalId, senderPeerId: record.senderPeerId }, nowMs, record.deadlineMs);
    for (const branch of branchList(record)) {
      if (!isRetrying(branch.state) || branch.retryAtMs === null || branch.retryAtMs > nowMs) continue;
      for (const peerId of selectionCandidates(record, branch)) {
        const input = {
          context,
          action: 'deliver' as const,
          contract: record.contract,
          interaction: record.interaction,
          peerId,
          branchId: branch.branchId,
          attempt: branch.attempt + 1,
        };
        const key = `${branch.branchId}\u0000${peerId}`;
        let decision: CheckedDecision;
        try {
          decision = await this.authorize(input);
        } catch (error) {
          answers.set(key, 'unavailable');
          unanswered = new AdapterError('unavailable', `the policy could not answer for the reassignment of branch ${branch.branchId}`, { cause: error });
          break;
        }
        if (decision.refusal === 'expired') {
          answers.set(key, 'expired');
          unanswered = refusalError(decision);
          break;
        }
        answers.set(key, { allowed: decision.allowed, expiresAtMs: decision.expiresAtMs });
        if (decision.allowed) break;
      }
    }
    const authorizations: CandidateAuthorization = (branchId, peerId) => answers.get(`${branchId}\u0000${peerId}`);
    return unanswered === undefined ? { authorizations } : { authorizations, unanswered };
  }

  /** The inbound path for one kind of peer message of an interaction, registered once before it is needed. */
  inboundPath(namespace: string, interaction: string, kind: 'result' | 'claim' | 'cancel-result'): Promise<Subscription> {
    const key = `${namespace}\u0000${interaction}\u0000${kind}`;
    let path = this.paths.get(key);
    if (!path) {
      path = this.deps.transport.subscribe(inboundPattern(namespace, interaction, kind), (message) =>
        onPeerMessage(this, namespace, interaction, kind, message),
      );
      path.catch(() => this.paths.delete(key));
      this.paths.set(key, path);
    }
    return path;
  }

  // ── the commit pipeline (src/kernel), with the operation's log budgets ────

  /** Decides against the current record and appends at its revision (CAS), retrying on conflict. */
  commitDecided(entry: OpEntry, decide: Decider): Promise<void> {
    return this.kernel.commit(entry, decide);
  }

  /** Queues a command; commands waiting for the queue together are committed as one transition (group-commit.ts). */
  submit(entry: OpEntry, prepare: () => Promise<Decider>, weightBytes: number, options: SubmitOptions = {}): Promise<void> {
    return this.batches.submit(entry, prepare, weightBytes, options);
  }

  enqueue<T>(entry: OpEntry, work: () => Promise<T>): Promise<T> {
    return this.kernel.enqueue(entry, work);
  }

  /**
   * The log budgets (log-budget.ts), checked before each append: a transition over
   * transitionBytesMax answers invalid-input without a write (a batch then splits; a single
   * command is refused). An ordinary one the log has no room for throws LogBudgetExhausted, after
   * closing an undecided operation, unless several commands share it: the batch then splits the
   * same way, each command checked on its own (group-commit.ts isTogether). A closing one goes to
   * the store, whose limits alone refuse it.
   */
  private checkLogRoom(entry: OpEntry, transition: Transition): { kind: 'invalid-input'; description: string } | undefined | Promise<never> {
    const bytes = transitionBytes(transition);
    const room = logRoom(entry.record, entry.log, transition, bytes, this.budgets);
    if (room.kind === 'oversized' || (room.kind === 'ordinary' && this.batches.isTogether(transition)))
      return { kind: 'invalid-input', description: room.description };
    if (room.kind === 'ordinary') return this.refuseForLogBudget(entry, room);
    this.sizes.set(transition, bytes);
    if (room.kind === 'closing-past-room') this.closingsPastRoom.set(transition, room.closing);
    return undefined;
  }

  private async refuseForLogBudget(entry: OpEntry, room: { description: string }): Promise<never> {
    if (entry.record.decision === null) await this.closeForLogBudget(entry);
    throw new LogBudgetExhausted(room.description);
  }

  /**
   * The defined outcome of an undecided operation whose log reached its ordinary budget: it closes
   * as indeterminate. When that cannot be committed (at or after the deadline, whose own transition
   * closes it; or the store failing) the command that did not fit is refused all the same.
   */
  private async closeForLogBudget(entry: OpEntry): Promise<void> {
    try {
      await this.kernel.commit(entry, (current) => decideLogBudgetExhausted(current, this.deps.clock.nowMs()));
    } catch (error) {
      if (error instanceof AssertionFailure) throw error;
      this.failed('store', 'log-budget', error, entry.record);
    }
  }

  /** A transition this process appended: the log's size, the outbox's new publications, the metrics and log lines. */
  private noteCommitted(entry: OpEntry, before: OperationRecord, stored: Stored<Transition>): void {
    const bytes = this.sizes.get(stored.transition) ?? transitionBytes(stored.transition);
    entry.log = { transitions: entry.log.transitions + 1, bytes: entry.log.bytes + bytes };
    this.metrics.appends.inc();
    const pastRoom = this.closingsPastRoom.get(stored.transition);
    if (pastRoom !== undefined) this.metrics.closingsPastBudget.inc({ kind: pastRoom });
    for (const event of stored.transition.events) if (event.type === 'branch-reassigned') entry.unsent.add(event.publicationId);
    const after = entry.record;
    if (before.decision === null && after.decision !== null) {
      this.metrics.decisions.inc({ outcome: after.decision.outcome });
      this.metrics.decisionSeconds.observe({ outcome: after.decision.outcome }, (after.decision.closedAtMs - after.admittedAtMs) / 1000);
    }
    if (before.settlement.status === 'pending' && after.settlement.status !== 'pending') this.metrics.settlements.inc({ status: after.settlement.status });
    this.log.moved(before, after);
  }

  /**
   * Listens for appends to this store by any client (EventStore.watch). Coordinators that share
   * a store (several `convoke serve` processes: commands go to a queue group, results to shared
   * consumers) each hold some operations in memory; a notice of a revision a coordinator has not
   * applied makes it read that operation again, so its waiters, reads and timers follow the
   * other's commits.
   */
  watchStore(): Promise<void> {
    return this.kernel.watch();
  }

  // ── operation cache ──────────────────────────────────────────────────────

  /**
   * The cached entry, or one rebuilt from the store (another coordinator's operation, or after a
   * restart). A rebuilt entry is held — its timers armed, its outbox reconciled — only when `keep`
   * accepts its record; otherwise it is answered without being held (see RuntimeHost.load).
   */
  async load(operationId: string, keep?: (record: OperationRecord) => boolean): Promise<OpEntry | undefined> {
    const cached = this.kernel.cached(operationId);
    if (cached) return cached;
    const read = await this.kernel.readLog(operationId);
    if (read.kind === 'not-found') return undefined;
    if (read.kind === 'expired') throw new AdapterError('expired', `operation ${operationId} has expired; its key is kept and never recreated`);
    if (read.kind === 'empty') throw new AdapterError('expired', `operation ${operationId} was never admitted within its time guard`);
    if (read.kind !== 'ok') throw storeError(read, 'read');
    const record = read.record;
    const interaction = this.deps.bundles.get(record.contract.digest)?.interactions.get(record.interaction);
    if (!interaction) throw new AdapterError('unsupported', `operation ${operationId} uses contract ${record.contract.digest}, which is not deployed here`);
    const entry = newEntry(record, interaction);
    if (keep !== undefined && !keep(record)) return entry;
    // A record loaded from the store (a restart, or another coordinator's operation) resumes its
    // timers from the recorded instants and replays its pending outbox with the same identities.
    return this.kernel.adopt(entry, read.log);
  }

  /**
   * An open operation loaded from the store whose peers' durable streams were created after it
   * was admitted (deleted and recreated while no coordinator watched: the new streams carry their
   * own anchors and look continuous) closes as indeterminate, reason durability-lost — never at its
   * deadline as if a peer had not answered. A check that cannot be made leaves it open: the
   * durability monitor reports streams it cannot verify.
   */
  private checkContinuity(entry: OpEntry, admitted: DomainEvent | undefined): void {
    const continuity = this.deps.continuity;
    if (!continuity || entry.record.decision !== null || admitted?.type !== 'operation-admitted' || admitted.streamsCreatedUntilMs === undefined) return;
    const since = admitted.streamsCreatedUntilMs;
    void this.kernel
      .enqueue(entry, async () => {
        const lost = await continuity.lostSince(entry.record.subjectNamespace, entry.record.manifest.eligible, since);
        if (lost !== undefined) await this.kernel.commit(entry, (current) => decideDurabilityLost(current));
      })
      .catch((error: unknown) => this.failed('store', 'durability-lost', error, entry.record));
  }

  /**
   * The durable transport's guarantee broke in these namespaces: every open operation this
   * coordinator holds there closes as indeterminate (spec: such changes "report affected
   * in-flight operations as indeterminate"). Answers how many it closed.
   */
  async closeDurabilityLost(namespaces: ReadonlySet<string>): Promise<number> {
    const open = this.kernel.held().filter((e) => e.record.decision === null && namespaces.has(e.record.subjectNamespace));
    let closed = 0;
    await Promise.all(
      open.map((entry) =>
        this.kernel
          .enqueue(entry, async () => {
            await this.batches.releaseHeld(entry);
            const wasOpen = entry.record.decision === null;
            await this.kernel.commit(entry, (current) => decideDurabilityLost(current));
            if (wasOpen && entry.record.decision?.reason === 'durability-lost') closed++;
          })
          .catch((error: unknown) => this.failed('store', 'durability-lost', error, entry.record)),
      ),
    );
    return closed;
  }

  /**
   * The store lost transitions of this operation it had acknowledged (a broker that lost writes:
   * nats-server 2.9 SIGKILLed). What they recorded — an accepted result, a claim — cannot be
   * proven any more, and the messages they answered were acknowledged, so they will not come
   * again: an open operation closes as indeterminate (durability-lost), never later as failed as
   * if its peers had not answered. Queued behind the command that found it, which is tried again.
   */
  private closeLostWrites(entry: OpEntry, lost: readonly string[]): void {
    this.metrics.storeErrors.inc({ stage: 'lost-writes' });
    void this.kernel
      .enqueue(entry, async () => {
        const wasOpen = entry.record.decision === null;
        await this.kernel.commit(entry, (current) => decideDurabilityLost(current));
        if (wasOpen && entry.record.decision?.reason === 'durability-lost')
          this.deps.onLostWrites?.(entry.id, `the server lost acknowledged writes to its log (revision(s) ${lost.join(', ')} are gone)`);
      })
      .catch((error: unknown) => this.failed('store', 'durability-lost', error, entry.record));
  }

  // ── explicit cancellation ────────────────────────────────────────────────

  /**
   * The original invoker cancels an open operation — only where the interaction declares
   * `cancellation: "caller"` and the policy allows the `cancel` action. The decision closes as
   * failed (reason cancelled) and unfinished branches get cancel requests; settlement follows from
   * their replies. There is no blanket cancellation: undeclared, it is unsupported.
   */
  async cancel(principalId: string, operationId: string): Promise<InvocationResult> {
    const entry = await this.visible(principalId, operationId);
    if (entry.interaction.spec.cancellation !== 'caller') {
      throw new AdapterError('unsupported', `interaction "${entry.interaction.id}" does not declare caller cancellation`);
    }
    const record = entry.record;
    const context = this.context({ principalId, senderPeerId: record.senderPeerId }, this.deps.clock.nowMs(), record.deadlineMs);
    const decision = await this.authorize({
      context,
      action: 'cancel',
      contract: record.contract,
      interaction: record.interaction,
      peerId: null,
      branchId: null,
      attempt: null,
    });
    if (!decision.allowed) throw refusalError(decision);
    await this.kernel.enqueue(entry, async () => {
      await this.batches.releaseHeld(entry);
      // Authorization validity must cover the guarded transition: decided at or after the end of
      // the decision's validity (a late commit decided again), the cancellation is refused.
      await this.kernel.commit(entry, (current) => {
        const nowMs = this.deps.clock.nowMs();
        const checked = decisionAt(decision, nowMs);
        if (!checked.allowed) throw refusalError(checked);
        return decideCancelOperation(current, nowMs, decision.expiresAtMs);
      });
    });
    // The commit either appended the closure, found the decision already closed (the decider
    // answers nothing), or threw (refused, expired, unavailable, a log budget): a conflict is
    // decided again on the reloaded record and a guard-on-fold store answers a void append as
    // expired. So the decision is closed here, and the cancel answers it (HTTP 200, never 202).
    if (entry.record.decision === null) throw new AssertionFailure(`operation ${entry.id}: a cancellation that returned left the decision open`);
    return this.view(entry);
  }

  // ── recovery ─────────────────────────────────────────────────────────────

  /**
   * Rebuilds every unsettled operation from the store: timers re-armed from recorded instants,
   * pending and uncertain outbox entries republished with their stable publication identities.
   * Nothing is inferred from missing data: an operation the store does not have stays unknown.
   * The operations read are those the store's index says may be open (openOperationIds: rows not
   * settled, and logs with no row), not the settled history; each is read and folded, and its log
   * decides. The reads overlap, limits.recoveryReadsMax at a time (docs/operations.md,
   * "Start-up").
   */
  async recover(onProgress?: (done: number) => void): Promise<{ scanned: number; resumed: number; failed: number }> {
    const counts = { scanned: 0, resumed: 0, failed: 0 };
    const ids = recoveryIds(this.deps.store)[Symbol.asyncIterator]();
    // One id at a time from the store's listing, whoever asks: an AsyncIterable need not queue calls.
    let listing: Promise<IteratorResult<string>> = Promise.resolve({ done: false, value: '' });
    const nextId = () => (listing = listing.then(async (last) => (last.done === true ? last : ids.next())));
    const recoverNext = async (): Promise<void> => {
      // A coordinator that closes stops recovering (it runs while serving, docs/operations.md "Start-up").
      for (let next = await nextId(); next.done !== true && !this.closed; next = await nextId()) {
        const operationId = next.value;
        counts.scanned++;
        try {
          const entry = await this.load(operationId);
          if (entry && !isSettled(entry.record.phase)) counts.resumed++;
          else if (entry && entry.waiters.size === 0) this.kernel.forget(operationId);
        } catch {
          counts.failed++;
        }
        if (onProgress && counts.scanned % 1000 === 0) onProgress(counts.scanned);
      }
    };
    await Promise.all(Array.from({ length: limits.recoveryReadsMax }, recoverNext));
    return counts;
  }

  // ── reading and waiting ──────────────────────────────────────────────────

  /** The typed state, for the original invoking principal only; anything else is not found. */
  async get(principalId: string, operationId: string): Promise<InvocationResult> {
    return this.view(await this.visible(principalId, operationId));
  }

  private async visible(principalId: string, operationId: string): Promise<OpEntry> {
    const own = (record: OperationRecord) => record.principalId === principalId;
    // Another principal's operation read from the store is answered 404 without being held: a
    // stranger's reads neither fill this process's cache nor resume the operation's timers here.
    const loading = this.load(operationId, own).catch(async (error: unknown) => {
      // An unreadable log is unavailable to its owner only; to anyone else it is not found (unreadableAnswer).
      if (isAdapterError(error) && error.kind === 'unavailable') throw await this.unreadable(error, operationId, (owner) => owner === principalId);
      return undefined;
    });
    // One held here answers its principal at once; otherwise a stranger's read is answered by the index row, not after the log (strangerAnsweredFirst).
    const held = this.kernel.cached(operationId) !== undefined;
    const row = held ? undefined : () => this.deps.store.index.get(operationId);
    const entry = await strangerAnsweredFirst(
      loading,
      row,
      (owner) => owner === principalId,
      () => new OperationNotFound(operationId),
    );
    if (entry && own(entry.record)) return entry;
    // A stranger's 404 for one held here waits for the row lookup an absent id's waits for: its
    // time would otherwise tell the stranger that an operation it computed the id of is open here.
    if (held) await this.deps.store.index.get(operationId).catch(() => undefined);
    throw new OperationNotFound(operationId);
  }

  /** Waits until the boundary is reached or waitMs passes; returns the state either way. */
  async wait(
    principalId: string,
    operationId: string,
    boundary: WaitFor,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<{ result: InvocationResult; reached: boolean }> {
    const entry = await this.visible(principalId, operationId);
    // Pruned while it waited: answered as any pruned operation is, at once.
    await this.kernel
      .wait(entry, (record) => reached(record, boundary), waitMs, signal)
      .catch((error: unknown) => {
        throw isAdapterError(error) && error.kind === 'expired' ? new OperationNotFound(operationId) : error;
      });
    // Both from the record as it is now: a commit since the kernel's wait answered (a decision as
    // the wait ran out) is in the body, and so reached (a boundary, once reached, stays reached).
    return { result: this.view(entry), reached: reached(entry.record, boundary) };
  }

  /**
   * The result, branches and timeline read from the store's log (not the cache: a reader after a
   * store notice sees that append), for the original principal or an operator principal.
   */
  async inspect(principalId: string, operationId: string): Promise<OperationInspection> {
    return (await this.inspectLive(principalId, operationId)).first;
  }

  inspectLive(principalId: string, operationId: string): Promise<LiveInspection<OperationInspection, OperationInspectionUpdate>> {
    const operator = this.deps.operators?.has(principalId) === true;
    const visible = (owner: string) => operator || owner === principalId;
    const inspecting = liveOperationInspection(
      {
        store: this.deps.store,
        interactionOf: (record) => this.deps.bundles.get(record.contract.digest)?.interactions.get(record.interaction),
        visible: (record) => visible(record.principalId),
      },
      operationId,
    ).catch(async (error: unknown) => {
      throw await this.unreadable(error, operationId, visible);
    });
    // The whole log is read here: a stranger is answered by the index row, not after it (strangerAnsweredFirst).
    return strangerAnsweredFirst(
      inspecting,
      () => this.deps.store.index.get(operationId),
      visible,
      () => new OperationNotFound(operationId),
    );
  }

  /** A read of the operation that failed, as `visible`'s principal is answered it (runtime/errors.ts unreadableAnswer). */
  private unreadable(error: unknown, operationId: string, visible: (owner: string) => boolean): Promise<unknown> {
    return unreadableAnswer(
      error,
      () => this.deps.store.index.get(operationId),
      visible,
      () => new OperationNotFound(operationId),
    );
  }

  followOperation(operationId: string, listener: () => void): Promise<{ close(): Promise<void> }> {
    return this.feed.follow(operationId, listener);
  }

  followOperations(listener: () => void): Promise<{ close(): Promise<void> }> {
    return this.feed.followAll(listener);
  }

  /**
   * A page of the store's operations index. A caller sees its own operations; an operator
   * principal (deps.operators) sees every principal's.
   */
  async list(principalId: string, request: ListRequest): Promise<ListPage> {
    const operator = this.deps.operators?.has(principalId) === true;
    return listOperations(
      {
        index: this.deps.store.index,
        nowMs: this.deps.clock.nowMs(),
        bounds: this.deps.stuckBounds ?? stuckBoundsDefault,
        principalId: operator ? undefined : principalId,
      },
      request,
    );
  }

  /** The current record (operators, tests, replay checks). */
  async record(operationId: string): Promise<OperationRecord | undefined> {
    return (await this.load(operationId))?.record;
  }

  onCommitted(listener: (record: OperationRecord, stored: StoredTransition) => void): () => void {
    return this.kernel.onCommitted(listener);
  }

  /** Stops accepting work and publishing again (armed republications cancelled), lets queued appends finish, and closes the result paths. */
  async close(): Promise<void> {
    this.closed = true;
    // Nothing is published again: an armed republication would run on a closed coordinator.
    for (const entry of this.kernel.held()) disarmReconciles(entry, true);
    await this.feed.close();
    await this.kernel.close();
    const paths = await Promise.allSettled([...this.paths.values()]);
    for (const p of paths) if (p.status === 'fulfilled') await p.value.close();
  }

  view(entry: OpEntry): InvocationResult {
    return invocationResult(entry.record, entry.interaction);
  }

  context(caller: Caller, nowMs: number, deadlineMs: number | null): RuntimeContext {
    return { principalId: caller.principalId, senderPeerId: caller.senderPeerId, ...this.deps.deployment, nowMs, deadlineMs };
  }
}

/**
 * The operations recovery reads: the index's open ones, or — when the index cannot answer (a
 * store failure while listing) — every live operation, as before the index, from where the index
 * listing stopped (an operation read twice is the cached one the second time).
 */
async function* recoveryIds(store: EventStore): AsyncIterable<string> {
  try {
    yield* store.index.openOperationIds();
    return;
  } catch {
    // fall through: read everything
  }
  yield* store.operationIds();
}
