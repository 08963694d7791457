/**
 * `convoke serve` (durable mode, jetstream: store) started beside a nats-server that is still
 * starting waits it out within limits.natsStartupWaitMsMax: a server that does not listen yet,
 * and one that listens but whose JetStream does not answer yet ("jetstream is not enabled", as a
 * freshly started server answers for a moment). A JetStream that never answers ends the start as
 * unavailable (exit 4) once the wait is over.
 *
 * The server "still starting" is played by stopping the fixture's server, and by a plain
 * nats-server without JetStream on the same port, replaced by the real one a moment later.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { limits } from '../../src/contract/limits.js';
import { deploymentForSuite, e2eBundle, eventually, type NatsDeploymentFixture } from '../support/nats-deployment-fixture.js';
import { startNatsServer, type NatsServer } from '../support/nats-server.js';

/** Resolves once the child's standard error matches `pattern` (serve logged that it is waiting). */
function whenLogged(child: ChildProcess, pattern: RegExp): Promise<void> {
  let text = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer | string) => {
      text += String(chunk);
      if (!pattern.test(text)) return;
      child.stderr!.off('data', onData);
      resolve();
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`convoke serve exited (${code}) before logging ${pattern}:\n${text}`)));
  });
}

/** The consumers on the deployment's one index stream (`<stream>_INDEX`). */
async function indexConsumers(f: NatsDeploymentFixture): Promise<number> {
  const nc = await f.adminConnection();
  try {
    const jsm = await jetstreamManager(nc);
    const names: string[] = [];
    for await (const name of jsm.streams.names()) if (name.endsWith('_INDEX')) names.push(name);
    assert.equal(names.length, 1, `one index stream: ${names.join(', ')}`);
    let count = 0;
    for await (const consumer of jsm.consumers.list(names[0]!))
      if (consumer.config.filter_subject !== undefined || consumer.config.filter_subjects !== undefined) count++;
    return count;
  } finally {
    await nc.close();
  }
}

/** Every serve process started here: one that never got ready is not the fixture's to stop. */
const children: ChildProcess[] = [];

/** Starts serve; `waiting` resolves once it logged that it waits for `pattern`. */
function startServe(f: NatsDeploymentFixture, pattern: RegExp) {
  let spawned!: (child: ChildProcess) => void;
  const child = new Promise<ChildProcess>((resolve) => (spawned = resolve));
  const waiting = child.then((c) => whenLogged(c, pattern));
  const serving = f.startServe({
    onSpawn: (c) => {
      children.push(c);
      spawned(c);
    },
  });
  return { serving, waiting };
}

describe('convoke serve waits out a NATS server that is still starting', { timeout: 180_000 }, () => {
  const plain: NatsServer[] = [];
  const deployment = deploymentForSuite(
    { mode: 'durable', store: 'jetstream', bundle: e2eBundle(), groups: { reviewers: ['alfa', 'bravo'] }, peers: {}, commandClients: [] },
    {
      // Each test starts serve itself.
      startUp: async () => {},
      beforeDispose: async () => {
        for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        for (const server of plain) await server.dispose();
      },
    },
  );

  /** Stops the fixture's server and, when asked, starts one without JetStream on its port. */
  async function withoutJetStream(listening: boolean): Promise<{ port: number; server?: NatsServer }> {
    const port = deployment.fixture.server.port;
    await deployment.fixture.server.stop();
    if (!listening) return { port };
    const server = await startNatsServer({ users: deployment.fixture.users(), jetstream: false, port });
    plain.push(server);
    return { port, server };
  }

  it('a server that does not listen yet: serve connects once it does', async () => {
    const { port } = await withoutJetStream(false);
    const { serving, waiting } = startServe(deployment.fixture, /start-up: connecting to nats:\/\/127\.0\.0\.1:\d+ not ready \(.*connection refused/);
    await waiting;
    await deployment.fixture.startServer(port);
    const serve = await serving;
    assert.equal(await serve.stop(), 0);
  });

  it('a server whose JetStream does not answer yet: serve creates its streams once it does', async () => {
    const { port, server } = await withoutJetStream(true);
    const { serving, waiting } = startServe(deployment.fixture, /start-up: JetStream \(e2e\.v1\.lab\) not ready \(.*jetstream is not enabled/);
    await waiting;
    await server!.stop();
    await deployment.fixture.startServer(port);
    const serve = await serving;
    assert.equal(await serve.stop(), 0);
  });

  it('serve starts the index view at start-up, before any list or scrape asks for it', async () => {
    const serve = await deployment.fixture.startServe({ onSpawn: (child) => children.push(child) });
    // The view is an ordered consumer on the index stream; nothing else reads it while serve idles.
    await eventually(async () => (await indexConsumers(deployment.fixture)) > 0, 'a consumer on the index stream');
    assert.equal(await serve.stop(), 0);
  });

  it('a JetStream that never answers: serve exits unavailable (4) at the end of the wait', async () => {
    const { server } = await withoutJetStream(true);
    await assert.rejects(deployment.fixture.startServe({ onSpawn: (child) => children.push(child) }), (error: Error) => {
      assert.match(error.message, /exited \(4\) before listening/);
      const waited = /jetstream is not enabled.*still so after waiting (\d+) ms at start-up/.exec(error.message);
      assert.ok(waited, error.message);
      assert.ok(Number(waited[1]) >= limits.natsStartupWaitMsMax, `it gave up only at the end of the wait: ${waited[0]}`);
      return true;
    });
    await server!.stop();
  });
});
