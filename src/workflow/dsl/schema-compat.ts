/**
 * Whether one JSON Schema's values are all accepted by another: a stage's output must be a valid
 * input of the next stage, for every output the first can produce, before anything runs.
 *
 * "Compatible" is decided conservatively: `from` is compatible with `to` when a small set of rules
 * proves that every value `from` accepts, `to` accepts too. Anything the rules cannot prove is
 * incompatible, and a named transform (with its own schemas) bridges it. The rules:
 *
 *   - `to` accepts anything (no keyword but annotations), or the two are equal (annotations aside);
 *     equal schemas with a reference (`$ref`, …) anywhere only when they are whole documents,
 *     equal in full: a reference resolves in its own document (into its annotations too), so the
 *     same text in two documents, or in parts of them, may name different schemas;
 *   - `from`'s types are among `to`'s (`integer` counts as a `number`; `nullable: true`, which the
 *     shared ajv reads, adds `null`); a `from` without `type` may be anything, so only the first
 *     rule accepts it;
 *   - objects: `to.required` ⊆ `from.required`; each property `to` constrains is, in `from`,
 *     declared and compatible, or impossible (`additionalProperties: false`), or covered by a
 *     compatible `additionalProperties` schema; `to.additionalProperties: false` needs a closed
 *     `from` whose properties `to` declares; a `to.additionalProperties` schema must accept every
 *     other property `from` may have. A `from` with `patternProperties` is neither closed nor
 *     bound by its `additionalProperties` (a property a pattern matches is not "additional"):
 *     its undeclared properties may be anything;
 *   - arrays: items compatible; `to`'s minItems ≤ `from`'s, `to`'s maxItems ≥ `from`'s;
 *   - `enum` / `const`: every value `from` allows is in `to`'s (from a `from` that lists them);
 *   - bounds (minimum, maximum, exclusive ones, minLength, maxLength, minProperties,
 *     maxProperties) no tighter in `to`; `pattern`, `format`, `multipleOf` equal in both;
 *   - any other keyword in `to` ($ref, anyOf, oneOf, allOf, not, if, patternProperties, …) is
 *     incompatible unless the schemas are equal. Keywords in `from` only narrow its values, so an
 *     unknown one there is ignored (treating `from` as wider than it is: still sound).
 */
import { isObject, jsonEquals, type JsonObject, type JsonValue } from '../../contract/json.js';

/** Why a schema is not proven compatible: a path into the schemas and a reason; undefined when compatible. */
export interface Incompatibility {
  /** JSON Pointer into the data (`/text`, `/items/0`). */
  at: string;
  reason: string;
}

const annotations = new Set(['title', 'description', '$comment', 'examples', 'default', 'deprecated', 'readOnly', 'writeOnly', '$schema', '$id']);
const understood = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'enum',
  'const',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'minProperties',
  'maxProperties',
  'pattern',
  'format',
  'multipleOf',
]);
const lowerBounds = ['minimum', 'exclusiveMinimum', 'minLength', 'minItems', 'minProperties'] as const;
const upperBounds = ['maximum', 'exclusiveMaximum', 'maxLength', 'maxItems', 'maxProperties'] as const;
const sameValue = ['pattern', 'format', 'multipleOf'] as const;

const escape = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');
// Property names are looked up as own properties only (`Object.hasOwn`): `"toString" in {}` is true.

/**
 * The schema without annotations; `true` is `{}`. Built with Object.fromEntries, which defines
 * each member: assigning a `__proto__` member would set the copy's prototype instead, and the
 * rules would read keywords ajv never sees.
 */
function essential(schema: JsonValue | undefined): JsonObject | false {
  if (schema === true || schema === undefined) return {};
  if (!isObject(schema)) return false;
  return Object.fromEntries(Object.entries(schema).filter(([k]) => !annotations.has(k)));
}

/**
 * The types a schema declares. The shared ajv reads OpenAPI's `nullable: true` beside `type` as
 * one more type, `null`: a producer so marked may be null whatever its `type` says.
 */
function typesOf(schema: JsonObject): string[] | undefined {
  const declared =
    typeof schema.type === 'string' ? [schema.type] : Array.isArray(schema.type) ? schema.type.filter((t): t is string => typeof t === 'string') : undefined;
  if (declared === undefined || schema.nullable !== true || declared.includes('null')) return declared;
  return [...declared, 'null'];
}

