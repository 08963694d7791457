/**
 * The HTTP facade's route schemas, built from the contract schemas in src/contract/schemas.ts so
 * the body validator, the documented responses and /openapi.json cannot drift apart.
 *
 * Fastify's default validator coerces types and strips unknown properties; a facade that admits
 * work must not quietly repair a request, so route schemas are compiled by this module's own ajv
 * (no coercion, no removal, every error) and responses are written with JSON.stringify (the
 * response schemas document; the tests check responses against them).
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { adapterErrorSchema, invocationRequestSchema, invocationResultSchema } from '../contract/schemas.js';

/** Separate from the contract's shared ajv: route schemas are compiled per app and must not collide on $id. */
export const httpAjv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true, coerceTypes: false, removeAdditional: false, useDefaults: false });

/** Drops the top-level $id: components are referenced by name in OpenAPI and compiled once per route here. */
export function withoutId<T extends object>(schema: T): Omit<T, '$id'> {
  const { $id: _ignored, ...rest } = schema as T & { $id?: string };
  return rest;
}

export const requestBodySchema = withoutId(invocationRequestSchema);
export const resultSchema = withoutId(invocationResultSchema);
export const errorSchema = withoutId(adapterErrorSchema);

/** The longest waitMs a GET takes (nine digits); a longer wait than the deployment's http.waitMsMax is clamped to it. */
export const waitMsAcceptedMax = 999_999_999;

/** The wait parameters of GET; query strings are text, so waitMs is a digit string (at most waitMsAcceptedMax) parsed by the handler. */
export const waitQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    waitFor: { enum: ['decision', 'settled'] },
    waitMs: { type: 'string', pattern: '^(0|[1-9][0-9]{0,8})$' },
  },
} as const;

/** waitMs as the OpenAPI document states it: what the routes take, and what they do with a wait past the deployment's bound. */
export const waitMsParameter = {
  name: 'waitMs',
  in: 'query',
  required: false,
  description: "how long to wait, in ms; a longer wait than the deployment's http.waitMsMax is clamped to it",
  schema: { type: 'integer', minimum: 0, maximum: waitMsAcceptedMax },
} as const;

export const operationParamsSchema = {
  type: 'object',
  required: ['operationId'],
  additionalProperties: false,
  // No pattern: a malformed id is simply not visible, so it gets the same 404 as an unknown one.
  properties: { operationId: { type: 'string', minLength: 1, maxLength: 100 } },
} as const;

/** Every error status the facade can answer, each with an AdapterError body. */
export const errorStatuses = [400, 401, 403, 404, 409, 410, 413, 415, 422, 500, 503] as const;

const errorResponses = Object.fromEntries(errorStatuses.map((status) => [status, errorSchema]));
export const errorResponseSchemas = errorResponses;

const integer = { type: 'integer' } as const;
const text = { type: 'string' } as const;
const nullableText = { type: ['string', 'null'] } as const;

/** A branch as the console shows it: the result's branch view with its lease and closure. */
const inspectedBranchSchema = {
  type: 'object',
  required: ['branchId', 'peerId', 'status', 'attempt', 'fence', 'leaseUntilMs', 'disposition', 'cancelOutcome', 'retryAtMs'],
  properties: {
    branchId: text,
    peerId: text,
    status: text,
    attempt: integer,
    fence: integer,
    result: {},
    leaseUntilMs: integer,
    disposition: nullableText,
    cancelOutcome: nullableText,
    retryAtMs: { type: ['integer', 'null'] },
  },
} as const;

/** One stored transition of the operation's stream, applied or void. */
const timelineEntrySchema = {
  type: 'object',
  required: ['index', 'revision', 'committedAtMs', 'timeGuard', 'applied', 'command', 'events'],
  additionalProperties: false,
  properties: {
    index: integer,
    revision: text,
    committedAtMs: integer,
    timeGuard: { type: 'object', required: ['notBeforeMs', 'notAfterMs'], properties: { notBeforeMs: integer, notAfterMs: integer } },
    applied: { type: 'boolean' },
    command: text,
    events: { type: 'array', items: { type: 'object', required: ['type'], properties: { type: text } } },
  },
} as const;

