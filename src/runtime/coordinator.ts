/**
 * The coordinator: admission, dispatch (outbox), result intake, deadlines and waiting. It owns
 * no truth of its own: every change is a Transition appended to the operation's stream with the
 * expected revision as CAS, and the cached record is exactly the fold of what was appended.
 * Work on one operation is serialized through a per-operation queue; operations are independent.
 */
import { BundleRegistry, type CompiledBundle, type CompiledInteraction } from '../contract/bundle.js';
import { canonicalJson, sha256Hex } from '../contract/canonical.js';
import { AdapterError, AssertionFailure, isAdapterError } from '../contract/errors.js';
import { operationId as deriveOperationId } from '../contract/ids.js';
import { parseStrictBytes } from '../contract/ijson.js';
import type { JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import type { InvocationRequest, RuntimeContext, WaitFor } from '../contract/types.js';
import type { StoredTransition, Transition } from '../events/types.js';
import { checkResultMessage } from '../events/wire-schemas.js';
import { encodeWire, headers, type RequestMessage } from '../events/wire.js';
import { planAdmission, type PeerAuthorization } from '../machines/admission.js';
import { decideDeadline, decideDispatchRecorded, decideResult, type Receipt, type ResultDecision } from '../machines/decide.js';
import { applyStored, branchList, fold, type OperationRecord } from '../projections/record.js';
import { invocationResult, reached, type InvocationResult } from '../projections/views.js';
import type { Directory } from '../adapters/directory/types.js';
import type { Policy } from '../adapters/policy/types.js';
import type { EventStore, StoreFailure } from '../adapters/store/types.js';
import { inboundPattern, parseSubject, subjectFor } from '../adapters/transport/subjects.js';
import type { InboundMessage, Subscription, Transport } from '../adapters/transport/types.js';
import type { PublisherVerifier } from '../adapters/verification/subject.js';
import type { Clock, TimerHandle } from './clock.js';
import { OperationNotFound } from './errors.js';
import { Metrics } from './metrics.js';

export interface Deployment {
  account: string;
  system: string;
  domain: string;
}

export interface CoordinatorDeps {
  store: EventStore;
  transport: Transport;
  directory: Directory;
  policy: Policy;
  verifier: PublisherVerifier;
  clock: Clock;
  bundles: BundleRegistry;
  deployment: Deployment;
  metrics?: Metrics;
}

export interface Caller {
  principalId: string;
  senderPeerId: string | null;
}

interface Waiter {
  boundary: WaitFor;
  resolve: () => void;
}

interface OpEntry {
  record: OperationRecord;
  interaction: CompiledInteraction;
  queue: Promise<unknown>;
  waiters: Set<Waiter>;
  deadlineTimer: TimerHandle | undefined;
}

const conflictRetriesMax = 8;
/** Settled operations kept in memory for fast reads; older ones are reloaded from the store on demand. */
const settledCacheMax = 2048;

export class Coordinator {
  readonly metrics: Metrics;
  private readonly ops = new Map<string, OpEntry>();
  /** Settled operation ids in settle order (insertion order of a Map), for eviction. */
  private readonly settled = new Map<string, true>();
  private readonly resultPaths = new Map<string, Promise<Subscription>>();
  private readonly committedListeners = new Set<(record: OperationRecord, stored: StoredTransition) => void>();
  private closed = false;

  constructor(private readonly deps: CoordinatorDeps) {
    this.metrics = deps.metrics ?? new Metrics();
  }

  // ── admission ────────────────────────────────────────────────────────────

  /** Admits (or finds) an invocation. `created` is false when the key already named this operation. */
  async invoke(caller: Caller, request: InvocationRequest): Promise<{ result: InvocationResult; created: boolean }> {
    if (this.closed) throw new AdapterError('unavailable', 'the coordinator is shutting down');
    const requestStartMs = this.deps.clock.nowMs();
    const { bundle, interaction } = this.resolveContract(request);
    const { canonical, inputDigest } = this.checkInput(interaction, request.input);
    checkInvocationKey(request.invocationKey);
    const operationId = deriveOperationId(caller.principalId, bundle.digest, request.invocationKey);
    const existing = await this.findExisting(operationId, caller, inputDigest);
    if (existing) return { result: this.view(existing), created: false };
    const context = this.context(caller, requestStartMs, null);
    await this.authorizeInvoke(context, bundle, interaction);
    for (;;) {
      const transition = await this.planWithinBudget(context, bundle, interaction, { operationId, caller, request, inputDigest, inputBytes: Buffer.byteLength(canonical), requestStartMs });
      const outcome = await this.deps.store.create(operationId, transition);
      if (outcome.kind === 'ok') {
        const entry = this.install(operationId, interaction, { revision: outcome.revision, committedAtMs: outcome.committedAtMs, transition });
        this.metrics.admissions.inc();
        void this.enqueue(entry, () => this.dispatch(entry)).catch(() => this.metrics.transportErrors.inc({ stage: "dispatch" }));
        return { result: this.view(entry), created: true };
      }
      if (outcome.kind === 'conflict') {
        // Another coordinator created it first: same key and input returns that operation.
        const raced = await this.findExisting(operationId, caller, inputDigest);
        if (raced) return { result: this.view(raced), created: false };
        continue;
      }
      throw storeError(outcome, 'admission');
    }
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

  /** The same principal, contract and key: the same input returns the operation, a different input conflicts. */
  private async findExisting(operationId: string, caller: Caller, inputDigest: string): Promise<OpEntry | undefined> {
    const entry = await this.load(operationId);
    if (!entry) return undefined;
    if (entry.record.principalId !== caller.principalId) throw new AssertionFailure('operation id binds the principal');
    if (entry.record.inputDigest !== inputDigest) {
      throw new AdapterError('conflict', `invocation key "${entry.record.invocationKey}" is already bound to a different input (${entry.record.inputDigest})`);
    }
    return entry;
  }

  private async authorizeInvoke(context: RuntimeContext, bundle: CompiledBundle, interaction: CompiledInteraction): Promise<void> {
    const decision = await this.authorize({ context, action: 'invoke', contract: bundle.ref, interaction: interaction.id, peerId: null, branchId: null, attempt: null });
    if (!decision.allowed) throw new AdapterError('denied', decision.reason ?? `principal ${context.principalId} may not invoke ${bundle.ref.id}/${interaction.id}`);
  }

  /**
   * Observes the audience, authorizes each candidate with attempt 1, and re-observes: if the
   * directory revision moved meanwhile the snapshot is retaken, all within the admission budget.
   */
  private async planWithinBudget(
    context: RuntimeContext,
    bundle: CompiledBundle,
    interaction: CompiledInteraction,
    args: { operationId: string; caller: Caller; request: InvocationRequest; inputDigest: string; inputBytes: number; requestStartMs: number },
  ): Promise<Transition> {
    const budgetEndMs = args.requestStartMs + limits.admissionBudgetMs;
    for (;;) {
      if (this.deps.clock.nowMs() >= budgetEndMs) throw new AdapterError('expired', `admission did not complete within ${limits.admissionBudgetMs} ms`);
      const audience = await this.observeAudience(context, interaction);
      const authorizations = await Promise.all(audience.peers.map((peerId) => this.authorizeCandidate(context, bundle, interaction, peerId)));
      const again = await this.observeAudience(context, interaction);
      if (this.deps.clock.nowMs() >= budgetEndMs) throw new AdapterError('expired', `admission did not complete within ${limits.admissionBudgetMs} ms`);
      if (again.revision !== audience.revision) continue;
      const policyRevision = authorizations[0]?.revision ?? 'none';
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
        authorizations,
        policyRevision,
        requestStartMs: args.requestStartMs,
      });
    }
  }

  private async observeAudience(context: RuntimeContext, interaction: CompiledInteraction): Promise<{ peers: string[]; revision: string }> {
    const audience = interaction.spec.audience;
    if ('peers' in audience) return { peers: audience.peers, revision: 'bundle' };
    return this.deps.directory.audience(context, audience.group);
  }

  private async authorizeCandidate(context: RuntimeContext, bundle: CompiledBundle, interaction: CompiledInteraction, peerId: string): Promise<PeerAuthorization> {
    const d = await this.authorize({ context, action: 'deliver', contract: bundle.ref, interaction: interaction.id, peerId, branchId: null, attempt: 1 });
    const answer: PeerAuthorization = { peerId, allowed: d.allowed, revision: d.revision, expiresAtMs: d.expiresAtMs };
    if (d.reason !== undefined) answer.reason = d.reason;
    return answer;
  }

  /** Fails closed: an unavailable policy is an unavailable admission, never an allow. */
  private async authorize(input: Parameters<Policy['authorize']>[0]) {
    try {
      return await this.deps.policy.authorize(input);
    } catch (error) {
      if (isAdapterError(error)) throw error;
      throw new AdapterError('unavailable', `authorization unavailable: ${(error as Error).message}`, { cause: error });
    }
  }

  // ── dispatch (outbox) ────────────────────────────────────────────────────

  /** Publishes every pending outbox entry, after the result path is ready, then records the receipts. */
  private async dispatch(entry: OpEntry): Promise<void> {
    const record = entry.record;
    if (record.decision !== null) return;
    const pending = branchList(record).filter((b) => b.outbox.receipt === 'pending' || b.outbox.receipt === 'unknown');
    if (pending.length === 0) return;
    try {
      await this.resultPath(record.subjectNamespace, record.interaction);
    } catch (error) {
      // Without a result path nothing is sent; the deadline closes the operation.
      this.metrics.transportErrors.inc({ stage: 'result-path' });
      return;
    }
    const context = this.context({ principalId: record.principalId, senderPeerId: record.senderPeerId }, this.deps.clock.nowMs(), record.deadlineMs);
    const receipts: Receipt[] = await Promise.all(
      pending.map(async (branch): Promise<Receipt> => {
        // Permission is checked again before dispatch.
        const auth = await this.authorize({ context, action: 'deliver', contract: record.contract, interaction: record.interaction, peerId: branch.peerId, branchId: branch.branchId, attempt: branch.attempt }).catch(() => undefined);
        const base = { branchId: branch.branchId, attempt: branch.attempt, fence: branch.fence };
        if (!auth?.allowed) return { ...base, receipt: 'rejected', detail: auth?.reason ?? 'authorization unavailable before dispatch' };
        const message: RequestMessage = {
          kind: 'request',
          operationId: record.operationId,
          contract: record.contract,
          interaction: record.interaction,
          branchId: branch.branchId,
          peerId: branch.peerId,
          attempt: branch.attempt,
          fence: branch.fence,
          deadlineMs: record.deadlineMs,
          leaseUntilMs: branch.leaseUntilMs,
          publicationId: branch.outbox.publicationId,
          input: record.input,
        };
        const subject = subjectFor(record.subjectNamespace, record.interaction, record.operationId, 'request', branch.peerId);
        const receipt = await this.deps.transport
          .publish(subject, encodeWire(message), { msgId: branch.outbox.publicationId, headers: wireHeaders(message) })
          .catch((error: unknown) => ({ receipt: 'unknown' as const, detail: (error as Error).message }));
        return receipt.detail === undefined ? { ...base, receipt: receipt.receipt } : { ...base, receipt: receipt.receipt, detail: receipt.detail };
      }),
    );
    await this.commitDecided(entry, (current) => decideDispatchRecorded(current, receipts, this.deps.clock.nowMs()));
  }

  /** One broad result subscription per (namespace, interaction), registered before any request is published. */
  private resultPath(namespace: string, interaction: string): Promise<Subscription> {
    const key = `${namespace}\u0000${interaction}`;
    let path = this.resultPaths.get(key);
    if (!path) {
      path = this.deps.transport.subscribe(inboundPattern(namespace, interaction, 'result'), (message) => this.onResult(namespace, interaction, message));
      path.catch(() => this.resultPaths.delete(key));
      this.resultPaths.set(key, path);
    }
    return path;
  }

  // ── result intake ────────────────────────────────────────────────────────

  private async onResult(namespace: string, interaction: string, inbound: InboundMessage): Promise<void> {
    const parsed = parseSubject(inbound.subject, namespace, interaction);
    if (!parsed || parsed.kind !== 'result') return this.drop(inbound, 'malformed');
    let message;
    try {
      message = checkResultMessage(parseStrictBytes(inbound.data, 'result message'));
    } catch {
      return this.drop(inbound, 'malformed');
    }
    if (message.operationId !== parsed.operationId) return this.drop(inbound, 'wrong-operation');
    const entry = await this.load(parsed.operationId).catch(() => undefined);
    if (!entry) return this.drop(inbound, 'unknown-operation');
    const outcome = await this.enqueue(entry, () => this.admitResult(entry, inbound, parsed.peerId, message)).catch((error: unknown) => {
      this.metrics.storeErrors.inc({ stage: 'admit-result' });
      return { error };
    });
    if (typeof outcome === 'object') await inbound.nak(250);
    else await inbound.ack();
  }

  private async admitResult(entry: OpEntry, inbound: InboundMessage, subjectPeerId: string, message: import('../events/wire.js').ResultMessage): Promise<ResultDecision['kind']> {
    const record = entry.record;
    const branch = record.branches[message.branchId];
    const verification = this.deps.verifier.verify({ subject: inbound.subject, namespace: record.subjectNamespace, subjectPeerId, expectedPeerId: branch?.peerId ?? '', payloadPeerId: message.peerId });
    const context = this.context({ principalId: record.principalId, senderPeerId: record.senderPeerId }, this.deps.clock.nowMs(), record.deadlineMs);
    const attempt = message.attempt >= 1 && message.attempt <= limits.attemptsMax ? message.attempt : null;
    const auth = await this.authorize({ context, action: 'admit-result', contract: record.contract, interaction: record.interaction, peerId: message.peerId, branchId: message.branchId, attempt }).catch((e: Error) => ({ allowed: false, reason: e.message }));
    let kind: ResultDecision['kind'] = 'reject';
    await this.commitDecided(entry, (current, retryAsLate) => {
      const decision = decideResult(current, entry.interaction, {
        subject: inbound.subject,
        subjectPeerId,
        message,
        publisherProblem: verification.accepted ? undefined : verification.reason,
        authorizationProblem: auth.allowed ? undefined : (auth as { reason?: string }).reason ?? 'not authorized',
        // A result the store serializes at or after the deadline is late, whatever the socket saw.
        nowMs: retryAsLate ? Math.max(this.deps.clock.nowMs(), Math.min(current.deadlineMs, current.branches[message.branchId]?.leaseUntilMs ?? current.deadlineMs)) : this.deps.clock.nowMs(),
      });
      kind = decision.kind;
      if (decision.kind === 'reject') this.metrics.rejections.inc({ reason: decision.reason });
      if (decision.kind === 'protocol-conflict') this.metrics.rejections.inc({ reason: 'protocol-conflict' });
      return decision.kind === 'duplicate' ? undefined : decision.transition;
    });
    return kind;
  }

  private drop(inbound: InboundMessage, reason: string): Promise<void> {
    this.metrics.rejections.inc({ reason });
    return inbound.ack();
  }

  // ── deadlines ────────────────────────────────────────────────────────────

  private armDeadline(entry: OpEntry): void {
    entry.deadlineTimer?.cancel();
    if (entry.record.decision !== null) return;
    entry.deadlineTimer = this.deps.clock.at(entry.record.deadlineMs, () => {
      void this.enqueue(entry, () => this.commitDecided(entry, (current) => decideDeadline(current))).catch(() => {
        // The store refused (unavailable, or its clock not yet at the deadline): try again shortly.
        entry.deadlineTimer = this.deps.clock.at(this.deps.clock.nowMs() + 100, () => this.armDeadline(entry));
      });
    });
  }

  // ── commit loop ──────────────────────────────────────────────────────────

  /**
   * Decides against the current record and appends at its revision. On conflict the record is
   * reloaded from the store and the command decided again; on `expired` the decider is asked once
   * more with `retryAsLate` so it can record the rejection instead. Unavailable is thrown: the
   * caller must not treat uncertainty as success.
   */
  private async commitDecided(entry: OpEntry, decide: (record: OperationRecord, retryAsLate: boolean) => Transition | undefined): Promise<void> {
    let retryAsLate = false;
    for (let tries = 0; tries < conflictRetriesMax; tries++) {
      const transition = decide(entry.record, retryAsLate);
      if (!transition) return;
      const outcome = await this.deps.store.append(entry.record.operationId, entry.record.revision, transition);
      if (outcome.kind === 'ok') {
        this.applyCommitted(entry, { revision: outcome.revision, committedAtMs: outcome.committedAtMs, transition });
        return;
      }
      if (outcome.kind === 'conflict') {
        await this.reload(entry);
        continue;
      }
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

  private applyCommitted(entry: OpEntry, stored: StoredTransition): void {
    const before = entry.record;
    const after = applyStored(before, stored);
    if (!after) throw new AssertionFailure('a committed transition yields a record');
    entry.record = after;
    if (before.decision === null && after.decision !== null) {
      entry.deadlineTimer?.cancel();
      this.metrics.decisions.inc({ outcome: after.decision.outcome });
      this.metrics.decisionLatencyMs.observe(after.decision.closedAtMs - after.admittedAtMs);
    }
    for (const listener of this.committedListeners) listener(after, stored);
    for (const waiter of entry.waiters) {
      if (reached(after, waiter.boundary)) {
        entry.waiters.delete(waiter);
        waiter.resolve();
      }
    }
    if (before.phase !== 'settled' && after.phase === 'settled') this.noteSettled(after.operationId);
  }

  /** Keeps memory bounded: the oldest settled, idle operations leave the cache (the store keeps them). */
  private noteSettled(operationId: string): void {
    this.settled.set(operationId, true);
    if (this.settled.size <= settledCacheMax) return;
    for (const id of this.settled.keys()) {
      if (this.settled.size <= settledCacheMax) break;
      this.settled.delete(id);
      const entry = this.ops.get(id);
      if (entry && entry.waiters.size === 0) this.ops.delete(id);
    }
  }

  private async reload(entry: OpEntry): Promise<void> {
    const read = await this.deps.store.read(entry.record.operationId);
    if (read.kind !== 'ok') throw storeError(read, 'reload');
    const record = fold(read.transitions);
    if (!record) throw new AssertionFailure('a stored operation folds to a record');
    entry.record = record;
  }

  // ── operation cache ──────────────────────────────────────────────────────

  private install(operationId: string, interaction: CompiledInteraction, stored: StoredTransition): OpEntry {
    const record = applyStored(undefined, stored);
    if (!record) throw new AdapterError('expired', `admission of ${operationId} committed outside its time guard`);
    const entry: OpEntry = { record, interaction, queue: Promise.resolve(), waiters: new Set(), deadlineTimer: undefined };
    this.ops.set(operationId, entry);
    this.armDeadline(entry);
    for (const listener of this.committedListeners) listener(record, stored);
    return entry;
  }

  /** The cached entry, or one rebuilt from the store (another coordinator's operation, or after a restart). */
  private async load(operationId: string): Promise<OpEntry | undefined> {
    const cached = this.ops.get(operationId);
    if (cached) return cached;
    const read = await this.deps.store.read(operationId);
    if (read.kind === 'not-found') return undefined;
    if (read.kind === 'expired') throw new AdapterError('expired', `operation ${operationId} has expired; its key is kept and never recreated`);
    if (read.kind !== 'ok') throw storeError(read, 'read');
    const record = fold(read.transitions);
    if (!record) throw new AdapterError('expired', `operation ${operationId} was never admitted within its time guard`);
    const interaction = this.deps.bundles.get(record.contract.digest)?.interactions.get(record.interaction);
    if (!interaction) throw new AdapterError('unsupported', `operation ${operationId} uses contract ${record.contract.digest}, which is not deployed here`);
    const raced = this.ops.get(operationId);
    if (raced) return raced;
    const entry: OpEntry = { record, interaction, queue: Promise.resolve(), waiters: new Set(), deadlineTimer: undefined };
    this.ops.set(operationId, entry);
    this.armDeadline(entry);
    return entry;
  }

  private enqueue<T>(entry: OpEntry, work: () => Promise<T>): Promise<T> {
    const run = entry.queue.then(work, work);
    entry.queue = run.catch(() => undefined);
    return run;
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
  async wait(principalId: string, operationId: string, boundary: WaitFor, waitMs: number): Promise<{ result: InvocationResult; reached: boolean }> {
    const entry = await this.visible(principalId, operationId);
    if (!reached(entry.record, boundary) && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const waiter: Waiter = { boundary, resolve: () => (timer.cancel(), resolve()) };
        const timer = this.deps.clock.at(this.deps.clock.nowMs() + waitMs, () => {
          entry.waiters.delete(waiter);
          resolve();
        });
        entry.waiters.add(waiter);
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
    await Promise.all([...this.ops.values()].map((e) => e.queue));
    for (const entry of this.ops.values()) entry.deadlineTimer?.cancel();
    const paths = await Promise.allSettled([...this.resultPaths.values()]);
    for (const p of paths) if (p.status === 'fulfilled') await p.value.close();
  }

  private view(entry: OpEntry): InvocationResult {
    return invocationResult(entry.record, entry.interaction);
  }

  private context(caller: Caller, nowMs: number, deadlineMs: number | null): RuntimeContext {
    return { principalId: caller.principalId, senderPeerId: caller.senderPeerId, ...this.deps.deployment, nowMs, deadlineMs };
  }
}

function checkInvocationKey(key: string): void {
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes === 0 || bytes > limits.invocationKeyBytesMax) {
    throw new AdapterError('invalid-input', `invocationKey must be 1..${limits.invocationKeyBytesMax} bytes (got ${bytes})`);
  }
}

function wireHeaders(message: RequestMessage): Record<string, string> {
  return {
    [headers.operation]: message.operationId,
    [headers.branch]: message.branchId,
    [headers.attempt]: String(message.attempt),
    [headers.fence]: String(message.fence),
  };
}

function storeError(failure: StoreFailure | { kind: string; description: string }, stage: string): AdapterError {
  const kind = failure.kind === 'not-found' ? 'unavailable' : failure.kind;
  return new AdapterError(kind as AdapterError['kind'], `${stage}: ${failure.description}`);
}
