/**
 * JSON Schemas (draft 2020-12 subset understood by ajv) for everything that crosses a boundary:
 * the contract bundle, InvocationRequest, InvocationResult, AdapterError. Event schemas live in
 * src/events/schemas.ts. The types in ./types.ts and
 * projections/views.ts are checked against these at compile time (test/unit/schema-types.test.ts).
 */
import { adapterErrorKinds } from './errors.js';
import { limits } from './limits.js';
import { invocationKeySchema, namespaceSchema, tokenSchema } from './ids.js';
import { completionSchema } from './completion.js';
import type { Interaction, InteractionDefaulted } from './types.js';

const token = tokenSchema;
const ms = (max: number, min = 0) => ({ type: 'integer', minimum: min, maximum: max }) as const;
const jsonPointer = { type: 'string', pattern: '^(/([^~/]|~[01])*)*$', maxLength: 1024 } as const;
const schemaObject = { type: 'object' } as const;

const predicate = {
  type: 'object',
  required: ['pointer', 'equals'],
  additionalProperties: false,
  properties: { pointer: jsonPointer, equals: {} },
} as const;

export { completionSchema };

const audience = {
  oneOf: [
    { type: 'object', required: ['group'], additionalProperties: false, properties: { group: token } },
    {
      type: 'object',
      required: ['peers'],
      additionalProperties: false,
      properties: { peers: { type: 'array', items: token, minItems: 1, maxItems: limits.branchesMax, uniqueItems: true } },
    },
  ],
} as const;

const aggregate = {
  oneOf: [
    { type: 'object', required: ['kind'], additionalProperties: false, properties: { kind: { const: 'collect' } } },
    { type: 'object', required: ['kind'], additionalProperties: false, properties: { kind: { const: 'first-success' } } },
    { type: 'object', required: ['kind', 'pointer'], additionalProperties: false, properties: { kind: { const: 'tally' }, pointer: jsonPointer } },
  ],
} as const;

/** Defaults applied to an interaction when a field is omitted (part of profile 0.2 as convoke implements it). */
export const interactionDefaults = {
  delivery: 'independent',
  votes: 'distinct-branches',
  onTimeout: 'failed',
  attempts: 1,
  retryBackoffMs: 1000,
  leaseMs: 30_000,
  renewIntervalMs: 10_000,
  siblings: 'detach',
  cancelTimeoutMs: 5000,
  settlementGraceMs: 10_000,
  waitFor: 'decision',
  sender: 'include',
  offline: 'deliver',
  effects: 'unfenced',
  cancellation: 'none',
} as const satisfies Pick<Interaction, InteractionDefaulted>;

export const interactionSchema = {
  type: 'object',
  required: ['input', 'result', 'audience', 'completion', 'success', 'timeoutMs'],
  additionalProperties: false,
  properties: {
    description: { type: 'string', maxLength: 4096 },
    input: schemaObject,
    result: schemaObject,
    output: schemaObject,
    audience,
    delivery: { enum: ['independent', 'one-eligible', 'explicit', 'gather'] },
    branches: {
      type: 'array',
      minItems: 1,
      maxItems: limits.branchesMax,
      items: { type: 'object', required: ['branchId', 'peerId'], additionalProperties: false, properties: { branchId: token, peerId: token } },
    },
    completion: completionSchema,
    votes: { enum: ['distinct-branches', 'distinct-peers'] },
    success: predicate,
    retryable: predicate,
    timeoutMs: ms(limits.timeoutMsMax, limits.timeoutMsMin),
    onTimeout: { enum: ['partial', 'failed'] },
    attempts: { type: 'integer', minimum: 1, maximum: limits.attemptsMax },
    retryBackoffMs: ms(limits.retryBackoffMsMax),
    leaseMs: ms(limits.leaseMsMax, 1),
    renewIntervalMs: ms(limits.leaseMsMax, 1),
    siblings: { enum: ['detach', 'cancel'] },
    cancelTimeoutMs: ms(limits.cancelTimeoutMsMax, 1),
    settlementGraceMs: ms(limits.settlementGraceMsMax, 0),
    waitFor: { enum: ['decision', 'settled'] },
    sender: { enum: ['include', 'exclude'] },
    offline: { enum: ['deliver', 'exclude'] },
    effects: { enum: ['unfenced', 'fenced'] },
    cancellation: { enum: ['none', 'caller'] },
    aggregate,
  },
} as const;

