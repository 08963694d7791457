/**
 * A listen inside a task whose own timeout fired: the enclosing task faulted (and a `try` caught
 * it, so the instance goes on), its work stopped, and nothing will ever read what that listen
 * takes. Over NATS (a real nats-server, request/reply), such a listen takes nothing: an event only
 * it would take is answered no-match and stored nowhere, and an event it would take beside a live
 * listen is taken by the live one alone, without waiting for an `until` verdict the stopped listen
 * will never record.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { serveCloudEvents } from '../../src/adapters/transport/nats-cloudevents.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import { startNatsServer } from '../support/nats-server.js';
import { assertReplayEqual, eventually, harness, yaml } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const event = (id: string, type: string): CloudEvent => ({ specversion: '1.0', id, source: 'https://convoke.dev/test', type, data: { id } });

/**
 * `outer` times out while `stale` waits, with an `until` expression that never holds; the `try`
 * catches the timeout, and `live` then waits for two ticks.
 */
const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: enclosing-timeout, version: '1.0.0' }
do:
  - guarded:
      try:
        - outer:
            timeout: { after: { milliseconds: 200 } }
            do:
              - stale:
                  listen:
                    to:
                      any:
                        - with: { type: com.example.late }
                        - with: { type: com.example.tick }
                      until: '\${ false }'
      catch:
        errors: { with: { status: 408 } }
  - live:
      listen:
        to:
          any:
            - with: { type: com.example.tick }
          until: '\${ length >= 2 }'
`);

const stale = '/do/0/guarded/try/0/outer/do/0/stale';
const live = '/do/1/live';

test('a listen whose enclosing task timed out takes nothing: its events are answered no-match, and a live listen of the instance takes its own without waiting for it', async () => {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  const h = harness({ listenUntilWaitMs: 300 });
  const subscription = serveCloudEvents(nc, 'test.events', h.executor);
  try {
    await subscription.ready();
    const ask = async (published: CloudEvent) =>
      (await nc.request(`test.events.${published.type}`, JSON.stringify(published), { timeout: 5000 })).json<{ status: string; count?: number }>();
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'enclosing', document, input: {} });
    await eventually(async () => (await h.executor.get(instanceId))?.listens[live] !== undefined, 'the timeout caught and the live listen waiting');
    const record = (await h.executor.get(instanceId))!;
    assert.equal(record.tasks['/do/0/guarded/try/0/outer']?.state, 'faulted', 'the enclosing task timed out');
    const revision = record.revision;

    assert.deepEqual(await ask(event('late-1', 'com.example.late')), { status: 'no-match' }, 'only the stopped listen would take it');
    assert.equal((await h.executor.get(instanceId))!.revision, revision, 'nothing stored');

    assert.deepEqual(await ask(event('tick-1', 'com.example.tick')), { status: 'accepted', count: 1 });
    assert.deepEqual(
      await ask(event('tick-2', 'com.example.tick')),
      { status: 'accepted', count: 1 },
      'no wait for a verdict the stopped listen never records',
    );
    const ended = await h.executor.wait(instanceId, 5000);
    assert.equal(ended.status, 'completed', JSON.stringify(ended.error));
    assert.deepEqual(ended.output, [{ id: 'tick-1' }, { id: 'tick-2' }]);
    assert.equal(ended.listens[stale]!.events.length, 0, 'the stopped listen took nothing');
    await assertReplayEqual(h, instanceId);
  } finally {
    await subscription.close();
    await h.close();
    await nc.close();
    await server.dispose();
  }
});
