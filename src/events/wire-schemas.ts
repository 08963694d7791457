/** Schemas for what peers send: a message from the network is validated before any field is trusted. */
import { compileChecker } from '../contract/validation.js';
import { parseStrictBytes } from '../contract/ijson.js';
import { limits } from '../contract/limits.js';
import { tokenSchema } from '../contract/ids.js';
import { contractRefSchema } from '../contract/schemas.js';
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { JsonValue } from '../contract/json.js';

const token = tokenSchema;
const positive = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } as const;
const opId = { type: 'string', pattern: '^op[0-9a-f]{64}$' } as const;

export const resultMessageSchema = {
  type: 'object',
  required: ['kind', 'operationId', 'branchId', 'peerId', 'attempt', 'fence', 'result'],
  additionalProperties: false,
  properties: { kind: { const: 'result' }, operationId: opId, branchId: token, peerId: token, attempt: positive, fence: positive, result: {} },
} as const;

/**
 * The levels a result message adds above its result: `result` is a member of the message's root
 * object. A result is a value like any other, at most limits.jsonDepthMax deep (a peer refuses to
 * send a deeper one), so the coordinator parses result messages to that plus these; held to
 * limits.jsonDepthMax alone, it dropped unread, as malformed, every result at the limit.
 */
export const resultMessageLevels = 1;

export const cancelResultSchema = {
  type: 'object',
  required: ['kind', 'operationId', 'branchId', 'peerId', 'attempt', 'fence', 'outcome'],
  additionalProperties: false,
  properties: {
    kind: { const: 'cancel-result' },
    operationId: opId,
    branchId: token,
    peerId: token,
    attempt: positive,
    fence: positive,
    outcome: { enum: ['stopped', 'already-completed', 'unknown'] },
  },
} as const;

export const claimMessageSchema = {
  type: 'object',
  required: ['kind', 'action', 'operationId', 'branchId', 'peerId', 'attempt', 'fence'],
  additionalProperties: false,
  properties: {
    kind: { const: 'claim' },
    action: { enum: ['renew', 'release'] },
    operationId: opId,
    branchId: token,
    peerId: token,
    attempt: positive,
    fence: positive,
  },
} as const;

export const requestMessageSchema = {
  type: 'object',
  required: [
    'kind',
    'operationId',
    'contract',
    'interaction',
    'branchId',
    'peerId',
    'attempt',
    'fence',
    'deadlineMs',
    'leaseUntilMs',
    'renewIntervalMs',
    'publicationId',
    'input',
  ],
  additionalProperties: false,
  properties: {
    kind: { const: 'request' },
    operationId: opId,
    contract: contractRefSchema,
    interaction: token,
    branchId: token,
    peerId: token,
    attempt: positive,
    fence: positive,
    deadlineMs: { type: 'integer' },
    leaseUntilMs: { type: 'integer' },
    renewIntervalMs: { type: 'integer', minimum: 1 },
    publicationId: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    input: {},
  },
} as const;

/**
 * Each message type is derived from its JSON Schema (below), the one definition of its
 * shape: a field added to a schema is a field of the type, and the checker that validates a
 * message from the network narrows it to exactly this type. Application data (`input`, `result`)
 * is any JSON value in the schema and JsonValue here.
 */
type Derived<S extends JSONSchema, Data extends string = never> = Omit<FromSchema<S>, Data> & { [K in Data]: JsonValue };

/**
 * The coordinator's request to a peer. `deadlineMs` is absolute UTC ms, materialized from the
 * recorded admission instant; the owner renews its claim every `renewIntervalMs` while it works.
 */
export type RequestMessage = Derived<typeof requestMessageSchema, 'input'>;

export type ResultMessage = Derived<typeof resultMessageSchema, 'result'>;

export type CancelRequest = Derived<typeof cancelRequestSchema>;
export type CancelReason = CancelRequest['reason'];

export type CancelResult = Derived<typeof cancelResultSchema>;
export type CancelOutcome = CancelResult['outcome'];

/** A peer's lease renewal or release. */
export type ClaimMessage = Derived<typeof claimMessageSchema>;

export const checkResultMessage = compileChecker<ResultMessage>(resultMessageSchema, 'result message');
export const checkCancelResult = compileChecker<CancelResult>(cancelResultSchema, 'cancel result');
export const checkClaimMessage = compileChecker<ClaimMessage>(claimMessageSchema, 'claim message');
export const checkRequestMessage = compileChecker<RequestMessage>(requestMessageSchema, 'request message');

/**
 * The levels a request message adds above its input: `input` is a member of the message's root
 * object. Admission takes an input limits.jsonDepthMax deep (runtime/admit.ts), so a reader of
 * requests (a peer, the coordinator reading back an exhausted one) parses to that plus these;
 * held to limits.jsonDepthMax alone, it refused as malformed every request whose input admission
 * took at the limit, and the branch waited for its deadline.
 */
export const requestMessageLevels = 1;

/** A request message from its bytes: strictly parsed to the depth its deepest admitted input reaches, then schema-checked. */
export function parseRequestMessage(data: Uint8Array, what: string): RequestMessage {
  return checkRequestMessage(parseStrictBytes(data, what, limits.jsonDepthMax + requestMessageLevels));
}

export const cancelRequestSchema = {
  type: 'object',
  required: ['kind', 'operationId', 'branchId', 'peerId', 'attempt', 'fence', 'reason'],
  additionalProperties: false,
  properties: {
    kind: { const: 'cancel' },
    operationId: opId,
    branchId: token,
    peerId: token,
    attempt: positive,
    fence: positive,
    reason: { enum: ['decision-closed', 'revoked', 'deadline'] },
  },
} as const;

export const checkCancelRequest = compileChecker<CancelRequest>(cancelRequestSchema, 'cancel request');
