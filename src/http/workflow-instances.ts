/**
 * POST /workflow-instances, GET /workflow-instances?<filters> (a page of the workflow instances
 * index: the caller's own, every principal's for an operator), GET /workflow-instances/{instanceId}?waitMs= and POST
 * /workflow-instances/{instanceId}/cancel: thin handlers over the workflow instance service
 * (runtime/workflow-service.ts), authenticated as /contract-invocations is. 200 when the instance
 * has ended within the wait (completed, faulted or cancelled: read `status`), 202 while it is still
 * running; the same WorkflowInstance either way. Cancel answers 200 with the instance as it ended
 * (cancelled now, or as it ended before). The same key and input find the same instance
 * (a different input is 409); another principal's instance is 404, exactly like an unknown one;
 * cancel is 422 unsupported unless the bundle declares caller cancellation for the workflow.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { WorkflowInstance, WorkflowInstanceService, WorkflowStartRequest } from '../runtime/workflow-service.js';
import { workflowInstanceSchema, workflowStartRequestLevels, workflowStartRequestSchema } from '../runtime/workflow-service.js';
import type { AuthenticateSession } from './auth.js';
import type { Clock } from '../contract/clock.js';
import { requireJsonContentType, type BodyLevelsConfig } from './body.js';
import { callerHooks } from './invocations.js';
import { errorResponseSchemas, listQuerySchema, waitMsParameter, waitQuerySchema } from './schemas.js';
import { parseWorkflowListParameters } from '../runtime/workflow-list.js';
import { listLimitDefault } from '../runtime/list-parameters.js';
import { limits } from '../contract/limits.js';
import type { WaitSlots } from '../runtime/wait-slots.js';

export interface WorkflowInstanceRoutesOptions {
  workflows: WorkflowInstanceService;
  /** The caller and its credential's end (a JWT's exp): a wait never outlasts the credential it was asked with. */
  session: AuthenticateSession;
  clock: Clock;
  waitMsMax: number;
  /** Hands out a signal that aborts when the client goes away or the server shuts down. */
  releaseFor(reply: FastifyReply): { signal: AbortSignal; dispose(): void };
  /** The waits each principal holds at once (shared with the invocation routes). */
  waits: WaitSlots;
}

/** An instance id in a route's path (the live routes take it too). */
export const instanceParamsSchema = {
  type: 'object',
  required: ['instanceId'],
  additionalProperties: false,
  // No pattern: a malformed id is simply not visible, so it gets the same 404 as an unknown one.
  properties: { instanceId: { type: 'string', minLength: 1, maxLength: 100 } },
} as const;

const progress = { 200: workflowInstanceSchema, 202: workflowInstanceSchema, ...errorResponseSchemas };
const startSchema = { body: workflowStartRequestSchema, response: progress };
const getSchema = {
  params: instanceParamsSchema,
  querystring: { ...waitQuerySchema, properties: { waitMs: waitQuerySchema.properties.waitMs } },
  response: progress,
};
const cancelSchema = { params: instanceParamsSchema, response: { 200: workflowInstanceSchema, ...errorResponseSchemas } };

interface InstanceParams {
  instanceId: string;
}

export function registerWorkflowInstanceRoutes(app: FastifyInstance, options: WorkflowInstanceRoutesOptions): void {
  const { workflows } = options;
  const { authenticate, callerOf, waitMsOf } = callerHooks(options);

  const waitAndAnswer = async (reply: FastifyReply, principalId: string, instance: WorkflowInstance, waitMs: number): Promise<WorkflowInstance> => {
    let current = instance;
    if (current.status === 'running' && waitMs > 0) {
      const release = options.releaseFor(reply);
      try {
        current = (await options.waits.bounded(principalId, waitMs, (granted) => workflows.wait(principalId, instance.instanceId, granted, release.signal)))
          .instance;
      } finally {
        release.dispose();
      }
    }
    return answer(reply, current);
  };

  const startConfig: BodyLevelsConfig = { bodyLevels: workflowStartRequestLevels };
  app.post(
    '/workflow-instances',
    { schema: startSchema, config: startConfig, onRequest: authenticate, preValidation: requireJsonContentType },
    async (request, reply) => {
      const principalId = callerOf(request).principalId;
      const { waitMs, ...body } = request.body as WorkflowStartRequest;
      const { instance } = await workflows.start(principalId, body);
      return waitAndAnswer(reply, principalId, instance, waitMsOf(request, waitMs));
    },
  );

  // The caller's own instances (every principal's for an operator), from the workflow instances index.
  app.get<{ Querystring: Record<string, string> }>(
    '/workflow-instances',
    { schema: { querystring: listQuerySchema }, onRequest: authenticate },
    async (request) => workflows.list(callerOf(request).principalId, parseWorkflowListParameters(request.query)),
  );

  app.get<{ Params: InstanceParams; Querystring: { waitMs?: string } }>(
    '/workflow-instances/:instanceId',
    { schema: getSchema, onRequest: authenticate },
    async (request, reply) => {
      const principalId = callerOf(request).principalId;
      const instance = await workflows.get(principalId, request.params.instanceId);
      const waitMs = request.query.waitMs === undefined ? 0 : Number(request.query.waitMs);
      return waitAndAnswer(reply, principalId, instance, waitMsOf(request, waitMs));
    },
  );

  // Ended when cancel returns (it asserts so): cancelled now, or as it ended before.
  app.post<{ Params: InstanceParams }>('/workflow-instances/:instanceId/cancel', { schema: cancelSchema, onRequest: authenticate }, async (request, reply) => {
    const instance = await workflows.cancel(callerOf(request).principalId, request.params.instanceId);
    reply.code(200);
    return instance;
  });
}