/** GET /contract-invocations/{operationId}/transitions (and each server-sent event's data). */
export const inspectionSchema = {
  type: 'object',
  required: ['principalId', 'result', 'branches', 'transitionsApplied', 'transitionsVoid', 'timeline'],
  additionalProperties: false,
  properties: {
    principalId: text,
    result: resultSchema,
    branches: { type: 'array', items: inspectedBranchSchema },
    transitionsApplied: integer,
    transitionsVoid: integer,
    timeline: { type: 'array', items: timelineEntrySchema },
  },
} as const;

export const postInvocationSchema = {
  body: requestBodySchema,
  response: { 200: resultSchema, 202: resultSchema, ...errorResponses },
};

export const getInvocationSchema = {
  params: operationParamsSchema,
  querystring: waitQuerySchema,
  response: { 200: resultSchema, 202: resultSchema, ...errorResponses },
};

/** No body: the operation in the path is the whole request. */
export const cancelInvocationSchema = {
  params: operationParamsSchema,
  response: { 200: resultSchema, ...errorResponses },
};

export const healthSchema = {
  type: 'object',
  required: ['status'],
  additionalProperties: false,
  properties: { status: { enum: ['ok'] } },
} as const;

/** GET /contract-invocations: every parameter is text, checked by parseListParameters (one description per problem). */
export const listQuerySchema = {
  type: 'object',
  additionalProperties: { type: 'string', maxLength: 256 },
} as const;

const nullable = (schema: object) => ({ oneOf: [schema, { type: 'null' }] });
const instant = { type: 'integer' } as const;

/** One row of the operations index, with the reasons it is stuck now. */
export const listedOperationSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'operationId',
    'principalId',
    'contractId',
    'contractVersion',
    'interaction',
    'phase',
    'outcome',
    'settlement',
    'admittedAtMs',
    'decidedAtMs',
    'settledAtMs',
    'deadlineMs',
    'nextDueMs',
    'openBranches',
    'lastRejection',
    'leaseExpiresAtMs',
    'outboxPendingSinceMs',
    'revision',
    'stuck',
  ],
  properties: {
    operationId: { type: 'string', pattern: '^op[0-9a-f]{64}$' },
    principalId: { type: 'string' },
    contractId: { type: 'string' },
    contractVersion: { type: 'string' },
    interaction: { type: 'string' },
    phase: { enum: ['admitted', 'active', 'closed', 'settled'] },
    outcome: { enum: ['success', 'partial', 'failed', 'indeterminate', null] },
    settlement: { enum: ['pending', 'complete', 'indeterminate'] },
    admittedAtMs: instant,
    decidedAtMs: nullable(instant),
    settledAtMs: nullable(instant),
    deadlineMs: instant,
    nextDueMs: nullable(instant),
    openBranches: { type: 'integer', minimum: 0 },
    lastRejection: nullable({
      type: 'object',
      additionalProperties: false,
      required: ['reason', 'atMs'],
      properties: { reason: { type: 'string' }, atMs: instant },
    }),
    leaseExpiresAtMs: nullable(instant),
    outboxPendingSinceMs: nullable(instant),
    revision: { type: 'string' },
    stuck: { type: 'array', items: { enum: ['open-past-deadline', 'lease-expired', 'outbox-pending', 'settlement-indeterminate'] } },
  },
} as const;

export const listPageSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['operations', 'nextCursor'],
  properties: { operations: { type: 'array', items: listedOperationSchema }, nextCursor: nullable({ type: 'string' }) },
} as const;

export const listInvocationsSchema = {
  querystring: listQuerySchema,
  response: { 200: listPageSchema, ...errorResponses },
};

/** Compiles a route schema with the facade's ajv (Fastify's validatorCompiler hook). */
export function compileRouteSchema(schema: object): ValidateFunction {
  return httpAjv.compile(schema);
}

/** Checkers the tests (and any client) can use to hold the facade to its documented shapes. */
export const checkResultShape = httpAjv.compile(resultSchema);
export const checkErrorShape = httpAjv.compile(errorSchema);
export const checkInspectionShape = httpAjv.compile(inspectionSchema);
export const checkListPageShape = httpAjv.compile(listPageSchema);
