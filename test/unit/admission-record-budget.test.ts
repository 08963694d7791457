/**
 * Spec: "Admission and immutable manifests" — the serialized record budgets are checked before
 * any state is created, never by truncating the manifest. These inputs are all within
 * inputBytesMax: only the admission record's size (against the transition budget, and against the
 * room the record budget leaves after every branch's closing reserve) can refuse them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, type Scenario } from '../support/scenario.js';
import { AdapterError } from '../../src/contract/errors.js';
import { limits } from '../../src/contract/limits.js';
import type { Transition } from '../../src/events/types.js';

const invalid = (pattern: RegExp) => (error: unknown) => error instanceof AdapterError && error.kind === 'invalid-input' && pattern.test(error.message);

async function operationCount(s: Scenario): Promise<number> {
  let count = 0;
  for await (const _ of s.store.operationIds()) count++;
  return count;
}

/** Counts the store's create calls: a refused admission must not reach the store at all. */
function countCreates(s: Scenario): () => number {
  let creates = 0;
  const store = s.store;
  const create = store.create.bind(store);
  store.create = (id: string, t: Transition) => (creates++, create(id, t));
  return () => creates;
}

const blob = (bytes: number) => ({ blob: 'x'.repeat(bytes) });

test('an admission record over the transition byte budget is refused before create, though its input is within the input budget', async () => {
  const budgets = {
    resultBytesMax: 1024,
    transitionBytesMax: limits.transitionOverheadBytesMax + 1024,
    recordBytesMax: 4 * (limits.transitionOverheadBytesMax + 1024),
  };
  const s = await scenario({ review: { input: { type: 'object' } }, embedded: { budgets } });
  const creates = countCreates(s);
  const inputBytes = 80 * 1024;
  assert.ok(inputBytes < limits.inputBytesMax);
  await assert.rejects(
    s.invoke('big', blob(inputBytes)),
    invalid(new RegExp(`the admission record is \\d+ bytes; the limit for 5 branches is ${budgets.transitionBytesMax}$`)),
  );
  assert.equal(creates(), 0);
  assert.equal(await operationCount(s), 0);
  assert.equal(s.bus.stats.published, 0);
  // An input that leaves the record within the budget is admitted with its whole manifest.
  const { result } = await s.invoke('small', blob(40 * 1024));
  assert.equal(result.branches.length, 5);
});

test('an admission record within the transition budget but over the room the record budget leaves for its branches is refused before create', async () => {
  // Ordinary room = recordBytesMax − closingBytesPerBranch × branches − transitionBytesMax:
  // 266 240 − 8 192 × 5 − 133 120 = 92 160 bytes for five peers, 124 928 for one.
  const budgets = {
    resultBytesMax: 1024,
    transitionBytesMax: 2 * (limits.transitionOverheadBytesMax + 1024),
    recordBytesMax: 4 * (limits.transitionOverheadBytesMax + 1024),
  };
  const roomFor = (branches: number) => budgets.recordBytesMax - limits.closingBytesPerBranch * branches - budgets.transitionBytesMax;
  const inputBytes = 100 * 1024;
  assert.ok(inputBytes < limits.inputBytesMax && inputBytes + 4096 < budgets.transitionBytesMax && inputBytes > roomFor(5) && inputBytes + 8192 < roomFor(1));

  const five = await scenario({ peers: 5, review: { input: { type: 'object' }, completion: { mode: 'first-success' } }, embedded: { budgets } });
  const creates = countCreates(five);
  await assert.rejects(
    five.invoke('big', blob(inputBytes)),
    invalid(new RegExp(`the admission record is \\d+ bytes; the limit for 5 branches is ${roomFor(5)}$`)),
  );
  assert.equal(creates(), 0);
  assert.equal(await operationCount(five), 0);
  assert.equal(five.bus.stats.published, 0);

  // The same input with one peer fits: the branch count decides the room, not the input alone.
  const one = await scenario({ peers: 1, review: { input: { type: 'object' }, completion: { mode: 'first-success' } }, embedded: { budgets } });
  const { result } = await one.invoke('big', blob(inputBytes));
  assert.deepEqual(
    result.branches.map((b) => b.peerId),
    ['alfa'],
  );
  await one.assertReplayEquals(result.operationId);
});
