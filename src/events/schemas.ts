/**
 * JSON Schemas of every stored event and of the Transition envelope. The runtime validates a
 * decided transition before appending it (an invalid one is a bug: an assertion) and every
 * transition read back from a store (an invalid one is corruption the store cannot vouch for).
 */
import type { JSONSchema } from 'json-schema-to-ts';
import { describeErrors, lazyValidator } from '../contract/validation.js';
import { tokenSchema } from '../contract/ids.js';
import { completionSchema, decisionOutcomeSchema, decisionReasonSchema } from '../contract/schemas.js';

const token = tokenSchema;
const positive = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } as const;
const ms = { type: 'integer', minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER } as const;
const nullableMs = { anyOf: [{ type: 'null' }, ms] } as const;
const text = { type: 'string', maxLength: 4096 } as const;
const receipt = { enum: ['stored', 'already-stored', 'rejected', 'unknown', 'exhausted', 'sent'] } as const;
const digest = { type: 'string', pattern: '^sha256:[0-9a-f]{64}$' } as const;
const hex64 = { type: 'string', pattern: '^[0-9a-f]{64}$' } as const;
/** Why a message was rejected (result-rejected's reason). */
export const rejectionReasons = [
  'malformed',
  'unknown-operation',
  'unknown-branch',
  'wrong-peer',
  'unverified-publisher',
  'unknown-attempt',
  'stale-fence',
  'invalid-schema',
  'expired-lease',
  'late',
  'closed',
  'denied',
  'branch-terminal',
  'not-cancelling',
  'cancel-timeout',
  // The result is over the deployment's result byte budget: nothing of it is stored.
  'oversized',
  // The store refused the transition that would have taken the result (its detail is the store's
  // description), for a reason no budget of the coordinator's foresaw: nothing of it is stored.
  'store-refused',
] as const;

const attemptFence = { branchId: token, attempt: positive, fence: positive } as const;

/**
 * One event's schema: `type` and `v`, then its own properties, all required unless `required`
 * names fewer. Generic over its literal arguments, so the schema keeps its exact type and the
 * compiler can check the event's TypeScript type against it (test/unit/schema-types.test.ts).
 */
function event<
  const T extends string,
  const P extends Record<string, JSONSchema>,
  const R extends readonly (keyof P & string)[] = readonly (keyof P & string)[],
>(type: T, properties: P, required?: R) {
  return {
    type: 'object',
    required: ['type', 'v', ...(required ?? (Object.keys(properties) as (keyof P & string)[]))] as readonly ('type' | 'v' | R[number])[],
    additionalProperties: false,
    properties: { type: { const: type }, v: { const: 1 }, ...properties } as { type: { const: T }; v: { const: 1 } } & P,
  } as const;
}

const manifest = {
  type: 'object',
  required: [
    'delivery',
    'completion',
    'votes',
    'units',
    'threshold',
    'onTimeout',
    'siblings',
    'waitFor',
    'attemptsMax',
    'leaseMs',
    'renewIntervalMs',
    'retryBackoffMs',
    'cancelTimeoutMs',
    'settlementGraceMs',
    'branches',
    'peers',
    'eligible',
  ],
  additionalProperties: false,
  properties: {
    delivery: { enum: ['independent', 'one-eligible', 'explicit', 'gather'] },
    completion: completionSchema,
    votes: { enum: ['distinct-branches', 'distinct-peers'] },
    units: positive,
    threshold: positive,
    onTimeout: { enum: ['partial', 'failed'] },
    siblings: { enum: ['detach', 'cancel'] },
    waitFor: { enum: ['decision', 'settled'] },
    attemptsMax: { type: 'integer', minimum: 1, maximum: 16 },
    leaseMs: positive,
    renewIntervalMs: positive,
    retryBackoffMs: { type: 'integer', minimum: 0 },
    cancelTimeoutMs: positive,
    settlementGraceMs: { type: 'integer', minimum: 0 },
    branches: {
      type: 'array',
      minItems: 1,
      items: { type: 'object', required: ['branchId', 'peerId'], additionalProperties: false, properties: { branchId: token, peerId: token } },
    },
    peers: { type: 'array', items: token },
    eligible: { type: 'array', items: token },
  },
} as const;

