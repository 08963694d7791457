/**
 * Prometheus metrics of one coordinator (served by the HTTP facade at /metrics), named by the
 * Prometheus conventions: base units in the name (`_seconds`, `_bytes`), counters end in
 * `_total`, nothing else does, and every metric has help text. `promtool check metrics` is run on
 * a live server's exposition in the tests; docs/operations.md lists every metric.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Admission to decision; quorums decide in milliseconds, deadlines bound the tail. */
const decisionBucketsSeconds = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class Metrics {
  readonly registry = new Registry();
  readonly admissions = new Counter({ name: 'convoke_admissions_total', help: 'Operations admitted', registers: [this.registry] });
  readonly appends = new Counter({
    name: 'convoke_transitions_total',
    help: 'Transitions appended to operation streams (admissions included); per decision it shows how well commands share appends',
    registers: [this.registry],
  });
  readonly closingsPastBudget = new Counter({
    name: 'convoke_closings_past_budget_total',
    help: "Closing transitions (the decision's, settlement facts) appended to logs already past this process's ordinary log budget (filled by a writer under larger budgets), by kind; the budget never refuses them",
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly decisions = new Counter({
    name: 'convoke_decisions_total',
    help: 'Decisions closed, by outcome',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly settlements = new Counter({
    name: 'convoke_settlements_total',
    help: 'Settlements completed, by status',
    labelNames: ['status'],
    registers: [this.registry],
  });
  readonly rejections = new Counter({
    name: 'convoke_result_rejections_total',
    help: 'Peer messages (results, claims, cancel results) rejected, by reason',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly storeErrors = new Counter({
    name: 'convoke_store_errors_total',
    help: 'Store failures, by stage',
    labelNames: ['stage'],
    registers: [this.registry],
  });
  readonly policyErrors = new Counter({
    name: 'convoke_policy_errors_total',
    help: 'Policy failures (it could not answer; the protected transition failed closed and is asked again), by action',
    labelNames: ['action'],
    registers: [this.registry],
  });
  readonly transportErrors = new Counter({
    name: 'convoke_transport_errors_total',
    help: 'Transport failures, by stage',
    labelNames: ['stage'],
    registers: [this.registry],
  });
  readonly pruned = new Counter({
    name: 'convoke_pruned_total',
    help: "Streams whose payload this deployment's scheduled retention expired (tombstoned: the log gone, the key kept), by kind",
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly pruneRuns = new Counter({
    name: 'convoke_retention_runs_total',
    help: 'Scheduled retention prunes, by result (ok; failed: some operations or workflow instances could not be read or tombstoned; error: the index could not be listed)',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly decisionSeconds = new Histogram({
    name: 'convoke_decision_duration_seconds',
    help: 'Admission to decision, in store time, by outcome',
    labelNames: ['outcome'],
    buckets: decisionBucketsSeconds,
    registers: [this.registry],
  });
}

/** What an open-operations gauge reads at scrape time: the operations a coordinator holds. */
export interface OpenOperation {
  decided: boolean;
}

/**
 * The counter `name` of `registry`, registered there the first time it is asked for: a second
 * user of the same registry (another app, a second host on one coordinator) shares it.
 */
export function registryCounter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  return (registry.getSingleMetric(name) as Counter<L> | undefined) ?? new Counter({ name, help, labelNames, registers: [registry] });
}

/**
 * `convoke_operations_open{stage}`: the unsettled operations this coordinator holds in memory,
 * read at scrape time — `deciding` (no decision yet) and `settling` (decided, settlement pending).
 * Every open operation of a coordinator's store is held by some coordinator once recovered, so
 * with several coordinators on one store the figures overlap: take the maximum, not the sum.
 */
export function observeOpenOperations(metrics: Metrics, open: () => Iterable<OpenOperation>): void {
  const name = 'convoke_operations_open';
  if (metrics.registry.getSingleMetric(name)) return;
  new Gauge({
    name,
    help: 'Unsettled operations held by this coordinator, by stage (deciding: undecided; settling: decided, settlement pending)',
    labelNames: ['stage'],
    registers: [metrics.registry],
    collect() {
      let deciding = 0;
      let settling = 0;
      for (const operation of open()) {
        if (operation.decided) settling++;
        else deciding++;
      }
      this.set({ stage: 'deciding' }, deciding);
      this.set({ stage: 'settling' }, settling);
    },
  });
}

/**
 * For a store whose appends learn server stamps two ways (the JetStream store: its stamp feed, or
 * a read-back round trip): a counter of each, brought up to the store's running counts at scrape
 * time. A growing `read-back` means the feed is lagging or down, and every append pays a second
 * round trip.
 */
export function observeStampSources(metrics: Metrics, store: object): void {
  if (!('stampSources' in store)) return;
  const sources = store.stampSources as { fed: number; readBack: number };
  const seen = { fed: 0, readBack: 0 };
  new Counter({
    name: 'convoke_store_stamps_total',
    help: 'Appends by how they learned their server timestamp (fed: the stamp feed; read-back: a second round trip)',
    labelNames: ['source'],
    registers: [metrics.registry],
    collect() {
      // The store counts; the counter takes what was added since the last scrape (never negative).
      this.inc({ source: 'fed' }, Math.max(0, sources.fed - seen.fed));
      this.inc({ source: 'read-back' }, Math.max(0, sources.readBack - seen.readBack));
      seen.fed = Math.max(seen.fed, sources.fed);
      seen.readBack = Math.max(seen.readBack, sources.readBack);
    },
  });
}

/** What `convoke_build_info` reports: the package version, Node's version, the commit when the build knew it. */
export interface BuildInfo {
  version: string;
  nodeVersion: string;
  /** The git commit the package was built from; `unknown` when the build had no checkout. */
  commit: string;
}

/**
 * The process's own metrics: `convoke_build_info` (constant 1, the build in its labels) and
 * prom-client's default process and Node runtime metrics (CPU, memory, file descriptors, event
 * loop lag, heap spaces, GC). prom-client's three `nodejs_active_*_total` gauges are removed:
 * they are the sums of the labelled `nodejs_active_*` gauges, and a gauge named `_total` breaks
 * the naming rule (`promtool check metrics` reports them).
 */
export function observeProcess(metrics: Metrics, build: BuildInfo): void {
  const registry = metrics.registry;
  if (registry.getSingleMetric('convoke_build_info')) return;
  const info = new Gauge({
    name: 'convoke_build_info',
    help: 'The running build: package version, Node.js version and git commit; always 1',
    labelNames: ['version', 'node_version', 'commit'],
    registers: [registry],
  });
  info.set({ version: build.version, node_version: build.nodeVersion, commit: build.commit }, 1);
  collectDefaultMetrics({ register: registry });
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) registry.removeSingleMetric(name);
}

/**
 * The Prometheus naming rules every metric of a registry must follow (a unit test runs it on a
 * deployment's registry; promtool checks the same on the wire): names in snake case, counters and
 * only counters ending in `_total`, no abbreviated or non-base units, help text present.
 */
export async function namingProblems(registry: Registry): Promise<string[]> {
  const problems: string[] = [];
  const abbreviations = new Set([
    'ms',
    'us',
    'ns',
    'sec',
    'secs',
    'b',
    'kb',
    'mb',
    'gb',
    'kib',
    'mib',
    'gib',
    'milliseconds',
    'microseconds',
    'nanoseconds',
    'minutes',
    'hours',
    'days',
    'kilobytes',
    'megabytes',
  ]);
  for (const metric of await registry.getMetricsAsJSON()) {
    const { name, help } = metric;
    const type = String(metric.type);
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) problems.push(`${name}: not snake case`);
    const total = name.endsWith('_total');
    if (type === 'counter' && !total) problems.push(`${name}: a counter must end in _total`);
    if (type !== 'counter' && total) problems.push(`${name}: a ${type} must not end in _total`);
    if (type !== 'histogram' && type !== 'summary' && /_(count|sum|bucket)$/.test(name)) problems.push(`${name}: reserved suffix`);
    for (const word of name.split('_')) if (abbreviations.has(word)) problems.push(`${name}: "${word}" is not a base unit (use seconds or bytes)`);
    if (!help || help.trim() === '') problems.push(`${name}: no help text`);
  }
  return problems;
}
