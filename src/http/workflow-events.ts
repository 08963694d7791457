/**
 * POST /workflow-events: a CloudEvent for the workflows' waiting `listen` tasks, authenticated like
 * every route, in either content mode of the CloudEvents HTTP binding: structured
 * (`content-type: application/cloudevents+json`, the event is the JSON body) or binary (the
 * attributes in `ce-` headers, the data the body: cloudevents-binary.ts); batched mode is refused. The event reaches only the caller's own instances. It is answered after the
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
 * The content-type parser lives in this route's own scope: no other route reads a body as its bytes.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { cloudEventProblem, cloudEventsMediaType, type CloudEvent, type CloudEventIntake } from '../contract/cloudevents.js';
import { AdapterError, AssertionFailure, invalidInput } from '../contract/errors.js';
import { parseStrictBytes } from '../contract/ijson.js';
import type { JsonObject } from '../contract/json.js';
import { limits } from '../contract/limits.js';
import { ContentTooLarge } from '../runtime/errors.js';
import type { Caller } from '../runtime/service.js';
import { PrincipalSlots } from '../contract/principal-slots.js';
import type { Authenticate } from './auth.js';
import { charsetsOf, declaresUtf8 } from './body.js';
import { binaryAttributes, binaryEvent, binaryMemberName, carriesAttributeHeaders, checkBinaryContentType } from './cloudevents-binary.js';
import { UnsupportedMediaType } from './errors.js';
import { errorResponseSchemas } from './schemas.js';

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

/** No body schema: the body is the event (structured mode) or its data (binary mode), read in the handler as the mode says. */
const postWorkflowEventSchema = {
  response: { ...errorResponseSchemas, 202: deliverySchema, 404: deliverySchema },
} as const;

/** Binary mode's required attribute headers in the OpenAPI document: each required in binary mode, absent in structured mode. */
const binaryModeHeaders = [
  ['ce-specversion', 'binary mode: the specversion, 1.0'],
  ['ce-id', 'binary mode: the event id'],
  ['ce-source', 'binary mode: the source, a URI-reference'],
  ['ce-type', 'binary mode: the type'],
].map(([name, description]) => ({ name, in: 'header', required: false, description, schema: { type: 'string' } }));

/** Every refusal's body, as on every route (errors.ts). */
const adapterErrorBody = { 'application/json': { schema: { $ref: '#/components/schemas/AdapterError' } } };

