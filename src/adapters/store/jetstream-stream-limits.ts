/**
 * What the JetStream store checks of a stream it finds already made (by an operator, a tool or an
 * earlier build): that the stream's own limits never remove a message the store did not remove
 * itself: logs, tombstone key records and open-set marks are history or unconsumed work, never
 * evicted (a full stream refuses writes instead: discard-new).
 */
import { DiscardPolicy, JetStreamApiError, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import { limits } from '../../contract/limits.js';

/**
 * Why a stream's own limits would remove messages no one asked to remove, or undefined when they
 * never do: an age limit, a per-subject count (which evicts the oldest even under discard-new),
 * a byte cap (nats-server 2.9 evicts at it even under discard-new: its limit check counts the
 * payload, its store the whole record, so each write that lands at the cap drops the oldest
 * message), a count cap under discard-old, or rollup headers (one publish purges a subject). A
 * stream made by an operator or an earlier tool may carry any of them; the store then refuses
 * to open instead of reading evicted logs back shorter and recreating aged-out keys.
 * `perSubjectKept`: the per-subject count the stream is meant to have (1 for a last-per-subject stream).
 */
export function evictingLimits(c: Partial<StreamConfig>, perSubjectKept?: number): string | undefined {
  const problems: string[] = [];
  if ((c.max_age ?? 0) > 0) problems.push(`max_age ${Math.round((c.max_age ?? 0) / 1e6)} ms`);
  const perSubject = c.max_msgs_per_subject ?? -1;
  if (perSubject > 0 && perSubject !== perSubjectKept) problems.push(`max_msgs_per_subject ${perSubject}`);
  if ((c.max_bytes ?? -1) > 0) problems.push(`max_bytes ${c.max_bytes ?? -1}, which nats-server 2.9 enforces by evicting even under discard-new`);
  if (c.discard !== DiscardPolicy.New && (c.max_msgs ?? -1) > 0) problems.push(`discard-old with max_msgs ${c.max_msgs ?? -1}`);
  if (c.allow_rollup_hdrs === true) problems.push('rollup headers allowed');
  return problems.length === 0 ? undefined : `has limits that evict (${problems.join(', ')})`;
}

/**
 * One operation's closing appends at the largest fan-out (its decision, timeouts and settlement,
 * and each branch's cancel dispatch, reply and late result: runtime/log-budget.ts) and its
 * tombstone marker: the fewest messages a message cap keeps for the operations already open.
 */
export const messageReserveMin = limits.closingTransitionsBase + limits.closingTransitionsPerBranch * limits.branchesMax + 1;

/**
 * The messages an operations stream capped at `maxMsgs` (max_msgs under discard-new) keeps for
 * the appends of operations already open: a tenth of the cap (limits.jetstreamMessageReserveDivisor),
 * at least messageReserveMin. Creates are refused once the stream holds `maxMsgs` less this, so
 * the decisions, settlements, cancellation results and tombstone markers of the open operations
 * still go in; only a stream filled to the cap itself refuses them.
 */
export function messageReserve(maxMsgs: number): number {
  return Math.max(messageReserveMin, Math.ceil(maxMsgs / limits.jetstreamMessageReserveDivisor));
}

/**
 * Why an operations stream's message cap leaves no room for new operations beside its reserve,
 * or undefined (no cap, or room): a cap under twice messageReserveMin.
 */
export function messageCapProblem(c: Partial<StreamConfig>): string | undefined {
  const maxMsgs = c.max_msgs ?? -1;
  if (maxMsgs <= 0 || maxMsgs >= 2 * messageReserveMin) return undefined;
  return `has max_msgs ${maxMsgs}, under ${2 * messageReserveMin}: it leaves no room beside the ${messageReserveMin} messages kept for the appends of open operations`;
}

/** The server's answers to a stream add another client's add of the same stream beat: the name taken with another config, or its subjects taken. */
const streamNameInUse = 10058;
const subjectsOverlap = 10065;

/**
 * Whether a stream add that failed with `error` lost a race with another client adding stream
 * `name` at the same moment (several processes opening one store at once), so that the stream is
 * there now: the name in use, or — as nats-server answers one of two concurrent adds of the same
 * stream — its subjects overlapping a stream that is, on reading it, the one named. Any other
 * overlap (another stream holding those subjects) is no race: the add's error stands.
 */
export async function addedMeanwhile(jsm: JetStreamManager, name: string, error: unknown): Promise<boolean> {
  if (!(error instanceof JetStreamApiError)) return false;
  if (error.code === streamNameInUse) return true;
  if (error.code !== subjectsOverlap) return false;
  return jsm.streams.info(name).then(
    () => true,
    () => false,
  );
}
