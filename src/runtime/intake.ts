/**
 * Peer message intake: results, claims (renew/release) and cancel results. The subject is parsed
 * against the subscription's namespace and interaction and must be the operation's own subject
 * (`wrong-subject` otherwise), the payload strictly parsed and schema-checked; when its turn
 * comes in the operation's serial queue the publisher is verified against the attestation of the
 * namespace the message arrived on and authorization rechecked, then the pure decider runs and
 * its transition is appended with the CAS — together with the other messages of that operation
 * that waited meanwhile (host.submit).
 * Durable messages are acknowledged only after that append (or a duplicate proving prior
 * acceptance).
 */
import { AuthorizationExpired, PolicyFailure, refusalError } from '../contract/authorization.js';
import { AssertionFailure, isAdapterError } from '../contract/errors.js';
import { parseStrictBytes } from '../contract/ijson.js';
import { limits } from '../contract/limits.js';
import type { Transition } from '../events/types.js';
import { checkCancelResult, checkClaimMessage, checkResultMessage, resultMessageLevels } from '../events/wire-schemas.js';
import type { CancelResult, ClaimMessage, ResultMessage } from '../events/wire.js';
import {
  decideCancelResult,
  decideClaim,
  decideOversizedResult,
  decideResult,
  decideStoreRefusedResult,
  openEndedMs,
  type PeerCommand,
  type ResultCommand,
} from '../domain/decide.js';
import { isSettled } from '../machines/index.js';
import { findBranch, type OperationRecord } from '../projections/record.js';
import { parseSubject, subjectFor, type ParsedSubject } from '../adapters/transport/subjects.js';
import type { InboundMessage } from '../adapters/transport/types.js';
import type { Decider, OpEntry, RuntimeHost } from './host.js';
import { LogBudgetExhausted } from './log-budget.js';
import type { RejectionContext } from './operation-log.js';

/** What an oversized result adds to a batch: its rejection, not its bytes. */
const rejectionWeightBytes = 2048;

type Kind = 'result' | 'claim' | 'cancel-result';
type Message = ResultMessage | ClaimMessage | CancelResult;

/**
 * What deciding a message found that its acknowledgement depends on. A command may be decided
 * more than once (a probe, a CAS retry, a batch split); the decision that was committed is the
 * last one, so each decision overwrites it.
 */
interface Verdict {
  /** Why the authorization this message was decided on had expired: nothing was taken on it. */
  authorizationExpired: string | undefined;
}

const checkers: Record<Kind, (value: unknown) => Message> = {
  result: checkResultMessage,
  claim: checkClaimMessage,
  'cancel-result': checkCancelResult,
};

/** How deep each message may nest: a result message carries a value, a level below its root. */
const depthMax: Record<Kind, number> = {
  result: limits.jsonDepthMax + resultMessageLevels,
  claim: limits.jsonDepthMax,
  'cancel-result': limits.jsonDepthMax,
};

