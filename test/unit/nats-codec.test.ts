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

test('a header name nats.js would refuse, or an empty one, is refused as invalid-input naming it', () => {
  const refused = (key: string) => (e: unknown) => {
    assert.ok(e instanceof AdapterError, String(e));
    assert.equal(e.kind, 'invalid-input', e.message);
    assert.match(e.message, new RegExp(`header name ${JSON.stringify(key).replace(/[\\[\]()^$.*+?{}|]/g, '\\$&')} `));
    return true;
  };
  for (const key of [
    '',
    'a:b',
    'Nats-Msg-Id:',
    'a b',
    ' a',
    'a\tb',
    'a\r\nNats-Expected-Stream',
    'a\nb',
    'a\u0000b',
    'a\u007fb',
    'Ünicode',
    'a\u00a0b',
    'a\u2028b',
  ]) {
    assert.throws(() => toNatsHeaders({ ok: 'v', [key]: 'v' }), refused(key), JSON.stringify(key));
    assert.throws(() => setHeader(toNatsHeaders({ ok: 'v' })!, key, 'v'), refused(key), JSON.stringify(key));
  }
  // What nats.js itself takes is taken: printable ASCII but ':', in any case.
  const h = toNatsHeaders({ 'X-Any_thing.1~!#$%&*+/=?@[]^`{|}': 'v', lower: 'w' })!;
  assert.deepEqual(Object.keys(fromNatsHeaders(MsgHdrsImpl.decode((h as MsgHdrsImpl).encode()))), ['X-Any_thing.1~!#$%&*+/=?@[]^`{|}', 'lower']);
});
