/**
 * Admission (spec: "Admission and immutable manifests"): the request checked, the contract and
 * input resolved, authorization and the audience observed within the admission budget, the plan
 * decided (domain/admission.ts) and the operation's stream created — or the operation the key
 * already names found, for the same whole invocation identity only.
 */
import { AdmissionRate } from './admission-rate.js';
import type { CompiledBundle, CompiledInteraction } from '../contract/bundle.js';
import { canonicalJson, sha256Hex } from '../contract/canonical.js';
import { refusalError, type CheckedDecision } from '../contract/authorization.js';
import { AdapterError } from '../contract/errors.js';
import { checkInvocationKey, operationId as deriveOperationId } from '../contract/ids.js';
import type { JsonValue } from '../contract/json.js';
import type { ContractRef, InvocationRequest, RuntimeContext } from '../contract/types.js';
import type { Transition } from '../events/types.js';
import { planAdmission, type PeerAuthorization } from '../domain/admission.js';
import { orThrow } from '../domain/decided.js';
import { storeError, type Kernel } from '../kernel/kernel.js';
import { branchList, type OperationRecord } from '../projections/record.js';
import type { InvocationResult } from '../projections/views.js';
import type { AudienceObservation } from '../adapters/directory/types.js';
import { AdmissionBudget } from './admission-budget.js';
import { checkCapabilities } from './capabilities.js';
import { newEntry, type Caller, type OpEntry, type RuntimeHost } from './host.js';
import { logLimits, transitionBytes } from './log-budget.js';
import { deploymentAttemptsMax } from './mode.js';

/** What admission needs of the coordinator it serves. */
export interface AdmissionHost extends Pick<RuntimeHost, 'deps' | 'metrics' | 'log' | 'budgets' | 'authorize' | 'context' | 'load'> {
  readonly kernel: Kernel<OperationRecord, Transition, OpEntry>;
  /** Set once the coordinator stops accepting work. */
  readonly closing: boolean;
  view(entry: OpEntry): InvocationResult;
}

/** The entry of an operation this process just admitted: its log is the admission, its whole outbox unsent. */
function admittedEntry(record: OperationRecord, interaction: CompiledInteraction, bytes: number): OpEntry {
  const entry = newEntry(record, interaction);
  entry.log = { transitions: 1, bytes };
  for (const branch of branchList(record)) entry.unsent.add(branch.outbox.publicationId);
  return entry;
}

export class Admission {
  private readonly rate: AdmissionRate | undefined;

  constructor(private readonly host: AdmissionHost) {
    const rate = host.deps.admissionRate;
    this.rate = rate === undefined ? undefined : new AdmissionRate(rate, host.deps.clock);
  }

