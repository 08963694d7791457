/**
 * The HTTP facade as a Fastify instance (not listening: server.ts listens; tests may `inject`).
 *
 * One error handler turns everything into an AdapterError body (errors.ts); the body parser is
 * the strict I-JSON one (body.ts); route schemas are compiled without coercion (schemas.ts).
 * Server timeouts are explicit: the socket inactivity timeout outlasts the longest permitted wait
 * and an idle event stream's heartbeat, while receiving a request (headers and body) is bounded
 * separately against slow senders.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Socket } from 'node:net';
import { Histogram, type Registry } from 'prom-client';
import { registryCounter } from '../runtime/metrics.js';
import type { BundleRegistry } from '../contract/bundle.js';
import { unavailable } from '../contract/errors.js';
import type { Clock } from '../contract/clock.js';
import type { HttpSettings } from './settings.js';
import type { InvocationService } from '../runtime/service.js';
import type { WorkflowInstanceService } from '../runtime/workflow-service.js';
import { createAuthenticator } from './auth.js';
import { checkRequestHeaders, installStrictJsonBodies } from './body.js';
import { errorReply, internalErrorOfRoute, routeNotFound, type ErrorReply } from './errors.js';
import { protectiveHeaders } from './headers.js';
import { registerInvocationRoutes } from './invocations.js';
import { registerLiveRoutes } from './live.js';
import { registerConsoleRoutes } from './console.js';
import { registerWorkflowInstanceRoutes } from './workflow-instances.js';
import { registerWorkflowEventRoutes } from './workflow-events.js';
import type { CloudEventIntake } from '../contract/cloudevents.js';
import { openApiDocument } from './openapi.js';
import { compileRouteSchema, healthSchema } from './schemas.js';
import { limits } from '../contract/limits.js';
import { WaitSlots } from '../runtime/wait-slots.js';

export interface HttpAppOptions {
  coordinator: InvocationService;
  bundles: BundleRegistry;
  clock: Clock;
  settings: HttpSettings;
  /** Workflow instances (/workflow-instances); the routes answer 404 without them. */
  workflows?: WorkflowInstanceService;
  /** Told about 500s (bugs); the client only learns "internal error". */
  onInternalError?: (error: unknown) => void;
  /**
   * Where one line per request is logged (RequestLog: id, method, route, status, duration; never
   * headers, query strings or bodies). No request is logged without one.
   */
  logger?: FastifyBaseLogger;
  /** Where POST /workflow-events delivers CloudEvents (the workflow executor); the route exists only with one. */
  workflowEvents?: CloudEventIntake;
}

export interface HttpApp {
  app: FastifyInstance;
  /** From now on every request gets 503 and every wait in progress is released (answered with its current state). */
  beginShutdown(): void;
}

export const keepAliveTimeoutMs = 5_000;
/** Socket inactivity allowed beyond the longest wait (a waiting request sends nothing) and beyond an idle event stream's heartbeat. */
const connectionIdleMarginMs = 15_000;

/** The server options no setting changes. */
const fixedServerOptions = {
  // Fastify's own 503 body is not an AdapterError; the onRequest hook answers instead.
  return503OnClosing: false,
  forceCloseConnections: 'idle',
  // Node would answer an HTTP/1.1 request without a host header itself, with an empty 400 that is no AdapterError
  // and carries none of the protective headers; checkRequestHeaders refuses it instead, as it refuses two.
  http: { requireHostHeader: false },
} as const;

