/**
 * Spec: "Selection, claims and attempts" — fence 0 (and attempt 0) is invalid in every wire
 * identity and at every effect sink. Each test fails when fence 0 is accepted: the message would
 * reach the fence comparison (counted as stale) or the sink would apply the effect.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, namespace, type Scenario } from '../support/scenario.js';
import { encodeWire, type ClaimMessage } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { peerBusPermissions } from '../../src/deployment/embedded.js';
import { flushMicrotasks } from '../../src/contract/clock.js';
import { MemoryEffectSink } from '../../src/peer/effect-sink.js';
import { AdapterError } from '../../src/contract/errors.js';

const counted = async (s: Scenario, reason: string) =>
  (await s.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
const invalidInput = (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input';

async function publishClaim(s: Scenario, op: string, identity: { attempt: number; fence: number }): Promise<void> {
  const message = { kind: 'claim', action: 'release', operationId: op, branchId: 'alfa', peerId: 'alfa', ...identity } satisfies ClaimMessage;
  const connection = s.bus.connect('claim:alfa', peerBusPermissions(namespace, 'alfa'));
  await connection.publish(subjectFor(namespace, 'review', op, 'claim', 'alfa'), encodeWire(message));
  await flushMicrotasks();
}

test('a result with attempt 0 is invalid on the wire: refused as malformed before any decision', async () => {
  const s = await scenario();
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  const before = (await s.events(op)).length;
  await s.send('alfa', { operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 0, fence: 1, result: { verdict: 'approve' } });
  assert.equal(await counted(s, 'malformed'), 1);
  assert.equal(await counted(s, 'stale-fence'), 0);
  assert.equal((await s.events(op)).length, before);
  assert.equal((await s.get(op)).branches[0]?.status, 'pending');
});

test('a claim with fence 0 is invalid on the wire: it releases nothing and is refused as malformed', async () => {
  const s = await scenario();
  const { result } = await s.invoke('k');
  await s.settle();
  const op = result.operationId;
  const before = (await s.events(op)).length;
  await publishClaim(s, op, { attempt: 1, fence: 0 });
  assert.equal(await counted(s, 'malformed'), 1);
  assert.equal(await counted(s, 'claim-stale-fence'), 0, 'it never reached the fence comparison');
  assert.equal((await s.events(op)).length, before, 'nothing of it is recorded');
  // The same release with the current fence is taken: only the fence made the first one invalid.
  await publishClaim(s, op, { attempt: 1, fence: 1 });
  assert.ok((await s.events(op)).length > before, 'the valid release is recorded');
});

test('the memory effect sink refuses fence 0 and attempt 0 as invalid-input and applies nothing', async () => {
  const sink = new MemoryEffectSink();
  const key = { operationId: 'op1', branchId: 'alfa' };
  let ran = 0;
  const effect = () => (ran++, 'done');
  for (const [fence, attempt] of [
    [0, 1],
    [1, 0],
    [-1, 1],
    [1.5, 1],
    [Number.NaN, 1],
    [1, Number.MAX_SAFE_INTEGER + 1],
  ] as const) {
    await assert.rejects(sink.commit(key, fence, attempt, effect), invalidInput, `fence ${fence} attempt ${attempt}`);
  }
  await assert.rejects(sink.commit({ operationId: '', branchId: 'alfa' }, 1, 1, effect), invalidInput);
  assert.equal(ran, 0, 'no effect ran');
  assert.deepEqual(sink.applied(), []);
  // Fence 0 never entered the sink: fence 1 is the first commit of this key, not a repeat.
  assert.deepEqual(await sink.commit(key, 1, 1, effect), { value: 'done', repeated: false });
});
