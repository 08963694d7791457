/**
 * The durability check's consumer repair (src/adapters/transport/nats-consumer-health.ts
 * recreateConsumer) against a real nats-server when several coordinators repair the same
 * consumer at once: each repair ends without an error, and one consumer of the declared config is
 * left, created after the one they observed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { recreateConsumer, type OwnedConsumer } from '../../src/adapters/transport/nats-consumer-health.js';
import { consumerMismatch, desiredConsumerConfig } from '../../src/adapters/transport/nats-consumers.js';
import type { DurableConfig } from '../../src/adapters/transport/nats-durable-config.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const config: DurableConfig = { namespace: 'rc', peers: ['alfa'], duplicateWindowMs: 60_000, maxDeliver: 5, ackWaitMs: 2_000 };

test('consumers: coordinators recreating the same observed consumer at once all succeed, and one consumer of the declared config is left', async () => {
  const server = await startJetStreamServer();
  // One connection per coordinator, as in a deployment.
  const connections = await Promise.all([1, 2, 3].map(() => connect({ servers: server.url })));
  try {
    const managers = await Promise.all(connections.map((nc) => jetstreamManager(nc)));
    const jsm = managers[0]!;
    await jsm.streams.add({ name: 'RC_REQ', subjects: ['rc.req.>'], storage: StorageType.File, retention: RetentionPolicy.Workqueue });
    const owned: OwnedConsumer = { stream: 'RC_REQ', durable: 'alfa-request', filter: 'rc.req.>' };
    await jsm.consumers.add(owned.stream, desiredConsumerConfig(owned.durable, owned.filter, config));
    for (let round = 0; round < 10; round++) {
      const observed = await jsm.consumers.info(owned.stream, owned.durable);
      const settled = await Promise.allSettled(managers.map((m) => recreateConsumer(m, owned, observed, config)));
      const failures = settled.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []));
      assert.deepEqual(failures, [], `round ${round}: every repair ends without an error`);
      const left = await jsm.consumers.info(owned.stream, owned.durable);
      assert.notEqual(left.created, observed.created, `round ${round}: the consumer was recreated`);
      assert.equal(consumerMismatch(left, owned.filter, config), undefined);
      // The server may still list a consumer deleted by a racing repair for a while (its delete
      // finishes after its answer; on a loaded machine it was seen listed for over 5 s): one must be
      // left once it has, never two for good.
      let listed: string[] = [];
      await eventually(
        async () => {
          listed = (await jsm.consumers.list(owned.stream).next()).map((c) => c.name);
          return listed.length === 1;
        },
        `round ${round}: one consumer left`,
        20_000,
      ).catch(() => assert.fail(`round ${round}: still listed ${JSON.stringify(listed)} after 20 s`));
      assert.deepEqual(listed, [owned.durable]);
    }
  } finally {
    await Promise.all(connections.map((nc) => nc.close()));
    await server.dispose();
  }
});