/**
 * A pipeline or workflow name: a Serverless Workflow document name (an RFC 1123 label, lowercase
 * here), since it becomes the lowered document's `document.name`.
 */
export const workflowNameSchema = { type: 'string', pattern: '^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$' } as const;

/** A named input transform of a pipeline: a jq expression with its own input and output schemas. */
const transformSchema = {
  type: 'object',
  required: ['input', 'output', 'expression'],
  additionalProperties: false,
  properties: {
    description: { type: 'string', maxLength: 4096 },
    input: schemaObject,
    output: schemaObject,
    expression: { type: 'string', minLength: 1, maxLength: limits.expressionCharsMax },
  },
} as const;

/** A finite operation stage: a message sent on a literal subject, with an explicit payload binding. */
const stageOperationSchema = {
  type: 'object',
  required: ['action', 'subject', 'type'],
  additionalProperties: false,
  properties: {
    action: { enum: ['send', 'subscribe'] },
    subject: { type: 'string', minLength: 1, maxLength: 256 },
    type: { type: 'string', minLength: 1, maxLength: 256 },
    payload: jsonPointer,
  },
} as const;

/** One stage: exactly one of `interaction` and `operation` (checked by src/workflow/dsl). */
const stageSchema = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: {
    name: token,
    description: { type: 'string', maxLength: 4096 },
    interaction: token,
    operation: stageOperationSchema,
    stageInput: jsonPointer,
    transform: token,
    waitFor: { enum: ['decision', 'settled'] },
  },
} as const;

/** The spec's sequential pipeline syntax; src/workflow/dsl checks and lowers it. */
export const pipelineSchema = {
  type: 'object',
  required: ['input', 'stages'],
  additionalProperties: false,
  properties: {
    description: { type: 'string', maxLength: 4096 },
    input: schemaObject,
    transforms: { type: 'object', maxProperties: limits.pipelineTransformsMax, propertyNames: token, additionalProperties: transformSchema },
    stages: { type: 'array', minItems: 1, maxItems: limits.pipelineStagesMax, items: stageSchema },
  },
} as const;

/** A Serverless Workflow document: its shape is the DSL's schema, checked by src/workflow/dsl. */
export const workflowDocumentSchema = {
  type: 'object',
  required: ['document', 'do'],
  properties: { document: { type: 'object' }, do: { type: 'array' } },
} as const;

export const bundleSchema = {
  $id: 'https://convoke.dev/schemas/bundle.json',
  type: 'object',
  required: ['profile', 'contract', 'subjectNamespace', 'interactions'],
  additionalProperties: false,
  properties: {
    profile: { const: '0.2' },
    contract: {
      type: 'object',
      required: ['id', 'version'],
      additionalProperties: false,
      properties: {
        id: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]{0,127}$' },
        version: { type: 'string', pattern: '^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$' },
      },
    },
    subjectNamespace: namespaceSchema,
    interactions: {
      type: 'object',
      minProperties: 1,
      maxProperties: limits.interactionsMax,
      propertyNames: token,
      additionalProperties: interactionSchema,
    },
    pipelines: { type: 'object', maxProperties: limits.pipelinesMax, propertyNames: workflowNameSchema, additionalProperties: pipelineSchema },
    workflows: { type: 'object', maxProperties: limits.workflowsMax, propertyNames: workflowNameSchema, additionalProperties: workflowDocumentSchema },
    // convoke's own setting beside the DSL documents: which pipelines and workflows a caller may cancel (default none).
    workflowCancellation: {
      type: 'object',
      maxProperties: limits.pipelinesMax + limits.workflowsMax,
      propertyNames: workflowNameSchema,
      additionalProperties: { enum: ['none', 'caller'] },
    },
  },
} as const;

export const contractRefSchema = {
  type: 'object',
  required: ['id', 'version', 'digest'],
  additionalProperties: false,
  properties: {
    id: { type: 'string', maxLength: 128 },
    version: { type: 'string', maxLength: 64 },
    digest: { type: 'string', pattern: '^sha256:[0-9a-f]{64}$' },
  },
} as const;

