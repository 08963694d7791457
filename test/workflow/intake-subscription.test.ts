/**
 * The NATS event intake of `workflows.events.listen` starts only where the server takes its
 * subscriptions: a NATS user that may not subscribe to `<subjectPrefix>.>` (or `<emitSubjectPrefix>.>`)
 * is refused by the server, which closes the subscription. Without a check the intake would run
 * subscribed to nothing, taking no event and saying nothing; `ready()` rejects `denied`, naming the
 * subject and the fix. Real nats-server, real per-user permissions.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { serveCloudEvents } from '../../src/adapters/transport/nats-cloudevents.js';
import type { CloudEventIntake } from '../../src/contract/cloudevents.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { startNatsServer } from '../support/nats-server.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

/** An intake no event reaches here: only the subscriptions are in question. */
const intake: CloudEventIntake = {
  deliver: async () => {
    throw new Error('no event is published in this test');
  },
};

test('the NATS event intake is ready only once the server took its subscriptions; a user that may not subscribe is refused as denied, naming the subject', async () => {
  const server = await startNatsServer({
    jetstream: false,
    users: [
      { user: 'host', password: 'host-secret', subscribe: ['test.events.>', 'test.emitted.>', '_INBOX.>'], publish: ['_INBOX.>'] },
      { user: 'narrow', password: 'narrow-secret', subscribe: ['test.events.>', '_INBOX.>'], publish: ['_INBOX.>'] },
    ],
  });
  try {
    const host = await connect({ servers: server.url, user: 'host', pass: 'host-secret' });
    const allowed = serveCloudEvents(host, 'test.events', intake, { emitSubjectPrefix: 'test.emitted' });
    await allowed.ready();
    await allowed.close();
    await host.close();

    const narrow = await connect({ servers: server.url, user: 'narrow', pass: 'narrow-secret' });
    const refused = serveCloudEvents(narrow, 'test.events', intake, { emitSubjectPrefix: 'test.emitted' });
    await assert.rejects(
      refused.ready(),
      (error: unknown) => isAdapterError(error) && error.kind === 'denied' && /may not subscribe to "test\.emitted\.>"/.test(error.description ?? ''),
    );
    await refused.close();
    await narrow.close();
  } finally {
    await server.dispose();
  }
});
