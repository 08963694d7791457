/**
 * RFC 8785 (JCS) canonical JSON and the digests built on it: the invocation input digest and the
 * contract digest are `sha256:` + hex of a canonical form (docs/design.md §3).
 *
 * The `canonicalize` package does the serialization. Before it runs, the value is walked and
 * anything that is not plain JSON, or would not survive a strict re-parse, is invalid-input with
 * the JSON Pointer of the offending value — `canonicalize` would otherwise turn `undefined` into
 * nothing, call a `toJSON` (Date, Buffer), throw a bare Error, or (in 2.x/3.x) pass lone
 * surrogates through. The rules match parseStrict's, so `parseStrict(canonicalJson(v))` always
 * succeeds and gives back `v` (with -0 read as 0).
 */
import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { assert, invalidInput } from './errors.js';
import { describePointer, hasLoneSurrogate, isAmbiguousInteger, jsonPointer } from './ijson.js';
import type { JsonValue } from './json.js';
import { limits } from './limits.js';

interface Pending {
  readonly value: unknown;
  readonly parent: Pending | undefined;
  readonly key: string | number | undefined;
  /** Containers enclosing this value (0 for the root). */
  readonly depth: number;
}

function pointerOf(entry: Pending): string {
  const segments: (string | number)[] = [];
  for (let e: Pending | undefined = entry; e?.key !== undefined; e = e.parent) segments.push(e.key);
  return describePointer(jsonPointer(segments.reverse()));
}

/** Why `value` is not a JSON scalar, or undefined when it is one. Containers are checked by the walk. */
function scalarProblem(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return hasLoneSurrogate(value) ? 'lone surrogate in string' : undefined;
    case 'number':
      if (!Number.isFinite(value)) return `non-finite number ${String(value)}`;
      // Only integers ≥ 1e21 get an exponent in RFC 8785; below that an unsafe integer prints as
      // a plain digit string that claims a precision the double does not have.
      return isAmbiguousInteger(value) ? `integer ${String(value)} beyond ±(2^53−1)` : undefined;
    case 'boolean':
      return undefined;
    case 'object':
      return undefined; // null: containers are walked, never passed here
    default:
      return `not a JSON value (${typeof value})`;
  }
}

/** Children of a container to check next, or a description of why it is not plain JSON. */
function childrenOf(entry: Pending): Pending[] | string {
  const value = entry.value as object;
  const depth = entry.depth + 1;
  if (depth > limits.jsonDepthMax) return `nesting deeper than ${limits.jsonDepthMax} (or a cycle)`;
  const children: Pending[] = [];
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return 'not a plain array';
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) return `hole at index ${i} in array`;
      children.push({ value: value[i] as unknown, parent: entry, key: i, depth });
    }
    return children;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) {
    const name = (value.constructor as { name?: unknown } | undefined)?.name;
    return `not a plain object (${typeof name === 'string' ? name : 'unknown class'})`;
  }
  for (const key of Object.keys(value)) {
    if (hasLoneSurrogate(key)) return `lone surrogate in key ${JSON.stringify(key.slice(0, 64))}`;
    children.push({ value: (value as Record<string, unknown>)[key], parent: entry, key, depth });
  }
  return children;
}

/** Throws invalid-input at the first value that is not plain, strictly re-parseable JSON. */
export function checkCanonicalizable(value: unknown, what = 'value'): void {
  const stack: Pending[] = [{ value, parent: undefined, key: undefined, depth: 0 }];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const problem = typeof entry.value === 'object' && entry.value !== null ? childrenOf(entry) : scalarProblem(entry.value);
    if (typeof problem === 'string') throw invalidInput(`${what}: ${problem} at ${pointerOf(entry)}`);
    // Pushed last-first so the first problem reported is the first in document order.
    if (problem !== undefined) for (let i = problem.length - 1; i >= 0; i--) stack.push(problem[i] as Pending);
  }
}

/** RFC 8785 canonical form of a JSON value (UTF-16 key order, ECMAScript number form, -0 as 0). */
export function canonicalJson(value: JsonValue, what = 'value'): string {
  checkCanonicalizable(value, what);
  const text = canonicalize(value);
  assert(typeof text === 'string', 'a checked JSON value always canonicalizes to a string');
  return text;
}

/**
 * Lowercase hex SHA-256; strings are hashed as their UTF-8 bytes. One-shot `crypto.hash` (Node
 * ≥ 20.12): a third of the cost of a Hash object for the short inputs identities are.
 */
export function sha256Hex(data: string | Uint8Array): string {
  return hash('sha256', data, 'hex');
}

/** `sha256:` + hex of the canonical form: the invocation input digest and the contract digest. */
export function digestOf(value: JsonValue): string {
  return 'sha256:' + sha256Hex(canonicalJson(value));
}