export const invocationRequestSchema = {
  $id: 'https://convoke.dev/schemas/invocation-request.json',
  type: 'object',
  required: ['contract', 'interaction', 'invocationKey', 'input'],
  additionalProperties: false,
  properties: {
    contract: contractRefSchema,
    interaction: token,
    invocationKey: invocationKeySchema,
    input: {},
    waitFor: { enum: ['decision', 'settled'] },
    waitMs: { type: 'integer', minimum: 0, maximum: limits.waitMsMax },
    // Named so that they are refused as `denied` (a prohibited act), not as unknown fields.
    manifest: { description: 'prohibited: callers may not supply the expected result set' },
    expected: { description: 'prohibited: callers may not supply the expected result set' },
    branches: { description: 'prohibited: callers may not supply the expected result set' },
  },
} as const;

/**
 * The levels an invocation request body adds above its input: `input` is a member of the body's root
 * object. Admission takes an input limits.jsonDepthMax deep, so the HTTP facade and the invoke
 * command read the body to that plus these (ijson.ts parseStrictBody); admission still holds the
 * input, and refuses every other member as deep, to limits.jsonDepthMax.
 */
export const invocationRequestLevels = 1;

export const adapterErrorSchema = {
  $id: 'https://convoke.dev/schemas/adapter-error.json',
  type: 'object',
  required: ['kind'],
  additionalProperties: false,
  properties: {
    kind: { enum: [...adapterErrorKinds] },
    description: { type: 'string', maxLength: 65_536 },
  },
} as const;

const nullable = <const S extends object>(schema: S) => ({ anyOf: [{ type: 'null' }, schema] }) as const;

/**
 * A decision's outcome and the reason it closed (events/types.ts DecisionOutcome, DecisionReason):
 * the decision-closed event records them and the InvocationResult's decision answers them.
 */
export const decisionOutcomeSchema = { enum: ['success', 'partial', 'failed', 'indeterminate'] } as const;
export const decisionReasonSchema = {
  enum: ['threshold', 'impossible', 'complete', 'timeout', 'cancelled', 'durability-lost', 'log-budget-exhausted'],
} as const;

export const invocationResultSchema = {
  $id: 'https://convoke.dev/schemas/invocation-result.json',
  type: 'object',
  required: [
    'operationId',
    'contract',
    'interaction',
    'invocationKey',
    'phase',
    'admittedAtMs',
    'deadlineMs',
    'decision',
    'settlement',
    'branches',
    'output',
    'outputError',
  ],
  additionalProperties: false,
  properties: {
    operationId: { type: 'string', pattern: '^op[0-9a-f]{64}$' },
    contract: contractRefSchema,
    interaction: token,
    invocationKey: { type: 'string' },
    phase: { enum: ['admitted', 'active', 'closed', 'settled'] },
    admittedAtMs: { type: 'integer' },
    deadlineMs: { type: 'integer' },
    decision: nullable({
      type: 'object',
      required: ['outcome', 'reason', 'closedAtMs', 'successVotes', 'failedUnits', 'units', 'threshold'],
      additionalProperties: false,
      properties: {
        outcome: decisionOutcomeSchema,
        reason: decisionReasonSchema,
        closedAtMs: { type: 'integer' },
        successVotes: { type: 'integer', minimum: 0 },
        failedUnits: { type: 'integer', minimum: 0 },
        units: { type: 'integer', minimum: 1 },
        threshold: { type: 'integer', minimum: 1 },
      },
    }),
    settlement: {
      type: 'object',
      required: ['status', 'siblings'],
      additionalProperties: false,
      properties: {
        status: { enum: ['pending', 'complete', 'indeterminate'] },
        siblings: {
          type: 'array',
          items: {
            type: 'object',
            required: ['branchId', 'disposition'],
            additionalProperties: false,
            properties: { branchId: token, disposition: { type: 'string' }, outcome: { type: 'string' } },
          },
        },
      },
    },
    branches: {
      type: 'array',
      items: {
        type: 'object',
        required: ['branchId', 'peerId', 'status', 'attempt', 'fence'],
        additionalProperties: false,
        properties: {
          branchId: token,
          peerId: token,
          status: { enum: ['pending', 'success', 'failure', 'revoked', 'cancelled', 'indeterminate'] },
          attempt: { type: 'integer', minimum: 1 },
          fence: { type: 'integer', minimum: 1 },
          result: {},
        },
      },
    },
    output: {},
    outputError: nullable(adapterErrorSchema),
  },
} as const;
