/**
 * The workflow documents several suites check alike: every official DSL 1.0.3 example (copied
 * under test/workflow/examples with its LICENSE), and every pipeline and workflow of the fixture
 * bundle and of the pipeline demo, made standalone, after the golden lowered pipeline.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadBundle } from '../../src/contract/bundle.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject } from '../../src/contract/json.js';
import { pipelineBundle } from '../../src/cli/commands/demo-pipeline.js';
import { workflowDocuments } from '../../src/workflow/dsl/bundle.js';
import { parseDocumentText } from '../../src/workflow/dsl/text.js';
import { repoRoot } from '../support/assertions.js';

const examples = join(repoRoot(), 'test', 'workflow', 'examples');
const fixtures = join(repoRoot(), 'test', 'workflow', 'fixtures');

export const exampleDocuments = (): [string, JsonObject][] =>
  readdirSync(examples)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => [f, parseDocumentText(readFileSync(join(examples, f), 'utf8'), f) as JsonObject]);

/** Every pipeline and workflow of the fixture bundle and of the pipeline demo (quorum 1–3), made standalone. */
export function bundleDocuments(): [string, JsonObject][] {
  const out: [string, JsonObject][] = [
    ['review-then-publish.lowered.json', parseStrict(readFileSync(join(fixtures, 'review-then-publish.lowered.json'), 'utf8')) as JsonObject],
  ];
  const bundles: [string, JsonObject][] = [
    ['review-publish.bundle.json', parseStrict(readFileSync(join(fixtures, 'review-publish.bundle.json'), 'utf8')) as JsonObject],
  ];
  for (const quorum of [1, 2, 3]) bundles.push([`demo pipeline, quorum ${quorum}`, pipelineBundle(quorum)]);
  for (const [label, bundle] of bundles) {
    for (const w of workflowDocuments(loadBundle(bundle)).values()) out.push([`${label} ${w.pointer}`, w.document]);
  }
  return out;
}
