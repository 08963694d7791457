import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { checkToken, isOperationId, lengthPrefixed, operationId, publicationId, tokenPattern } from '../../src/contract/ids.js';
import { repoRoot, assertInvalid } from '../support/assertions.js';

interface OperationVector {
  note: string;
  principalId: string;
  contractDigest: string;
  invocationKey: string;
  encodingHex: string;
  operationId: string;
}

interface PublicationVector {
  note: string;
  contractDigest: string;
  operationId: string;
  branchId: string;
  attempt: number;
  encodingHex: string;
  publicationId: string;
}

const vectors = JSON.parse(readFileSync(join(repoRoot(), 'test', 'vectors', 'ids.json'), 'utf8')) as {
  layout: string;
  operation: OperationVector[];
  publication: PublicationVector[];
};

test('the vectors file documents its layout and covers the required cases', () => {
  assert.match(vectors.layout, /u64be/);
  assert.ok(vectors.operation.length >= 6);
  assert.ok(vectors.publication.length >= 4);
  assert.ok(
    vectors.operation.some((v) => v.invocationKey === ''),
    'an empty invocation key',
  );
  assert.ok(
    vectors.operation.some((v) => Buffer.byteLength(v.principalId) > v.principalId.length),
    'a multi-byte principal',
  );
  assert.ok(
    vectors.operation.some((v) => Buffer.byteLength(v.invocationKey) > v.invocationKey.length),
    'a multi-byte key',
  );
});

test('lengthPrefixed is u64be(byte length) then UTF-8 bytes, per part (docs/design.md §3)', () => {
  for (const v of vectors.operation) {
    assert.equal(lengthPrefixed([v.principalId, v.contractDigest, v.invocationKey]).toString('hex'), v.encodingHex, v.note);
  }
  for (const v of vectors.publication) {
    assert.equal(lengthPrefixed([v.contractDigest, v.operationId, v.branchId, String(v.attempt)]).toString('hex'), v.encodingHex, v.note);
  }
  assert.equal(lengthPrefixed([]).length, 0);
  assert.equal(lengthPrefixed(['']).toString('hex'), '0000000000000000');
  assert.equal(lengthPrefixed(['é']).toString('hex'), '0000000000000002c3a9');
});

test('operation ids match the independently computed vectors', () => {
  for (const v of vectors.operation) {
    assert.equal(operationId(v.principalId, v.contractDigest, v.invocationKey), v.operationId, v.note);
  }
});

test('publication ids match the independently computed vectors', () => {
  for (const v of vectors.publication) {
    assert.equal(publicationId(v.contractDigest, v.operationId, v.branchId, v.attempt), v.publicationId, v.note);
  }
});

test('operation ids are op + 64 lowercase hex digits (66 chars)', () => {
  for (const v of vectors.operation) {
    const id = operationId(v.principalId, v.contractDigest, v.invocationKey);
    assert.equal(id.length, 66);
    assert.ok(isOperationId(id));
  }
});

test('publication ids are 64 lowercase hex digits', () => {
  for (const v of vectors.publication) {
    assert.match(publicationId(v.contractDigest, v.operationId, v.branchId, v.attempt), /^[0-9a-f]{64}$/);
  }
});

test('moving bytes between parts changes the id (length prefixes, no separators)', () => {
  const digest = vectors.operation[0]?.contractDigest ?? '';
  assert.notEqual(operationId('ab', digest, 'c'), operationId('a', digest, 'bc'));
  assert.notEqual(operationId('x', digest, 'k'), operationId('x', digest + 'k', ''));
});

test('attempt must be an integer in 1..16', () => {
  const v = vectors.publication[0];
  assert.ok(v !== undefined);
  for (const attempt of [0, 17, -1, 1.5, Number.NaN, Infinity]) {
    assertInvalid(() => publicationId(v.contractDigest, v.operationId, v.branchId, attempt), 'attempt must be an integer in 1..16');
  }
  assert.match(publicationId(v.contractDigest, v.operationId, v.branchId, 1), /^[0-9a-f]{64}$/);
  assert.match(publicationId(v.contractDigest, v.operationId, v.branchId, 16), /^[0-9a-f]{64}$/);
});

test('peer and branch ids are NATS-token-safe ASCII [A-Za-z0-9_-]{1,64}', () => {
  for (const ok of ['a', 'Z', '0', 'branch-a', 'peer_B-7', 'x'.repeat(64)]) {
    assert.ok(tokenPattern.test(ok), ok);
    checkToken(ok, 'branch');
  }
  for (const bad of ['', 'x'.repeat(65), 'a.b', 'a*', 'a>', 'a b', 'é', 'a\n', 'a/b', '$SYS']) {
    assert.ok(!tokenPattern.test(bad), bad);
    assertInvalid(() => checkToken(bad, 'peer'), 'peer must match');
  }
});

test('isOperationId accepts exactly op + 64 lowercase hex digits', () => {
  const hex = 'a'.repeat(64);
  assert.ok(isOperationId('op' + hex));
  for (const bad of ['op' + 'A'.repeat(64), 'op' + hex.slice(1), 'op' + hex + '0', 'OP' + hex, hex, 'op' + 'g'.repeat(64), ` op${hex}`]) {
    assert.ok(!isOperationId(bad), bad);
  }
});

test('lone surrogates in identity parts are invalid-input (UTF-8 would merge them into U+FFFD)', () => {
  assertInvalid(() => operationId('alice', 'sha256:00', 'k\ud800'), 'identity part 2: lone surrogate');
  assert.notEqual(operationId('alice', 'sha256:00', '\ufffd'), operationId('alice', 'sha256:00', '\u{1f600}'));
});