function answer(reply: FastifyReply, instance: WorkflowInstance): WorkflowInstance {
  const running = instance.status === 'running';
  if (running) reply.header('location', `/workflow-instances/${instance.instanceId}`);
  reply.code(running ? 202 : 200);
  return instance;
}

// ── OpenAPI ─────────────────────────────────────────────────────────────────

const json = (schema: object) => ({ 'application/json': { schema } });
const instanceRef = { $ref: '#/components/schemas/WorkflowInstance' };
const instanceIdParameter = { name: 'instanceId', in: 'path', required: true, schema: { type: 'string', pattern: '^wf[0-9a-f]{64}$' } };
const instanceProgress = {
  '200': { description: 'the instance has ended (completed, faulted or cancelled: read status)', content: json(instanceRef) },
  '202': {
    description: 'still running at the end of the wait; poll GET /workflow-instances/{instanceId}?waitMs=',
    headers: { Location: { schema: { type: 'string' } } },
    content: json(instanceRef),
  },
};

/** The query of a page of the workflow instances index (GET /workflow-instances, and its event stream). */
const listParameters = [
  { name: 'status', in: 'query', required: false, schema: { type: 'string', enum: ['running', 'completed', 'faulted', 'cancelled'] } },
  { name: 'workflow', in: 'query', required: false, schema: { type: 'string', maxLength: 128 } },
  { name: 'since', in: 'query', required: false, schema: { type: 'string' }, description: 'started at or after: ms since the epoch or RFC 3339' },
  { name: 'until', in: 'query', required: false, schema: { type: 'string' }, description: 'started before: ms since the epoch or RFC 3339' },
  { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: limits.listLimitMax, default: listLimitDefault } },
  { name: 'cursor', in: 'query', required: false, schema: { type: 'string' } },
  { name: 'stuck', in: 'query', required: false, schema: { type: 'string', enum: ['true', 'false', 'past-timeout', 'timer-overdue', 'lease-expired'] } },
];

/** The components and paths of the workflow instance routes, for openapi.ts. */
export function workflowInstanceOpenApi(errorResponses: (statuses: (400 | 401 | 403 | 404 | 409 | 410 | 413 | 415 | 422 | 500 | 503)[]) => object) {
  return {
    schemas: { WorkflowStartRequest: workflowStartRequestSchema, WorkflowInstance: workflowInstanceSchema },
    paths: {
      '/workflow-instances': {
        get: {
          operationId: 'listWorkflowInstances',
          description:
            "A page of the workflow instances index, newest start first: the caller's own instances (an operator principal sees every principal's). " +
            'Each row: status, workflow, bundle digest, principal, key, started/ended instants, current task, next timer, lease, last error, child operation ids, parent (for a child instance, the id and task execution of the instance that started it; else null), and its stuck reasons now. ' +
            'Pass nextCursor as cursor for the next page; the cursor is stable under concurrent starts.',
          parameters: listParameters,
          responses: {
            '200': { description: 'one page: { instances: [row & { stuck }], nextCursor }', content: json({ type: 'object' }) },
            ...errorResponses([400, 401, 500, 503]),
          },
        },
        post: {
          operationId: 'startWorkflow',
          description:
            "Starts an instance of a bundle's pipeline or workflow (the bundle named by id, version and digest), or finds the one the same principal, bundle, workflow and invocationKey name. " +
            "A new instance the deployment's policy does not allow the principal to start (action start-workflow) is 403 denied, naming the policy's revision, nothing recorded. " +
            "A different input under the same key is 409 conflict; a key whose instance was pruned (retention) is 410 expired, never started again. A new instance past the principal's bound of running instances (workflows.runningInstancesPerPrincipal), or past its start rate (workflows.startRate), is 503 unavailable, nothing recorded. " +
            'Waits up to waitMs (clamped to the deployment bound) for the instance to end.',
          requestBody: { required: true, content: json({ $ref: '#/components/schemas/WorkflowStartRequest' }) },
          responses: { ...instanceProgress, ...errorResponses([400, 401, 403, 409, 410, 413, 415, 422, 500, 503]) },
        },
      },
      '/workflow-instances/{instanceId}': {
        get: {
          operationId: 'getWorkflowInstance',
          description:
            'The instance, for the principal that started it only (anyone else gets 404, as for an unknown id); waits up to waitMs for it to end. ' +
            'A child instance (run: workflow) names its parent; a parent lists its childInstances with their status now.',
          parameters: [instanceIdParameter, waitMsParameter],
          responses: { ...instanceProgress, ...errorResponses([400, 401, 404, 500, 503]) },
        },
      },
      '/workflow-instances/{instanceId}/cancel': {
        post: {
          operationId: 'cancelWorkflowInstance',
          description:
            "The principal that started a running instance cancels it, where the bundle's workflowCancellation declares `caller` for the workflow (otherwise 422 unsupported). " +
            'Its open contract calls are cancelled where their interaction declares caller cancellation, and left to finish otherwise. An instance that has already ended, or that ends by itself while the cancel is under way, is answered as it is, its open contract calls left to finish.',
          parameters: [instanceIdParameter],
          responses: { '200': { description: 'the instance as it ended', content: json(instanceRef) }, ...errorResponses([400, 401, 404, 422, 500, 503]) },
        },
      },
      ...workflowConsolePaths(errorResponses),
    },
  };
}

