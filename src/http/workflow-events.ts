/**
 * POST /workflow-events: a CloudEvent for the workflows' waiting `listen` tasks, in structured
 * mode (`content-type: application/cloudevents+json`, the event is the JSON body), authenticated
 * like every route. The event reaches only the caller's own instances. It is answered after the
 * appends that took it committed: 202 `{status: "accepted", matched: [instance ids]}`; 404
 * `{status: "no-match", matched: []}` when no waiting listen took it (nothing was stored); 413 when
 * it is larger than the store records in one transition with it (nothing was stored). Sending
 * an event again (same type, source, id and content) after a lost answer is answered as taken and
 * appends nothing — by the instances this host holds: one that took it and has ended since may be
 * let go (restart, cache), and the send again is then 404; another event under the identity of one
 * taken is 409 conflict (nothing stored).
 *
 * Each delivery is matched against the caller's waiting listens (jq, in the evaluator every
 * principal shares) and may append: one principal sending thousands at once would take the
 * executor from every other. A principal has at most `deliveriesPerPrincipal`
 * (http.eventDeliveriesPerPrincipal) in flight at this host at once, counted from when one is
 * handed to the intake until the intake is done with it — answered, refused or failed, whether its
 * client still waits or went away (the delivery carries on without it, and holds its slot until
 * it ends). One past it is refused at once, 503 unavailable, before the intake sees it: nothing of
 * it is stored, and its client sends it again once one of the others is answered. Where principals
 * are many (every `sub` a JWT issuer signs is one), all of them together have at most
 * `deliveriesMax` (http.eventDeliveriesMax) in flight, and one past it is refused the same way.
 *
 * The content-type parser lives in this route's own scope: no other route accepts the media type.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { cloudEventProblem, type CloudEvent, type CloudEventIntake } from '../contract/cloudevents.js';
import { AdapterError, AssertionFailure, invalidInput } from '../contract/errors.js';
import { parseStrictBytes } from '../contract/ijson.js';
import type { JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import type { Caller } from '../runtime/service.js';
import { PrincipalSlots } from '../contract/principal-slots.js';
import type { Authenticate } from './auth.js';
import { charsetsOf, declaresUtf8 } from './body.js';
import { UnsupportedMediaType } from './errors.js';
import { errorResponseSchemas } from './schemas.js';

export const cloudEventsMediaType = 'application/cloudevents+json';

export interface WorkflowEventRoutesOptions {
  intake: CloudEventIntake;
  authenticate: Authenticate;
  /** Deliveries one principal has in flight at once (http.eventDeliveriesPerPrincipal); past it one is refused, 503 unavailable. */
  deliveriesPerPrincipal: number;
  /** Deliveries all principals have in flight at once (http.eventDeliveriesMax); past it one is refused, 503 unavailable. */
  deliveriesMax: number;
}

const deliverySchema = {
  type: 'object',
  required: ['status', 'matched'],
  additionalProperties: false,
  properties: { status: { enum: ['accepted', 'no-match'] }, matched: { type: 'array', items: { type: 'string' } } },
} as const;

const postWorkflowEventSchema = {
  headers: { type: 'object', required: ['content-type'], properties: { 'content-type': { type: 'string' } } },
  body: { type: 'object' },
  response: { ...errorResponseSchemas, 202: deliverySchema, 404: deliverySchema },
} as const;

/** Every refusal's body, as on every route (errors.ts). */
const adapterErrorBody = { 'application/json': { schema: { $ref: '#/components/schemas/AdapterError' } } };

/** The route in the OpenAPI document (openapi.ts), named there only where the app serves it: given an event intake. */
export const workflowEventPaths = {
  '/workflow-events': {
    post: {
      operationId: 'deliverWorkflowEvent',
      description:
        "A CloudEvent (structured mode) for the caller's own workflow instances waiting in a `listen` task. Answered once every append that took it has committed; " +
        'an event no waiting listen takes is not stored (404 no-match). Sending the same event (type, source, id and content) again is answered as taken and appends nothing; ' +
        'another event under the identity (type, source and id) of one taken is 409 conflict, taken by none of the instances that hold the other.',
      requestBody: { required: true, content: { [cloudEventsMediaType]: { schema: { type: 'object', required: ['specversion', 'id', 'source', 'type'] } } } },
      responses: {
        '202': { description: 'taken by the listed instances', content: { 'application/json': { schema: deliverySchema } } },
        '404': {
          description:
            'no waiting listen took it; nothing was stored by this send (a send again of an event an instance took is answered so once that instance has ended and this host no longer holds it)',
          content: { 'application/json': { schema: deliverySchema } },
        },
        '400': { description: 'not a CloudEvent this runtime takes', content: adapterErrorBody },
        '401': { description: 'not authenticated', content: adapterErrorBody },
        '409': {
          description: 'another event under its type, source and id (other content) was taken, and no instance took this one; nothing was stored',
          content: adapterErrorBody,
        },
        '413': {
          description:
            'larger than limits.cloudEventBytesMax, or than the store records in one transition with what a listen records beside it; nothing was taken',
          content: adapterErrorBody,
        },
        '415': { description: 'content-type must be application/cloudevents+json (UTF-8), and content-encoding identity', content: adapterErrorBody },
        '500': {
          description: 'internal error; whether an instance took it is unknown: send it again (an instance that took it answers it taken)',
          content: adapterErrorBody,
        },
        '503': {
          description:
            'unavailable; send it again. Among the causes: the caller already has http.eventDeliveriesPerPrincipal deliveries in flight (default 64), or all callers together http.eventDeliveriesMax (default 1 024), and this one was refused before any instance was offered it (nothing was stored); send it again once one of those is answered',
          content: adapterErrorBody,
        },
      },
    },
  },
};

