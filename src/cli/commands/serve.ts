/**
 * `convoke serve --config FILE [--context NAME] [--creds FILE]`: builds the deployment the config describes (with a nats
 * transport: the NATS connection, durable resources and the command API too), serves the HTTP
 * facade, prints one line with the listening URL (tests read the port from it when the config
 * asks for port 0), and shuts down gracefully on SIGINT/SIGTERM. A second signal stops waiting
 * for in-flight work.
 *
 * Everything else it says is a JSON log line (pino) on standard error: requests, the operation
 * lifecycle, the deployment's notices, start and stop (docs/operations.md "Logs").
 */
import { pino, type Logger as Pino } from 'pino';
import { SystemClock, type Clock } from '../../contract/clock.js';
import { buildDeployment, readDeploymentConfig } from '../../deployment/config.js';
import type { DeploymentConfig } from '../../deployment/types.js';
import type { WorkflowHostFactory } from '../../runtime/workflow-service.js';
import type { NatsLogin } from '../../adapters/transport/nats-creds.js';
import { invalidInput } from '../../contract/errors.js';
import { resolveConnection } from '../connection.js';
import { readCredsFile, readLogin } from '../secrets.js';
import { startHttpServer } from '../../http/server.js';
import { observeProcess } from '../../runtime/metrics.js';
import type { CliIo } from '../io.js';
import { buildInfo } from '../version.js';
import { createWorkflowHost, failureNotices, type WorkflowHostParts } from '../workflow-host.js';
import { readWorkflowSecrets, unboundSecrets, workflowSecretOrigins } from '../workflow-secrets.js';

export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof logLevels)[number];

export interface ServeOptions {
  config: string;
  /** A context (only one named here: serve never takes the selected one) and its file. */
  context?: string;
  contexts?: string;
  /** A NATS credentials file the coordinator logs in with (wins over the context's login and transport.passwordEnv). */
  creds?: string;
  env?: NodeJS.ProcessEnv;
  /** The least severe level written (default info). */
  logLevel?: LogLevel;
  /** Stops the server like a signal would (in-process use and tests); signals still work. */
  signal?: AbortSignal;
}

const shutdownSignals = ['SIGINT', 'SIGTERM'] as const;

/**
 * The server's logger: JSON lines on the CLI's standard error. A process's own standard error is
 * written asynchronously (pino's destination: lines written while a write is under way go out
 * together after it; the event loop never waits on a pipe whose reader is slow), and flushed
 * synchronously at exit, so nothing is lost by an exit however it comes; a process killed outright
 * loses at most the lines of its last write. An injected stream (tests, in-process use) is
 * written line by line. Credentials never reach a log call; the redaction below is a second
 * guard for fields that could carry one if a future line passed a whole object.
 */
export function serveLogger(io: CliIo, level: LogLevel = 'info'): Pino {
  return pino(
    {
      level,
      base: { pid: process.pid },
      // Top-level paths only: every line is a flat object, and wildcard paths double the cost of a line.
      redact: { paths: ['password', 'pass', 'token', 'authorization', 'headers', 'input'], censor: '[redacted]' },
    },
    io.stderrFd === undefined ? { write: (line: string) => void io.stderr.write(line) } : pino.destination({ dest: io.stderrFd, sync: false }),
  );
}

/**
 * The config with what --context and --creds give in place of its own: the context's store, and
 * for a nats transport its servers, user and login (a password file or credentials, read now).
 * On a memory transport a NATS setting is an error naming it, not ignored.
 */
