/**
 * What the web console reads, behind the same bearer authentication as every other route:
 *
 * - GET /contract-invocations/{id}/transitions: the result, the branches with their leases and
 *   the whole event-stream timeline, for the original principal or an operator principal (404
 *   for anyone else, like GET).
 * - GET /contract-invocations/{id}/events: the same as server-sent events. A `snapshot` first,
 *   then an `update` after each append to the operation's stream (the store's watch, so appends of
 *   any coordinator sharing the store), carrying only what changed since the last event: the
 *   result's changed fields, the changed branches and the timeline entries not sent yet, read
 *   from the transitions stored since (projections/delta.ts).
 * - GET /contract-invocations/events?<list filters>: the list page those filters select (as GET
 *   /contract-invocations answers it, visibility included) as a `page` event, first and then
 *   again whenever an append changes it. Another principal's appends cause a query, never an
 *   event: the caller learns only what its own page shows.
 *
 * - The same for workflow instances, where the runtime hosts them: GET
 *   /workflow-instances/{id}/transitions (the record and every stored transition, for the
 *   instance's principal or an operator), /workflow-instances/{id}/events (`snapshot`, then an
 *   `update` after each append with what changed: the new and changed task executions, timers and
 *   children, the instance's changed fields, the timeline entries not sent yet) and
 *   /workflow-instances/events?<list filters> (`page` events, as GET /workflow-instances answers).
 *
 * Idle streams get a comment line (the heartbeat). A principal holds a bounded number of streams,
 * and all principals together another (503 unavailable beyond either); shutdown ends every
 * stream, and so does the expiry of the credential a stream was opened with (a JWT's exp), after
 * an `error` event of kind `denied`.
 */
import { isDeepStrictEqual } from 'node:util';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { AdapterError } from '../contract/errors.js';
import { adapterErrorStatus, internalErrors } from '../runtime/errors.js';
import type { Clock, TimerHandle } from '../contract/clock.js';
import { parseListParameters } from '../runtime/operation-list.js';
import type { InvocationService } from '../runtime/service.js';
import type { WorkflowInstanceService } from '../runtime/workflow-service.js';
import type { LiveInspection } from '../runtime/live-inspection.js';
import { PrincipalSlots } from '../contract/principal-slots.js';
import { parseWorkflowListParameters } from '../runtime/workflow-list.js';
import { instanceParamsSchema } from './workflow-instances.js';
import type { Authenticate, AuthenticateSession } from './auth.js';
import { protectiveHeaders } from './headers.js';
import { errorResponseSchemas, inspectionSchema, operationParamsSchema } from './schemas.js';

export interface LiveRoutesOptions {
  coordinator: InvocationService;
  authenticate: Authenticate;
  /** The streams' authentication: a stream ends when its credential does (a JWT's exp). */
  session: AuthenticateSession;
  clock: Clock;
  events: { heartbeatMs: number; streamsPerPrincipal: number; streamsMax: number };
  /** Open streams, ended by the app on shutdown. */
  streams: Set<() => void>;
  /** Workflow instances, when the runtime hosts them: their routes exist only then. */
  workflows?: WorkflowInstanceService;
  /** Told about a refresh that failed with a bug; its client learns only "internal error", as a 500's does. */
  onInternalError?: (error: unknown) => void;
}

interface Params {
  operationId: string;
}

/** A list stream reads the index at most this often, however busy the store. */
const listRefreshMs = 250;

export function registerLiveRoutes(app: FastifyInstance, options: LiveRoutesOptions): void {
  const { coordinator } = options;
  const held = heldStreams(options.events.streamsPerPrincipal, options.events.streamsMax);

  app.get<{ Params: Params }>(
    '/contract-invocations/:operationId/transitions',
    { schema: { params: operationParamsSchema, response: { 200: inspectionSchema, ...errorResponseSchemas } } },
    async (request, reply) => {
      const caller = await options.authenticate(request.headers.authorization);
      reply.header('cache-control', 'no-store');
      return coordinator.inspect(caller.principalId, request.params.operationId);
    },
  );

  app.get<{ Params: Params }>('/contract-invocations/:operationId/events', { schema: { params: operationParamsSchema } }, async (request, reply) => {
    const { caller, untilMs } = await options.session(request.headers.authorization);
    const { principalId } = caller;
    const { operationId } = request.params;
    // Visibility before anything is held: someone else's operation is 404, as for GET.
    const live = await coordinator.inspectLive(principalId, operationId);
    const stream = openStream(reply, options, held.take(principalId), untilMs);
    followInspection(stream, live, (listener) => coordinator.followOperation(operationId, listener));
  });

  app.get<{ Querystring: Record<string, string> }>('/contract-invocations/events', async (request, reply) => {
    const { caller, untilMs } = await options.session(request.headers.authorization);
    const { principalId } = caller;
    const query = parseListParameters(request.query);
    const load = () => coordinator.list(principalId, query);
    const first = await load();
    followPages(openStream(reply, options, held.take(principalId), untilMs), first, load, (listener) => coordinator.followOperations(listener));
  });

  if (options.workflows) registerWorkflowLiveRoutes(app, options, options.workflows, held);
}

