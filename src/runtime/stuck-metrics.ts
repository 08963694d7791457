/**
 * The stuck-work gauge: `convoke_operations_stuck{reason}`, the operations of the store's index
 * stuck for each reason (docs/operations.md "Stuck work"), counted when scraped. A scrape that
 * cannot read the index leaves the gauge without samples rather than reporting zero.
 */
import { Gauge, type Registry } from 'prom-client';
import type { Clock } from '../contract/clock.js';
import { stuckReasons, type StuckBounds } from '../events/operation-index.js';
import type { OperationIndexStore } from '../adapters/store/types.js';

export const stuckGaugeName = 'convoke_operations_stuck';

export function observeStuckOperations(registry: Registry, index: () => OperationIndexStore, clock: Clock, bounds: StuckBounds): void {
  if (registry.getSingleMetric(stuckGaugeName)) return;
  new Gauge({
    name: stuckGaugeName,
    help: 'Operations stuck now, by reason: open-past-deadline, lease-expired, outbox-pending, settlement-indeterminate (docs/operations.md)',
    labelNames: ['reason'],
    registers: [registry],
    async collect() {
      this.reset();
      const counts = await index()
        .countStuck(clock.nowMs(), bounds)
        .catch(() => undefined);
      if (counts === undefined) return;
      for (const reason of stuckReasons) this.set({ reason }, counts[reason]);
    },
  });
}
