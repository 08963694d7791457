/**
 * What a peer's message costs a coordinator's memory, on a real nats-server with real
 * permissions. A coordinator that did not settle an operation itself (it restarted since, or
 * another coordinator sharing the store did) reads the operation from the store when a message
 * names it. A peer may name any operation id on its own result subject — its own past operations,
 * or ids it computes (they derive from principal, contract and invocation key) — and each one
 * the coordinator reads must leave memory again under its settled-cache bound: the store keeps
 * the operation, the coordinator only caches it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { connectNats, NatsTransport, type NatsConnection } from '../../src/adapters/transport/nats.js';
import { inboxPrefixFor } from '../../src/adapters/transport/nats-names.js';
import { coordinatorPermissions, peerPermissions } from '../../src/adapters/transport/nats-permissions.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded, type Embedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { Coordinator } from '../../src/runtime/coordinator.js';
import { startNatsServer, type NatsServer } from '../support/nats-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';

const namespace = 'demo.v1.lab';
const peers = peerIds(3);
const settledCacheMax = 2;
const operations = 6;

/** Settles `operations` review operations in `store` with an in-process coordinator and peers, and answers their ids. */
async function settledOperations(store: MemoryEventStore): Promise<{ seeded: Embedded; ids: string[] }> {
  const seeded = await createEmbedded({ clock: new SystemClock(), bundle: reviewBundle(), groups: { reviewers: peers }, store, resultBatchMs: 0 });
  for (const p of peers) await seeded.addPeer(p, { review: () => ({ verdict: 'approve' }) });
  const ids: string[] = [];
  for (let i = 0; i < operations; i++) {
    const caller = { principalId: 'svc-a', senderPeerId: null };
    const { result } = await seeded.coordinator.invoke(caller, {
      contract: seeded.bundle.ref,
      interaction: 'review',
      invocationKey: `k-${i}`,
      input: { document: 'd' },
    });
    assert.ok((await seeded.coordinator.wait('svc-a', result.operationId, 'settled', 10_000)).reached, 'settled');
    ids.push(result.operationId);
  }
  await seeded.coordinator.close();
  for (const peer of seeded.peers.values()) await peer.close();
  return { seeded, ids };
}

describe('settled operations a peer names leave memory again (real nats-server permissions)', { timeout: 60_000 }, () => {
  let server: NatsServer;
  const passwords = new Map(['coordinator', ...peers].map((u) => [u, randomBytes(8).toString('hex')]));
  const open: { close(): Promise<unknown> }[] = [];

  before(async () => {
    const users = [
      { user: 'coordinator', permissions: coordinatorPermissions(namespace, 'coordinator', peers) },
      ...peers.map((p) => ({ user: p, permissions: peerPermissions(namespace, p) })),
    ].map(({ user, permissions }) => ({ user, password: passwords.get(user)!, ...permissions }));
    server = await startNatsServer({ users, jetstream: false });
  });
  after(async () => {
    for (const c of open.reverse()) await c.close().catch(() => undefined);
    await server?.dispose();
  });

  it('a result naming each of them is answered (unknown-branch), and the coordinator holds no more of them than its settled-cache bound', async () => {
    const store = new MemoryEventStore({ clock: new SystemClock() });
    open.push(store);
    const { seeded, ids } = await settledOperations(store);
    // A coordinator that settled none of them itself, on the real server as the coordinator user.
    const transport = await NatsTransport.connect(
      { servers: server.url, user: 'coordinator', pass: passwords.get('coordinator')!, inboxPrefix: inboxPrefixFor('coord', 'coordinator') },
      { identity: 'coordinator' },
    );
    open.push(transport);
    const coordinator = new Coordinator({ ...seeded.coordinator.deps, transport }, { settledCacheMax });
    open.push(coordinator);
    await coordinator.inboundPath(namespace, 'review', 'result');
    const alfa: NatsConnection = await connectNats({
      servers: server.url,
      user: peers[0]!,
      pass: passwords.get(peers[0]!)!,
      inboxPrefix: inboxPrefixFor('peer', peers[0]!),
    });
    open.push(alfa);
    const unknownBranch = async () => (await coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === 'unknown-branch')?.value ?? 0;
    for (const [i, operationId] of ids.entries()) {
      const body = { kind: 'result', operationId, branchId: 'ghost', peerId: peers[0], attempt: 1, fence: 1, result: { verdict: 'approve' } };
      alfa.publish(subjectFor(namespace, 'review', operationId, 'result', peers[0]!), new TextEncoder().encode(JSON.stringify(body)));
      await alfa.flush();
      await eventually(async () => (await unknownBranch()) === i + 1, `the rejection of the result naming operation ${i + 1}`);
    }
    const held = coordinator.kernel.held().map((entry) => entry.id);
    assert.ok(held.length <= settledCacheMax, `at most ${settledCacheMax} settled operations held, not ${held.length}`);
    assert.deepEqual(held.sort(), ids.slice(-settledCacheMax).sort(), 'the most recently read ones');
    // Those that left memory are read again from the store when named.
    assert.equal((await coordinator.record(ids[0]!))?.phase, 'settled');
  });
});
