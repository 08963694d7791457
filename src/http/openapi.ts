/**
 * GET /openapi.json: an OpenAPI 3.1 document generated from the same schema objects the routes
 * validate with (src/http/schemas.ts, built from src/contract/schemas.ts). OpenAPI 3.1 schemas are
 * JSON Schema 2020-12, so the contract schemas go in unchanged.
 */
import { limits } from '../contract/limits.js';
import { errorSchema, errorStatuses, healthSchema, inspectionSchema, listPageSchema, requestBodySchema, resultSchema, waitMsParameter } from './schemas.js';
import { listLimitDefault } from '../runtime/operation-list.js';
import { workflowInstanceOpenApi } from './workflow-instances.js';
import { workflowEventPaths } from './workflow-events.js';

const errorMeaning: Record<(typeof errorStatuses)[number], string> = {
  400: "invalid-input: malformed JSON (duplicate keys, unsafe integers, lone surrogates), schema errors, a waitFor weaker than the contract's",
  401: 'no or unknown credential (body kind "denied", description "authentication required")',
  403: 'denied by policy',
  404: "no such operation visible to this principal (unknown and other principals' operations look the same)",
  409: 'conflict (the invocationKey is bound to a different interaction or input) or protocol-conflict',
  410: 'expired (the invocation key is tombstoned or admission ran out of its budget)',
  413: 'the body exceeds the configured limit',
  415: 'the body is not application/json (UTF-8), or the request names a content-encoding other than identity',
  422: 'unsupported (the contract digest is not deployed here, a capability is missing, or, for cancel, the interaction does not declare caller cancellation)',
  500: 'internal error; the outcome is unknown: retry with the same invocationKey or GET the operation',
  503: "unavailable (store or policy unavailable, the server shutting down, or a new invocation past the principal's admission rate, with Retry-After in seconds); retry idempotently",
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: object) => ({ 'application/json': { schema } });

/** A 503 may say when to come back (a principal's admission rate: whole seconds). */
const retryAfter = {
  'Retry-After': { description: 'seconds until the next admission of this principal can be made', schema: { type: 'integer', minimum: 1 } },
};

function errorResponses(statuses: readonly (typeof errorStatuses)[number][]) {
  return Object.fromEntries(
    statuses.map((s) => [String(s), { description: errorMeaning[s], ...(s === 503 ? { headers: retryAfter } : {}), content: json(ref('AdapterError')) }]),
  );
}

/** The boundary the status speaks of: the request's waitFor, or the interaction's when it names none. */
const boundaryHeader = { 'convoke-wait-for': { description: 'the boundary this status speaks of', schema: { enum: ['decision', 'settled'] } } };

const progress = {
  '200': {
    description: "the requested boundary (the stronger of waitFor and the contract's) is reached; check decision.outcome for business success",
    headers: boundaryHeader,
    content: json(ref('InvocationResult')),
  },
  '202': {
    description: 'still pending at the end of the wait; poll GET /contract-invocations/{operationId}',
    headers: { Location: { schema: { type: 'string' } }, ...boundaryHeader },
    content: json(ref('InvocationResult')),
  },
};

/** GET /contract-invocations: the operations index. */
const listInvocations = {
  operationId: 'listInvocations',
  description:
    "A page of the operations index, newest admission first: the caller's own operations, or every principal's for an operator principal (config `operators`). " +
    'Paging is by the opaque nextCursor; rows that exist when paging begins are each returned once (no duplicates, no gaps) while others are admitted. ' +
    'Each row carries the reasons it is stuck now (docs/operations.md, "Stuck work"). Every parameter is checked; any problem is 400 invalid-input naming each.',
  parameters: [
    { name: 'phase', in: 'query', required: false, schema: { enum: ['admitted', 'active', 'closed', 'settled'] } },
    {
      name: 'outcome',
      in: 'query',
      required: false,
      description: '`open` lists undecided operations',
      schema: { enum: ['open', 'success', 'partial', 'failed', 'indeterminate'] },
    },
    { name: 'settlement', in: 'query', required: false, schema: { enum: ['pending', 'complete', 'indeterminate'] } },
    { name: 'interaction', in: 'query', required: false, schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' } },
    { name: 'since', in: 'query', required: false, description: 'admitted at or after: ms since the epoch or RFC 3339', schema: { type: 'string' } },
    { name: 'until', in: 'query', required: false, description: 'admitted before: ms since the epoch or RFC 3339', schema: { type: 'string' } },
    { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: limits.listLimitMax, default: listLimitDefault } },
    { name: 'cursor', in: 'query', required: false, description: 'nextCursor of the previous page, unchanged', schema: { type: 'string' } },
    {
      name: 'stuck',
      in: 'query',
      required: false,
      description: '`true`: stuck for any reason; or one reason',
      schema: { enum: ['true', 'false', 'open-past-deadline', 'lease-expired', 'outbox-pending', 'settlement-indeterminate'] },
    },
  ],
  responses: { '200': { description: 'one page', content: json(ref('OperationPage')) }, ...errorResponses([400, 401, 500, 503]) },
};

