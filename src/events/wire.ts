/**
 * What travels over the transport between the coordinator and peers. Branch, attempt and fence
 * travel in the payload (and headers); the peer is proven by the subject, never by the body.
 */
import type { JsonValue } from '../contract/json.js';
import type { ContractRef } from '../contract/types.js';

export interface RequestMessage {
  kind: 'request';
  operationId: string;
  contract: ContractRef;
  interaction: string;
  branchId: string;
  peerId: string;
  attempt: number;
  fence: number;
  /** Absolute UTC ms, materialized from the recorded admission instant. */
  deadlineMs: number;
  leaseUntilMs: number;
  /** The owner renews its claim this often while it works. */
  renewIntervalMs: number;
  publicationId: string;
  input: JsonValue;
}

export interface ResultMessage {
  kind: 'result';
  operationId: string;
  branchId: string;
  peerId: string;
  attempt: number;
  fence: number;
  result: JsonValue;
}

export type CancelReason = 'decision-closed' | 'revoked' | 'deadline';

export interface CancelRequest {
  kind: 'cancel';
  operationId: string;
  branchId: string;
  peerId: string;
  attempt: number;
  fence: number;
  reason: CancelReason;
}

export type CancelOutcome = 'stopped' | 'already-completed' | 'unknown';

export interface CancelResult {
  kind: 'cancel-result';
  operationId: string;
  branchId: string;
  peerId: string;
  attempt: number;
  fence: number;
  outcome: CancelOutcome;
}

/** A peer's lease renewal / release (issue: ownership). */
export interface ClaimMessage {
  kind: 'claim';
  action: 'renew' | 'release';
  operationId: string;
  branchId: string;
  peerId: string;
  attempt: number;
  fence: number;
}

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
