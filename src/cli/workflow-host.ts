/**
 * Workflow instances beside a deployment's coordinator, on its store: the executor, jq in its
 * worker, and the instance service the facades use. Each deployed bundle's pipelines and workflows
 * are checked and made standalone by the workflow language (workflow/dsl/bundle.ts); contract calls
 * go in-process through the coordinator (no socket).
 *
 * `createWorkflowHost` is the WorkflowHostFactory `convoke serve` hands to buildDeployment, and the
 * embedded demo's.
 */
import { randomInt } from 'node:crypto';
import type { EventStore } from '../adapters/store/types.js';
import type { BundleRegistry } from '../contract/bundle.js';
import type { Clock } from '../contract/clock.js';
import type { JsonObject, JsonValue } from '../contract/json.js';
import type { ContractRef } from '../contract/types.js';
import { seededRandom } from '../runtime/random.js';
import type { InvocationService } from '../runtime/service.js';
import type { WorkflowHosting } from '../runtime/workflow-service.js';
import { workflowDocuments } from '../workflow/dsl/bundle.js';
import { contractFunctionName, contractFunctionSecret } from '../workflow/dsl/contract-function.js';
import { WorkflowExecutor } from '../workflow/exec/executor.js';
import { WorkflowInstances, type WorkflowDefinition } from '../workflow/exec/instances.js';
import { JqWorkerEvaluator } from '../workflow/exec/jq.js';
import { workflowStreams } from '../workflow/exec/streams.js';

export interface WorkflowHostParts {
  coordinator: InvocationService;
  bundles: BundleRegistry;
  store: EventStore;
  clock: Clock;
  /** Seed of the retry jitter source (random when absent). */
  seed?: number;
  /** Where emitted CloudEvents go (recorded in the instance's log either way). */
  emit?: (event: JsonObject) => Promise<void>;
  /** The secrets workflows may read (config workflowSecrets, read at start-up). */
  secrets?: ReadonlyMap<string, JsonValue>;
}

export interface WorkflowHost extends WorkflowHosting {
  service: WorkflowInstances;
  executor: WorkflowExecutor;
}

export async function createWorkflowHost(parts: WorkflowHostParts): Promise<WorkflowHost> {
  const definitions = new Map<string, Map<string, WorkflowDefinition>>();
  const refs = new Map<string, ContractRef>();
  for (const compiled of parts.bundles.all()) {
    refs.set(compiled.digest, compiled.ref);
    const byName = new Map<string, WorkflowDefinition>();
    for (const [name, workflow] of workflowDocuments(compiled))
      byName.set(name, { document: executable(named(workflow.document, name)), cancellation: workflow.cancellation });
    definitions.set(compiled.digest, byName);
  }
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 2000 });
  const executor = new WorkflowExecutor({
    store: workflowStreams(parts.store),
    clock: parts.clock,
    random: seededRandom(parts.seed ?? randomInt(2 ** 31)),
    evaluator,
    invocations: parts.coordinator,
    ...(parts.emit ? { emit: parts.emit } : {}),
    ...(parts.secrets ? { secrets: parts.secrets } : {}),
  });
  const service = new WorkflowInstances({
    executor,
    bundleOf: (digest) => refs.get(digest),
    definition: (digest, name) => definitions.get(digest)?.get(name),
    operations: parts.coordinator,
  });
  return {
    service,
    executor,
    close: async () => {
      await executor.close();
      await evaluator.close();
    },
  };
}

/** An instance is named by its bundle's name for the workflow (the DSL document's own name may differ). */
function named(document: JsonObject, name: string): JsonObject {
  const head = document.document;
  if (head === null || typeof head !== 'object' || Array.isArray(head) || head.name === name) return document;
  return { ...document, document: { ...head, name } };
}

/**
 * The document as the executor runs it: the contract function's declaration (`use.functions`
 * invoke-contract, `use.secrets` convoke) is there for other engines — convoke's executor calls
 * contracts itself — so it is left out; everything else is the standalone document.
 */
export function executable(document: JsonObject): JsonValue {
  const use = document.use;
  if (use === null || typeof use !== 'object' || Array.isArray(use)) return document;
  const rest: JsonObject = { ...use };
  const functions = rest.functions;
  if (functions && typeof functions === 'object' && !Array.isArray(functions) && Object.keys(functions).every((name) => name === contractFunctionName))
    delete rest.functions;
  if (Array.isArray(rest.secrets) && rest.secrets.every((name) => name === contractFunctionSecret)) delete rest.secrets;
  const { use: _declared, ...body } = document;
  return Object.keys(rest).length === 0 ? body : { ...body, use: rest };
}
