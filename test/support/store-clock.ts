/**
 * A server-stamped store (EventStore.nowMs) whose clock reads `aheadMs` later than the server's:
 * what a prune measures against once the server's clock has moved on, without waiting for it. A
 * store that stamps with the caller's clock (memory, SQLite) is answered as it is: the caller's
 * `nowMs` already says the time.
 */
import type { EventStore } from '../../src/adapters/store/types.js';

export function storeClockAhead<T extends EventStore>(store: T, aheadMs: number): T {
  const nowMs = store.nowMs?.bind(store);
  if (nowMs === undefined) return store;
  return new Proxy(store, {
    get: (real, key) => {
      if (key === 'nowMs') return async () => (await nowMs()) + aheadMs;
      const value: unknown = Reflect.get(real, key, real);
      return typeof value === 'function' ? value.bind(real) : value;
    },
  });
}