export const eventSchemas = [
  event(
    'operation-admitted',
    {
      operationId: { type: 'string', pattern: '^op[0-9a-f]{64}$' },
      principalId: { type: 'string', minLength: 1, maxLength: 256 },
      senderPeerId: { anyOf: [{ type: 'null' }, token] },
      contract: {
        type: 'object',
        required: ['id', 'version', 'digest'],
        additionalProperties: false,
        properties: { id: { type: 'string' }, version: { type: 'string' }, digest },
      },
      interaction: token,
      subjectNamespace: { type: 'string', maxLength: 600 },
      invocationKey: { type: 'string', minLength: 1 },
      inputDigest: digest,
      input: {},
      timeoutMs: positive,
      manifest,
      revisions: {
        type: 'object',
        required: ['directory', 'policy'],
        additionalProperties: false,
        properties: { directory: text, policy: text, manifest: text },
      },
      authorizations: {
        type: 'array',
        items: {
          type: 'object',
          required: ['peerId', 'revision', 'expiresAtMs'],
          additionalProperties: false,
          properties: { peerId: token, revision: text, expiresAtMs: ms },
        },
      },
      outbox: {
        type: 'array',
        items: {
          type: 'object',
          required: ['branchId', 'peerId', 'attempt', 'fence', 'publicationId'],
          additionalProperties: false,
          properties: { branchId: token, peerId: token, attempt: { const: 1 }, fence: { const: 1 }, publicationId: hex64 },
        },
      },
      presence: {
        type: 'object',
        required: ['revision', 'online', 'offline'],
        additionalProperties: false,
        properties: { revision: text, online: { type: 'array', items: token }, offline: { type: 'array', items: token } },
      },
      streamsCreatedUntilMs: ms,
    },
    [
      'operationId',
      'principalId',
      'senderPeerId',
      'contract',
      'interaction',
      'subjectNamespace',
      'invocationKey',
      'inputDigest',
      'input',
      'timeoutMs',
      'manifest',
      'revisions',
      'authorizations',
      'outbox',
    ],
  ),
  event('dispatch-recorded', { ...attemptFence, receipt, detail: text }, ['branchId', 'attempt', 'fence', 'receipt']),
  event('result-accepted', {
    ...attemptFence,
    peerId: token,
    status: { enum: ['success', 'failure'] },
    retryable: { type: 'boolean' },
    retryAtMs: nullableMs,
    result: {},
    subject: text,
  }),
  event('result-rejected', {
    reason: { enum: rejectionReasons },
    subject: text,
    branchId: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 256 }] },
    peerId: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 256 }] },
    attempt: { anyOf: [{ type: 'null' }, { type: 'integer' }] },
    fence: { anyOf: [{ type: 'null' }, { type: 'integer' }] },
    detail: text,
  }),
  event('protocol-conflict-recorded', { ...attemptFence, peerId: token, subject: text, resultDigest: digest, detail: text }),
  event('lease-renewed', { ...attemptFence, leaseUntilMs: ms }),
  event('claim-ended', { ...attemptFence, cause: { enum: ['expired', 'released', 'delivery-exhausted'] }, retryAtMs: nullableMs }),
  event('branch-reassigned', { ...attemptFence, peerId: token, publicationId: hex64 }),
  event('branch-failed', { ...attemptFence, reason: { const: 'no-eligible-peer' } }),
  event('branch-revoked', { ...attemptFence, policyRevision: text, reason: text }),
  event('cancel-dispatched', { ...attemptFence, receipt, detail: text, transient: { const: true } }, ['branchId', 'attempt', 'fence', 'receipt']),
  event('cancel-result-accepted', { ...attemptFence, outcome: { enum: ['stopped', 'already-completed', 'unknown'] } }),
  event('cancel-withdrawn', { ...attemptFence, reason: { const: 'request-never-sent' } }),
  event('cancel-timed-out', { branchIds: { type: 'array', minItems: 1, items: token } }),
  event('decision-closed', {
    outcome: decisionOutcomeSchema,
    reason: decisionReasonSchema,
    successVotes: { type: 'integer', minimum: 0 },
    failedUnits: { type: 'integer', minimum: 0 },
    siblings: {
      type: 'array',
      items: {
        type: 'object',
        required: ['branchId', 'disposition'],
        additionalProperties: false,
        properties: { branchId: token, disposition: { enum: ['detached', 'cancel-requested'] } },
      },
    },
  }),
  event('settlement-completed', { status: { enum: ['complete', 'indeterminate'] } }),
] as const;

export const transitionSchema = {
  $id: 'https://convoke.dev/schemas/transition.json',
  type: 'object',
  required: ['events', 'timeGuard', 'causation'],
  additionalProperties: false,
  properties: {
    // The discriminator dispatches on `type` instead of trying every event schema in turn.
    events: { type: 'array', minItems: 1, items: { type: 'object', required: ['type'], discriminator: { propertyName: 'type' }, oneOf: eventSchemas } },
    timeGuard: { type: 'object', required: ['notBeforeMs', 'notAfterMs'], additionalProperties: false, properties: { notBeforeMs: ms, notAfterMs: ms } },
    causation: {
      type: 'object',
      required: ['command'],
      additionalProperties: false,
      properties: { command: { type: 'string', maxLength: 64 }, messageId: { type: 'string', maxLength: 512 } },
    },
  },
} as const;

const transitionValidator = lazyValidator(transitionSchema);

/** Undefined when valid; otherwise every schema error. */
export function transitionProblem(transition: unknown): string | undefined {
  const validate = transitionValidator();
  return validate(transition) ? undefined : describeErrors(validate.errors);
}
