/**
 * Faults on a real NATS deployment in durable mode (JetStream streams and consumers, jetstream
 * store), each bounded in time:
 *
 * - a peer killed after its effect committed but before its result was published and its request
 *   acknowledged: the request is redelivered to the restarted peer, whose fenced SQLite effect sink
 *   (shared with the killed process through its file) answers the committed value instead of
 *   applying the effect again — the sink holds exactly one effect, and the operation decides;
 * - duplicated and reordered result messages, published with the peers' own credentials: one vote
 *   per branch, a conflicting copy recorded as a protocol conflict and never counted;
 * - nats-server restarted mid-run on the same port and store dir: nothing is lost, every
 *   operation decides success with every peer's vote, admissions refused during the outage
 *   resume, and the durability gate's closing and reopening are logged.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeWire, type ResultMessage } from '../../src/events/wire.js';
import type { JsonObject } from '../../src/contract/json.js';
import type { DomainEvent } from '../../src/events/types.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { SqliteEffectSink } from '../../src/peer/sqlite-effect-sink.js';
import {
  approve,
  deploymentForSuite,
  e2eBundle,
  e2eNamespace,
  eventually,
  resultOf,
  reject,
  type CommandClient,
  type PeerSpec,
} from '../support/nats-deployment-fixture.js';

const reviewers = ['alfa', 'bravo', 'charlie', 'delta', 'echo'];
const manualPeers = ['hotel', 'india', 'juliett'];

/** Reviewers answer `allok` after a delay (so a restart lands while they work); golf answers `effect` through a SQLite sink. */
function faultBundle(): JsonObject {
  const bundle = e2eBundle();
  const interactions = bundle.interactions as Record<string, JsonObject>;
  const allok = interactions.allok!;
  return {
    ...bundle,
    interactions: {
      allok,
      effect: { ...allok, audience: { peers: ['golf'] }, timeoutMs: 40_000, leaseMs: 30_000, renewIntervalMs: 5_000 },
      manual: { ...interactions.manual!, audience: { peers: manualPeers } },
    },
  };
}

function faultPeers(): Record<string, PeerSpec> {
  const peers: Record<string, PeerSpec> = Object.fromEntries(reviewers.map((p) => [p, { interactions: { allok: { result: approve, delayMs: 800 } } }]));
  peers.golf = { effectSink: 'sqlite', interactions: { effect: { result: { verdict: 'approve' } } } };
  return peers;
}

