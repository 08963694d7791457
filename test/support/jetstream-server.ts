/**
 * A JetStream-enabled nats-server for store tests and benches, on top of startNatsServer.
 *
 * Why this wrapper: startNatsServer's default JetStream block sets `sync_interval: always`, which
 * nats-server 2.9.10 (the Debian build here) rejects as an unknown field, so the server exits at
 * start. When that happens this starts it again with an equivalent block minus sync_interval
 * (2.9.x has no such option) and its own temp store dir, removed on dispose. Once the shared
 * helper or the server is updated, the first attempt succeeds and nothing here is used.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNatsServer, type NatsServer, type NatsServerOptions } from './nats-server.js';

let syncIntervalUnsupported = false;

export async function startJetStreamServer(options: Omit<NatsServerOptions, 'jetstream'> = {}): Promise<NatsServer> {
  if (!syncIntervalUnsupported) {
    try {
      return await startNatsServer({ ...options, jetstream: true });
    } catch (error) {
      if (!String(error).includes('sync_interval')) throw error;
      syncIntervalUnsupported = true;
    }
  }
  const storeDir = options.storeDir ?? (await mkdtemp(join(tmpdir(), 'convoke-js-')));
  const block = `jetstream { store_dir: ${JSON.stringify(storeDir)}, max_memory_store: 268435456, max_file_store: 4294967296 }`;
  const extraConfig = [block, options.extraConfig].filter(Boolean).join('\n');
  const server = await startNatsServer({ ...options, jetstream: false, extraConfig });
  return {
    ...server,
    storeDir,
    dispose: async () => {
      await server.dispose();
      if (options.storeDir === undefined) await rm(storeDir, { recursive: true, force: true });
    },
  };
}
