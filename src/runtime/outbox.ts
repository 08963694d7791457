/**
 * The outbox: requests and cancel requests persisted in the record are published only after the
 * inbound path their answers come back on is registered, each reauthorized just before sending,
 * each under its stable publication identity; receipts are recorded afterwards. A receipt of
 * `unknown` stays pending reconciliation: it is republished later with the same identity, less
 * and less often (armReconcile), and recorded once per attempt until a receipt says more.
 */
import { doublingDelayMs } from '../contract/clock.js';
import { AssertionFailure } from '../contract/errors.js';
import { publicationId } from '../contract/ids.js';
import {
  cancelUncarried,
  receiptUncarried,
  decideCancelDispatched,
  decideCancelWithdrawn,
  decideDispatchRecorded,
  decideRevocations,
  type Receipt,
} from '../domain/decide.js';
import { isCancelling, isClaimed, isSettled } from '../machines/index.js';
import { branchList, type BranchRecord, type OperationRecord } from '../projections/record.js';
import { encodeWire, headers, type CancelRequest, type RequestMessage } from '../events/wire.js';
import { subjectFor } from '../adapters/transport/subjects.js';
import type { PublishReceipt } from '../adapters/transport/types.js';
import type { OpEntry, Reconcile, RuntimeHost } from './host.js';

/** Republishing an uncertain publication waits this long (a transport retry, not an application retry). */
export const reconcileAfterMs = 1000;
/**
 * Requests not known to have been stored (before the deadline) and cancels not known to have been
 * carried (while their timeout lasts) are republished after reconcileAfterMs, doubling in a row up
 * to this.
 */
export const reconcileMaxMs = 30_000;
/** Storage receipts wait at most this long for a transition to ride with. */
export const receiptLingerMs = 50;

function contextOf(host: RuntimeHost, record: OperationRecord) {
  return host.context({ principalId: record.principalId, senderPeerId: record.senderPeerId }, host.deps.clock.nowMs(), record.deadlineMs);
}

/**
 * Publishes the operation's requests not known to have been stored. `uncertain` false (a commit
 * that made new requests pending) leaves those recorded `unknown` to their own republication
 * (armReconcile), so a new request never takes them along ahead of their backoff; the reconcile
 * and a recovery pass true.
 */
export async function dispatchRequests(host: RuntimeHost, entry: OpEntry, uncertain = true): Promise<void> {
  const record = entry.record;
  if (record.decision !== null) return;
  const pending = branchList(record).filter((b) => isClaimed(b.state) && (b.outbox.receipt === 'pending' || (uncertain && b.outbox.receipt === 'unknown')));
  if (pending.length === 0) return;
  try {
    // Results and claims come back on paths that must exist before any request goes out.
    await host.inboundPath(record.subjectNamespace, record.interaction, 'result');
    await host.inboundPath(record.subjectNamespace, record.interaction, 'claim');
  } catch (error) {
    // Nothing is sent without its result path: tried again at the reconcile, backing off, until
    // the deadline closes the operation.
    host.failed('transport', 'result-path', error, record);
    return armReconcile(host, entry, 'requests');
  }
  const revoked: { branchId: string; policyRevision: string; reason: string }[] = [];
  const sendable: BranchRecord[] = [];
  const answers = await Promise.all(
    pending.map((branch) =>
      host
        .authorize({
          context: contextOf(host, record),
          action: 'deliver',
          contract: record.contract,
          interaction: record.interaction,
          peerId: branch.peerId,
          branchId: branch.branchId,
          attempt: branch.attempt,
        })
        .catch(() => undefined),
    ),
  );
  pending.forEach((branch, i) => {
    const auth = answers[i];
    // Policy unavailable, or its decision already expired: send nothing now, reconcile later.
    if (auth === undefined || auth.refusal === 'expired') return;
    if (!auth.allowed) return void revoked.push({ branchId: branch.branchId, policyRevision: auth.revision, reason: auth.reason });
    sendable.push(branch);
  });
  // All requests are handed to the transport in one synchronous pass, so their writes can coalesce.
  const receipts = await Promise.all(
    sendable.map((branch) => {
      entry.unsent.delete(branch.outbox.publicationId); // from here on it may have been sent
      return publishRequest(host, record, branch);
    }),
  );
  if (revoked.length > 0) await host.commitDecided(entry, (current) => decideRevocations(current, revoked, host.deps.clock.nowMs()));
  if (receipts.length > 0 && receipts.every((r) => r.receipt === 'stored' || r.receipt === 'already-stored')) {
    // Proof of storage changes no branch's course: it rides with the next transition of the
    // operation (usually its first results) instead of costing an append of its own. Until it is
    // recorded the outbox reads pending, which a recovery republishes under the same identity.
    const decide = async () => (current: OperationRecord) => decideDispatchRecorded(current, receipts, host.deps.clock.nowMs());
    void host.submit(entry, decide, JSON.stringify(receipts).length, { lingerMs: receiptLingerMs }).catch((error: unknown) => {
      // Not recorded: publish again later under the same identities (already-stored) and record then.
      host.failed('store', 'record-dispatch', error, entry.record);
      armReconcile(host, entry, 'requests');
    });
  } else if (receipts.length > 0) {
    await host.commitDecided(entry, (current) => decideDispatchRecorded(current, receipts, host.deps.clock.nowMs()));
  }
  if (receipts.some((r) => r.receipt === 'unknown') || receipts.length + revoked.length < pending.length) armReconcile(host, entry, 'requests');
  // Requests left to their own republication keep its schedule: its rounds go on counting.
  else if (uncertain || !branchList(entry.record).some((b) => isClaimed(b.state) && b.outbox.receipt === 'unknown')) entry.reconcile.requests.rounds = 0;
}