const cancelInvocation = {
  operationId: 'cancelInvocation',
  description:
    'The invoker cancels its open operation, where the interaction declares caller cancellation and policy allows the cancel action: the decision closes as failed (reason cancelled) and unfinished branches are sent cancel requests; settlement follows their replies. ' +
    'An operation already decided keeps its decision (200 with it). There is no blanket cancellation: an interaction without caller cancellation answers 422 unsupported.',
  parameters: [{ name: 'operationId', in: 'path', required: true, schema: { type: 'string', pattern: '^op[0-9a-f]{64}$' } }],
  responses: {
    '200': {
      description: 'the decision is closed (cancelled now, or decided before); settlement may still be in progress',
      content: json(ref('InvocationResult')),
    },
    ...errorResponses([400, 401, 403, 404, 409, 410, 422, 500, 503]),
  },
};

/** Health, metrics and this document: no authentication. */
const servicePaths = {
  '/healthz': {
    get: { operationId: 'health', security: [], responses: { '200': { description: 'serving', content: json(ref('Health')) }, ...errorResponses([503]) } },
  },
  '/metrics': {
    get: {
      operationId: 'metrics',
      security: [],
      responses: { '200': { description: 'Prometheus text exposition', content: { 'text/plain': { schema: { type: 'string' } } } }, ...errorResponses([503]) },
    },
  },
  '/openapi.json': {
    get: {
      operationId: 'openapi',
      security: [],
      responses: { '200': { description: 'this document', content: json({ type: 'object' }) }, ...errorResponses([503]) },
    },
  },
};

/**
 * Which optional routes the app registers (createHttpApp's options): the workflow instance routes
 * with a workflow instance service, POST /workflow-events with an event intake
 * (`workflows.events.http`). The document names only the routes the app serves, so a client
 * generated from it never calls one that answers "no route".
 */
export interface ServedRoutes {
  workflows: boolean;
  workflowEvents: boolean;
}

export function openApiDocument(served: ServedRoutes): object {
  return withoutSchemaIds(withRequestRefusals(document(served))) as object;
}

type Operations = Record<string, { responses: Record<string, object> }>;

/**
 * What a route answers before its own handler runs, added to each operation that does not
 * document it itself. Every route, whatever it reads: two authorization headers, two host headers
 * or an HTTP/1.1 request without one are 400, and a
 * content-encoding other than identity is 415 (app.ts's onRequest hook, body.ts's
 * checkRequestHeaders). Every POST reads a body sent with it — a cancel, which needs none, too — so
 * one larger than the route's bound is 413 and one not JSON is 415.
 */
function withRequestRefusals(built: object): object {
  const { paths, ...rest } = built as { paths: Record<string, Operations> };
  const headerRefusal = {
    description: 'invalid-input: the request carries two authorization headers, or two host headers (none, in HTTP/1.1)',
    content: json(ref('AdapterError')),
  };
  const withRefusals = Object.fromEntries(
    Object.entries(paths).map(([path, operations]) => [
      path,
      Object.fromEntries(
        Object.entries(operations).map(([method, operation]) => {
          const added = { '400': headerRefusal, ...errorResponses(method === 'post' ? [413, 415] : [415]) };
          return [method, { ...operation, responses: { ...added, ...operation.responses } }];
        }),
      ),
    ]),
  );
  return { ...rest, paths: withRefusals };
}

/**
 * The document with no schema `$id` inside it. Components are named by their place in the
 * document; the contract schemas' own `$id`s would identify a subschema embedded in two components
 * (the AdapterError of InvocationResult.outputError, held again by OperationInspection.result) by
 * one URI twice, which JSON Schema 2020-12 forbids (§8.2.1): a validator loading the components
 * refuses them.
 */
function withoutSchemaIds(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSchemaIds);
  if (typeof value !== 'object' || value === null) return value;
  // Only the keyword: a string `$id` (a property named `$id` would hold a schema object).
  return Object.fromEntries(Object.entries(value).flatMap(([key, v]) => (key === '$id' && typeof v === 'string' ? [] : [[key, withoutSchemaIds(v)]])));
}