export async function onPeerMessage(host: RuntimeHost, namespace: string, interaction: string, kind: Kind, inbound: InboundMessage): Promise<void> {
  const parsed = parseSubject(inbound.subject, namespace, interaction);
  if (!parsed || parsed.kind !== kind) return drop(host, inbound, 'malformed', { kind });
  let message: Message;
  try {
    message = checkers[kind](parseStrictBytes(inbound.data, `${kind} message`, depthMax[kind]));
  } catch {
    return drop(host, inbound, 'malformed', { kind, operationId: parsed.operationId, peerId: parsed.peerId });
  }
  const about = { kind, operationId: parsed.operationId, peerId: parsed.peerId };
  if (message.operationId !== parsed.operationId) return drop(host, inbound, 'wrong-operation', about);
  let entry: OpEntry | undefined;
  try {
    // Held only when the message arrived on the operation's own subject: one that will be dropped
    // as wrong-subject must not make this process take over an operation it names (arm its
    // timers, reconcile its outbox) — a peer that knows operation ids could otherwise make it.
    entry = await host.load(parsed.operationId, (record) => onOwnSubject(record, parsed, inbound.subject));
  } catch (error) {
    // A tombstoned operation, or one whose contract is not deployed here, will not change by
    // waiting. Anything else (the store unavailable, a read that failed) is uncertainty: the
    // message waits for redelivery, as when its append fails — acknowledging it would lose it.
    if (isAdapterError(error) && (error.kind === 'expired' || error.kind === 'unsupported')) return drop(host, inbound, 'unknown-operation', about);
    host.failed('store', `load-${kind}`, error);
    return inbound.nak(250);
  }
  if (!entry) return drop(host, inbound, 'unknown-operation', about);
  const known = { ...about, record: entry.record };
  // A message is evidence only for the subject it arrived on (docs/design.md §10): one that names this
  // operation on another namespace's or interaction's subjects was published under permissions
  // and an attestation that are not this operation's. It is counted, not recorded: its publisher
  // is no party to this operation and may not grow its log.
  if (!onOwnSubject(entry.record, parsed, inbound.subject)) return drop(host, inbound, 'wrong-subject', known);
  // The result budget is checked here, before the queue: an oversized result is a recorded
  // rejection (within rejectionsRecordedMax) and nothing of it is decided or stored.
  const oversized = kind === 'result' ? oversizedDetail(host, message as ResultMessage) : undefined;
  if (oversized && isSettled(entry.record.phase)) return drop(host, inbound, 'oversized', known);
  if (!oversized && kind === 'result' && answeredWhenSettled(host, entry, inbound, parsed, message as ResultMessage)) return inbound.ack();
  const weightBytes = oversized ? rejectionWeightBytes : inbound.data.byteLength;
  const verdict: Verdict = { authorizationExpired: undefined };
  try {
    await host.submit(entry, () => prepare(host, entry, inbound, parsed, kind, message, verdict, oversized), weightBytes, {
      batchable: kind === 'result' && !oversized,
    });
  } catch (error) {
    // A command the log has no room for is refused the same way on every redelivery: counted and
    // acknowledged, never redelivered forever.
    if (error instanceof LogBudgetExhausted) return drop(host, inbound, kind === 'result' ? 'log-budget' : `${kind}-log-budget`, known);
    // A transition the store refused as invalid: answered as refused, never as uncertain.
    if (isAdapterError(error) && error.kind === 'invalid-input')
      return refusedByStore(host, entry, inbound, parsed, message, known, error.description ?? error.message);
    if (error instanceof AuthorizationExpired) return handBack(host, inbound, known);
    // Tombstoned since this process loaded it (retention expired a settled operation it still held): gone, as
    // when the load meets the tombstone; a message about it will not change by waiting.
    if (isAdapterError(error) && error.kind === 'expired' && (await host.expiredInStore(parsed.operationId).catch(() => false)))
      return drop(host, inbound, 'unknown-operation', known);
    // The policy could not answer (counted as a policy error where it was asked), or the store
    // could not: leave the message for redelivery rather than guess.
    host.failed(error instanceof PolicyFailure ? 'policy' : 'store', `admit-${kind}`, error, entry.record);
    return inbound.nak(250);
  }
  // Nothing was taken on an authorization that expired before the commit: the message is decided
  // again on its redelivery, with a fresh decision.
  if (verdict.authorizationExpired !== undefined) return handBack(host, inbound, known);
  await inbound.ack();
}

/**
 * A message whose authorization decision expired before it could be taken (at the recheck, at the
 * decision, or at the store's serialization point) is not a store failure and not a rejection
 * of the message: it is counted as such and handed back for redelivery.
 */
function handBack(host: RuntimeHost, inbound: InboundMessage, about: RejectionContext & { kind: Kind }): Promise<void> {
  host.rejected(about.kind === 'result' ? 'authorization-expired' : `${about.kind}-authorization-expired`, about);
  return inbound.nak(250);
}

/** Whether the received subject is exactly the operation's own `<ns>.<interaction>.<operationId>.<kind>.<peer>`. */
function onOwnSubject(record: OperationRecord, parsed: ParsedSubject, subject: string): boolean {
  return subject === subjectFor(record.subjectNamespace, record.interaction, record.operationId, parsed.kind, parsed.peerId);
}

/** Why a result is over the deployment's result budget (its serialized size, as it would be stored), or undefined. */
function oversizedDetail(host: RuntimeHost, message: ResultMessage): { bytes: number; bytesMax: number } | undefined {
  const bytesMax = host.budgets.resultBytesMax;
  const bytes = Buffer.byteLength(JSON.stringify(message.result), 'utf8');
  return bytes > bytesMax ? { bytes, bytesMax } : undefined;
}

/**
 * A settled record is final, and what it answers a result (duplicate, or a rejection it no longer
 * records) depends on neither the clock, nor authorization, nor the commands ahead in its queue.
 * Such results — the siblings that finish after a quorum closed — are answered here, without a
 * queue turn or a policy call. Anything the record would still record (a protocol conflict) takes
 * the queue like any other message. Answers whether the message was handled.
 */
function answeredWhenSettled(host: RuntimeHost, entry: OpEntry, inbound: InboundMessage, parsed: ParsedSubject, message: ResultMessage): boolean {
  const record = entry.record;
  if (!isSettled(record.phase)) return false;
  const publisherProblem = verify(host, record, inbound.subject, parsed, message);
  // Nothing answered here is taken on an authorization (a settled record takes no transition).
  const command: ResultCommand = {
    subject: inbound.subject,
    subjectPeerId: parsed.peerId,
    publisherProblem,
    authorizationProblem: undefined,
    authorizedUntilMs: openEndedMs,
    message,
    nowMs: host.deps.clock.nowMs(),
  };
  const d = decideResult(record, entry.interaction, command);
  if (d.kind === 'duplicate') return true;
  if (d.kind !== 'reject' || d.transition !== undefined) return false;
  host.rejected(d.reason, { kind: 'result', operationId: record.operationId, peerId: parsed.peerId, record });
  return true;
}

