/**
 * Delivering a received CloudEvent to the waiting listens of the instances this executor holds:
 * for each, the event is matched (jq, here, where it arrives) and taken through the kernel's
 * guarded append (listen-match.ts decides, on the record at its revision). The delivery answers
 * the instances whose log holds the event once this returns — the caller acknowledges only then;
 * a redelivery of an event already taken (same source and id: a publisher retrying after a lost
 * acknowledgment) is answered the same, and appends nothing. An event no waiting listen takes is
 * stored nowhere.
 */
import type { CloudEvent, CloudEventDelivery } from '../../contract/cloudevents.js';
import { limits } from '../../contract/limits.js';
import type { Kernel, Stream } from '../../kernel/index.js';
import type { WorkflowTransition } from './events.js';
import type { ExpressionEvaluator } from './jq.js';
import { decideListenEvent, listenClosed, listenTook, matchFilters } from './listen-match.js';
import type { WorkflowRecord } from './record.js';

type Instance = Stream<WorkflowRecord>;

export interface IntakeDeps {
  kernel: Kernel<WorkflowRecord, WorkflowTransition, Instance>;
  evaluator: ExpressionEvaluator;
}

export async function deliverEvent(deps: IntakeDeps, event: CloudEvent, principalId: string | null): Promise<CloudEventDelivery> {
  const matched: string[] = [];
  // The instances this executor holds (running ones are held while their interpreter waits; finished ones while cached).
  for (const instance of deps.kernel.held()) {
    if (matched.length >= limits.cloudEventMatchesMax) break;
    if (Object.keys(instance.record.listens).length === 0) continue;
    if (principalId !== null && instance.record.started.principalId !== principalId) continue;
    if (await deliverTo(deps, instance, event)) matched.push(instance.id);
  }
  return { matched };
}

/** Offers the event to each open listen of the instance; true when one of them holds it. */
async function deliverTo(deps: IntakeDeps, instance: Instance, event: CloudEvent): Promise<boolean> {
  let holds = false;
  for (const at of Object.keys(instance.record.listens)) {
    if (listenTook(instance.record, at, event)) {
      holds = true;
      continue;
    }
    const listen = instance.record.listens[at];
    if (!listen || listenClosed(instance.record, at)) continue;
    const candidates = await matchFilters(deps.evaluator, listen, event);
    if (candidates.length === 0) continue;
    await deps.kernel.enqueue(instance, () =>
      deps.kernel.commit(instance, (record, late) => (late ? undefined : decideListenEvent(record, at, event, candidates))),
    );
    if (listenTook(instance.record, at, event)) holds = true;
  }
  return holds;
}
