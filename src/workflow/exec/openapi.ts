/**
 * `call: openapi` (DSL 1.0.3, "OpenAPI Call"): the operation a Swagger 2.0 or OpenAPI 3.x
 * document (JSON or YAML) names by its operationId, and the HTTP request a call of it makes.
 *
 * The call (calls.ts) records, as one step, what it used of the document: the document's address,
 * size and SHA-256, and the operation resolved from it (`ResolvedOperation`: method, absolute URI
 * template, the parameters with their location and serialization, the body's media type) — never
 * the whole document. The request is then built from that record and the call's parameters
 * (`buildRequest`, pure) and made exactly as `call: http` makes its own, as a second step. A
 * replay reads both answers from the log; a worker resuming the call builds the same request from
 * the recorded operation, whatever the document says by then.
 *
 * What is read of a document: `paths` and their operations, path-level and operation-level
 * parameters (local `$ref`s followed), the Swagger `body`/`formData` parameters, `consumes` and
 * `produces`, `schemes`/`host`/`basePath`, and the OpenAPI 3 `servers` (operation, path item, then
 * document; `{variables}` at their defaults; relative to the document's URI), `requestBody` and
 * the JSON media types of the responses. Schemas are not read: the service validates what it gets.
 */
import { parseDocument } from 'yaml';
import { BoundedMap } from '../../contract/bounded-map.js';
import { isObject, ownMember, setMember, type JsonObject, type JsonValue } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';
import { raise, type WorkflowRaise } from './dsl-errors.js';

export type ParameterLocation = 'path' | 'query' | 'header' | 'cookie' | 'formData';

export interface OperationParameter {
  name: string;
  in: ParameterLocation;
  required: boolean;
  /** OpenAPI 3 styles; a Swagger collectionFormat is mapped to one (csv: form/simple, ssv: spaceDelimited, tsv: tabDelimited, pipes: pipeDelimited, multi: form exploded). */
  style: string;
  explode: boolean;
}

export interface OperationBody {
  /** The Swagger `in: body` parameter's name; absent for an OpenAPI 3 requestBody and for Swagger formData. */
  name?: string;
  mediaType: string;
  required: boolean;
}

/** What a call uses of its document: recorded with the document's identity (calls.ts). */
export interface ResolvedOperation {
  operationId: string;
  /** Lower case, as the document spells it. */
  method: string;
  /** The server's URL and the operation's path: absolute, with the path's `{parameters}` still in it. */
  uri: string;
  parameters: OperationParameter[];
  body?: OperationBody;
  /** A JSON media type the operation answers with, sent as `accept`. */
  accept?: string;
}

/** The identity of the document a call used. */
export interface UsedDocument {
  uri: string;
  bytes: number;
  sha256: string;
}

const methods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

function invalidDocument(uri: string, ref: string, why: string): WorkflowRaise {
  return raise('communication', 502, 'Invalid OpenAPI document', ref, `${uri}: ${why}`);
}

// ── reading a document ───────────────────────────────────────────────────

/**
 * A fetched document's bytes as a Swagger 2.0 or OpenAPI 3.x object: JSON when it starts with `{`,
 * else YAML (core schema, aliases bounded by limits.yamlAliasesMax). Anything else is a
 * communication error (502): the service answered something that is not an OpenAPI document.
 */
export function parseOpenApi(bytes: Uint8Array, uri: string, ref: string): JsonObject {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw invalidDocument(uri, ref, 'not UTF-8 text');
  }
  let value: unknown;
  if (/^\s*[{[]/.test(text)) {
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw invalidDocument(uri, ref, `not valid JSON: ${(error as Error).message}`);
    }
  } else {
    const document = parseDocument(text, { schema: 'core', merge: true, prettyErrors: false });
    const problem = document.errors[0];
    if (problem) throw invalidDocument(uri, ref, `not valid JSON or YAML: ${problem.message.split('\n')[0] ?? problem.code}`);
    try {
      value = document.toJS({ maxAliasCount: limits.yamlAliasesMax });
    } catch (error) {
      throw invalidDocument(uri, ref, (error as Error).message);
    }
  }
  const found = value as JsonValue;
  if (!isObject(found) || !(found.swagger === '2.0' || (typeof found.openapi === 'string' && /^3\.\d+/.test(found.openapi))))
    throw invalidDocument(uri, ref, 'neither a Swagger 2.0 document (swagger: "2.0") nor an OpenAPI 3 one (openapi: "3.x")');
  if (!isObject(found.paths)) throw invalidDocument(uri, ref, 'it has no paths');
  return found;
}

