/**
 * The vendored DSL 1.0.3 schema check (src/workflow/dsl/dsl-schema.ts) gives the verdicts of
 * @serverlessworkflow/sdk 1.0.3-alpha1's `validate('Workflow', …)` (the development dependency
 * `@serverlessworkflow/sdk-1.0.3`): for every official example, every lowered pipeline (the golden
 * file, the fixture bundle's and the pipeline demo's), the fixture bundle's standalone workflows,
 * and documents that break the schema in one way each — a required property, an unknown property,
 * a pattern, a format (which only ajv-formats catches) and the DSL version. Refusals are
 * invalid-input naming the document and the offending pointer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadBundle } from '../../src/contract/bundle.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject } from '../../src/contract/json.js';
import { checkBundleWorkflows } from '../../src/workflow/dsl/bundle.js';
import { validateDslDocument } from '../../src/workflow/dsl/dsl-schema.js';
import { repoRoot } from '../support/assertions.js';
import { bundleDocuments, exampleDocuments } from './documents.js';

const fixtures = join(repoRoot(), 'test', 'workflow', 'fixtures');

type Sdk = typeof import('@serverlessworkflow/sdk-1.0.3');
let sdk: Promise<Sdk> | undefined;

/** The SDK 1.0.3-alpha1 verdict: true, or the first line of its message. */
async function sdkVerdict(document: JsonObject): Promise<true | string> {
  const { validate } = await (sdk ??= import('@serverlessworkflow/sdk-1.0.3'));
  try {
    validate('Workflow', structuredClone(document));
    return true;
  } catch (error) {
    return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? 'invalid';
  }
}

/** convoke's verdict: true, or the invalid-input description. */
async function vendoredVerdict(document: JsonObject, where = 'doc'): Promise<true | string> {
  try {
    await validateDslDocument(document, where);
    return true;
  } catch (error) {
    assert.ok(isAdapterError(error) && error.kind === 'invalid-input', `invalid-input, got ${String(error)}`);
    return error.description ?? '';
  }
}

async function assertSameVerdict(label: string, document: JsonObject): Promise<void> {
  const [ours, theirs] = await Promise.all([vendoredVerdict(document), sdkVerdict(document)]);
  assert.equal(
    ours === true,
    theirs === true,
    `${label}: vendored schema says ${ours === true ? 'valid' : ours}; SDK 1.0.3 says ${theirs === true ? 'valid' : theirs}`,
  );
}

test('every official example gets the same verdict from the vendored schema as from SDK 1.0.3 (all valid)', async () => {
  const documents = exampleDocuments();
  assert.equal(documents.length, 66);
  for (const [file, document] of documents) {
    await assertSameVerdict(file, document);
    assert.equal(await vendoredVerdict(document), true, `${file} is a valid 1.0.3 document`);
  }
});

test('every lowered pipeline and standalone workflow gets the same verdict (all valid)', async () => {
  const documents = bundleDocuments();
  assert.ok(documents.length >= 6, `the golden file, the fixture bundle's two and the demo's three, got ${documents.length}`);
  for (const [label, document] of documents) {
    await assertSameVerdict(label, document);
    assert.equal(await vendoredVerdict(document), true, `${label} is a valid 1.0.3 document`);
  }
});

const base = (): JsonObject & { document: JsonObject; do: JsonObject[] } => ({
  document: { dsl: '1.0.3', namespace: 'test', name: 'broken', version: '1.0.0' },
  do: [{ fail: { raise: { error: { type: 'https://example.com/errors/x', status: 400, instance: '/do/0/fail' } } } }],
});
const raised = (d: JsonObject) => (((d.do as JsonObject[])[0]!.fail as JsonObject).raise as JsonObject).error as JsonObject;

/** One way each to break the schema, with words the description must contain. */
const invalid: { name: string; edit: (d: ReturnType<typeof base>) => void; says: RegExp }[] = [
  { name: 'no do', edit: (d) => delete (d as JsonObject).do, says: /: the document must have required property 'do'$/ },
  { name: 'an unknown document property', edit: (d) => (d.document.author = 'x'), says: /\/document must NOT have unevaluated properties/ },
  { name: 'a namespace against its pattern', edit: (d) => (d.document.namespace = 'Not_A_Namespace!'), says: /\/document\/namespace must match pattern/ },
  {
    name: 'an error instance not a JSON Pointer (a format)',
    edit: (d) => (raised(d).instance = 'do/0/fail'),
    says: /\/do\/0\/fail\/raise\/error\/instance must match format "json-pointer"/,
  },
  { name: 'a task that is no task', edit: (d) => d.do.push({ nothing: { at: 'all' } }), says: /\/do\/1\/nothing/ },
  { name: 'the DSL version 1.0.0', edit: (d) => (d.document.dsl = '1.0.0'), says: /document\.dsl is "1\.0\.0", not '1\.0\.3'/ },
];

test('the base document is valid to both', async () => {
  assert.equal(await vendoredVerdict(base()), true);
  assert.equal(await sdkVerdict(base()), true);
});

test('documents breaking the schema are refused by both, as invalid-input naming the document and the pointer', async () => {
  for (const { name, edit, says } of invalid) {
    const document = base();
    edit(document);
    const [ours, theirs] = await Promise.all([vendoredVerdict(document, '/workflows/broken'), sdkVerdict(document)]);
    assert.notEqual(theirs, true, `${name}: SDK 1.0.3 refuses it`);
    assert.notEqual(ours, true, `${name}: the vendored schema refuses it`);
    assert.ok(String(ours).startsWith('/workflows/broken: not a valid Serverless Workflow 1.0.3 document: '), String(ours));
    assert.match(String(ours), says, name);
  }
});

test('a bundle workflow breaking the schema is refused when the bundle is checked', async () => {
  const bundle = parseStrict(readFileSync(join(fixtures, 'review-publish.bundle.json'), 'utf8')) as JsonObject;
  ((bundle.workflows as JsonObject)['review-or-escalate'] as JsonObject & { document: JsonObject }).document.author = 'x';
  await assert.rejects(checkBundleWorkflows(loadBundle(bundle)), (error: unknown) => {
    assert.ok(isAdapterError(error) && error.kind === 'invalid-input', String(error));
    assert.match(
      error.description ?? '',
      /^\/workflows\/review-or-escalate: not a valid Serverless Workflow 1\.0\.3 document: \/document must NOT have unevaluated properties/,
    );
    return true;
  });
});
