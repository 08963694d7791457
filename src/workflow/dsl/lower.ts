/**
 * Lowering: a pipeline becomes a Serverless Workflow 1.0.3 document, deterministically (the same
 * bundle gives a byte-identical canonical document: everything below is a function of the
 * bundle, in declaration order).
 *
 *   do:
 *     - review:                       # one `do` task per stage, named as the stage
 *         do:
 *           - transform:              # the stage's named transform, if any: a `set` task that
 *               input: {schema}       #   the DSL itself validates against the transform's schemas
 *               output: {schema}
 *               set: ${ <jq> }
 *           - invoke:                 # the contract function (contract-function.ts): stop-on-failure,
 *               call: invoke-contract #   since anything but a success decision (and a complete
 *               with: {contract: {id, version, digest}, interaction, input: ${ getpath([…]) }, waitFor}
 *                                     #   settlement when settled is the boundary) raises a typed
 *                                     #   error, which ends the pipeline faulted
 *           - output:
 *               set: ${ .output }     # the stage's output: the interaction's typed output
 *
 * A send stage is a `do` of the transform, if any, and an `emit` of a CloudEvent whose `subject` is
 * the NATS subject and whose data is the bound payload; its output is its input, passed on.
 */
import type { CompiledBundle } from '../../contract/bundle.js';
import type { JsonObject, JsonValue } from '../../contract/json.js';
import type { Pipeline } from '../../contract/types.js';
import { workflowDslVersion } from '../version.js';
import { contractFunctionDefinition, contractFunctionName, contractFunctionSecret } from './contract-function.js';
import { planPipeline, type StagePlan } from './pipeline.js';

const semver =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

/** A DSL namespace (an RFC 1123 label) from a contract id: `.` and `_` become `-`. */
export function namespaceOf(contractId: string): string {
  const label = contractId
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 63)
    .replace(/-$/, '');
  return label === '' ? 'convoke' : label;
}

/** A jq expression for the value at `path` (`.` for the whole value). */
function jqPath(path: (string | number)[]): string {
  return path.length === 0 ? '${ . }' : `\${ getpath(${JSON.stringify(path)}) }`;
}

const schemaOf = (document: JsonObject): JsonObject => ({ schema: { format: 'json', document } });

/** Lowers a planned, checked pipeline of `compiled` to a standalone Serverless Workflow document. */
export function lowerPipeline(compiled: CompiledBundle, name: string, pipeline: Pipeline): JsonObject {
  const plans = planPipeline(compiled, name, pipeline);
  const { id, version, digest } = compiled.ref;
  const header: JsonObject = {
    dsl: workflowDslVersion,
    namespace: namespaceOf(id),
    name,
    version: semver.test(version) ? version : '0.0.0',
    ...(pipeline.description !== undefined ? { summary: pipeline.description } : {}),
    metadata: { convoke: { contract: { id, version, digest }, pipeline: name } },
  };
  const callsContract = plans.some((p) => p.kind === 'interaction');
  const document: JsonObject = {
    document: header,
    input: schemaOf(pipeline.input),
    ...(callsContract
      ? { use: { functions: { [contractFunctionName]: structuredClone(contractFunctionDefinition) }, secrets: [contractFunctionSecret] } }
      : {}),
    do: plans.map((plan) => ({ [plan.name]: { do: stageTasks(compiled, name, plan) } })),
  };
  return document;
}

function stageTasks(compiled: CompiledBundle, pipeline: string, plan: StagePlan): JsonValue[] {
  const tasks: JsonValue[] = [];
  if (plan.transform) {
    tasks.push({ transform: { input: schemaOf(plan.transform.input), output: schemaOf(plan.transform.output), set: `\${ ${plan.transform.expression} }` } });
  }
  if (plan.kind === 'send') {
    const source = `https://convoke.dev/contracts/${encodeURIComponent(compiled.ref.id)}/pipelines/${pipeline}`;
    const event = { source, type: plan.type, subject: plan.subject, datacontenttype: 'application/json', data: jqPath(plan.payloadPath) };
    tasks.push({ send: { emit: { event: { with: event } }, output: { as: '${ $input }' } } });
    return tasks;
  }
  const { id, version, digest } = compiled.ref;
  tasks.push({
    invoke: {
      call: contractFunctionName,
      with: { contract: { id, version, digest }, interaction: plan.interaction, input: jqPath(plan.inputPath), waitFor: plan.waitFor },
    },
  });
  tasks.push({ output: { set: '${ .output }' } });
  return tasks;
}