/** Verification and the authorization recheck, then the decider for this message. */
async function prepare(
  host: RuntimeHost,
  entry: OpEntry,
  inbound: InboundMessage,
  parsed: ParsedSubject,
  kind: Kind,
  message: Message,
  verdict: Verdict,
  oversized?: { bytes: number; bytesMax: number },
): Promise<Decider> {
  const record = entry.record;
  const subjectPeerId = parsed.peerId;
  const publisherProblem = verify(host, record, inbound.subject, parsed, message);
  // A message whose publisher does not verify is rejected on correlation, before any authorization
  // could matter (decide.ts correlate): the policy is not asked about it, so forged traffic costs
  // no policy call. Nothing can be taken on the authorization it is given instead.
  const { problem: authorizationProblem, authorizedUntilMs } =
    publisherProblem === undefined
      ? await recheckAuthorization(host, record, kind, message)
      : { problem: undefined, authorizedUntilMs: Number.MIN_SAFE_INTEGER };
  const subject = inbound.subject;
  // An oversized result from its verified and authorized publisher is recorded as such; one from
  // a publisher that does not verify, or that policy no longer allows, takes the ordinary path and
  // is answered for that (rejected, or its branch revoked) — its size never admits anything.
  if (oversized && publisherProblem === undefined && authorizationProblem === undefined) {
    return (current, _retryAsLate, rejected) => {
      verdict.authorizationExpired = undefined;
      const command = {
        subject,
        subjectPeerId,
        publisherProblem: undefined,
        authorizationProblem: undefined,
        authorizedUntilMs,
        message,
        nowMs: host.deps.clock.nowMs(),
      };
      const d = decideOversizedResult(current, command, oversized.bytes, oversized.bytesMax);
      if (d.kind === 'reject')
        (rejected
          ? (reason: string) => void rejected.push(reason)
          : (reason: string) => host.rejected(reason, { kind, peerId: subjectPeerId, record: current }))(d.reason);
      return d.kind === 'reject' ? d.transition : undefined;
    };
  }
  return (current, retryAsLate, rejected) => {
    // A message the store serializes at or after its guard is late, whatever the socket saw.
    const nowMs = retryAsLate ? Math.max(host.deps.clock.nowMs(), lateInstant(current, kind, message.branchId, authorizedUntilMs)) : host.deps.clock.nowMs();
    const reject = rejected
      ? (reason: string) => void rejected.push(reason)
      : (reason: string) => host.rejected(reason, { kind, peerId: subjectPeerId, record: current });
    return decideFor(reject, verdict, current, entry, kind, {
      subject,
      subjectPeerId,
      publisherProblem,
      authorizationProblem,
      authorizedUntilMs,
      message,
      nowMs,
    } as PeerCommand<Message>);
  };
}

/** The decider's answer; `reject` counts its rejections, `verdict` notes an authorization that expired first. */
function decideFor(
  reject: (reason: string) => void,
  verdict: Verdict,
  record: OperationRecord,
  entry: OpEntry,
  kind: Kind,
  command: PeerCommand<Message>,
): Transition | undefined {
  const d =
    kind === 'result'
      ? decideResult(record, entry.interaction, command as PeerCommand<ResultMessage>)
      : kind === 'claim'
        ? decideClaim(record, command as PeerCommand<ClaimMessage>)
        : decideCancelResult(record, command as PeerCommand<CancelResult>);
  verdict.authorizationExpired = d.kind === 'authorization-expired' ? d.detail : undefined;
  if (d.kind === 'reject') reject(kind === 'result' ? d.reason : kind === 'claim' ? `claim-${d.reason}` : `cancel-${d.reason}`);
  if (kind === 'result' && (d.kind === 'protocol-conflict' || d.kind === 'revoked')) reject(d.kind);
  return 'transition' in d ? d.transition : undefined;
}

/**
 * Publisher verification: undefined when subject peer, expected peer, payload peer and namespace
 * attestation agree; otherwise why not. The attestation consulted is that of the namespace the
 * message arrived on, never the one the operation merely claims.
 */
function verify(host: RuntimeHost, record: OperationRecord, subject: string, parsed: ParsedSubject, message: Message): string | undefined {
  const expectedPeerId = findBranch(record, message.branchId)?.peerId ?? '';
  const verification = host.deps.verifier.verify({
    subject,
    namespace: parsed.namespace,
    subjectPeerId: parsed.peerId,
    expectedPeerId,
    payloadPeerId: message.peerId,
  });
  return verification.accepted ? undefined : verification.reason;
}

