/**
 * Spec: "Resource changes that violate this guarantee ... report affected in-flight operations as
 * indeterminate when continuity cannot be proved." A stream deleted while no coordinator watched
 * and recreated by a restarted coordinator with manageStreams carries a fresh anchor and looks
 * continuous; the operations admitted before it were admitted into a stream that is gone. They
 * close as indeterminate (durability-lost) when they are resumed, never at their deadline as if a
 * peer had not answered; operations whose peers' streams were not touched carry on.
 * `convoke serve` on a real nats-server, stopped and started again.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import type { OperationAdmitted } from '../../src/events/types.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { deploymentForSuite, e2eBundle, e2eNamespace, eventually, resultOf } from '../support/nats-deployment-fixture.js';

describe('NATS durable: a stream recreated across a coordinator restart', { timeout: 120_000 }, () => {
  // No peer runs: every operation stays open until its deadline or its branches' leases end,
  // unless something closes it. Both are two minutes, past the test's own time on a loaded machine
  // (at 15 s the kept operation had closed at its deadline, and at a 10 s lease at the lease's
  // end, failed/impossible, on machines four times slower than usual).
  const deployment = deploymentForSuite(
    {
      mode: 'durable',
      store: 'sqlite',
      bundle: e2eBundle({ timeoutMs: 120_000, leaseMs: 120_000 }),
      groups: { reviewers: ['alfa'] },
      peers: {},
      commandClients: ['billing'],
    },
    { client: 'billing' },
  );

  it("an open operation whose peer's stream was deleted and recreated while no coordinator watched closes indeterminate (durability-lost) when resumed, never failed; one whose streams were kept stays open", async () => {
    const lost = resultOf(await deployment.client.invoke('manual', { document: 'lost' }, { waitMs: 0 })).operationId;
    const kept = resultOf(await deployment.client.invoke('allok', { document: 'kept' }, { waitMs: 0 })).operationId;
    const admitted = (await deployment.fixture.log(lost))[0]?.transition.events[0] as OperationAdmitted;
    assert.equal(typeof admitted.streamsCreatedUntilMs, 'number', 'admission records when the streams were created');
    const jsm = await jetstreamManager(await deployment.fixture.adminConnection());
    const stream = deployment.fixture.streams('delta').requests;
    await eventually(
      async () =>
        (await jsm.streams.getMessage(stream, { last_by_subj: subjectFor(e2eNamespace, 'manual', lost, 'request', 'delta') }).catch(() => null)) !== null,
      "delta's request stored",
    );

    await deployment.fixture.serve!.stop();
    // An operator deletes delta's requests stream; the restarted coordinator creates it again.
    await jsm.streams.delete(stream);
    await deployment.fixture.startServe();
    assert.ok(
      ((await jsm.streams.getMessage(stream, { seq: 1 }))?.subject ?? '').startsWith('convoke.anchor.'),
      'the new stream has its own anchor: it looks continuous',
    );

    await eventually(async () => resultOf(await deployment.client.get(lost, { waitMs: 0 })).decision !== null, 'the operation closed', 8_000);
    const closed = resultOf(await deployment.client.get(lost, { waitMs: 0 }));
    assert.deepEqual(
      [closed.decision?.outcome, closed.decision?.reason, closed.settlement.status],
      ['indeterminate', 'durability-lost', 'indeterminate'],
      JSON.stringify(closed),
    );
    const open = resultOf(await deployment.client.get(kept, { waitMs: 0 }));
    assert.equal(open.decision, null, "alfa's streams were not touched: its operation carries on");
    // Admissions go on: an operation admitted after the recreation is admitted into the new stream.
    const fresh = resultOf(await deployment.client.invoke('manual', { document: 'after' }, { waitMs: 0 }));
    assert.equal(fresh.decision, null);
  });
});
