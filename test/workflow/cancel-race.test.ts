/**
 * A caller's cancel of a workflow instance (src/workflow/exec/instances.ts) that races the
 * instance's own end: the facade looks at the instance, finds it running, and asks the executor to
 * cancel it; the instance faults by itself in between, and the cancel answers it as it ended. The
 * race is made certain by an executor whose cancel waits for that end before it is asked (storeWith
 * over the real executor, on a real store and a real coordinator).
 *
 * A wait that races the instance's end: the facade's answer says finished from the record its body shows.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { WorkflowInstances } from '../../src/workflow/exec/instances.js';
import { storeWith } from '../support/scenario.js';
import { harness, yaml } from './support.js';

test('a cancel that finds the instance faulted by itself since it was looked at leaves its open contract call running, as a cancel after the fault does', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const peers = peerIds(2);
  const embedded = await createEmbedded({
    clock,
    store,
    bundle: reviewBundle({ completion: { mode: 'all-successful' }, timeoutMs: 20_000, cancellation: 'caller' }),
    groups: { reviewers: peers },
  });
  // The reviewers answer after 10 s: the call is open when the instance's timeout faults it.
  const slow = () => new Promise<{ verdict: 'approve' }>((resolve) => setTimeout(() => resolve({ verdict: 'approve' }), 10_000).unref());
  for (const peerId of peers) await embedded.addPeer(peerId, { review: slow });
  const h = harness({ store, clock, invocations: embedded.coordinator });
  const ref = embedded.bundle.ref;
  // The workflow's timeout faults it while its contract call waits for the reviewers.
  const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: times-out-calling, version: '1.0.0' }
timeout: { after: { milliseconds: 400 } }
do:
  - ask:
      call: invoke-contract
      with:
        contract: { id: ${ref.id}, version: '${ref.version}', digest: '${ref.digest}' }
        interaction: review
        input: { document: RFC 1 }
`);
  // The instance faults (its timeout) after the facade looked at it and before its cancel is committed.
  const executor = storeWith(h.executor, (real) => ({
    cancel: async (instanceId: string, reason: string) => {
      await real.wait(instanceId, 10_000);
      return real.cancel(instanceId, reason);
    },
  }));
  const instances = new WorkflowInstances({
    executor,
    bundleOf: () => ref,
    definition: () => ({ document, cancellation: 'caller' }),
    operations: embedded.coordinator,
  });
  try {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'race-1', document, input: {}, bundleDigest: ref.digest });
    let record = await h.executor.get(instanceId);
    for (let tries = 0; tries < 200 && Object.keys(record?.children ?? {}).length === 0; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      record = await h.executor.get(instanceId);
    }
    const child = Object.values(record?.children ?? {})[0];
    assert.ok(child, 'the contract call was bound');
    assert.equal(record?.status, 'running', 'the instance runs when the cancel looks at it');

    const answered = await instances.cancel('alice', instanceId);
    assert.equal(answered.status, 'faulted', 'the cancel answers the instance as it ended by itself');
    const operation = await embedded.coordinator.get('alice', child.operationId);
    assert.equal(operation.decision, null, `the faulted instance's open call runs on: ${JSON.stringify(operation.decision)}`);
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('a wait answers finished from the state it answers: an instance that ends as its wait runs out is finished, not a 202 with a completed body', async () => {
  const h = harness();
  const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: short-pause, version: '1.0.0' }
do:
  - pause: { wait: { milliseconds: 50 } }
  - done: { set: { done: true } }
`);
  try {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'wait-1', document, input: {} });
    // The instance ends after the kernel's wait has answered the facade (not ended) and before the facade answers.
    const executor = storeWith(h.executor, (real) => ({
      kernel: storeWith(real.kernel, (kernel) => ({
        wait: async (...args: Parameters<typeof kernel.wait>) => {
          const at = await kernel.wait(...args);
          await kernel.wait(args[0], (record) => record.status !== 'running', 5000);
          return at;
        },
      })),
    }));
    const instances = new WorkflowInstances({ executor, bundleOf: () => undefined, definition: () => ({ document, cancellation: 'none' }) });
    const answer = await instances.wait('alice', instanceId, 0);
    assert.equal(answer.instance.status, 'completed', 'the instance ended while the wait ran out');
    assert.equal(answer.finished, true, 'and the answer says it finished');
  } finally {
    await h.close();
  }
});