/**
 * Authorization is rechecked before every protected transition; revocation answers with its
 * revision. The decision's expiry travels with the command: authorization validity must cover
 * the guarded transition.
 */
async function recheckAuthorization(
  host: RuntimeHost,
  record: OperationRecord,
  kind: Kind,
  message: Message,
): Promise<{ problem: { reason: string; policyRevision: string } | undefined; authorizedUntilMs: number }> {
  const context = host.context({ principalId: record.principalId, senderPeerId: record.senderPeerId }, host.deps.clock.nowMs(), record.deadlineMs);
  const attempt = message.attempt >= 1 && message.attempt <= limits.attemptsMax ? message.attempt : null;
  const action = kind === 'result' ? 'admit-result' : kind === 'claim' ? 'renew' : 'cancel';
  // An unavailable or expired decision fails closed and propagates: the message is redelivered,
  // not admitted. Only a denial is a revocation, which terminates the branch.
  const decision = await host.authorize({
    context,
    action,
    contract: record.contract,
    interaction: record.interaction,
    peerId: message.peerId,
    branchId: message.branchId,
    attempt,
  });
  if (decision.allowed) return { problem: undefined, authorizedUntilMs: decision.expiresAtMs };
  if (decision.refusal === 'expired') throw refusalError(decision);
  return { problem: { reason: decision.reason, policyRevision: decision.revision }, authorizedUntilMs: decision.expiresAtMs };
}

/**
 * The earliest instant at which the guard of this message's transition could have ended — the
 * store answered that it was serialized at or after it, and which of its bounds it was is not
 * known. Only that transition's own bounds count (decide.ts): the end of the authorization's
 * validity, and before the decision the deadline and the branch's lease; after it, the settlement
 * grace for a result (a late fact) and the cancel deadline for a cancel result. A bound of another
 * transition could be earlier than the one that passed and would decide the message as if it had
 * still been in time: taken again, it would fail its guard again.
 */
function lateInstant(record: OperationRecord, kind: Kind, branchId: string, authorizedUntilMs: number): number {
  const limitsMs = [authorizedUntilMs];
  if (record.decision === null) {
    limitsMs.push(record.deadlineMs);
    const branch = findBranch(record, branchId);
    if (branch) limitsMs.push(branch.leaseUntilMs);
  } else limitsMs.push(kind === 'cancel-result' ? record.decision.cancelDeadlineMs : record.decision.graceEndMs);
  return Math.min(...limitsMs);
}

/**
 * A message whose transition the store refused as invalid (or that is over the transition budget
 * the store's limit sets): the budgets make this rare — a JetStream server's max_payload lowered
 * under a running store, an EventStoreDB append size below the store's limit — but it must not
 * pass unseen. It is counted and logged as `store-refused` (`<kind>-store-refused` for claims and
 * cancel results) with the store's description, and a result's refusal is recorded as a
 * `result-rejected` of that reason (within rejectionsRecordedMax), as an oversized result's is:
 * the operation's record says what became of it. Then it is acknowledged: the store would refuse
 * it again. When the rejection cannot be recorded because the store is uncertain, the message is
 * handed back for redelivery; when the store or the log budget refuses the rejection too, it stays
 * counted and logged only. Before, any such refusal was counted as `oversized` and recorded
 * nowhere: the peer's result disappeared and its branch waited for the deadline.
 */
async function refusedByStore(
  host: RuntimeHost,
  entry: OpEntry,
  inbound: InboundMessage,
  parsed: ParsedSubject,
  message: Message,
  about: RejectionContext & { kind: Kind },
  description: string,
): Promise<void> {
  host.rejected(about.kind === 'result' ? 'store-refused' : `${about.kind}-store-refused`, { ...about, detail: description });
  if (about.kind !== 'result') return inbound.ack();
  const command = {
    subject: inbound.subject,
    subjectPeerId: parsed.peerId,
    publisherProblem: undefined,
    authorizationProblem: undefined,
    authorizedUntilMs: openEndedMs,
    message,
    nowMs: host.deps.clock.nowMs(),
  };
  try {
    await host.submit(entry, () => Promise.resolve((current) => decideStoreRefusedResult(current, command, description).transition), rejectionWeightBytes);
  } catch (error) {
    if (error instanceof AssertionFailure) throw error;
    if (!(error instanceof LogBudgetExhausted) && !(isAdapterError(error) && error.kind === 'invalid-input')) {
      host.failed('store', 'record-store-refused', error, entry.record);
      return inbound.nak(250);
    }
  }
  return inbound.ack();
}

function drop(host: RuntimeHost, inbound: InboundMessage, reason: string, about: RejectionContext): Promise<void> {
  host.rejected(reason, about);
  return inbound.ack();
}
