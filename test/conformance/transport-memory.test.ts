/** The Transport conformance suite against the in-process bus (memory mode). */
import { MemoryBus } from '../../src/adapters/transport/memory.js';
import type { Transport } from '../../src/adapters/transport/types.js';
import { conformanceRoster, transportConformance, type ConformanceContext, type Identity } from './transport.js';

transportConformance('memory bus', {
  capabilities: { durable: false, publishDenialReceipt: { streamSubject: 'rejected', plainSubject: 'rejected' } },
  start: async (): Promise<ConformanceContext> => {
    const bus = new MemoryBus();
    const roster = new Map(conformanceRoster().map((entry) => [entry.identity, entry]));
    const open: Transport[] = [];
    return {
      connect: async (identity: Identity) => {
        const transport = bus.connect(identity, roster.get(identity)?.permissions ?? {});
        open.push(transport);
        return transport;
      },
      dispose: async () => {
        await Promise.all(open.map((t) => t.close()));
      },
    };
  },
});
