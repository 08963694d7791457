/**
 * The worker lease: which of the workers sharing a store drives an instance. Its holder alone
 * runs the interpreter — and so alone makes the instance's external calls; the others keep the
 * instance loaded (its timers fire wherever it is held) and take over only once the lease has
 * ended by the injected clock.
 *
 * - Acquire: `lease-acquired` with the next epoch. Over another worker's lease it is a takeover,
 *   decided only once the clock is past the lease's end, and guarded so that the store commits
 *   it no earlier than that end (notBeforeMs): a paused or slow holder keeps its lease until then.
 * - Renew: the holder moves its end forward under the same epoch; release: a clean shutdown ends
 *   it at once, so another worker need not wait.
 * - Fence: every transition the holder's interpreter proposes is decided only while the record —
 *   at the revision its append expects (the CAS) — still names the holder and its epoch. A
 *   takeover moves the revision, so the old holder's next append conflicts, is decided again on
 *   the new record, and throws LeaseLost: it has stopped before recording anything more.
 *
 * All deciders are pure: the record, the worker, the instant.
 */
import { openEndedMs } from '../../events/guard.js';
import type { WorkflowTransition } from './events.js';
import { Halted } from './journal.js';
import type { LeaseRecord, WorkflowRecord } from './record.js';

/** The interpreter's worker no longer holds the lease: it unwinds and records nothing more. */
export class LeaseLost extends Halted {}

export interface LeaseTerms {
  worker: string;
  nowMs: number;
  leaseMs: number;
}

const unbounded = { notBeforeMs: Number.MIN_SAFE_INTEGER, notAfterMs: openEndedMs };

/** Whether another worker holds a lease that has not ended at nowMs. */
export function heldElsewhere(record: WorkflowRecord, worker: string, nowMs: number): LeaseRecord | undefined {
  const lease = record.lease;
  return lease && lease.worker !== worker && nowMs < lease.untilMs ? lease : undefined;
}

/** Acquires the lease for `worker` (renews it when it already holds it); undefined while another holds it. */
export function decideAcquire(record: WorkflowRecord, terms: LeaseTerms): WorkflowTransition | undefined {
  if (record.status !== 'running') return undefined;
  const lease = record.lease;
  if (lease?.worker === terms.worker) return decideRenew(record, terms);
  if (heldElsewhere(record, terms.worker, terms.nowMs)) return undefined;
  return {
    events: [{ type: 'lease-acquired', v: 1, worker: terms.worker, epoch: record.leaseEpoch + 1, untilMs: terms.nowMs + terms.leaseMs }],
    // A takeover commits no earlier than the end of the lease it replaces.
    timeGuard: { notBeforeMs: lease ? lease.untilMs : Number.MIN_SAFE_INTEGER, notAfterMs: openEndedMs },
    causation: { command: lease ? 'lease-takeover' : 'lease-acquire' },
  };
}

/** The holder moves its lease's end forward; LeaseLost when the record names another holder. */
export function decideRenew(record: WorkflowRecord, terms: LeaseTerms): WorkflowTransition | undefined {
  if (record.status !== 'running') return undefined;
  const lease = holderLease(record, terms.worker);
  const untilMs = Math.max(lease.untilMs, terms.nowMs + terms.leaseMs);
  return { events: [{ type: 'lease-renewed', v: 1, epoch: lease.epoch, untilMs }], timeGuard: unbounded, causation: { command: 'lease-renew' } };
}

/**
 * Parks the lease: its holder, whose interpreter only waits (a timer, an event), gives it up with
 * one transition instead of renewing it every third of its length for as long as the wait lasts.
 * The instance's next move (its timer fired, an event taken) has any worker that holds it acquire
 * the lease again at once (no holder: no takeover to wait out). Nothing when the record no longer
 * names this holder at this epoch.
 */
export function decidePark(record: WorkflowRecord, worker: string, epoch: number): WorkflowTransition | undefined {
  if (record.status !== 'running' || record.lease?.worker !== worker || record.lease.epoch !== epoch) return undefined;
  return { events: [{ type: 'lease-released', v: 1, epoch }], timeGuard: unbounded, causation: { command: 'lease-park' } };
}

/** Ends the holder's lease (a clean shutdown); nothing when it holds none. */
export function decideRelease(record: WorkflowRecord, worker: string): WorkflowTransition | undefined {
  if (record.status !== 'running' || record.lease?.worker !== worker) return undefined;
  return { events: [{ type: 'lease-released', v: 1, epoch: record.lease.epoch }], timeGuard: unbounded, causation: { command: 'lease-release' } };
}

/** The lease `worker` holds in this record at `epoch` (any epoch when omitted); LeaseLost otherwise. */
export function holderLease(record: WorkflowRecord, worker: string, epoch?: number): LeaseRecord {
  const lease = record.lease;
  if (!lease || lease.worker !== worker || (epoch !== undefined && lease.epoch !== epoch))
    throw new LeaseLost(
      `worker ${worker} no longer holds the lease of workflow instance ${record.instanceId}${lease ? ` (${lease.worker} holds epoch ${lease.epoch})` : ''}`,
    );
  return lease;
}
