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

/**
 * The p50 (ms) of each of two runs, sampled as the bench samples: `warm` of each first, unmeasured,
 * then pairs for `seconds`, which side goes first alternating; each run is given its own key.
 */
export async function interleavedP50s(first, second, seconds, warm = 300) {
  const samples = [[], []];
  const timed = async (side, run, key) => {
    const start = performance.now();
    await run(key);
    samples[side].push(performance.now() - start);
  };
  for (let i = 0; i < warm; i++) {
    await first(`warm-a${i}`);
    await second(`warm-b${i}`);
  }
  const endMs = Date.now() + seconds * 1000;
  for (let i = 0; Date.now() < endMs; i++) {
    const pair = [() => timed(0, first, `a${i}`), () => timed(1, second, `b${i}`)];
    if (i % 2 === 1) pair.reverse();
    for (const run of pair) await run();
  }
  const p50 = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  return { samples: samples[0].length, p50Ms: [p50(samples[0]), p50(samples[1])] };
}
