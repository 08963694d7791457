/**
 * A NATS user the server refuses a JetStream API subject is told so at once: opening a JetStream
 * store, waiting for a namespace's streams at start-up and a durable peer waiting for its
 * consumers fail as `denied`, naming the subject and the fix, instead of being waited on as a
 * JetStream that does not answer yet (and then reported unavailable).
 *
 * The server answers such a request with `-ERR 'Permissions Violation for Publish to "<subject>"'`;
 * nats.js rejects the request with a PermissionViolationError.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { NatsConnection } from '@nats-io/transport-node';
import { SystemClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import { JetStreamEventStore } from '../../src/adapters/store/jetstream.js';
import { openStore } from '../../src/adapters/store/open.js';
import { connectNats, NatsTransport } from '../../src/adapters/transport/nats.js';
import type { StartupWait } from '../../src/adapters/transport/nats-startup.js';
import { jetstreamStorePermissions } from '../../src/deployment/nats/permissions.js';
import { createNatsPeer } from '../../src/peer/nats-peer.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import type { NatsServer } from '../support/nats-server.js';

/** Short, so that a denial waited on as "not answering" ends the run soon (as unavailable). */
const shortWait = (): StartupWait => {
  const fromMs = Date.now();
  return { fromMs, untilMs: fromMs + 2_000, nowMs: Date.now };
};

const storePublish = jetstreamStorePermissions({}, { manageStreams: true }).publish;

function assertDenied(subject: string) {
  return (error: unknown) => {
    assert.ok(error instanceof AdapterError, `an AdapterError: ${String(error)}`);
    assert.equal(error.kind, 'denied', error.message);
    assert.ok(error.description?.includes(`"${subject}`), `names ${subject}: ${error.description}`);
    assert.match(error.description ?? '', /natsPrincipalPlan/, 'names the fix');
    return true;
  };
}

describe('a user refused a JetStream API subject at start-up', { timeout: 60_000 }, () => {
  let server: NatsServer;
  const password = randomBytes(9).toString('hex');
  const connections: NatsConnection[] = [];

  before(async () => {
    server = await startJetStreamServer({
      users: [
        // Everything a store needs but the account info the store asks first.
        { user: 'no-info', password, publish: storePublish.filter((s) => s !== '$JS.API.INFO') },
        // The generated store permissions without stream management, on a server without the streams.
        { user: 'no-create', password, publish: jetstreamStorePermissions({}, { manageStreams: false }).publish },
        { user: 'bare', password, publish: ['nothing.here'] },
      ],
    });
  });

  after(async () => {
    for (const nc of connections) await nc.close().catch(() => undefined);
    await server?.dispose();
  });

  async function connectAs(user: string): Promise<NatsConnection> {
    const nc = await connectNats({ servers: server.url, user, pass: password });
    connections.push(nc);
    return nc;
  }

  it('opening the store without $JS.API.INFO is denied, naming the subject', async () => {
    await assert.rejects(
      JetStreamEventStore.open({ servers: server.url, user: 'no-info', pass: password, startup: shortWait() }),
      assertDenied('$JS.API.INFO'),
    );
  });

  it('a jetstream: store URL opened without $JS.API.INFO is denied, not unavailable', async () => {
    const url = `jetstream:${server.url}?user=no-info&pass=${password}`;
    await assert.rejects(openStore(url, { clock: new SystemClock(), startup: shortWait() }), assertDenied('$JS.API.INFO'));
  });

  it('opening the store where its streams do not exist and the user may not create them is denied', async () => {
    await assert.rejects(
      JetStreamEventStore.open({ servers: server.url, user: 'no-create', pass: password, startup: shortWait() }),
      assertDenied('$JS.API.STREAM.CREATE.CONVOKE_OPS'),
    );
  });

  it("waiting for a namespace's streams at start-up is denied without stream info", async () => {
    const nc = await connectAs('bare');
    const durable = { namespace: 'denied.v1.lab', peers: ['alfa'], duplicateWindowMs: 60_000, maxDeliver: 5, ackWaitMs: 30_000 };
    const transport = new NatsTransport(nc, { identity: 'bare', durable });
    await assert.rejects(transport.awaitJetStream(shortWait()), assertDenied('$JS.API.STREAM.INFO.'));
  });

  it('a durable peer that may not read its consumers is denied, not left waiting for them', async () => {
    const nc = await connectAs('bare');
    await assert.rejects(
      createNatsPeer({ nc, namespace: 'denied.v1.lab', peerId: 'alfa', durable: true, handlers: {}, provisionWaitMs: 2_000 }),
      assertDenied('$JS.API.CONSUMER.INFO.'),
    );
  });
});
