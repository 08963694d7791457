import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { storeConformance } from './store.js';

storeConformance('memory', async (options = {}) => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock, limits: options.limits });
  return {
    store,
    clock: 'injected',
    setTimeMs: (ms) => clock.set(ms),
    nowMs: () => clock.nowMs(),
    dispose: () => store.close(),
  };
});
