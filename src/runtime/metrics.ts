/** Prometheus metrics of one coordinator (served by the HTTP facade at /metrics). */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();
  readonly admissions = new Counter({ name: 'convoke_admissions_total', help: 'Operations admitted', registers: [this.registry] });
  readonly appends = new Counter({ name: 'convoke_transitions_total', help: 'Transitions appended to operation streams (admissions included); per decision it shows how well commands share appends', registers: [this.registry] });
  readonly decisions = new Counter({ name: 'convoke_decisions_total', help: 'Decisions closed, by outcome', labelNames: ['outcome'], registers: [this.registry] });
  readonly rejections = new Counter({ name: 'convoke_result_rejections_total', help: 'Result messages rejected, by reason', labelNames: ['reason'], registers: [this.registry] });
  readonly storeErrors = new Counter({ name: 'convoke_store_errors_total', help: 'Store failures, by stage', labelNames: ['stage'], registers: [this.registry] });
  readonly transportErrors = new Counter({ name: 'convoke_transport_errors_total', help: 'Transport failures, by stage', labelNames: ['stage'], registers: [this.registry] });
  readonly decisionLatencyMs = new Histogram({
    name: 'convoke_decision_latency_ms',
    help: 'Admission to decision, in store milliseconds',
    buckets: [1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 5000, 30000],
    registers: [this.registry],
  });
}

/**
 * For a store whose appends learn server stamps two ways (the JetStream store: its stamp feed, or
 * a read-back round trip): a gauge of each count, read at scrape time. A growing `read-back`
 * means the feed is lagging or down, and every append pays a second round trip.
 */
export function observeStampSources(metrics: Metrics, store: object): void {
  if (!('stampSources' in store)) return;
  const sources = store.stampSources as { fed: number; readBack: number };
  new Gauge({
    name: 'convoke_store_stamps',
    help: 'Appends by how they learned their server timestamp (fed: the stamp feed; read-back: a second round trip)',
    labelNames: ['source'],
    registers: [metrics.registry],
    collect() {
      this.set({ source: 'fed' }, sources.fed);
      this.set({ source: 'read-back' }, sources.readBack);
    },
  });
}
