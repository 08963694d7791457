/**
 * A core (non-durable) NATS subscription's handler that throws loses its message: nothing
 * delivers it again. The transport reports it (onHandlerError, which a deployment logs) rather
 * than dropping it unseen, and a report that throws in turn does not stop the subscription.
 * Real nats-server.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { NatsTransport } from '../../src/adapters/transport/nats.js';
import { startNatsServer } from '../support/nats-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

test("a core handler's failure is reported with its subject and error; a failing report leaves the subscription delivering", async () => {
  const server = await startNatsServer({ jetstream: false });
  const nc = await connect({ servers: server.url });
  const reported: string[] = [];
  let reportsThrow = false;
  const transport = new NatsTransport(nc, {
    identity: 'test',
    onHandlerError: (subject, error) => {
      reported.push(`${subject}: ${(error as Error).message}`);
      if (reportsThrow) throw new Error('the report failed too');
    },
  });
  const handled: string[] = [];
  try {
    await transport.subscribe('test.work.*', (message) => {
      handled.push(message.subject);
      if (message.subject.endsWith('.bad')) throw new Error('a defect in the handler');
    });
    await transport.publish('test.work.bad', new Uint8Array(1));
    await eventually(() => reported.length === 1, 'the failure reported', 5_000);
    assert.deepEqual(reported, ['test.work.bad: a defect in the handler']);

    reportsThrow = true;
    await transport.publish('test.work.bad', new Uint8Array(1));
    await transport.publish('test.work.good', new Uint8Array(1));
    await eventually(() => handled.includes('test.work.good'), 'the next message handled', 5_000);
    assert.equal(reported.length, 2);
  } finally {
    await transport.close();
    await nc.close();
    await server.dispose();
  }
});
