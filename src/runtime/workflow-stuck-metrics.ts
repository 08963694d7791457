/**
 * The stuck workflow instances gauge: `convoke_workflow_instances_stuck{reason}`, the running
 * instances of the store's workflow index stuck for each reason (past-timeout, timer-overdue,
 * lease-expired; docs/workflows-executor.md "Listing instances"), counted when scraped, as
 * `convoke_operations_stuck` is for operations (stuck-metrics.ts). A scrape that cannot read the
 * index leaves the gauge without samples rather than reporting zero.
 */
import { Gauge, type Registry } from 'prom-client';
import type { Clock } from '../contract/clock.js';
import { workflowStuckReasons, type WorkflowIndexQuery, type WorkflowStuckBounds, type WorkflowStuckReason } from '../events/workflow-index.js';
import type { WorkflowIndexStore } from '../adapters/store/types.js';

export const workflowStuckGaugeName = 'convoke_workflow_instances_stuck';

/** Rows per page while counting. */
const countPageRows = 500;

/**
 * The instances stuck at `nowMs`, per reason: each reason's stuck rows paged through the index's
 * stuck filter (what `?stuck=<reason>` lists), so the cost follows the running instances the
 * filter walks, never the ended ones.
 */
export async function countStuckWorkflowInstances(
  index: WorkflowIndexStore,
  nowMs: number,
  bounds: WorkflowStuckBounds,
): Promise<Record<WorkflowStuckReason, number>> {
  const counts = { 'past-timeout': 0, 'timer-overdue': 0, 'lease-expired': 0 };
  for (const reason of workflowStuckReasons) {
    let after: WorkflowIndexQuery['after'];
    do {
      const page = await index.list({ limit: countPageRows, stuck: { nowMs, bounds, reason }, ...(after ? { after } : {}) });
      counts[reason] += page.rows.length;
      after = page.next;
    } while (after);
  }
  return counts;
}

export function observeStuckWorkflowInstances(registry: Registry, index: () => WorkflowIndexStore, clock: Clock, bounds: WorkflowStuckBounds): void {
  if (registry.getSingleMetric(workflowStuckGaugeName)) return;
  new Gauge({
    name: workflowStuckGaugeName,
    help: 'Running workflow instances stuck now, by reason: past-timeout, timer-overdue, lease-expired (docs/workflows-executor.md)',
    labelNames: ['reason'],
    registers: [registry],
    async collect() {
      this.reset();
      const counts = await countStuckWorkflowInstances(index(), clock.nowMs(), bounds).catch(() => undefined);
      if (counts === undefined) return;
      for (const reason of workflowStuckReasons) this.set({ reason }, counts[reason]);
    },
  });
}