/** Where a document is read: for its `$ref`s and its errors. */
interface Reading {
  document: JsonObject;
  uri: string;
  ref: string;
}

/** A value with its local `$ref` (`#/…`) followed, through at most 16 references. */
function deref(reading: Reading, value: JsonValue | undefined): JsonValue | undefined {
  let current = value;
  for (let hops = 0; isObject(current) && typeof current.$ref === 'string'; hops++) {
    const target = current.$ref;
    if (hops === 16) throw invalidDocument(reading.uri, reading.ref, `$ref ${target}: a chain of more than 16 references`);
    if (!target.startsWith('#')) throw invalidDocument(reading.uri, reading.ref, `$ref ${target}: only references inside the document (#/…) are followed`);
    try {
      current = pointerValue(reading.document, target.slice(1));
    } catch (error) {
      // A `%` escape that decodes to no UTF-8 (`#/%E0`): the document's error, not the executor's.
      if (!(error instanceof URIError)) throw error;
      throw invalidDocument(reading.uri, reading.ref, `$ref ${target} is not a JSON Pointer (a malformed % escape)`);
    }
    if (current === undefined) throw invalidDocument(reading.uri, reading.ref, `$ref ${target} points at nothing`);
  }
  return current;
}

function pointerValue(document: JsonValue, pointer: string): JsonValue | undefined {
  let current: JsonValue | undefined = document;
  for (const raw of pointer.split('/').slice(1)) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(current) && /^\d+$/.test(key)) current = current[Number(key)];
    else if (isObject(current) && Object.hasOwn(current, key)) current = current[key];
    else return undefined;
  }
  return current;
}

const strings = (value: JsonValue | undefined): string[] => (Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : []);

/** A JSON media type among `types` (`application/json`, `…+json`), if any. */
const jsonType = (types: readonly string[]): string | undefined => types.find((type) => /^application\/(?:[\w.-]+\+)?json\b/i.test(type));

/** The media type a body is sent as: JSON if offered, else form-encoded, else the first. */
const bodyType = (types: readonly string[]): string | undefined =>
  jsonType(types) ?? types.find((type) => /^application\/x-www-form-urlencoded\b/i.test(type)) ?? types[0];

/**
 * The operation `operationId` of a document fetched from `uri`: a validation error (400) when the
 * document has no such operation, a communication error (502) when what it says cannot be used.
 */
export function resolveOperation(document: JsonObject, uri: string, operationId: string, ref: string): ResolvedOperation {
  const reading: Reading = { document, uri, ref };
  const found = findOperation(reading, operationId);
  if (!found) throw raise('validation', 400, 'Unknown OpenAPI operation', ref, `${uri} has no operation with operationId ${JSON.stringify(operationId)}`);
  const { path, item, method, operation } = found;
  const swagger = document.swagger === '2.0';
  const { parameters, body } = swagger ? swaggerParameters(reading, item, operation) : openApiParameters(reading, item, operation);
  const base = swagger ? swaggerBase(document, uri) : serverBase(reading, [operation.servers, item.servers, document.servers]);
  const accept = jsonType(swagger ? strings(operation.produces ?? document.produces) : responseTypes(reading, operation));
  return {
    operationId,
    method,
    uri: `${base.replace(/\/+$/, '')}${path.startsWith('/') ? path : `/${path}`}`,
    parameters,
    ...(body ? { body } : {}),
    ...(accept ? { accept } : {}),
  };
}