/** The route in the OpenAPI document (openapi.ts), named there only where the app serves it: given an event intake. */
export const workflowEventPaths = {
  '/workflow-events': {
    post: {
      operationId: 'deliverWorkflowEvent',
      description:
        "A CloudEvent for the caller's own workflow instances waiting in a `listen` task. Answered once every append that took it has committed; " +
        'an event no waiting listen takes is not stored (404 no-match). Sending the same event (type, source, id and content) again is answered as taken and appends nothing; ' +
        'another event under the identity (type, source and id) of one taken is 409 conflict, taken by none of the instances that hold the other. ' +
        'Either content mode of the CloudEvents HTTP binding 1.0.2: structured (content-type application/cloudevents+json, the body the event; ce- headers beside it are not read), ' +
        'or binary (§3.1: every context attribute in its ce- header, percent-encoded as §3.1.3.2 says, datacontenttype the content-type, the body the data: ' +
        'a JSON value under a JSON media type, UTF-8 text under text/*, data_base64 under any other; an empty body is an event without data). ' +
        'In binary mode an extension attribute is a string (its canonical string form). Batched mode is not taken (415).',
      parameters: binaryModeHeaders,
      requestBody: {
        required: false,
        description:
          "structured mode: the event, in the JSON format; binary mode: the event's data, of the media type the content-type declares (its datacontenttype), or none",
        content: {
          [cloudEventsMediaType]: { schema: { type: 'object', required: ['specversion', 'id', 'source', 'type'] } },
          '*/*': { schema: {} },
        },
      },
      responses: {
        '202': { description: 'taken by the listed instances', content: { 'application/json': { schema: deliverySchema } } },
        '404': {
          description:
            'no waiting listen took it; nothing was stored by this send (a send again of an event an instance took is answered so once that instance has ended and this host no longer holds it)',
          content: { 'application/json': { schema: deliverySchema } },
        },
        '400': {
          description:
            'not a CloudEvent this runtime takes; in binary mode also a ce- header given twice, ce-data, ce-data_base64 or ce-datacontenttype, a header naming no attribute, ' +
            'a value not printable ASCII, with a malformed escape or escaped bytes not UTF-8 (the description names the header); in either mode two content-type headers',
          content: adapterErrorBody,
        },
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
        '415': {
          description:
            'neither mode: content-type not application/cloudevents+json (UTF-8) and no ce- headers; batched mode (application/cloudevents-batch+json) or another event format; ' +
            'in binary mode a content-type that is no media type, JSON or text data in a charset other than UTF-8, a body without a content-type; a content-encoding other than identity',
          content: adapterErrorBody,
        },
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
    const modes = new WeakMap<FastifyRequest, ContentMode>();
    // Every body is read as its bytes, whatever its media type: the route's preParsing hook chose the mode (and refused
    // every media type neither mode takes) before any is read, and the handler reads the bytes as that mode says.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: limits.cloudEventBytesMax }, (_request, body, done) => done(null, body));
    scope.post(
      '/workflow-events',
      {
        schema: postWorkflowEventSchema,
        bodyLimit: limits.cloudEventBytesMax,
        // Authentication runs before the body is read, as on every route.
        onRequest: async (request) => void callers.set(request, await options.authenticate(request.headers.authorization)),
        // Before a parser is chosen: a media type neither mode takes (batch mode, JSON in another charset) would otherwise be
        // read, and binary mode's headers are refused before its body is. The body is then unread and may still be arriving:
        // the connection closes after the refusal, as after a 401 (errors.ts).
        preParsing: async (request, reply) => {
          try {
            modes.set(request, contentModeOf(request));
          } catch (error) {
            void reply.header('connection', 'close');
            throw error;
          }
        },
      },
      async (request, reply) => {
        const caller = callers.get(request);
        const mode = modes.get(request);
        if (!caller || !mode) throw new AssertionFailure('the onRequest and preParsing hooks authenticated this request and chose its mode');
        const event = eventOf(mode, request.body as Buffer | undefined);
        const { matched } = await inFlight.bounded(caller.principalId, () => options.intake.deliver(event, caller.principalId));
        return reply.code(matched.length > 0 ? 202 : 404).send({ status: matched.length > 0 ? 'accepted' : 'no-match', matched });
      },
    );
  });
}

/** How a request carries its event: structured (the body is the event), or binary (its attributes, decoded, and its content-type). */
type ContentMode = { mode: 'structured' } | { mode: 'binary'; attributes: JsonObject; contentType: string | undefined };

/**
 * The request's content mode, as the HTTP binding tells them apart (§3): a content-type of the
 * CloudEvents media type is structured mode, this runtime's JSON format only (batched mode, and any
 * other format, 415); otherwise a request with `ce-` headers is binary mode, its headers read now;
 * anything else is no CloudEvent (415). Two content-type headers never reach it: every route
 * refuses them first (checkRequestHeaders).
 */
function contentModeOf(request: FastifyRequest): ContentMode {
  const raw = request.raw.rawHeaders;
  const contentType = request.headers['content-type'];
  const mediaType = contentType?.split(';', 1)[0]?.trim().toLowerCase();
  if (mediaType === cloudEventsMediaType && declaresUtf8(charsetsOf(contentType ?? ''))) return { mode: 'structured' };
  if (mediaType?.startsWith('application/cloudevents-batch')) throw new UnsupportedMediaType(undefined, batchRefusal);
  if (mediaType?.startsWith('application/cloudevents') || !carriesAttributeHeaders(raw)) throw new UnsupportedMediaType(undefined, modesRefusal);
  checkBinaryContentType(contentType);
  return { mode: 'binary', attributes: binaryAttributes(raw), contentType };
}

const modesRefusal = `content-type must be ${cloudEventsMediaType} (structured mode), or the event's attributes in ce- headers (binary mode)`;
const batchRefusal = `batched mode (application/cloudevents-batch+json) is not taken: send each event alone, in structured mode (${cloudEventsMediaType}) or binary mode (ce- headers)`;

/**
 * The event the request carries, checked as every event is (cloudEventProblem); in binary mode its refusals name its headers.
 * Either mode's event written as JSON past limits.cloudEventBytesMax is refused as too large (413), as a body past it is:
 * the body bound holds the bytes sent, and the event read from them may be larger (binary data as base64, text escaped;
 * in either mode a number as read, 1e-6 written 0.000001).
 */
function eventOf(mode: ContentMode, body: Buffer | undefined): CloudEvent {
  const event = mode.mode === 'structured' ? parseStrictBytes(body ?? Buffer.alloc(0), 'CloudEvent') : binaryEvent(mode.attributes, mode.contentType, body);
  const bytes = Buffer.byteLength(JSON.stringify(event), 'utf8');
  if (bytes > limits.cloudEventBytesMax)
    throw new ContentTooLarge(
      `the event read from ${mode.mode} mode is ${bytes} bytes written as JSON (${mode.mode === 'binary' ? 'binary data as base64, text escaped, ' : ''}numbers as read: 1e-6 is 0.000001); ` +
        `at most ${limits.cloudEventBytesMax} (limits.cloudEventBytesMax)`,
    );
  const problem = mode.mode === 'structured' ? cloudEventProblem(event) : cloudEventProblem(event, binaryMemberName);
  if (problem !== undefined) throw invalidInput(`not a CloudEvent this runtime takes: ${problem}`);
  return event as CloudEvent;
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