function document(served: ServedRoutes): object {
  const workflows = served.workflows ? workflowInstanceOpenApi(errorResponses) : { schemas: {}, paths: {} };
  return {
    openapi: '3.1.0',
    info: {
      title: 'convoke contract invocations',
      version: '0.2',
      description:
        'HTTP 200/202 describe invocation progress, not business success. Closing the connection stops waiting; it never cancels the operation. ' +
        "A caller may strengthen waitFor (decision → settled) but never weaken the contract's boundary (400).",
    },
    components: {
      schemas: {
        InvocationRequest: requestBodySchema,
        InvocationResult: resultSchema,
        AdapterError: errorSchema,
        Health: healthSchema,
        OperationPage: listPageSchema,
        OperationInspection: inspectionSchema,
        ...workflows.schemas,
      },
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'a deployment token (stored as a SHA-256 hash) or a JWT whose sub is the principal' },
      },
    },
    security: [{ bearer: [] }],
    paths: {
      '/contract-invocations': {
        post: {
          operationId: 'invokeContract',
          requestBody: { required: true, content: json(ref('InvocationRequest')) },
          responses: { ...progress, ...errorResponses([400, 401, 403, 409, 410, 413, 415, 422, 500, 503]) },
        },
        get: listInvocations,
      },
      '/contract-invocations/{operationId}': {
        get: {
          operationId: 'getInvocation',
          parameters: [
            { name: 'operationId', in: 'path', required: true, schema: { type: 'string', pattern: '^op[0-9a-f]{64}$' } },
            { name: 'waitFor', in: 'query', required: false, schema: { enum: ['decision', 'settled'] } },
            waitMsParameter,
          ],
          responses: { ...progress, ...errorResponses([400, 401, 404, 500, 503]) },
        },
      },
      '/contract-invocations/{operationId}/cancel': {
        post: cancelInvocation,
      },
      ...consolePaths(),
      ...workflows.paths,
      ...servicePaths,
      ...(served.workflowEvents ? workflowEventPaths : {}),
    },
  };
}

const operationIdParameter = { name: 'operationId', in: 'path', required: true, schema: { type: 'string', pattern: '^op[0-9a-f]{64}$' } };
const eventStream = (description: string) => ({ description, content: { 'text/event-stream': { schema: { type: 'string' } } } });

/** What the web console (/console/) reads: one operation's log, and live updates as server-sent events. */
function consolePaths(): Record<string, object> {
  return {
    '/contract-invocations/{operationId}/transitions': {
      get: {
        operationId: 'getInvocationTransitions',
        description:
          "The operation's result, its branches (status, attempt, fence, lease, disposition) and its event-stream timeline: every stored transition with its revision, commit time, time guard, applied or void, and its events. " +
          'For the original principal or an operator principal (config `operators`); anyone else gets 404, as for GET.',
        parameters: [operationIdParameter],
        responses: {
          '200': { description: 'the operation as stored', content: json(ref('OperationInspection')) },
          ...errorResponses([400, 401, 404, 500, 503]),
        },
      },
    },
    '/contract-invocations/{operationId}/events': {
      get: {
        operationId: 'followInvocation',
        description:
          "Server-sent events: `snapshot` (an OperationInspection), then `update` after each append to the operation's stream by any coordinator, holding only what changed since the event before it: " +
          '`seq` (1 for the first update after a snapshot, one more for each after it: a gap means an update was missed; open the stream again), `revision` (of the last transition it covers), ' +
          '`result` with only its fields that changed (absent when none did; its `branches` only the changed ones), `branches` (the changed inspected branches), `transitionsApplied` and `transitionsVoid` when they changed, and `timeline` (the transitions stored since, in order). ' +
          'To apply one: a field present replaces the one held; each entry of `branches` (and of `result.branches`) replaces the branch with the same branchId; timeline entries are appended. ' +
          'A client that has not read what was sent gets nothing more until it has; the update then covers everything it missed. A `snapshot` may come again (the store lost writes): it replaces everything held, and updates after it are numbered from 1. ' +
          'A comment line keeps an idle stream alive (http.events.heartbeatMs). Visibility as for /transitions. A principal holds at most http.events.streamsPerPrincipal streams, all principals together at most http.events.streamsMax: beyond either, 503 unavailable.',
        parameters: [operationIdParameter],
        responses: { '200': eventStream('the event stream; it ends on shutdown, or after an `error` event'), ...errorResponses([400, 401, 404, 500, 503]) },
      },
    },
    '/contract-invocations/events': {
      get: {
        operationId: 'followInvocationList',
        description:
          'Server-sent events: a `page` event (an OperationPage, as GET /contract-invocations answers the same parameters) first, then again whenever an append changes that page. ' +
          'Appends to operations the caller cannot see cause no event. Heartbeat and per-principal bound as for /{operationId}/events.',
        parameters: listInvocations.parameters,
        responses: { '200': eventStream('the event stream'), ...errorResponses([400, 401, 500, 503]) },
      },
    },
  };
}