interface InstanceParams {
  instanceId: string;
}

function registerWorkflowLiveRoutes(
  app: FastifyInstance,
  options: LiveRoutesOptions,
  workflows: WorkflowInstanceService,
  held: ReturnType<typeof heldStreams>,
) {
  app.get<{ Params: InstanceParams }>('/workflow-instances/:instanceId/transitions', { schema: { params: instanceParamsSchema } }, async (request, reply) => {
    const caller = await options.authenticate(request.headers.authorization);
    reply.header('cache-control', 'no-store');
    return workflows.inspect(caller.principalId, request.params.instanceId);
  });

  app.get<{ Params: InstanceParams }>('/workflow-instances/:instanceId/events', { schema: { params: instanceParamsSchema } }, async (request, reply) => {
    const { caller, untilMs } = await options.session(request.headers.authorization);
    const { principalId } = caller;
    const { instanceId } = request.params;
    // Visibility before anything is held: someone else's instance is 404, as for GET.
    const live = await workflows.inspectLive(principalId, instanceId);
    const stream = openStream(reply, options, held.take(principalId), untilMs);
    followInspection(stream, live, (listener) => workflows.followInstance(instanceId, listener));
  });

  app.get<{ Querystring: Record<string, string> }>('/workflow-instances/events', async (request, reply) => {
    const { caller, untilMs } = await options.session(request.headers.authorization);
    const { principalId } = caller;
    const query = parseWorkflowListParameters(request.query);
    const load = () => workflows.list(principalId, query);
    const first = await load();
    followPages(openStream(reply, options, held.take(principalId), untilMs), first, load, (listener) => workflows.followInstances(listener));
  });
}

/** A list page, then the page again whenever it differs after an append (read again at most every listRefreshMs). */
function followPages<P>(stream: Stream, first: P, load: () => Promise<P>, subscribe: Follow): void {
  let last = first;
  stream.send('page', last);
  stream.follow(
    subscribe,
    async () => {
      const page = await load();
      if (isDeepStrictEqual(page, last)) return;
      last = page;
      stream.send('page', page);
    },
    listRefreshMs,
  );
}

/**
 * A `snapshot`, then after each append an `update` with what changed since the last event sent:
 * numbered from 1 after each snapshot, so a client knows it missed none. A refresh run after the
 * client read what it had not (the drain) reads everything stored since the last event sent, so
 * its update covers all it missed. A log that no longer continues what was sent (a store that
 * lost writes) is sent as a new snapshot, which replaces everything the client holds.
 */
function followInspection<S, U extends object>(stream: Stream, live: LiveInspection<S, U>, subscribe: Follow): void {
  let seq = 0;
  stream.send('snapshot', live.first);
  stream.follow(subscribe, async () => {
    const next = await live.next();
    if (next === undefined) return;
    if (next.kind === 'snapshot') {
      seq = 0;
      return stream.send('snapshot', next.inspection);
    }
    seq += 1;
    stream.send('update', { seq, ...next.update });
  });
}

/** Counts the streams each principal holds, and all of them; `take` refuses one past either bound. */
function heldStreams(perPrincipal: number, total: number) {
  const slots = new PrincipalSlots(perPrincipal, total);
  return {
    take(principalId: string): () => void {
      const release = slots.take(principalId);
      if (release !== undefined) return release;
      if (slots.full(principalId) === 'principal')
        throw new AdapterError(
          'unavailable',
          `this principal already holds ${slots.holding(principalId)} event streams (at most ${perPrincipal}); close one and retry`,
        );
      throw new AdapterError(
        'unavailable',
        `this server already holds ${slots.holdingTotal()} event streams of all principals, the most it holds at once (http.events.streamsMax ${total}); retry later`,
      );
    },
  };
}

