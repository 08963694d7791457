/**
 * Delivering a received CloudEvent to the waiting listens of the instances this executor holds: for
 * each, the event is matched (jq, here, where it arrives) and taken through the kernel's guarded
 * append (listen-match.ts decides, on the record at its revision). The delivery answers the
 * instances whose log holds the event once this returns — the caller acknowledges only then; a
 * redelivery of an event already taken (same type, source, id and content: a publisher retrying
 * after a lost acknowledgment) is answered the same by the instances this executor holds (one that
 * ended since and was let go — a restart, the finished cache — is not looked for), and appends
 * nothing; another event under the identity (type, source and id) of one an instance took is taken
 * by none of those, and refused (`conflict`) when no instance takes it — never answered as taken
 * while the log holds the other. An event no waiting listen takes is stored nowhere. A listen with
 * an `until` expression takes an event only once the verdict on the events before it is recorded
 * and did not end it (`take`, below). An instance whose running log is at its budget (transitions
 * or bytes) takes no more: the room kept for its end stays its own. An event the store cannot
 * record — larger than it takes in one transition, or so large that the transition taking it would
 * be — is refused (ContentTooLarge: invalid-input, 413 over HTTP), naming the limit, before
 * anything is appended; one that only some instance's transition is too large for is answered taken
 * by the instances whose log holds it, and refused when none does. A filter whose expression the
 * evaluator did not answer (ExpressionNotAnswered) leaves the event undecided at that instance:
 * the others are offered it, and the delivery is answered `unavailable`, never as unmatched.
 */
import type { Clock } from '../../contract/clock.js';
import type { CloudEvent, CloudEventDelivery } from '../../contract/cloudevents.js';
import { AdapterError } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import type { Kernel, Stream } from '../../kernel/index.js';
import { ContentTooLarge } from '../../runtime/errors.js';
import type { EventSender, WorkflowTransition } from './events.js';
import { ExpressionNotAnswered, type ExpressionEvaluator } from './jq.js';
import {
  decideListenEvent,
  identityTakenOtherwise,
  listenClosed,
  listenTook,
  matchFilters,
  takenBeforeListening,
  untilPending,
  type Candidate,
} from './listen-match.js';
import type { WorkflowRecord } from './record.js';

type Instance = Stream<WorkflowRecord>;

export interface IntakeDeps {
  kernel: Kernel<WorkflowRecord, WorkflowTransition, Instance>;
  evaluator: ExpressionEvaluator;
  clock: Clock;
  /** Until when (the clock's ms) this delivery may wait for `until` verdicts, in all. */
  waitUntilMs: number;
  /**
   * Why the instance does not take the transition, or undefined when it does: `full`, its running
   * log at a budget (transitions or bytes); `oversized`, past what the store takes in one transition.
   */
  refusal(instance: Instance, transition: WorkflowTransition): 'full' | 'oversized' | undefined;
  /** The most bytes the store takes in one transition (WorkflowStore.transitionBytesMax). */
  transitionBytesMax: number;
  /** The most instances one delivery appends the event to (limits.cloudEventMatchesMax). */
  matchesMax: number;
}

/** The instant until which a delivery starting now may wait for `until` verdicts: `waitMs` (default and most: limits.listenUntilWaitMsMax) from now. */
export const untilWaitEnd = (clock: Clock, waitMs: number | undefined): number =>
  clock.nowMs() + Math.max(0, Math.min(waitMs ?? limits.listenUntilWaitMsMax, limits.listenUntilWaitMsMax));

export async function deliverEvent(deps: IntakeDeps, event: CloudEvent, principalId: string | null): Promise<CloudEventDelivery> {
  // A transition taking the event holds all of it: one larger than the store takes is refused before it is offered to any listen.
  const eventBytes = Buffer.byteLength(JSON.stringify(event));
  if (eventBytes > deps.transitionBytesMax) throw tooLarge(eventBytes, deps.transitionBytesMax);
  // Who could have sent it: an event publisher allowed its type (every principal's instances), or the principal itself.
  const sender: EventSender = principalId === null ? 'outside' : 'principal';
  const matched: string[] = [];
  let appended = 0;
  let pending: AdapterError | undefined;
  let oversized: ContentTooLarge | undefined;
  let conflicting = 0;
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
      const took = await deliverTo(deps, instance, event, sender);
      if (took === 'oversized') oversized ??= tooLarge(eventBytes, deps.transitionBytesMax);
      else if (took === 'conflict') conflicting++;
      else if (took !== 'no') matched.push(instance.id);
      if (took === 'appended') appended++;
    } catch (error) {
      // An instance whose until verdict is still unknown, or whose filter the evaluator did not answer, holds only itself: the
      // others are offered the event, then the delivery is answered unavailable, and the publisher's next send (taken once
      // where it was taken) reaches it.
      if (error instanceof ExpressionNotAnswered) pending ??= notAnswered(error);
      else if (error instanceof VerdictPending) pending ??= error;
      else throw error;
    }
  }
  if (pending !== undefined) throw pending;
  // Another event under its identity taken, and this one taken by none: refused, never answered as taken nor as unmatched.
  if (conflicting > 0 && matched.length === 0) throw identityConflict(event, conflicting);
  // Too large to record for the instances that would take it, and taken by none: refused, never answered as unmatched.
  if (oversized !== undefined && matched.length === 0) throw oversized;
  return { matched };
}

