/**
 * EventStoreDB conformance. No EventStoreDB server can run on the development machines
 * (docs/design.md §8), so the suite is skipped — reported as skipped, never as passed — unless
 * CONVOKE_ESDB_URL names one, e.g. `esdb://localhost:2113?tls=false` (docker-compose.yml).
 * Each harness uses its own stream prefix so runs against a shared server do not collide.
 */
import { randomUUID } from 'node:crypto';
import { EventStoreDbStore } from '../../src/adapters/store/eventstoredb.js';
import { storeConformance, type StoreFactory } from './store.js';
import { workflowConformance } from './workflow.js';
import { indexConformance } from './index.js';

const url = process.env.CONVOKE_ESDB_URL;

const eventStoreDbFactory: StoreFactory = async (options = {}) => {
  if (!url) throw new Error('CONVOKE_ESDB_URL not set');
  const streamPrefix = `convoke${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const clients: EventStoreDbStore[] = [];
  const open = async () => {
    const client = new EventStoreDbStore({ connectionString: url, streamPrefix, limits: options.limits, requestTimeoutMs: 5000 });
    clients.push(client);
    return client;
  };
  const store = await open();
  return {
    store,
    clock: 'server',
    // Only meaningful when the server shares this machine's clock; the suite uses wide margins.
    nowMs: () => Date.now(),
    openSecondClient: open,
    dispose: async () => {
      await Promise.all(clients.map((c) => c.close()));
    },
  };
};

storeConformance('eventstoredb', eventStoreDbFactory, url ? {} : { skip: 'CONVOKE_ESDB_URL not set' });
indexConformance('eventstoredb', eventStoreDbFactory, url ? {} : { skip: 'CONVOKE_ESDB_URL not set' });
workflowConformance('eventstoredb', eventStoreDbFactory, url ? {} : { skip: 'CONVOKE_ESDB_URL not set' });
