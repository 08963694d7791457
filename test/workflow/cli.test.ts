/**
 * `convoke workflow validate|lower|graph` over the built binary (bin/convoke.js), as a user runs
 * them, on bundles and (validate, graph) on standalone workflow documents: output, exit codes, and
 * the AdapterError as JSON on stderr.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject } from '../../src/contract/json.js';
import { repoRoot } from '../support/assertions.js';

const root = repoRoot();
const bundle = join(root, 'test', 'workflow', 'fixtures', 'review-publish.bundle.json');
const golden = readFileSync(join(root, 'test', 'workflow', 'fixtures', 'review-then-publish.lowered.json'), 'utf8');

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [join(root, 'bin', 'convoke.js'), ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}
const convoke = (...args: string[]) => cli(['workflow', ...args]);

function withBundle<T>(document: JsonObject, name: string, run: (file: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-workflow-cli-'));
  try {
    const file = join(dir, name);
    writeFileSync(file, name.endsWith('.json') ? JSON.stringify(document) : stringify(document));
    return run(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('validate lists every pipeline and workflow as valid; --json names them', () => {
  const text = convoke('validate', bundle);
  assert.equal(text.status, 0, text.stderr);
  assert.match(text.stdout, /^contract lab\.review@1\.0\.0\ndigest {3}sha256:[0-9a-f]{64}\n/);
  assert.match(text.stdout, /valid {4}pipeline review-then-publish \(\/pipelines\/review-then-publish\)\n/);
  assert.match(text.stdout, /valid {4}workflow review-or-escalate \(\/workflows\/review-or-escalate\)\n/);
  const json = convoke('validate', bundle, 'review-or-escalate', '--json');
  assert.equal(json.status, 0, json.stderr);
  const parsed = JSON.parse(json.stdout) as { workflows: { name: string; kind: string }[] };
  assert.deepEqual(
    parsed.workflows.map((w) => [w.name, w.kind]),
    [['review-or-escalate', 'workflow']],
  );
});

test('validate and graph take a standalone workflow document, checked as workflow run checks it; its --with documents too', () => {
  const child = { document: { dsl: '1.0.3', namespace: 'test', name: 'child', version: '1.0.0' }, do: [{ one: { set: { one: 1 } } }] };
  const parent = {
    document: { dsl: '1.0.3', namespace: 'test', name: 'parent', version: '1.0.0' },
    do: [{ first: { set: { a: '${ .a }' } } }, { nested: { run: { workflow: { namespace: 'test', name: 'child', version: '1.0.0' } } } }],
  };
  withBundle(child as unknown as JsonObject, 'child.yaml', (childFile) =>
    withBundle(parent as unknown as JsonObject, 'parent.yaml', (file) => {
      const text = convoke('validate', file, '--with', childFile);
      assert.equal(text.status, 0, text.stderr);
      // Lines wrap at the terminal's width under their label.
      assert.equal(text.stdout.replace(/\n {9}/g, ' '), `document test/parent@1.0.0\nvalid    workflow parent (${file}, with ${childFile})\n`);
      const json = convoke('validate', file, 'parent', '--with', childFile, '--json');
      assert.equal(json.status, 0, json.stderr);
      assert.deepEqual(JSON.parse(json.stdout), { document: { namespace: 'test', name: 'parent', version: '1.0.0' }, file, with: [childFile], valid: true });
      const graph = convoke('graph', file, '--with', childFile);
      assert.equal(graph.status, 0, graph.stderr);
      assert.match(graph.stdout, /^flowchart TD\n/);
      for (const task of ['first', 'nested']) assert.match(graph.stdout, new RegExp(`^ {4}n\\d+\\["${task}"\\]$`, 'm'), task);
      // Without the child it names, the document is refused, as workflow run refuses it.
      const alone = convoke('validate', file);
      assert.equal(alone.status, exitCodes.unsupported, alone.stdout);
      assert.match(alone.stderr, /\/do\/1\/nested/);
      // A NAME is the document's own.
      const other = convoke('graph', file, 'other', '--with', childFile);
      assert.equal(other.status, exitCodes.invalidInput);
      assert.match(other.stderr, /is the workflow document \\"parent\\", not \\"other\\"/);
    }),
  );
  // What run refuses before anything runs: a function whose result is not a function of the data, and jq that does not compile.
  for (const [value, kind, says] of [
    ['${ now }', 'unsupported', /\/do\/0\/a\/set\/x: the expression uses \\"now\\"/],
    ['${ .a | frobnicate }', 'invalid-input', /\/do\/0\/a\/set\/x: not a valid jq expression/],
  ] as const) {
    const bad = { document: { dsl: '1.0.3', namespace: 'test', name: 'bad', version: '1.0.0' }, do: [{ a: { set: { x: value } } }] };
    const refused = withBundle(bad as unknown as JsonObject, 'bad.json', (file) => convoke('validate', file));
    assert.notEqual(refused.status, 0);
    const error = JSON.parse(refused.stderr) as { kind: string; description: string };
    assert.equal(error.kind, kind);
    assert.match(refused.stderr, says);
  }
  // A bundle takes no --with, and graph needs its NAME.
  assert.match(convoke('validate', bundle, '--with', bundle).stderr, /--with pins documents beside a standalone workflow document/);
  const unnamed = convoke('graph', bundle);
  assert.equal(unnamed.status, exitCodes.invalidInput);
  assert.match(unnamed.stderr, /is a bundle: name the pipeline or workflow to draw/);
});

test('lower prints YAML by default and the golden canonical JSON with --json, the same from a YAML bundle', () => {
  const json = convoke('lower', bundle, 'review-then-publish', '--json');
  assert.equal(json.status, 0, json.stderr);
  assert.equal(json.stdout, golden);
  const yaml = convoke('lower', bundle, 'review-then-publish');
  assert.equal(yaml.status, 0, yaml.stderr);
  assert.match(yaml.stdout, /^document:\n {2}dsl: 1\.0\.3\n/);
  assert.match(yaml.stdout, /call: invoke-contract/);
  const fromYaml = withBundle(parseStrict(readFileSync(bundle, 'utf8')) as JsonObject, 'bundle.yaml', (file) =>
    convoke('lower', file, 'review-then-publish', '--json'),
  );
  assert.equal(fromYaml.stdout, golden, 'a YAML bundle lowers to the same bytes');
});

test('graph prints a Mermaid flowchart of the lowered document (the SDK’s graph)', () => {
  const graph = convoke('graph', bundle, 'review-then-publish');
  assert.equal(graph.status, 0, graph.stderr);
  assert.match(graph.stdout, /^flowchart TD\n/);
  // Each stage a subgraph, each of its tasks a node (graph.test.ts renders them with Mermaid).
  for (const stage of ['review', 'publish', 'announce']) assert.match(graph.stdout, new RegExp(`^ {4}subgraph n\\d+ \\["${stage}"\\]$`, 'm'), stage);
  for (const task of ['invoke', 'transform', 'send']) assert.match(graph.stdout, new RegExp(`^ {8}n\\d+\\["${task}"\\]$`, 'm'), task);
});

test('lower and graph show a hostile bundle’s control and bidi characters escaped, the YAML keeping its value', () => {
  const document = parseStrict(readFileSync(bundle, 'utf8')) as JsonObject;
  const workflow = (document.workflows as Record<string, { do: JsonObject[] }>)['review-or-escalate']!;
  // A task name that reorders what follows it and carries a C1 CSI; a value that clears the screen.
  workflow.do.push({ 'a\u202eb\u009b31m': { set: { note: 'y\u001b[2J\tz', quote: 'x\u202ey' } } });
  // eslint-disable-next-line no-control-regex -- the characters a terminal acts on are what the test looks for
  const refused = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u;
  withBundle(document, 'bundle.json', (file) => {
    const json = convoke('lower', file, 'review-or-escalate', '--json');
    assert.equal(json.status, 0, json.stderr);
    const yaml = convoke('lower', file, 'review-or-escalate');
    assert.equal(yaml.status, 0, yaml.stderr);
    assert.doesNotMatch(yaml.stdout, refused);
    assert.match(yaml.stdout, /"a\\u202eb\\u009b31m":/);
    assert.deepEqual(parseYaml(yaml.stdout), JSON.parse(json.stdout), 'the escaped YAML is the same document');
    const graph = convoke('graph', file, 'review-or-escalate');
    assert.equal(graph.status, 0, graph.stderr);
    assert.doesNotMatch(graph.stdout, refused);
    assert.ok(graph.stdout.includes('a\\u202eb\\u009b31m'), graph.stdout);
  });
});

test('an unknown name, an invalid bundle and an unsupported task exit with their kind and the error on stderr', () => {
  const unknown = convoke('lower', bundle, 'nope');
  assert.equal(unknown.status, exitCodes.invalidInput);
  assert.match(
    (JSON.parse(unknown.stderr) as { description: string }).description,
    /no pipeline or workflow "nope" \(it has: review-then-publish, review-or-escalate\)/,
  );
  const document = parseStrict(readFileSync(bundle, 'utf8')) as JsonObject;
  const workflow = (document.workflows as Record<string, { do: JsonObject[] }>)['review-or-escalate']!;
  workflow.do.push({ shell: { run: { shell: { command: 'rm -rf /' } } } });
  const refused = withBundle(document, 'bundle.json', (file) => convoke('validate', file));
  assert.equal(refused.status, exitCodes.unsupported);
  const error = JSON.parse(refused.stderr) as { kind: string; description: string };
  assert.equal(error.kind, 'unsupported');
  assert.match(error.description, /^\/workflows\/review-or-escalate\/do\/4\/shell: task "shell" is run \(shell\)/);
  assert.equal(refused.stdout, '');
});

test('validate, bundle check and lower refuse an expression jq does not compile, naming it in the bundle (2); a runtime error is not one', () => {
  const document = parseStrict(readFileSync(bundle, 'utf8')) as JsonObject;
  const workflow = (document.workflows as Record<string, { do: JsonObject[] }>)['review-or-escalate']!;
  workflow.do.push({ odd: { set: { x: '${ .a | }', y: '${ error("only when it runs") }' } } });
  withBundle(document, 'bundle.json', (file) => {
    for (const args of [
      ['workflow', 'validate', file],
      ['bundle', 'check', file],
      ['workflow', 'lower', file, 'review-or-escalate'],
    ]) {
      const refused = cli(args);
      assert.equal(refused.status, exitCodes.invalidInput, `${args.join(' ')}: ${refused.stderr}`);
      const error = JSON.parse(refused.stderr) as { kind: string; description: string };
      assert.equal(error.kind, 'invalid-input');
      assert.equal(
        error.description,
        '/workflows/review-or-escalate/do/4/odd/set/x: not a valid jq expression: syntax error: unexpected end of the expression',
      );
      assert.equal(refused.stdout, '');
    }
  });
  workflow.do.pop();
  workflow.do.push({ odd: { set: { y: '${ error("only when it runs") }' } } });
  withBundle(document, 'bundle.json', (file) => assert.equal(convoke('validate', file).status, 0));
  // A pipeline's transform is jq too, refused where its lowered document has it.
  const pipelines = parseStrict(readFileSync(bundle, 'utf8')) as JsonObject;
  const pipeline = (pipelines.pipelines as Record<string, { transforms: Record<string, JsonObject> }>)['review-then-publish']!;
  pipeline.transforms.approvals!.expression = '{approvals: (.counts.approve // 0) | frobnicate}';
  withBundle(pipelines, 'bundle.json', (file) => {
    const refused = convoke('validate', file);
    assert.equal(refused.status, exitCodes.invalidInput, refused.stderr);
    assert.match(
      (JSON.parse(refused.stderr) as { description: string }).description,
      /^\/pipelines\/review-then-publish \(lowered\) \/do\/\d+\/[^:]+: not a valid jq expression: frobnicate\/0 is not defined at line 1, column \d+$/,
    );
  });
});

test('bundle check reads the same bundle, its pipelines and workflows checked, and names them', () => {
  const checked = cli(['bundle', 'check', bundle]);
  assert.equal(checked.status, 0, checked.stderr);
  assert.match(checked.stdout, /\npipelines review-then-publish\nworkflows review-or-escalate\n$/);
  const document = parseStrict(readFileSync(bundle, 'utf8')) as JsonObject;
  (document.pipelines as Record<string, { stages: JsonObject[] }>)['review-then-publish']!.stages[1]!.waitFor = 'decision';
  const refused = withBundle(document, 'bundle.json', (file) => cli(['bundle', 'check', file]));
  assert.equal(refused.status, exitCodes.invalidInput);
  assert.match((JSON.parse(refused.stderr) as { description: string }).description, /^\/pipelines\/review-then-publish\/stages\/1\/waitFor: /);
});

test('lower given a workflow document instead of a bundle says so in one line, and names workflow run', () => {
  const document = join(root, 'examples', 'release-note.workflow.yaml');
  for (const args of [['lower', document, 'release-note']]) {
    const refused = convoke(...args);
    assert.equal(refused.status, exitCodes.invalidInput, refused.stderr);
    assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr);
    const { description } = JSON.parse(refused.stderr) as { description: string };
    assert.match(description, /release-note\.workflow\.yaml is a Serverless Workflow document, not a contract bundle/);
    assert.match(description, /convoke workflow run/);
    assert.doesNotMatch(description, /must have required property/);
    assert.equal(refused.stdout, '');
  }
});
