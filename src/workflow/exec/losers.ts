/**
 * A competing fork's losing branches and their child operations. Once the winner's `fork-won`
 * has committed, every contract call a losing branch bound (child-bound) is released: cancelled
 * through the coordinator's caller-cancellation path as the instance's principal where its
 * interaction declares `cancellation: "caller"`, otherwise detached (it runs on to its own
 * decision, and nothing waits for it). The disposition is recorded (`child-disposed`) in the same
 * transition that records the losing branches cancelled, before the fork task completes; replay
 * reads it from the log and never asks the runtime again.
 *
 * A recovered worker that finds a child bound but not yet disposed asks again: cancelling an
 * operation already cancelled answers its decision (reason cancelled), so the disposition is the
 * same. A release that the fork's run stops (a timeout that fires while the runtime's answer is
 * uncertain and asked again) records nothing there: the timeout's transition records the losers
 * cancelled, and the child, owed its release (owedReleases), is released after it by the executor
 * (executor.ts settle), as is every call bound inside a task a timeout cancelled.
 */
import { AdapterError } from '../../contract/errors.js';
import { cutText } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';
import { isNotFound } from '../../runtime/errors.js';
import type { ContractCalls } from './http-contracts.js';
import { Halted } from './journal.js';
import { lostFork, ranInside, schemeOf, type Execution, type KeyScheme } from './keys.js';
import { cancelledWithEnd, firstEndedAround } from './subworkflows.js';
import type { ChildDisposed, ChildDisposition } from './events.js';
import type { ChildRecord, WorkflowRecord } from './record.js';

/** The children bound inside the branch executions `branches` (each a branch's pointer and key) not yet disposed. */
export function openChildrenOf(record: WorkflowRecord, branches: readonly Execution[]): [string, ChildRecord][] {
  const scheme = schemeOf(record.started);
  return Object.entries(record.children).filter(
    ([at, child]) => child.disposition === undefined && branches.some((branch) => ranInside(scheme, branch, child.ref, at)),
  );
}

/** A child operation no task awaits any more that has not been released yet: its task execution, its record, and what released it. */
export interface OwedRelease {
  at: string;
  child: ChildRecord;
  /** The execution whose end released it: a competing fork it lost, or the timed-out task it ran inside. */
  by: string;
}

/**
 * The child operations the instance still owes a release (pure): bound, with no answer recorded
 * for their call and no disposition, whose task execution was cancelled — by a timeout of a task
 * it ran inside (decide.ts cancelledInside), or as a losing branch of a competing fork whose
 * release a timeout stopped, the workflow's included. A call cancelled with the instance's own
 * end (its timeout, a cancel) outside any lost fork is not owed: an ended instance's open calls
 * run on, as documented. Running or ended, the executor releases them (executor.ts settle) as the
 * fork releases its losers', and asks again while the runtime refuses.
 */
export function owedReleases(record: WorkflowRecord): OwedRelease[] {
  const children = Object.entries(record.children);
  if (children.length === 0) return [];
  const scheme = schemeOf(record.started);
  let withEnd: ReadonlySet<string> | undefined;
  const owed: OwedRelease[] = [];
  for (const [at, child] of children) {
    if (child.disposition !== undefined || record.steps[`${at}>invoke`] !== undefined || record.tasks[at]?.state !== 'cancelled') continue;
    const fork = lostFork(record, scheme, child.ref, at);
    if (fork !== undefined) {
      owed.push({ at, child, by: fork });
      continue;
    }
    withEnd ??= record.status === 'faulted' || record.status === 'cancelled' ? cancelledWithEnd(record) : new Set();
    if (!withEnd.has(at)) owed.push({ at, child, by: timedOutAround(record, scheme, at, child) });
  }
  return owed;
}

/** The first faulted task execution the child's task ran inside that ended after it started (the timeout that cancelled it); else its own. */
function timedOutAround(record: WorkflowRecord, scheme: KeyScheme, at: string, child: ChildRecord): string {
  const faulted = Object.entries(record.tasks).filter(([, task]) => task.state === 'faulted');
  return firstEndedAround(record, scheme, faulted, child.ref, at) ?? at;
}

/** What released a child, as its disposition's detail says it: the fork's release, or the timed-out task's. */
const release = (record: WorkflowRecord, by: string): string =>
  Object.hasOwn(record.winners, by) ? "the fork's release" : `the release when task ${record.tasks[by]?.name ?? by} timed out`;

