/**
 * The durable streams' trust and retention rules on a whole deployment: `convoke serve` and
 * `convoke peer` processes on a real nats-server whose users are the deployment's principal plan
 * (each peer's user may publish only its own results, claims and cancel results).
 *
 * - a peer user squatting another peer's result message id cannot make that result disappear;
 * - a deployment with a cap of a couple of hundred messages per stream decides thousands of
 *   operations in a row (streams hold in-flight work, not history);
 * - a stream that lost stored messages closes the operations in flight as indeterminate, with
 *   reason durability-lost, instead of letting their deadline close them as if a peer had not
 *   answered.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { publicationId } from '../../src/contract/ids.js';
import { encodeWire, type ResultMessage } from '../../src/events/wire.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { approve, deploymentForSuite, e2eBundle, e2eNamespace, eventually, resultOf } from '../support/nats-deployment-fixture.js';

/** `manual` goes to delta, echo and foxtrot, whom the tests drive by hand with their own users. */
const manualPeers = ['delta', 'echo', 'foxtrot'];
const streamCapMsgs = 200;
const operationsInARow = 2_000;

describe('NATS durable streams: deduplication, retention and continuity on a deployment', { timeout: 170_000 }, () => {
  const deployment = deploymentForSuite(
    {
      mode: 'durable',
      store: 'sqlite',
      bundle: e2eBundle(),
      groups: { reviewers: ['alfa'] },
      peers: { alfa: { interactions: { allok: { result: approve } } } },
      commandClients: ['billing'],
      durable: { maxMsgs: streamCapMsgs },
      durabilityCheckIntervalMs: 300,
    },
    { client: 'billing', startUp: (f) => Promise.all([f.startServe(), f.startPeer('alfa')]) },
  );

  const resultMessage = (op: string, peerId: string): ResultMessage => ({
    kind: 'result',
    operationId: op,
    branchId: peerId,
    peerId,
    attempt: 1,
    fence: 1,
    result: approve,
  });

  it("a peer user squatting another peer's result message id cannot make that result disappear", async () => {
    const op = resultOf(await deployment.client.invoke('manual', { document: 'd' }, { waitMs: 0 })).operationId;
    const peers = Object.fromEntries(await Promise.all(manualPeers.map(async (p) => [p, await deployment.fixture.peerTransport(p)] as const)));
    // The id a peer gives its result is computable by anyone who knows the operation.
    const echoResultId = `${publicationId(deployment.fixture.contract.digest, op, 'echo', 1)}.result`;
    const publish = (peerId: string, msgId: string) =>
      peers[peerId]!.publish(subjectFor(e2eNamespace, 'manual', op, 'result', peerId), encodeWire(resultMessage(op, peerId)), { msgId });
    assert.equal((await publish('delta', echoResultId)).receipt, 'stored', "delta publishes first, on its own subject, under echo's id");
    const echo = await publish('echo', echoResultId);
    assert.equal(echo.receipt, 'stored', echo.detail);
    assert.equal((await publish('foxtrot', `${publicationId(deployment.fixture.contract.digest, op, 'foxtrot', 1)}.result`)).receipt, 'stored');
    const decided = resultOf(await deployment.client.get(op, { waitMs: 10_000 }));
    assert.deepEqual(
      [decided.decision?.outcome, decided.decision?.reason, decided.decision?.successVotes],
      ['success', 'complete', 3],
      JSON.stringify(decided),
    );
    assert.deepEqual(
      decided.branches.map((b) => [b.peerId, b.status]).sort(),
      manualPeers.map((p) => [p, 'success']),
    );
  });

  it(`a durable deployment with a cap of ${streamCapMsgs} messages per stream decides ${operationsInARow} operations in a row`, async () => {
    for (let i = 0; i < operationsInARow; i++) {
      const reply = resultOf(await deployment.client.invoke('allok', { document: `d${i}` }, { key: `row-${i}`, waitMs: 10_000 }));
      assert.equal(reply.decision?.outcome, 'success', `operation ${i}: ${JSON.stringify(reply)}`);
    }
    // Nothing piles up: what was consumed was released.
    const jsm = await jetstreamManager(await deployment.fixture.adminConnection());
    await eventually(
      async () => (await jsm.streams.info(deployment.fixture.streams('alfa').requests)).state.messages <= 1,
      "alfa's request stream back to its anchor",
    );
    await eventually(
      async () => (await jsm.streams.info(deployment.fixture.streams('alfa').results)).state.messages <= 1,
      "alfa's result stream back to its anchor",
    );
  });

  it('a stream that lost stored messages makes the operations in flight indeterminate with a reason, never failed', async () => {
    const op = resultOf(await deployment.client.invoke('manual', { document: 'lost' }, { waitMs: 0 })).operationId;
    const jsm = await jetstreamManager(await deployment.fixture.adminConnection());
    const stream = deployment.fixture.streams('delta').requests;
    const requestSubject = subjectFor(e2eNamespace, 'manual', op, 'request', 'delta');
    await eventually(
      async () => (await jsm.streams.getMessage(stream, { last_by_subj: requestSubject }).catch(() => null)) !== null,
      "delta's request stored, unconsumed",
    );
    // An administrator purges delta's requests: the request delta never received is gone.
    await jsm.streams.purge(stream);
    await eventually(async () => resultOf(await deployment.client.get(op, { waitMs: 0 })).decision !== null, 'the operation closed', 5_000);
    const closed = resultOf(await deployment.client.get(op, { waitMs: 0 }));
    assert.deepEqual(
      [closed.decision?.outcome, closed.decision?.reason, closed.settlement.status],
      ['indeterminate', 'durability-lost', 'indeterminate'],
      JSON.stringify(closed),
    );
    const refused = await deployment.client.invoke('manual', { document: 'after' }, { waitMs: 0 });
    assert.ok(!('result' in refused) && refused.status === 503, `admissions are refused while continuity is not proven: ${JSON.stringify(refused)}`);
  });
});
