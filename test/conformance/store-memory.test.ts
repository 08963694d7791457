import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { storeConformance, type StoreFactory } from './store.js';
import { workflowConformance } from './workflow.js';
import { indexConformance } from './index.js';

const memoryFactory: StoreFactory = async (options = {}) => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock, limits: options.limits });
  return {
    store,
    clock: 'injected',
    setTimeMs: (ms) => clock.set(ms),
    nowMs: () => clock.nowMs(),
    dispose: () => store.close(),
  };
};

storeConformance('memory', memoryFactory);
indexConformance('memory', memoryFactory);
workflowConformance('memory', memoryFactory);
