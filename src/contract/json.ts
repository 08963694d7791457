export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

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
