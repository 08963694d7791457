/**
 * The refused workflow starts counter: `convoke_workflow_starts_refused_total{reason, starter}`,
 * each start refused before anything was recorded — `reason` `running-bound` (the principal
 * holds as many running instances as workflows.runningInstancesPerPrincipal allows;
 * docs/workflows-executor.md "Running instances per principal") or `start-rate` (the principal's
 * workflows.startRate bucket is empty) — by who asked: `caller` (HTTP,
 * NATS, `convoke workflow run`) or `workflow` (a `run: workflow` task, whose parent's task
 * faults). Callers see 503s; this tells an operator how many, and whether children are among them.
 */
import type { Registry } from 'prom-client';
import { registryCounter } from './metrics.js';

export const workflowStartsRefusedName = 'convoke_workflow_starts_refused_total';

/** Who asked for a refused start. */
export type WorkflowStarter = 'caller' | 'workflow';
/** Why it was refused. */
export type WorkflowStartRefusal = 'running-bound' | 'start-rate';

/** Registers the counter (once per registry) and answers what counts a refusal; both starters show from the first scrape, at 0. */
export function observeRefusedWorkflowStarts(registry: Registry): (starter: WorkflowStarter, reason: WorkflowStartRefusal) => void {
  const counter = registryCounter(
    registry,
    workflowStartsRefusedName,
    'Workflow starts refused before anything was recorded, by reason (running-bound, start-rate) and starter (caller, workflow)',
    ['reason', 'starter'],
  );
  for (const starter of ['caller', 'workflow'] as const) counter.inc({ reason: 'running-bound', starter }, 0);
  counter.inc({ reason: 'start-rate', starter: 'caller' }, 0);
  return (starter, reason) => counter.inc({ reason, starter });
}