  /** Admits (or finds) an invocation. `created` is false when the key already named this operation. */
  async invoke(caller: Caller, request: InvocationRequest): Promise<{ result: InvocationResult; created: boolean }> {
    if (this.host.closing) throw new AdapterError('unavailable', 'the coordinator is shutting down');
    const requestStartMs = this.host.deps.clock.nowMs();
    rejectCallerManifest(request);
    const { bundle, interaction } = this.resolveContract(request);
    const { canonical, inputDigest } = this.checkInput(interaction, request.input);
    checkInvocationKey(request.invocationKey);
    const operationId = deriveOperationId(caller.principalId, bundle.digest, request.invocationKey);
    const identity: InvocationIdentity = { principalId: caller.principalId, contract: bundle.ref, interaction: interaction.id, inputDigest };
    const cached = this.host.kernel.cached(operationId);
    if (cached) return { result: this.host.view(sameInvocation(cached, identity)), created: false };
    // Create first, without reading the store: a new key (the common case) costs no read, and an
    // existing one is found by the create's own conflict. Whatever refuses a new admission
    // (authorization, planning) still returns an operation that already exists under this key.
    const context = this.host.context(caller, requestStartMs, null);
    for (;;) {
      let transition: Transition;
      let bytes: number;
      // The principal's rate: a refusal, like any below, still answers an operation this key already names; and a
      // token taken for what turns out to be such an operation is given back (a client's retries cost it nothing).
      let taken = false;
      const existingAnswer = async () => {
        const existing = await this.findExisting(operationId, identity);
        if (existing && taken) this.rate?.refund(caller.principalId);
        return existing && { result: this.host.view(existing), created: false };
      };
      try {
        this.rate?.take(caller.principalId);
        taken = true;
        transition = await this.planWithinBudget(context, bundle, interaction, {
          operationId,
          caller,
          request,
          inputDigest,
          inputBytes: Buffer.byteLength(canonical),
          requestStartMs,
        });
        bytes = this.admissionBytes(transition);
      } catch (refusal) {
        const answer = await existingAnswer();
        if (answer) return answer;
        throw refusal;
      }
      const outcome = await this.host.kernel.create(operationId, transition, (record) => admittedEntry(record, interaction, bytes));
      if (outcome.kind === 'ok') {
        const entry = outcome.stream;
        this.host.metrics.admissions.inc();
        this.host.metrics.appends.inc();
        this.host.log.admitted(entry.record);
        return { result: this.host.view(entry), created: true };
      }
      if (outcome.kind === 'conflict') {
        // Another coordinator created it first: the same invocation identity returns that operation.
        const raced = await existingAnswer();
        if (raced) return raced;
        if (taken) this.rate?.refund(caller.principalId);
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
    const roomBytes = logLimits(branches, this.host.budgets).bytes;
    const bytesMax = Math.min(this.host.budgets.transitionBytesMax, roomBytes);
    if (bytes > bytesMax) throw new AdapterError('invalid-input', `the admission record is ${bytes} bytes; the limit for ${branches} branches is ${bytesMax}`);
    return bytes;
  }

  private resolveContract(request: InvocationRequest): { bundle: CompiledBundle; interaction: CompiledInteraction } {
    const bundle = this.host.deps.bundles.get(request.contract.digest);
    if (!bundle) throw new AdapterError('unsupported', `contract digest ${request.contract.digest} is not deployed here`);
    if (bundle.ref.id !== request.contract.id || bundle.ref.version !== request.contract.version) {
      throw new AdapterError(
        'invalid-input',
        `contract ${request.contract.id}@${request.contract.version} does not match digest ${request.contract.digest} (${bundle.ref.id}@${bundle.ref.version})`,
      );
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
    const entry = await this.host.load(operationId);
    return entry && sameInvocation(entry, identity);
  }

  private async authorizeInvoke(context: RuntimeContext, bundle: CompiledBundle, interaction: CompiledInteraction): Promise<CheckedDecision> {
    const decision = await this.host.authorize({
      context,
      action: 'invoke',
      contract: bundle.ref,
      interaction: interaction.id,
      peerId: null,
      branchId: null,
      attempt: null,
    });
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
    checkCapabilities(this.host.deps, bundle, interaction);
    const budget = new AdmissionBudget(this.host.deps.clock, args.requestStartMs);
    try {
      for (;;) {
        const invoke = await budget.within(this.authorizeInvoke(context, bundle, interaction), 'the invoke authorization');
        const audience = await budget.within(this.observeAudience(context, bundle, interaction), 'the audience resolver');
        const gathered =
          interaction.spec.delivery === 'gather' ? await budget.within(this.gather(context, bundle, interaction), 'the manifest source') : undefined;
        const candidates = gathered ? [...new Set(gathered.branches.map((b) => b.peerId))] : audience.peers;
        const authorizations = await budget.within(
          Promise.all(candidates.map((peerId) => this.authorizeCandidate(context, bundle, interaction, peerId))),
          'the candidate authorizations',
        );
        const again = await budget.within(this.observeAudience(context, bundle, interaction), 'the audience resolver');
        const invokeAgain = await budget.within(this.authorizeInvoke(context, bundle, interaction), 'the invoke authorization');
        if (again.revision !== audience.revision || again.presence?.revision !== audience.presence?.revision) continue;
        if (invokeAgain.revision !== invoke.revision || authorizations.some((a) => a.revision !== invoke.revision)) continue;
        const streamsCreatedUntilMs = this.host.deps.continuity?.createdUntilMs(bundle.bundle.subjectNamespace);
        return orThrow(
          planAdmission({
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
            durableDelivery: this.host.deps.transport.capabilities.durable,
            ...(streamsCreatedUntilMs === undefined ? {} : { streamsCreatedUntilMs }),
            ...(gathered ? { gathered } : {}),
            authorizations,
            policyRevision: invoke.revision,
            invokeExpiresAtMs: Math.min(invoke.expiresAtMs, invokeAgain.expiresAtMs),
            requestStartMs: args.requestStartMs,
            attemptsMax: deploymentAttemptsMax(this.host.deps.store, this.host.deps.transport),
          }),
        );
      }
    } finally {
      budget.end();
    }
  }

  private async gather(context: RuntimeContext, bundle: CompiledBundle, interaction: CompiledInteraction) {
    if (!this.host.deps.manifests)
      throw new AdapterError('unsupported', `interaction "${interaction.id}" gathers its manifest, and no manifest source is configured`);
    return this.host.deps.manifests.gather(context, bundle.ref, interaction.id);
  }

  /** The audience (a directory group or the bundle's peers) with what the deployment's presence source observed of it. */
  private async observeAudience(context: RuntimeContext, bundle: CompiledBundle, interaction: CompiledInteraction): Promise<AudienceObservation> {
    const audience = interaction.spec.audience;
    const observed = 'peers' in audience ? { peers: audience.peers, revision: 'bundle' } : await this.host.deps.directory.audience(context, audience.group);
    if (!this.host.deps.presence) return observed;
    return {
      peers: observed.peers,
      revision: observed.revision,
      presence: await this.host.deps.presence.observe(bundle.bundle.subjectNamespace, observed.peers),
    };
  }

  private async authorizeCandidate(
    context: RuntimeContext,
    bundle: CompiledBundle,
    interaction: CompiledInteraction,
    peerId: string,
  ): Promise<PeerAuthorization> {
    const d = await this.host.authorize({ context, action: 'deliver', contract: bundle.ref, interaction: interaction.id, peerId, branchId: null, attempt: 1 });
    // An allow that arrived already expired is no answer either way (admission.ts authorizedPeers):
    // the admission is refused as expired, never planned as if the peer were denied.
    if (d.refusal === 'expired') throw refusalError(d);
    const answer: PeerAuthorization = { peerId, allowed: d.allowed, revision: d.revision, expiresAtMs: d.expiresAtMs };
    if (d.reason !== undefined) answer.reason = d.reason;
    return answer;
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
  if (c.id !== identity.contract.id || c.version !== identity.contract.version || c.digest !== identity.contract.digest)
    differences.push(`contract (${c.id}@${c.version} ${c.digest})`);
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
  if (supplied.length > 0)
    throw new AdapterError(
      'denied',
      `a caller may not supply the expected result set (${supplied.join(', ')}); gather manifests come from the deployment's manifest source`,
    );
}