export async function connectedConfig(options: ServeOptions, config: DeploymentConfig): Promise<{ config: DeploymentConfig; natsLogin?: NatsLogin }> {
  const flags = { context: options.context, contexts: options.contexts, creds: options.creds };
  const c = await resolveConnection(flags, options.env ?? process.env, { command: 'serve', user: 'serve' });
  const next: DeploymentConfig = c.store === undefined ? config : { ...config, store: c.store };
  const given = [
    c.nats === undefined ? undefined : 'nats',
    c.user === undefined ? undefined : 'user',
    c.loginNamed ? (c.login.kind === 'creds' ? 'creds' : 'a password') : undefined,
  ].filter((field): field is string => field !== undefined);
  if (next.transport.kind !== 'nats') {
    if (given.length > 0)
      throw invalidInput(
        `serve: ${sourceOf(c.contextName, options.creds)} gives ${given.join(', ')}, but the config's transport is memory: a NATS login needs a nats transport`,
      );
    return { config: next };
  }
  const transport = { ...next.transport, ...(c.nats === undefined ? {} : { servers: c.nats }), ...(c.user === undefined ? {} : { user: c.user }) };
  if (!c.loginNamed) {
    // The config's own credentials file, when neither a flag nor a context names a login.
    if (transport.credsFile === undefined) return { config: { ...next, transport } };
    return { config: { ...next, transport }, natsLogin: { creds: await readCredsFile(transport.credsFile) } };
  }
  const natsLogin = await readLogin(c.login, transport.user, 'serve', options.env ?? process.env);
  return { config: { ...next, transport }, natsLogin };
}

const sourceOf = (contextName: string | undefined, creds: string | undefined) =>
  [contextName === undefined ? undefined : `context "${contextName}"`, creds === undefined ? undefined : '--creds'].filter(Boolean).join(' with ');

/** An instance whose driving stopped (the store unavailable, a refused append) is driven again shortly: said, without a flood. */
function workflowFailureLog(logger: Pino, clock: Clock): (error: unknown) => void {
  const workflows = logger.child({ component: 'workflows' });
  return failureNotices(
    (notice) => workflows.warn({ event: 'workflow-driving-failed', ...notice }, 'driving a workflow instance failed; it is driven again shortly'),
    clock,
  );
}

/** An emitted CloudEvent the NATS intake gave up on (held past its window, too many held, or the intake closing) or refused for good: said, without a flood. */
function emittedDroppedLog(logger: Pino, clock: Clock): NonNullable<WorkflowHostParts['onEmittedDropped']> {
  const workflows = logger.child({ component: 'workflows' });
  const notices = failureNotices(
    (notice) => workflows.error({ event: 'emitted-event-dropped', ...notice }, 'an emitted CloudEvent was not delivered to its listens'),
    clock,
  );
  return (subject, reason, detail) => notices(new Error(`${subject} (${reason}): ${detail}`));
}

/** Purging a principal's events past its share of the emit stream failed (tried again at its next event): said, without a flood. */
function emitStreamTrimLog(logger: Pino, clock: Clock): NonNullable<WorkflowHostParts['onEmitStreamTrimFailed']> {
  const workflows = logger.child({ component: 'workflows' });
  const notices = failureNotices(
    (notice) =>
      workflows.warn(
        { event: 'emit-stream-trim-failed', ...notice },
        "a principal's events past its share of the emit stream were not purged; they are at its next emitted event",
      ),
    clock,
  );
  return (principalId, error) => notices(new Error(`${principalId}: ${error.description ?? error.message}`));
}

/**
 * How serve hosts its workflow instances, with the deployment's workflow secrets: read once,
 * before anything runs (a missing or unreadable one stops the start), each with the origins it
 * may go to. A secret that names none (confined by the egress allow list alone: the config
 * refuses it otherwise) is said at start-up: a workflow of any deployed bundle that declares it
 * may send it to any origin of that list.
 */
