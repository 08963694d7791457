/**
 * Starts a real nats-server for a test: a generated config, random loopback ports (port -1,
 * discovered through ports_file_dir), its own temp JetStream store, a bounded readiness wait, and
 * disposal that always kills the process and removes its files. It never touches a server already
 * running on the machine.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { after, before } from 'node:test';
import { NatsTransport } from '../../src/adapters/transport/nats.js';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface NatsUser {
  user: string;
  password: string;
  publish?: string[];
  subscribe?: string[];
}

export interface NatsServerOptions {
  jetstream?: boolean;
  users?: NatsUser[];
  /** Extra raw config text appended verbatim. */
  extraConfig?: string;
  /** Reuse a storage dir (restart tests); a fresh temp dir when absent. */
  storeDir?: string;
  /** Reuse a port (restart tests). */
  port?: number;
  /** The largest message the server takes (max_payload; default 1 MiB). */
  maxPayload?: number;
  readyTimeoutMs?: number;
  /** Serve the monitoring endpoints (/varz, /connz, …) on a random loopback port (benches read them). */
  monitoring?: boolean;
  /**
   * How the readiness wait logs in to ask JetStream for its account info. Absent: anonymously on a
   * server without users, else as a probe user added to `users` with no restrictions. A server in
   * operator mode (its users live in JWTs) must be given one.
   */
  readyLogin?: Partial<ConnectionOptions>;
}

export interface NatsServer {
  url: string;
  port: number;
  storeDir: string;
  process: ChildProcess;
  /** `http://127.0.0.1:<port>` when started with `monitoring`. */
  monitorUrl?: string;
  /** Stops the server (SIGTERM, then SIGKILL), keeping its storage dir. */
  stop(): Promise<void>;
  /** Stops the server and deletes everything it wrote. */
  dispose(): Promise<void>;
}

const quote = (s: string) => JSON.stringify(s);

/** The user the readiness wait logs in as when the server has users (no restrictions). */
const probeUser = 'convoke-ready-probe';

/**
 * `sync_interval: always` (fsync before every JetStream ack; Jepsen 2025 lost acknowledged writes
 * without it) is only understood from nats-server 2.10 on; Debian's 2.9.10 refuses to start with
 * it. It is set whenever the installed server supports it.
 */
function supportsSyncInterval(): boolean {
  const out = spawnSync('nats-server', ['--version'], { encoding: 'utf8' }).stdout ?? '';
  const match = /v(\d+)\.(\d+)/.exec(out);
  return match !== null && (Number(match[1]) > 2 || (Number(match[1]) === 2 && Number(match[2]) >= 10));
}

const syncIntervalSupported = supportsSyncInterval();

function renderConfig(options: NatsServerOptions, storeDir: string, portsDir: string): string {
  const lines = ['host: 127.0.0.1', `port: ${options.port ?? -1}`, `ports_file_dir: ${quote(portsDir)}`, `max_payload: ${options.maxPayload ?? 1048576}`];
  if (options.monitoring) lines.push('http: "127.0.0.1:-1"');
  if (options.jetstream ?? true) {
    const sync = syncIntervalSupported ? ', sync_interval: always' : '';
    lines.push(`jetstream { store_dir: ${quote(storeDir)}, max_memory_store: 268435456, max_file_store: 4294967296${sync} }`);
  }
  if (options.users && options.users.length > 0) {
    const users = options.users.map((u) => {
      const perms: string[] = [];
      if (u.publish) perms.push(`publish: { allow: [${u.publish.map(quote).join(', ')}] }`);
      if (u.subscribe) perms.push(`subscribe: { allow: [${u.subscribe.map(quote).join(', ')}] }`);
      const permText = perms.length > 0 ? `, permissions: { ${perms.join(', ')} }` : '';
      return `    { user: ${quote(u.user)}, password: ${quote(u.password)}${permText} }`;
    });
    lines.push(`authorization { users: [\n${users.join('\n')}\n  ] }`);
  }
  if (options.extraConfig) lines.push(options.extraConfig);
  return lines.join('\n') + '\n';
}

interface Ports {
  port: number;
  monitorUrl?: string;
}

