/**
 * What the web console reads, behind the same bearer authentication as every other route:
 *
 * - GET /contract-invocations/{id}/transitions: the result, the branches with their leases and
 *   the whole event-stream timeline, for the original principal or an operator principal (404
 *   for anyone else, like GET).
 * - GET /contract-invocations/{id}/events: the same as server-sent events. A `snapshot` first,
 *   then an `update` after each append to the operation's stream (the store's watch, so appends of
 *   any coordinator sharing the store), carrying the result, the branches and the timeline entries
 *   not sent yet; a comment line when idle (the heartbeat). A principal holds a bounded number of
 *   streams (503 unavailable beyond it); shutdown ends every stream.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { AdapterError } from '../contract/errors.js';
import type { Clock, TimerHandle } from '../contract/clock.js';
import type { OperationInspection } from '../projections/inspection.js';
import type { InvocationService } from '../runtime/service.js';
import type { Authenticate } from './auth.js';
import { errorResponseSchemas, inspectionSchema, operationParamsSchema } from './schemas.js';

export interface LiveRoutesOptions {
  coordinator: InvocationService;
  authenticate: Authenticate;
  clock: Clock;
  events: { heartbeatMs: number; streamsPerPrincipal: number };
  /** Open streams, ended by the app on shutdown. */
  streams: Set<() => void>;
}

interface Params {
  operationId: string;
}

export function registerLiveRoutes(app: FastifyInstance, options: LiveRoutesOptions): void {
  const { coordinator } = options;
  const open = new Map<string, number>();

  app.get<{ Params: Params }>('/contract-invocations/:operationId/transitions', { schema: { params: operationParamsSchema, response: { 200: inspectionSchema, ...errorResponseSchemas } } }, async (request, reply) => {
    const caller = await options.authenticate(request.headers.authorization);
    reply.header('cache-control', 'no-store');
    return coordinator.inspect(caller.principalId, request.params.operationId);
  });

  app.get<{ Params: Params }>('/contract-invocations/:operationId/events', { schema: { params: operationParamsSchema } }, async (request, reply) => {
    const caller = await options.authenticate(request.headers.authorization);
    const { principalId } = caller;
    const { operationId } = request.params;
    // Visibility before anything is held: someone else's operation is 404, as for GET.
    const first = await coordinator.inspect(principalId, operationId);
    const held = open.get(principalId) ?? 0;
    if (held >= options.events.streamsPerPrincipal) {
      throw new AdapterError('unavailable', `this principal already holds ${held} event streams (at most ${options.events.streamsPerPrincipal}); close one and retry`);
    }
    open.set(principalId, held + 1);
    const release = () => {
      const count = (open.get(principalId) ?? 1) - 1;
      if (count > 0) open.set(principalId, count);
      else open.delete(principalId);
    };
    streamOperation(reply, { ...options, principalId, operationId, first, release });
  });
}

interface StreamOptions extends LiveRoutesOptions {
  principalId: string;
  operationId: string;
  first: OperationInspection;
  release(): void;
}

/** Takes the response over and writes events until the client leaves or the server shuts down. */
function streamOperation(reply: FastifyReply, options: StreamOptions): void {
  const { coordinator, clock, principalId, operationId } = options;
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no', connection: 'keep-alive' });
  let sent = 0;
  let ended = false;
  let heartbeat: TimerHandle | undefined;
  const write = (text: string) => {
    if (!ended) raw.write(text);
    armHeartbeat();
  };
  const armHeartbeat = () => {
    heartbeat?.cancel();
    if (!ended) heartbeat = clock.at(clock.nowMs() + options.events.heartbeatMs, () => write(': heartbeat\n\n'));
  };
  const send = (event: 'snapshot' | 'update', inspection: OperationInspection) => {
    const fresh = inspection.timeline.slice(sent);
    sent = inspection.timeline.length;
    write(`event: ${event}\ndata: ${JSON.stringify({ ...inspection, timeline: fresh })}\n\n`);
  };
  // One read at a time; notices arriving meanwhile fold into one more read afterwards.
  let reading: Promise<void> | undefined;
  let again = false;
  const onNotice = () => {
    if (reading) return void (again = true);
    reading = (async () => {
      do {
        again = false;
        const inspection = await coordinator.inspect(principalId, operationId);
        if (inspection.timeline.length > sent && !ended) send('update', inspection);
      } while (again && !ended);
    })()
      .catch((error: unknown) => end(`event: error\ndata: ${JSON.stringify({ kind: 'unavailable', description: (error as Error).message })}\n\n`))
      .finally(() => (reading = undefined));
  };
  let following: Promise<{ close(): Promise<void> }> | undefined;
  const end = (last?: string) => {
    if (ended) return;
    if (last !== undefined) raw.write(last);
    ended = true;
    heartbeat?.cancel();
    options.streams.delete(end);
    options.release();
    void following?.then((f) => f.close()).catch(() => undefined);
    raw.end();
  };
  options.streams.add(end);
  raw.once('close', () => end());
  send('snapshot', options.first);
  following = coordinator.followOperation(operationId, onNotice);
  // An append between the first read and the watch starting is caught by one read now.
  following.then(onNotice, (error: unknown) => end(`event: error\ndata: ${JSON.stringify({ kind: 'unavailable', description: (error as Error).message })}\n\n`));
}
