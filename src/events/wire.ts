/**
 * What travels over the transport between the coordinator and peers. Branch, attempt and fence
 * travel in the payload (and headers); the peer is proven by the subject, never by the body. Each
 * message type is derived from its JSON Schema in wire-schemas.ts.
 */
import type { CancelRequest, CancelResult, ClaimMessage, RequestMessage, ResultMessage } from './wire-schemas.js';

export type { CancelOutcome, CancelReason, CancelRequest, CancelResult, ClaimMessage, RequestMessage, ResultMessage } from './wire-schemas.js';

export type WireMessage = RequestMessage | ResultMessage | CancelRequest | CancelResult | ClaimMessage;

/** Header names carried alongside the payload (diagnostics and broker-side filtering). */
export const headers = {
  operation: 'Convoke-Operation',
  branch: 'Convoke-Branch',
  attempt: 'Convoke-Attempt',
  fence: 'Convoke-Fence',
  msgId: 'Nats-Msg-Id',
} as const;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

export function encodeWire(message: WireMessage): Uint8Array {
  return encoder.encode(JSON.stringify(message));
}

/** Plain decoding; callers that face untrusted senders must validate with the wire schemas. */
export function decodeText(data: Uint8Array): string {
  return decoder.decode(data);
}