function findOperation(reading: Reading, operationId: string): { path: string; item: JsonObject; method: string; operation: JsonObject } | undefined {
  for (const [path, raw] of Object.entries(reading.document.paths as JsonObject)) {
    const item = deref(reading, raw);
    if (!isObject(item)) continue;
    for (const method of methods) {
      const operation = item[method];
      if (isObject(operation) && operation.operationId === operationId) return { path, item, method, operation };
    }
  }
  return undefined;
}

/** Path-level parameters, then the operation's (which win for the same name and location), references followed. */
function declaredParameters(reading: Reading, item: JsonObject, operation: JsonObject): JsonObject[] {
  const merged = new Map<string, JsonObject>();
  for (const list of [item.parameters, operation.parameters]) {
    if (list === undefined) continue;
    if (!Array.isArray(list)) throw invalidDocument(reading.uri, reading.ref, 'parameters must be a list');
    for (const raw of list) {
      const parameter = deref(reading, raw);
      if (!isObject(parameter) || typeof parameter.name !== 'string' || typeof parameter.in !== 'string')
        throw invalidDocument(reading.uri, reading.ref, 'a parameter without a name or a location (in)');
      merged.set(`${parameter.in}\n${parameter.name}`, parameter);
    }
  }
  return [...merged.values()];
}

const swaggerFormats: Readonly<Record<string, { style: string; explode: boolean }>> = {
  csv: { style: 'form', explode: false },
  ssv: { style: 'spaceDelimited', explode: false },
  tsv: { style: 'tabDelimited', explode: false },
  pipes: { style: 'pipeDelimited', explode: false },
  multi: { style: 'form', explode: true },
};

function swaggerParameters(reading: Reading, item: JsonObject, operation: JsonObject): { parameters: OperationParameter[]; body?: OperationBody } {
  const parameters: OperationParameter[] = [];
  let body: OperationBody | undefined;
  const consumes = strings(operation.consumes ?? reading.document.consumes);
  for (const declared of declaredParameters(reading, item, operation)) {
    const name = declared.name as string;
    const place = declared.in as string;
    const required = declared.required === true || place === 'path';
    if (place === 'body') {
      body = { name, mediaType: jsonType(consumes) ?? consumes[0] ?? 'application/json', required };
      continue;
    }
    if (place !== 'path' && place !== 'query' && place !== 'header' && place !== 'formData')
      throw invalidDocument(reading.uri, reading.ref, `parameter ${name}: unknown location ${JSON.stringify(place)}`);
    const format = ownMember(swaggerFormats, typeof declared.collectionFormat === 'string' ? declared.collectionFormat : 'csv') ?? swaggerFormats.csv;
    const style = place === 'path' || place === 'header' ? 'simple' : (format?.style ?? 'form');
    parameters.push({ name, in: place, required, style, explode: format?.explode ?? false });
  }
  if (parameters.some((parameter) => parameter.in === 'formData')) {
    const form = consumes.find((type) => /^application\/x-www-form-urlencoded\b/i.test(type));
    body = { mediaType: form ?? consumes[0] ?? 'application/x-www-form-urlencoded', required: false };
  }
  return { parameters, ...(body ? { body } : {}) };
}

function openApiParameters(reading: Reading, item: JsonObject, operation: JsonObject): { parameters: OperationParameter[]; body?: OperationBody } {
  const parameters: OperationParameter[] = [];
  for (const declared of declaredParameters(reading, item, operation)) {
    const name = declared.name as string;
    const place = declared.in as string;
    if (place !== 'path' && place !== 'query' && place !== 'header' && place !== 'cookie')
      throw invalidDocument(reading.uri, reading.ref, `parameter ${name}: unknown location ${JSON.stringify(place)}`);
    const style = typeof declared.style === 'string' ? declared.style : place === 'query' || place === 'cookie' ? 'form' : 'simple';
    const explode = typeof declared.explode === 'boolean' ? declared.explode : style === 'form';
    parameters.push({ name, in: place, required: declared.required === true || place === 'path', style, explode });
  }
  const requestBody = deref(reading, operation.requestBody);
  if (!isObject(requestBody)) return { parameters };
  const mediaType = bodyType(isObject(requestBody.content) ? Object.keys(requestBody.content) : []);
  if (mediaType === undefined) throw invalidDocument(reading.uri, reading.ref, 'a requestBody without content');
  return { parameters, body: { mediaType, required: requestBody.required === true } };
}

