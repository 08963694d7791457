/**
 * What changed between two inspections of one stream, as a live event stream sends it after its
 * snapshot (src/http/live.ts, runtime/live-inspection.ts): a field that changed, whole; a keyed
 * list, only its new and changed entries; nothing for what did not change. A client applies it to what it holds by the one rule
 * docs/reference.md "The web console" states, so what it rebuilds equals a fresh read.
 */
import { isDeepStrictEqual } from 'node:util';

/** The entries of `next` that `previous` lacks or holds otherwise (by key), in `next`'s order. */
export function changedEntries<E>(previous: readonly E[], next: readonly E[], keyOf: (entry: E) => string): E[] {
  const before = new Map(previous.map((entry) => [keyOf(entry), entry]));
  return next.filter((entry) => {
    const old = before.get(keyOf(entry));
    return old === undefined || !isDeepStrictEqual(old, entry);
  });
}

/** The keys of the arrays of T, each with how its entries are named. */
export type KeyedLists<T> = { [K in keyof T]?: T[K] extends readonly (infer E)[] ? (entry: E) => string : never };

/**
 * The fields of `next` that differ from `previous`, each whole, except the keyed lists named in
 * `lists`: such a field holds only its new and changed entries, and is left out when none changed.
 */
export function changedFields<T extends object>(previous: T, next: T, lists: KeyedLists<T> = {}): Partial<T> {
  const changed: Partial<T> = {};
  for (const field of Object.keys(next) as (keyof T)[]) {
    const keyOf = lists[field] as ((entry: unknown) => string) | undefined;
    if (keyOf !== undefined) {
      const entries = changedEntries(previous[field] as unknown[], next[field] as unknown[], keyOf);
      if (entries.length > 0) changed[field] = entries as T[keyof T];
    } else if (!isDeepStrictEqual(previous[field], next[field])) changed[field] = next[field];
  }
  return changed;
}

/**
 * The keys of `next` whose entry is new or another object than in `previous`: for the maps of a
 * record whose fold replaces an entry it changes and never edits one in place, so an entry the
 * same object in both did not change, and nothing but references is compared.
 */
export function replacedKeys<V>(previous: Readonly<Record<string, V>>, next: Readonly<Record<string, V>>): string[] {
  if (previous === next) return [];
  return Object.keys(next).filter((key) => !Object.hasOwn(previous, key) || previous[key] !== next[key]);
}
