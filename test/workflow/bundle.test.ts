/**
 * Pipelines and workflows in a bundle: part of its digest; lowered deterministically to a
 * document the SDK validates (a golden file); every bundle check refusing with the right kind and
 * the JSON Pointer of what it refuses.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { loadBundle } from '../../src/contract/bundle.js';
import { canonicalJson } from '../../src/contract/canonical.js';
import { isAdapterError, type AdapterErrorKind } from '../../src/contract/errors.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject } from '../../src/contract/json.js';
import { checkBundleWorkflows, workflowDocuments } from '../../src/workflow/dsl/bundle.js';
import { contractFunctionDefinition } from '../../src/workflow/dsl/contract-function.js';
import { validateDslDocument } from '../../src/workflow/dsl/dsl-schema.js';
import { parseDocumentText } from '../../src/workflow/dsl/text.js';
import { runnableWorkflows } from '../../src/cli/runnable.js';
import { workflowValidateCommand } from '../../src/cli/commands/workflow-dsl.js';
import { bundleCheckCommand } from '../../src/cli/commands/bundle.js';
import type { CliIo } from '../../src/cli/io.js';
import { captureIo } from '../support/cli-io.js';
import { repoRoot } from '../support/assertions.js';

const fixtures = join(repoRoot(), 'test', 'workflow', 'fixtures');
const bundleText = readFileSync(join(fixtures, 'review-publish.bundle.json'), 'utf8');
const fresh = () => parseStrict(bundleText) as JsonObject;
const pipelineOf = (b: JsonObject) =>
  (b.pipelines as JsonObject)['review-then-publish'] as JsonObject & { stages: JsonObject[]; transforms: Record<string, JsonObject> };
const workflowOf = (b: JsonObject) => (b.workflows as JsonObject)['review-or-escalate'] as JsonObject & { do: JsonObject[] };

/** The refusal a bundle gets: its kind and description (the bundle load, then the workflow checks). */
async function refusal(bundle: JsonObject): Promise<{ kind: AdapterErrorKind; description: string }> {
  try {
    await checkBundleWorkflows(loadBundle(bundle));
  } catch (error) {
    assert.ok(isAdapterError(error), `an AdapterError, got ${String(error)}`);
    return { kind: error.kind, description: error.description ?? '' };
  }
  assert.fail('the bundle was accepted');
}

async function assertRefused(edit: (b: JsonObject) => void, kind: AdapterErrorKind, pointer: string, says: RegExp): Promise<void> {
  const bundle = fresh();
  edit(bundle);
  const got = await refusal(bundle);
  assert.equal(got.kind, kind, got.description);
  assert.ok(got.description.startsWith(`${pointer}`), `names ${pointer}: ${got.description}`);
  assert.match(got.description, says);
}

test('pipelines and workflows are part of the bundle digest; a YAML bundle has its JSON twin’s digest', () => {
  const digest = loadBundle(fresh()).digest;
  const edits: ((b: JsonObject) => void)[] = [
    (b) => (pipelineOf(b).stages[0]!.waitFor = 'decision'),
    (b) => (pipelineOf(b).transforms.approvals!.expression = '{approvals: (.counts.approve // 1)}'),
    (b) => (pipelineOf(b).description = 'another'),
    (b) => workflowOf(b).do.pop(),
  ];
  const digests = edits.map((edit) => {
    const b = fresh();
    edit(b);
    return loadBundle(b).digest;
  });
  for (const d of digests) assert.notEqual(d, digest);
  assert.equal(new Set(digests).size, digests.length);
  const fromYaml = parseDocumentText(stringify(fresh()), 'bundle.yaml', 'bundle.yaml');
  assert.equal(loadBundle(fromYaml).digest, digest);
});

test('lowering is deterministic, matches the golden document and validates with the SDK', async () => {
  const golden = readFileSync(join(fixtures, 'review-then-publish.lowered.json'), 'utf8');
  const first = canonicalJson(workflowDocuments(loadBundle(fresh())).get('review-then-publish')!.document);
  const second = canonicalJson(workflowDocuments(loadBundle(parseStrict(bundleText))).get('review-then-publish')!.document);
  assert.equal(first, second, 'byte-identical twice');
  assert.equal(first + '\n', golden, 'the golden lowered document');
  const lowered = parseStrict(first) as JsonObject;
  await validateDslDocument(lowered, '');
  const header = lowered.document as JsonObject;
  assert.equal(header.dsl, '1.0.3');
  assert.deepEqual((header.metadata as JsonObject).convoke, { contract: loadBundle(fresh()).ref, pipeline: 'review-then-publish' });
  assert.deepEqual(((lowered.use as JsonObject).functions as JsonObject)['invoke-contract'], contractFunctionDefinition);
});