const eventStream = (description: string) => ({ description, content: { 'text/event-stream': { schema: { type: 'string' } } } });

/** What the web console (/console/) reads of workflow instances: one instance's record and log, and live updates as server-sent events. */
function workflowConsolePaths(errorResponses: (statuses: (400 | 401 | 404 | 500 | 503)[]) => object): Record<string, object> {
  return {
    '/workflow-instances/{instanceId}/transitions': {
      get: {
        operationId: 'getWorkflowInstanceTransitions',
        description:
          'The instance (as GET answers it) with its principal, input, deadline, lease, every task execution in the order it started, its timers, every child operation bound, and its event-stream timeline: every stored transition with its index, revision, commit time, command, applied or void, and its events. ' +
          'For the principal that started it or an operator principal (config `operators`); anyone else gets 404, as for GET.',
        parameters: [instanceIdParameter],
        responses: { '200': { description: 'the instance as stored', content: json({ type: 'object' }) }, ...errorResponses([400, 401, 404, 500, 503]) },
      },
    },
    '/workflow-instances/{instanceId}/events': {
      get: {
        operationId: 'followWorkflowInstance',
        description:
          "Server-sent events: `snapshot` (the instance as /transitions answers it), then `update` after each append to the instance's stream by any worker, holding only what changed since the event before it: " +
          '`seq` (1 for the first update after a snapshot, one more for each after it: a gap means an update was missed; open the stream again), `revision` (of the last transition it covers), ' +
          '`instance` with only its fields that changed (absent when none did; its `stages` and `childInstances` only their new and changed entries), `lease` when it changed, ' +
          '`tasks`, `timers` and `children` (their new and changed entries), and `timeline` (the transitions stored since, in order); `principalId`, `input` and `deadlineMs` never change. ' +
          'To apply one: a field present replaces the one held; an entry of `tasks`, `children`, `instance.stages` or `instance.childInstances` replaces the one with the same `at`, of `timers` the one with the same `key`, else it is added at the end; timeline entries are appended; ' +
          'then `tasks` are ordered by `startedSeq`, and `children`, `instance.stages` and `instance.childInstances` by the `startedSeq` of the task with their `at` (stable; after every task when there is none). ' +
          'A client that has not read what was sent gets nothing more until it has; the update then covers everything it missed. A `snapshot` may come again (the store lost writes): it replaces everything held, and updates after it are numbered from 1. ' +
          'A comment line keeps an idle stream alive (http.events.heartbeatMs). Visibility as for /transitions. A principal holds at most http.events.streamsPerPrincipal streams, all principals together at most http.events.streamsMax: beyond either, 503 unavailable.',
        parameters: [instanceIdParameter],
        responses: { '200': eventStream('the event stream; it ends on shutdown, or after an `error` event'), ...errorResponses([400, 401, 404, 500, 503]) },
      },
    },
    '/workflow-instances/events': {
      get: {
        operationId: 'followWorkflowInstanceList',
        description:
          'Server-sent events: a `page` event (a page as GET /workflow-instances answers the same parameters) first, then again whenever an append changes that page. ' +
          'Heartbeat and per-principal bound as for /{instanceId}/events.',
        parameters: listParameters,
        responses: { '200': eventStream('the event stream'), ...errorResponses([400, 401, 500, 503]) },
      },
    },
  };
}
