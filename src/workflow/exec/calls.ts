/**
 * Calls: `call: http` (a real HTTP request through the injected fetch), `call: openapi` (the
 * operation an OpenAPI document describes, made as an HTTP request by the same code: openapi.ts)
 * and `call: invoke-contract` (a contract invocation through the InvocationService, in-process
 * when embedded).
 *
 * A call's answer is recorded (call-answered) before the workflow uses it, so a replayed instance
 * never calls again. A call in flight when a worker dies is made again on recovery: an HTTP call
 * is at least once; a contract call is exactly one operation, because its invocation key and
 * operation id are recorded (child-bound) before the call and the runtime answers a known key
 * with the operation it already admitted.
 */
import { AdapterError } from '../../contract/errors.js';
import { nestingProblem } from '../../contract/ijson.js';
import { sha256Hex } from '../../contract/canonical.js';
import { operationId } from '../../contract/ids.js';
import { ownMember, setMember, type JsonObject, type JsonValue } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';
import { quoted } from '../../contract/validation.js';
import type { ContractRef, WaitFor } from '../../contract/types.js';
import { outputResultLevels, type InvocationResult } from '../../projections/views.js';
import { stageInvocationKey } from '../ids.js';
import { contractDecisionErrorType, contractOutputErrorType, contractSettlementErrorType } from '../contract-errors.js';
import { isObject } from './document.js';
import { WorkflowRaise, raise, raiseAdapterError } from './dsl-errors.js';
import type { WorkflowError } from './events.js';
import type { Interpreting as Interpreter, TaskRun } from './run.js';
import { Halted } from './journal.js';
import { authenticationPlaces, mentionsSecrets, redacted, secretNames, valueAt } from '../secrets.js';
import { resolveAuthentication } from '../authentication.js';
import { egressRefusalOf, originMatches, originText, urlHost } from '../../contract/origins.js';
import { scrubEchoes, scrubEchoesText } from './echoes.js';
import { buildRequest, parseOpenApi, resolveOperation, type ResolvedOperation } from './openapi.js';

export const contractFunction = 'invoke-contract';

export async function runCall(interpreter: Interpreter, run: TaskRun): Promise<JsonValue> {
  const task = run.entry.task;
  const spec = withNamedPolicies(interpreter.record.started.document, task.with ?? {}, authenticationPlaces(task.call));
  // Values that read secrets are recorded as [redacted], and evaluated only when the request is made.
  const secret = secretValuesOf(spec, task.call);
  const shown = secret.length === 0 ? spec : redactAt(spec, secret);
  const args = await interpreter.evaluateArgs(`${run.at}>with`, shown, run.input, run.frame, { input: run.input }, run.entry.pointer);
  if (!isObject(args)) throw raise('validation', 400, 'Invalid call arguments', run.entry.pointer, 'with must be an object');
  if (task.call === 'http')
    return interpreter.step(`${run.at}>http`, run.frame, 'call', () => sendHttp(interpreter, run, args, secret), httpRerunnable(args), httpAnswerLevels(args));
  if (task.call === 'openapi') return callOpenApi(interpreter, run, args, secret);
  if (task.call === contractFunction) return callContract(interpreter, run, args);
  throw raise('configuration', 400, 'Unsupported call', run.entry.pointer, `call ${JSON.stringify(task.call)} is not supported`);
}

// ── HTTP ─────────────────────────────────────────────────────────────────

/** The call's `with` with each named authentication policy (`authentication: {use: name}`) in place of its reference. */
function withNamedPolicies(document: JsonValue, spec: JsonValue, places: readonly (readonly string[])[]): JsonValue {
  let resolved = spec;
  for (const place of places) {
    const reference = valueAt(resolved, place);
    const policy = resolveAuthentication(document, reference);
    if (reference === undefined || policy === reference || policy === undefined) continue; // undefined: refused when the document was checked
    if (resolved === spec) resolved = structuredClone(spec);
    setAt(resolved, place, structuredClone(policy));
  }
  return resolved;
}

/** A place under a call's `with` whose value reads a secret: an expression, or a secret-based authentication policy. */
interface SecretValue {
  path: string[];
  /** The `${ }` expression reading `$secrets` (absent for a policy's `use`). */
  expression?: string;
  /** A secret-based policy (`basic: {use}`, `bearer: {use}`): the secret's name. */
  use?: string;
}