/**
 * Releases each child operation the instance owes (owedReleases), asking the runtime as the
 * instance's principal, and answers the dispositions for the caller to record (decide.ts
 * decideDisposals). An unavailable runtime is thrown: asked again later. `signal` stops it (the
 * executor's close): nothing is recorded.
 */
export async function releaseOwed(
  service: ContractCalls | undefined,
  record: WorkflowRecord,
  nowMs: () => number,
  signal?: AbortSignal,
): Promise<ChildDisposed[]> {
  const disposed: ChildDisposed[] = [];
  for (const { at, child, by } of owedReleases(record))
    disposed.push(await dispose(service, record.started.principalId, by, at, child, nowMs, signal, release(record, by)));
  return disposed;
}

/**
 * One child's disposition, asked of the runtime (the only I/O); an unavailable runtime is thrown
 * (the instance is driven again). A cancel the runtime refuses — not declared, denied, or invalid
 * for good — leaves the child detached, the refusal recorded as the detail; so does one refused
 * `expired` once `nowMs` is limits.workflowLoserCancelExpiredAfterMs past the child's deadline.
 * `signal` is the fork's run: once it aborts nothing more is sent, and a request it stopped is
 * thrown as Halted (no disposition; the caller records none once it has aborted).
 */
export async function dispose(
  service: ContractCalls | undefined,
  principalId: string,
  fork: string,
  at: string,
  child: ChildRecord,
  nowMs: () => number,
  signal?: AbortSignal,
  release = "the fork's release",
): Promise<ChildDisposed> {
  const event = (disposition: ChildDisposition, detail: string): ChildDisposed => ({
    type: 'child-disposed',
    v: 1,
    at,
    fork,
    operationId: child.operationId,
    disposition,
    detail: cutText(detail, 4000),
  });
  if (!service) return event('not-admitted', 'no contract runtime: the call was never made');
  let deadlineMs: number | undefined;
  try {
    const current = await service.get(principalId, child.operationId, signal);
    deadlineMs = current.deadlineMs;
    // Decided when the release looks, which is after the win: before the win, or between the two (the look cannot tell).
    if (current.decision !== null && current.decision.reason !== 'cancelled')
      return event('already-closed', `decided ${current.decision.outcome} (${current.decision.reason}) before ${release} came to it`);
    const cancelled = await service.cancel(principalId, child.operationId, signal);
    // A cancel that finds the decision closed answers that decision: closed by the child's own
    // rule or timeout since it was looked at, it was not cancelled (and its output stands).
    if (cancelled.decision !== null && cancelled.decision.reason !== 'cancelled')
      return event('already-closed', `decided ${cancelled.decision.outcome} (${cancelled.decision.reason}) before its cancel was recorded`);
    return event('cancelled', `cancelled by the caller; decision ${cancelled.decision?.outcome ?? 'pending'} (${cancelled.decision?.reason ?? 'none'})`);
  } catch (error) {
    if (signal?.aborted) throw new Halted(`the release of operation ${child.operationId} was stopped`);
    if (isNotFound(error)) return event('not-admitted', 'the runtime holds no operation under the bound key');
    if (error instanceof AdapterError && (error.kind === 'unsupported' || error.kind === 'denied')) return event('detached', error.message);
    // A cancel refused as invalid (the child's log full at its store) meets the same refusal every
    // time it is sent: the child runs on to its own decision, detached, the refusal its detail.
    // Thrown, it faulted the instance (an invalid-input ends a run), the winner's output lost for a
    // loser's child. Anything else (unavailable, expired) may pass: thrown, and asked again.
    if (error instanceof AdapterError && error.kind === 'invalid-input') return event('detached', `the cancel was refused: ${error.message}`);
    // A cancel refused as expired before the child's deadline passes (its authorization ended
    // meanwhile): asked again, authorized again. Past the deadline a cancel is always refused so
    // (its time guard ends there): the child closes by its own timeout, and the next ask finds it
    // closed — unless its store refuses that too (its log at the store's count), for good. So once
    // the deadline is a margin behind, covering a store down for a while and the two clocks' skew,
    // the child is detached: nothing waits for it, and it runs on to whatever decision it reaches.
    if (error instanceof AdapterError && error.kind === 'expired' && deadlineMs !== undefined) {
      const pastMs = nowMs() - deadlineMs;
      if (pastMs >= limits.workflowLoserCancelExpiredAfterMs)
        return event('detached', `the cancel was refused expired ${pastMs} ms past the operation's deadline: ${error.message}`);
    }
    throw error;
  }
}
