/**
 * The admission rate per principal (src/runtime/admission-rate.ts, config `admissionRate`): a
 * token bucket on the injected clock; a new admission past it is `unavailable` with the wait in
 * its description and nothing recorded; an invocation under a key that already names an
 * operation is answered whatever the bucket holds; principals do not share a bucket.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { AdmissionRate, workflowStartWords, type RateWords } from '../../src/runtime/admission-rate.js';
import { minimalServeConfig } from '../support/config-fixtures.js';
import { answers, scenario, sharedStore } from '../support/scenario.js';

const refused = (says: RegExp) => (error: unknown) => isAdapterError(error) && error.kind === 'unavailable' && says.test(error.message);

test('a bucket: burst at once, then perSecond; each principal its own; a clock that goes back adds nothing', () => {
  const clock = new VirtualClock();
  const rate = new AdmissionRate({ perSecond: 2, burst: 3 }, clock);
  for (let i = 0; i < 3; i++) rate.take('a');
  assert.throws(() => rate.take('a'), refused(/principal "a" admits at most 2 operations a second here \(a burst of 3\); the next in 500 ms/));
  rate.take('b');
  clock.set(clock.nowMs() + 499);
  assert.throws(() => rate.take('a'), refused(/the next in 1 ms/));
  clock.set(clock.nowMs() + 1);
  rate.take('a');
  assert.throws(() => rate.take('a'), refused(/the next in 500 ms/));
  // Back an hour (a clock that ran fast, corrected): nothing refilled, nothing taken away, and the bucket counts
  // from the reading after the step, so the principal is not starved for the hour, and the wait it is told is true.
  clock.set(clock.nowMs() - 3_600_000);
  assert.throws(() => rate.take('a'), refused(/the next in 500 ms/));
  clock.set(clock.nowMs() + 500);
  rate.take('a');
  assert.throws(() => rate.take('a'), refused(/the next in 500 ms/));
  // A token given back (the take found its key already admitted) is there for the next take, never past the burst.
  rate.refund('a');
  rate.take('a');
  assert.throws(() => rate.take('a'), refused(/./));
  clock.set(clock.nowMs() + 60_000);
  for (let i = 0; i < 5; i++) rate.refund('a');
  for (let i = 0; i < 3; i++) rate.take('a');
  assert.throws(() => rate.take('a'), refused(/./));
});

test('a refusal says the rate as a person reads it', () => {
  const clock = new VirtualClock();
  const refusal = (perSecond: number, words?: RateWords) => {
    const rate = new AdmissionRate({ perSecond, burst: 1 }, clock, words);
    rate.take('a');
    try {
      rate.take('a');
    } catch (error) {
      return (error as Error).message;
    }
    return assert.fail('refused');
  };
  assert.match(refusal(1), /admits at most one operation a second/);
  assert.match(refusal(2.5), /admits at most 2\.5 operations a second/);
  assert.match(refusal(1 / 60), /admits at most one operation every 60 s/);
  assert.match(refusal(1 / 7, workflowStartWords), /starts at most one workflow instance every 7 s/);
  assert.match(refusal(3, workflowStartWords), /starts at most 3 workflow instances a second/);
});

test('a bucket fills no further than its burst, and a fraction of a token a second is one admission every few seconds', () => {
  const clock = new VirtualClock();
  const rate = new AdmissionRate({ perSecond: 0.5, burst: 2 }, clock);
  clock.set(clock.nowMs() + 3_600_000);
  rate.take('a');
  rate.take('a');
  assert.throws(() => rate.take('a'), refused(/the next in 2000 ms/));
  clock.set(clock.nowMs() + 2000);
  rate.take('a');
});

test('a coordinator with admissionRate refuses new admissions past it, answers known keys, and admits again after the wait', async () => {
  const s = await scenario({ peers: 1, review: { completion: { mode: 'first-success' } }, embedded: { admissionRate: { perSecond: 1, burst: 2 } } });
  await s.addPeer('alfa', { review: answers('approve') });
  const first = (await s.invoke('k1')).result.operationId;
  await s.invoke('k2');
  await assert.rejects(s.invoke('k3'), refused(/principal "svc-a" admits at most one operation a second/));
  // Nothing was recorded for the refused key.
  const refusedId = (await s.invoke('k1')).result.operationId;
  assert.equal(refusedId, first, 'a known key is answered, not refused');
  assert.deepEqual(await operationCount(s), 2);
  // Another principal has its own bucket.
  await s.invoke('k3', { document: 'hello' }, 'svc-b');
  await s.clock.advance(1000);
  await s.invoke('k3');
  assert.deepEqual(await operationCount(s), 4);

  // Another coordinator on the store, its bucket one token: keys it never held are found in the store, not refused.
  const shared = sharedStore(s.store);
  const other = await scenario({
    peers: 1,
    review: { completion: { mode: 'first-success' } },
    embedded: { store: shared, admissionRate: { perSecond: 1, burst: 1 } },
  });
  other.clock.set(s.clock.nowMs());
  // Its one token is taken for k1 and given back when the store answers that k1 names an operation: retries cost nothing.
  assert.equal((await other.invoke('k1')).result.operationId, first);
  assert.equal((await other.invoke('k2')).created, false, 'answered, and the token given back again');
  assert.equal((await other.invoke('k9')).created, true, 'the token the retries took back is there for new work');
  await assert.rejects(other.invoke('k10'), refused(/admits at most one operation a second here \(a burst of 1\)/));
  assert.equal((await other.invoke('k2')).created, false, 'answered with its bucket empty');
  await other.close();
  await s.close();
});

async function operationCount(s: { store: { operationIds(): AsyncIterable<string> } }): Promise<number> {
  let count = 0;
  for await (const _ of s.store.operationIds()) count++;
  return count;
}

test('config admissionRate: perSecond from one a minute to a million, burst a whole number from 1', () => {
  const parse = (admissionRate: unknown) => () =>
    parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(minimalServeConfig({ admissionRate }))), '/tmp');
  assert.deepEqual(parse({ perSecond: 0.5, burst: 10 })().admissionRate, { perSecond: 0.5, burst: 10 });
  assert.throws(parse({ perSecond: 0.01, burst: 10 }), /admissionRate\/perSecond/);
  assert.throws(parse({ perSecond: 1, burst: 0 }), /admissionRate\/burst/);
  assert.throws(parse({ perSecond: 1, burst: 1.5 }), /admissionRate\/burst/);
  assert.throws(parse({ perSecond: 1 }), /burst/);
});

test('a retry of a known key is answered even where its admission record is over this coordinator’s byte budget', async () => {
  const a = await scenario({ peers: 1, review: { completion: { mode: 'first-success' } } });
  await a.addPeer('alfa', { review: answers('approve') });
  const big = { document: 'x'.repeat(99_000) };
  const first = await a.invoke('big', big);
  assert.equal(first.created, true);
  const shared = sharedStore(a.store);
  // Another coordinator on the store whose transitions are smaller: a new admission this size is refused there, a known key answered.
  const b = await scenario({
    peers: 1,
    review: { completion: { mode: 'first-success' } },
    embedded: {
      store: shared,
      admissionRate: { perSecond: 1, burst: 5 },
      budgets: { transitionBytesMax: 70_000, resultBytesMax: 4_096, recordBytesMax: 4 * 1024 * 1024 },
    },
  });
  try {
    b.clock.set(a.clock.nowMs());
    const again = await b.invoke('big', big);
    assert.deepEqual([again.created, again.result.operationId], [false, first.result.operationId]);
    await assert.rejects(
      b.invoke('bigger', big),
      (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input' && /the admission record is \d+ bytes/.test(error.message),
    );
  } finally {
    await b.close();
    await a.close();
  }
});
