// node --expose-gc bench/tools/workflow-built-floor.mjs <checkout root> <seconds> <built|checked|folded|indexed>
// How low an executor that keeps convoke's checks could go in `npm run bench -- workflow`'s
// embedded comparison, check by check. The client's three calls against a "built" instance that
// makes the same three calls and writes, as a real instance of the bench's pipeline does, its four
// transitions to a workflow stream of the same memory store (the start with the first call's
// binding before the first call, one append before each next call, the end after the last): each
// transition built anew from that instance's values (its id, the stage keys and operation ids
// hashed as the executor hashes them, each answer), by object literals, with nothing of the
// executor's general machinery (no interpreter, decider, kernel queue, lease renewal or waiters).
// Each mode adds one check to the one before it:
//   built    the transitions appended as built;
//   checked  + each checked against the workflow transition schema (events.ts) before its append;
//   folded   + each applied to the instance's record before its append (the fold is the legality
//            check), the record taken as the committed one (the kernel applies a transition once);
//   indexed  + the store's workflow index row written from that record with each append.
// Samples interleaved as the bench takes them (which side goes first alternates); prints each
// side's p50 and the p50 ratio, to set against the bench's own (target ≤ 1.3) and against
// workflow-floor.mjs (the recorded transitions appended as they are). Run from a built checkout.
import { embeddedReview, interleavedP50s, threeStages } from './embedded-review.mjs';

const [root, secondsArg, mode] = process.argv.slice(2);
const seconds = Number(secondsArg);
const modes = ['built', 'checked', 'folded', 'indexed'];
if (!(seconds > 0) || !modes.includes(mode)) throw new Error(`usage: workflow-built-floor.mjs <checkout root> <seconds> <${modes.join('|')}>`);
const level = modes.indexOf(mode);
const mod = (p) => import(`${root}/dist/src/${p}`);
const { digestOf } = await mod('contract/canonical.js');
const { operationId } = await mod('contract/ids.js');
const { workflowInstanceId, stageInvocationKey } = await mod('workflow/ids.js');
const { workflowTransitionProblem } = await mod('workflow/exec/events.js');
const { applyWorkflow } = await mod('workflow/exec/record.js');
const { workflowStreams } = await mod('workflow/exec/streams.js');

const { clock, store, embedded } = await embeddedReview(root);
const streams = workflowStreams(store);
const ref = embedded.bundle.ref;
const caller = { principalId: 'bench', senderPeerId: null };
const document = await threeStages(root, ref);
const bundleDigest = digestOf(document);
const stages = [
  { at: '/do/0/review', name: 'review' },
  { at: '/do/1/publish', name: 'publish' },
  { at: '/do/2/notify', name: 'notify' },
];
const openGuard = { notBeforeMs: -Number.MAX_SAFE_INTEGER, notAfterMs: Number.MAX_SAFE_INTEGER };

const call = async (key, input) => {
  const { result } = await embedded.coordinator.invoke(caller, { contract: ref, interaction: 'review', invocationKey: key, input: { document: input } });
  const decided = await embedded.coordinator.wait('bench', result.operationId, 'decision', 30_000);
  if (decided.result.decision?.outcome !== 'success') throw new Error(`${key}: ${JSON.stringify(decided.result.decision)}`);
  return decided.result;
};
const client = async (key) => {
  let input = `doc-${key}`;
  for (const { name } of stages) input = (await call(`${key}-${name}`, input)).operationId;
};

/** A stage's start, its `with` result, its child's binding and its call's start, as the executor records them. */
function bound(instanceKey, stage, input, previousStep) {
  const { at, name } = stages[stage];
  const invocationKey = stageInvocationKey(instanceKey, { pointer: at, iterations: [], attempt: 1 });
  const events = [
    { type: 'task-started', v: 1, at, ref: at, name, inputFrom: previousStep === undefined ? { input: true } : { step: previousStep } },
    { type: 'expression-evaluated', v: 1, at: `${at}>with`, result: { ok: [input] } },
    { type: 'child-bound', v: 1, at, ref: at, operationId: operationId('bench', ref.digest, invocationKey), invocationKey, iterations: [], attempt: 1 },
    { type: 'call-started', v: 1, at: `${at}>invoke`, epoch: 1 },
  ];
  return { invocationKey, events };
}

async function built(key) {
  const id = workflowInstanceId('bench', bundleDigest, 'three-stages', key);
  let record;
  let revision;
  const write = async (transition) => {
    if (level >= 1) {
      const problem = workflowTransitionProblem(transition);
      if (problem !== undefined) throw new Error(problem);
    }
    let next;
    if (level >= 2) {
      next = applyWorkflow(record, { revision: '', committedAtMs: clock.nowMs(), transition });
      if (next === undefined) throw new Error(`${id}: not applicable`);
    }
    const after = level >= 3 ? (stored) => ((next.revision = stored.revision), next) : undefined;
    const outcome = revision === undefined ? await streams.create(id, transition, after) : await streams.append(id, revision, transition, after);
    if (outcome.kind !== 'ok') throw new Error(`${id}: ${JSON.stringify(outcome)}`);
    revision = outcome.revision;
    if (next !== undefined) record = ((next.revision = revision), next);
  };
  let input = `doc-${key}`;
  let stage = bound(key, 0, input, undefined);
  await write({
    events: [
      {
        type: 'workflow-started',
        v: 1,
        instanceId: id,
        principalId: 'bench',
        invocationKey: key,
        workflowName: 'three-stages',
        bundleDigest,
        document,
        input: { doc: input },
        timeoutMs: null,
        keys: 3,
        format: 2,
      },
      { type: 'lease-acquired', v: 1, worker: 'bench/1', epoch: 1, untilMs: clock.nowMs() + 10_000 },
      ...stage.events,
    ],
    timeGuard: openGuard,
    causation: { command: 'start' },
  });
  for (let at = 0; at < stages.length; at++) {
    const { operationId: answered, decision, settlement, output } = await call(stage.invocationKey, input);
    const step = `${stages[at].at}>invoke`;
    const ended = [
      { type: 'call-answered', v: 1, at: step, result: { ok: { operationId: answered, decision, settlement, output } } },
      { type: 'task-completed', v: 1, at: stages[at].at, outputFrom: { step } },
    ];
    if (at === stages.length - 1) {
      await write({ events: [...ended, { type: 'workflow-completed', v: 1, outputFrom: { step } }], timeGuard: openGuard, causation: { command: 'complete' } });
    } else {
      input = answered;
      stage = bound(key, at + 1, input, step);
      await write({ events: [...ended, ...stage.events], timeGuard: openGuard, causation: { command: 'child-bound' } });
    }
  }
  if (level >= 2 && record.status !== 'completed') throw new Error(`${id}: ${record.status}`);
}

const { samples, p50Ms } = await interleavedP50s(client, built, seconds);
const [c, b] = p50Ms;
console.log(JSON.stringify({ mode, samples, clientP50Ms: Number(c.toFixed(3)), builtP50Ms: Number(b.toFixed(3)), p50Ratio: Number((b / c).toFixed(3)) }));
await embedded.close();
process.exit(0);
