/**
 * The dropped emitted events counter: `convoke_workflow_emitted_events_dropped_total{reason}`, each
 * CloudEvent a workflow emitted that `convoke serve`'s NATS intake gave up on — `refused` by the
 * intake for good, not delivered within its `window`, dropped with the backlog full
 * (`backlog-full`) or while it waited when the intake closed (`intake-closed`); see
 * nats-cloudevents.ts emittedRedelivery. Nobody is answered for an emitted event, so without this
 * an operator sees such a loss only in the log (`emitted-event-dropped`).
 */
import type { Registry } from 'prom-client';
import { registryCounter } from './metrics.js';
import { emittedDropReasons, type EmittedDropReason } from '../adapters/transport/nats-cloudevents.js';

export const emittedDroppedName = 'convoke_workflow_emitted_events_dropped_total';

/** Registers the counter (once per registry) and answers what counts a drop; every reason shows from the first scrape, at 0. */
export function observeDroppedEmittedEvents(registry: Registry): (reason: EmittedDropReason) => void {
  const counter = registryCounter(
    registry,
    emittedDroppedName,
    'Emitted workflow CloudEvents the NATS intake dropped undelivered, by reason (refused, window, backlog-full, intake-closed)',
    ['reason'],
  );
  for (const reason of emittedDropReasons) counter.inc({ reason }, 0);
  return (reason) => counter.inc({ reason });
}