/** The refusal of an event the store cannot record where a listen would take it, naming the store's limit. */
function tooLarge(eventBytes: number, transitionBytesMax: number): ContentTooLarge {
  return new ContentTooLarge(
    `the event is ${eventBytes} bytes of JSON; a listen records it, with what it records beside it, in one transition of the store, which takes at most ${transitionBytesMax} bytes`,
  );
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

/**
 * The refusal of an event whose identity names another event the instances took. It names no
 * instance: an outside publisher's event reaches every principal's, and it is none of theirs.
 */
function identityConflict(event: CloudEvent, instances: number): AdapterError {
  return new AdapterError(
    'conflict',
    `another event with type ${event.type}, source ${event.source} and id ${event.id}, with other content, was taken by ${instances} workflow instance${instances === 1 ? '' : 's'}: ` +
      'this one was taken by none (one identity names one event); an event with other content needs an id of its own',
  );
}

/**
 * A delivery a listen's filter could not be matched for: the evaluator did not answer one of its
 * expressions (ExpressionNotAnswered: its worker stopped at the wall-time cap, which says nothing
 * of the event). Nothing was taken by that instance; `unavailable`, so that the event is sent again
 * — never `no-match`, which tells its publisher no listen wants it, and drops an emitted event.
 * It names no instance: an outside publisher's event reaches every principal's.
 */
function notAnswered(error: ExpressionNotAnswered): AdapterError {
  return new AdapterError(
    'unavailable',
    `a listening workflow instance could not match the event against its filters (${error.message}); nothing was taken there: publish the event again`,
    { cause: error },
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
 * when none holds it, `oversized` when none holds it and a listen that would have taken it could
 * not record it (past the store's transition size), `conflict` when the instance took another
 * event under its identity (before this delivery, or while it matched: nothing appended).
 */
async function deliverTo(
  deps: IntakeDeps,
  instance: Instance,
  event: CloudEvent,
  sender: EventSender,
): Promise<'appended' | 'held' | 'no' | 'oversized' | 'conflict'> {
  // A log from before one identity named one event may hold two under it: a send again of either is still answered as taken.
  if (identityTakenOtherwise(instance.record, event, sender) && !heldAlready(instance, event)) return 'conflict';
  let holds: 'appended' | 'held' | 'no' | 'oversized' = 'no';
  for (const at of Object.keys(instance.record.listens)) {
    if (listenTook(instance.record, at, event)) {
      if (holds === 'no') holds = 'held';
      continue;
    }
    const listen = instance.record.listens[at];
    // An event another listen took before this one started is a retry here, not news (listen-match.ts).
    if (!listen || listenClosed(instance.record, at) || takenBeforeListening(instance.record, at, event)) continue;
    // The listening instance's principal: its filters are its jq work, whoever published the event.
    const candidates = await matchFilters(deps.evaluator, instance.record.started.principalId, instance.record, at, event);
    if (candidates.length === 0) continue;
    const took = await take(deps, instance, at, event, sender, candidates);
    if (took === 'conflict') return holds === 'no' ? 'conflict' : holds;
    if (took === 'taken') holds = 'appended';
    else if (took === 'oversized' && (holds === 'no' || holds === 'oversized')) holds = 'oversized';
  }
  return holds;
}

/**
 * Takes the event for the listen at `at` through the kernel's guarded append: `taken` when its log
 * holds it, `oversized` when the transition taking it is past what the store takes (nothing is
 * appended), `conflict` when another event under its identity was taken first (nothing is
 * appended), `not` otherwise. While the listen's `until` expression has no recorded verdict on the
 * last event it took, the decision takes nothing: the intake waits for the verdict (until
 * `deps.waitUntilMs`) and decides again — a verdict that ended the listen leaves the event untaken, answered as for any
 * closed listen. A verdict still missing then (its interpreter busy, or on a worker
 * that died) is `unavailable`: nothing was taken, and the publisher sends the event again.
 */
async function take(
  deps: IntakeDeps,
  instance: Instance,
  at: string,
  event: CloudEvent,
  sender: EventSender,
  candidates: readonly Candidate[],
): Promise<'taken' | 'oversized' | 'conflict' | 'not'> {
  for (;;) {
    // An event past the instance's log budget is not taken: publishers cannot grow a log past it, nor use up the room kept for its end.
    let refused: 'full' | 'oversized' | undefined;
    await deps.kernel.enqueue(instance, () =>
      deps.kernel.commit(instance, (record, late) => {
        refused = undefined;
        if (late) return undefined;
        const transition = decideListenEvent(record, at, event, sender, candidates);
        if (transition === undefined) return undefined;
        refused = deps.refusal(instance, transition);
        return refused === undefined ? transition : undefined;
      }),
    );
    if (listenTook(instance.record, at, event)) return 'taken';
    if (identityTakenOtherwise(instance.record, event, sender)) return 'conflict';
    if (refused !== undefined) return refused === 'oversized' ? 'oversized' : 'not';
    if (!untilPending(instance.record, at)) return 'not';
    const decided = await deps.kernel.wait(instance, (record) => !untilPending(record, at), deps.waitUntilMs - deps.clock.nowMs());
    // Naming no instance nor listen: an outside publisher's event reaches every principal's, and it is none of theirs.
    if (!decided)
      throw new VerdictPending(
        'a listening workflow instance has not yet recorded whether its until expression held after the event it took last; nothing was taken there, publish the event again',
      );
  }
}