/** The keywords that name another schema, resolved against the document the keyword is in. */
const referenceKeywords = ['$ref', '$recursiveRef', '$dynamicRef'];

/**
 * Whether a reference keyword is anywhere in `schema` (a member so named inside an `enum`, or a
 * property so named, counts too: only ever more caution).
 */
function refers(schema: JsonValue): boolean {
  const pending: JsonValue[] = [schema];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (Array.isArray(next)) pending.push(...next);
    else if (isObject(next)) {
      if (referenceKeywords.some((k) => Object.hasOwn(next, k))) return true;
      pending.push(...Object.values(next));
    }
  }
  return false;
}

/**
 * Whether every value of `from` is a value of `to`, by the rules above; the first failure
 * otherwise. `wholeDocuments`: the two schemas are whole documents (not parts of others), so that
 * equal ones with references are the same schema.
 */
export function schemaIncompatibility(
  fromSchema: JsonValue | undefined,
  toSchema: JsonValue | undefined,
  at = '',
  wholeDocuments = false,
): Incompatibility | undefined {
  const from = essential(fromSchema);
  const to = essential(toSchema);
  if (to !== false && Object.keys(to).length === 0) return undefined;
  if (from === false) return { at, reason: 'the producing schema rejects everything or is not a schema' };
  if (to === false) return { at, reason: 'the accepting schema rejects everything' };
  // A reference resolves in its own document (into annotations too): equal text in two documents,
  // or in parts of them, may name two different schemas.
  if (jsonEquals(from, to)) {
    if (!refers(to) || (wholeDocuments && jsonEquals(fromSchema, toSchema))) return undefined;
    return { at, reason: 'the schemas are equal, but a reference ($ref) in them resolves in two documents (or in a part of one), which may differ' };
  }
  const unknown = Object.keys(to).find((k) => !understood.has(k));
  if (unknown !== undefined) return { at, reason: `the accepting schema uses "${unknown}", which is compared only by equality` };
  return checkTypes(from, to, at) ?? checkValues(from, to, at) ?? checkBounds(from, to, at) ?? checkObject(from, to, at) ?? checkArray(from, to, at);
}

function checkTypes(from: JsonObject, to: JsonObject, at: string): Incompatibility | undefined {
  const toTypes = typesOf(to);
  if (toTypes === undefined) return undefined;
  const fromTypes = typesOf(from) ?? valueTypes(from);
  if (fromTypes === undefined) return { at, reason: `may be any type; accepted: ${toTypes.join(' | ')}` };
  const missing = fromTypes.filter((t) => !toTypes.includes(t) && !(t === 'integer' && toTypes.includes('number')));
  return missing.length === 0 ? undefined : { at, reason: `may be ${missing.join(' | ')}; accepted: ${toTypes.join(' | ')}` };
}

/** The types of the values a `const`/`enum` allows, when `from` lists them. */
function valueTypes(from: JsonObject): string[] | undefined {
  const values = allowedValues(from);
  if (values === undefined) return undefined;
  return [
    ...new Set(
      values.map((v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'number') : typeof v)),
    ),
  ];
}

function allowedValues(schema: JsonObject): JsonValue[] | undefined {
  if ('const' in schema) return [schema.const as JsonValue];
  if (Array.isArray(schema.enum)) return schema.enum;
  return undefined;
}

function checkValues(from: JsonObject, to: JsonObject, at: string): Incompatibility | undefined {
  const accepted = allowedValues(to);
  if (accepted === undefined) return undefined;
  const produced = allowedValues(from);
  if (produced === undefined) return { at, reason: `accepts only ${JSON.stringify(accepted)}; the producing schema does not list its values` };
  const outside = produced.find((v) => !accepted.some((a) => jsonEquals(a, v)));
  return outside === undefined ? undefined : { at, reason: `may be ${JSON.stringify(outside)}; accepted: ${JSON.stringify(accepted)}` };
}

function checkBounds(from: JsonObject, to: JsonObject, at: string): Incompatibility | undefined {
  for (const key of lowerBounds) {
    const bound = to[key];
    if (typeof bound !== 'number') continue;
    const own = from[key];
    if (typeof own !== 'number' || own < bound) return { at, reason: `"${key}" ${bound} is not implied by the producing schema` };
  }
  for (const key of upperBounds) {
    const bound = to[key];
    if (typeof bound !== 'number') continue;
    const own = from[key];
    if (typeof own !== 'number' || own > bound) return { at, reason: `"${key}" ${bound} is not implied by the producing schema` };
  }
  for (const key of sameValue) {
    if (key in to && !jsonEquals(from[key], to[key])) return { at, reason: `"${key}" ${JSON.stringify(to[key])} is not implied by the producing schema` };
  }
  return undefined;
}