export function createHttpApp(options: HttpAppOptions): HttpApp {
  const { settings } = options;
  const onInternalError = options.onInternalError ?? (() => {});
  // An error answered before any hook (a framework error: a URL that does not decode) carries the protective headers too.
  const reply = (target: FastifyReply, r: ErrorReply) =>
    target
      .code(r.statusCode)
      .headers({ ...protectiveHeaders, ...r.headers })
      .send(r.body);
  // A route may bound its body otherwise (POST /workflow-events: limits.cloudEventBytesMax); a 413 names the route's bound.
  const mapError = (error: unknown, target: FastifyReply) => {
    const route = target.request?.routeOptions;
    const r = errorReply(error, route?.bodyLimit ?? settings.bodyLimitBytes, internalErrorOfRoute(target.request?.method, route?.url));
    if (r.statusCode === 500) onInternalError(error);
    return reply(target, r);
  };
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger, logController: new RequestLog(), genReqId: () => randomUUID() } : { logger: false }),
    bodyLimit: settings.bodyLimitBytes,
    // An event stream writes nothing between heartbeats: a timeout within heartbeatMs would cut every idle stream.
    connectionTimeout: Math.max(settings.waitMsMax, settings.events.heartbeatMs) + connectionIdleMarginMs,
    requestTimeout: settings.requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    ...fixedServerOptions,
    frameworkErrors: (error, _request, target) => {
      void mapError(error, target);
    },
    clientErrorHandler: writeClientError,
  });
  app.server.headersTimeout = settings.headersTimeoutMs;
  // Read by Node when the server starts listening (it arms the sweep then), so setting it here takes effect.
  (app.server as { connectionsCheckingInterval?: number }).connectionsCheckingInterval = connectionsCheckingIntervalMs(settings.headersTimeoutMs);
  app.setValidatorCompiler(({ schema }) => compileRouteSchema(schema));
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  app.setErrorHandler((error, _request, target) => mapError(error, target));
  app.setNotFoundHandler((request, target) => reply(target, routeNotFound(request.method, request.url)));
  installStrictJsonBodies(app, settings.bodyLimitBytes);

  const state = { closing: false, waits: new Set<AbortController>(), streams: new Set<() => void>() };
  const metrics = httpMetrics(options.coordinator.metrics.registry);
  app.addHook('onRequest', async (_request, target) => {
    if (!state.closing) return;
    target.header('connection', 'close');
    throw unavailable('the server is shutting down; retry against another instance or later');
  });
  app.addHook('onRequest', async (request) => checkRequestHeaders(request.raw.rawHeaders, request.raw.httpVersion));
  // Every answer, errors included; a route that set its own (the console's policy) keeps it.
  app.addHook('onSend', async (_request, target, payload) => {
    for (const [name, value] of Object.entries(protectiveHeaders)) if (!target.hasHeader(name)) target.header(name, value);
    return payload;
  });
  app.addHook('onResponse', async (request, target) => {
    const route = routeOf(request);
    metrics.responses.inc({ method: request.method, route, status: String(target.statusCode) });
    metrics.durations.observe({ method: request.method, route, status_class: `${Math.floor(target.statusCode / 100)}xx` }, target.elapsedTime / 1000);
  });

  registerRoutes(app, options, (target) => releaseFor(target, state, metrics), state.streams);
  registerOperatorRoutes(app, options);
  return {
    app,
    beginShutdown: () => {
      state.closing = true;
      for (const controller of state.waits) controller.abort('shutdown');
      for (const end of [...state.streams]) end();
    },
  };
}

/** The authenticated routes: invocations, live updates, the console, workflow instances (when hosted). */
function registerRoutes(
  app: FastifyInstance,
  options: HttpAppOptions,
  release: (target: FastifyReply) => ReturnType<typeof releaseFor>,
  streams: Set<() => void>,
): void {
  const { settings } = options;
  const { authenticate, session } = createAuthenticator(settings, options.clock);
  const waits = new WaitSlots(settings.waitsPerPrincipal, settings.waitsMax);
  registerInvocationRoutes(app, {
    coordinator: options.coordinator,
    bundles: options.bundles,
    session,
    clock: options.clock,
    waitMsMax: settings.waitMsMax,
    releaseFor: release,
    waits,
  });
  registerLiveRoutes(app, {
    coordinator: options.coordinator,
    authenticate,
    session,
    clock: options.clock,
    events: settings.events,
    streams,
    ...(options.workflows ? { workflows: options.workflows } : {}),
    ...(options.onInternalError ? { onInternalError: options.onInternalError } : {}),
  });
  registerConsoleRoutes(app);
  if (options.workflowEvents)
    registerWorkflowEventRoutes(app, {
      intake: options.workflowEvents,
      authenticate,
      deliveriesPerPrincipal: settings.eventDeliveriesPerPrincipal,
      deliveriesMax: settings.eventDeliveriesMax,
    });
  if (options.workflows)
    registerWorkflowInstanceRoutes(app, {
      workflows: options.workflows,
      session,
      clock: options.clock,
      waitMsMax: settings.waitMsMax,
      releaseFor: release,
      waits,
    });
}

