/**
 * Pipelines: the spec's sequential syntax, checked against the bundle it is pinned in and
 * planned stage by stage (what flows in, what is sent, what flows out). lower.ts turns a plan
 * into a Serverless Workflow document.
 *
 * A stage's input is the pipeline input (first stage) or the previous stage's output; its named
 * transform, if any, applies first; then `stageInput` (a JSON Pointer, the whole value when
 * absent) selects the invocation input. An interaction stage's output is the interaction's typed
 * output (`output` with an `aggregate`; null without one); an operation stage's output is its
 * input, passed on. Every schema on the way must be compatible with the next (schema-compat.ts),
 * or a transform bridges them.
 */
import type { CompiledBundle } from '../../contract/bundle.js';
import { invalidInput } from '../../contract/errors.js';
import { jsonPointer } from '../../contract/ijson.js';
import type { JsonObject, JsonValue } from '../../contract/json.js';
import type { Pipeline, PipelineStage, WaitFor } from '../../contract/types.js';
import { compileApplicationSchema } from '../../contract/validation.js';
import { checkDeterministicJq } from '../jq-determinism.js';
import { schemaAt, schemaIncompatibility } from './schema-compat.js';

/** What a planned stage does. */
export type StagePlan = {
  name: string;
  /** The transform applied to the stage input first, if any. */
  transform?: { name: string; expression: string; input: JsonObject; output: JsonObject };
} & (
  | { kind: 'interaction'; interaction: string; waitFor: WaitFor; inputPath: (string | number)[] }
  | { kind: 'send'; subject: string; type: string; payloadPath: (string | number)[] }
);

/** A NATS subject a stage sends on: literal tokens, no wildcards. */
const literalSubject = /^[^\s.*>]+(\.[^\s.*>]+)*$/;

/** The schema of null: the output of an interaction without a typed `output`. */
const nullSchema: JsonObject = { type: 'null' };

interface Flow {
  /** The schema of the value flowing into the next stage, and what to call it in messages. */
  schema: JsonValue;
  what: string;
  /** Whether `schema` is a whole document, not a part selected out of one (its references resolve in it). */
  whole: boolean;
}

/** Checks a pipeline against its bundle and plans it; throws invalid-input naming a JSON Pointer. */
export function planPipeline(compiled: CompiledBundle, name: string, pipeline: Pipeline): StagePlan[] {
  const base = jsonPointer(['pipelines', name]);
  compileApplicationSchema(pipeline.input, `${base}/input`);
  for (const [id, transform] of Object.entries(pipeline.transforms ?? {})) {
    const where = `${base}${jsonPointer(['transforms', id])}`;
    compileApplicationSchema(transform.input, `${where}/input`);
    compileApplicationSchema(transform.output, `${where}/output`);
    checkDeterministicJq(transform.expression, `${where}/expression`);
    if (/[\r\n]/.test(transform.expression)) {
      // It becomes `set: ${ … }`, and the DSL's runtime-expression pattern does not span lines.
      throw invalidInput(`${where}/expression: write the expression on one line (the DSL's \${ … } form does not span lines)`);
    }
  }
  const seen = new Set<string>();
  let flow: Flow = { schema: pipeline.input, what: 'the pipeline input', whole: true };
  const plans: StagePlan[] = [];
  pipeline.stages.forEach((stage, index) => {
    const where = `${base}/stages/${index}`;
    if (seen.has(stage.name)) throw invalidInput(`${where}/name: stage name "${stage.name}" is used twice in pipeline "${name}"`);
    seen.add(stage.name);
    const planned = planStage(compiled, pipeline, stage, flow, where);
    plans.push(planned.plan);
    flow = planned.next;
  });
  return plans;
}

function planStage(compiled: CompiledBundle, pipeline: Pipeline, stage: PipelineStage, incoming: Flow, where: string): { plan: StagePlan; next: Flow } {
  if ((stage.interaction === undefined) === (stage.operation === undefined)) {
    throw invalidInput(`${where}: stage "${stage.name}" must have exactly one of "interaction" and "operation"`);
  }
  let flow = incoming;
  let transform: StagePlan['transform'];
  if (stage.transform !== undefined) {
    const declared = pipeline.transforms?.[stage.transform];
    if (!declared || !Object.prototype.hasOwnProperty.call(pipeline.transforms, stage.transform)) {
      throw invalidInput(`${where}/transform: the pipeline declares no transform "${stage.transform}"`);
    }
    requireCompatible(flow, { schema: declared.input, what: `the input of transform "${stage.transform}"`, whole: true }, `${where}/transform`);
    transform = { name: stage.transform, expression: declared.expression, input: declared.input, output: declared.output };
    flow = { schema: declared.output, what: `the output of transform "${stage.transform}"`, whole: true };
  }
  if (stage.operation !== undefined) return planSend(stage, flow, where, transform);
  return planInteraction(compiled, stage, flow, where, transform);
}