/** Where the call's `with` reads secrets (the document check allowed only these places: src/workflow/secrets.ts). */
function secretValuesOf(spec: JsonValue, call: JsonValue | undefined): SecretValue[] {
  if (!isObject(spec)) return [];
  const found: SecretValue[] = [];
  if (call === 'http' && isObject(spec.headers))
    for (const [name, value] of Object.entries(spec.headers))
      if (typeof value === 'string' && mentionsSecrets(value)) found.push({ path: ['headers', name], expression: value });
  for (const place of authenticationPlaces(call)) {
    const auth = valueAt(spec, place);
    for (const scheme of ['basic', 'bearer'] as const) {
      const policy = isObject(auth) ? auth[scheme] : undefined;
      if (!isObject(policy)) continue;
      if (typeof policy.use === 'string') found.push({ path: [...place, scheme], use: policy.use });
      else
        for (const [field, value] of Object.entries(policy))
          if (typeof value === 'string' && mentionsSecrets(value)) found.push({ path: [...place, scheme, field], expression: value });
    }
  }
  return found;
}

/** The secret places under `from` (a prefix of their paths), moved under `to`: an OpenAPI call's policies as the HTTP request's. */
function movedSecrets(places: readonly SecretValue[], from: readonly string[], to: readonly string[]): SecretValue[] {
  return places
    .filter((place) => from.every((key, index) => place.path[index] === key))
    .map((place) => ({ ...place, path: [...to, ...place.path.slice(from.length)] }));
}

/** A copy of `value` with `[redacted]` at each path. */
function redactAt(value: JsonValue, places: readonly SecretValue[]): JsonValue {
  const copy = structuredClone(value);
  for (const { path } of places) setAt(copy, path, redacted);
  return copy;
}

/** Sets `value` at `path` as an own member (a header may be named `__proto__`), where the members before it are. */
function setAt(target: JsonValue, path: readonly string[], value: JsonValue): void {
  let holder = target;
  for (const key of path.slice(0, -1)) holder = isObject(holder) ? (ownMember(holder, key) ?? null) : null;
  if (isObject(holder)) setMember(holder, path[path.length - 1] as string, value);
}

/**
 * What a request built with secrets carries: every string that must not appear in what is
 * recorded (the values themselves, and the authorization built from them; each at least
 * limits.workflowSecretBytesMin bytes, a shorter username being no credential), and the names of
 * the secrets read (each may go only to its origins: exchange).
 */
interface Carried {
  hidden: readonly string[];
  secrets: readonly string[];
}

const carriesNothing: Carried = { hidden: [], secrets: [] };

/** The call's arguments with its secret values in place (never recorded), and what they carry. */
async function withSecrets(
  interpreter: Interpreter,
  run: TaskRun,
  args: JsonObject,
  places: readonly SecretValue[],
): Promise<{ args: JsonObject; carried: Carried }> {
  const full = structuredClone(args);
  const hidden: string[] = [];
  const built: string[] = [];
  // Exactly the secrets the values could read: a policy's `use`, and the names an expression is given (interpreter.evaluateSecret).
  const secrets = new Set(places.flatMap((place) => (place.use !== undefined ? [place.use] : secretNames(place.expression as string))));
  for (const place of places) {
    const value =
      place.use !== undefined
        ? interpreter.secret(place.use, run.entry.pointer)
        : await interpreter.evaluateSecret(place.expression as string, run.input, run.frame, { input: run.input }, run.entry.pointer);
    setAt(full, place.path, value);
    if (place.use === undefined) collectStrings(value, built);
  }
  // The secrets themselves too: an answer may echo a part of what was built from them.
  for (const name of secrets) collectStrings(interpreter.secret(name, run.entry.pointer), hidden);
  checkBuiltValues(built, hidden, run.entry.pointer);
  const auth = authorization(full.endpoint ?? null, run.entry.pointer);
  // The credential without its scheme too: a service may echo it alone, or decoded (a Basic one's `username:password`, whose password is hidden).
  if (auth) hidden.push(auth, auth.slice(auth.indexOf(' ') + 1));
  const scrubbed = new Set([...hidden, ...built].filter((text) => Buffer.byteLength(text, 'utf8') >= limits.workflowSecretBytesMin));
  return { args: full, carried: { hidden: [...scrubbed].sort((a, b) => b.length - a.length), secrets: [...secrets] } };
}

/**
 * Refuses a request carrying a value an expression built from secrets that is shorter than
 * limits.workflowSecretBytesMin (a slice of a token, a flag computed from it) and is not itself one
 * of the secrets' strings (a short `username`, sent as it is and not scrubbed): scrubbed, every
 * occurrence of it in the answer would be replaced and which changed would tell it; not scrubbed,
 * a service that echoes it would put it in the log.
 */
function checkBuiltValues(built: readonly string[], read: readonly string[], ref: string): void {
  const short = built.find((text) => text !== '' && Buffer.byteLength(text, 'utf8') < limits.workflowSecretBytesMin && !read.includes(text));
  if (short !== undefined)
    throw raise(
      'authorization',
      403,
      'Secret value too short',
      ref,
      `a header or credential built from a secret is shorter than ${limits.workflowSecretBytesMin} bytes: it could not be kept out of the recorded answer`,
    );
}

