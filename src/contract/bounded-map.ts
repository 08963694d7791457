/** A Map that forgets its oldest entries beyond a bound; setting a key makes it the newest. */
import { assert } from './errors.js';

export class BoundedMap<K, V> {
  private readonly map = new Map<K, V>();

  constructor(private readonly entriesMax: number) {
    assert(Number.isSafeInteger(entriesMax) && entriesMax > 0, 'BoundedMap needs a positive bound');
  }

  get(key: K): V | undefined {
    return this.map.get(key);
  }

  has(key: K): boolean {
    return this.map.has(key);
  }

  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.entriesMax) {
      const oldest = this.map.keys().next();
      if (!oldest.done) this.map.delete(oldest.value);
    }
  }

  delete(key: K): void {
    this.map.delete(key);
  }
}
