// What bench/tools/workflow-ops.mjs and workflow-floor.mjs share with `npm run bench -- workflow`:
// a built checkout's embedded deployment (memory store, quorum 2 of 3 of in-process peers that
// approve at once) and its three-stage contract pipeline, as bench/workflow.ts builds them.
import { parse as parseYaml } from 'yaml';

/** The embedded deployment of the checkout at `root` (built: `npx tsc -p tsconfig.json`), its store and clock. */
export async function embeddedReview(root) {
  const mod = (p) => import(`${root}/dist/src/${p}`);
  const { MemoryEventStore } = await mod('adapters/store/memory.js');
  const { SystemClock } = await mod('contract/clock.js');
  const { createEmbedded } = await mod('deployment/embedded.js');
  const { peerIds, reviewBundle } = await mod('deployment/examples.js');
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const peers = peerIds(3);
  const embedded = await createEmbedded({
    clock,
    store,
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 2 }, timeoutMs: 30_000 }),
    groups: { reviewers: peers },
  });
  for (const peerId of peers) await embedded.addPeer(peerId, { review: () => ({ verdict: 'approve' }) });
  return { clock, store, embedded };
}

/** The bench's three-stage pipeline document for the contract `ref`, each stage reviewing the previous stage's operation id. */
export function threeStages(ref) {
  const stage = (name, document) => `  - ${name}:
      call: invoke-contract
      with:
        contract: { id: ${ref.id}, version: '${ref.version}', digest: '${ref.digest}' }
        interaction: review
        input: { document: '${document}' }`;
  return parseYaml(`document: { dsl: '1.0.3', namespace: bench, name: three-stages, version: '1.0.0' }
do:
${stage('review', '${ .doc }')}
${stage('publish', '${ .operationId }')}
${stage('notify', '${ .operationId }')}
`);
}
