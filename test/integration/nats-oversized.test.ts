/**
 * Results over the result budget on a real broker (runtime/intake.ts; README "Log budgets"): the
 * peer's results stream stores the message (it is under the stream's max_msg_size), and the
 * coordinator records it as a rejection (`oversized`, with its size) and acknowledges it, so it is
 * never delivered again and the work-queue stream releases it. The same holds for a deployment
 * whose `limits` lower the budgets: a result over the lowered budget is refused the same way.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { publicationId } from '../../src/contract/ids.js';
import { limits } from '../../src/contract/limits.js';
import { encodeWire, type ResultMessage } from '../../src/events/wire.js';
import type { ResultRejected } from '../../src/events/types.js';
import { coordinatorConsumerName } from '../../src/adapters/transport/nats-names.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import type { NatsDeploymentFixture } from '../support/nats-deployment-fixture.js';
import { approve, deploymentForSuite, e2eBundle, e2eNamespace, eventually, resultOf, type NatsFixtureOptions } from '../support/nats-deployment-fixture.js';

const base: NatsFixtureOptions = {
  mode: 'durable',
  store: 'sqlite',
  bundle: e2eBundle(),
  groups: { reviewers: ['alfa'] },
  peers: {},
  commandClients: ['billing'],
};

/** Publishes a result of `resultBytes` (serialized) as delta, for a `manual` operation, and checks its fate. */
async function oversizedResultIsRejectedAndReleased(f: NatsDeploymentFixture, resultBytes: number, bytesMax: number): Promise<void> {
  const client = await f.client('billing');
  const op = resultOf(await client.invoke('manual', { document: 'big' }, { waitMs: 0 })).operationId;
  const delta = await f.peerTransport('delta');
  const result = { verdict: 'approve', pad: 'x'.repeat(resultBytes - JSON.stringify({ verdict: 'approve', pad: '' }).length) };
  assert.equal(Buffer.byteLength(JSON.stringify(result)), resultBytes);
  const message: ResultMessage = { kind: 'result', operationId: op, branchId: 'delta', peerId: 'delta', attempt: 1, fence: 1, result };
  const receipt = await delta.publish(subjectFor(e2eNamespace, 'manual', op, 'result', 'delta'), encodeWire(message), {
    msgId: `${publicationId(f.contract.digest, op, 'delta', 1)}.result`,
  });
  assert.equal(receipt.receipt, 'stored', `the broker stores it: it is under the stream's message size (${receipt.detail})`);

  const rejections = async () => (await f.log(op)).flatMap((t) => t.transition.events).filter((e): e is ResultRejected => e.type === 'result-rejected');
  await eventually(async () => (await rejections()).length > 0, 'the oversized result recorded as a rejection');
  const [rejected] = await rejections();
  assert.deepEqual([rejected?.reason, rejected?.branchId, rejected?.peerId], ['oversized', 'delta', 'delta']);
  assert.match(rejected?.detail ?? '', new RegExp(`result is ${resultBytes} bytes; the limit is ${bytesMax}`));

  // Acknowledged: the work queue released it, and the consumer never delivered it again.
  const jsm = await jetstreamManager(await f.adminConnection());
  const stream = f.streams('delta').results;
  await eventually(async () => (await jsm.streams.info(stream)).state.messages === 1, "delta's results stream back to its anchor");
  const consumer = await jsm.consumers.info(stream, coordinatorConsumerName('coordinator', 'result'));
  assert.deepEqual([consumer.num_ack_pending, consumer.num_redelivered, consumer.delivered.consumer_seq], [0, 0, 1], JSON.stringify(consumer));
  // Nothing of it counts: the branch still waits for its result, and a result in budget is accepted.
  const open = resultOf(await client.get(op, { waitMs: 0 }));
  assert.equal(open.branches.find((b) => b.peerId === 'delta')?.status, 'pending');
  assert.equal(open.decision, null);
  const ok = await delta.publish(subjectFor(e2eNamespace, 'manual', op, 'result', 'delta'), encodeWire({ ...message, result: approve }), {
    msgId: `${publicationId(f.contract.digest, op, 'delta', 1)}.result-2`,
  });
  assert.equal(ok.receipt, 'stored');
  await eventually(
    async () => resultOf(await client.get(op, { waitMs: 0 })).branches.find((b) => b.peerId === 'delta')?.status === 'success',
    'the result in budget accepted',
  );
}

describe('NATS durable: a result over the result budget', { timeout: 90_000 }, () => {
  const deployment = deploymentForSuite(base);

  it('a result over the result budget is recorded as rejected (oversized) and acknowledged, never redelivered, and the stream releases it', async () => {
    await oversizedResultIsRejectedAndReleased(deployment.fixture, limits.resultBytesMax + 1024, limits.resultBytesMax);
  });
});

describe('NATS durable: a result over a lowered budget', { timeout: 90_000 }, () => {
  const lowered = { resultBytesMax: 8 * 1024, transitionBytesMax: 8 * 1024 + limits.transitionOverheadBytesMax };
  const deployment = deploymentForSuite({ ...base, limits: lowered });

  it("a result over a deployment's lowered result and transition budgets is recorded as rejected and acknowledged, never redelivered, and the stream releases it", async () => {
    await oversizedResultIsRejectedAndReleased(deployment.fixture, 20 * 1024, lowered.resultBytesMax);
  });
});