async function publishRequest(host: RuntimeHost, record: OperationRecord, branch: BranchRecord): Promise<Receipt> {
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
    renewIntervalMs: record.manifest.renewIntervalMs,
    publicationId: branch.outbox.publicationId,
    input: record.input,
  };
  const subject = subjectFor(record.subjectNamespace, record.interaction, record.operationId, 'request', branch.peerId);
  const outcome = await host.deps.transport
    .publish(subject, encodeWire(message), { msgId: branch.outbox.publicationId, headers: wireHeaders(branch) })
    .catch((error: unknown): PublishReceipt => ({ receipt: 'unknown', detail: (error as Error).message }));
  // Rejected, as any refused publication (its attempt ends, retried within the budget). A request
  // the broker never carries or stores (larger than its max_payload or its stream's max_msg_size,
  // or malformed) is refused for good: every attempt sends the same input, so its branch fails at
  // once, the refusal's description recorded (it says which limit) and logged.
  const receipt: Receipt = { branchId: branch.branchId, attempt: branch.attempt, fence: branch.fence, receipt: outcome.receipt };
  if (outcome.detail !== undefined) receipt.detail = outcome.detail;
  if (outcome.refusal !== undefined) {
    host.failed('transport', 'dispatch', outcome.refusal, record);
    receipt.refusedForGood = true;
    receipt.detail = outcome.refusal.message;
  }
  return receipt;
}

/**
 * Cooperative cancellation: persisted in the closing transition, reauthorized, published with its
 * attempt and fence. A cancel the policy refuses, or the transport refuses for good (a message it
 * never carries: PublishReceipt.refusal, reported as a transport failure), is recorded as rejected
 * at once and never sent again: its branch waits out the cancel timeout for a late result only,
 * and its settlement then ends unknown. One not known to have been carried — the policy could not
 * answer for it, its publication was uncertain (`unknown`), or the transport rejected it for a
 * reason that may pass (a closed connection) — is published again at the reconcile, same attempt,
 * fence and message id (the peer dedupes), after reconcileAfterMs and twice as long each round
 * in a row up to reconcileMaxMs, and never once its cancel has ended (a reply, or the
 * cancel timeout).
 */
export async function dispatchCancels(host: RuntimeHost, entry: OpEntry): Promise<void> {
  const record = entry.record;
  const nowMs = host.deps.clock.nowMs();
  // Past the cancel timeout nothing is sent: the due timer records that the replies are missing.
  if (record.decision === null || nowMs >= record.decision.cancelDeadlineMs) return;
  const waiting = branchList(record).filter((b) => isCancelling(b.state) && b.cancel !== null && (b.cancel.receipt === 'pending' || cancelUncarried(b.cancel)));
  // A request this process never handed to the transport cannot be running, where no other process
  // could have sent it: withdraw, do not send (soleSender).
  const neverSent = soleSender(host) ? waiting.filter((b) => b.outbox.attempt === b.cancel?.attempt && entry.unsent.has(b.outbox.publicationId)) : [];
  if (neverSent.length > 0)
    await host.commitDecided(entry, (current) =>
      decideCancelWithdrawn(
        current,
        neverSent.map((b) => b.branchId),
        host.deps.clock.nowMs(),
      ),
    );
  const pending = waiting.filter((b) => !neverSent.includes(b));
  if (pending.length === 0) return void (entry.reconcile.cancels.rounds = 0);
  try {
    await host.inboundPath(record.subjectNamespace, record.interaction, 'cancel-result');
  } catch (error) {
    // No cancel is sent without its reply path: tried again at the reconcile, backing off; the
    // cancel timeout makes settlement indeterminate if it never can be.
    host.failed('transport', 'cancel-result-path', error, record);
    return armReconcile(host, entry, 'cancels');
  }
  const answers = await Promise.all(pending.map((branch) => sendCancel(host, record, branch)));
  const receipts = answers.filter((r) => r !== undefined);
  await host.commitDecided(entry, (current) => decideCancelDispatched(current, receipts));
  if (receipts.length === answers.length && !receipts.some(receiptUncarried)) return void (entry.reconcile.cancels.rounds = 0);
  armReconcile(host, entry, 'cancels');
}