function connectionsCheckingIntervalMs(headersTimeoutMs: number): number {
  return Math.min(limits.httpConnectionsCheckingIntervalMsMax, Math.max(limits.httpConnectionsCheckingIntervalMsMin, Math.floor(headersTimeoutMs / 10)));
}

type HttpMetrics = ReturnType<typeof httpMetrics>;

/**
 * A release signal for one waiting request. The response's `close` event before it finished
 * writing means the client went away: the wait ends, the operation carries on.
 */
function releaseFor(target: FastifyReply, state: { closing: boolean; waits: Set<AbortController> }, metrics: HttpMetrics) {
  const controller = new AbortController();
  state.waits.add(controller);
  const onClose = () => {
    if (target.raw.writableFinished || controller.signal.aborted) return;
    metrics.released.inc({ reason: 'client-closed' });
    controller.abort('client-closed');
  };
  target.raw.once('close', onClose);
  controller.signal.addEventListener('abort', () => {
    if (controller.signal.reason === 'shutdown') metrics.released.inc({ reason: 'shutdown' });
  });
  if (state.closing) controller.abort('shutdown');
  return {
    signal: controller.signal,
    dispose: () => {
      state.waits.delete(controller);
      target.raw.off('close', onClose);
    },
  };
}

/** Health, metrics and the OpenAPI document, which names the optional routes only where `options` registers them. */
function registerOperatorRoutes(app: FastifyInstance, options: HttpAppOptions): void {
  const registry = options.coordinator.metrics.registry;
  const document = openApiDocument({ workflows: options.workflows !== undefined, workflowEvents: options.workflowEvents !== undefined });
  app.get('/healthz', { schema: { response: { 200: healthSchema } } }, async () => ({ status: 'ok' as const }));
  app.get('/openapi.json', async () => document);
  app.get('/metrics', async (_request, target) => {
    target.header('content-type', registry.contentType);
    return registry.metrics();
  });
}

/** The route template a request matched (`/contract-invocations/:operationId`), never its URL; `unmatched` for none. */
function routeOf(request: FastifyRequest): string {
  return request.routeOptions.url ?? 'unmatched';
}

/** Request durations run from microseconds (health, metrics) to the longest permitted wait. */
const requestBucketsSeconds = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** Registered once per registry (a second app on the same coordinator shares the counters). */
function httpMetrics(registry: Registry) {
  const counter = (name: string, help: string, labelNames: string[]) => registryCounter(registry, name, help, labelNames);
  const durationName = 'convoke_http_request_duration_seconds';
  return {
    responses: counter('convoke_http_responses_total', 'HTTP responses, by method, route template and status', ['method', 'route', 'status']),
    released: counter('convoke_http_waits_released_total', 'Waits ended early: client closed the connection, or shutdown (the operation continues)', [
      'reason',
    ]),
    durations:
      (registry.getSingleMetric(durationName) as Histogram<string> | undefined) ??
      new Histogram({
        name: durationName,
        help: 'HTTP request duration, from the request received to the response sent, by method, route template and status class',
        labelNames: ['method', 'route', 'status_class'],
        buckets: requestBucketsSeconds,
        registers: [registry],
      }),
  };
}

/**
 * Fastify's request log lines, replaced by one line per completed request that carries chosen
 * fields only: Fastify's own lines serialize the raw URL (query strings included) and its
 * not-found line repeats it. Headers (credentials) and bodies (inputs) are never logged.
 */
class RequestLog extends LogController {
  override incomingRequest(): void {}
  override routeNotFound(): void {}
  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, target: FastifyReply): void {
    const fields = {
      event: 'http-request',
      method: request.method,
      route: routeOf(request),
      status: target.statusCode,
      durationMs: Math.round(target.elapsedTime * 1000) / 1000,
    };
    if (error) request.log.error({ ...fields, error: error.message }, 'request failed');
    else request.log.info(fields, 'request completed');
  }
}

/**
 * Malformed HTTP never reaches Fastify's router; Node hands the socket here. The answer still
 * carries an AdapterError body.
 */
function writeClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, text, description] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout', 'the request was not received in time']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'request headers are too large']
        : [400, 'Bad Request', 'malformed HTTP request'];
  const body = JSON.stringify({ kind: 'invalid-input', description });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${text}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\n${Object.entries(protectiveHeaders)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('')}Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
