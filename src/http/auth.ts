/**
 * Bearer authentication. A static token is hashed with SHA-256 and compared, in constant time,
 * with every configured hash (no early exit, so timing does not reveal which principal almost
 * matched); the config never holds a token. Optionally a JWT is verified against a local public
 * JWKS with issuer and audience checked. Time for JWT expiry comes from the deployment clock, not
 * the wall clock.
 *
 * Each source names principals in its own namespace: a static principal is its configured id; a
 * JWT's principal is the configured prefix (default `jwt:<issuer>:`) followed by its `sub`, and
 * the config refuses static ids inside that prefix. A JWT whose `sub` equals a static principal's
 * id is therefore another principal, and sees none of that principal's operations.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet, type JWTVerifyOptions } from 'jose';
import { hasLoneSurrogate } from '../contract/ijson.js';
import { limits } from '../contract/limits.js';
import type { HttpSettings } from './settings.js';
import type { Clock } from '../contract/clock.js';
import type { Caller } from '../runtime/service.js';
import { AuthenticationRequired } from './errors.js';

export type Authenticate = (authorization: string | undefined) => Promise<Caller>;

/**
 * A caller and how long its credential holds: a JWT's `exp` (ms), `null` for a static token (it
 * holds until the config changes). A response that outlasts its request (an event stream) ends then.
 */
export type AuthenticateSession = (authorization: string | undefined) => Promise<{ caller: Caller; untilMs: number | null }>;

/** RFC 6750 b64token, bounded: anything else is not a credential we could hold. */
const bearerPattern = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** The two views of one authenticator: the caller, and the caller with its credential's end. */
export function createAuthenticator(
  settings: Pick<HttpSettings, 'principals' | 'jwt'>,
  clock: Clock,
): { authenticate: Authenticate; session: AuthenticateSession } {
  const session = sessionAuthenticator(settings, clock);
  return { authenticate: async (authorization) => (await session(authorization)).caller, session };
}

function sessionAuthenticator(settings: Pick<HttpSettings, 'principals' | 'jwt'>, clock: Clock): AuthenticateSession {
  const principals = settings.principals;
  const jwt = settings.jwt ? jwtVerifier(settings.jwt, clock) : undefined;
  return async (authorization) => {
    if (authorization === undefined || authorization.length === 0) throw new AuthenticationRequired('missing');
    const token = authorization.length <= limits.bearerTokenCharsMax + 16 ? bearerPattern.exec(authorization)?.[1] : undefined;
    if (token === undefined) throw new AuthenticationRequired('invalid');
    const digest = sha256(token);
    let match: (typeof principals)[number] | undefined;
    for (const principal of principals) {
      // Every hash is compared, whatever matched before.
      if (timingSafeEqual(digest, principal.tokenSha256) && match === undefined) match = principal;
    }
    if (match) return { caller: { principalId: match.principalId, senderPeerId: match.senderPeerId }, untilMs: null };
    if (jwt && isCompactJws(token)) return jwt(token);
    throw new AuthenticationRequired('invalid');
  };
}

function isCompactJws(token: string): boolean {
  const parts = token.split('.');
  return parts.length === 3 && parts.every((p) => p.length > 0);
}

function jwtVerifier(config: NonNullable<HttpSettings['jwt']>, clock: Clock): (token: string) => Promise<{ caller: Caller; untilMs: number }> {
  const keys = createLocalJWKSet(config.jwks as unknown as JSONWebKeySet);
  return async (token) => {
    const options: JWTVerifyOptions = {
      issuer: config.issuer,
      audience: config.audience,
      currentDate: new Date(clock.nowMs()),
      requiredClaims: ['sub', 'exp'],
    };
    if (config.algorithms) options.algorithms = config.algorithms;
    let sub: unknown;
    let exp: unknown;
    try {
      ({ sub, exp } = (await jwtVerify(token, keys, options)).payload);
    } catch {
      // Expired, wrong issuer/audience, unknown key, bad signature: all the same 401, no detail to probe with.
      throw new AuthenticationRequired('invalid');
    }
    // jose has checked exp (a required claim) is a number in the future.
    if (typeof sub !== 'string' || typeof exp !== 'number') throw new AuthenticationRequired('invalid');
    return { caller: { principalId: jwtPrincipalId(config.principalPrefix, sub), senderPeerId: null }, untilMs: exp * 1000 };
  };
}

/**
 * The JWT namespace's principal id for `sub`. A subject that cannot make a principal id (empty,
 * lone surrogates or control characters, or too long once prefixed) is a credential we cannot
 * hold: 401, like any other invalid token.
 */
export function jwtPrincipalId(prefix: string, sub: string): string {
  const principalId = prefix + sub;
  const wellFormed = sub.length > 0 && !hasLoneSurrogate(sub) && !controlCharacters.test(sub);
  if (!wellFormed || Buffer.byteLength(principalId, 'utf8') > limits.principalIdBytesMax) throw new AuthenticationRequired('invalid');
  return principalId;
}

// eslint-disable-next-line no-control-regex -- a token with a control character is refused, so the pattern names them
const controlCharacters = /[\u0000-\u001f\u007f]/;