type Follow = (listener: () => void) => Promise<{ close(): Promise<void> }>;
type Stream = ReturnType<typeof eventStream>;

/** A stream is taken over from the framework (its hooks never see it): it carries every response's protective headers itself. */
const streamHeaders = {
  ...protectiveHeaders,
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  'x-accel-buffering': 'no',
  connection: 'keep-alive',
};

/**
 * Takes the response over as an event stream: `send` writes an event, `follow` runs `refresh`
 * after store notices (one at a time, notices arriving meanwhile folded into one more run, at
 * most every `minGapMs`; while the client has not read what was written, none until it has). The
 * stream ends when the client leaves, on shutdown, or after a failed refresh (an `error` event first).
 */
function eventStream(reply: FastifyReply, options: LiveRoutesOptions, release: () => void) {
  const { clock } = options;
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, streamHeaders);
  let ended = false;
  let heartbeat: TimerHandle | undefined;
  let following: Promise<{ close(): Promise<void> }> | undefined;
  // A stream whose client has not read what was written (the response needs a drain) is not idle: no heartbeat is added.
  const armHeartbeat = () => {
    heartbeat?.cancel();
    heartbeat = clock.at(clock.nowMs() + options.events.heartbeatMs, () => (raw.writableNeedDrain ? armHeartbeat() : write(': heartbeat\n\n')));
  };
  const write = (text: string) => {
    if (ended) return;
    raw.write(text);
    armHeartbeat();
  };
  const end = (last?: string) => {
    if (ended) return;
    if (last !== undefined) raw.write(last);
    ended = true;
    heartbeat?.cancel();
    options.streams.delete(end);
    release();
    void following?.then((f) => f.close()).catch(() => undefined);
    raw.end();
  };
  const fail = (error: unknown) => end(errorEvent(error, options.onInternalError));
  options.streams.add(end);
  raw.once('close', () => end());
  // The client may have left while the first read was in flight: its close has been and gone.
  if (raw.destroyed) end();
  const send = (event: string, data: unknown) => write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const follow = (subscribe: Follow, refresh: () => Promise<void>, minGapMs = 0) => {
    // An ended stream subscribes to nothing: end() has already closed whatever it followed.
    if (ended) return;
    let running = false;
    let again = false;
    let draining = false;
    const drained = () => {
      draining = false;
      run();
    };
    const run = () => {
      if (ended) return;
      if (running) return void (again = true);
      // A client that has not read what was sent gets nothing more until it has: the server holds at
      // most one event it cannot deliver, and the run on drain sends everything the client missed.
      if (raw.writableNeedDrain) {
        if (!draining) raw.once('drain', drained);
        draining = true;
        return;
      }
      running = true;
      again = false;
      refresh()
        .then(() => new Promise<void>((done) => (minGapMs > 0 ? clock.at(clock.nowMs() + minGapMs, done) : done())))
        .then(() => {
          running = false;
          if (again) run();
        }, fail);
    };
    following = subscribe(run);
    // An append between the first read and the watch starting is caught by one run now.
    following.then(run, fail);
  };
  return { send, follow, end };
}

/**
 * An event stream (eventStream) that never outlives the credential it was opened with: at
 * `untilMs` (a JWT's exp) it ends with an `error` event of kind `denied`, and a client that opens
 * it again authenticates again.
 */
function openStream(reply: FastifyReply, options: LiveRoutesOptions, release: () => void, untilMs: number | null) {
  let expiry: TimerHandle | undefined;
  let ended = false;
  const stream = eventStream(reply, options, () => {
    ended = true;
    expiry?.cancel();
    release();
  });
  // A stream that ended at once (its client had left) arms nothing.
  if (untilMs !== null && !ended) expiry = options.clock.at(untilMs, () => stream.end(expiredEvent));
  return stream;
}

/** The last event of a stream whose credential has expired (a JWT past its exp). */
const expiredEvent = `event: error\ndata: ${JSON.stringify({ kind: 'denied', description: 'the credential this stream was opened with has expired; authenticate again' })}\n\n`;

/** The last event of a stream whose refresh failed: an operating failure says what it is; a bug's message (a path, a fragment of data) never reaches the client. */
function errorEvent(error: unknown, onInternalError: ((error: unknown) => void) | undefined): string {
  const known = adapterErrorStatus(error);
  if (!known) onInternalError?.(error);
  const description = known ? known.body.description : internalErrors.stream;
  return `event: error\ndata: ${JSON.stringify({ kind: 'unavailable', description })}\n\n`;
}
