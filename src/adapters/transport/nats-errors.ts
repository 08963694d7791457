/**
 * What a nats.js failure means for convoke. nats.js wraps causes (a RequestError whose cause is a
 * PermissionViolationError or NoRespondersError; JetStreamNotEnabled wrapping either), so the
 * whole cause chain is read, never the message text.
 */
import { JetStreamApiError } from '@nats-io/jetstream';
// The public entry point does not export InvalidNameError; the package exports its internals for this.
import { jserrors } from '@nats-io/jetstream/internal';
import { errors, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { AdapterError } from '../../contract/errors.js';

export type NatsFailure =
  /** The server refused the operation for this user: proof it did not happen. */
  | { kind: 'permission'; detail: string }
  /** No subscriber (for JetStream: no stream) had interest: proof nothing received it. */
  | { kind: 'no-responders'; detail: string }
  /** A JetStream API error response: the server answered that it did not do it. */
  | { kind: 'api'; code: number; detail: string }
  /** Refused before anything was sent because the connection is closed or draining: another connection may send it. */
  | { kind: 'not-sent'; detail: string }
  /**
   * Refused by the client as malformed before anything was sent (a subject with whitespace, a header
   * value with CR or LF or a malformed header name (nats-codec.ts), an argument out of range, a
   * JetStream name with a dot), and on every later attempt too.
   */
  | { kind: 'invalid'; detail: string }
  /** Larger than the server's max_payload: refused before anything was sent, and on every later attempt too. */
  | { kind: 'too-large'; detail: string }
  /** Anything else, timeouts and disconnects included: nothing is proven either way. */
  | { kind: 'uncertain'; detail: string };

/**
 * JetStream's answer to a message past its stream's max_msg_size ("message size exceeds maximum
 * allowed"): the stream stores no message this large, now or on any later attempt.
 */
export const streamMessageTooLarge = 10054;

/** The error and its causes, outermost first (bounded: cause chains can be cyclic in theory). */
export function causeChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    chain.push(current);
    current = current instanceof Error ? current.cause : undefined;
  }
  return chain;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Classifies a failure. Closed/draining connection errors prove nothing was sent only when they
 * were thrown synchronously by the call itself (`thrownBeforeSend`); the same error rejecting an
 * in-flight request may come after the server already received it.
 */
export function classifyNatsError(error: unknown, thrownBeforeSend = false): NatsFailure {
  const chain = causeChain(error);
  const detail = describe(error);
  for (const e of chain) {
    if (e instanceof errors.PermissionViolationError) return { kind: 'permission', detail: e.message };
  }
  for (const e of chain) {
    if (e instanceof errors.NoRespondersError) return { kind: 'no-responders', detail };
    if (e instanceof JetStreamApiError) return { kind: 'api', code: e.code, detail: `${e.code} ${e.message}` };
  }
  const outer = chain[0];
  if (chain.some((e) => e instanceof PayloadTooLarge)) return { kind: 'too-large', detail };
  // Subject, argument, header and name validation happens in the client before anything is written.
  if (chain.some(refusedAsMalformed)) return { kind: 'invalid', detail };
  if (outer instanceof AdapterError && outer.kind === 'invalid-input') return { kind: 'invalid', detail };
  const closing = outer instanceof errors.ClosedConnectionError || outer instanceof errors.DrainingConnectionError;
  if (closing && thrownBeforeSend) return { kind: 'not-sent', detail };
  return { kind: 'uncertain', detail };
}

/**
 * The client's own validation failures, each as permanent as the call that met it. nats.js has no
 * other permanent client-side refusal: ClosedConnectionError and DrainingConnectionError pass with
 * the connection, InvalidOperationError (a closed subscription, an iterator misused) is a state of
 * this process, and a header the server does not support is not refused by nats.js v3 at all.
 */
function refusedAsMalformed(error: unknown): boolean {
  return error instanceof errors.InvalidSubjectError || error instanceof errors.InvalidArgumentError || error instanceof jserrors.InvalidNameError;
}

/** For calls that must succeed (API calls, requests): the AdapterError kind callers branch on. */
export function toAdapterError(error: unknown, doing: string): AdapterError {
  if (error instanceof AdapterError) return error;
  const failure = classifyNatsError(error);
  const description = `${doing}: ${failure.detail}`;
  switch (failure.kind) {
    case 'permission':
      return new AdapterError('denied', description, { cause: error });
    case 'too-large':
      return new AdapterError('invalid-input', description, { cause: error });
    case 'invalid':
      return new AdapterError('invalid-input', `${doing}: the NATS client refuses it before sending: ${failure.detail}`, { cause: error });
    case 'no-responders':
    case 'not-sent':
    case 'uncertain':
    case 'api':
      return new AdapterError('unavailable', description, { cause: error });
    default: {
      const unreachable: never = failure;
      return unreachable;
    }
  }
}

/**
 * A message the NATS server never takes: larger than the max_payload it announced (payload and
 * headers together). Permanent for this message, so `invalid-input` — never `unavailable`, which
 * would have a caller send it again for ever. A message not sent because the connection is closed
 * is no such refusal.
 */
export class PayloadTooLarge extends AdapterError {
  constructor(
    readonly bytes: number,
    readonly maxPayload: number,
    options?: { cause?: unknown },
  ) {
    super('invalid-input', `the message is ${bytes} bytes (payload and headers); the NATS server takes at most ${maxPayload} (max_payload)`, options);
  }
}

/** The bytes a message counts against the server's max_payload: its payload and its encoded headers. */
export function messageBytes(data: Uint8Array, headers?: MsgHdrs): number {
  return data.length + (headers === undefined ? 0 : (headers as unknown as { encode(): Uint8Array }).encode().length);
}

/** The refusal for a message of `bytes` past the connection's announced max_payload; undefined when it fits, or before the server said its limit. */
export function pastMaxPayload(nc: NatsConnection, bytes: number, cause?: unknown): PayloadTooLarge | undefined {
  const maxPayload = nc.info?.max_payload;
  if (maxPayload === undefined || bytes <= maxPayload) return undefined;
  return new PayloadTooLarge(bytes, maxPayload, cause === undefined ? undefined : { cause });
}

/**
 * What a publish or request that failed on `bytes` of message threw, told apart: nats.js refuses a
 * message past max_payload with a generic InvalidArgumentError, so one is a PayloadTooLarge when the
 * message is past the limit the server announced (which may have shrunk since the caller checked).
 */
export function sendFailure(nc: NatsConnection, error: unknown, bytes: number): unknown {
  if (!causeChain(error).some((e) => e instanceof errors.InvalidArgumentError)) return error;
  return pastMaxPayload(nc, bytes, error) ?? error;
}
