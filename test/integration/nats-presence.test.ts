/**
 * Spec: "The runtime derives the operation ID, resolves candidates, applies sender/offline rules
 * ... A resolver observation does not guarantee that a currently online peer remains connected."
 * On durable NATS `convoke serve` observes each peer's presence from its durable request consumer
 * (a live peer keeps a pull waiting), with a revision, and records it in the admission event:
 * for directory groups and static audiences alike. `convoke serve` and `convoke peer` processes on
 * a real nats-server.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JsonObject } from '../../src/contract/json.js';
import type { OperationAdmitted } from '../../src/events/types.js';
import { peerConsumerName } from '../../src/adapters/transport/nats-names.js';
import { limits } from '../../src/contract/limits.js';
import { deploymentForSuite, e2eBundle, eventually, resultOf, reviewerSpec } from '../support/nats-deployment-fixture.js';

/** `excl` and `deliv` over the reviewers group, `fixed` over a static peer list; all-successful. */
function presenceBundle(): JsonObject {
  const bundle = e2eBundle();
  const interactions = bundle.interactions as Record<string, JsonObject>;
  const allok = interactions.allok!;
  interactions.excl = { ...allok, offline: 'exclude' };
  interactions.deliv = { ...allok, offline: 'deliver' };
  interactions.fixed = { ...allok, audience: { peers: ['alfa', 'bravo'] }, offline: 'exclude' };
  return bundle;
}

const served = (peerId: string) => ({ interactions: Object.fromEntries(['excl', 'deliv', 'fixed'].map((i) => [i, reviewerSpec(peerId)])) });

describe("NATS durable: presence observed from the peers' request consumers", { timeout: 120_000 }, () => {
  const deployment = deploymentForSuite(
    {
      mode: 'durable',
      store: 'sqlite',
      bundle: presenceBundle(),
      groups: { reviewers: ['alfa', 'bravo'] },
      peers: { alfa: served('alfa'), bravo: served('bravo') },
      commandClients: ['billing'],
    },
    {
      client: 'billing',
      startUp: async (f) => {
        await f.startServe();
        await f.startPeer('alfa');
        const jsm = await jetstreamManager(await f.adminConnection());
        await eventually(
          async () => (await jsm.consumers.info(f.streams('alfa').requests, peerConsumerName('alfa', 'request'))).num_waiting > 0,
          'alfa pulling',
        );
      },
    },
  );

  const admitted = async (operationId: string): Promise<OperationAdmitted> => {
    const first = (await deployment.fixture.log(operationId))[0]?.transition.events[0];
    assert.equal(first?.type, 'operation-admitted');
    return first as OperationAdmitted;
  };
  const settleTtl = () => new Promise((r) => setTimeout(r, limits.presenceObservationTtlMs + 500));

  it('a running peer is observed online and a peer never started offline; offline: exclude leaves the offline one out, and the observation is recorded with its revision', async () => {
    const reply = resultOf(await deployment.client.invoke('excl', { document: 'd' }, { waitMs: 10_000 }));
    assert.deepEqual(
      reply.branches.map((b) => b.peerId),
      ['alfa'],
    );
    assert.equal(reply.decision?.outcome, 'success');
    const presence = (await admitted(reply.operationId)).presence;
    assert.deepEqual([presence?.online, presence?.offline], [['alfa'], ['bravo']]);
    assert.match(presence?.revision ?? '', /^nats-consumers\.\d+\.\d+$/);
  });

  it("a static audience (a bundle's peer list) gets the same presence observation", async () => {
    const reply = resultOf(await deployment.client.invoke('fixed', { document: 'd' }, { waitMs: 10_000 }));
    assert.deepEqual(
      reply.branches.map((b) => b.peerId),
      ['alfa'],
    );
    const presence = (await admitted(reply.operationId)).presence;
    assert.deepEqual([presence?.online, presence?.offline], [['alfa'], ['bravo']]);
  });

  it('offline: deliver sends an offline peer its request under durable delivery, and the peer gets it when it starts', async () => {
    const reply = resultOf(await deployment.client.invoke('deliv', { document: 'd' }, { waitMs: 2_000 }));
    assert.deepEqual(
      reply.branches.map((b) => b.peerId),
      ['alfa', 'bravo'],
    );
    assert.deepEqual((await admitted(reply.operationId)).presence?.offline, ['bravo']);
    assert.equal(reply.decision, null, 'bravo has not answered: it is not running');
    await deployment.fixture.startPeer('bravo');
    const decided = resultOf(await deployment.client.get(reply.operationId, { waitMs: 10_000 }));
    assert.deepEqual([decided.decision?.outcome, decided.branches.map((b) => b.status)], ['success', ['success', 'success']]);
  });

  it('a stopped peer is observed offline and left out by offline: exclude; the revision moved', async () => {
    await settleTtl();
    const before = resultOf(await deployment.client.invoke('excl', { document: 'both' }, { waitMs: 10_000 }));
    assert.deepEqual(
      before.branches.map((b) => b.peerId),
      ['alfa', 'bravo'],
      'both running: both online',
    );
    const revisionBefore = (await admitted(before.operationId)).presence?.revision;
    await deployment.fixture.peers.get('alfa')!.stop();
    await settleTtl();
    const reply = resultOf(await deployment.client.invoke('excl', { document: 'd' }, { waitMs: 10_000 }));
    assert.deepEqual(
      reply.branches.map((b) => b.peerId),
      ['bravo'],
    );
    assert.equal(reply.decision?.outcome, 'success');
    const presence = (await admitted(reply.operationId)).presence;
    assert.deepEqual([presence?.online, presence?.offline], [['bravo'], ['alfa']]);
    assert.notEqual(presence?.revision, revisionBefore);
  });
});