describe('NATS faults (durable mode, jetstream store)', { timeout: 55_000 }, () => {
  const deployment = deploymentForSuite(
    {
      mode: 'durable',
      store: 'jetstream',
      bundle: faultBundle(),
      groups: { reviewers },
      peers: faultPeers(),
      commandClients: ['billing'],
      durable: { ackWaitMs: 2_500, maxDeliver: 50 },
      durabilityCheckIntervalMs: 500,
    },
    {
      client: 'billing',
      startUp: async (f) => {
        const crashing = await f.writePeerConfig('golf', { faults: { crashAfterEffect: true } }, '-crash');
        await Promise.all([f.startServe(), ...reviewers.map((p) => f.startPeer(p)), f.startPeer('golf', crashing)]);
      },
    },
  );

  it('a peer killed after its effect and before its ack: redelivery to the restarted peer applies no second effect', async () => {
    const golf = deployment.fixture.peers.get('golf')!;
    const pending = resultOf(await deployment.client.invoke('effect', { document: 'pay once' }, { waitMs: 0 }));
    const death = await golf.exited;
    assert.equal(death.signal, 'SIGKILL', golf.output());
    const sink = new SqliteEffectSink({ path: deployment.fixture.effectsPath });
    try {
      assert.equal(sink.applied().filter((e) => e.operationId === pending.operationId).length, 1, 'the effect committed before the crash');
      // Not acknowledged: the request is still owed to golf. A restarted golf gets it again after ack_wait.
      await deployment.fixture.startPeer('golf');
      const decided = resultOf(await deployment.client.get(pending.operationId, { waitMs: 20_000 }));
      assert.equal(decided.decision?.outcome, 'success', JSON.stringify(decided));
      assert.deepEqual(decided.branches[0]?.result, { verdict: 'approve' });
      const effects = sink.applied().filter((e) => e.operationId === pending.operationId);
      assert.equal(effects.length, 1, `exactly one effect: ${JSON.stringify(effects)}`);
    } finally {
      sink.close();
    }
  });

  it("duplicated and reordered results from the peers' own users: one vote each; a conflicting copy is recorded, not counted", async () => {
    const op = resultOf(await deployment.client.invoke('manual', { document: 'd' }, { waitMs: 0 })).operationId;
    const verdicts: Record<string, object> = { hotel: approve, india: reject, juliett: approve };
    const transports = Object.fromEntries(await Promise.all(manualPeers.map(async (p) => [p, await deployment.fixture.peerTransport(p)] as const)));
    const message = (peerId: string, result: object): ResultMessage => ({
      kind: 'result',
      operationId: op,
      branchId: peerId,
      peerId,
      attempt: 1,
      fence: 1,
      result: result as ResultMessage['result'],
    });
    // Reordered (last peer first, interleaved) and duplicated (three copies each, distinct Msg-Ids so
    // JetStream stores every copy), then a conflicting copy of hotel's result.
    const order = ['juliett', 'india', 'juliett', 'hotel', 'india', 'hotel', 'juliett', 'hotel', 'india'];
    let copy = 0;
    for (const peerId of order) {
      const receipt = await transports[peerId]!.publish(
        subjectFor(e2eNamespace, 'manual', op, 'result', peerId),
        encodeWire(message(peerId, verdicts[peerId]!)),
        { msgId: `${op}-${peerId}-${copy++}` },
      );
      assert.equal(receipt.receipt, 'stored', receipt.detail);
    }
    const decided = resultOf(await deployment.client.get(op, { waitMs: 15_000 }));
    assert.equal(decided.decision?.outcome, 'success');
    assert.equal(decided.decision?.reason, 'complete');
    assert.deepEqual([decided.decision?.successVotes, decided.decision?.failedUnits, decided.decision?.units], [2, 1, 3]);
    await transports.hotel!.publish(subjectFor(e2eNamespace, 'manual', op, 'result', 'hotel'), encodeWire(message('hotel', reject)), {
      msgId: `${op}-hotel-conflict`,
    });
    const events = async () => (await deployment.fixture.log(op)).flatMap((t) => t.transition.events) as DomainEvent[];
    await eventually(async () => (await events()).some((e) => e.type === 'protocol-conflict-recorded'), 'the conflicting copy recorded as a protocol conflict');
    const accepted = (await events()).filter((e) => e.type === 'result-accepted').map((e) => (e as { branchId: string }).branchId);
    assert.deepEqual(accepted.sort(), [...manualPeers].sort(), 'one accepted result per branch');
    const after = resultOf(await deployment.client.get(op, { waitMs: 0 }));
    assert.deepEqual(after.decision, decided.decision, 'the decision never changes');
    assert.deepEqual(after.branches.find((b) => b.branchId === 'hotel')?.result, approve);
  });

  it('nats-server restarted mid-run (same port, same store): nothing is lost and every operation decides', async () => {
    const operations = [];
    for (let i = 0; i < 8; i++) operations.push(resultOf(await deployment.client.invoke('allok', { document: `restart ${i}` }, { waitMs: 0 })).operationId);
    // The reviewers are working (800 ms each) when the server goes away. While it is away, the
    // HTTP facade (still up) refuses new admissions as unavailable (the durability gate, or the
    // jetstream store on the same server, whichever answers first).
    let refused: { status: number; body: JsonObject } | undefined;
    await deployment.fixture.restartServer(async () => {
      await eventually(
        async () => (refused = await deployment.fixture.httpInvoke('allok', { document: 'during outage' }, 'during-outage')).status === 503,
        'an admission refused while nats-server is down',
        8_000,
      );
    });
    assert.equal(refused?.body.kind, 'unavailable');
    const decided = await Promise.all(operations.map((op) => getWithRetry(deployment.client, op)));
    for (const r of decided) {
      assert.equal(r.decision?.outcome, 'success', JSON.stringify(r.decision));
      assert.deepEqual([r.decision?.successVotes, r.decision?.units], [5, 5]);
    }
    // Admissions work again once durability is proven on the restarted server.
    await eventually(
      async () =>
        (await deployment.client.invoke('allok', { document: 'after restart' }, { key: 'after-restart', waitMs: 3_000 }).catch(() => ({ status: 0 })))
          .status === 200,
      'a new admission after the restart',
      20_000,
    );
    assert.match(deployment.fixture.serve!.stderr(), /durability NOT proven/);
    assert.match(deployment.fixture.serve!.stderr(), /durability proven again/);
    // The refused admission left nothing behind: the same key is a new operation now.
    assert.equal((await deployment.fixture.httpInvoke('allok', { document: 'during outage' }, 'during-outage')).status, 200);
  });
});

/**
 * A get is safe to retry: across the restart a request or its reply can be lost (the caller only
 * sees a timeout), so short waits are retried until the operation decides.
 */
async function getWithRetry(client: CommandClient, operationId: string) {
  const deadlineMs = Date.now() + 30_000;
  for (;;) {
    try {
      const reply = await client.get(operationId, { waitMs: 1_000 });
      if (reply.status === 200) return resultOf(reply);
      if (Date.now() > deadlineMs) return resultOf(reply);
    } catch (error) {
      if (Date.now() > deadlineMs) throw error;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
