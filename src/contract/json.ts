export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/**
 * The first `max` UTF-16 units of `text` (so at most `max` characters), never half of a surrogate
 * pair: a cut between the two halves would leave a lone surrogate, which no strict reader of the
 * text's JSON (a NATS client, the canonical form) takes.
 */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/** Whether a value is a JSON object (not null, not an array). */
export const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Structural equality of JSON values (object key order ignored). */
export function jsonEquals(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (a === null || b === null || a === undefined || b === undefined) return false;
  if (typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as JsonValue[];
    return a.length === bb.length && a.every((x, i) => jsonEquals(x, bb[i]));
  }
  const ao = a as JsonObject;
  const bo = b as JsonObject;
  const keys = Object.keys(ao);
  return keys.length === Object.keys(bo).length && keys.every((k) => Object.prototype.hasOwnProperty.call(bo, k) && jsonEquals(ao[k], bo[k]));
}

/**
 * A deeply frozen copy: a fixed answer handed out many times without a copy each time, since
 * nothing that receives it can change it.
 */
export function deepFrozen(value: JsonValue): JsonValue {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return Object.freeze(value.map(deepFrozen)) as JsonValue[];
  const copy: JsonObject = {};
  for (const [key, member] of Object.entries(value)) setMember(copy, key, deepFrozen(member));
  return Object.freeze(copy);
}

/** The own member `key` of `object`, if any: never one its prototype has (`constructor`, `toString`). */
export const ownMember = <T>(object: Readonly<Record<string, T>>, key: string): T | undefined => (Object.hasOwn(object, key) ? object[key] : undefined);

/**
 * Sets an own data property. A plain assignment to `__proto__` would set the prototype instead
 * (or do nothing, for a primitive) and lose the member; JSON.parse makes it an own property.
 */
export function setMember<T>(object: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') {
    Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    object[key] = value;
  }
}

/** The most UTF-8 bytes JSON.stringify writes for one UTF-16 unit of a string: `\uXXXX`. */
const unitBytesMax = 6;
/**
 * The most characters JSON.stringify writes for a finite number: 25, for a negative one of 17
 * significant digits just above 1e-6, the smallest written without an exponent
 * (`-0.0000012345678901234567`); an exponent form takes at most 24 (`-1.2345678901234567e-308`).
 */
const numberBytesMax = 25;

/**
 * An upper bound of the UTF-8 bytes of JSON.stringify(value), found without serializing it, or a
 * number above `stopAbove` as soon as the bound passes it. Far cheaper than serializing a small
 * value, and what lets a caller that only needs "certainly at most N bytes" skip the serialization:
 * each string counts six bytes per UTF-16 unit (the longest escape), each number 25, each member its
 * key, quotes, colon and comma. `skip` leaves out one member of a top-level object (counted as
 * `null`).
 */
export function jsonBytesBound(value: JsonValue, stopAbove: number, skip?: string): number {
  let bytes = 0;
  const stack: JsonValue[] = [value];
  while (stack.length > 0) {
    const item = stack.pop() as JsonValue;
    if (typeof item === 'string') bytes += 2 + unitBytesMax * item.length;
    else if (typeof item === 'number') bytes += numberBytesMax;
    else if (item === null || typeof item !== 'object') bytes += 5;
    else if (Array.isArray(item)) {
      bytes += 2 + item.length;
      for (const member of item) stack.push(member);
    } else {
      bytes += 2;
      for (const key in item) {
        if (!Object.hasOwn(item, key)) continue;
        bytes += 4 + unitBytesMax * key.length;
        if (item === value && key === skip) bytes += 4;
        else stack.push(item[key] as JsonValue);
      }
    }
    if (bytes > stopAbove) return bytes;
  }
  return bytes;
}