function checkObject(from: JsonObject, to: JsonObject, at: string): Incompatibility | undefined {
  if (!('properties' in to || 'required' in to || 'additionalProperties' in to)) return undefined;
  const fromProps = isObject(from.properties) ? from.properties : {};
  const toProps = isObject(to.properties) ? to.properties : {};
  const fromRequired = new Set(Array.isArray(from.required) ? from.required : []);
  for (const name of Array.isArray(to.required) ? to.required : []) {
    if (typeof name === 'string' && !fromRequired.has(name))
      return { at: `${at}/${escape(name)}`, reason: 'required, but the producing schema does not require it' };
  }
  const others = otherProperties(from);
  const fromClosed = others === false;
  for (const [name, schema] of Object.entries(toProps)) {
    const where = `${at}/${escape(name)}`;
    const produced = Object.hasOwn(fromProps, name) ? fromProps[name] : fromClosed ? undefined : others;
    if (produced === undefined) continue; // the producer never has this property
    const problem = schemaIncompatibility(produced, schema, where);
    if (problem) return problem;
  }
  if (!('additionalProperties' in to) || to.additionalProperties === true) return undefined;
  if (to.additionalProperties === false && !fromClosed) {
    return { at, reason: 'the accepting schema allows no other properties; the producing schema does not close its own' };
  }
  for (const [name, schema] of Object.entries(fromProps)) {
    if (Object.hasOwn(toProps, name)) continue;
    if (to.additionalProperties === false) return { at: `${at}/${escape(name)}`, reason: 'may be present; the accepting schema allows no such property' };
    const problem = schemaIncompatibility(schema, to.additionalProperties, `${at}/${escape(name)}`);
    if (problem) return problem;
  }
  if (!fromClosed) return schemaIncompatibility(others, to.additionalProperties, `${at}/*`);
  return undefined;
}

/**
 * The schema of a property an object schema does not declare in `properties`: its
 * `additionalProperties` (false: there is none) — unless `patternProperties` is there, whose
 * patterns take the properties they match away from `additionalProperties`: such a property may
 * then hold anything, as far as these rules go.
 */
function otherProperties(schema: JsonObject): JsonValue {
  if (isObject(schema.patternProperties) && Object.keys(schema.patternProperties).length > 0) return {};
  return schema.additionalProperties ?? {};
}

function checkArray(from: JsonObject, to: JsonObject, at: string): Incompatibility | undefined {
  if (!('items' in to)) return undefined;
  return schemaIncompatibility(from.items, to.items, `${at}/*`);
}

/**
 * The schema of the value at `pointer` in a value of `schema`, when every value of `schema` has
 * one there (each step a required property, or an array index below minItems); with the path
 * segments (numbers for array steps) to build a jq path; or why not.
 */
export function schemaAt(schema: JsonValue, pointer: string): { schema: JsonValue; path: (string | number)[] } | { problem: string } {
  let current: JsonValue = schema;
  const path: (string | number)[] = [];
  if (pointer === '') return { schema, path };
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    const node = essential(current);
    const types = node === false ? undefined : typesOf(node);
    if (node === false || types === undefined || types.length !== 1) return { problem: `cannot follow "${key}": the schema there declares no single type` };
    if (types[0] === 'object') {
      const required = Array.isArray(node.required) ? node.required : [];
      if (!required.includes(key)) return { problem: `"${key}" is not a required property there, so it may be absent` };
      const props = isObject(node.properties) ? node.properties : {};
      current = Object.hasOwn(props, key) ? (props[key] as JsonValue) : otherProperties(node);
      path.push(key);
    } else if (types[0] === 'array' && /^(0|[1-9][0-9]*)$/.test(key)) {
      const index = Number(key);
      if (typeof node.minItems !== 'number' || node.minItems <= index) return { problem: `index ${index} may be absent (minItems is not above it)` };
      current = node.items ?? {};
      path.push(index);
    } else {
      return { problem: `cannot follow "${key}" into a schema of type ${types[0] ?? 'unknown'}` };
    }
  }
  return { schema: current, path };
}
