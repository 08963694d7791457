import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MsgHdrsImpl } from '@nats-io/transport-node';
import { AdapterError } from '../../src/contract/errors.js';
import { fromNatsHeaders, setHeader, toNatsHeaders } from '../../src/adapters/transport/nats-codec.js';

test('header maps survive the NATS wire encoding both ways, keys exactly as given', () => {
  const record = { 'Convoke-Branch': 'alfa', 'Convoke-Attempt': '2', 'Nats-Msg-Id': 'p-1', 'x-lower': ' padded ' };
  const h = toNatsHeaders(record)!;
  const decoded = MsgHdrsImpl.decode((h as MsgHdrsImpl).encode());
  assert.deepEqual(fromNatsHeaders(decoded), { ...record, 'x-lower': 'padded' });
  assert.equal(decoded.get('Convoke-Attempt'), '2');
  assert.equal(toNatsHeaders({}), undefined);
  assert.equal(toNatsHeaders(undefined), undefined);
  assert.deepEqual(fromNatsHeaders(undefined), {});
});

test('setHeader replaces a value and refuses CR/LF (a header injection)', () => {
  const h = toNatsHeaders({ 'Nats-Msg-Id': 'a' })!;
  setHeader(h, 'Nats-Msg-Id', 'b');
  assert.deepEqual(fromNatsHeaders(h), { 'Nats-Msg-Id': 'b' });
  assert.throws(
    () => setHeader(h, 'Convoke-Branch', 'x\r\nNats-Expected-Stream: OTHER'),
    (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input',
  );
  assert.throws(() => toNatsHeaders({ k: 'a\nb' }), AdapterError);
});
