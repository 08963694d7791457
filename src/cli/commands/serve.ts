/**
 * `convoke serve --config FILE`: builds the deployment the config describes (with a nats
 * transport: the NATS connection, durable resources and the command API too), serves the HTTP
 * facade, prints one line with the listening URL (tests read the port from it when the config
 * asks for port 0), and shuts down gracefully on SIGINT/SIGTERM. A second signal stops waiting
 * for in-flight work.
 */
import { SystemClock } from '../../contract/clock.js';
import { buildDeployment, readDeploymentConfig } from '../../deployment/config.js';
import { startHttpServer } from '../../http/server.js';
import type { CliIo } from '../io.js';

export interface ServeOptions {
  config: string;
  /** Stops the server like a signal would (in-process use and tests); signals still work. */
  signal?: AbortSignal;
}

const shutdownSignals = ['SIGINT', 'SIGTERM'] as const;

export async function serveCommand(options: ServeOptions, io: CliIo): Promise<number> {
  const config = await readDeploymentConfig(options.config);
  const log = (line: string) => io.stderr.write(`convoke serve: ${line}\n`);
  // What loading the program took before anything of the deployment ran (seconds on a loaded machine).
  log(`starting ${Math.round(process.uptime() * 1000)} ms after the process started`);
  const deployment = await buildDeployment(config, { clock: new SystemClock(), log });
  let server;
  try {
    server = await startHttpServer(deployment, {
      onInternalError: (error) => io.stderr.write(`convoke serve: internal error: ${(error as Error)?.stack ?? String(error)}\n`),
    });
  } catch (error) {
    await deployment.close();
    throw error;
  }
  const nats = deployment.nats;
  if (nats) {
    const peers = [...nats.peers].map(([ns, ids]) => `${ns}: ${ids.join(' ')}`).join('; ');
    io.stdout.write(`convoke serve: NATS ${nats.mode} as coordinator ${nats.coordinatorId}; commands on ${nats.commandSubjects.join(', ')}${peers ? `; peer consumers ${peers}` : ''}\n`);
  }
  io.stdout.write(`convoke serve listening on ${server.url}\n`);
  // Module loading and config reading come before the deployment's own start-up log line.
  io.stderr.write(`convoke serve: listening ${Math.round(process.uptime() * 1000)} ms after the process started\n`);
  const stop = await nextStop(options.signal);
  io.stderr.write(`convoke serve: ${stop}, shutting down\n`);
  const running = server;
  let stopListening = () => {};
  const forced = new Promise<number>((resolve) =>
    (stopListening = onceSignal(() => {
      // In-flight requests lose their answer (clients look operations up by key); the store is not waited for.
      running.dropConnections();
      resolve(1);
    })),
  );
  const graceful = server.close().then(() => 0);
  const code = await Promise.race([graceful, forced]);
  stopListening();
  if (code !== 0) void graceful.catch(() => undefined);
  io.stderr.write(code === 0 ? 'convoke serve: stopped\n' : 'convoke serve: second signal: connections dropped, stopped\n');
  return code;
}

/** Resolves with the name of whatever asked the server to stop first. */
function nextStop(signal: AbortSignal | undefined): Promise<string> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve('aborted');
    const dispose = onceSignal((name) => {
      signal?.removeEventListener('abort', onAbort);
      resolve(name);
    });
    const onAbort = () => {
      dispose();
      resolve('aborted');
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Listens for the next SIGINT or SIGTERM once; returns a function that stops listening. */
function onceSignal(handler: (name: string) => void): () => void {
  const listeners = shutdownSignals.map((name) => {
    const listener = () => {
      dispose();
      handler(name);
    };
    process.on(name, listener);
    return [name, listener] as const;
  });
  const dispose = () => {
    for (const [name, listener] of listeners) process.off(name, listener);
  };
  return dispose;
}
