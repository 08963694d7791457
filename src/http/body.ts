/**
 * Request bodies: application/json only, read as raw bytes up to the configured limit and parsed
 * by the strict I-JSON parser. Fastify's default JSON.parse keeps the last of two duplicate keys;
 * two readers of one body could then disagree on the input behind one digest, so the default
 * parsers are removed and nothing else can reach a route. A body is read to limits.jsonDepthMax
 * plus the levels its route declares above the value it carries (BodyLevelsConfig).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseStrictBody } from '../contract/ijson.js';
import { invalidInput } from '../contract/errors.js';
import { UnsupportedMediaType } from './errors.js';

export function installStrictJsonBodies(app: FastifyInstance, bodyLimitBytes: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: bodyLimitBytes }, (request, body, done) => {
    try {
      checkCharset(request);
      done(null, parseStrictBody(body as Buffer, 'request body', bodyLevelsOf(request)));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}

/**
 * A route's `config.bodyLevels`: the levels its body adds above the value it carries (an invocation
 * request's or a workflow start's input), so that the body is read to limits.jsonDepthMax plus
 * these and an input as deep as admission takes is read; none for every other route's body.
 */
export interface BodyLevelsConfig {
  bodyLevels?: number;
}

function bodyLevelsOf(request: FastifyRequest): number {
  return (request.routeOptions.config as BodyLevelsConfig | undefined)?.bodyLevels ?? 0;
}

/** JSON is UTF-8 (RFC 8259 §8.1); a body declared in another charset would be decoded wrongly. */
function checkCharset(request: FastifyRequest): void {
  const charsets = charsetsOf(request.headers['content-type'] ?? '');
  if (charsets.length > 1) throw new UnsupportedMediaType(undefined, `content-type names one charset, not ${charsets.length}`);
  if (!declaresUtf8(charsets)) throw new UnsupportedMediaType();
}

/**
 * The charset parameters of a content-type, lower-cased, in the order written. A charset named
 * twice is refused whatever the values (RFC 6838 §4.3: a parameter is given once): a proxy in
 * front, or the sender's library, may take the last where a route takes the first, and read the
 * body as another text than the one parsed here.
 */
export function charsetsOf(contentType: string): string[] {
  return [...contentType.matchAll(/;\s*charset\s*=\s*"?([^";\s]*)"?/gi)].map((match) => (match[1] ?? '').toLowerCase());
}

/** Whether a body with these charset parameters (charsetsOf) is UTF-8: none, or exactly one naming it. */
export function declaresUtf8(charsets: readonly string[]): boolean {
  if (charsets.length === 0) return true;
  return charsets.length === 1 && (charsets[0] === 'utf-8' || charsets[0] === 'utf8');
}

/**
 * Headers a request may not leave open to two readings, checked before authentication and before
 * any body is read. Two authorization headers: Node keeps the first, a proxy in front may check
 * the last, so the caller one part authenticated would not be the one another acted for — 400.
 * Two content-type headers, the same way: the media type a body is read as (JSON, a CloudEvent, a
 * binary-mode event's data) would depend on who reads it — 400.
 * Two host headers, or none in HTTP/1.1 (`httpVersion` as Node read it): RFC 9112 §3.2 has a
 * server refuse both, 400; a proxy routing by one host and a reader taking another would disagree
 * on whom the request is for. A content-encoding other than identity: bodies are read as sent,
 * never decompressed, so a compressed body would be taken for JSON text it is not, or an
 * uncompressed one labelled compressed read otherwise than its sender meant — 415.
 */
export function checkRequestHeaders(rawHeaders: readonly string[], httpVersion: string): void {
  let authorizations = 0;
  let hosts = 0;
  let contentTypes = 0;
  for (let at = 0; at + 1 < rawHeaders.length; at += 2) {
    const name = (rawHeaders[at] as string).toLowerCase();
    if (name === 'authorization') authorizations++;
    else if (name === 'host') hosts++;
    else if (name === 'content-type') contentTypes++;
    else if (name === 'content-encoding') {
      const coding = (rawHeaders[at + 1] as string).trim().toLowerCase();
      if (coding !== 'identity')
        throw new UnsupportedMediaType(
          undefined,
          `content-encoding must be identity (bodies are read as sent, never decompressed), not ${JSON.stringify(coding.slice(0, 64))}`,
        );
    }
  }
  if (authorizations > 1)
    throw invalidInput(`a request carries one authorization header, not ${authorizations}: which one names the caller would depend on who reads it`);
  if (contentTypes > 1)
    throw invalidInput(`a request carries one content-type header, not ${contentTypes}: the media type its body is read as would depend on who reads it`);
  if (hosts > 1) throw invalidInput(`a request carries one host header, not ${hosts} (RFC 9112 §3.2)`);
  if (hosts === 0 && httpVersion === '1.1') throw invalidInput('an HTTP/1.1 request carries a host header (RFC 9112 §3.2)');
}

/**
 * A POST with no content-type and no body never reaches the parser; it is still not JSON.
 * (Used as the route's preValidation hook.)
 */
export async function requireJsonContentType(request: FastifyRequest): Promise<void> {
  if (request.headers['content-type'] === undefined) throw new UnsupportedMediaType();
}
