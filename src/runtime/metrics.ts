/** Prometheus metrics of one coordinator (served by the HTTP facade at /metrics). */
import { Counter, Histogram, Registry } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();
  readonly admissions = new Counter({ name: 'convoke_admissions_total', help: 'Operations admitted', registers: [this.registry] });
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