export function registerWorkflowEventRoutes(app: FastifyInstance, options: WorkflowEventRoutesOptions): void {
  const inFlight = deliverySlots(options.deliveriesPerPrincipal, options.deliveriesMax);
  void app.register(async (scope) => {
    const callers = new WeakMap<FastifyRequest, Caller>();
    scope.addContentTypeParser(cloudEventsMediaType, { parseAs: 'buffer', bodyLimit: limits.cloudEventBytesMax }, (_request, body, done) => {
      // The route's preParsing hook refused every other media type (a charset other than UTF-8 included).
      try {
        done(null, parseStrictBytes(body as Buffer, 'CloudEvent'));
      } catch (error) {
        done(error as Error, undefined);
      }
    });
    scope.post(
      '/workflow-events',
      {
        schema: postWorkflowEventSchema,
        bodyLimit: limits.cloudEventBytesMax,
        // Authentication runs before the body is read, as on every route.
        onRequest: async (request) => void callers.set(request, await options.authenticate(request.headers.authorization)),
        // Before a parser is chosen: a media type no parser takes (batch mode, binary mode, text) would otherwise be
        // Fastify's refusal, which the app answers with the JSON routes' media type; nor is any other type's body read.
        preParsing: async (request) => {
          if (!mediaTypeOf(request)) throw new UnsupportedMediaType(cloudEventsMediaType);
        },
      },
      async (request, reply) => {
        const caller = callers.get(request);
        if (!caller) throw new AssertionFailure('the onRequest hook authenticated this request');
        const problem = cloudEventProblem(request.body as JsonValue);
        if (problem !== undefined) throw invalidInput(`not a CloudEvent this runtime takes: ${problem}`);
        const { matched } = await inFlight.bounded(caller.principalId, () => options.intake.deliver(request.body as CloudEvent, caller.principalId));
        return reply.code(matched.length > 0 ? 202 : 404).send({ status: matched.length > 0 ? 'accepted' : 'no-match', matched });
      },
    );
  });
}

/**
 * The deliveries each principal has in flight, and all of them. A slot is held until the intake is done with the
 * delivery (a client that goes away does not end it: its slot would otherwise be free while the
 * executor still works for it), and given back however it ends.
 */
function deliverySlots(perPrincipal: number, total: number) {
  const slots = new PrincipalSlots(perPrincipal, total);
  const refusal = (principalId: string) => {
    const held =
      slots.full(principalId) === 'principal'
        ? `principal ${JSON.stringify(principalId)} already has ${slots.holding(principalId)} events in flight at this host, the most one principal may have at once ` +
          `(http.eventDeliveriesPerPrincipal ${perPrincipal})`
        : `all principals together already have ${slots.holdingTotal()} events in flight at this host, the most it takes at once (http.eventDeliveriesMax ${total})`;
    return new AdapterError(
      'unavailable',
      `${held}; they are still being delivered. This one was offered to no instance and nothing of it was stored: send it again once one of them is answered`,
    );
  };
  return {
    async bounded<T>(principalId: string, deliver: () => Promise<T>): Promise<T> {
      const release = slots.take(principalId);
      if (release === undefined) throw refusal(principalId);
      try {
        return await deliver();
      } finally {
        release();
      }
    },
  };
}

/** Structured mode only; JSON is UTF-8. */
function mediaTypeOf(request: FastifyRequest): boolean {
  const header = request.headers['content-type'] ?? '';
  const type = header.split(';', 1)[0]?.trim().toLowerCase();
  return type === cloudEventsMediaType && declaresUtf8(charsetsOf(header));
}
