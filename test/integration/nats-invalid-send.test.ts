/**
 * What the NATS client refuses before sending because the message or call itself is malformed — a
 * subject with whitespace, a header value with CR or LF, a header name holding a colon, whitespace
 * or a control, a negative timeout, a JetStream name with
 * a dot — is refused on every later attempt too: the transport says so as `invalid-input` naming
 * what is wrong (a publication `rejected` with a typed refusal), never `unavailable`, which would
 * have its caller send it again for ever. A message not sent because the connection is closed stays
 * `unavailable` (a publication `rejected` without a refusal). Real nats-server.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { NatsTransport } from '../../src/adapters/transport/nats.js';
import { toAdapterError } from '../../src/adapters/transport/nats-errors.js';
import { AdapterError } from '../../src/contract/errors.js';
import { natsTransportForSuite } from '../support/nats-server.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

function assertInvalid(error: unknown, names: RegExp): true {
  assert.ok(error instanceof AdapterError, String(error));
  assert.equal(error.kind, 'invalid-input', error.message);
  assert.match(error.message, names);
  return true;
}

describe('NATS transport: what the client refuses as malformed', { timeout: 60_000 }, () => {
  const nats = natsTransportForSuite({ jetstream: true });

  it('a request on a subject with whitespace is invalid-input naming the subject, not unavailable', async () => {
    await assert.rejects(nats.transport.request('test. bad', new Uint8Array(1), 1000), (error: unknown) =>
      assertInvalid(error, /illegal subject: 'test\. bad'/),
    );
  });

  it('a request with a timeout the client refuses is invalid-input naming it', async () => {
    await assert.rejects(nats.transport.request('test.echo', new Uint8Array(1), -1), (error: unknown) =>
      assertInvalid(error, /'timeout' must be greater than 0/),
    );
  });

  it('a core publish on a subject with whitespace is rejected with a typed invalid-input refusal', async () => {
    const receipt = await nats.transport.publish('test. bad', new Uint8Array(1));
    assert.equal(receipt.receipt, 'rejected');
    assertInvalid(receipt.refusal, /illegal subject/);
  });

  it('a core publish with a header value holding CR or LF is rejected with a typed invalid-input refusal', async () => {
    const receipt = await nats.transport.publish('test.core', new Uint8Array(1), { headers: { 'x-note': 'a\r\nb' } });
    assert.equal(receipt.receipt, 'rejected');
    assertInvalid(receipt.refusal, /header x-note contains CR or LF/);
  });

  it('a JetStream API call on a name the client refuses is invalid-input', async () => {
    const jsm = await jetstreamManager(nats.nc);
    const failed = await jsm.streams.info('a.b').then(
      () => undefined,
      (error: unknown) => toAdapterError(error, 'reading stream a.b'),
    );
    assertInvalid(failed, /reading stream a\.b: .*stream name/i);
  });

  it('on a connection that is gone: a publish is rejected without a refusal, a request unavailable', async () => {
    const gone = await connect({ servers: nats.server.url });
    const other = new NatsTransport(gone, { identity: 'gone' });
    await gone.close();
    const receipt = await other.publish('test.core', new Uint8Array(1));
    assert.equal(receipt.receipt, 'rejected');
    assert.equal(receipt.refusal, undefined);
    await assert.rejects(other.request('test.echo', new Uint8Array(1), 500), (error: unknown) => {
      assert.ok(error instanceof AdapterError);
      assert.equal(error.kind, 'unavailable', error.message);
      return true;
    });
  });
});

describe('NATS transport: a header name nats.js would refuse', { timeout: 60_000 }, () => {
  const nats = natsTransportForSuite({ jetstream: true });

  it('a publish with a header name holding a colon, whitespace or a line break is rejected with a typed invalid-input refusal, nothing sent', async () => {
    const seen: string[] = [];
    const sub = nats.nc.subscribe('test.names', { callback: (_error, msg) => void seen.push(msg.subject) });
    await nats.nc.flush();
    for (const name of ['Nats-Expected-Stream: OTHER', 'x note', 'x\r\nNats-Msg-Id', '']) {
      const receipt = await nats.transport.publish('test.names', new Uint8Array(1), { headers: { [name]: 'v' } });
      assert.equal(receipt.receipt, 'rejected', JSON.stringify(name));
      assertInvalid(receipt.refusal, /header name .* is not a header name/);
    }
    await nats.nc.flush();
    assert.deepEqual(seen, []);
    sub.unsubscribe();
  });

  it('a durable publish with a header name holding a colon is rejected with the same typed refusal, nothing stored', async () => {
    const namespace = 'names.v1.lab';
    const durable = new NatsTransport(nats.nc, {
      identity: 'durable',
      durable: { namespace, peers: ['alfa'], ackWaitMs: 2000, duplicateWindowMs: 20_000, maxDeliver: 10 },
    });
    await durable.ensureStreams();
    const subject = `${namespace}.review.op${'1'.repeat(64)}.request.alfa`;
    const receipt = await durable.publish(subject, new Uint8Array(1), { msgId: 'p-1', headers: { 'Nats-Expected-Stream: OTHER': 'v' } });
    assert.equal(receipt.receipt, 'rejected');
    assertInvalid(receipt.refusal, /header name .* is not a header name/);
    const stored = await durable.publish(subject, new Uint8Array(1), { msgId: 'p-1' });
    assert.equal(stored.receipt, 'stored', 'the refused publish stored nothing under its id');
  });
});
