/**
 * Request bodies: application/json only, read as raw bytes up to the configured limit and parsed
 * by the strict I-JSON parser. Fastify's default JSON.parse keeps the last of two duplicate keys;
 * two readers of one body could then disagree on the input behind one digest, so the default
 * parsers are removed and nothing else can reach a route.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseStrictBytes } from '../contract/ijson.js';
import { UnsupportedMediaType } from './errors.js';

export function installStrictJsonBodies(app: FastifyInstance, bodyLimitBytes: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: bodyLimitBytes }, (request, body, done) => {
    try {
      checkCharset(request);
      done(null, parseStrictBytes(body as Buffer, 'request body'));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}

/** JSON is UTF-8 (RFC 8259 §8.1); a body declared in another charset would be decoded wrongly. */
function checkCharset(request: FastifyRequest): void {
  const header = request.headers['content-type'] ?? '';
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(header)?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') throw new UnsupportedMediaType();
}

/**
 * A POST with no content-type and no body never reaches the parser; it is still not JSON.
 * (Used as the route's preValidation hook.)
 */
export async function requireJsonContentType(request: FastifyRequest): Promise<void> {
  if (request.headers['content-type'] === undefined) throw new UnsupportedMediaType();
}
