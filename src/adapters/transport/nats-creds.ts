/**
 * NATS credentials files (`.creds`, as `nsc` writes them): a user JWT and the user's nkey seed,
 * each between `-----BEGIN …-----` and `------END …------` lines. nats.js's credsAuthenticator
 * parses the file only when it connects, and then says no more than "unable to parse
 * credentials"; this checks it first, so a wrong file is an error naming what is wrong with it.
 * Nothing here ever puts the seed in a message.
 */
import { credsAuthenticator, nkeys, type Authenticator } from '@nats-io/transport-node';
import { invalidInput } from '../../contract/errors.js';

/** How a NATS connection logs in: a user and password, or a credentials file's contents (JWT + seed). */
export type NatsLogin = { user: string; pass: string } | { creds: Uint8Array };

// The same blocks nats.js's credsAuthenticator reads: a dashed line, the content, a dashed line.
const blockPattern = /\s*(?:(?:[-]{3,}[^\n]*[-]{3,}\n)(.+)(?:\n\s*[-]{3,}[^\n]*[-]{3,}\n))/gi;

/**
 * Checks that `bytes` are a user credentials file: a JWT of three base64url parts whose claims
 * are a user's, then a user seed (SU…) that nkeys accepts. `where` names the file in errors.
 * Answers the JWT's subject (the user's public key) and name, for messages.
 */
export function checkCreds(bytes: Uint8Array, where: string): { publicKey: string; name: string | undefined } {
  const text = new TextDecoder().decode(bytes);
  blockPattern.lastIndex = 0;
  const jwt = blockPattern.exec(text)?.[1]?.trim();
  const seed = blockPattern.exec(text)?.[1]?.trim();
  if (jwt === undefined || seed === undefined)
    throw invalidInput(`${where} is not a NATS credentials file: it needs a user JWT block and a user nkey seed block (as nsc generate creds writes them)`);
  const parts = jwt.split('.');
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]+$/.test(p))) throw invalidInput(`${where}: the JWT block is not a JWT`);
  let claims: { sub?: unknown; name?: unknown; nats?: { type?: unknown } };
  try {
    claims = JSON.parse(Buffer.from(parts[1] as string, 'base64url').toString('utf8')) as typeof claims;
  } catch (error) {
    throw invalidInput(`${where}: the JWT's claims are not JSON`, error);
  }
  if (claims.nats?.type !== undefined && claims.nats.type !== 'user')
    throw invalidInput(`${where}: the JWT is a ${String(claims.nats.type)} JWT, not a user's`);
  if (!seed.startsWith('SU')) throw invalidInput(`${where}: the seed block does not hold a user nkey seed (SU…)`);
  let publicKey: string;
  try {
    publicKey = nkeys.fromSeed(new TextEncoder().encode(seed)).getPublicKey();
  } catch (error) {
    // The nkeys error names the problem (checksum, prefix), never the seed.
    throw invalidInput(`${where}: the user nkey seed is not valid (${(error as Error).message})`, error);
  }
  if (typeof claims.sub === 'string' && claims.sub !== publicKey) throw invalidInput(`${where}: the seed is not the key the JWT was issued to (${claims.sub})`);
  return { publicKey, name: typeof claims.name === 'string' ? claims.name : undefined };
}

/**
 * The connect options of a login: an authenticator over the credentials when there are some (a
 * user name is then convoke's own label and is not sent), else the user and password.
 */
export function loginOptions(login: { user?: string; pass?: string; creds?: Uint8Array }): { user?: string; pass?: string; authenticator?: Authenticator } {
  if (login.creds !== undefined) return { authenticator: credsAuthenticator(login.creds) };
  return { user: login.user, pass: login.pass };
}