function collectStrings(value: JsonValue, into: string[]): void {
  if (typeof value === 'string') into.push(value);
  else if (Array.isArray(value)) for (const item of value) collectStrings(item, into);
  else if (isObject(value)) for (const item of Object.values(value)) collectStrings(item, into);
  else if (value !== null) into.push(String(value));
}

/**
 * `value` with every form of a hidden string (echoes.ts) replaced by `[redacted]`: an answer that
 * echoes a credential, once decoded (a JSON string's escapes undone) and in what the request shows.
 */
function scrub<T extends JsonValue>(value: T, hidden: readonly string[]): T {
  if (hidden.length === 0) return value;
  const clean = (text: string) => scrubEchoesText(text, hidden);
  const walk = (item: JsonValue): JsonValue => {
    if (typeof item === 'string') return clean(item);
    if (Array.isArray(item)) return item.map(walk);
    if (isObject(item)) return Object.fromEntries(Object.entries(item).map(([key, inner]) => [clean(key), walk(inner)]));
    return item;
  };
  return walk(value) as T;
}

const idempotentMethods: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/**
 * Whether an HTTP call found started but unanswered may be made again: its method is idempotent
 * (RFC 9110 §9.2.2) or it carries an `Idempotency-Key` header (the server dedupes it).
 */
export function httpRerunnable(args: JsonObject): boolean {
  if (typeof args.method === 'string' && idempotentMethods.has(args.method.toUpperCase())) return true;
  return isObject(args.headers) && Object.keys(args.headers).some((name) => name.toLowerCase() === 'idempotency-key');
}

/**
 * RFC 6570 simple string expansion from the task input's top-level members (DSL "URI Template"):
 * a variable with no value (absent or null) expands to the empty string, one that is an object or
 * an array is the DSL's expression error (400), a scalar is percent-encoded outside RFC 3986's
 * unreserved characters (encodeURIComponent leaves `!'()*` as they are; simple expansion does not).
 */