test('a workflow is made standalone: the contract function declared, own-contract calls given the digest', async () => {
  const compiled = loadBundle(fresh());
  const { document } = (await checkBundleWorkflows(compiled, 'review-or-escalate')).get('review-or-escalate')!;
  const call = (document.do as JsonObject[])[0]!.review as JsonObject;
  assert.equal(((call.with as JsonObject).contract as JsonObject).digest, compiled.digest);
  assert.deepEqual((document.use as JsonObject).secrets, ['convoke']);
  assert.ok('invoke-contract' in ((document.use as JsonObject).functions as JsonObject));
  assert.equal('use' in (fresh().workflows as Record<string, JsonObject>)['review-or-escalate']!, false, 'the bundle itself is unchanged');
});

const p = '/pipelines/review-then-publish';

test('stage schemas: an unbridged output → input is refused; a transform must accept what flows in', async () => {
  await assertRefused(
    (b) => delete pipelineOf(b).stages[1]!.transform,
    'invalid-input',
    `${p}/stages/1`,
    /the output of stage "review" .* is not compatible with the input of interaction "publish" at \/approvals: required.*declare a transform/,
  );
  await assertRefused(
    (b) => (pipelineOf(b).transforms.approvals!.input = { type: 'object', required: ['votes'] }),
    'invalid-input',
    `${p}/stages/1/transform`,
    /not compatible with the input of transform "approvals" at \/votes/,
  );
  await assertRefused((b) => (pipelineOf(b).stages[1]!.transform = 'missing'), 'invalid-input', `${p}/stages/1/transform`, /no transform "missing"/);
  await assertRefused(
    (b) => (pipelineOf(b).stages[0]!.stageInput = '/title'),
    'invalid-input',
    `${p}/stages/0/stageInput`,
    /"\/title" .*not a required property/,
  );
  await assertRefused(
    (b) => (pipelineOf(b).input = { type: 'object' }),
    'invalid-input',
    `${p}/stages/0`,
    /the pipeline input is not compatible with the input of interaction "review"/,
  );
});

test('stages: boundaries, interactions, names, operations and expressions', async () => {
  await assertRefused((b) => (pipelineOf(b).stages[1]!.waitFor = 'decision'), 'invalid-input', `${p}/stages/1/waitFor`, /waits for "settled".*never weaken/);
  await assertRefused((b) => (pipelineOf(b).stages[0]!.interaction = 'approve'), 'invalid-input', `${p}/stages/0/interaction`, /no interaction "approve"/);
  await assertRefused((b) => (pipelineOf(b).stages[2]!.name = 'review'), 'invalid-input', `${p}/stages/2/name`, /used twice/);
  await assertRefused(
    (b) => ((pipelineOf(b).stages[2]!.operation as JsonObject).action = 'subscribe'),
    'invalid-input',
    `${p}/stages/2/operation/action`,
    /unbounded subscribe .*never a finite stage/,
  );
  await assertRefused(
    (b) => ((pipelineOf(b).stages[2]!.operation as JsonObject).subject = 'lab.*'),
    'invalid-input',
    `${p}/stages/2/operation/subject`,
    /not a literal NATS subject/,
  );
  await assertRefused(
    (b) => ((pipelineOf(b).stages[2]!.operation as JsonObject).payload = '/missing'),
    'invalid-input',
    `${p}/stages/2/operation/payload`,
    /"\/missing"/,
  );
  await assertRefused(
    (b) => (pipelineOf(b).stages[2]!.interaction = 'review'),
    'invalid-input',
    `${p}/stages/2`,
    /exactly one of "interaction" and "operation"/,
  );
  await assertRefused(
    (b) => (pipelineOf(b).transforms.approvals!.expression = '{approvals: now}'),
    'unsupported',
    `${p}/transforms/approvals/expression`,
    /"now"/,
  );
  await assertRefused(
    (b) => (pipelineOf(b).transforms.approvals!.expression = '{approvals:\n  (.counts.approve // 0)}'),
    'invalid-input',
    `${p}/transforms/approvals/expression`,
    /on one line/,
  );
  await assertRefused((b) => (pipelineOf(b).stages = []), 'invalid-input', 'contract bundle: /pipelines/review-then-publish/stages', /fewer than 1/);
});

