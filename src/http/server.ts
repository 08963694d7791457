/**
 * Listening and graceful shutdown. Shutdown order: every new request gets 503 and every wait in
 * progress is released (answered with its current state, so in-flight requests finish promptly);
 * after the optional drain period the listener stops accepting and Fastify waits for in-flight
 * requests; only then are the coordinator (its queued appends finish), transport and store closed.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { BundleRegistry } from '../contract/bundle.js';
import type { Clock } from '../contract/clock.js';
import type { InvocationService } from '../runtime/service.js';
import type { WorkflowInstanceService } from '../runtime/workflow-service.js';
import type { CloudEventIntake } from '../contract/cloudevents.js';
import { createHttpApp, type HttpAppOptions } from './app.js';
import type { HttpSettings } from './settings.js';

/** What the server serves and, on close, shuts down (a running deployment is one). */
export interface HttpHost {
  coordinator: InvocationService;
  bundles: BundleRegistry;
  clock: Clock;
  http: HttpSettings;
  /** Workflow instances served at /workflow-instances (a deployment built with a WorkflowHostFactory). */
  workflows?: WorkflowInstanceService;
  /** Where POST /workflow-events delivers (the route is registered only with it). */
  workflowEvents?: CloudEventIntake;
  /** Closes the coordinator, transport and store once the listener has stopped. */
  close(): Promise<void>;
}

export interface RunningServer {
  url: string;
  app: FastifyInstance;
  /** Idempotent; resolves when the listener, the coordinator, the transport and the store are closed. */
  close(): Promise<void>;
  /** Stops listening and drops every connection now (a second signal): in-flight requests get no answer; no work is cancelled. */
  dropConnections(): void;
}

export async function startHttpServer(deployment: HttpHost, options: Pick<HttpAppOptions, 'onInternalError' | 'logger'> = {}): Promise<RunningServer> {
  const appOptions: HttpAppOptions = { coordinator: deployment.coordinator, bundles: deployment.bundles, clock: deployment.clock, settings: deployment.http };
  if (deployment.workflows) appOptions.workflows = deployment.workflows;
  if (deployment.workflowEvents) appOptions.workflowEvents = deployment.workflowEvents;
  if (options.onInternalError) appOptions.onInternalError = options.onInternalError;
  if (options.logger) appOptions.logger = options.logger;
  const { app, beginShutdown } = createHttpApp(appOptions);
  await app.listen({ host: deployment.http.host, port: deployment.http.port });
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      beginShutdown();
      const drainMs = deployment.http.drainMs;
      if (drainMs > 0) await new Promise<void>((done) => deployment.clock.at(deployment.clock.nowMs() + drainMs, done));
      try {
        await app.close();
      } finally {
        await deployment.close();
      }
    })();
    return closing;
  };
  return {
    url: listeningUrl(app),
    app,
    close,
    dropConnections: () => {
      app.server.close();
      app.server.closeAllConnections();
    },
  };
}

function listeningUrl(app: FastifyInstance): string {
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}