/** The JSON-ish media types an OpenAPI 3 operation answers its successes (2xx, default) with. */
function responseTypes(reading: Reading, operation: JsonObject): string[] {
  const responses = isObject(operation.responses) ? operation.responses : {};
  const types: string[] = [];
  for (const [status, raw] of Object.entries(responses)) {
    if (!/^2|^default$/i.test(status)) continue;
    const response = deref(reading, raw);
    if (isObject(response) && isObject(response.content)) types.push(...Object.keys(response.content));
  }
  return types;
}

/** Swagger 2.0: `schemes` (the document's own scheme if listed), `host` (the document's host by default) and `basePath`. */
function swaggerBase(document: JsonObject, uri: string): string {
  const at = new URL(uri);
  const own = at.protocol.slice(0, -1);
  const schemes = strings(document.schemes);
  const scheme = schemes.length === 0 || schemes.includes(own) ? own : (schemes[0] as string);
  const host = typeof document.host === 'string' ? document.host : at.host;
  const basePath = typeof document.basePath === 'string' ? document.basePath : '/';
  return `${scheme}://${host}${basePath.startsWith('/') ? basePath : `/${basePath}`}`;
}

/** OpenAPI 3: the first server of the nearest non-empty `servers` (`/` when none), variables at their defaults, relative to the document's URI. */
function serverBase(reading: Reading, candidates: (JsonValue | undefined)[]): string {
  const servers = candidates.find((list) => Array.isArray(list) && list.length > 0) as JsonValue[] | undefined;
  const server = servers ? deref(reading, servers[0]) : { url: '/' };
  if (!isObject(server) || typeof server.url !== 'string') throw invalidDocument(reading.uri, reading.ref, 'a server without a url');
  const variables = isObject(server.variables) ? server.variables : {};
  const url = server.url.replace(/\{([^}]+)\}/g, (_match, name: string) => {
    const variable = ownMember(variables, name);
    if (!isObject(variable) || typeof variable.default !== 'string')
      throw invalidDocument(reading.uri, reading.ref, `server variable {${name}} has no default`);
    return variable.default;
  });
  try {
    return new URL(url, reading.uri).toString();
  } catch {
    throw invalidDocument(reading.uri, reading.ref, `server url ${JSON.stringify(server.url)} is not a URL`);
  }
}

// ── building the request ─────────────────────────────────────────────────

/** The request of one call: what `call: http` is given (calls.ts). */
export interface OperationRequest {
  method: string;
  uri: string;
  headers: Record<string, string>;
  body: string | undefined;
}

const scalarText = (value: JsonValue): string =>
  typeof value === 'string' ? value : value === null ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);

/** A value's pieces, each encoded: an array's items, an object's keys and values (or `key=value` exploded), a scalar. */
function pieces(value: JsonValue, explode: boolean, encode: (text: string) => string): string[] {
  if (Array.isArray(value)) return value.map((item) => encode(scalarText(item)));
  if (isObject(value))
    return Object.entries(value).flatMap(([key, item]) => (explode ? [`${encode(key)}=${encode(scalarText(item))}`] : [encode(key), encode(scalarText(item))]));
  return [encode(scalarText(value))];
}

const encode = encodeURIComponent;
const delimiters: Readonly<Record<string, string>> = { form: ',', spaceDelimited: '%20', tabDelimited: '%09', pipeDelimited: '|' };

