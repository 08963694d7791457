import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { tokensMatchSubject } from '../../src/adapters/transport/subjects.js';

/** The reference: NATS matching over split tokens, written the plain way. */
function tokensMatch(p: readonly string[], s: readonly string[]): boolean {
  for (let i = 0; i < p.length; i++) {
    const token = p[i];
    if (token === '>') return s.length > i;
    if (i >= s.length) return false;
    if (token !== '*' && token !== s[i]) return false;
  }
  return p.length === s.length;
}

const token = fc.constantFrom('demo', 'v1', 'review', 'op1', 'result', 'alfa', 'al', 'alfa2', '');
const patternToken = fc.oneof(token, fc.constant('*'), fc.constant('>'));

test('matching a subject without splitting it agrees with matching its split tokens', () => {
  fc.assert(
    fc.property(fc.array(patternToken, { minLength: 1, maxLength: 6 }), fc.array(token, { minLength: 1, maxLength: 6 }), (pattern, subjectTokens) => {
      const subject = subjectTokens.join('.');
      assert.equal(tokensMatchSubject(pattern, subject), tokensMatch(pattern, subject.split('.')), `${pattern.join('.')} vs ${subject}`);
    }),
    { numRuns: 20_000 },
  );
});

test('matching a subject without splitting it: the cases the mux meets', () => {
  const p = 'demo.v1.lab.review.*.result.*'.split('.');
  assert.equal(tokensMatchSubject(p, 'demo.v1.lab.review.op1.result.alfa'), true);
  assert.equal(tokensMatchSubject(p, 'demo.v1.lab.reviews.op1.result.alfa'), false, 'a longer token is another token');
  assert.equal(tokensMatchSubject(p, 'demo.v1.lab.review.op1.result'), false, 'a missing token');
  assert.equal(tokensMatchSubject(p, 'demo.v1.lab.review.op1.result.alfa.x'), false, 'an extra token');
  assert.equal(tokensMatchSubject(['demo', '>'], 'demo'), false, '> needs at least one token');
  assert.equal(tokensMatchSubject(['demo', '>'], 'demo.a.b'), true);
});