/**
 * Arms the republication of an operation's requests not known to have been stored (an uncertain
 * receipt, a policy that could not answer, receipts the store could not record, a result path not
 * made) or of its cancels not known to have been carried: after reconcileAfterMs, twice as long
 * each round in a row up to reconcileMaxMs; one of each kind armed at a time, none once the
 * coordinator closes, and none that would fire at or after the instant past which sending cannot
 * help (the deadline for requests, the cancel timeout for cancels).
 */
function armReconcile(host: RuntimeHost, entry: OpEntry, kind: keyof OpEntry['reconcile']): void {
  const slot = entry.reconcile[kind];
  const untilMs = kind === 'requests' ? entry.record.deadlineMs : entry.record.decision?.cancelDeadlineMs;
  if (slot.timer !== undefined || untilMs === undefined || host.closing) return;
  const delayMs = doublingDelayMs(reconcileAfterMs, reconcileMaxMs, slot.rounds);
  if (host.deps.clock.nowMs() + delayMs >= untilMs) return;
  slot.rounds += 1;
  const again = kind === 'requests' ? dispatchRequests : dispatchCancels;
  slot.timer = host.deps.clock.at(host.deps.clock.nowMs() + delayMs, () => {
    slot.timer = undefined;
    if (host.closing) return;
    void host.enqueue(entry, () => again(host, entry)).catch((error: unknown) => host.failed('transport', 'reconcile', error, entry.record));
  });
}

/**
 * Whether this process's not having sent a request proves it was never sent. It does where no
 * other process holds the store (not durable: the log dies with this process) or reaches these
 * peers (an in-process bus). On a durable store over a broker others share, every coordinator that
 * loads or follows the operation publishes its pending requests (afterCommit), unrecorded until
 * their receipts are: one may have been sent by another, so its cancel is sent, and a peer that
 * never had it answers unknown.
 */
function soleSender(host: RuntimeHost): boolean {
  return !host.deps.store.capabilities.durable || host.deps.transport.capabilities.inProcess === true;
}

/** Reauthorizes and publishes one branch's cancel: its receipt, or undefined when the policy could not answer. */
async function sendCancel(host: RuntimeHost, record: OperationRecord, branch: BranchRecord): Promise<Receipt | undefined> {
  const cancel = branch.cancel;
  if (cancel === null) throw new AssertionFailure('a branch waiting for its cancel reply has a cancel on record');
  const base = { branchId: branch.branchId, attempt: cancel.attempt, fence: cancel.fence };
  const auth = await host
    .authorize({
      context: contextOf(host, record),
      action: 'cancel',
      contract: record.contract,
      interaction: record.interaction,
      peerId: branch.peerId,
      branchId: branch.branchId,
      attempt: cancel.attempt,
    })
    .catch(() => undefined);
  // A policy that could not answer is no refusal: nothing is sent now, and it is asked again at the reconcile.
  if (auth === undefined) return undefined;
  if (!auth.allowed) return { ...base, receipt: 'rejected', detail: auth.reason, refusedForGood: true };
  const message: CancelRequest = {
    kind: 'cancel',
    operationId: record.operationId,
    branchId: branch.branchId,
    peerId: branch.peerId,
    attempt: cancel.attempt,
    fence: cancel.fence,
    reason: 'decision-closed',
  };
  const subject = subjectFor(record.subjectNamespace, record.interaction, record.operationId, 'cancel', branch.peerId);
  const msgId = `${publicationId(record.contract.digest, record.operationId, branch.branchId, cancel.attempt)}.cancel`;
  const outcome = await host.deps.transport
    .publish(subject, encodeWire(message), { msgId, headers: wireHeaders(branch) })
    .catch((e: unknown): PublishReceipt => ({ receipt: 'unknown', detail: (e as Error).message }));
  // A cancel the transport refuses for good (the request path's refusal) never arrives, however
  // often it is sent: reported, and recorded rejected at once with the refusal's description.
  if (outcome.refusal !== undefined) {
    host.failed('transport', 'cancel', outcome.refusal, record);
    return { ...base, receipt: 'rejected', detail: outcome.refusal.message, refusedForGood: true };
  }
  return outcome.detail === undefined ? { ...base, receipt: outcome.receipt } : { ...base, receipt: outcome.receipt, detail: outcome.detail };
}

/**
 * Cancels the republications the operation no longer needs: its requests' once it is decided (no
 * request is sent then), its cancels' once it is settled (every cancel has ended) — so a settled
 * operation the cache lets go holds no timer — and, with `all` (its coordinator closes), both.
 */
export function disarmReconciles(entry: OpEntry, all = false): void {
  const { requests, cancels } = entry.reconcile;
  if (all || entry.record.decision !== null) disarm(requests);
  if (all || isSettled(entry.record.phase)) disarm(cancels);
}

function disarm(slot: Reconcile): void {
  slot.timer?.cancel();
  slot.timer = undefined;
}

function wireHeaders(branch: BranchRecord): Record<string, string> {
  return { [headers.branch]: branch.branchId, [headers.attempt]: String(branch.attempt), [headers.fence]: String(branch.fence) };
}
