/**
 * Where a workflow may read its secrets. An instance's log records every expression's result (so
 * a replay never evaluates anything), so a secret may only be read where its value goes nowhere
 * but into an outgoing request and never into a recorded value:
 *
 * - `$secrets.<name>` inside a `${ }` that is the whole value of an HTTP call's header
 *   (`with.headers.<header>`) or of its authentication's credential
 *   (`with.endpoint.authentication.basic.username|password`, `…bearer.token`), or of an OpenAPI
 *   call's credential (`with.authentication.…` for the operation,
 *   `with.document.endpoint.authentication.…` for fetching its document);
 * - a secret-based authentication policy: `basic: {use: <name>}` (the secret holds `{username,
 *   password}`), `bearer: {use: <name>}` (it holds `{token}`);
 * - the same credentials in a named policy (`use.authentications.<name>.basic.password`), read
 *   when a call that names it (`authentication: {use: <name>}`) makes its request.
 *
 * Those values are evaluated when the request is made, never recorded: the recorded `with` holds
 * `[redacted]` in their place, and a recorded request (`output: response`) shows those headers
 * and `authorization` as `[redacted]`. A worker that makes the call again (after a crash) reads
 * the secrets again; a replay of the log needs none. Anywhere else — `input.from` included, which
 * the DSL allows but whose result is the task's recorded input — `$secrets` is refused as
 * unsupported, as is a name not declared in `use.secrets`. So is `$authorization` (the DSL's
 * resolved credential of a call's authentication), anywhere: it is not bound, since any expression
 * reading it would record the credential.
 *
 * Where a request that carries a secret may go is the deployment's to say, not the document's: a
 * secret given origins (config workflowSecrets.<name>.origins) is sent to no other (calls.ts
 * refuses the request before it is made).
 */
import { invalidInput, unsupported } from '../contract/errors.js';
import { jsonPointer } from '../contract/ijson.js';
import { isObject, type JsonObject, type JsonValue } from '../contract/json.js';
import { limits } from '../contract/limits.js';

/** What a recorded value shows in place of a secret's. */
export const redacted = '[redacted]';

/**
 * Why a secret's value cannot be kept out of recorded answers, or undefined when it can. Every
 * string the value holds (a number's or a boolean's text too) is replaced wherever a recorded answer
 * holds it, so each must be at least limits.workflowSecretBytesMin bytes: a shorter one ("a",
 * "1") would be found in data that never held it, corrupting it, and which answers changed would
 * tell the value. An object's `username` is no credential and need not be: one shorter than the
 * minimum is sent but not scrubbed (calls.ts). The problem names the member, never its value.
 */
export function secretValueProblem(value: JsonValue): string | undefined {
  const stack: { value: JsonValue; path: (string | number)[] }[] = [{ value, path: [] }];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const { value: item, path } = entry;
    if (Array.isArray(item)) item.forEach((inner, index) => stack.push({ value: inner, path: [...path, index] }));
    else if (isObject(item)) {
      for (const [key, inner] of Object.entries(item)) if (!(path.length === 0 && key === 'username')) stack.push({ value: inner, path: [...path, key] });
    } else if (item !== null && Buffer.byteLength(String(item), 'utf8') < limits.workflowSecretBytesMin)
      return `${path.length === 0 ? 'its value' : `its ${path.length === 1 ? String(path[0]) : jsonPointer(path)}`} is shorter than ${limits.workflowSecretBytesMin} bytes (every occurrence of a secret in a recorded answer is replaced: a shorter one would be found in data that never held it, corrupting the data and telling the value by what changed)`;
  }
  return undefined;
}

const mention = /\$secrets\b/;
const authorization = /\$authorization\b/;
const named = /\$secrets\.([A-Za-z_][A-Za-z0-9_]*)/g;
const wholeExpression = /^\s*\$\{[\s\S]*\}\s*$/;

/** The secret names an expression reads (`$secrets.<name>`). */
export function secretNames(expression: string): string[] {
  return [...expression.matchAll(named)].map((match) => match[1] as string);
}

export const mentionsSecrets = (value: string): boolean => mention.test(value);

/**
 * Where a call's authentication policies sit under its `with`: an HTTP call's endpoint; an OpenAPI
 * call's operation (`authentication`) and the endpoint of its document.
 */
