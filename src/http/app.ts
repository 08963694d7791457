/**
 * The HTTP facade as a Fastify instance (not listening: server.ts listens; tests may `inject`).
 *
 * One error handler turns everything into an AdapterError body (errors.ts); the body parser is
 * the strict I-JSON one (body.ts); route schemas are compiled without coercion (schemas.ts).
 * Server timeouts are explicit: the socket inactivity timeout outlasts the longest permitted wait,
 * while receiving a request (headers and body) is bounded separately against slow senders.
 */
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { Socket } from 'node:net';
import { Counter, type Registry } from 'prom-client';
import type { BundleRegistry } from '../contract/bundle.js';
import { unavailable } from '../contract/errors.js';
import type { Clock } from '../contract/clock.js';
import type { HttpSettings } from './settings.js';
import type { InvocationService } from '../runtime/service.js';
import { createAuthenticator } from './auth.js';
import { installStrictJsonBodies } from './body.js';
import { errorReply, routeNotFound, type ErrorReply } from './errors.js';
import { registerInvocationRoutes } from './invocations.js';
import { registerLiveRoutes } from './live.js';
import { registerConsoleRoutes } from './console.js';
import { openApiDocument } from './openapi.js';
import { compileRouteSchema, healthSchema } from './schemas.js';
import { limits } from '../contract/limits.js';

export interface HttpAppOptions {
  coordinator: InvocationService;
  bundles: BundleRegistry;
  clock: Clock;
  settings: HttpSettings;
  /** Told about 500s (bugs); the client only learns "internal error". */
  onInternalError?: (error: unknown) => void;
}

export interface HttpApp {
  app: FastifyInstance;
  /** From now on every request gets 503 and every wait in progress is released (answered with its current state). */
  beginShutdown(): void;
}

export const keepAliveTimeoutMs = 5_000;
/** Socket inactivity allowed beyond the longest wait (a waiting request sends nothing). */
const connectionIdleMarginMs = 15_000;

export function createHttpApp(options: HttpAppOptions): HttpApp {
  const { settings } = options;
  const onInternalError = options.onInternalError ?? (() => {});
  const reply = (target: FastifyReply, r: ErrorReply) => target.code(r.statusCode).headers(r.headers).send(r.body);
  const mapError = (error: unknown, target: FastifyReply) => {
    const r = errorReply(error, settings.bodyLimitBytes);
    if (r.statusCode === 500) onInternalError(error);
    return reply(target, r);
  };
  const app = Fastify({
    logger: false,
    bodyLimit: settings.bodyLimitBytes,
    connectionTimeout: settings.waitMsMax + connectionIdleMarginMs,
    requestTimeout: settings.requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    // Fastify's own 503 body is not an AdapterError; the onRequest hook below answers instead.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
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
  app.addHook('onResponse', async (request, target) => {
    metrics.responses.inc({ method: request.method, route: request.routeOptions.url ?? 'unmatched', status: String(target.statusCode) });
  });

  const authenticate = createAuthenticator(settings, options.clock);
  registerInvocationRoutes(app, {
    coordinator: options.coordinator,
    bundles: options.bundles,
    authenticate,
    waitMsMax: settings.waitMsMax,
    releaseFor: (target) => releaseFor(target, state, metrics),
  });
  registerLiveRoutes(app, { coordinator: options.coordinator, authenticate, clock: options.clock, events: settings.events, streams: state.streams });
  registerConsoleRoutes(app);
  registerOperatorRoutes(app, options.coordinator.metrics.registry);
  return {
    app,
    beginShutdown: () => {
      state.closing = true;
      for (const controller of state.waits) controller.abort('shutdown');
      for (const end of [...state.streams]) end();
    },
  };
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

function registerOperatorRoutes(app: FastifyInstance, registry: Registry): void {
  const document = openApiDocument();
  app.get('/healthz', { schema: { response: { 200: healthSchema } } }, async () => ({ status: 'ok' as const }));
  app.get('/openapi.json', async () => document);
  app.get('/metrics', async (_request, target) => {
    target.header('content-type', registry.contentType);
    return registry.metrics();
  });
}

/** Registered once per registry (a second app on the same coordinator shares the counters). */
function httpMetrics(registry: Registry) {
  const counter = (name: string, help: string, labelNames: string[]) =>
    (registry.getSingleMetric(name) as Counter<string> | undefined) ?? new Counter({ name, help, labelNames, registers: [registry] });
  return {
    responses: counter('convoke_http_responses_total', 'HTTP responses, by method, route and status', ['method', 'route', 'status']),
    released: counter('convoke_http_waits_released_total', 'Waits ended early: client closed the connection, or shutdown (the operation continues)', ['reason']),
  };
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
    socket.write(`HTTP/1.1 ${status} ${text}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(error);
}