const w = '/workflows/review-or-escalate';
const withTask = (task: JsonObject) => (b: JsonObject) => workflowOf(b).do.splice(1, 0, { odd: task });

test('workflows: unsupported task types and features are refused naming the task and its pointer', async () => {
  const runs: [string, JsonObject][] = [
    ['container', { container: { image: 'alpine' } }],
    ['shell', { shell: { command: 'ls' } }],
    ['script', { script: { language: 'javascript', code: '1' } }],
  ];
  for (const [kind, run] of runs) await assertRefused(withTask({ run }), 'unsupported', `${w}/do/1/odd`, new RegExp(`task "odd" is run \\(${kind}\\)`));
  // run: workflow names a pipeline or workflow of the same bundle; anything else is refused naming the reference.
  await assertRefused(
    withTask({ run: { workflow: { namespace: 'x', name: 'y', version: '1.0.0' } } }),
    'unsupported',
    `${w}/do/1/odd/run/workflow`,
    /the workflow x\/y@1\.0\.0 is not in bundle lab\.review@1\.0\.0/,
  );
  await assertRefused(
    withTask({ run: { workflow: { namespace: 'lab-review', name: 'review-then-publish', version: '2.0.0' } } }),
    'unsupported',
    `${w}/do/1/odd/run/workflow`,
    /is not in bundle/,
  );
  await assertRefused(withTask({ run: { workflow: { name: 'y' } } }), 'invalid-input', `${w}/do/1/odd/run/workflow`, /namespace, name and version/);
  const runsPipeline = fresh();
  withTask({ run: { workflow: { namespace: 'lab-review', name: 'review-then-publish', version: '1.0.0', input: { document: '${ .document }' } } } })(
    runsPipeline,
  );
  await assert.doesNotReject(checkBundleWorkflows(loadBundle(runsPipeline)), 'a run of the bundle’s own pipeline resolves');
  for (const call of ['grpc', 'asyncapi', 'a2a', 'mcp'])
    await assertRefused(withTask({ call, with: {} }), 'unsupported', `${w}/do/1/odd`, new RegExp(`task "odd" is call ${call}`));
  // An OpenAPI call runs; without its document or operation it is refused as invalid, naming what is missing.
  await assertRefused(withTask({ call: 'openapi', with: {} }), 'invalid-input', `${w}/do/1/odd/with/document`, /document\.endpoint names the OpenAPI document/);
  await assertRefused(
    withTask({ call: 'openapi', with: { document: { endpoint: 'https://x.example/openapi.json' } } }),
    'invalid-input',
    `${w}/do/1/odd/with/operationId`,
    /operationId is required/,
  );
  await assertRefused(
    withTask({ call: 'openapi', with: { document: { endpoint: 'https://x.example/openapi.json' }, operationId: 'op', authentication: { use: 'nowhere' } } }),
    'invalid-input',
    `${w}/do/1/odd/with/authentication/use`,
    /names no entry of use\.authentications/,
  );
  await assertRefused(withTask({ call: 'log:1.0.0@default' }), 'unsupported', `${w}/do/1/odd`, /external catalogs/);
  await assertRefused(
    (b) => (workflowOf(b).use = { catalogs: { default: { endpoint: 'https://x.example' } } }),
    'unsupported',
    `${w}/use/catalogs`,
    /external catalogs/,
  );
  await assertRefused((b) => (workflowOf(b).use = { extensions: [{ log: { extend: 'all' } }] }), 'unsupported', `${w}/use/extensions`, /extensions/);
  await assertRefused((b) => (workflowOf(b).schedule = { cron: '0 0 * * *' }), 'unsupported', `${w}/schedule`, /schedules/);
  await assertRefused((b) => ((workflowOf(b).document as JsonObject).dsl = '1.0.0'), 'unsupported', `${w}/document/dsl`, /1\.0\.3/);
});

