/**
 * A document drawn as a Mermaid flowchart by the converter of @serverlessworkflow/sdk, pinned
 * exactly to 1.0.1 (engines: node >= 20). That release validates only `dsl: '1.0.0'`, but its
 * `convertToMermaidCode` does not validate: it walks the task list, which DSL 1.0.3 left as 1.0.0
 * had it, and draws every official 1.0.3 example. Validation is dsl-schema.ts's. Loaded on first
 * use (the SDK compiles its own schemas at load).
 *
 * Documents are handed over as plain objects: the SDK's `Classes.Workflow.deserialize` rewrites
 * `listen.to.any: []` into `[[]]`, so convoke parses the text itself (text.ts).
 */
import type { JsonObject } from '../../contract/json.js';

type Sdk = typeof import('@serverlessworkflow/sdk');
let loaded: Promise<Sdk> | undefined;
// The package is CommonJS (a UMD bundle whose exports Node cannot list), so its API is `default`.
const sdk = (): Promise<Sdk> => (loaded ??= import('@serverlessworkflow/sdk').then((m) => m.default));

/** The document as a Mermaid flowchart. */
export async function mermaidOf(document: JsonObject): Promise<string> {
  const { convertToMermaidCode } = await sdk();
  return convertToMermaidCode(structuredClone(document) as Parameters<Sdk['convertToMermaidCode']>[0]);
}
