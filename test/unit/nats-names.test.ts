import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { durableLayout, durableStreamSubjects } from '../../src/adapters/transport/nats-names.js';

/** NATS subject matching, written plainly: does `pattern` match every subject `candidate` can be? */
function within(candidate: string, pattern: string): boolean {
  const a = candidate.split('.');
  const b = pattern.split('.');
  return a.length === b.length && !a.includes('>') && a.every((token, i) => b[i] === '*' || (token !== '*' && token === b[i]));
}

const namespace = 'demo.v1.lab';

test('streamFor places subjects and patterns exactly as the streams\' subject patterns do', () => {
  const layout = durableLayout(namespace);
  const subjects = durableStreamSubjects(namespace);
  const expected = (candidate: string) =>
    subjects.requests.some((p) => within(candidate, p)) ? layout.names.requests : subjects.results.some((p) => within(candidate, p)) ? layout.names.results : undefined;
  const token = fc.constantFrom('demo', 'v1', 'lab', 'review', 'op1', 'request', 'cancel', 'result', 'cancel-result', 'claim', 'claims', 'alfa', '*', '>', '');
  fc.assert(
    fc.property(fc.boolean(), fc.array(token, { minLength: 0, maxLength: 6 }), (prefixed, tokens) => {
      const candidate = (prefixed ? [namespace, ...tokens] : tokens).join('.');
      assert.equal(layout.streamFor(candidate), expected(candidate), candidate);
    }),
    { numRuns: 5000 },
  );
  assert.equal(layout.streamFor(`${namespace}.review.op1.request.alfa`), layout.names.requests);
  assert.equal(layout.streamFor(`${namespace}.review.op1.cancel-result.alfa`), layout.names.results);
  assert.equal(layout.streamFor(`${namespace}.review.op1.claims.alfa`), undefined);
  assert.equal(layout.streamFor(`other.v1.lab.review.op1.result.alfa`), undefined);
});