/** Whether the server runs JetStream: the helper's own block, or one in the extra config. */
function jetstreamConfigured(options: NatsServerOptions): boolean {
  return (options.jetstream ?? true) || /(^|\n)\s*jetstream\s*[{:]/.test(options.extraConfig ?? '');
}

/**
 * Waits until JetStream answers an account-info request ($JS.API.INFO) without an error: a
 * server writes its ports file as it starts listening, a moment before its JetStream answers
 * (until then every JetStream request finds no responder: "jetstream is not enabled").
 */
async function waitForJetStream(url: string, login: Partial<ConnectionOptions>, deadlineMs: number): Promise<void> {
  let last = 'no answer';
  const nc = await connect({ servers: url, ...login, timeout: Math.max(deadlineMs - Date.now(), 1) });
  try {
    while (Date.now() < deadlineMs) {
      try {
        const reply = await nc.request('$JS.API.INFO', undefined, { timeout: 1_000 });
        const body = JSON.parse(new TextDecoder().decode(reply.data)) as { error?: { description?: string } };
        if (body.error === undefined) return;
        last = body.error.description ?? JSON.stringify(body.error);
      } catch (error) {
        last = (error as Error).message;
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`nats-server's JetStream did not answer in time (${last})`);
  } finally {
    await nc.close();
  }
}

async function waitForPortsFile(dir: string, pid: number, monitoring: boolean, deadlineMs: number): Promise<Ports> {
  while (Date.now() < deadlineMs) {
    const names = await readdir(dir).catch(() => [] as string[]);
    const name = names.find((n) => n.endsWith(`_${pid}.ports`));
    if (name) {
      const text = await readFile(join(dir, name), 'utf8').catch(() => '');
      if (text) {
        const ports = JSON.parse(text) as { nats?: string[]; monitoring?: string[] };
        const url = ports.nats?.[0];
        const monitorUrl = ports.monitoring?.[0];
        if (url && (!monitoring || monitorUrl)) return { port: Number(new URL(url).port), ...(monitorUrl ? { monitorUrl } : {}) };
      }
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('nats-server did not report its ports in time');
}

export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServer> {
  const workDir = await mkdtemp(join(tmpdir(), 'convoke-nats-'));
  const storeDir = options.storeDir ?? join(workDir, 'js');
  const portsDir = join(workDir, 'ports');
  await import('node:fs/promises').then((fs) => fs.mkdir(portsDir, { recursive: true }));
  const configPath = join(workDir, 'nats.conf');
  const probe = { user: probeUser, password: randomBytes(12).toString('hex') };
  const probing = options.readyLogin === undefined && options.users !== undefined && options.users.length > 0;
  const rendered = probing ? { ...options, users: [...(options.users ?? []), probe] } : options;
  await writeFile(configPath, renderConfig(rendered, storeDir, portsDir));
  // In its own work dir: nats-server 2.9 can write a consumer's meta.inf into its working directory
  // when a concurrent delete removed the consumer's directory (seen recreating one consumer at once
  // from several connections).
  const child = spawn('nats-server', ['-c', configPath], { cwd: workDir, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8192);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let ports: Ports;
  const deadlineMs = Date.now() + (options.readyTimeoutMs ?? 10_000);
  const ready = async () => {
    const found = await waitForPortsFile(portsDir, child.pid ?? -1, options.monitoring ?? false, deadlineMs);
    if (jetstreamConfigured(options)) {
      const login = options.readyLogin ?? (probing ? { user: probe.user, pass: probe.password } : {});
      await waitForJetStream(`nats://127.0.0.1:${found.port}`, login, deadlineMs);
    }
    return found;
  };
  try {
    ports = await Promise.race([
      ready(),
      exited.then(() => {
        throw new Error(`nats-server exited during start: ${stderr}`);
      }),
    ]);
  } catch (error) {
    child.kill('SIGKILL');
    await rm(workDir, { recursive: true, force: true });
    throw error;
  }
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  };
  const { port, monitorUrl } = ports;
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    ...(monitorUrl ? { monitorUrl } : {}),
    storeDir,
    process: child,
    stop,
    dispose: async () => {
      await stop();
      await rm(workDir, { recursive: true, force: true });
      if (options.storeDir === undefined) await rm(storeDir, { recursive: true, force: true });
    },
  };
}

/** A value a suite's `before` makes, read by its tests: only once made (natsTransportForSuite, deploymentForSuite). */
export function madeForSuite<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`the suite's ${what} is made before its tests run`);
  return value;
}

/** A suite's nats-server, a connection to it and a NatsTransport on that connection (natsTransportForSuite). */
export interface NatsTransportSuite {
  readonly server: NatsServer;
  readonly nc: NatsConnection;
  readonly transport: NatsTransport;
}

/**
 * Inside a `describe`: a nats-server of the suite's own (`options`), a connection and a transport,
 * made before its tests and closed after them. Read the fields inside the tests, once made.
 */
export function natsTransportForSuite(options: NatsServerOptions): NatsTransportSuite {
  const made: { server?: NatsServer; nc?: NatsConnection; transport?: NatsTransport } = {};
  before(async () => {
    made.server = await startNatsServer(options);
    made.nc = await connect({ servers: made.server.url });
    made.transport = new NatsTransport(made.nc, { identity: 'test' });
  });
  after(async () => {
    await made.transport?.close();
    await made.nc?.close();
    await made.server?.dispose();
  });
  return {
    get server() {
      return madeForSuite(made.server, 'nats-server');
    },
    get nc() {
      return madeForSuite(made.nc, 'connection');
    },
    get transport() {
      return madeForSuite(made.transport, 'transport');
    },
  };
}
