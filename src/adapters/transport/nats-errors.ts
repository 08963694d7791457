/**
 * What a nats.js failure means for convoke. nats.js wraps causes (a RequestError whose cause is a
 * PermissionViolationError or NoRespondersError; JetStreamNotEnabled wrapping either), so the
 * whole cause chain is read, never the message text.
 */
import { JetStreamApiError } from '@nats-io/jetstream';
import { errors } from '@nats-io/transport-node';
import { AdapterError } from '../../contract/errors.js';

export type NatsFailure =
  /** The server refused the operation for this user: proof it did not happen. */
  | { kind: 'permission'; detail: string }
  /** No subscriber (for JetStream: no stream) had interest: proof nothing received it. */
  | { kind: 'no-responders'; detail: string }
  /** A JetStream API error response: the server answered that it did not do it. */
  | { kind: 'api'; code: number; detail: string }
  /** Refused before anything was sent (closed/draining connection, bad subject, payload too big). */
  | { kind: 'not-sent'; detail: string }
  /** Anything else, timeouts and disconnects included: nothing is proven either way. */
  | { kind: 'uncertain'; detail: string };

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
  // Subject, argument and header validation happens in the client before anything is written.
  if (outer instanceof errors.InvalidSubjectError || outer instanceof errors.InvalidArgumentError) return { kind: 'not-sent', detail };
  if (outer instanceof AdapterError && outer.kind === 'invalid-input') return { kind: 'not-sent', detail };
  const closing = outer instanceof errors.ClosedConnectionError || outer instanceof errors.DrainingConnectionError;
  if (closing && thrownBeforeSend) return { kind: 'not-sent', detail };
  return { kind: 'uncertain', detail };
}

/** For calls that must succeed (API calls, requests): the AdapterError kind callers branch on. */
export function toAdapterError(error: unknown, doing: string): AdapterError {
  if (error instanceof AdapterError) return error;
  const failure = classifyNatsError(error);
  const description = `${doing}: ${failure.detail}`;
  switch (failure.kind) {
    case 'permission':
      return new AdapterError('denied', description, { cause: error });
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