function planInteraction(
  compiled: CompiledBundle,
  stage: PipelineStage,
  flow: Flow,
  where: string,
  transform: StagePlan['transform'],
): { plan: StagePlan; next: Flow } {
  const id = stage.interaction as string;
  const interaction = compiled.interactions.get(id);
  if (!interaction) throw invalidInput(`${where}/interaction: contract ${compiled.ref.id}@${compiled.ref.version} has no interaction "${id}"`);
  const spec = interaction.spec;
  if (spec.waitFor === 'settled' && stage.waitFor === 'decision') {
    throw invalidInput(`${where}/waitFor: interaction "${id}" waits for "settled"; a stage may strengthen the boundary, never weaken it to "decision"`);
  }
  const selected = select(flow, stage.stageInput ?? '', `${where}/stageInput`);
  requireCompatible(
    selected.flow,
    { schema: spec.input, what: `the input of interaction "${id}"`, whole: true },
    stage.stageInput !== undefined ? `${where}/stageInput` : where,
  );
  const output = spec.aggregate && spec.output ? spec.output : nullSchema;
  return {
    plan: {
      name: stage.name,
      ...(transform ? { transform } : {}),
      kind: 'interaction',
      interaction: id,
      waitFor: stage.waitFor ?? spec.waitFor,
      inputPath: selected.path,
    },
    next: {
      schema: output,
      what: `the output of stage "${stage.name}" (interaction "${id}": ${spec.aggregate && spec.output ? 'its output schema' : 'null, it declares no aggregate output'})`,
      whole: true,
    },
  };
}

function planSend(stage: PipelineStage, flow: Flow, where: string, transform: StagePlan['transform']): { plan: StagePlan; next: Flow } {
  const operation = stage.operation as NonNullable<PipelineStage['operation']>;
  if (operation.action === 'subscribe') {
    throw invalidInput(
      `${where}/operation/action: stage "${stage.name}" subscribes: an unbounded subscribe never completes, so it is never a finite stage (a finite stage sends; to wait for messages, write a workflow with "listen")`,
    );
  }
  if (!literalSubject.test(operation.subject)) {
    throw invalidInput(
      `${where}/operation/subject: ${JSON.stringify(operation.subject)} is not a literal NATS subject (dot-separated tokens, no wildcards, no spaces)`,
    );
  }
  if (stage.stageInput !== undefined || stage.waitFor !== undefined) {
    throw invalidInput(`${where}: stage "${stage.name}" sends a message: it binds its payload with operation.payload and has no "stageInput" or "waitFor"`);
  }
  const payload = select(flow, operation.payload ?? '', `${where}/operation/payload`);
  return {
    plan: { name: stage.name, ...(transform ? { transform } : {}), kind: 'send', subject: operation.subject, type: operation.type, payloadPath: payload.path },
    next: { schema: flow.schema, what: `the output of stage "${stage.name}" (its input, passed on)`, whole: flow.whole },
  };
}

function select(flow: Flow, pointer: string, where: string): { flow: Flow; path: (string | number)[] } {
  const found = schemaAt(flow.schema, pointer);
  if ('problem' in found) throw invalidInput(`${where}: ${JSON.stringify(pointer)} does not select a value every one of ${flow.what} has: ${found.problem}`);
  const what = pointer === '' ? flow.what : `${JSON.stringify(pointer)} of ${flow.what}`;
  return { flow: { schema: found.schema, what, whole: pointer === '' && flow.whole }, path: found.path };
}

function requireCompatible(from: Flow, to: Flow, where: string): void {
  const problem = schemaIncompatibility(from.schema, to.schema, '', from.whole && to.whole);
  if (!problem) return;
  const at = problem.at === '' ? '' : ` at ${problem.at}`;
  throw invalidInput(
    `${where}: ${from.what} is not compatible with ${to.what}${at}: ${problem.reason}; declare a transform (with its own input and output schemas) that bridges them`,
  );
}