export function authenticationPlaces(call: JsonValue | undefined): readonly (readonly string[])[] {
  if (call === 'http') return [['endpoint', 'authentication']];
  if (call === 'openapi') return [['authentication'], ['document', 'endpoint', 'authentication']];
  return [];
}

/** The value at `path` under a call's `with` (one of its authentication places), if any. */
export function valueAt(value: JsonValue | undefined, path: readonly string[]): JsonValue | undefined {
  let current = value;
  for (const key of path) current = isObject(current) && Object.hasOwn(current, key) ? current[key] : undefined;
  return current;
}

/** Calls whose `with` may read secrets (where isSecretPlace says). */
const readsSecrets = (call: JsonValue | undefined): boolean => call === 'http' || call === 'openapi';

/**
 * Where, under a call's `with`, a secret may be read: an HTTP call's `headers.<h>`; a basic
 * credential (`…basic.username|password`) or a bearer token (`…bearer.token`) of one of its
 * authentication places.
 */
export function isSecretPlace(path: readonly (string | number)[], call: JsonValue | undefined = 'http'): boolean {
  if (call === 'http' && path.length === 2 && path[0] === 'headers' && typeof path[1] === 'string') return true;
  return authenticationPlaces(call).some((place) => {
    if (path.length !== place.length + 2 || !place.every((key, index) => path[index] === key)) return false;
    const [scheme, field] = path.slice(place.length);
    return (scheme === 'basic' && (field === 'username' || field === 'password')) || (scheme === 'bearer' && field === 'token');
  });
}

/**
 * Refuses a document that reads `$secrets` anywhere but where it may (above), names a secret
 * `use.secrets` does not declare, or names `$authorization`. `skip` leaves a subtree out (the contract function's
 * declaration, written for other engines). Pointers are `base` + the document's.
 */
export function checkSecretUses(document: JsonObject, base = '', skip: (path: readonly (string | number)[]) => boolean = () => false): void {
  const use = isObject(document.use) ? document.use : {};
  const declared = new Set(Array.isArray(use.secrets) ? use.secrets.filter((s): s is string => typeof s === 'string') : []);
  // `within`: where the enclosing HTTP or OpenAPI call's `with` starts (its path length) and which call it is (a place is judged relative to it).
  type Within = { at: number; call: JsonValue } | undefined;
  const stack: { value: JsonValue; path: (string | number)[]; within: Within }[] = [{ value: document, path: [], within: undefined }];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const { value, path, within } = entry;
    if (skip(path)) continue;
    if (typeof value === 'string') {
      if (authorization.test(value))
        throw unsupported(
          `${base + jsonPointer(path)}: $authorization is not bound: it holds a call's resolved credential, every expression's result is recorded in the instance's log, and a credential must never be`,
        );
      if (mentionsSecrets(value)) checkUse(value, path, within, declared, base);
    } else if (Array.isArray(value)) {
      value.forEach((item, index) => stack.push({ value: item, path: [...path, index], within }));
    } else if (isObject(value)) {
      const call = readsSecrets(value.call) ? value.call : undefined;
      for (const [key, item] of Object.entries(value))
        stack.push({ value: item, path: [...path, key], within: call !== undefined ? (key === 'with' ? { at: path.length + 1, call } : undefined) : within });
    }
  }
}

function checkUse(
  value: string,
  path: (string | number)[],
  within: { at: number; call: JsonValue } | undefined,
  declared: ReadonlySet<string>,
  base: string,
): void {
  const where = base + jsonPointer(path);
  // A named policy's credential (`use.authentications.<name>.basic.password`) is read where a call that names it reads an inline one.
  const named = path.length === 5 && path[0] === 'use' && path[1] === 'authentications' ? ['endpoint', 'authentication', ...path.slice(3)] : undefined;
  const place = named ?? (within === undefined ? undefined : path.slice(within.at));
  if (place === undefined || !isSecretPlace(place, named ? 'http' : within?.call) || !wholeExpression.test(value))
    throw unsupported(
      `${where}: $secrets is read only in a \${ } that is an HTTP call's header value or a basic or bearer credential (inline or in use.authentications, of an HTTP call or an OpenAPI call or its document): every other expression's result is recorded in the instance's log, and a secret must never be`,
    );
  for (const name of secretNames(value)) if (!declared.has(name)) throw invalidInput(`${where}: the secret "${name}" is not declared in use.secrets`);
}