/** A path parameter's value in its style (simple, label, matrix), percent-encoded. */
function pathText(parameter: OperationParameter, value: JsonValue): string {
  const parts = pieces(value, parameter.explode, encode);
  if (parameter.style === 'label') return `.${parts.join(parameter.explode ? '.' : ',')}`;
  if (parameter.style === 'matrix') {
    if (parameter.explode && Array.isArray(value)) return parts.map((part) => `;${encode(parameter.name)}=${part}`).join('');
    if (parameter.explode && isObject(value)) return parts.map((part) => `;${part}`).join('');
    return `;${encode(parameter.name)}=${parts.join(',')}`;
  }
  return parts.join(',');
}

/** A query parameter's `name=value` pairs in its style (form, exploded or not; space/tab/pipe-delimited; deepObject), percent-encoded. */
function queryPairs(parameter: OperationParameter, value: JsonValue): string[] {
  const name = encode(parameter.name);
  if (isObject(value) && parameter.style === 'deepObject')
    return Object.entries(value).map(([key, item]) => `${name}%5B${encode(key)}%5D=${encode(scalarText(item))}`);
  if (parameter.style === 'form' && parameter.explode) {
    if (Array.isArray(value)) return value.map((item) => `${name}=${encode(scalarText(item))}`);
    if (isObject(value)) return pieces(value, true, encode);
  }
  return [`${name}=${pieces(value, false, encode).join(ownMember(delimiters, parameter.style) ?? ',')}`];
}

/** A body in its media type: JSON, form-encoded (an object), or a string as it is. */
function bodyText(mediaType: string, value: JsonValue, ref: string): string {
  if (/json\b/i.test(mediaType)) return JSON.stringify(value);
  if (/^application\/x-www-form-urlencoded\b/i.test(mediaType)) {
    if (!isObject(value)) throw raise('validation', 400, 'Invalid OpenAPI body', ref, `a ${mediaType} body is an object of fields`);
    return Object.entries(value)
      .map(([key, item]) => `${encode(key)}=${encode(scalarText(item))}`)
      .join('&');
  }
  if (typeof value === 'string') return value;
  if (/^text\//i.test(mediaType)) return scalarText(value);
  throw raise('configuration', 400, 'Unsupported OpenAPI body', ref, `a ${mediaType} body is sent only from a string`);
}

const given = (value: JsonValue | undefined): value is JsonValue => value !== undefined && value !== null;

/**
 * The request of a call of `operation` with the call's `parameters` (name → value): path
 * parameters substituted and percent-encoded, query parameters in their style, headers, cookies,
 * and the body — the Swagger body parameter, form fields, or for an OpenAPI 3 requestBody the
 * parameter `body` if the operation declares none of that name, else the parameters it does not
 * declare. A required parameter without a value, or a value for none of its parameters, is a
 * validation error (400).
 */
export function buildRequest(operation: ResolvedOperation, parameters: JsonObject, ref: string): OperationRequest {
  const used = new Set<string>();
  const missing = (what: string) =>
    raise('validation', 400, 'Missing OpenAPI parameter', ref, `operation ${operation.operationId} needs ${what}, which parameters does not give`);
  const byName = new Map(operation.parameters.filter((p) => p.in === 'path').map((p) => [p.name, p]));
  const uri = operation.uri.replace(/\{([^}]+)\}/g, (_match, name: string) => {
    const value = ownMember(parameters, name);
    if (!given(value)) throw missing(`the path parameter ${name}`);
    used.add(name);
    return pathText(byName.get(name) ?? { name, in: 'path', required: true, style: 'simple', explode: false }, value);
  });
  const query: string[] = [];
  const headers: Record<string, string> = {};
  const cookies: string[] = [];
  const form: JsonObject = {};
  for (const parameter of operation.parameters) {
    if (parameter.in === 'path') {
      if (given(ownMember(parameters, parameter.name))) used.add(parameter.name); // declared, not in the path template: nothing to send
      continue;
    }
    const value = ownMember(parameters, parameter.name);
    if (!given(value)) {
      if (parameter.required) throw missing(`the ${parameter.in} parameter ${parameter.name}`);
      continue;
    }
    used.add(parameter.name);
    if (parameter.in === 'query') query.push(...queryPairs(parameter, value));
    else if (parameter.in === 'header') setMember(headers, parameter.name, pieces(value, parameter.explode, (text) => text).join(','));
    else if (parameter.in === 'cookie') cookies.push(`${parameter.name}=${pieces(value, false, encode).join(',')}`);
    else setMember(form, parameter.name, value);
  }
  if (cookies.length > 0) headers.cookie = cookies.join('; ');
  if (operation.accept && !Object.keys(headers).some((name) => name.toLowerCase() === 'accept')) headers.accept = operation.accept;
  const content = bodyValue(operation, parameters, used, form, ref);
  const unknown = Object.keys(parameters).filter((name) => !used.has(name));
  if (unknown.length > 0) {
    const known = operation.parameters.map((p) => p.name).concat(operation.body?.name ?? []);
    throw raise(
      'validation',
      400,
      'Unknown OpenAPI parameter',
      ref,
      `operation ${operation.operationId} has no parameter ${unknown.map((name) => JSON.stringify(name)).join(', ')} (its parameters: ${known.join(', ') || 'none'})`,
    );
  }
  let body: string | undefined;
  if (content !== undefined && operation.body) {
    body = bodyText(operation.body.mediaType, content, ref);
    headers['content-type'] = operation.body.mediaType;
  }
  return { method: operation.method, uri: query.length > 0 ? `${uri}${uri.includes('?') ? '&' : '?'}${query.join('&')}` : uri, headers, body };
}

