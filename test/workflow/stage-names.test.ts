/**
 * A workflow instance's stages (src/workflow/exec/instances.ts): each contract call is reported
 * under the name of the top-level task it is part of, exactly as the document names it — a name
 * with `~` or `/` (escaped `~0`, `~1` in the pointer) whole, and a stage run again (its key marked
 * `~1` under key schemes 2 and 3) under its own name.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { WorkflowInstances } from '../../src/workflow/exec/instances.js';
import { harness, runToEnd, yaml } from './support.js';

test('stages named a~b and a/b keep their whole names, and a revisited stage its own', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const peers = peerIds(2);
  const embedded = await createEmbedded({
    clock,
    store,
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 1 }, timeoutMs: 4000 }),
    groups: { reviewers: peers },
  });
  for (const peerId of peers) await embedded.addPeer(peerId, { review: async () => ({ verdict: 'approve' }) });
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const ref = embedded.bundle.ref;
    const call = `call: invoke-contract
      with:
        contract: { id: ${ref.id}, version: '${ref.version}', digest: '${ref.digest}' }
        interaction: review
        input: { document: RFC 9 }`;
    const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: stages, version: '1.0.0' }
do:
  - a~b:
      ${call}
  - a/b:
      do:
        - inner:
            ${call.replace(/\n {6}/g, '\n            ')}
  - again:
      ${call}
      export:
        as: '\${ { rounds: (($context.rounds // 0) + 1) } }'
  - loop:
      switch:
        - more: { when: '\${ $context.rounds == 1 }', then: again }
`);
    const record = await runToEnd(h, document, {}, 'stages');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const instances = new WorkflowInstances({ executor: h.executor, bundleOf: () => ref, definition: () => undefined, operations: embedded.coordinator });
    const view = await instances.view(record);
    assert.deepEqual(
      view.stages.map(({ at, stage, task }) => ({ at, stage, task })),
      [
        { at: '/do/0/a~0b', stage: 'a~b', task: 'a~b' },
        { at: '/do/1/a~1b/do/0/inner', stage: 'a/b', task: 'inner' },
        { at: '/do/2/again', stage: 'again', task: 'again' },
        { at: '/do/2/again~1', stage: 'again', task: 'again' },
      ],
    );
    assert.ok(view.stages.every((stage) => stage.decision?.outcome === 'success'));
  } finally {
    await h.close();
    await embedded.close();
  }
});
