// node --expose-gc bench/tools/workflow-floor.mjs <checkout root> <seconds> [rebuilt]
// The least a durable executor can cost in `npm run bench -- workflow`'s embedded comparison: the
// client's three calls against a "floor" instance that makes the same three calls and appends,
// as a real instance does, its four transitions to a workflow stream of the same memory store
// (its start with the first call's binding before the first call, one append before each next
// call, its end after the last), with nothing else: no interpreter, no decider, no checks, no
// index row. The transitions are those one real instance of the bench's pipeline recorded, read
// back once; each floor instance appends the same objects (`rebuilt`: a structured clone of each
// per append, which costs more than building them would). Samples interleaved as the bench takes
// them (which side goes first alternates); prints each side's p50 and the p50 ratio, to set
// against the bench's own ratio (target ≤ 1.3). Run from a built checkout.
import { embeddedReview, interleavedP50s, threeStages } from './embedded-review.mjs';

const [root, secondsArg, rebuiltArg] = process.argv.slice(2);
const seconds = Number(secondsArg);
if (!(seconds > 0) || (rebuiltArg !== undefined && rebuiltArg !== 'rebuilt')) throw new Error('usage: workflow-floor.mjs <checkout root> <seconds> [rebuilt]');
const mod = (p) => import(`${root}/dist/src/${p}`);
const { digestOf } = await mod('contract/canonical.js');
const { seededRandom } = await mod('runtime/random.js');
const { WorkflowExecutor } = await mod('workflow/exec/executor.js');
const { JqWorkerEvaluator } = await mod('workflow/exec/jq.js');
const { workflowStreams } = await mod('workflow/exec/streams.js');
const { workflowInstanceId } = await mod('workflow/ids.js');

const { clock, store, embedded } = await embeddedReview(root);
const ref = embedded.bundle.ref;
const caller = { principalId: 'bench', senderPeerId: null };

/** The transitions one real instance of the bench's pipeline records, in order. */
async function recordedTransitions() {
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const executor = new WorkflowExecutor({ store: workflowStreams(store), clock, random: seededRandom(1), evaluator, invocations: embedded.coordinator });
  const document = await threeStages(root, ref);
  const { instanceId } = await executor.start({
    principalId: 'bench',
    bundleDigest: digestOf(document),
    invocationKey: 'recorded',
    document,
    input: { doc: 'doc' },
  });
  await executor.wait(instanceId, 30_000);
  const read = await workflowStreams(store).read(instanceId);
  await executor.close();
  await evaluator.close();
  if (read.kind !== 'ok' || read.transitions.length !== 4) throw new Error(`the recorded instance: ${read.kind}, ${read.transitions?.length} transitions`);
  return read.transitions.map((stored) => stored.transition);
}
const transitions = await recordedTransitions();

const call = async (key, document) => {
  const { result } = await embedded.coordinator.invoke(caller, { contract: ref, interaction: 'review', invocationKey: key, input: { document } });
  const decided = await embedded.coordinator.wait('bench', result.operationId, 'decision', 30_000);
  if (decided.result.decision?.outcome !== 'success') throw new Error(`${key}: ${JSON.stringify(decided.result.decision)}`);
  return result.operationId;
};
const client = async (key) => {
  let document = `doc-${key}`;
  for (const stage of ['review', 'publish', 'notify']) document = await call(`${key}-${stage}`, document);
};
const floor = async (key) => {
  const id = workflowInstanceId('bench', ref.digest, 'three-stages', key);
  let document = `doc-${key}`;
  for (let at = 0; at < transitions.length; at++) {
    const transition = rebuiltArg ? structuredClone(transitions[at]) : transitions[at];
    const outcome = at === 0 ? await store.create(id, transition) : await store.append(id, String(at), transition);
    if (outcome.kind !== 'ok') throw new Error(`${id} append ${at}: ${JSON.stringify(outcome)}`);
    if (at < 3) document = await call(`${key}-${at}`, document);
  }
};

const { samples, p50Ms } = await interleavedP50s(client, floor, seconds);
const [c, f] = p50Ms;
console.log(JSON.stringify({ rebuilt: rebuiltArg === 'rebuilt', samples, clientP50Ms: c, floorP50Ms: f, p50Ratio: Number((f / c).toFixed(3)) }));
await embedded.close();
process.exit(0);
