/**
 * A bundle's pipelines and workflows, checked and made standalone: each name gives one Serverless
 * Workflow 1.0.3 document — a pipeline lowered (lower.ts), a workflow with the contract function
 * declared and its own-contract calls given the bundle's digest — that the DSL's JSON Schema validates.
 *
 * `workflowDocuments` is synchronous and pure (the checks of document.ts and pipeline.ts, and the
 * lowering); `checkBundleWorkflows` adds the DSL 1.0.3 schema validation of every
 * document (dsl-schema.ts).
 */
import { valueAt, type CompiledBundle } from '../../contract/bundle.js';
import { invalidInput } from '../../contract/errors.js';
import { jsonPointer } from '../../contract/ijson.js';
import { isObject, type JsonObject } from '../../contract/json.js';
import { contractFunctionDefinition, contractFunctionName, contractFunctionSecret } from './contract-function.js';
import { checkWorkflowDocument, namesWorkflow, unresolvedRun, type DocumentFacts } from './document.js';
import { unsupported } from '../../contract/errors.js';
import { lowerPipeline } from './lower.js';
import { validateDslDocument } from './dsl-schema.js';

export interface BundleWorkflow {
  name: string;
  kind: 'pipeline' | 'workflow';
  /** Where the source sits in the bundle (`/pipelines/<name>`, `/workflows/<name>`). */
  pointer: string;
  /** The standalone Serverless Workflow 1.0.3 document. */
  document: JsonObject;
  /** Whether the caller that started an instance may cancel it (the bundle's `workflowCancellation`). */
  cancellation: 'none' | 'caller';
}

/** Every pipeline and workflow of the bundle, by name, in declaration order (pipelines first). */
export function workflowDocuments(compiled: CompiledBundle): Map<string, BundleWorkflow> {
  const out = new Map<string, BundleWorkflow>();
  const runs: DocumentFacts['runs'] = [];
  for (const [name, pipeline] of Object.entries(compiled.bundle.pipelines ?? {})) {
    const pointer = jsonPointer(['pipelines', name]);
    out.set(name, { name, kind: 'pipeline', pointer, document: lowerPipeline(compiled, name, pipeline), cancellation: cancellationOf(compiled, name) });
  }
  for (const [name, source] of Object.entries(compiled.bundle.workflows ?? {})) {
    const pointer = jsonPointer(['workflows', name]);
    if (out.has(name)) throw invalidInput(`${pointer}: the name "${name}" is also a pipeline's; a bundle's pipelines and workflows share one namespace`);
    out.set(name, {
      name,
      kind: 'workflow',
      pointer,
      document: standaloneWorkflow(compiled, source, pointer, runs),
      cancellation: cancellationOf(compiled, name),
    });
  }
  // run: workflow names a pipeline or workflow of this bundle: its namespace, its name in the bundle, its version.
  for (const run of runs)
    if (![...out.values()].some((workflow) => namesWorkflow(workflow.document, run.ref, workflow.name)))
      throw unsupported(unresolvedRun(run.where, run.ref, `in bundle ${compiled.ref.id}@${compiled.ref.version}`));
  for (const name of Object.keys(compiled.bundle.workflowCancellation ?? {}))
    if (!out.has(name)) throw invalidInput(`${jsonPointer(['workflowCancellation', name])}: the bundle has no pipeline or workflow "${name}"`);
  return out;
}

/** Its own entries only: a workflow may be named `constructor`, which every object inherits. */
const cancellationOf = (compiled: CompiledBundle, name: string): 'none' | 'caller' => {
  const declared = compiled.bundle.workflowCancellation;
  return declared !== undefined && Object.hasOwn(declared, name) ? (declared[name] ?? 'none') : 'none';
};

/** The workflow checked, with the contract function declared and its own-contract calls digested. */
function standaloneWorkflow(compiled: CompiledBundle, source: JsonObject, pointer: string, runs: DocumentFacts['runs']): JsonObject {
  const enclosing = { id: compiled.ref.id, version: compiled.ref.version, interactions: new Map([...compiled.interactions].map(([id, i]) => [id, i.spec])) };
  const facts = checkWorkflowDocument(source, pointer, enclosing);
  runs.push(...facts.runs);
  if (!facts.callsContract) return source;
  const document = structuredClone(source);
  for (const call of facts.contractCalls) {
    const contract = valueAt(document, `${call}/with/contract`) as JsonObject;
    if (contract.digest === undefined) contract.digest = compiled.digest;
  }
  const use = (document.use ??= {}) as JsonObject;
  const functions = (use.functions ??= {}) as JsonObject;
  functions[contractFunctionName] ??= structuredClone(contractFunctionDefinition);
  const secrets = (use.secrets ??= []) as string[];
  if (!secrets.includes(contractFunctionSecret)) secrets.push(contractFunctionSecret);
  return document;
}

/**
 * The document as convoke's executor runs it: named as the bundle names it (the DSL document's own
 * name may differ), without the contract function's declaration (`use.functions` invoke-contract,
 * `use.secrets` convoke), which is there for other engines — the executor calls contracts itself.
 */
export function executableDocument(workflow: BundleWorkflow): JsonObject {
  const { document, name } = workflow;
  const head = document.document;
  const named: JsonObject = isObject(head) && head.name !== name ? { ...document, document: { ...head, name } } : document;
  const use = named.use;
  if (!isObject(use)) return named;
  const rest: JsonObject = { ...use };
  const functions = rest.functions;
  if (isObject(functions) && Object.keys(functions).every((declared) => declared === contractFunctionName)) delete rest.functions;
  if (Array.isArray(rest.secrets) && rest.secrets.every((secret) => secret === contractFunctionSecret)) delete rest.secrets;
  const { use: _declared, ...body } = named;
  return Object.keys(rest).length === 0 ? body : { ...body, use: rest };
}

/** Checks, lowers and schema-validates every pipeline and workflow (or only `name`); throws the first problem. */
export async function checkBundleWorkflows(compiled: CompiledBundle, name?: string): Promise<Map<string, BundleWorkflow>> {
  const all = workflowDocuments(compiled);
  if (name !== undefined && !all.has(name)) {
    const known = [...all.keys()];
    throw invalidInput(
      `bundle ${compiled.ref.id}@${compiled.ref.version} has no pipeline or workflow "${name}"${known.length > 0 ? ` (it has: ${known.join(', ')})` : ''}`,
    );
  }
  const selected = name === undefined ? all : new Map([[name, all.get(name) as BundleWorkflow]]);
  for (const workflow of selected.values())
    await validateDslDocument(workflow.document, workflow.kind === 'pipeline' ? `${workflow.pointer} (lowered)` : workflow.pointer);
  return selected;
}