/** The body's value, if any (marking the parameters it takes as used). */
function bodyValue(operation: ResolvedOperation, parameters: JsonObject, used: Set<string>, form: JsonObject, ref: string): JsonValue | undefined {
  const body = operation.body;
  if (!body) return undefined;
  let value: JsonValue | undefined;
  if (body.name !== undefined) {
    value = ownMember(parameters, body.name);
    if (given(value)) used.add(body.name);
  } else if (operation.parameters.some((p) => p.in === 'formData')) {
    value = Object.keys(form).length > 0 ? form : undefined;
  } else if (Object.hasOwn(parameters, 'body') && !operation.parameters.some((p) => p.name === 'body')) {
    value = parameters.body;
    used.add('body');
  } else {
    const rest = Object.entries(parameters).filter(([name]) => !used.has(name));
    for (const [name] of rest) used.add(name);
    value = rest.length > 0 ? Object.fromEntries(rest) : undefined;
  }
  if (!given(value)) {
    if (body.required)
      throw raise(
        'validation',
        400,
        'Missing OpenAPI body',
        ref,
        `operation ${operation.operationId} needs a body (${body.name ?? 'body'}), which parameters does not give`,
      );
    return undefined;
  }
  return value;
}

// ── documents kept between calls ─────────────────────────────────────────

export interface KeptDocument {
  document: JsonObject;
  used: UsedDocument;
}

/**
 * Parsed documents one executor keeps, per URI and credential, for `keepMs` on its clock and at most
 * limits.openApiDocumentsCachedMax of them: the instances calling one service fetch its document
 * once a while, not once a call. What each call used is recorded all the same (its SHA-256).
 */
export class OpenApiDocuments {
  private readonly kept = new BoundedMap<string, KeptDocument & { untilMs: number }>(limits.openApiDocumentsCachedMax);

  constructor(
    private readonly nowMs: () => number,
    private readonly keepMs: number,
  ) {}

  get(key: string): KeptDocument | undefined {
    const entry = this.kept.get(key);
    if (entry && entry.untilMs > this.nowMs()) return entry;
    if (entry) this.kept.delete(key);
    return undefined;
  }

  set(key: string, value: KeptDocument): void {
    if (this.keepMs > 0) this.kept.set(key, { ...value, untilMs: this.nowMs() + this.keepMs });
  }
}
