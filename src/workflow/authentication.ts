/**
 * Authentication policies of HTTP calls: inline (`endpoint.authentication: {basic: …}`), by name
 * (`endpoint.authentication: {use: name}`, the policy in `use.authentications`), or secret-based
 * (`basic: {use: secret}`). A credential always comes from the deployment's secrets — a
 * `${ … $secrets.<name> … }` credential or a secret-based policy — and is never recorded
 * (src/workflow/secrets.ts); an inline policy may also compute it from the workflow's data (the
 * caller's input: `${ .password }`, as the conformance kit does), which is recorded with that
 * data. A literal credential is refused (`invalid-input`: a bundle never holds a raw credential),
 * and so is a named policy whose credential does not read `$secrets` (`unsupported`: a policy
 * shared by a document's calls stands for the deployment's credential, never the data's). basic
 * and bearer are supported; digest, oauth2, oidc and certificate are refused as `unsupported`.
 */
import { invalidInput, unsupported } from '../contract/errors.js';
import { isObject, type JsonObject, type JsonValue } from '../contract/json.js';
import { mentionsSecrets } from './secrets.js';

const schemes = ['basic', 'bearer', 'digest', 'oauth2', 'oidc', 'certificate'] as const;
/** The credential fields of each supported scheme. */
const credentials: Readonly<Record<'basic' | 'bearer', readonly string[]>> = { basic: ['username', 'password'], bearer: ['token'] };
const wholeExpression = /^\s*\$\{[\s\S]*\}\s*$/;

const refusedReason: Readonly<Record<string, string>> = {
  digest: 'digest authentication answers a server challenge, which this executor does not do',
  oauth2: 'oauth2 needs a token request to an authorization server, which this executor does not make',
  oidc: 'oidc needs a token request to an identity provider, which this executor does not make',
  certificate: 'certificate authentication needs a client certificate, which this executor does not hold',
};

/** The policies a document declares in `use.authentications`. */
export function namedAuthentications(document: JsonValue): JsonObject {
  const use = isObject(document) && isObject(document.use) ? document.use : undefined;
  return use && isObject(use.authentications) ? use.authentications : {};
}

/**
 * The policy an HTTP call's `endpoint.authentication` stands for: a reference `{use: name}`
 * resolved in `use.authentications` (undefined when it names none), or the inline policy itself.
 */
export function resolveAuthentication(document: JsonValue, authentication: JsonValue | undefined): JsonValue | undefined {
  if (isObject(authentication) && Object.keys(authentication).length === 1 && typeof authentication.use === 'string')
    return namedAuthentications(document)[authentication.use];
  return authentication;
}

/**
 * Checks a call's `endpoint.authentication` (`where` is its pointer): a reference must name a
 * policy of `use.authentications`, and an inline policy must be one this executor can apply
 * without a recorded credential.
 */
export function checkCallAuthentication(document: JsonValue, authentication: JsonValue, where: string): void {
  if (isObject(authentication) && Object.keys(authentication).length === 1 && authentication.use !== undefined) {
    if (typeof authentication.use !== 'string' || !Object.hasOwn(namedAuthentications(document), authentication.use))
      throw invalidInput(`${where}/use: ${JSON.stringify(authentication.use)} names no entry of use.authentications`);
    return;
  }
  checkAuthenticationPolicy(authentication, where, false);
}

/** Checks one policy: inline, or (`named`) an entry of use.authentications at `where`. */
export function checkAuthenticationPolicy(policy: JsonValue, where: string, named: boolean): void {
  const present = isObject(policy) ? schemes.filter((scheme) => policy[scheme] !== undefined) : [];
  if (!isObject(policy) || present.length !== 1 || Object.keys(policy).length !== 1)
    throw invalidInput(`${where}: an authentication policy has exactly one of ${schemes.join(', ')} (or is {use: <name of a policy in use.authentications>})`);
  const scheme = present[0] as (typeof schemes)[number];
  if (scheme !== 'basic' && scheme !== 'bearer')
    throw unsupported(`${where}/${scheme}: ${refusedReason[scheme] ?? 'not supported'}; use basic or bearer credentials from $secrets`);
  const body = policy[scheme];
  if (!isObject(body)) throw invalidInput(`${where}/${scheme}: must be an object`);
  if (body.use !== undefined) {
    if (typeof body.use !== 'string' || Object.keys(body).length !== 1)
      throw invalidInput(`${where}/${scheme}/use: the name of a secret, and nothing beside it`);
    return;
  }
  for (const field of credentials[scheme]) checkCredential(body[field], `${where}/${scheme}/${field}`, named);
  for (const field of Object.keys(body))
    if (!credentials[scheme].includes(field)) throw invalidInput(`${where}/${scheme}/${field}: not a ${scheme} credential (${credentials[scheme].join(', ')})`);
}

function checkCredential(value: JsonValue | undefined, where: string, named: boolean): void {
  if (typeof value !== 'string') throw invalidInput(`${where}: required, a \${ } expression reading $secrets`);
  if (!value.includes('${'))
    throw invalidInput(
      `${where}: a literal credential; a document (and the bundle that pins it) never holds a raw credential: read it from $secrets (\${ $secrets.<name>.<field> }) or use a secret-based policy ({use: <secret>})`,
    );
  if (!wholeExpression.test(value)) throw invalidInput(`${where}: a credential is one \${ } expression`);
  if (named && !mentionsSecrets(value))
    throw unsupported(
      `${where}: a named policy's credential must come from $secrets (\${ $secrets.<name>.<field> }): it stands for the deployment's credential, and one computed from the workflow's data is recorded in the instance's log`,
    );
}
