/**
 * A bundle's pipelines and workflows as convoke's executor runs them, checked by the executor's
 * own document check (what it refuses when an instance starts: a function declared in
 * `use.functions`, a listen's `foreach.export`, …) when the bundle is read by a command or
 * deployed by `serve`, naming the workflow, so that no bundle validates, and no deployment holds, a
 * workflow no start can run. `run: workflow` resolves among the bundle's own, as it does for the
 * instances of a deployment. Where the bundle is read (checkedRunnableWorkflows), every jq
 * expression is compiled too: no instance faults on jq that does not compile.
 */
import type { CompiledBundle } from '../contract/bundle.js';
import { AdapterError, isAdapterError } from '../contract/errors.js';
import { executableDocument, workflowDocuments, type BundleWorkflow } from '../workflow/dsl/bundle.js';
import { checkDocument, isWorkflowNamed } from '../workflow/exec/document.js';
import { JqWorkerEvaluator, type ExpressionEvaluator } from '../workflow/exec/jq.js';
import { checkExpressionsCompile } from '../workflow/exec/jq-compile.js';

export type RunnableWorkflow = BundleWorkflow & { executable: BundleWorkflow['document'] };

/** Each pipeline and workflow of the bundle, by name, with the document the executor runs; throws the executor's first refusal. */
export function runnableWorkflows(compiled: CompiledBundle): Map<string, RunnableWorkflow> {
  const workflows = [...workflowDocuments(compiled).values()].map((workflow) => ({ ...workflow, executable: executableDocument(workflow) }));
  for (const workflow of workflows) {
    try {
      checkDocument(workflow.executable, (ref) => workflows.some((other) => isWorkflowNamed(other.executable, ref)));
    } catch (error) {
      if (!isAdapterError(error)) throw error;
      throw new AdapterError(error.kind, `${where(workflow, error.description ?? error.message)}`, { cause: error });
    }
  }
  return new Map(workflows.map((workflow) => [workflow.name, workflow]));
}

/**
 * runnableWorkflows, then every jq expression of each workflow compiled (jq-compile.ts: a syntax
 * error, an unknown function or variable would fault an instance only on reaching it), refused
 * naming the workflow and the pointer. With no evaluator given, one of a single worker is made for
 * the check and stopped after it.
 */
export async function checkedRunnableWorkflows(compiled: CompiledBundle, evaluator?: ExpressionEvaluator): Promise<Map<string, RunnableWorkflow>> {
  const workflows = runnableWorkflows(compiled);
  // Its worker starts at its first evaluation: none when every expression was compiled before.
  const own = evaluator === undefined ? new JqWorkerEvaluator({ workers: 1 }) : undefined;
  const jq = evaluator ?? (own as ExpressionEvaluator);
  try {
    for (const workflow of workflows.values()) {
      try {
        await checkExpressionsCompile(workflow.executable, jq);
      } catch (error) {
        if (!isAdapterError(error)) throw error;
        throw new AdapterError(error.kind, where(workflow, error.description ?? error.message), { cause: error });
      }
    }
  } finally {
    await own?.close();
  }
  return workflows;
}

/** The refusal named in the bundle: a workflow's pointers are the bundle's under its own; a pipeline's, its lowered document's. */
function where(workflow: BundleWorkflow, description: string): string {
  if (workflow.kind === 'pipeline') return `${workflow.pointer} (lowered) ${description}`;
  return description.startsWith('/') ? `${workflow.pointer}${description}` : `${workflow.pointer}: ${description}`;
}
