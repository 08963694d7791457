/**
 * PubAckMux against a real nats-server with JetStream: every answer a JetStream publish can get
 * arrives as the same error class `js.publish` would give, so receipts and CAS checks read alike.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import { connect, errors, type NatsConnection } from '@nats-io/transport-node';
import { PubAckMux } from '../../src/adapters/transport/nats-pubacks.js';
import { classifyNatsError } from '../../src/adapters/transport/nats-errors.js';
import { isWrongSequence } from '../../src/adapters/store/jetstream.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import type { NatsServer } from '../support/nats-server.js';

const timeout = 60_000;
const bytes = (s: string) => new TextEncoder().encode(s);

describe('PubAckMux (JetStream publishes over one PubAck subscription)', { timeout }, () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let limited: NatsConnection;
  let deaf: NatsConnection;

  before(async () => {
    server = await startJetStreamServer({
      users: [
        { user: 'admin', password: 'admin-secret' },
        { user: 'limited', password: 'limited-secret', publish: ['mux.allowed.>'], subscribe: ['_INBOX.>'] },
        // May publish into the stream but not receive its PubAcks.
        { user: 'deaf', password: 'deaf-secret', publish: ['mux.allowed.>'], subscribe: ['elsewhere.>'] },
      ],
    });
    nc = await connect({ servers: server.url, user: 'admin', pass: 'admin-secret' });
    limited = await connect({ servers: server.url, user: 'limited', pass: 'limited-secret' });
    deaf = await connect({ servers: server.url, user: 'deaf', pass: 'deaf-secret' });
    await (await jetstreamManager(nc)).streams.add({ name: 'MUX', subjects: ['mux.>'], duplicate_window: 60_000_000_000 });
  });

  after(async () => {
    await deaf?.close();
    await limited?.close();
    await nc?.close();
    await server?.dispose();
  });

  it('answers PubAcks in any order to the publish that asked, and a repeated Msg-Id as duplicate', async () => {
    const mux = PubAckMux.of(nc);
    assert.equal(PubAckMux.of(nc), mux, 'one mux per connection');
    const acks = await Promise.all(
      Array.from({ length: 50 }, (_, i) => mux.publish(`mux.a.${i}`, bytes(`m${i}`), { msgID: `id-${i}`, expect: { streamName: 'MUX' }, timeout: 5000 })),
    );
    const seqs = acks.map((a) => a.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
    );
    assert.equal(new Set(seqs).size, 50);
    assert.ok(acks.every((a) => a.stream === 'MUX' && a.duplicate === false));
    const again = await mux.publish('mux.a.7', bytes('m7'), { msgID: 'id-7', timeout: 5000 });
    assert.deepEqual({ seq: again.seq, duplicate: again.duplicate }, { seq: acks[7]!.seq, duplicate: true });
  });

  it('an API error response is a JetStreamApiError: wrong expected stream, wrong last subject sequence', async () => {
    const mux = PubAckMux.of(nc);
    await assert.rejects(
      mux.publish('mux.b.1', bytes('x'), { expect: { streamName: 'OTHER' }, timeout: 5000 }),
      (e: unknown) => e instanceof JetStreamApiError && classifyNatsError(e).kind === 'api',
    );
    const first = await mux.publish('mux.b.2', bytes('x'), { expect: { lastSubjectSequence: 0 }, timeout: 5000 });
    await assert.rejects(mux.publish('mux.b.2', bytes('y'), { expect: { lastSubjectSequence: 0 }, timeout: 5000 }), (e: unknown) => isWrongSequence(e));
    const next = await mux.publish('mux.b.2', bytes('y'), { expect: { lastSubjectSequence: first.seq }, timeout: 5000 });
    assert.ok(next.seq > first.seq);
  });

  it('a header value with CR/LF is refused before anything is sent', async () => {
    await assert.rejects(
      PubAckMux.of(nc).publish('mux.d.1', bytes('x'), { msgID: 'id\r\nNats-Expected-Stream: OTHER', timeout: 5000 }),
      (e: unknown) => classifyNatsError(e).kind === 'invalid',
    );
    const stored = await PubAckMux.of(nc).publish('mux.d.1', bytes('x'), { expect: { lastSubjectSequence: 0 }, timeout: 5000 });
    assert.equal(stored.duplicate, false, 'nothing was stored under mux.d.1 before');
  });

  it('a subject no stream captures answers no-responders at once', async () => {
    // "At once" is told from "at the timeout" with a timeout far beyond any round trip on a loaded machine.
    const started = Date.now();
    await assert.rejects(
      PubAckMux.of(nc).publish('elsewhere.x', bytes('x'), { timeout: 60_000 }),
      (e: unknown) => e instanceof errors.NoRespondersError && classifyNatsError(e).kind === 'no-responders',
    );
    assert.ok(Date.now() - started < 30_000, 'answered, not timed out');
  });

  it('a denied publish is a permission violation for that publish only, and the connection stays usable', async () => {
    const mux = PubAckMux.of(limited);
    const [denied, allowed] = await Promise.allSettled([
      mux.publish('mux.denied.1', bytes('x'), { timeout: 5000 }),
      mux.publish('mux.allowed.1', bytes('x'), { timeout: 5000 }),
    ]);
    assert.equal(denied.status, 'rejected');
    assert.equal(classifyNatsError((denied as PromiseRejectedResult).reason).kind, 'permission');
    assert.equal(allowed.status, 'fulfilled');
    assert.equal((await mux.publish('mux.allowed.2', bytes('x'), { timeout: 5000 })).stream, 'MUX');
  });

  it('a PubAck inbox it may not subscribe to fails its publishes at once as uncertain: the message may be stored', async () => {
    const started = Date.now();
    await assert.rejects(
      PubAckMux.of(deaf).publish('mux.allowed.deaf', bytes('x'), { timeout: 60_000 }),
      (e: unknown) => classifyNatsError(e).kind === 'uncertain',
    );
    assert.ok(Date.now() - started < 30_000, 'failed with the subscription, not at the timeout');
    // It was stored: a permission answer here would have claimed otherwise.
    const stored = await (await jetstreamManager(nc)).streams.getMessage('MUX', { last_by_subj: 'mux.allowed.deaf' });
    assert.ok(stored);
  });

  it('no answer within the timeout is a TimeoutError (uncertain), and a late answer is ignored', async () => {
    // A plain subscriber takes the message and never answers: nothing proves storage either way.
    const silent = nc.subscribe('quiet.>', { callback: () => {} });
    await nc.flush();
    const started = Date.now();
    await assert.rejects(
      PubAckMux.of(nc).publish('quiet.1', bytes('x'), { timeout: 200 }),
      (e: unknown) => e instanceof errors.TimeoutError && classifyNatsError(e).kind === 'uncertain',
    );
    assert.ok(Date.now() - started >= 200);
    silent.unsubscribe();
  });

  it('publishes waiting when the connection closes fail as uncertain; a publish on a closed connection is refused', async () => {
    const own = await connect({ servers: server.url, user: 'admin', pass: 'admin-secret' });
    const quiet = own.subscribe('hush.>', { callback: () => {} });
    await own.flush();
    const waiting = PubAckMux.of(own).publish('hush.1', bytes('x'), { timeout: 30_000 });
    await own.close();
    void quiet;
    await assert.rejects(waiting, (e: unknown) => classifyNatsError(e).kind === 'uncertain');
    await assert.rejects(PubAckMux.of(own).publish('mux.c.1', bytes('x'), { timeout: 5000 }), (e: unknown) => e instanceof errors.ClosedConnectionError);
  });
});
