/**
 * POST /contract-invocations, GET /contract-invocations (the operations index), GET /contract-invocations/{operationId} and POST
 * /contract-invocations/{operationId}/cancel: thin handlers over the coordinator. Status 200 means
 * the effective boundary was reached within the wait, 202 that the operation is still pending;
 * both carry the InvocationResult. Neither is business success. Cancel is the coordinator's: only
 * the invoker, only where the interaction declares caller cancellation (422 unsupported
 * otherwise); 200 once the decision is closed (cancelled, or decided before the cancel), as the
 * NATS `cancel` command answers.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AssertionFailure } from '../contract/errors.js';
import type { InvocationRequest, WaitFor } from '../contract/types.js';
import type { BundleRegistry } from '../contract/bundle.js';
import type { Caller, InvocationService } from '../runtime/service.js';
import type { InvocationResult } from '../projections/views.js';
import type { AuthenticateSession } from './auth.js';
import type { Clock } from '../contract/clock.js';
import { requireJsonContentType, type BodyLevelsConfig } from './body.js';
import { invocationRequestLevels } from '../contract/schemas.js';
import { cancelInvocationSchema, getInvocationSchema, listInvocationsSchema, postInvocationSchema } from './schemas.js';
import { parseListParameters } from '../runtime/operation-list.js';
import { contractBoundary, effectiveBoundary, waitReleasable } from './wait.js';
import { waitForHeader } from '../runtime/boundary.js';
import type { WaitSlots } from '../runtime/wait-slots.js';

export interface InvocationRoutesOptions {
  coordinator: InvocationService;
  bundles: BundleRegistry;
  /** The caller and its credential's end (a JWT's exp): a wait never outlasts the credential it was asked with. */
  session: AuthenticateSession;
  clock: Clock;
  waitMsMax: number;
  /** Hands out a signal that aborts when the client goes away or the server shuts down. */
  releaseFor(reply: FastifyReply): { signal: AbortSignal; dispose(): void };
  /** The waits each principal holds at once (shared with the workflow instance routes). */
  waits: WaitSlots;
}

interface GetParams {
  operationId: string;
}

interface GetQuery {
  waitFor?: WaitFor;
  waitMs?: string;
}

/**
 * The onRequest hook that authenticates a request, the caller it found, and the wait a request may
 * hold: what it asked, at most waitMsMax, and never past its credential's end (a JWT's exp), so an
 * answer never carries what happened after the credential it was asked with expired.
 */
export function callerHooks(options: { session: AuthenticateSession; clock: Clock; waitMsMax: number }) {
  const sessions = new WeakMap<FastifyRequest, { caller: Caller; untilMs: number | null }>();
  // Authentication runs before the body is read: an anonymous client cannot make us parse anything.
  const authenticate = async (request: FastifyRequest) => {
    sessions.set(request, await options.session(request.headers.authorization));
  };
  const sessionOf = (request: FastifyRequest) => {
    const session = sessions.get(request);
    if (!session) throw new AssertionFailure('the onRequest hook authenticated this request');
    return session;
  };
  const callerOf = (request: FastifyRequest): Caller => sessionOf(request).caller;
  const waitMsOf = (request: FastifyRequest, asked: number | undefined): number => {
    const { untilMs } = sessionOf(request);
    const granted = Math.min(asked ?? 0, options.waitMsMax);
    return untilMs === null ? granted : Math.max(0, Math.min(granted, untilMs - options.clock.nowMs()));
  };
  return { authenticate, callerOf, waitMsOf };
}

export function registerInvocationRoutes(app: FastifyInstance, options: InvocationRoutesOptions): void {
  const { coordinator, bundles } = options;
  const hooks = callerHooks(options);
  const { authenticate, callerOf, waitMsOf } = hooks;

  const wait = async (reply: FastifyReply, principalId: string, operationId: string, boundary: WaitFor, waitMs: number) => {
    const release = options.releaseFor(reply);
    try {
      return await options.waits.bounded(principalId, waitMs, (granted) =>
        waitReleasable(coordinator, { principalId, operationId, boundary, waitMs: granted, release: release.signal }),
      );
    } finally {
      release.dispose();
    }
  };

  app.post(
    '/contract-invocations',
    {
      schema: postInvocationSchema,
      config: { bodyLevels: invocationRequestLevels } satisfies BodyLevelsConfig,
      onRequest: authenticate,
      preValidation: requireJsonContentType,
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const body = request.body as InvocationRequest;
      // The coordinator refuses a weakening waitFor before admission, so it creates no state.
      const { result, boundary } = await coordinator.invoke(caller, body);
      const waited = await wait(reply, caller.principalId, result.operationId, boundary, waitMsOf(request, body.waitMs));
      return answer(reply, waited, boundary);
    },
  );

  app.get<{ Params: GetParams; Querystring: GetQuery }>(
    '/contract-invocations/:operationId',
    { schema: getInvocationSchema, onRequest: authenticate },
    async (request, reply) => {
      const caller = callerOf(request);
      const { operationId } = request.params;
      // Visibility first: a weakening waitFor on someone else's operation is still just 404.
      const current = await coordinator.get(caller.principalId, operationId);
      const declared = contractBoundary(bundles, current.contract.digest, current.interaction);
      if (declared === undefined) throw new AssertionFailure('a visible operation names a deployed interaction');
      const boundary = effectiveBoundary(request.query.waitFor, declared);
      const waitMs = request.query.waitMs === undefined ? 0 : Number(request.query.waitMs);
      const waited = await wait(reply, caller.principalId, operationId, boundary, waitMsOf(request, waitMs));
      return answer(reply, waited, boundary);
    },
  );

  registerListAndCancel(app, coordinator, hooks);
}

/** Listing (from the operations index) and caller cancellation. */
function registerListAndCancel(app: FastifyInstance, coordinator: InvocationRoutesOptions['coordinator'], hooks: ReturnType<typeof callerHooks>): void {
  const { authenticate, callerOf } = hooks;
  // The caller's own operations (every principal's for an operator), from the operations index.
  app.get<{ Querystring: Record<string, string> }>('/contract-invocations', { schema: listInvocationsSchema, onRequest: authenticate }, async (request) =>
    coordinator.list(callerOf(request).principalId, parseListParameters(request.query)),
  );

  app.post<{ Params: GetParams }>(
    '/contract-invocations/:operationId/cancel',
    { schema: cancelInvocationSchema, onRequest: authenticate },
    async (request, reply) => {
      // The decision is closed when cancel returns (it asserts so): cancelled now, or decided before.
      reply.code(200);
      return coordinator.cancel(callerOf(request).principalId, request.params.operationId);
    },
  );
}

/**
 * 200 at the boundary, 202 before it; `convoke-wait-for` names the boundary the status speaks of
 * (the request's waitFor, or the interaction's), so a client that named none (the workflow
 * executor's contract calls over HTTP) knows whether a complete settlement is part of it.
 */
function answer(reply: FastifyReply, waited: { result: InvocationResult; reached: boolean }, boundary: WaitFor): InvocationResult {
  reply.header(waitForHeader, boundary);
  if (!waited.reached) reply.header('location', `/contract-invocations/${waited.result.operationId}`);
  reply.code(waited.reached ? 200 : 202);
  return waited.result;
}
