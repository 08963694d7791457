/**
 * What the JetStream store checks of a stream it finds already made (by an operator, a tool or an
 * earlier build): that the stream's own limits never remove a message the store did not remove
 * itself: logs, tombstone key records and open-set marks are history or unconsumed work, never
 * evicted (a full stream refuses writes instead: discard-new).
 */
import { DiscardPolicy, type StreamConfig } from '@nats-io/jetstream';

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
