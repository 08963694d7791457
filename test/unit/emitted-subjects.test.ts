/**
 * Where an emitted event travels: `<emitPrefix>.<principal token>.<type>`. Principal ids are not
 * all subject tokens (an HTTP principal is any name, a JWT one `jwt:<issuer>:<sub>`), so the token
 * encodes them; the encoding must be injective (no two principals share a subject) and inverted
 * exactly by the intake (a token no principal has is refused).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { emittedEventSubject, emittedMessageId, principalOfSubjectToken, principalSubjectToken } from '../../src/contract/cloudevents.js';
import { limits } from '../../src/contract/limits.js';

const token = /^[A-Za-z0-9_-]+$/;

test('a principal id becomes one subject token, itself when it is one, and comes back from it', () => {
  const long = 'é'.repeat(limits.principalIdBytesMax / 2);
  const principals = ['billing', 'svc-1', 'A_b', '_billing', '_', '-', 'jwt:https://idp.example/:u.1', 'a.b', 'a b', '*', '>', 'ü', '\u0000', long];
  const tokens = principals.map(principalSubjectToken);
  for (const [n, principal] of principals.entries()) {
    assert.match(tokens[n]!, token, principal);
    assert.equal(principalOfSubjectToken(tokens[n]!), principal, principal);
  }
  assert.equal(new Set(tokens).size, principals.length, 'no two principals share a token');
  assert.deepEqual(tokens.slice(0, 3), ['billing', 'svc-1', 'A_b'], 'a token-safe id not starting with _ stands for itself');
  assert.notEqual(tokens[3], '_billing', 'an id starting with _ is encoded: it could otherwise be another id’s encoding');
  assert.equal(emittedEventSubject('convoke.emitted', 'a.b', 'com.example.x'), `convoke.emitted.${principalSubjectToken('a.b')}.com.example.x`);
  assert.equal(emittedEventSubject('convoke.emitted', 'a.b', 'com.example.x').split('.').length, 6, 'the principal is one token');
});

test('a token no principal has stands for nobody', () => {
  const encoded = principalSubjectToken('a.b');
  for (const bad of [
    '',
    '_',
    `_${Buffer.from('billing').toString('base64url')}`, // billing's token is `billing`
    `${encoded}A`, // not the canonical encoding (trailing bits)
    `_${Buffer.from([0xff, 0xfe]).toString('base64url')}`, // not UTF-8
    'a.b',
    'a:b',
    '_a=',
  ])
    assert.equal(principalOfSubjectToken(bad), undefined, JSON.stringify(bad));
});

test('the JetStream message id of an emitted event is the task execution’s: per instance and execution, not the event’s id', () => {
  const at = '/do/0/placed';
  const id = emittedMessageId({ instanceId: 'wf1', at });
  assert.match(id, /^[0-9a-f]{64}$/);
  assert.equal(emittedMessageId({ instanceId: 'wf1', at }), id, 'the same execution, the same id');
  assert.notEqual(emittedMessageId({ instanceId: 'wf2', at }), id);
  assert.notEqual(emittedMessageId({ instanceId: 'wf1', at: `${at}[1]` }), id);
});
