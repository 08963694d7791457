/**
 * Conversions at the nats.js boundary: header maps and time units. Convoke measures time in
 * milliseconds everywhere; JetStream configs want nanoseconds, converted here and nowhere else.
 */
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { assert } from '../../contract/errors.js';

const nanosPerMs = 1_000_000;

/** ms -> ns for a JetStream config field; refuses values that would lose precision. */
export function msToNanos(ms: number): number {
  const nanos = ms * nanosPerMs;
  assert(Number.isSafeInteger(ms) && ms >= 0 && Number.isSafeInteger(nanos), `duration ${ms} ms is not representable in nanoseconds`);
  return nanos;
}

export function nanosToMs(nanos: number): number {
  return Math.floor(nanos / nanosPerMs);
}

export function toNatsHeaders(record: Record<string, string> | undefined): MsgHdrs | undefined {
  if (record === undefined || Object.keys(record).length === 0) return undefined;
  const h = natsHeaders();
  for (const [key, value] of Object.entries(record)) h.set(key, value);
  return h;
}

/** First value of each header; convoke never sends repeated headers. */
export function fromNatsHeaders(h: MsgHdrs | undefined): Record<string, string> {
  const record: Record<string, string> = {};
  if (h === undefined) return record;
  for (const key of h.keys()) record[key] = h.get(key);
  return record;
}