async function workflowHostOf(config: DeploymentConfig, env: NodeJS.ProcessEnv, logger: Pino): Promise<WorkflowHostFactory> {
  const sources = config.workflowSecrets;
  const secrets = await readWorkflowSecrets(sources, env);
  const secretOrigins = workflowSecretOrigins(sources);
  const workflows = logger.child({ component: 'workflows' });
  for (const { secret, reach } of unboundSecrets(sources, config.workflows?.http))
    workflows.warn(
      { event: 'workflow-secret-unbound', secret, reach },
      `workflow secret ${secret} names no origins: a workflow that declares it may send it to ${reach}; give it workflowSecrets.${secret}.origins`,
    );
  return (parts) =>
    createWorkflowHost({
      ...parts,
      secrets,
      secretOrigins,
      onFailure: workflowFailureLog(logger, parts.clock),
      onEmittedDropped: emittedDroppedLog(logger, parts.clock),
      onEmitStreamTrimFailed: emitStreamTrimLog(logger, parts.clock),
      onSubscriptionLost: (subject, error) =>
        workflows.error(
          { event: 'workflow-event-intake-lost', subject, kind: error.kind, description: error.description },
          `the NATS server closed the workflow event intake's subscription to ${subject}: no event on it reaches a listen until convoke serve is restarted`,
        ),
    });
}

export async function serveCommand(options: ServeOptions, io: CliIo): Promise<number> {
  const { config, natsLogin } = await connectedConfig(options, await readDeploymentConfig(options.config));
  const logger = serveLogger(io, options.logLevel);
  const notices = logger.child({ event: 'deployment' });
  const log = (line: string, level: 'info' | 'warn' | 'error' = 'warn') => notices[level](line);
  // What loading the program took before anything of the deployment ran (seconds on a loaded machine).
  notices.info({ sinceProcessStartMs: Math.round(process.uptime() * 1000) }, 'starting');
  const workflows = await workflowHostOf(config, options.env ?? process.env, logger);
  const deployment = await buildDeployment(config, {
    clock: new SystemClock(),
    log,
    logger: logger.child({ component: 'coordinator' }),
    // Workflow instances on the deployment's store; their contract calls go in-process.
    workflows,
    ...(natsLogin ? { natsLogin } : {}),
    ...(options.env ? { env: options.env } : {}),
  });
  observeProcess(deployment.coordinator.metrics, buildInfo());
  let server;
  try {
    server = await startHttpServer(deployment, {
      logger: logger.child({ component: 'http' }),
      onInternalError: (error) => logger.error({ event: 'internal-error', error: (error as Error)?.stack ?? String(error) }, 'internal error'),
    });
  } catch (error) {
    await deployment.close();
    throw error;
  }
  // Listening for the stop signals before saying it listens: whoever reads that line may signal
  // at once, and a signal that comes before its listener ends the process without a shutdown.
  const stopping = nextStop(options.signal);
  const nats = deployment.nats;
  if (nats) {
    const peers = [...nats.peers].map(([ns, ids]) => `${ns}: ${ids.join(' ')}`).join('; ');
    io.stdout.write(
      `convoke serve: NATS ${nats.mode} as coordinator ${nats.coordinatorId}; commands on ${nats.commandSubjects.join(', ')}${peers ? `; peer consumers ${peers}` : ''}\n`,
    );
  }
  io.stdout.write(`convoke serve listening on ${server.url}\n`);
  // The index's view (JetStream) is started now rather than by the first page or scrape, which
  // would wait for it; until it runs, pages are read from the paged snapshot.
  deployment.store.index
    .warm?.()
    .catch((error: unknown) => notices.warn({ error: String(error) }, 'operations index view did not start; lists read the paged snapshot'));
  // Module loading and config reading come before the deployment's own start-up lines.
  logger.info({ event: 'serve-started', url: server.url, sinceProcessStartMs: Math.round(process.uptime() * 1000) }, 'listening');
  const stop = await stopping;
  logger.info({ event: 'serve-stopping', signal: stop }, 'shutting down');
  const running = server;
  let stopListening = () => {};
  const forced = new Promise<number>(
    (resolve) =>
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
  if (code === 0) logger.info({ event: 'serve-stopped' }, 'stopped');
  else logger.warn({ event: 'serve-stopped', forced: true }, 'second signal: connections dropped, stopped');
  logger.flush();
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