function expandUri(template: string, input: JsonValue, ref: string): string {
  return template.replace(/\{([A-Za-z0-9_.-]+)\}/g, (_match, name: string) => {
    const value = isObject(input) ? ownMember(input, name) : undefined;
    if (value === undefined || value === null) return '';
    if (typeof value === 'object')
      throw raise(
        'expression',
        400,
        'Invalid URI template variable',
        ref,
        `{${name}} is ${Array.isArray(value) ? 'an array' : 'an object'}: a URI template variable must be a string, a number, a boolean or null`,
      );
    return encodeURIComponent(String(value)).replace(/[!'()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
  });
}

function authorization(endpoint: JsonValue, ref: string): string | undefined {
  const auth = isObject(endpoint) && isObject(endpoint.authentication) ? endpoint.authentication : undefined;
  if (!auth) return undefined;
  if (isObject(auth.basic)) return `Basic ${Buffer.from(`${String(auth.basic.username)}:${String(auth.basic.password)}`, 'utf8').toString('base64')}`;
  if (isObject(auth.bearer)) return `Bearer ${String(auth.bearer.token)}`;
  throw raise('configuration', 400, 'Unsupported authentication', ref, 'this executor supports basic and bearer authentication');
}

interface HttpRequest {
  method: string;
  uri: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** The request `args` describe; `input` expands the endpoint's URI template (undefined: the URI is taken as it is). */
function requestOf(args: JsonObject, input: JsonValue | undefined, ref: string): HttpRequest {
  const endpoint = args.endpoint;
  const template = typeof endpoint === 'string' ? endpoint : isObject(endpoint) && typeof endpoint.uri === 'string' ? endpoint.uri : undefined;
  if (template === undefined || typeof args.method !== 'string')
    throw raise('validation', 400, 'Invalid HTTP call', ref, 'with.method and with.endpoint are required');
  const method = methodOf(args.method, args.body, ref);
  const uri = input === undefined ? template : expandUri(template, input, ref);
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    throw raise('validation', 400, 'Invalid HTTP call', ref, `the endpoint ${JSON.stringify(uri)} is not an absolute URI`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw raise('validation', 400, 'Invalid HTTP call', ref, `the endpoint ${JSON.stringify(uri)} is not an http or https URI`);
  if (isObject(args.query))
    for (const [name, value] of Object.entries(args.query)) url.searchParams.append(name, typeof value === 'string' ? value : JSON.stringify(value));
  const headers: Record<string, string> = {};
  if (isObject(args.headers))
    for (const [name, value] of Object.entries(args.headers)) {
      // The fetch builds its request's headers by assignment: one named __proto__ would not be sent.
      if (name.toLowerCase() === '__proto__')
        throw raise('validation', 400, 'Invalid HTTP call', ref, `the header ${name} cannot be sent: the HTTP client drops a header of that name`);
      headers[name] = typeof value === 'string' ? value : JSON.stringify(value);
    }
  const auth = authorization(endpoint ?? null, ref);
  if (auth) headers.authorization = auth;
  let body: string | undefined;
  if (args.body !== undefined && args.body !== null) {
    body = typeof args.body === 'string' ? args.body : JSON.stringify(args.body);
    if (typeof args.body !== 'string' && !Object.keys(headers).some((name) => name.toLowerCase() === 'content-type'))
      headers['content-type'] = 'application/json';
  }
  return { method, uri: url.toString(), headers, body };
}

/** An HTTP token (RFC 9110 §5.6.2): what a method (§9.1) and a header's name are. */
const httpToken = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The methods fetch refuses to send (the Fetch standard's forbidden methods). */
const forbiddenMethods: ReadonlySet<string> = new Set(['CONNECT', 'TRACE', 'TRACK']);

/**
 * The request's method, upper-cased, or the DSL's validation error (400) for one that cannot be
 * sent as written: not an HTTP token (RFC 9110 §9.1), forbidden by fetch, or a GET or HEAD with a
 * body. Refused here, before the request, it is the document's error and not a communication one,
 * which a `try` would retry.
 */
function methodOf(given: string, body: JsonValue | undefined, ref: string): string {
  const method = given.toUpperCase();
  if (!httpToken.test(given)) throw raise('validation', 400, 'Invalid HTTP call', ref, `${JSON.stringify(given)} is not an HTTP method`);
  if (forbiddenMethods.has(method)) throw raise('validation', 400, 'Invalid HTTP call', ref, `the HTTP client does not send a ${method} request`);
  if ((method === 'GET' || method === 'HEAD') && body !== undefined && body !== null)
    throw raise('validation', 400, 'Invalid HTTP call', ref, `a ${method} request cannot have a body`);
  return method;
}

/**
 * Makes the request `use` makes of the call's arguments, with the secrets it reads in place;
 * nothing it answers (its content, an error's detail, the request shown by `output: response`)
 * carries them: headers that read a secret, and `authorization`, are shown as `[redacted]`, and any
 * echo of a secret's value is replaced.
 */
async function sendHttp(
  interpreter: Interpreter,
  run: TaskRun,
  recorded: JsonObject,
  secret: readonly SecretValue[],
  use: (args: JsonObject, carried: Carried) => Promise<JsonValue> = (args, carried) => sendHttpAs(interpreter, run, args, run.input, carried),
): Promise<JsonValue> {
  if (secret.length === 0) return use(recorded, carriesNothing);
  const { args, carried } = await withSecrets(interpreter, run, recorded, secret);
  const { hidden } = carried;
  try {
    return scrub(await use(args, carried), hidden);
  } catch (error) {
    if (error instanceof WorkflowRaise) throw new WorkflowRaise(scrub(error.error as unknown as JsonObject, hidden) as unknown as WorkflowError);
    throw error;
  }
}

/**
 * The request made and its answer: a 2xx (to 3xx with `redirect`) status, the content read whole
 * (up to `bytesMax`), every form of a hidden string in it (echoes.ts) already `[redacted]`.
 */
interface Exchange {
  request: HttpRequest;
  response: Response;
  bytes: Buffer;
}

/**
 * Makes one request: a failure to reach the service is a communication error (503), no answer
 * (content included) within deps.httpTimeoutMs a timeout error (408), an answer
 * outside 200–299 (200–399 with `redirect`) a communication error with its status, content over
 * `bytesMax` a communication error (502) read no further.
 *
 * A redirect is never followed (`redirect: 'manual'`): the DSL's `redirect` says whether a 3xx
 * answer is an error or the call's answer, not whether to go where it points, so a 3xx is the
 * answer checked and taken, with its own status, headers and content. Node's fetch and undici's
 * answer the 3xx itself under 'manual' (not the browser's opaque-redirect response, status 0).
 */
async function exchange(
  interpreter: Interpreter,
  run: TaskRun,
  request: HttpRequest,
  options: { redirect: boolean; bytesMax?: number; carried: Carried },
): Promise<Exchange> {
  const ref = run.entry.pointer;
  checkHeaders(request.headers, ref);
  checkSecretOrigins(interpreter, options.carried.secrets, request.uri, ref);
  let response: Response;
  let bytes: Buffer;
  const timeout = AbortSignal.timeout(interpreter.deps.httpTimeoutMs);
  try {
    const signal = AbortSignal.any([run.frame.signal, timeout]);
    response = await interpreter.deps.fetch(request.uri, { method: request.method, headers: request.headers, body: request.body, signal, redirect: 'manual' });
    bytes = scrubEchoes(await readContent(response, options.bytesMax, ref), options.carried.hidden);
  } catch (error) {
    if (run.frame.signal.aborted) throw new Halted('the call was stopped');
    if (error instanceof WorkflowRaise) throw error;
    // Reached, and not answered in time: the DSL's timeout error ("interactions with external services"), not a communication one.
    if (timeout.aborted)
      throw raise('timeout', 408, 'HTTP request timed out', ref, `${request.uri} did not answer within ${interpreter.deps.httpTimeoutMs} ms`);
    // Refused by the egress policy (egress.ts): not a failure to reach the service, and never one to try again.
    const refused = egressRefusalOf(error);
    if (refused) throw raise('authorization', 403, 'HTTP call refused', ref, refused.message);
    throw raise('communication', 503, 'HTTP request failed', ref, error instanceof Error ? error.message : String(error));
  }
  const okMax = options.redirect ? 399 : 299;
  if (response.status < 200 || response.status > okMax) {
    throw new WorkflowRaise({
      type: 'https://serverlessworkflow.io/spec/1.0.0/errors/communication',
      status: response.status,
      title: `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`,
      detail: bytes.subarray(0, 2048).toString('utf8'),
      instance: ref,
    });
  }
  return { request, response, bytes };
}

/** What no header value carries: NUL, CR and LF (RFC 9110 §5.5), and what is not one byte (the Fetch standard's byte strings). */
// eslint-disable-next-line no-control-regex -- NUL, CR and LF are what a header value may not carry, so the pattern names them
const unsendableInHeader = /[\0\r\n]|[^\u0000-\u00ff]/;

/**
 * Refuses a request whose header cannot be sent as written — a name that is not a token, a value
 * (from the input, say) holding NUL, CR, LF or a character past U+00FF — as the DSL's validation
 * error (400), before anything is sent: the document or its input is at fault, not the service,
 * and fetch's own refusal would be taken for a communication error that a `try` sends again. The
 * value is not quoted: it may hold a secret.
 */
function checkHeaders(headers: Record<string, string>, ref: string): void {
  for (const [name, value] of Object.entries(headers)) {
    if (!httpToken.test(name)) throw raise('validation', 400, 'Invalid HTTP call', ref, `the header name ${quoted(name)} is not an HTTP token`);
    const bad = unsendableInHeader.exec(value);
    if (bad) {
      const code = (value.codePointAt(bad.index) ?? 0).toString(16).toUpperCase().padStart(4, '0');
      throw raise(
        'validation',
        400,
        'Invalid HTTP call',
        ref,
        `the header ${name}: its value holds U+${code} at character ${bad.index} (a header value carries no NUL, CR or LF, and nothing past U+00FF)`,
      );
    }
  }
}

/**
 * Refuses a request that carries a secret to an origin outside that secret's origins (the
 * deployment's workflowSecrets.<name>.origins), before anything is sent: the DSL's authorization
 * error, as an egress refusal is, naming the secret and the origin. `uri` is the request's own (its
 * template expanded, an OpenAPI operation's server resolved); no redirect is followed after it.
 */
function checkSecretOrigins(interpreter: Interpreter, secrets: readonly string[], uri: string, ref: string): void {
  if (secrets.length === 0) return;
  const url = new URL(uri);
  const hostname = urlHost(url);
  for (const name of secrets) {
    const origins = interpreter.deps.secretOrigins.get(name);
    if (origins === undefined || originMatches(origins, url.protocol, hostname, url.port)) continue;
    const origin = originText(url.protocol, hostname, url.port);
    throw raise('authorization', 403, 'HTTP call refused', ref, `the secret "${name}" may not be sent to ${origin}: it is not among the secret's origins`);
  }
}

async function readContent(response: Response, bytesMax: number | undefined, ref: string): Promise<Buffer> {
  if (bytesMax === undefined || !response.body) return Buffer.from(await response.arrayBuffer());
  const tooLarge = () => raise('communication', 502, 'HTTP content too large', ref, `${response.url || 'the answer'} is larger than ${bytesMax} bytes`);
  if (Number(response.headers.get('content-length') ?? 0) > bytesMax) {
    await response.body.cancel();
    throw tooLarge();
  }
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    total += read.value.byteLength;
    if (total > bytesMax) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(read.value);
  }
  return Buffer.concat(chunks);
}

/** A `call: http` request and its answer in the call's `output` form (content, response, raw). */
async function sendHttpAs(interpreter: Interpreter, run: TaskRun, args: JsonObject, input: JsonValue | undefined, carried: Carried): Promise<JsonValue> {
  const request = requestOf(args, input, run.entry.pointer);
  // The answer is recorded in the instance's log: its content is bounded like a peer's result.
  const { response, bytes } = await exchange(interpreter, run, request, { redirect: args.redirect === true, bytesMax: limits.httpContentBytesMax, carried });
  const content = decodeContent(bytes, response.headers.get('content-type') ?? '');
  const output = typeof args.output === 'string' ? args.output : 'content';
  if (output === 'raw') return bytes.toString('base64');
  if (output === 'response') {
    const headers: Record<string, string> = {};
    response.headers.forEach((value, name) => setMember(headers, name, value));
    return { request: { method: request.method.toLowerCase(), uri: request.uri, headers: request.headers }, statusCode: response.status, headers, content };
  }
  return content;
}

/**
 * The levels an HTTP call's answer adds above the content it read, which is held to
 * limits.jsonDepthMax on its own: a `response` output holds it one level down (`content`).
 */
function httpAnswerLevels(args: JsonObject): number {
  return args.output === 'response' ? 1 : 0;
}

function decodeContent(bytes: Buffer, contentType: string): JsonValue {
  if (bytes.length === 0) return null;
  if (/[/+]json\b/i.test(contentType)) {
    try {
      return JSON.parse(bytes.toString('utf8')) as JsonValue;
    } catch {
      return bytes.toString('utf8');
    }
  }
  if (/^text\/|xml/i.test(contentType)) return bytes.toString('utf8');
  return bytes.toString('base64');
}

// ── OpenAPI ──────────────────────────────────────────────────────────────

/**
 * `call: openapi`: two recorded steps. `>openapi` fetches the document (as `call: http` would GET
 * it, with `document.endpoint`'s authentication) unless this executor keeps it already, and
 * records what the call uses of it — the document's URI, size and SHA-256, and the operation
 * resolved from it. `>http` then makes the operation's request, built from that record and the
 * call's parameters, through the same path as `call: http` (authentication, output, redirect,
 * errors); its answer is the task's. A replay, or a worker resuming the call, fetches nothing.
 */
async function callOpenApi(interpreter: Interpreter, run: TaskRun, args: JsonObject, secret: readonly SecretValue[]): Promise<JsonValue> {
  const ref = run.entry.pointer;
  const { document, operationId, parameters = {} } = args;
  if (!isObject(document) || document.endpoint === undefined || typeof operationId !== 'string' || !isObject(parameters))
    throw raise('validation', 400, 'Invalid OpenAPI call', ref, 'with needs document {endpoint} and operationId, and parameters is a map of names to values');
  const fetching: JsonObject = { method: 'get', endpoint: document.endpoint };
  const used = await interpreter.step(
    `${run.at}>openapi`,
    run.frame,
    'call',
    () =>
      sendHttp(interpreter, run, fetching, movedSecrets(secret, ['document'], []), (full, carried) =>
        loadOperation(interpreter, run, full, operationId, carried),
      ),
    true,
  );
  const operation = (used as { operation: JsonValue }).operation as unknown as ResolvedOperation;
  const request = buildRequest(operation, parameters, ref);
  const endpoint: JsonObject = { uri: request.uri, ...(args.authentication === undefined ? {} : { authentication: args.authentication }) };
  const call: JsonObject = { method: request.method, endpoint, headers: request.headers };
  if (request.body !== undefined) call.body = request.body;
  if (args.output !== undefined) call.output = args.output;
  if (args.redirect !== undefined) call.redirect = args.redirect;
  const send = (full: JsonObject, carried: Carried) => sendHttpAs(interpreter, run, full, undefined, carried);
  return interpreter.step(
    `${run.at}>http`,
    run.frame,
    'call',
    () => sendHttp(interpreter, run, call, movedSecrets(secret, ['authentication'], ['endpoint', 'authentication']), send),
    httpRerunnable(call),
    httpAnswerLevels(call),
  );
}

/** Fetches (or finds kept) the document `args` GETs, and answers what the call uses of it. */
async function loadOperation(interpreter: Interpreter, run: TaskRun, args: JsonObject, operationId: string, carried: Carried): Promise<JsonValue> {
  const ref = run.entry.pointer;
  const request = requestOf(args, run.input, ref);
  // Kept per URI and credential: a document one credential may read is never answered to another.
  const key = `${request.uri}\n${sha256Hex(request.headers.authorization ?? '')}`;
  const documents = interpreter.deps.openApiDocuments;
  let kept = documents?.get(key);
  if (!kept) {
    const { bytes } = await exchange(interpreter, run, request, { redirect: false, bytesMax: limits.openApiDocumentBytesMax, carried });
    kept = { document: parseOpenApi(bytes, request.uri, ref), used: { uri: request.uri, bytes: bytes.length, sha256: sha256Hex(bytes) } };
    documents?.set(key, kept);
  }
  return { document: { ...kept.used }, operation: resolveOperation(kept.document, request.uri, operationId, ref) as unknown as JsonValue };
}

// ── contracts ────────────────────────────────────────────────────────────

interface ContractArgs {
  contract: ContractRef;
  interaction: string;
  input: JsonValue;
  /** Absent: the interaction's boundary (the runtime answers which it is). */
  waitFor: WaitFor | undefined;
  invocationKey: string | undefined;
}

function contractArgs(args: JsonObject, ref: string): ContractArgs {
  const contract = args.contract;
  const valid =
    isObject(contract) &&
    typeof contract.id === 'string' &&
    typeof contract.version === 'string' &&
    typeof contract.digest === 'string' &&
    typeof args.interaction === 'string' &&
    (args.waitFor === undefined || args.waitFor === 'decision' || args.waitFor === 'settled') &&
    (args.invocationKey === undefined || typeof args.invocationKey === 'string');
  if (!valid)
    throw raise(
      'validation',
      400,
      'Invalid contract call',
      ref,
      'with needs contract {id, version, digest}, interaction, input, and optionally waitFor (decision|settled) and invocationKey',
    );
  const key = args.invocationKey;
  // A key given in the document (or read from the input) is recorded with the binding before the call: it must be one an operation takes.
  if (typeof key === 'string' && (key === '' || Buffer.byteLength(key, 'utf8') > limits.invocationKeyBytesMax))
    throw raise(
      'validation',
      400,
      'Invalid contract call',
      ref,
      `with.invocationKey must be 1 to ${limits.invocationKeyBytesMax} bytes of UTF-8 (it is ${Buffer.byteLength(key, 'utf8')} bytes)`,
    );
  // The input admission takes is 64 levels deep at most: one deeper is refused here, before a key is bound or a request sent.
  const tooDeep = nestingProblem(args.input ?? null, 'with.input');
  if (tooDeep !== undefined)
    throw raise('validation', 400, 'Invalid contract call', ref, `${tooDeep}: admission takes an input of ${limits.jsonDepthMax} levels at most`);
  return {
    contract: { id: contract.id as string, version: contract.version as string, digest: contract.digest as string },
    interaction: args.interaction as string,
    input: args.input ?? null,
    waitFor: args.waitFor as WaitFor | undefined,
    invocationKey: args.invocationKey as string | undefined,
  };
}

/** Binds the child operation (key and id recorded before the call), then calls and waits for the boundary. */
async function callContract(interpreter: Interpreter, run: TaskRun, raw: JsonObject): Promise<JsonValue> {
  const ref = run.entry.pointer;
  const args = contractArgs(raw, ref);
  const started = interpreter.record.started;
  if (!interpreter.record.children[run.at]) {
    const same = Object.values(interpreter.record.children).filter(
      (child) => child.ref === ref && child.iterations.join('/') === run.frame.iterations.join('/'),
    );
    const attempt = same.length + 1;
    const position = { pointer: ref, iterations: run.frame.iterations, attempt };
    // A given key names the position's first logical invocation; a later one (a DSL retry, a revisit) derives its own from it.
    const invocationKey =
      args.invocationKey === undefined
        ? stageInvocationKey(started.invocationKey, position)
        : attempt === 1
          ? args.invocationKey
          : stageInvocationKey(args.invocationKey, position);
    const id = operationId(started.principalId, args.contract.digest, invocationKey);
    // The call's start goes with its binding: one transition (the step below finds it recorded).
    await interpreter.propose({
      command: 'child-bound',
      events: [
        { type: 'child-bound', v: 1, at: run.at, ref, operationId: id, invocationKey, iterations: [...run.frame.iterations], attempt },
        { type: 'call-started', v: 1, at: `${run.at}>invoke`, epoch: interpreter.record.lease?.epoch ?? 0 },
      ],
    });
  }
  const child = interpreter.record.children[run.at];
  if (!child) throw new Halted(`child of ${run.at} was not recorded`);
  const invoke = () => invokeAndWait(interpreter, run, args, child.invocationKey, child.operationId);
  return interpreter.step(`${run.at}>invoke`, run.frame, 'call', invoke, true, contractAnswerLevels);
}

/**
 * The levels a contract call's answer adds above a peer's result, which the peer and the
 * coordinator hold to limits.jsonDepthMax on its own: the answer holds the contract's output one
 * level down, and a collected output holds each result three further (`output.outcomes[i].result`).
 * The answer is recorded, and is the task's output, with them: a result the contract decided on is
 * never refused for the levels the answer puts above it.
 */
export const contractAnswerLevels = 1 + outputResultLevels;

/**
 * The levels a task's output, and so an instance's, may hold a value below its root: a contract
 * call's answer's (contractAnswerLevels), the deepest a task that makes a value records it with (a
 * child workflow's output, its `run` answer, is allowed the same). A fork's list of its branches'
 * outputs and a listen's list of what it took are held to them too (Interpreter.heldOutput), so
 * every reader of an instance's output — a NATS client reading a workflow reply
 * (workflowReplyLevels), a parent reading its child's — reads every output an instance completes
 * with, and a reader never reads one deeper.
 */
export const outputLevels = contractAnswerLevels;

const reached = (result: InvocationResult, waitFor: WaitFor): boolean =>
  waitFor === 'settled' ? result.settlement.status !== 'pending' : result.decision !== null;

async function invokeAndWait(interpreter: Interpreter, run: TaskRun, args: ContractArgs, invocationKey: string, expectedId: string): Promise<JsonValue> {
  const ref = run.entry.pointer;
  const service = interpreter.deps.invocations;
  if (!service)
    throw raise('configuration', 400, 'No contract runtime', ref, 'this executor was started without an invocation service; contract calls cannot run');
  const principalId = interpreter.record.started.principalId;
  try {
    const request = { contract: args.contract, interaction: args.interaction, invocationKey, input: args.input };
    // The runtime answers the boundary: the call's waitFor, or its interaction's when the call names none (a weaker one it refuses).
    const invoked = await service.invoke(
      { principalId, senderPeerId: null },
      args.waitFor === undefined ? request : { ...request, waitFor: args.waitFor },
      run.frame.signal,
    );
    let result = ofOperation(invoked.result, expectedId, ref);
    const boundary = invoked.boundary;
    if (args.waitFor === 'settled' && boundary !== 'settled')
      throw raise('communication', 409, 'Protocol conflict', ref, `the runtime answered the boundary ${boundary}, the call asked for settled`);
    while (!reached(result, boundary)) {
      if (run.frame.signal.aborted) throw new Halted('the call was stopped');
      const waited = await service.wait(principalId, expectedId, boundary, interpreter.deps.contractWaitChunkMs, run.frame.signal);
      result = ofOperation(waited.result, expectedId, ref);
    }
    return answerOf(result, boundary, ref);
  } catch (error) {
    // Stopped (the task's or the workflow's timeout, a losing branch): the call has no answer to record.
    if (run.frame.signal.aborted) throw new Halted('the call was stopped');
    if (error instanceof AdapterError) throw raiseAdapterError(error, `Contract call ${error.kind}`, ref, error.description ?? error.message);
    throw error;
  }
}

/** `result` when it is the operation the call bound; any other (a runtime or a proxy answering for another) is a protocol conflict, never the call's answer. */
function ofOperation(result: InvocationResult, expectedId: string, ref: string): InvocationResult {
  if (result.operationId !== expectedId)
    throw raise('communication', 409, 'Protocol conflict', ref, `the runtime answered operation ${result.operationId}, expected ${expectedId}`);
  return result;
}

/**
 * Success only when the decision is success, the requested boundary holds and the decision's
 * typed output could be projected: a projection failure (outputError) is reported apart from the
 * decision, which it does not change, and stops what depends on the output.
 */
function answerOf(result: InvocationResult, waitFor: WaitFor, ref: string): JsonValue {
  const decision = result.decision;
  const view = {
    operationId: result.operationId,
    decision: decision as unknown as JsonValue,
    settlement: result.settlement as unknown as JsonValue,
    output: result.output,
  };
  if (decision?.outcome !== 'success') {
    throw new WorkflowRaise({
      type: contractDecisionErrorType,
      status: 422,
      title: `Contract decision ${decision?.outcome ?? 'missing'}`,
      detail: `operation ${result.operationId} decided ${decision?.outcome ?? 'nothing'} (${decision?.reason ?? 'no reason'})`,
      instance: ref,
    });
  }
  if (waitFor === 'settled' && result.settlement.status !== 'complete') {
    throw new WorkflowRaise({
      type: contractSettlementErrorType,
      status: 422,
      title: `Contract settlement ${result.settlement.status}`,
      detail: `operation ${result.operationId} settled ${result.settlement.status}`,
      instance: ref,
    });
  }
  if (result.outputError !== null) {
    throw new WorkflowRaise({
      type: contractOutputErrorType,
      status: 422,
      title: `Contract output ${result.outputError.kind}`,
      detail: `operation ${result.operationId} decided success, and its output could not be projected (${result.outputError.kind}: ${result.outputError.description ?? 'no description'})`,
      instance: ref,
    });
  }
  return view;
}
