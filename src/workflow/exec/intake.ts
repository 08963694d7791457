/**
 * Delivering a received CloudEvent to the waiting listens of the instances this executor holds:
 * for each, the event is matched (jq, here, where it arrives) and taken through the kernel's
 * guarded append (listen-match.ts decides, on the record at its revision). The delivery answers
 * the instances whose log holds the event once this returns — the caller acknowledges only then;
 * a redelivery of an event already taken (same type, source and id: a publisher retrying after a lost
 * acknowledgment) is answered the same, and appends nothing. An event no waiting listen takes is
 * stored nowhere. A listen with an `until` expression takes an event only once the verdict on the
 * events before it is recorded and did not end it (`take`, below). An instance whose running log is
 * at its budget (transitions or bytes) takes no more: the room kept for its end stays its own.
 */
import type { Clock } from '../../contract/clock.js';
import type { CloudEvent, CloudEventDelivery } from '../../contract/cloudevents.js';
import { AdapterError } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import type { Kernel, Stream } from '../../kernel/index.js';
import type { WorkflowTransition } from './events.js';
import type { ExpressionEvaluator } from './jq.js';
import { decideListenEvent, listenClosed, listenTook, matchFilters, takenBeforeListening, untilPending, type Candidate } from './listen-match.js';
import type { WorkflowRecord } from './record.js';

type Instance = Stream<WorkflowRecord>;

export interface IntakeDeps {
  kernel: Kernel<WorkflowRecord, WorkflowTransition, Instance>;
  evaluator: ExpressionEvaluator;
  clock: Clock;
  /** Until when (the clock's ms) this delivery may wait for `until` verdicts, in all. */
  waitUntilMs: number;
  /** Whether the instance's running log has room for the transition (its budgets: transitions and bytes). */
  hasRoom(instance: Instance, transition: WorkflowTransition): boolean;
  /** The most instances one delivery appends the event to (limits.cloudEventMatchesMax). */
  matchesMax: number;
}

/** The instant until which a delivery starting now may wait for `until` verdicts: `waitMs` (default and most: limits.listenUntilWaitMsMax) from now. */
export const untilWaitEnd = (clock: Clock, waitMs: number | undefined): number =>
  clock.nowMs() + Math.max(0, Math.min(waitMs ?? limits.listenUntilWaitMsMax, limits.listenUntilWaitMsMax));

export async function deliverEvent(deps: IntakeDeps, event: CloudEvent, principalId: string | null): Promise<CloudEventDelivery> {
  const matched: string[] = [];
  let appended = 0;
  let pending: AdapterError | undefined;
  // The instances this executor holds (running ones are held while their interpreter waits; finished ones while cached).
  for (const instance of deps.kernel.held()) {
    if (Object.keys(instance.record.listens).length === 0) continue;
    if (principalId !== null && instance.record.started.principalId !== principalId) continue;
    // Past the bound, only what holds the event already is answered; one more that may take it makes the delivery partial.
    if (appended >= deps.matchesMax) {
      if (heldAlready(instance, event)) matched.push(instance.id);
      else if (mayTake(instance)) pending ??= partial(matched.length, deps.matchesMax);
      continue;
    }
    try {
      const took = await deliverTo(deps, instance, event);
      if (took !== 'no') matched.push(instance.id);
      if (took === 'appended') appended++;
    } catch (error) {
      // An instance whose until verdict is still unknown holds only itself: the others are offered the event, then the
      // delivery is answered unavailable, and the publisher's next send (taken once where it was taken) reaches it.
      if (!(error instanceof VerdictPending)) throw error;
      pending ??= error;
    }
  }
  if (pending !== undefined) throw pending;
  return { matched };
}

/**
 * A delivery that reached its bound of appends with instances left that may take the event:
 * `unavailable`, so that its publisher sends it again. The instances that took it answer it taken
 * without an append (deliverTo), so each send appends it to up to the bound more, and the sends
 * end once every listening instance was offered it.
 */
function partial(taken: number, matchesMax: number): AdapterError {
  return new AdapterError(
    'unavailable',
    `the event was taken by ${taken} workflow instances; more listen for it than one delivery appends to (${matchesMax}): publish it again for the rest`,
  );
}

/** Whether one of the instance's listens holds the event already. */
const heldAlready = (instance: Instance, event: CloudEvent): boolean =>
  Object.keys(instance.record.listens).some((at) => listenTook(instance.record, at, event));

/** Whether the instance has a listen still open (one that might take an event: its filters are not asked here). */
const mayTake = (instance: Instance): boolean => Object.keys(instance.record.listens).some((at) => !listenClosed(instance.record, at));

/** An event not taken because the verdict on the events before it is still unknown: `unavailable`, sent again later. */
class VerdictPending extends AdapterError {
  constructor(description: string) {
    super('unavailable', description);
  }
}

/**
 * Offers the event to each open listen of the instance: `appended` when this delivery's append
 * took it, `held` when a listen held it already (a publisher's retry: nothing appended), `no`
 * when none holds it.
 */
async function deliverTo(deps: IntakeDeps, instance: Instance, event: CloudEvent): Promise<'appended' | 'held' | 'no'> {
  let holds: 'appended' | 'held' | 'no' = 'no';
  for (const at of Object.keys(instance.record.listens)) {
    if (listenTook(instance.record, at, event)) {
      if (holds === 'no') holds = 'held';
      continue;
    }
    const listen = instance.record.listens[at];
    // An event another listen took before this one started is a retry here, not news (listen-match.ts).
    if (!listen || listenClosed(instance.record, at) || takenBeforeListening(instance.record, at, event)) continue;
    // The listening instance's principal: its filters are its jq work, whoever published the event.
    const candidates = await matchFilters(deps.evaluator, instance.record.started.principalId, listen, event);
    if (candidates.length > 0 && (await take(deps, instance, at, event, candidates))) holds = 'appended';
  }
  return holds;
}

/**
 * Takes the event for the listen at `at` through the kernel's guarded append; true when its log
 * holds it. While the listen's `until` expression has no recorded verdict on the last event it
 * took, the decision takes nothing: the intake waits for the verdict (until `deps.waitUntilMs`) and
 * decides again — a verdict that ended the listen leaves the event untaken, answered as for any
 * closed listen. A verdict still missing then (its interpreter busy, or on a worker
 * that died) is `unavailable`: nothing was taken, and the publisher sends the event again.
 */
async function take(deps: IntakeDeps, instance: Instance, at: string, event: CloudEvent, candidates: readonly Candidate[]): Promise<boolean> {
  for (;;) {
    // An event past the instance's log budget is not taken: publishers cannot grow a log past it, nor use up the room kept for its end.
    let full = false;
    await deps.kernel.enqueue(instance, () =>
      deps.kernel.commit(instance, (record, late) => {
        if (late) return undefined;
        const transition = decideListenEvent(record, at, event, candidates);
        if (transition === undefined || deps.hasRoom(instance, transition)) return transition;
        full = true;
        return undefined;
      }),
    );
    if (listenTook(instance.record, at, event)) return true;
    if (full) return false;
    if (!untilPending(instance.record, at)) return false;
    const decided = await deps.kernel.wait(instance, (record) => !untilPending(record, at), deps.waitUntilMs - deps.clock.nowMs());
    if (!decided)
      throw new VerdictPending(
        `workflow instance ${instance.id}: the listen ${at} has not yet recorded whether its until expression held after the event it took last; nothing was taken, publish the event again`,
      );
  }
}