test('workflows: every call and reference resolves, contract calls are checked, expressions are deterministic', async () => {
  const review = (edit: (withArgs: JsonObject) => void) => (b: JsonObject) => edit((workflowOf(b).do[0]!.review as JsonObject).with as JsonObject);
  await assertRefused(withTask({ call: 'notDeclared' }), 'invalid-input', `${w}/do/1/odd/call`, /neither http, invoke-contract nor a function/);
  await assertRefused(
    review((a) => (a.interaction = 'approve')),
    'invalid-input',
    `${w}/do/0/review/with/interaction`,
    /no interaction "approve"/,
  );
  await assertRefused(
    review((a) => (a.contract = { id: 'other', version: '1.0.0' })),
    'invalid-input',
    `${w}/do/0/review/with/contract`,
    /named with its digest/,
  );
  await assertRefused(
    review((a) => (a.extra = 1)),
    'invalid-input',
    `${w}/do/0/review/with`,
    /"extra"/,
  );
  await assertRefused(
    review((a) => delete a.input),
    'invalid-input',
    `${w}/do/0/review/with`,
    /input/,
  );
  await assertRefused(
    review((a) => (a.input = { document: 7 })),
    'invalid-input',
    `${w}/do/0/review/with/input`,
    /not a valid input of interaction "review": \/document must be string/,
  );
  await assertRefused(
    (b) => (workflowOf(b).use = { functions: { 'invoke-contract': { call: 'http', with: { method: 'get', endpoint: 'https://evil.example' } } } }),
    'invalid-input',
    `${w}/use/functions/invoke-contract`,
    /convoke's contract function/,
  );
  await assertRefused(withTask({ raise: { error: 'undeclared' } }), 'invalid-input', `${w}/do/1/odd/raise/error`, /names no entry of use\.errors/);
  await assertRefused((b) => (workflowOf(b).timeout = 'undeclared'), 'invalid-input', `${w}/timeout`, /names no entry of use\.timeouts/);
  await assertRefused(
    withTask({ wait: { seconds: 1 }, timeout: 'short' }),
    'invalid-input',
    `${w}/do/1/odd/timeout`,
    /"short" names no entry of use\.timeouts/,
  );
  await assertRefused(withTask({ set: { a: 1 }, then: 'nowhere' }), 'invalid-input', `${w}/do/1/odd/then`, /names no task of its own list/);
  await assertRefused(withTask({ set: { at: '${ now }' } }), 'unsupported', `${w}/do/1/odd/set/at`, /"now"/);
  await assertRefused(withTask({ if: '$ENV.DEBUG == "1"', set: { a: 1 } }), 'unsupported', `${w}/do/1/odd/if`, /"\$ENV"/);
  await assertRefused(withTask({ wait: { seconds: 1 }, output: { as: 'input' } }), 'unsupported', `${w}/do/1/odd/output/as`, /"input"/);
});

test('the schema, the SDK and the shared namespace refuse what the checks do not', async () => {
  await assertRefused(
    (b) => ((workflowOf(b).document as JsonObject).version = 'one'),
    'invalid-input',
    `${w}: not a valid Serverless Workflow 1.0.3 document`,
    /\/document\/version/,
  );
  await assertRefused(
    (b) => ((b.workflows as JsonObject)['review-then-publish'] = workflowOf(b)),
    'invalid-input',
    '/workflows/review-then-publish',
    /also a pipeline's/,
  );
  await assertRefused((b) => ((b.pipelines as JsonObject).Bad_Name = pipelineOf(b)), 'invalid-input', 'contract bundle: /pipelines', /property name/);
});

test('workflowCancellation: part of the digest, read per workflow (default none), and every name must be a pipeline or workflow', async () => {
  const plain = fresh();
  const declared = fresh();
  declared.workflowCancellation = { 'review-or-escalate': 'caller' };
  assert.notEqual(loadBundle(declared).digest, loadBundle(plain).digest);
  const workflows = workflowDocuments(loadBundle(declared));
  assert.equal(workflows.get('review-or-escalate')?.cancellation, 'caller');
  assert.equal(workflows.get('review-then-publish')?.cancellation, 'none');
  await assertRefused(
    (b) => (b.workflowCancellation = { 'no-such-flow': 'caller' }),
    'invalid-input',
    '/workflowCancellation/no-such-flow',
    /no pipeline or workflow/,
  );
  await assertRefused((b) => (b.workflowCancellation = { 'review-or-escalate': 'always' }), 'invalid-input', '', /workflowCancellation/);
});

/** The refusal the executor's check gives a bundle's workflows (runnable.ts), or undefined when it takes them. */
function executorRefusal(bundle: JsonObject): { kind: AdapterErrorKind; description: string } | undefined {
  try {
    runnableWorkflows(loadBundle(bundle));
    return undefined;
  } catch (error) {
    assert.ok(isAdapterError(error), `an AdapterError, got ${String(error)}`);
    return { kind: error.kind, description: error.description ?? '' };
  }
}

