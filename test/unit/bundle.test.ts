/** The contract bundle: schema (every error reported at once), profile semantics, digest, defaults. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadBundle } from '../../src/contract/bundle.js';
import { AdapterError } from '../../src/contract/errors.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { digestOf } from '../../src/contract/canonical.js';
import type { JsonObject } from '../../src/contract/json.js';

const invalid = (fragment: RegExp) => (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input' && fragment.test(e.message);

test('a bundle that fails its schema is rejected with every ajv error in the description', () => {
  const bad = reviewBundle({ timeoutMs: -1, completion: { mode: 'sometimes' }, votes: 'most' }) as JsonObject;
  bad['profile'] = '0.1';
  assert.throws(
    () => loadBundle(bad),
    (e) => e instanceof AdapterError && e.kind === 'invalid-input' && /profile/.test(e.message) && /timeoutMs/.test(e.message) && /votes/.test(e.message),
  );
});

test('the contract digest is sha256 of the canonical bundle document', () => {
  const doc = reviewBundle();
  assert.equal(loadBundle(doc).digest, digestOf(doc));
  assert.match(loadBundle(doc).digest, /^sha256:[0-9a-f]{64}$/);
});

test('omitted interaction fields take the documented defaults', () => {
  const doc = reviewBundle();
  const review = (doc['interactions'] as JsonObject)['review'] as JsonObject;
  for (const key of ['delivery', 'votes', 'attempts', 'siblings', 'waitFor', 'sender', 'cancellation']) delete review[key];
  const spec = loadBundle(doc).interactions.get('review')!.spec;
  assert.deepEqual(
    [spec.delivery, spec.votes, spec.attempts, spec.siblings, spec.waitFor, spec.sender, spec.cancellation],
    ['independent', 'distinct-branches', 1, 'detach', 'decision', 'include', 'none'],
  );
});

test('explicit manifests use supplied unique IDs', () => {
  const branches = [
    { branchId: 'x', peerId: 'alfa' },
    { branchId: 'x', peerId: 'bravo' },
  ];
  assert.throws(() => loadBundle(reviewBundle({ delivery: 'explicit', branches })), invalid(/unique/));
  assert.throws(() => loadBundle(reviewBundle({ delivery: 'explicit' })), invalid(/needs "branches"/));
  assert.throws(() => loadBundle(reviewBundle({ branches: [{ branchId: 'x', peerId: 'alfa' }] })), invalid(/only for delivery "explicit"/));
});

test('incompatible bindings are rejected: one-eligible with distinct-peers votes', () => {
  assert.throws(() => loadBundle(reviewBundle({ delivery: 'one-eligible', votes: 'distinct-peers' })), invalid(/one-eligible/));
});

test('impossible fractions are rejected at load: more than the whole', () => {
  assert.throws(() => loadBundle(reviewBundle({ completion: { mode: 'quorum', fraction: { num: 4, den: 3 } } })), invalid(/exceeds 1/));
});

test('renewal must be under the lease: renewIntervalMs below leaseMs', () => {
  assert.throws(() => loadBundle(reviewBundle({ leaseMs: 1000, renewIntervalMs: 1000 })), invalid(/renewIntervalMs/));
});

test('attempts are bounded to 1..16', () => {
  assert.throws(() => loadBundle(reviewBundle({ attempts: 17 })), invalid(/attempts/));
  assert.throws(() => loadBundle(reviewBundle({ attempts: 0 })), invalid(/attempts/));
});

test('an aggregate needs an output schema to be validated against', () => {
  const doc = reviewBundle();
  delete ((doc['interactions'] as JsonObject)['review'] as JsonObject)['output'];
  assert.throws(() => loadBundle(doc), invalid(/output/));
});

test('application schemas that are not valid JSON Schema are invalid input, not crashes', () => {
  assert.throws(() => loadBundle(reviewBundle({ input: { type: 'no-such-type' } })), invalid(/not a valid JSON Schema/));
});
