// What bench/tools/workflow-ops.mjs and workflow-floor.mjs share with `npm run bench -- workflow`
// (bench/workflow.ts, from a built checkout: `npx tsc -p tsconfig.json`): its embedded deployment
// (memory store, quorum 2 of 3 of in-process peers that approve at once) and its three-stage
// contract pipeline, the contract named with its digest as a document outside a bundle names it.

/** The embedded deployment of the checkout at `root`, its store and clock. */
export async function embeddedReview(root) {
  const bench = await import(`${root}/dist/bench/workflow.js`);
  return bench.embeddedReview();
}

/** The bench's three-stage pipeline document for the contract `ref`, each stage reviewing the previous stage's operation id. */
export async function threeStages(root, ref) {
  const bench = await import(`${root}/dist/bench/workflow.js`);
  return bench.pipeline(ref);
}