test('a bundle is refused for what the executor would refuse at every start, naming the workflow and the pointer', async () => {
  const declaresFunction = fresh();
  withTask({ call: 'log' })(declaresFunction);
  workflowOf(declaresFunction).use = { functions: { log: { call: 'http', with: { method: 'post', endpoint: 'https://logs.example/' } } } };
  // The language's checks take it (the function is declared and called as the DSL allows) …
  await assert.doesNotReject(checkBundleWorkflows(loadBundle(declaresFunction)));
  // … the executor runs no declared function but its own: refused when the bundle is read, not at each start.
  assert.deepEqual(executorRefusal(declaresFunction), {
    kind: 'unsupported',
    description: `${w}/use/functions: functions are not supported by this executor`,
  });

  const exportsFromListen = fresh();
  withTask({
    listen: { to: { any: [{ with: { type: 'com.example.note' } }] } },
    foreach: { item: 'note', do: [{ keep: { set: { note: '${ $note }' } } }], export: { as: '.' } },
  })(exportsFromListen);
  await assert.doesNotReject(checkBundleWorkflows(loadBundle(exportsFromListen)));
  const listenRefusal = executorRefusal(exportsFromListen);
  assert.equal(listenRefusal?.kind, 'unsupported', listenRefusal?.description);
  assert.match(listenRefusal?.description ?? '', new RegExp(`^${w}/do/1/odd/foreach/export: exporting from a listen's iterations is not supported`));

  // The bundle as it is, and with its workflow calling its own pipeline (run: workflow resolves among the bundle's), is taken.
  assert.equal(executorRefusal(fresh()), undefined);
  const runsPipeline = fresh();
  withTask({ run: { workflow: { namespace: 'lab-review', name: 'review-then-publish', version: '1.0.0', input: { document: '${ .document }' } } } })(
    runsPipeline,
  );
  assert.equal(executorRefusal(runsPipeline), undefined);
  // What serve deploys: named as the bundle names it, the contract function's declaration left out (convoke calls contracts itself).
  const executable = runnableWorkflows(loadBundle(fresh())).get('review-or-escalate')?.executable as JsonObject;
  assert.equal((executable.document as JsonObject).name, 'review-or-escalate');
  assert.equal(executable.use, undefined);

  // The commands that read a bundle refuse it too: validate (and lower, graph) and bundle check, exit code 7 (unsupported).
  const dir = mkdtempSync(join(tmpdir(), 'convoke-bundle-'));
  try {
    const file = join(dir, 'bundle.json');
    writeFileSync(file, JSON.stringify(declaresFunction));
    for (const run of [
      (io: CliIo) => workflowValidateCommand(file, undefined, { json: true }, io),
      (io: CliIo) => bundleCheckCommand(file, { json: true }, io),
    ])
      await assert.rejects(
        run(captureIo()),
        (error: unknown) => isAdapterError(error) && error.kind === 'unsupported' && /\/use\/functions/.test(error.description ?? ''),
      );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('stage schemas with references: equal whole documents pass; an equal part selected out of a document does not', async () => {
  const document = { type: 'string', maxLength: 100000 };
  const referring = { type: 'object', required: ['document'], properties: { document: { $ref: '#/definitions/document' } }, definitions: { document } };
  const same = fresh();
  pipelineOf(same).input = structuredClone(referring);
  ((same.interactions as JsonObject).review as JsonObject).input = structuredClone(referring);
  await checkBundleWorkflows(loadBundle(same));
  // "/inner" of the pipeline input refers to the input's own "document" (any string), not to the interaction's (at most 100000 characters).
  const consumer = { type: 'object', required: ['document'], properties: { document: { $ref: '#/definitions/document' } }, definitions: { document } };
  await assertRefused(
    (b) => {
      const inner = structuredClone(consumer);
      pipelineOf(b).input = { type: 'object', required: ['inner'], properties: { inner }, definitions: { document: { type: 'string' } } };
      pipelineOf(b).stages[0]!.stageInput = '/inner';
      ((b.interactions as JsonObject).review as JsonObject).input = consumer;
    },
    'invalid-input',
    `${p}/stages/0/stageInput`,
    /"\/inner" of the pipeline input is not compatible with the input of interaction "review": the schemas are equal, but a reference \(\$ref\) in them resolves in two documents/,
  );
});
