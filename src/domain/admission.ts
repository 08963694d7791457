/**
 * Admission planning (spec: "Admission and immutable manifests", steps 2–5): from the observed
 * audience and authorization answers to the one create Transition. Pure: the runtime performs the
 * directory and policy calls and passes their answers in.
 */
import { decisionAt } from '../contract/authorization.js';
import type { CompiledBundle, CompiledInteraction } from '../contract/bundle.js';
import { AdapterError, invalidInput, denied, unsupported } from '../contract/errors.js';
import { checkToken, publicationId } from '../contract/ids.js';
import type { JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import type { Authorization, Manifest, ManifestBranch, OperationAdmitted, PresenceObservation, Transition } from '../events/types.js';
import { guardBetween } from '../events/guard.js';
import { decidedOf, type Decided } from './decided.js';
import { thresholdFor } from '../projections/decision.js';

export interface PeerAuthorization {
  peerId: string;
  allowed: boolean;
  revision: string;
  expiresAtMs: number;
  reason?: string;
}

export interface AdmissionFacts {
  bundle: CompiledBundle;
  interaction: CompiledInteraction;
  operationId: string;
  principalId: string;
  senderPeerId: string | null;
  invocationKey: string;
  input: JsonValue;
  inputDigest: string;
  inputBytes: number;
  /** The observed audience (directory answer) with what it observed of presence, before sender and offline rules. */
  audience: { peers: string[]; revision: string; presence?: PresenceObservation };
  /** Whether the transport delivers durably: a request waits for an offline peer. */
  durableDelivery: boolean;
  /** Durable delivery: when the namespace's streams, as last verified, were created (StreamContinuity). */
  streamsCreatedUntilMs?: number;
  /** delivery gather: the expected set from the deployment's manifest source (never the caller's). */
  gathered?: { branches: ManifestBranch[]; revision: string };
  /** One answer per candidate peer, checked with the prospective first attempt (1). */
  authorizations: PeerAuthorization[];
  policyRevision: string;
  /** Until when the principal's invoke decision is valid: it, too, must cover the admission commit. */
  invokeExpiresAtMs: number;
  /** Trusted request-start time: the admission budget runs from here. */
  requestStartMs: number;
  /**
   * The deployment's cap on application attempts (1 in memory mode, src/runtime/mode.ts); the
   * manifest freezes the smaller of it and the contract's `attempts`.
   */
  attemptsMax: number;
}

/** Unsigned byte order of ASCII IDs (the spec's selection order); IDs are token-checked ASCII. */
export function byteOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The admission decision: the create transition, or a typed refusal (invalid input, denied,
 * unsupported, expired) that the runtime reports unchanged at its boundary.
 */
export function planAdmission(facts: AdmissionFacts): Decided<Transition> {
  return decidedOf(() => plan(facts));
}

function plan(facts: AdmissionFacts): Transition {
  const spec = facts.interaction.spec;
  if (facts.inputBytes > limits.inputBytesMax) throw invalidInput(`input is ${facts.inputBytes} bytes; the limit is ${limits.inputBytesMax}`);
  const candidates = candidatePeers(facts);
  const allowed = authorizedPeers(facts, candidates);
  const branches = expandBranches(facts, allowed);
  if (branches.length === 0) throw denied('the audience is empty after sender and authorization rules');
  if (branches.length > limits.branchesMax) throw invalidInput(`${branches.length} branches exceed the budget of ${limits.branchesMax}`);
  const peers = [...new Set(branches.map((b) => b.peerId))].sort(byteOrder);
  const eligible = spec.delivery === 'one-eligible' ? [...allowed].sort(byteOrder) : peers;
  const units = spec.votes === 'distinct-peers' ? peers.length : branches.length;
  const threshold = thresholdFor(spec.completion, units);
  if (threshold < 1 || threshold > units)
    throw invalidInput(`impossible threshold: ${threshold} of ${units} ${spec.votes === 'distinct-peers' ? 'peers' : 'branches'}`);
  const manifest = manifestOf(spec, facts.attemptsMax, { units, threshold, branches, peers, eligible });
  const authorizations: Authorization[] = facts.authorizations
    .filter((a) => eligible.includes(a.peerId))
    .map((a) => ({ peerId: a.peerId, revision: a.revision, expiresAtMs: a.expiresAtMs }));
  const event: OperationAdmitted = {
    type: 'operation-admitted',
    v: 1,
    operationId: facts.operationId,
    principalId: facts.principalId,
    senderPeerId: facts.senderPeerId,
    contract: facts.bundle.ref,
    interaction: facts.interaction.id,
    subjectNamespace: facts.bundle.bundle.subjectNamespace,
    invocationKey: facts.invocationKey,
    inputDigest: facts.inputDigest,
    input: facts.input,
    timeoutMs: spec.timeoutMs,
    manifest,
    revisions: facts.gathered
      ? { directory: facts.audience.revision, policy: facts.policyRevision, manifest: facts.gathered.revision }
      : { directory: facts.audience.revision, policy: facts.policyRevision },
    authorizations,
    outbox: branches.map((b) => ({
      branchId: b.branchId,
      peerId: b.peerId,
      attempt: 1,
      fence: 1,
      publicationId: publicationId(facts.bundle.digest, facts.operationId, b.branchId, 1),
    })),
  };
  const presence = observedPresence(facts);
  if (presence) event.presence = presence;
  if (facts.streamsCreatedUntilMs !== undefined) event.streamsCreatedUntilMs = facts.streamsCreatedUntilMs;
  // Authorization validity must cover the guarded transition; the admission budget is fixed.
  const authExpiryMs = Math.min(facts.invokeExpiresAtMs, ...authorizations.map((a) => a.expiresAtMs));
  const notAfterMs = Math.min(facts.requestStartMs + limits.admissionBudgetMs, authExpiryMs);
  if (notAfterMs <= facts.requestStartMs) throw new AdapterError('expired', 'authorization expired before admission could commit');
  return {
    events: [event],
    timeGuard: guardBetween(facts.requestStartMs, notAfterMs),
    causation: { command: 'invoke', messageId: facts.invocationKey.slice(0, 256) },
  };
}

/** The manifest frozen at admission: the interaction's rules with the audience they were applied to. */
function manifestOf(
  spec: AdmissionFacts['interaction']['spec'],
  attemptsMax: number,
  audience: Pick<Manifest, 'units' | 'threshold' | 'branches' | 'peers' | 'eligible'>,
): Manifest {
  const { units, threshold, branches, peers, eligible } = audience;
  return {
    delivery: spec.delivery,
    completion: spec.completion,
    votes: spec.votes,
    units,
    threshold,
    onTimeout: spec.onTimeout,
    siblings: spec.siblings,
    waitFor: spec.waitFor,
    attemptsMax: Math.min(spec.attempts, attemptsMax),
    leaseMs: spec.leaseMs,
    renewIntervalMs: spec.renewIntervalMs,
    retryBackoffMs: spec.retryBackoffMs,
    cancelTimeoutMs: spec.cancelTimeoutMs,
    settlementGraceMs: spec.settlementGraceMs,
    branches,
    peers,
    eligible,
  };
}

/**
 * A gathered manifest's branch ids are checked here, whatever source answered it (the static one
 * checks its own at load; another may not): each a token (it names the branch in every message and
 * in the record), each once (two branches under one id would share one entry of the record).
 */
function checkGatheredBranchIds(gathered: NonNullable<AdmissionFacts['gathered']>): void {
  const seen = new Set<string>();
  for (const { branchId } of gathered.branches) {
    checkToken(branchId, 'gathered manifest branch id');
    if (seen.has(branchId)) throw invalidInput(`gathered manifest (revision ${gathered.revision}) names branch ${branchId} twice`);
    seen.add(branchId);
  }
}

function candidatePeers(facts: AdmissionFacts): string[] {
  const spec = facts.interaction.spec;
  const listed =
    spec.delivery === 'explicit'
      ? (spec.branches ?? []).map((b) => b.peerId)
      : spec.delivery === 'gather'
        ? (facts.gathered?.branches ?? []).map((b) => b.peerId)
        : facts.audience.peers;
  for (const peer of listed) checkToken(peer, 'peer id');
  const unique = [...new Set(listed)].sort(byteOrder);
  const senders = spec.sender === 'exclude' && facts.senderPeerId !== null ? unique.filter((p) => p !== facts.senderPeerId) : unique;
  return applyOfflineRule(facts, senders);
}

/**
 * The offline rule: a candidate the directory observed offline is left out (`exclude`), or sent
 * its request anyway (`deliver`), which only durable delivery can keep for it: without it, the
 * admission is unsupported rather than sending into nowhere. Unobserved candidates are kept.
 */
function applyOfflineRule(facts: AdmissionFacts, candidates: string[]): string[] {
  const presence = facts.audience.presence;
  const offline = new Set(presence?.offline ?? []);
  const absent = candidates.filter((p) => offline.has(p));
  if (absent.length === 0) return candidates;
  if (facts.interaction.spec.offline === 'exclude') return candidates.filter((p) => !offline.has(p));
  if (!facts.durableDelivery) {
    throw unsupported(
      `peers ${absent.join(', ')} were observed offline (presence ${presence?.revision}); interaction "${facts.interaction.id}" delivers to offline peers, which needs durable delivery this transport does not have (or declare offline: exclude)`,
    );
  }
  return candidates;
}

/** The presence observation of the candidates (sorted), recorded with the admission. */
function observedPresence(facts: AdmissionFacts): PresenceObservation | undefined {
  const presence = facts.audience.presence;
  if (!presence) return undefined;
  const listed = new Set(facts.audience.peers);
  const of = (peers: string[]) => [...new Set(peers.filter((p) => listed.has(p)))].sort(byteOrder);
  return { revision: presence.revision, online: of(presence.online), offline: of(presence.offline) };
}

/**
 * Denied or missing decisions fail closed: such a peer is not admitted. An expired allow fails
 * closed too, but it is not a denial and says nothing of whether the peer is authorized now: it
 * refuses the admission as expired (nothing is created; asked again, the admission is decided on
 * fresh answers), as an unavailable answer does, rather than freezing a manifest without the peer.
 */
function authorizedPeers(facts: AdmissionFacts, candidates: string[]): Set<string> {
  const allowed = new Set<string>();
  for (const peer of candidates) {
    const answer = facts.authorizations.find((a) => a.peerId === peer);
    if (answer === undefined) continue;
    const checked = decisionAt(answer, facts.requestStartMs);
    if (checked.refusal === 'expired') throw new AdapterError('expired', `the authorization of candidate ${peer}: ${checked.reason}`);
    if (checked.allowed) allowed.add(peer);
  }
  const delivery = facts.interaction.spec.delivery;
  if ((delivery === 'explicit' || delivery === 'gather') && allowed.size !== candidates.length) {
    const missing = candidates.filter((p) => !allowed.has(p));
    throw denied(`${delivery} manifest peers not authorized: ${missing.join(', ')}`);
  }
  return allowed;
}

function expandBranches(facts: AdmissionFacts, allowed: Set<string>): ManifestBranch[] {
  const spec = facts.interaction.spec;
  switch (spec.delivery) {
    case 'independent':
      // Independent delivery uses the initial peer ID as the branch ID.
      return [...allowed].sort(byteOrder).map((peerId) => ({ branchId: peerId, peerId }));
    case 'one-eligible': {
      // One branch, named after the initially selected peer (first in unsigned byte order); the ID is kept on reassignment.
      const first = [...allowed].sort(byteOrder)[0];
      return first === undefined ? [] : [{ branchId: first, peerId: first }];
    }
    case 'explicit':
      return (spec.branches ?? []).filter((b) => allowed.has(b.peerId)).map((b) => ({ branchId: b.branchId, peerId: b.peerId }));
    case 'gather':
      if (!facts.gathered) throw unsupported('delivery "gather" needs a manifest source, which this deployment does not configure');
      checkGatheredBranchIds(facts.gathered);
      return facts.gathered.branches.filter((b) => allowed.has(b.peerId)).map((b) => ({ branchId: b.branchId, peerId: b.peerId }));
    default: {
      const unreachable: never = spec.delivery;
      return unreachable;
    }
  }
}
