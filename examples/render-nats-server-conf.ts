/**
 * Renders examples/nats-server.conf from the serve config, its bundles and nats-permissions.ts:
 *
 *   npx tsx examples/render-nats-server-conf.ts > examples/nats-server.conf
 *
 * (test/integration/nats-deployment.test.ts checks that the committed file is this output.)
 */
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadBundle } from '../src/contract/bundle.js';
import { parseStrictBytes } from '../src/contract/ijson.js';
import { readDeploymentConfig } from '../src/deployment/config.js';
import { natsPlanFor, renderNatsServerConfig } from '../src/deployment/nats/permissions.js';

export const exampleCommandClients = ['billing'];
export const exampleServer = { host: '127.0.0.1', port: 14222, storeDir: '/tmp/convoke-example/jetstream' };

export async function renderExample(dir = dirname(fileURLToPath(import.meta.url))): Promise<string> {
  const config = await readDeploymentConfig(join(dir, 'serve.nats-durable.json'));
  const compiled = await Promise.all(config.bundles.map(async (file) => loadBundle(parseStrictBytes(await readFile(file), file))));
  return renderNatsServerConfig(natsPlanFor(config, compiled, exampleCommandClients), exampleServer);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.stdout.write(await renderExample());
