/**
 * The Serverless Workflow 1.0.3 conformance kit (test/workflow/ctk/features, Apache-2.0), parsed
 * with @cucumber/gherkin and run against the executor: one test per scenario, each step matched
 * by the step definitions below (an unknown step fails its scenario). HTTP calls to public hosts
 * go to a loopback stub. Every scenario also checks that the instance rebuilt from its log equals
 * the live one.
 *
 * Scenarios this executor cannot run yet are listed in `knownFailures`: they still run, and fail,
 * reported as TODO — never as passing.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { AstBuilder, GherkinClassicTokenMatcher, Parser, compile } from '@cucumber/gherkin';
import { IdGenerator, type Pickle } from '@cucumber/messages';
import { isObject, type JsonValue } from '../../src/contract/json.js';
import { checkExpressionsCompile } from '../../src/workflow/exec/jq-compile.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { repoRoot } from '../support/assertions.js';
import { startStub, type Stub } from './ctk/stub.js';
import { harness, runToEnd, startOrder, yaml, type Harness } from './support.js';

const knownFailures: Record<string, string> = {};

interface World {
  document?: JsonValue;
  input: JsonValue;
  record?: WorkflowRecord;
  refusal?: Error;
}

let stub: Stub;
let h: Harness;
before(async () => {
  stub = await startStub();
  h = harness({ fetch: stub.fetch });
});
after(async () => {
  await h.close();
  await stub.close();
});

/** A property path `a.b.c` in a value. */
function at(value: JsonValue | undefined, path: string): JsonValue | undefined {
  let current = value;
  for (const key of path.split('.')) {
    if (typeof current !== 'object' || current === null || Array.isArray(current) || !Object.hasOwn(current, key)) return undefined;
    current = current[key];
  }
  return current;
}

function finished(world: World): WorkflowRecord {
  if (world.refusal) throw world.refusal;
  assert.ok(world.record, 'the workflow was executed');
  return world.record;
}

function task(record: WorkflowRecord, name: string) {
  const found = Object.values(record.tasks).filter((t) => t.name === name);
  assert.ok(found.length > 0, `task ${name} ran`);
  return found;
}

type Step = [RegExp, (world: World, match: RegExpExecArray, doc: string | undefined) => Promise<void> | void];

let scenarioKey = 0;
const steps: Step[] = [
  [/^a workflow with definition:$/, (w, _m, doc) => void (w.document = yaml(doc ?? ''))],
  [/^(?:given )?the workflow input is:$/, (w, _m, doc) => void (w.input = yaml(doc ?? ''))],
  [
    /^the workflow is executed$/,
    async (w) => {
      try {
        // Every expression compiled first, as `convoke workflow run` and a bundle's readers do: no scenario's jq is refused by it.
        if (isObject(w.document)) await checkExpressionsCompile(w.document, h.evaluator);
        w.record = await runToEnd(h, w.document ?? null, w.input, `ctk-${++scenarioKey}`);
      } catch (error) {
        w.refusal = error as Error;
      }
    },
  ],
  [/^the workflow should complete$/, (w) => assert.equal(finished(w).status, 'completed', JSON.stringify(finished(w).error))],
  [
    /^the workflow should complete with output:$/,
    (w, _m, doc) => {
      assert.equal(finished(w).status, 'completed', JSON.stringify(finished(w).error));
      assert.deepEqual(finished(w).output, yaml(doc ?? ''));
    },
  ],
  [/^the workflow should fault$/, (w) => assert.equal(finished(w).status, 'faulted')],
  [
    /^the workflow should fault with error:$/,
    (w, _m, doc) => {
      assert.equal(finished(w).status, 'faulted');
      assert.deepEqual(finished(w).error, yaml(doc ?? ''));
    },
  ],
  [/^the workflow should cancel$/, (w) => assert.equal(finished(w).status, 'cancelled')],
  [
    /^the workflow output should have properties (.+)$/,
    (w, m) => {
      const record = finished(w);
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      for (const [, path] of m[1]!.matchAll(/'([^']+)'/g)) assert.notEqual(at(record.output, path!), undefined, `output has ${path}`);
    },
  ],
  [/^the workflow output should have a '([^']+)' property with value:$/, (w, m, doc) => assert.deepEqual(at(finished(w).output, m[1]!), yaml(doc ?? ''))],
  [
    /^the workflow output should have a '([^']+)' property containing (\d+) items$/,
    (w, m) => {
      const value = at(finished(w).output, m[1]!);
      assert.ok(Array.isArray(value), `${m[1]} is an array`);
      assert.equal(value.length, Number(m[2]));
    },
  ],
  [/^(\w+) should run first$/, (w, m) => assert.equal(startOrder(finished(w))[0], m[1])],
  [/^(\w+) should run last$/, (w, m) => assert.equal(startOrder(finished(w)).at(-1), m[1])],
  [
    /^(\w+) should run after (\w+)$/,
    (w, m) => {
      const record = finished(w);
      assert.ok(task(record, m[1]!)[0]!.startedSeq > Math.max(...task(record, m[2]!).map((t) => t.endedSeq ?? Infinity)), `${m[1]} ran after ${m[2]}`);
    },
  ],
  [
    /^(\w+) should run before (\w+)$/,
    (w, m) => {
      const record = finished(w);
      assert.ok((task(record, m[1]!)[0]!.endedSeq ?? Infinity) < task(record, m[2]!)[0]!.startedSeq, `${m[1]} ran before ${m[2]}`);
    },
  ],
  [/^(\w+) should complete$/, (w, m) => assert.ok(task(finished(w), m[1]!).every((t) => t.state === 'completed'))],
  [/^(\w+) should fault$/, (w, m) => assert.ok(task(finished(w), m[1]!).some((t) => t.state === 'faulted'))],
  [/^(\w+) should cancel$/, (w, m) => assert.ok(task(finished(w), m[1]!).some((t) => t.state === 'cancelled'))],
];

async function runPickle(pickle: Pickle): Promise<void> {
  const world: World = { input: {} };
  for (const step of pickle.steps) {
    const text = step.text.trim();
    const found = steps.map(([pattern, run]) => [pattern.exec(text), run] as const).find(([match]) => match !== null);
    if (!found || !found[0]) assert.fail(`no step definition for "${text}"`);
    await found[1](world, found[0], step.argument?.docString?.content);
  }
}

const featuresDir = join(repoRoot(), 'test', 'workflow', 'ctk', 'features');
const pickles: Pickle[] = [];
for (const file of readdirSync(featuresDir)
  .filter((name) => name.endsWith('.feature'))
  .sort()) {
  const parser = new Parser(new AstBuilder(IdGenerator.incrementing()), new GherkinClassicTokenMatcher());
  const document = parser.parse(readFileSync(join(featuresDir, file), 'utf8'));
  pickles.push(...compile(document, file, IdGenerator.incrementing()));
}

test('the conformance kit holds its 21 scenarios', () => assert.equal(pickles.length, 21));

for (const pickle of pickles) {
  const todo = knownFailures[pickle.name];
  test(`ctk ${pickle.uri}: ${pickle.name}`, todo ? { todo: `known failure: ${todo}` } : {}, () => runPickle(pickle));
}
