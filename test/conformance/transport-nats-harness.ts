/**
 * NATS factories for the Transport conformance suite: a real nats-server per test (via
 * test/support/nats-server.ts) whose users are exactly the suite's roster, with permissions from
 * nats-permissions.ts, and a NatsTransport per connection (core or durable).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connectNats, NatsTransport, type DurableConfig } from '../../src/adapters/transport/nats.js';
import { durableStreamNames } from '../../src/adapters/transport/nats-names.js';
import type { Transport } from '../../src/adapters/transport/types.js';
import { startNatsServer, type NatsServer, type NatsUser } from '../support/nats-server.js';
import {
  conformanceNamespace,
  conformancePeers,
  conformanceRoster,
  type ConformanceContext,
  type DurableControls,
  type Identity,
  type TransportFactory,
} from './transport.js';

const passwordOf = (identity: string) => `pw-${identity}`;

/** Short enough that a test of an unanswered publish finishes quickly. */
const publishAckTimeoutMs = 1_000;

export function rosterUsers(namespace = conformanceNamespace): NatsUser[] {
  return conformanceRoster(namespace).map((entry) => ({
    user: entry.identity,
    password: passwordOf(entry.identity),
    ...(entry.permissions === undefined ? {} : { publish: entry.permissions.publish, subscribe: entry.permissions.subscribe }),
  }));
}

export interface JetStreamServerOptions {
  users: NatsUser[];
  storeDir: string;
  port?: number;
}

/**
 * Starts nats-server with JetStream on a given store dir. The shared harness writes
 * `sync_interval: always` into its jetstream block, which nats-server 2.9.10 refuses
 * ("unknown field sync_interval": the option arrived in 2.10), so JetStream is configured here
 * through extraConfig with the harness's own JetStream switched off.
 */
export async function startJetStreamServer(options: JetStreamServerOptions): Promise<NatsServer> {
  const jetstreamBlock = `jetstream { store_dir: ${JSON.stringify(options.storeDir)}, max_memory_store: 268435456, max_file_store: 4294967296 }`;
  return startNatsServer({ users: options.users, jetstream: false, storeDir: options.storeDir, port: options.port, extraConfig: jetstreamBlock });
}

const durableDefaults: DurableConfig = { namespace: conformanceNamespace, peers: conformancePeers, duplicateWindowMs: 60_000, maxDeliver: 5, ackWaitMs: 1_000 };

class NatsHarness implements ConformanceContext {
  durable?: DurableControls;
  private readonly open: Transport[] = [];
  /** Every server process started, restarts included: each owns a work dir that dispose() removes. */
  private readonly started: NatsServer[] = [];
  private readonly roster = new Map(conformanceRoster().map((entry) => [entry.identity, entry]));

  constructor(
    private server: NatsServer,
    private readonly serverOptions: JetStreamServerOptions | undefined,
    private readonly durableConfig: DurableConfig | undefined,
  ) {
    this.started.push(server);
    if (durableConfig !== undefined && serverOptions !== undefined) this.durable = this.controls(durableConfig, serverOptions);
  }

  async connect(identity: Identity): Promise<Transport> {
    const transport = await NatsTransport.connect(
      {
        servers: this.server.url,
        user: identity,
        pass: passwordOf(identity),
        name: `conformance-${identity}`,
        inboxPrefix: this.roster.get(identity)?.inboxPrefix,
      },
      { identity, durable: this.durableConfig, publishAckTimeoutMs },
    );
    this.open.push(transport);
    return transport;
  }

  async dispose(): Promise<void> {
    await Promise.all(this.open.map((t) => t.close()));
    for (const server of this.started) await server.dispose();
    if (this.serverOptions !== undefined) await rm(this.serverOptions.storeDir, { recursive: true, force: true });
  }

  /** Runs `work` with an administrator's JetStream manager on a connection of its own. */
  private async asObserver(work: (jsm: JetStreamManager) => Promise<void>): Promise<void> {
    const nc = await connectNats({ servers: this.server.url, user: 'observer', pass: passwordOf('observer') });
    try {
      await work(await jetstreamManager(nc));
    } finally {
      await nc.close();
    }
  }

  private controls(config: DurableConfig, serverOptions: JetStreamServerOptions): DurableControls {
    const start = async () => {
      this.server = await startJetStreamServer({ ...serverOptions, port: this.server.port });
      this.started.push(this.server);
    };
    return {
      config,
      streams: durableStreamNames(config.namespace, 'alfa'),
      stopServer: () => this.server.stop(),
      startServer: start,
      restartServer: async () => {
        await this.server.stop();
        await start();
      },
      restartServerThroughInterlude: async (interludeMs) => {
        await this.server.stop();
        const plain = await startNatsServer({ users: rosterUsers(), jetstream: false, port: this.server.port });
        this.started.push(plain);
        await new Promise((resolve) => setTimeout(resolve, interludeMs));
        await plain.stop();
        await start();
      },
      alterStream: (stream, patch) => this.asObserver(async (jsm) => void (await jsm.streams.update(stream, patch))),
      deleteStream: (stream) => this.asObserver(async (jsm) => void (await jsm.streams.delete(stream))),
      purgeStream: (stream) => this.asObserver(async (jsm) => void (await jsm.streams.purge(stream))),
    };
  }
}

export function natsCoreFactory(): TransportFactory {
  return {
    capabilities: { durable: false, publishDenialReceipt: { streamSubject: 'sent', plainSubject: 'sent' } },
    start: async () => new NatsHarness(await startNatsServer({ users: rosterUsers(), jetstream: false }), undefined, undefined),
  };
}

/** JetStream: the coordinator creates the namespace's streams before the test runs, as a deployment would. */
export function natsDurableFactory(): TransportFactory {
  return {
    capabilities: { durable: true, publishDenialReceipt: { streamSubject: 'rejected', plainSubject: 'sent' } },
    start: async (options = {}) => {
      const config: DurableConfig = { ...durableDefaults, ...options.durable };
      const serverOptions: JetStreamServerOptions = { users: rosterUsers(), storeDir: await mkdtemp(join(tmpdir(), 'convoke-js-')) };
      const harness = new NatsHarness(await startJetStreamServer(serverOptions), serverOptions, config);
      try {
        const coordinator = (await harness.connect('coordinator')) as NatsTransport;
        await coordinator.ensureStreams();
      } catch (error) {
        await harness.dispose();
        throw error;
      }
      return harness;
    },
  };
}
