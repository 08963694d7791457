/** One-line descriptions of domain events, for the tables people read (demo, inspect, tail). */
import type { DomainEvent } from '../events/types.js';

/** `originMs` (the admission instant) makes absolute instants readable as offsets. */
export function describeEvent(event: DomainEvent, originMs = 0): string {
  const at = (ms: number) => (originMs === 0 ? String(ms) : `+${ms - originMs} ms`);
  switch (event.type) {
    case 'operation-admitted':
      return `${event.manifest.branches.length} branches, threshold ${event.manifest.threshold}/${event.manifest.units}, timeout ${event.timeoutMs} ms`;
    case 'dispatch-recorded':
      return `${event.branchId} attempt ${event.attempt} fence ${event.fence}: ${event.receipt}`;
    case 'result-accepted':
      return `${event.branchId}: ${event.status}${event.retryAtMs !== null ? ` (retry at ${at(event.retryAtMs)})` : ''} ${JSON.stringify(event.result)}`;
    case 'result-rejected':
      return `${event.branchId ?? '?'}: ${event.reason}`;
    case 'protocol-conflict-recorded':
      return `${event.branchId}: ${event.detail}`;
    case 'lease-renewed':
      return `${event.branchId} attempt ${event.attempt} fence ${event.fence}: lease until ${at(event.leaseUntilMs)}`;
    case 'claim-ended':
      return `${event.branchId} attempt ${event.attempt}: ${event.cause}; ${event.retryAtMs === null ? 'no retry' : `retry at ${at(event.retryAtMs)}`}`;
    case 'branch-reassigned':
      return `${event.branchId} → ${event.peerId} attempt ${event.attempt} fence ${event.fence}`;
    case 'branch-failed':
      return `${event.branchId} attempt ${event.attempt}: ${event.reason}`;
    case 'branch-revoked':
      return `${event.branchId} attempt ${event.attempt}: revoked (policy ${event.policyRevision})`;
    case 'cancel-dispatched':
      return `${event.branchId} attempt ${event.attempt} fence ${event.fence}: ${event.receipt}${event.transient === true ? ' (may pass: published again)' : ''}`;
    case 'cancel-result-accepted':
      return `${event.branchId} attempt ${event.attempt}: ${event.outcome}`;
    case 'cancel-withdrawn':
      return `${event.branchId} attempt ${event.attempt}: request never sent, nothing to cancel`;
    case 'cancel-timed-out':
      return `no reply from ${event.branchIds.join(', ')}`;
    case 'decision-closed':
      return `${event.outcome} (${event.reason}); siblings ${event.siblings.map((s) => `${s.branchId}:${s.disposition}`).join(', ') || 'none'}`;
    case 'settlement-completed':
      return event.status;
    default: {
      const unreachable: never = event;
      return String(unreachable);
    }
  }
}
