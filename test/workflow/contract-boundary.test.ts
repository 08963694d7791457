/**
 * The boundary a contract call waits for is at least its interaction's (spec: "the requested
 * boundary must be at least as strong as the contract boundary"): a call without `waitFor` waits
 * for the interaction's own, and one that asks for `decision` on a `settled` interaction — from
 * an expression, or naming a contract by digest, which the bundle cannot check — is refused
 * before anything is admitted, not answered at the weaker boundary.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded, type Embedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { harness, runToEnd, yaml } from './support.js';

/** Three reviewers, two of them online and approving; a quorum of two decides, the third branch is cancelled and never answers. */
async function settledDeployment(clock: SystemClock, store: MemoryEventStore): Promise<Embedded> {
  const peers = peerIds(3);
  const embedded = await createEmbedded({
    clock,
    store,
    bundle: reviewBundle({
      completion: { mode: 'quorum', count: 2 },
      timeoutMs: 4000,
      siblings: 'cancel',
      cancelTimeoutMs: 100,
      settlementGraceMs: 0,
      waitFor: 'settled',
    }),
    groups: { reviewers: peers },
  });
  for (const peerId of peers.slice(0, 2)) await embedded.addPeer(peerId, { review: async () => ({ verdict: 'approve' }) });
  return embedded;
}

const call = (digest: string, waitFor: string) => `document: { dsl: '1.0.3', namespace: test, name: boundary, version: '1.0.0' }
do:
  - review:
      call: invoke-contract
      with:
        contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
        interaction: review
        input: { document: x }${waitFor}
`;

test('a contract call without waitFor waits for its settled interaction’s boundary: an indeterminate settlement stops it', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await settledDeployment(clock, store);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const record = await runToEnd(h, yaml(call(embedded.bundle.ref.digest, '')), {}, 'boundary-1');
    assert.equal(record.status, 'faulted', JSON.stringify(record.output));
    assert.equal(record.error?.type, 'https://convoke.dev/errors/workflow/settlement');
    const operation = await embedded.coordinator.get('alice', record.children['/do/0/review']!.operationId);
    assert.equal(operation.decision?.outcome, 'success');
    assert.equal(operation.settlement.status, 'indeterminate');
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('a contract call asking for decision on a settled interaction (from an expression) is refused before admission', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await settledDeployment(clock, store);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const record = await runToEnd(h, yaml(call(embedded.bundle.ref.digest, '\n        waitFor: ${ .boundary }')), { boundary: 'decision' }, 'boundary-2');
    assert.equal(record.status, 'faulted', JSON.stringify(record.output));
    assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/validation');
    assert.match(record.error?.detail ?? '', /weaken/);
    const operations: string[] = [];
    for await (const id of store.operationIds()) operations.push(id);
    assert.deepEqual(operations, [], 'nothing was admitted');
  } finally {
    await h.close();
    await embedded.close();
  }
});
