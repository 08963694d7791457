/**
 * Conversions at the nats.js boundary: header maps and time units. Convoke measures time in
 * milliseconds everywhere; JetStream configs want nanoseconds, converted here and nowhere else.
 */
import { MsgHdrsImpl, type MsgHdrs } from '@nats-io/transport-node';
import { AdapterError, assert } from '../../contract/errors.js';

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

/**
 * Header maps are built and read through MsgHdrsImpl's public `headers` map: nats.js's `set` and
 * `get` allocate and scan the key list on every call, which showed on every publish and delivery.
 * Names and values are checked here, as `set` would: a name is printable ASCII without ':' (and,
 * beyond nats.js, not empty), a value holds no CR or LF. Either unchecked would be written into the
 * message's header block as it is: a name `Nats-Expected-Stream: OTHER` becomes that header.
 */
export function toNatsHeaders(record: Record<string, string> | undefined): MsgHdrs | undefined {
  if (record === undefined) return undefined;
  let h: MsgHdrsImpl | undefined;
  for (const [key, value] of Object.entries(record)) {
    h ??= new MsgHdrsImpl();
    setHeader(h, key, value);
  }
  return h;
}

/** A header name nats.js takes (canonicalMIMEHeaderKey): '!' to '~' without ':'; one or more. */
const headerName = /^[!-9;-~]+$/;

/** Sets one header (replacing any value under that exact key). */
export function setHeader(h: MsgHdrs, key: string, value: string): void {
  if (!headerName.test(key))
    throw new AdapterError('invalid-input', `header name ${JSON.stringify(key)} is not a header name: one or more printable ASCII characters other than ':'`);
  if (!(h instanceof MsgHdrsImpl)) return h.set(key, value);
  if (value.includes('\r') || value.includes('\n')) throw new AdapterError('invalid-input', `header ${key} contains CR or LF`);
  h.headers.set(key, [value.trim()]);
}

/** First value of each header; convoke never sends repeated headers. */
export function fromNatsHeaders(h: MsgHdrs | undefined): Record<string, string> {
  const record: Record<string, string> = {};
  if (h === undefined) return record;
  if (h instanceof MsgHdrsImpl) {
    for (const [key, values] of h.headers) {
      const first = values[0];
      if (first !== undefined) record[key] = first;
    }
    return record;
  }
  for (const key of h.keys()) record[key] = h.get(key);
  return record;
}
