/**
 * The facade's one error mapping. Adapter error kinds take their status from httpStatusOf in
 * src/contract/errors.ts (the only kind→status map); this module adds only what HTTP itself
 * knows: 401 (no or bad credentials), 404 (missing or hidden operation, unknown route),
 * 413 (body over the limit), 415 (not JSON) and Retry-After on a principal's admission rate.
 * Every body is an AdapterError.
 */
import { describeErrors } from '../contract/validation.js';
import type { AdapterErrorBody } from '../contract/errors.js';
import { adapterErrorStatus, internalError, type InternalErrorSubject } from '../runtime/errors.js';
import { RateLimited } from '../runtime/admission-rate.js';

/** No credential, a malformed one, or one that matches no principal: one answer for all. */
export class AuthenticationRequired extends Error {
  override readonly name = 'AuthenticationRequired';
  constructor(readonly reason: 'missing' | 'invalid') {
    super('authentication required');
  }
}

/** The body is not of the route's media type (application/json unless named), declares a charset other than UTF-8, or is encoded. */
export class UnsupportedMediaType extends Error {
  override readonly name = 'UnsupportedMediaType';
  constructor(mediaType = 'application/json', description = `content-type must be ${mediaType}`) {
    super(description);
  }
}

export interface ErrorReply {
  statusCode: number;
  body: AdapterErrorBody;
  headers: Record<string, string>;
}

/** The closest Fastify-level failures, by Fastify's error code. */
const bodyTooLarge = 'FST_ERR_CTP_BODY_TOO_LARGE';
const mediaTypeCodes = new Set(['FST_ERR_CTP_INVALID_MEDIA_TYPE', 'FST_ERR_CTP_INVALID_TYPE']);

/**
 * What a route's schema refused, described. A query string's values are strings, and an array
 * only where the parameter was given more than once: a string parameter refused as "must be
 * string" was repeated, and is said so (its value is not of a wrong type).
 */
function validationProblem(context: string, errors: NonNullable<FrameworkError['validation']>): string {
  const repeated = (error: (typeof errors)[number]) =>
    context === 'querystring' && error.keyword === 'type' && (error.params as { type?: unknown }).type === 'string' && /^\/[^/]+$/.test(error.instancePath);
  if (errors.length > 0 && errors.every(repeated))
    return errors.map((error) => `${error.instancePath.slice(1)} is given more than once: give it once`).join('; ');
  return describeErrors(errors);
}

interface FrameworkError {
  code?: string;
  statusCode?: number;
  message?: string;
  validation?: Parameters<typeof describeErrors>[0];
  validationContext?: string;
}

/**
 * What a bug's 500 on each route says is unknown (internalErrors), keyed by method and route; a
 * route not named here changes nothing, and its 500 says only to ask again.
 */
const routeSubjects: Readonly<Record<string, InternalErrorSubject>> = {
  'POST /contract-invocations': 'invoke',
  'GET /contract-invocations': 'list',
  'GET /contract-invocations/:operationId': 'get',
  'GET /contract-invocations/:operationId/transitions': 'get',
  'POST /contract-invocations/:operationId/cancel': 'cancel',
  'POST /workflow-instances': 'workflow-start',
  'GET /workflow-instances': 'workflow-list',
  'GET /workflow-instances/:instanceId': 'workflow-get',
  'GET /workflow-instances/:instanceId/transitions': 'workflow-get',
  'POST /workflow-instances/:instanceId/cancel': 'workflow-cancel',
  'POST /workflow-events': 'workflow-event',
};

/** The subject of a route's 500 (its method and route pattern, as Fastify names the route). */
export function internalErrorOfRoute(method: string | undefined, route: string | undefined): InternalErrorSubject {
  return (method !== undefined && route !== undefined ? routeSubjects[`${method} ${route}`] : undefined) ?? 'other';
}

/**
 * Maps anything a route can throw to a status and an AdapterError body; `bodyLimitBytes` is the
 * route's bound, `subject` what its 500 says is unknown (internalErrorOfRoute).
 */
export function errorReply(error: unknown, bodyLimitBytes: number, subject: InternalErrorSubject): ErrorReply {
  if (error instanceof AuthenticationRequired) {
    const challenge = error.reason === 'invalid' ? 'Bearer realm="convoke", error="invalid_token"' : 'Bearer realm="convoke"';
    // Authentication runs before the body is read, so an unread body may still be arriving: the
    // connection closes after the 401, or Node would later time the unfinished request out and
    // write an unsolicited 408 on the same connection.
    return {
      statusCode: 401,
      body: { kind: 'denied', description: 'authentication required' },
      headers: { 'www-authenticate': challenge, connection: 'close' },
    };
  }
  const known = adapterErrorStatus(error);
  // A principal's admission rate says when its next admission can come: in whole seconds, rounded up.
  if (known && error instanceof RateLimited)
    return { statusCode: known.status, body: known.body, headers: { 'retry-after': String(Math.ceil(error.retryAfterMs / 1000)) } };
  if (known) return { statusCode: known.status, body: known.body, headers: {} };
  if (error instanceof UnsupportedMediaType) return unsupportedMediaType(error.message);
  const framework = (error ?? {}) as FrameworkError;
  if (framework.code === bodyTooLarge) {
    return { statusCode: 413, body: { kind: 'invalid-input', description: `body exceeds ${bodyLimitBytes} bytes` }, headers: { connection: 'close' } };
  }
  if (framework.code !== undefined && mediaTypeCodes.has(framework.code)) return unsupportedMediaType();
  if (Array.isArray(framework.validation)) {
    const context = framework.validationContext ?? 'request';
    return { statusCode: 400, body: { kind: 'invalid-input', description: `${context}: ${validationProblem(context, framework.validation)}` }, headers: {} };
  }
  // Other client errors Fastify detects (content-length mismatch, bad URL encoding...): the request is wrong.
  const status = framework.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return { statusCode: 400, body: { kind: 'invalid-input', description: boundedMessage(framework.message) }, headers: {} };
  }
  return { statusCode: 500, body: internalError(subject), headers: {} };
}

function unsupportedMediaType(description = 'content-type must be application/json'): ErrorReply {
  return { statusCode: 415, body: { kind: 'invalid-input', description }, headers: { connection: 'close' } };
}

function boundedMessage(message: string | undefined): string {
  const text = message ?? 'bad request';
  return text.length > 512 ? `${text.slice(0, 512)}…` : text;
}

/** The body for a route that does not exist: 404, an AdapterError like every other error. */
export function routeNotFound(method: string, url: string): ErrorReply {
  const path = url.split('?')[0] ?? '';
  return {
    statusCode: 404,
    body: { kind: 'invalid-input', description: `no route ${method} ${path.length > 200 ? path.slice(0, 200) + '…' : path}` },
    headers: {},
  };
}
