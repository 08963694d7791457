/**
 * The coordinator: admission, dispatch (outbox), result intake, deadlines and waiting. It owns
 * no truth of its own: every change is a Transition appended to the operation's stream with the
 * expected revision as CAS, and the cached record is exactly the fold of what was appended.
 * Work on one operation is serialized through a per-operation queue; operations are independent.
 */
import { BoundedMap } from '../contract/bounded-map.js';
import type { CompiledBundle, CompiledInteraction } from '../contract/bundle.js';
import { canonicalJson, sha256Hex } from '../contract/canonical.js';
import { decisionAt, refusalError, type CheckedDecision } from '../contract/authorization.js';
import { AdapterError, AssertionFailure, isAdapterError } from '../contract/errors.js';
import { operationId as deriveOperationId } from '../contract/ids.js';
import type { JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import type { ContractRef, InvocationRequest, RuntimeContext, WaitFor } from '../contract/types.js';
import type { DomainEvent, StoredTransition, Transition } from '../events/types.js';
import { planAdmission, type PeerAuthorization } from '../domain/admission.js';
import { commandsPerTransitionMax, decideCancelOperation, decideDue, decideDurabilityLost, decideLogBudgetExhausted, decideTogether, nextDueMs, resultGuardEndMs, selectionCandidates, type CandidateAuthorization } from '../domain/decide.js';
import { isCancelling, isClaimed, isRetrying, isSettled } from '../machines/index.js';
import { applyStored, branchList, fold, type OperationRecord } from '../projections/record.js';
import { couldClose } from '../projections/decision.js';
import { invocationResult, reached, type InvocationResult } from '../projections/views.js';
import type { AudienceObservation } from '../adapters/directory/types.js';
import type { AuthorizationDecision, Policy } from '../adapters/policy/types.js';
import type { AppendOutcome, StoreFailure } from '../adapters/store/types.js';
import { inboundPattern } from '../adapters/transport/subjects.js';
import type { Subscription } from '../adapters/transport/types.js';
import { OperationNotFound } from './errors.js';
import { AdmissionBudget } from './admission-budget.js';
import { checkCapabilities } from './capabilities.js';
import { Metrics } from './metrics.js';
import { transitionProblem } from '../events/schemas.js';
import { newEntry, resultBatchMsDefault, type Arrival, type Caller, type CoordinatorDeps, type Decider, type OpEntry, type RuntimeHost, type SubmitOptions, type Waiter } from './host.js';
import { dispatchCancels, dispatchRequests } from './outbox.js';
import { onPeerMessage } from './intake.js';
import { LogBudgetExhausted, logLimits, logRoomProblem, logSizeOf, resolveBudgets, transitionBytes, type Budgets } from './log-budget.js';
import { deploymentAttemptsMax } from './mode.js';

export type { Caller, CoordinatorDeps, Deployment } from './host.js';

const conflictRetriesMax = 8;
/** When a due transition could not be committed, it is tried again after this long. */
const dueRetryMs = 100;
/** Message bytes one shared transition may carry: well inside transitionBytesMax with event overhead. */
const batchBytesMax = limits.transitionBytesMax / 2;
/** Settled operations kept in memory for fast reads; older ones are reloaded from the store on demand. */
const settledCacheMax = 2048;

/** What a batch was found to append when it was probed: reusable while record and instant are unchanged. */
interface Probe {
  record: OperationRecord;
  atMs: number;
  transition: Transition;
}

export class Coordinator implements RuntimeHost {
  readonly metrics: Metrics;
  readonly budgets: Budgets;
  private readonly ops = new Map<string, OpEntry>();
  /** Settled operation ids in settle order, for eviction. */
  private readonly settled = new BoundedMap<string, true>(settledCacheMax);
  private readonly paths = new Map<string, Promise<Subscription>>();
  private readonly committedListeners = new Set<(record: OperationRecord, stored: StoredTransition) => void>();
  private closed = false;
  private readonly resultBatchMs: number;
  /** The store's revision notices (watchStore), closed with the coordinator. */
  private watching: { close(): Promise<void> } | undefined;

  constructor(readonly deps: CoordinatorDeps) {
    this.metrics = deps.metrics ?? new Metrics();
    this.resultBatchMs = deps.resultBatchMs ?? resultBatchMsDefault;
    this.budgets = resolveBudgets(deps.budgets);
  }

  // ── admission ────────────────────────────────────────────────────────────

  /** Admits (or finds) an invocation. `created` is false when the key already named this operation. */
  async invoke(caller: Caller, request: InvocationRequest): Promise<{ result: InvocationResult; created: boolean }> {
    if (this.closed) throw new AdapterError('unavailable', 'the coordinator is shutting down');
    const requestStartMs = this.deps.clock.nowMs();
    rejectCallerManifest(request);
    const { bundle, interaction } = this.resolveContract(request);
    const { canonical, inputDigest } = this.checkInput(interaction, request.input);
    checkInvocationKey(request.invocationKey);
    const operationId = deriveOperationId(caller.principalId, bundle.digest, request.invocationKey);
    const identity: InvocationIdentity = { principalId: caller.principalId, contract: bundle.ref, interaction: interaction.id, inputDigest };
    const cached = this.ops.get(operationId);
    if (cached) return { result: this.view(sameInvocation(cached, identity)), created: false };
    // Create first, without reading the store: a new key (the common case) costs no read, and an
    // existing one is found by the create's own conflict. Whatever refuses a new admission
    // (authorization, planning) still returns an operation that already exists under this key.
    const context = this.context(caller, requestStartMs, null);
    for (;;) {
      let transition: Transition;
      try {
        transition = await this.planWithinBudget(context, bundle, interaction, { operationId, caller, request, inputDigest, inputBytes: Buffer.byteLength(canonical), requestStartMs });
      } catch (refusal) {
        const existing = await this.findExisting(operationId, identity);
        if (existing) return { result: this.view(existing), created: false };
        throw refusal;
      }
      const bytes = this.admissionBytes(transition);
      const outcome = await this.deps.store.create(operationId, transition);
      if (outcome.kind === 'ok') {
        const entry = this.install(operationId, interaction, { revision: outcome.revision, committedAtMs: outcome.committedAtMs, transition }, bytes);
        this.metrics.admissions.inc();
        this.metrics.appends.inc();
        return { result: this.view(entry), created: true };
      }
      if (outcome.kind === 'conflict') {
        // Another coordinator created it first: the same invocation identity returns that operation.
        const raced = await this.findExisting(operationId, identity);
        if (raced) return { result: this.view(raced), created: false };
        continue;
      }
      throw storeError(outcome, 'admission');
    }
  }

  /**
   * Spec: check the serialized record budgets before creating state. The admission transition
   * must fit a transition and leave the log its ordinary room (log-budget.ts).
   */
  private admissionBytes(transition: Transition): number {
    const bytes = transitionBytes(transition);
    const branches = transition.events[0]?.type === 'operation-admitted' ? transition.events[0].manifest.branches.length : 0;
    const roomBytes = logLimits(branches, 'ordinary', this.budgets).bytes;
    const bytesMax = Math.min(this.budgets.transitionBytesMax, roomBytes);
    if (bytes > bytesMax) throw new AdapterError('invalid-input', `the admission record is ${bytes} bytes; the limit for ${branches} branches is ${bytesMax}`);
    return bytes;
  }

  private resolveContract(request: InvocationRequest): { bundle: CompiledBundle; interaction: CompiledInteraction } {
    const bundle = this.deps.bundles.get(request.contract.digest);
    if (!bundle) throw new AdapterError('unsupported', `contract digest ${request.contract.digest} is not deployed here`);
    if (bundle.ref.id !== request.contract.id || bundle.ref.version !== request.contract.version) {
      throw new AdapterError('invalid-input', `contract ${request.contract.id}@${request.contract.version} does not match digest ${request.contract.digest} (${bundle.ref.id}@${bundle.ref.version})`);
    }
    const interaction = bundle.interactions.get(request.interaction);
    if (!interaction) throw new AdapterError('invalid-input', `contract ${bundle.ref.id} has no interaction "${request.interaction}"`);
    return { bundle, interaction };
  }

  private checkInput(interaction: CompiledInteraction, input: JsonValue): { canonical: string; inputDigest: string } {
    const canonical = canonicalJson(input, 'input');
    if (!interaction.validateInput(input)) {
      const detail = (interaction.validateInput.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message ?? e.keyword}`).join('; ');
      throw new AdapterError('invalid-input', `input does not match interaction "${interaction.id}": ${detail}`);
    }
    return { canonical, inputDigest: `sha256:${sha256Hex(canonical)}` };
  }

  /** The operation this key already names, if any; it is returned only for the same whole invocation identity (sameInvocation). */
  private async findExisting(operationId: string, identity: InvocationIdentity): Promise<OpEntry | undefined> {
    const entry = await this.load(operationId);
    return entry && sameInvocation(entry, identity);
  }

  private async authorizeInvoke(context: RuntimeContext, bundle: CompiledBundle, interaction: CompiledInteraction): Promise<CheckedDecision> {
    const decision = await this.authorize({ context, action: 'invoke', contract: bundle.ref, interaction: interaction.id, peerId: null, branchId: null, attempt: null });
    if (!decision.allowed) throw refusalError(decision);
    return decision;
  }

  /**
   * Authorizes the invocation, observes the audience, authorizes each candidate with attempt 1,
   * then observes the directory and the invoke decision again. A snapshot whose directory revision
   * moved meanwhile, or whose policy answers came from more than one policy revision, is retaken;
   * all within the admission budget, which also ends any call that does not answer in time
   * (AdmissionBudget).
   */
  private async planWithinBudget(
    context: RuntimeContext,
    bundle: CompiledBundle,
    interaction: CompiledInteraction,
    args: { operationId: string; caller: Caller; request: InvocationRequest; inputDigest: string; inputBytes: number; requestStartMs: number },
  ): Promise<Transition> {
    checkCapabilities(this.deps, bundle, interaction);
    const budget = new AdmissionBudget(this.deps.clock, args.requestStartMs);
    try {
      for (;;) {
        const invoke = await budget.within(this.authorizeInvoke(context, bundle, interaction), 'the invoke authorization');
        const audience = await budget.within(this.observeAudience(context, bundle, interaction), 'the audience resolver');
        const gathered = interaction.spec.delivery === 'gather' ? await budget.within(this.gather(context, bundle, interaction), 'the manifest source') : undefined;
        const candidates = gathered ? [...new Set(gathered.branches.map((b) => b.peerId))] : audience.peers;
        const authorizations = await budget.within(Promise.all(candidates.map((peerId) => this.authorizeCandidate(context, bundle, interaction, peerId))), 'the candidate authorizations');
        const again = await budget.within(this.observeAudience(context, bundle, interaction), 'the audience resolver');
        const invokeAgain = await budget.within(this.authorizeInvoke(context, bundle, interaction), 'the invoke authorization');
        if (again.revision !== audience.revision || again.presence?.revision !== audience.presence?.revision) continue;
        if (invokeAgain.revision !== invoke.revision || authorizations.some((a) => a.revision !== invoke.revision)) continue;
        const streamsCreatedUntilMs = this.deps.continuity?.createdUntilMs(bundle.bundle.subjectNamespace);
        return planAdmission({
          bundle,
          interaction,
          operationId: args.operationId,
          principalId: args.caller.principalId,
          senderPeerId: args.caller.senderPeerId,
          invocationKey: args.request.invocationKey,
          input: args.request.input,
          inputDigest: args.inputDigest,
          inputBytes: args.inputBytes,
          audience,
          durableDelivery: this.deps.transport.capabilities.durable,
          ...(streamsCreatedUntilMs === undefined ? {} : { streamsCreatedUntilMs }),
          ...(gathered ? { gathered } : {}),
          authorizations,
          policyRevision: invoke.revision,
          invokeExpiresAtMs: Math.min(invoke.expiresAtMs, invokeAgain.expiresAtMs),
          requestStartMs: args.requestStartMs,
          attemptsMax: deploymentAttemptsMax(this.deps.store, this.deps.transport),
        });
      }
    } finally {
      budget.end();
    }
  }

  private async gather(context: RuntimeContext, bundle: CompiledBundle, interaction: CompiledInteraction) {
    if (!this.deps.manifests) throw new AdapterError('unsupported', `interaction "${interaction.id}" gathers its manifest, and no manifest source is configured`);
    return this.deps.manifests.gather(context, bundle.ref, interaction.id);
  }

  /** The audience (a directory group or the bundle's peers) with what the deployment's presence source observed of it. */
  private async observeAudience(context: RuntimeContext, bundle: CompiledBundle, interaction: CompiledInteraction): Promise<AudienceObservation> {
    const audience = interaction.spec.audience;
    const observed = 'peers' in audience ? { peers: audience.peers, revision: 'bundle' } : await this.deps.directory.audience(context, audience.group);
    if (!this.deps.presence) return observed;
    return { peers: observed.peers, revision: observed.revision, presence: await this.deps.presence.observe(bundle.bundle.subjectNamespace, observed.peers) };
  }

  private async authorizeCandidate(context: RuntimeContext, bundle: CompiledBundle, interaction: CompiledInteraction, peerId: string): Promise<PeerAuthorization> {
    const d = await this.authorize({ context, action: 'deliver', contract: bundle.ref, interaction: interaction.id, peerId, branchId: null, attempt: 1 });
    const answer: PeerAuthorization = { peerId, allowed: d.allowed, revision: d.revision, expiresAtMs: d.expiresAtMs };
    if (d.reason !== undefined) answer.reason = d.reason;
    return answer;
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
      if (isAdapterError(error)) throw error;
      throw new AdapterError('unavailable', `authorization unavailable: ${(error as Error).message}`, { cause: error });
    }
    return decisionAt(decision, this.deps.clock.nowMs());
  }

  // ── effects: outbox, cancels, timers ─────────────────────────────────────

  /**
   * What follows a commit: the due timer re-armed, pending requests and cancels published. When
   * recovering, uncertain (`unknown`) publications are reconciled too, with the same identities.
   */
  private afterCommit(entry: OpEntry, recovering = false): void {
    this.armDue(entry);
    const branches = branchList(entry.record);
    const due = (receipt: string | undefined) => receipt === 'pending' || (recovering && receipt === 'unknown');
    if (entry.record.decision === null && branches.some((b) => due(b.outbox.receipt) && isClaimed(b.state))) {
      void this.enqueue(entry, () => dispatchRequests(this, entry)).catch(() => this.metrics.transportErrors.inc({ stage: 'dispatch' }));
    }
    if (branches.some((b) => isCancelling(b.state) && due(b.cancel?.receipt))) {
      void this.enqueue(entry, () => dispatchCancels(this, entry)).catch(() => this.metrics.transportErrors.inc({ stage: 'cancel' }));
    }
  }

  /** One timer per operation, at the next instant something may fall due (deadline, lease, retry, cancel timeout). */
  private armDue(entry: OpEntry): void {
    const dueMs = nextDueMs(entry.record);
    if (dueMs === entry.dueAtMs) return;
    entry.dueTimer?.cancel();
    entry.dueAtMs = dueMs;
    entry.dueTimer = dueMs === undefined ? undefined : this.deps.clock.at(dueMs, () => this.onDue(entry));
  }

  private onDue(entry: OpEntry): void {
    entry.dueAtMs = undefined;
    void this.enqueue(entry, async () => {
      await this.releaseHeld(entry);
      const authorizations = await this.candidateAuthorizations(entry.record);
      await this.commitDecided(entry, (current) => decideDue(current, this.deps.clock.nowMs(), authorizations));
      this.armDue(entry);
    }).catch(() => {
      // The store refused (unavailable, or its clock not yet at the due instant): try again shortly.
      entry.dueTimer = this.deps.clock.at(this.deps.clock.nowMs() + dueRetryMs, () => this.onDue(entry));
    });
  }

  /** Authorization for every candidate a due retry could select, asked before the pure decision. */
  private async candidateAuthorizations(record: OperationRecord): Promise<CandidateAuthorization> {
    const nowMs = this.deps.clock.nowMs();
    const answers = new Map<string, { allowed: boolean; expiresAtMs: number }>();
    const context = this.context({ principalId: record.principalId, senderPeerId: record.senderPeerId }, nowMs, record.deadlineMs);
    for (const branch of branchList(record)) {
      if (!isRetrying(branch.state) || branch.retryAtMs === null || branch.retryAtMs > nowMs) continue;
      for (const peerId of selectionCandidates(record, branch)) {
        const input = { context, action: 'deliver' as const, contract: record.contract, interaction: record.interaction, peerId, branchId: branch.branchId, attempt: branch.attempt + 1 };
        const decision = await this.authorize(input).catch(() => ({ allowed: false, expiresAtMs: Number.MIN_SAFE_INTEGER }));
        answers.set(`${branch.branchId}\u0000${peerId}`, { allowed: decision.allowed, expiresAtMs: decision.expiresAtMs });
        if (decision.allowed) break;
      }
    }
    return (branchId, peerId) => answers.get(`${branchId}\u0000${peerId}`);
  }

  /** The inbound path for one kind of peer message of an interaction, registered once before it is needed. */
  inboundPath(namespace: string, interaction: string, kind: 'result' | 'claim' | 'cancel-result'): Promise<Subscription> {
    const key = `${namespace}\u0000${interaction}\u0000${kind}`;
    let path = this.paths.get(key);
    if (!path) {
      path = this.deps.transport.subscribe(inboundPattern(namespace, interaction, kind), (message) => onPeerMessage(this, namespace, interaction, kind, message));
      path.catch(() => this.paths.delete(key));
      this.paths.set(key, path);
    }
    return path;
  }

  // ── commit loop ──────────────────────────────────────────────────────────

  /**
   * Decides against the current record and appends at its revision. On conflict the record is
   * reloaded from the store and the command decided again; on `expired` the decider is asked once
   * more with `retryAsLate` so it can record the rejection instead. Unavailable is thrown: the
   * caller must not treat uncertainty as success.
   */
  async commitDecided(entry: OpEntry, decide: (record: OperationRecord, retryAsLate: boolean) => Transition | undefined): Promise<void> {
    let retryAsLate = false;
    for (let tries = 0; tries < conflictRetriesMax; tries++) {
      const transition = decide(entry.record, retryAsLate);
      if (!transition) return;
      const outcome = await this.appendAtRevision(entry, transition);
      if (outcome.kind === 'ok') return;
      if (outcome.kind === 'conflict') continue;
      if (outcome.kind === 'expired' && !retryAsLate) {
        // Guard-on-fold stores still stored a void transition: the revision moved.
        await this.reload(entry);
        retryAsLate = true;
        continue;
      }
      throw storeError(outcome, transition.causation.command);
    }
    throw new AdapterError('unavailable', `operation ${entry.record.operationId}: too many concurrent writers`);
  }

  submit(entry: OpEntry, prepare: () => Promise<Decider>, weightBytes: number, options: SubmitOptions = {}): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const arrival: Arrival = { prepare, weightBytes, done: (error) => (error === undefined ? resolve() : reject(error)), batchable: options.batchable === true };
      if (options.batchable && this.resultBatchMs > 0) arrival.holdUntilMs = this.deps.clock.nowMs() + this.resultBatchMs;
      entry.arrivals.push(arrival);
      if (options.lingerMs === undefined) return this.queueDrain(entry);
      arrival.holdUntilMs = this.deps.clock.nowMs() + options.lingerMs;
      this.deps.clock.at(arrival.holdUntilMs, () => {
        if (entry.arrivals.includes(arrival)) this.queueDrain(entry);
      });
    });
  }

  private queueDrain(entry: OpEntry): void {
    if (entry.drainQueued) return;
    entry.drainQueued = true;
    void this.enqueue(entry, () => this.drain(entry));
  }

  /**
   * Holds a batch back (puts it back and answers 'held') while every command in it may still
   * wait, the operation is undecided and together they close nothing: a quorum's early votes then
   * ride with the vote that closes it. Holding never takes a batch to the end of its guard: one
   * whose guard ends within a hold window of its release is committed now. A batch that is not
   * held answers what probing it found, for the commit to reuse; its rejections are counted then.
   * A held batch is prepared again by the drain that takes it: publisher verification and the
   * authorization recheck run for the drain that commits, exactly as for a batch never held.
   */
  private probe(entry: OpEntry, ready: { arrival: Arrival; decide: Decider }[]): Probe | 'held' | undefined {
    const untilMs = this.holdWindowEnd(entry, ready.map((r) => r.arrival));
    if (untilMs === undefined) return undefined;
    const record = entry.record;
    const atMs = this.deps.clock.nowMs();
    const rejected: string[] = [];
    const transition = decideTogether(
      record,
      ready.map((r) => (current) => r.decide(current, false, rejected)),
      atMs,
    );
    if (transition === undefined || transition === 'disjoint') return undefined;
    if (transition.events.some((e) => e.type === 'decision-closed') || untilMs + this.resultBatchMs > transition.timeGuard.notAfterMs) {
      for (const reason of rejected) this.metrics.rejections.inc({ reason });
      return { record, atMs, transition };
    }
    this.holdBack(entry, ready.map((r) => r.arrival), untilMs);
    return 'held';
  }

  /**
   * Holds a batch back without preparing or deciding it when no such batch can close the rule
   * (couldClose: too few results to reach the threshold, to make it impossible or to end the
   * collection) and the earliest guard any of its results could have — the deadline or the
   * earliest open lease — ends later than a hold window after its release. Most early votes are
   * held here; the vote that could close takes the probe.
   */
  private heldUndecided(entry: OpEntry, batch: Arrival[]): boolean {
    const untilMs = this.holdWindowEnd(entry, batch);
    if (untilMs === undefined) return false;
    const record = entry.record;
    const results = batch.filter((arrival) => arrival.batchable).length;
    if (results === 0 || couldClose(record, results)) return false;
    if (untilMs + this.resultBatchMs > resultGuardEndMs(record)) return false;
    this.holdBack(entry, batch, untilMs);
    return true;
  }

  /**
   * When the batch's hold window ends (its oldest command's), or undefined when it may not wait:
   * the operation is decided, a command in it may not wait, or the window has ended.
   */
  private holdWindowEnd(entry: OpEntry, batch: Arrival[]): number | undefined {
    if (entry.record.decision !== null) return undefined;
    let untilMs = Number.POSITIVE_INFINITY;
    for (const arrival of batch) {
      if (arrival.holdUntilMs === undefined) return undefined;
      untilMs = Math.min(untilMs, arrival.holdUntilMs);
    }
    return this.deps.clock.nowMs() < untilMs ? untilMs : undefined;
  }

  /** Puts a batch back at the front and drains again when its window ends. */
  private holdBack(entry: OpEntry, batch: Arrival[], untilMs: number): void {
    entry.arrivals.unshift(...batch);
    this.deps.clock.at(untilMs, () => {
      if (batch.some((arrival) => entry.arrivals.includes(arrival))) this.queueDrain(entry);
    });
  }

  /**
   * Before a command that decides on its own (a due instant, a cancellation, lost durability):
   * commits the results held back for company, which arrived first and must count first. A held
   * batch was a whole batch and is back at the front, so one drain takes it.
   */
  private async releaseHeld(entry: OpEntry): Promise<void> {
    if (entry.arrivals.length > 0) await this.drain(entry, false);
  }

  /** Commits what has arrived, as one transition where the commands allow it; the rest waits for the next drain. */
  private async drain(entry: OpEntry, mayHold = true): Promise<void> {
    entry.drainQueued = false;
    let bytes = 0;
    let taken = 0;
    while (taken < entry.arrivals.length && taken < commandsPerTransitionMax && (taken === 0 || bytes + entry.arrivals[taken]!.weightBytes <= batchBytesMax)) {
      bytes += entry.arrivals[taken]!.weightBytes;
      taken++;
    }
    const batch = entry.arrivals.splice(0, taken);
    const rest = entry.arrivals.length > 0;
    if (rest) this.queueDrain(entry);
    if (!rest && mayHold && this.heldUndecided(entry, batch)) return;
    const prepared = await Promise.all(batch.map((a) => a.prepare().then((decide) => ({ arrival: a, decide }), (error: unknown) => (a.done(error ?? new Error('prepare failed')), undefined))));
    const ready = prepared.filter((p): p is { arrival: Arrival; decide: Decider } => p !== undefined);
    if (ready.length === 0) return;
    const probe = rest || !mayHold ? undefined : this.probe(entry, ready);
    if (probe === 'held') return;
    try {
      await this.commitTogether(entry, ready.map((r) => r.decide), probe);
      for (const r of ready) r.arrival.done();
    } catch (error) {
      for (const r of ready) r.arrival.done(error ?? new Error('commit failed'));
    }
  }

  /**
   * One transition for several commands (decideTogether), with the CAS retry of commitDecided.
   * When the store answers that the shared guard did not hold or the transition is too large,
   * each command is committed on its own instead, with its own guard and late handling.
   */
  private async commitTogether(entry: OpEntry, deciders: Decider[], probe?: Probe): Promise<void> {
    if (deciders.length === 1 && probe === undefined) return this.commitDecided(entry, deciders[0]!);
    for (let tries = 0; tries < conflictRetriesMax; tries++) {
      // A probe of this very record at this very instant is what deciding again would answer.
      const transition =
        tries === 0 && probe !== undefined && probe.record === entry.record && probe.atMs === this.deps.clock.nowMs()
          ? probe.transition
          : decideTogether(
              entry.record,
              deciders.map((decide) => (record) => decide(record, false)),
              this.deps.clock.nowMs(),
            );
      if (transition === undefined) return;
      if (transition === 'disjoint') break;
      const outcome = await this.appendAtRevision(entry, transition);
      if (outcome.kind === 'ok') return;
      if (outcome.kind === 'conflict') continue;
      if (outcome.kind === 'expired') {
        // Guard-on-fold stores still stored a void transition: the revision moved.
        await this.reload(entry);
        break;
      }
      if (outcome.kind === 'invalid-input') break;
      throw storeError(outcome, transition.causation.command);
    }
    for (const decide of deciders) await this.commitDecided(entry, decide);
  }

  /**
   * Validates, checks the log budgets (log-budget.ts) and appends at the record's revision (the
   * CAS): applied when ok, reloaded on conflict. A transition over transitionBytesMax answers
   * invalid-input without a write (a batch then splits; a single command is refused). One the log
   * has no room for throws LogBudgetExhausted, after closing an undecided operation.
   */
  private async appendAtRevision(entry: OpEntry, transition: Transition): Promise<AppendOutcome> {
    const problem = transitionProblem(transition);
    if (problem !== undefined) throw new AssertionFailure(`decided an invalid transition (${transition.causation.command}): ${problem}`);
    const bytes = transitionBytes(transition);
    const room = logRoomProblem(entry.record, entry.log, transition, bytes, this.budgets);
    if (room?.kind === 'oversized') return { kind: 'invalid-input', description: room.description };
    if (room !== undefined) {
      if (room.kind === 'ordinary' && entry.record.decision === null) await this.closeForLogBudget(entry);
      throw new LogBudgetExhausted(room.description);
    }
    const outcome = await this.deps.store.append(entry.record.operationId, entry.record.revision, transition);
    if (outcome.kind === 'ok') {
      entry.log = { transitions: entry.log.transitions + 1, bytes: entry.log.bytes + bytes };
      this.metrics.appends.inc();
      this.applyCommitted(entry, { revision: outcome.revision, committedAtMs: outcome.committedAtMs, transition });
    } else if (outcome.kind === 'conflict') await this.reload(entry);
    return outcome;
  }

  /**
   * The defined outcome of an undecided operation whose log reached its ordinary budget: it closes
   * as indeterminate. When that cannot be committed (at or after the deadline, whose own transition
   * closes it; or the store failing) the command that did not fit is refused all the same.
   */
  private async closeForLogBudget(entry: OpEntry): Promise<void> {
    try {
      await this.commitDecided(entry, (current) => decideLogBudgetExhausted(current, this.deps.clock.nowMs()));
    } catch (error) {
      if (error instanceof AssertionFailure) throw error;
      this.metrics.storeErrors.inc({ stage: 'log-budget' });
    }
  }

  private applyCommitted(entry: OpEntry, stored: StoredTransition): void {
    const before = entry.record;
    const after = applyStored(before, stored);
    for (const event of stored.transition.events) if (event.type === 'branch-reassigned') entry.unsent.add(event.publicationId);
    if (!after) throw new AssertionFailure('a committed transition yields a record');
    entry.record = after;
    entry.known.add(stored.revision);
    if (before.decision === null && after.decision !== null) {
      this.metrics.decisions.inc({ outcome: after.decision.outcome });
      this.metrics.decisionLatencyMs.observe(after.decision.closedAtMs - after.admittedAtMs);
    }
    for (const listener of this.committedListeners) listener(after, stored);
    this.recordMoved(entry, before);
  }

  /** What follows any change of a held record: waiters at their boundary answered, the settled cache, timers and outbox. */
  private recordMoved(entry: OpEntry, before: OperationRecord): void {
    const after = entry.record;
    for (const waiter of entry.waiters) {
      if (reached(after, waiter.boundary)) {
        entry.waiters.delete(waiter);
        waiter.resolve();
      }
    }
    if (!isSettled(before.phase) && isSettled(after.phase)) this.noteSettled(after.operationId);
    this.afterCommit(entry);
  }

  /** Keeps memory bounded: the oldest settled, idle operations leave the cache (the store keeps them). */
  private noteSettled(operationId: string): void {
    const evicted = this.settled.set(operationId, true);
    if (evicted === undefined) return;
    const entry = this.ops.get(evicted);
    if (entry && entry.waiters.size === 0) this.ops.delete(evicted);
  }

  /**
   * Reads the record again: after a conflict, a void append, or a notice that another coordinator
   * appended. What another wrote (a decision, a settlement, a new attempt) reaches this process's
   * waiters and timers as its own commits do.
   */
  private async reload(entry: OpEntry): Promise<void> {
    const read = await this.deps.store.read(entry.record.operationId);
    if (read.kind !== 'ok') throw storeError(read, 'reload');
    const record = fold(checkedLog(read.transitions, entry.record.operationId));
    if (!record) throw new AssertionFailure('a stored operation folds to a record');
    for (const stored of read.transitions) entry.known.add(stored.revision);
    entry.log = logSizeOf(read.transitions);
    const before = entry.record;
    entry.record = record;
    if (record.revision !== before.revision) this.recordMoved(entry, before);
  }

  /**
   * Listens for appends to this store by any client (EventStore.watch). Coordinators that share
   * a store (several `convoke serve` processes: commands go to a queue group, results to shared
   * consumers) each hold some operations in memory; a notice of a revision a coordinator has not
   * applied itself makes it read that operation again, so its waiters, reads and timers follow
   * the other's commits. Alone on its store, a coordinator is told only of its own revisions,
   * which it recognizes with a set lookup.
   */
  async watchStore(): Promise<void> {
    if (this.watching) return;
    this.watching = await this.deps.store.watch((operationId, revision) => this.onRevision(operationId, revision));
  }

  private onRevision(operationId: string, revision: string): void {
    const entry = this.ops.get(operationId);
    if (!entry || entry.known.has(revision)) return;
    // Nothing to read once the revision is applied here, or the entry left the cache.
    const settled = () => entry.known.has(revision) || this.ops.get(operationId) !== entry;
    // A notice of this process's own append can come before the append's answer (a store may
    // tell its watchers inside the write): look again once that answer has been applied.
    setImmediate(() => {
      if (settled()) return;
      // Queued behind this process's own append in flight, which may be the one the notice is of.
      void this.enqueue(entry, async () => {
        if (!settled()) await this.reload(entry);
      }).catch(() => this.metrics.storeErrors.inc({ stage: 'reload' }));
    });
  }

  // ── operation cache ──────────────────────────────────────────────────────

  private install(operationId: string, interaction: CompiledInteraction, stored: StoredTransition, bytes: number): OpEntry {
    const record = applyStored(undefined, stored);
    if (!record) throw new AdapterError('expired', `admission of ${operationId} committed outside its time guard`);
    const entry = newEntry(record, interaction);
    entry.log = { transitions: 1, bytes };
    for (const branch of branchList(record)) entry.unsent.add(branch.outbox.publicationId);
    this.ops.set(operationId, entry);
    for (const listener of this.committedListeners) listener(record, stored);
    this.afterCommit(entry);
    return entry;
  }

  /** The cached entry, or one rebuilt from the store (another coordinator's operation, or after a restart). */
  async load(operationId: string): Promise<OpEntry | undefined> {
    const cached = this.ops.get(operationId);
    if (cached) return cached;
    const read = await this.deps.store.read(operationId);
    if (read.kind === 'not-found') return undefined;
    if (read.kind === 'expired') throw new AdapterError('expired', `operation ${operationId} has expired; its key is kept and never recreated`);
    if (read.kind !== 'ok') throw storeError(read, 'read');
    const record = fold(checkedLog(read.transitions, operationId));
    if (!record) throw new AdapterError('expired', `operation ${operationId} was never admitted within its time guard`);
    const interaction = this.deps.bundles.get(record.contract.digest)?.interactions.get(record.interaction);
    if (!interaction) throw new AdapterError('unsupported', `operation ${operationId} uses contract ${record.contract.digest}, which is not deployed here`);
    const raced = this.ops.get(operationId);
    if (raced) return raced;
    const entry = newEntry(record, interaction);
    for (const stored of read.transitions) entry.known.add(stored.revision);
    entry.log = logSizeOf(read.transitions);
    this.ops.set(operationId, entry);
    // Queued first: nothing of the operation (its due timers, its outbox) runs before it.
    this.checkContinuity(entry, read.transitions[0]?.transition.events[0]);
    // A record loaded from the store (a restart, or another coordinator's operation) resumes its
    // timers from the recorded instants and replays its pending outbox with the same identities.
    this.afterCommit(entry, true);
    return entry;
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
    void this.enqueue(entry, async () => {
      const lost = await continuity.lostSince(entry.record.subjectNamespace, entry.record.manifest.eligible, since);
      if (lost !== undefined) await this.commitDecided(entry, (current) => decideDurabilityLost(current));
    }).catch(() => this.metrics.storeErrors.inc({ stage: 'durability-lost' }));
  }

  enqueue<T>(entry: OpEntry, work: () => Promise<T>): Promise<T> {
    const run = entry.queue.then(work, work);
    entry.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * The durable transport's guarantee broke in these namespaces: every open operation this
   * coordinator holds there closes as indeterminate (spec: such changes "report affected
   * in-flight operations as indeterminate"). Answers how many it closed.
   */
  async closeDurabilityLost(namespaces: ReadonlySet<string>): Promise<number> {
    const open = [...this.ops.values()].filter((e) => e.record.decision === null && namespaces.has(e.record.subjectNamespace));
    let closed = 0;
    await Promise.all(
      open.map((entry) =>
        this.enqueue(entry, async () => {
          await this.releaseHeld(entry);
          const wasOpen = entry.record.decision === null;
          await this.commitDecided(entry, (current) => decideDurabilityLost(current));
          if (wasOpen && entry.record.decision?.reason === 'durability-lost') closed++;
        }).catch(() => this.metrics.storeErrors.inc({ stage: 'durability-lost' })),
      ),
    );
    return closed;
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
    const decision = await this.authorize({ context, action: 'cancel', contract: record.contract, interaction: record.interaction, peerId: null, branchId: null, attempt: null });
    if (!decision.allowed) throw refusalError(decision);
    await this.enqueue(entry, async () => {
      await this.releaseHeld(entry);
      // Authorization validity must cover the guarded transition: decided at or after the end of
      // the decision's validity (a late commit decided again), the cancellation is refused.
      await this.commitDecided(entry, (current) => {
        const nowMs = this.deps.clock.nowMs();
        const checked = decisionAt(decision, nowMs);
        if (!checked.allowed) throw refusalError(checked);
        return decideCancelOperation(current, nowMs, decision.expiresAtMs);
      });
    });
    return this.view(entry);
  }

  // ── recovery ─────────────────────────────────────────────────────────────

  /**
   * Rebuilds every unsettled operation from the store: timers re-armed from recorded instants,
   * pending and uncertain outbox entries republished with their stable publication identities.
   * Nothing is inferred from missing data: an operation the store does not have stays unknown.
   */
  async recover(onProgress?: (done: number) => void): Promise<{ scanned: number; resumed: number; failed: number }> {
    const counts = { scanned: 0, resumed: 0, failed: 0 };
    for await (const operationId of this.deps.store.operationIds()) {
      counts.scanned++;
      try {
        const entry = await this.load(operationId);
        if (entry && !isSettled(entry.record.phase)) counts.resumed++;
        else if (entry && entry.waiters.size === 0) this.ops.delete(operationId);
      } catch {
        counts.failed++;
      }
      if (onProgress && counts.scanned % 1000 === 0) onProgress(counts.scanned);
    }
    return counts;
  }

  // ── reading and waiting ──────────────────────────────────────────────────

  /** The typed state, for the original invoking principal only; anything else is not found. */
  async get(principalId: string, operationId: string): Promise<InvocationResult> {
    return this.view(await this.visible(principalId, operationId));
  }

  private async visible(principalId: string, operationId: string): Promise<OpEntry> {
    const entry = await this.load(operationId).catch((error: unknown) => {
      if (isAdapterError(error) && error.kind === 'unavailable') throw error;
      return undefined;
    });
    if (!entry || entry.record.principalId !== principalId) throw new OperationNotFound(operationId);
    return entry;
  }

  /** Waits until the boundary is reached or waitMs passes; returns the state either way. */
  async wait(principalId: string, operationId: string, boundary: WaitFor, waitMs: number, signal?: AbortSignal): Promise<{ result: InvocationResult; reached: boolean }> {
    const entry = await this.visible(principalId, operationId);
    if (!reached(entry.record, boundary) && waitMs > 0 && !signal?.aborted) {
      // Waiting only waits: a timeout or an aborted caller (a closed connection) never cancels work.
      await new Promise<void>((resolve) => {
        const stop = () => {
          timer.cancel();
          entry.waiters.delete(waiter);
          signal?.removeEventListener('abort', stop);
          resolve();
        };
        const waiter: Waiter = { boundary, resolve: stop };
        const timer = this.deps.clock.at(this.deps.clock.nowMs() + waitMs, stop);
        entry.waiters.add(waiter);
        signal?.addEventListener('abort', stop);
      });
    }
    return { result: this.view(entry), reached: reached(entry.record, boundary) };
  }

  /** The current record (operators, tests, replay checks). */
  async record(operationId: string): Promise<OperationRecord | undefined> {
    return (await this.load(operationId))?.record;
  }

  onCommitted(listener: (record: OperationRecord, stored: StoredTransition) => void): () => void {
    this.committedListeners.add(listener);
    return () => this.committedListeners.delete(listener);
  }

  /** Stops accepting work, lets queued appends finish, and closes the result paths. */
  async close(): Promise<void> {
    this.closed = true;
    await this.watching?.close().catch(() => undefined);
    await Promise.all([...this.ops.values()].map((e) => e.queue));
    for (const entry of this.ops.values()) entry.dueTimer?.cancel();
    const paths = await Promise.allSettled([...this.paths.values()]);
    for (const p of paths) if (p.status === 'fulfilled') await p.value.close();
  }

  private view(entry: OpEntry): InvocationResult {
    return invocationResult(entry.record, entry.interaction);
  }

  context(caller: Caller, nowMs: number, deadlineMs: number | null): RuntimeContext {
    return { principalId: caller.principalId, senderPeerId: caller.senderPeerId, ...this.deps.deployment, nowMs, deadlineMs };
  }
}

/** What an invocation key is bound to at admission, immutably: the whole of it must match for a retry to find the operation. */
interface InvocationIdentity {
  principalId: string;
  contract: ContractRef;
  interaction: string;
  inputDigest: string;
}

/**
 * The operation id binds principal, contract digest and key only, so a key reused for another
 * interaction (or, were the digest to collide, another principal or contract) would find this
 * operation: the recorded identity is compared in full, and any difference is a conflict — never
 * another interaction's operation, read at a boundary that is not its own.
 */
function sameInvocation(entry: OpEntry, identity: InvocationIdentity): OpEntry {
  const record = entry.record;
  const differences: string[] = [];
  if (record.principalId !== identity.principalId) differences.push('principal');
  const c = record.contract;
  if (c.id !== identity.contract.id || c.version !== identity.contract.version || c.digest !== identity.contract.digest) differences.push(`contract (${c.id}@${c.version} ${c.digest})`);
  if (record.interaction !== identity.interaction) differences.push(`interaction ("${record.interaction}")`);
  if (record.inputDigest !== identity.inputDigest) differences.push(`input (${record.inputDigest})`);
  if (differences.length > 0) {
    throw new AdapterError('conflict', `invocation key "${record.invocationKey}" is already bound to a different ${differences.join(', ')}`);
  }
  return entry;
}

/** Accepting arbitrary caller-supplied expected result sets is prohibited (spec, admission step 3). */
function rejectCallerManifest(request: InvocationRequest): void {
  const supplied = Object.keys(request).filter((k) => k === 'manifest' || k === 'expected' || k === 'branches');
  if (supplied.length > 0) throw new AdapterError('denied', `a caller may not supply the expected result set (${supplied.join(', ')}); gather manifests come from the deployment's manifest source`);
}

function checkInvocationKey(key: string): void {
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes === 0 || bytes > limits.invocationKeyBytesMax) {
    throw new AdapterError('invalid-input', `invocationKey must be 1..${limits.invocationKeyBytesMax} bytes (got ${bytes})`);
  }
}

/** Validates a log read back from a store; a transition that fails its schema is corruption, never folded. */
function checkedLog(transitions: StoredTransition[], operationId: string): StoredTransition[] {
  for (const stored of transitions) {
    const problem = transitionProblem(stored.transition);
    if (problem !== undefined) throw new AdapterError('unavailable', `operation ${operationId} revision ${stored.revision} fails its schema: ${problem}`);
  }
  return transitions;
}

export function storeError(failure: StoreFailure | { kind: string; description: string }, stage: string): AdapterError {
  const kind = failure.kind === 'not-found' ? 'unavailable' : failure.kind;
  return new AdapterError(kind as AdapterError['kind'], `${stage}: ${failure.description}`);
}
