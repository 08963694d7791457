/**
 * A document checked against the Serverless Workflow DSL 1.0.3 JSON Schema: the official schema,
 * vendored (schema/workflow-1.0.3.ts, Apache-2.0), compiled once on first use with Ajv's draft
 * 2020-12 validator and ajv-formats — the same check, with the same options, that
 * @serverlessworkflow/sdk 1.0.3-alpha1's `validate('Workflow', …)` makes, including its refusal of
 * any `document.dsl` other than 1.0.3 (test/workflow/dsl-schema.test.ts holds the two to the same
 * verdicts).
 *
 * Why not that SDK: it is the only release whose validation accepts 1.0.3, and it declares
 * `engines: node >= 22`, so depending on it made every install on Node 20 warn (EBADENGINE).
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { invalidInput } from '../../contract/errors.js';
import type { JsonObject } from '../../contract/json.js';
import { workflowDslVersion } from '../version.js';

let compiled: Promise<ValidateFunction> | undefined;

/** The schema and Ajv are loaded and compiled on first use, so a bundle without workflows never pays for them. */
async function compile(): Promise<ValidateFunction> {
  const [{ Ajv2020 }, formats, { workflowSchema }] = await Promise.all([
    import('ajv/dist/2020.js'),
    import('ajv-formats'),
    import('./schema/workflow-1.0.3.js'),
  ]);
  // Not strict, as the SDK: strict mode refuses the schema (`unevaluatedProperties` beside no `type`).
  const ajv = new Ajv2020({ strict: false });
  formats.default.default(ajv);
  return ajv.compile(workflowSchema);
}

/** At most this many schema errors are repeated in a description. */
const schemaErrorLinesMax = 12;

/** Throws invalid-input naming `where` when the document does not match the DSL 1.0.3 schema. */
export async function validateDslDocument(document: JsonObject, where: string): Promise<void> {
  const subject = where === '' ? 'workflow' : where;
  const dsl = (document.document as JsonObject | undefined)?.dsl;
  if (dsl !== workflowDslVersion) {
    throw invalidInput(
      `${subject}: not a valid Serverless Workflow ${workflowDslVersion} document: document.dsl is ${JSON.stringify(dsl)}, not '${workflowDslVersion}'`,
    );
  }
  const validate = await (compiled ??= compile());
  if (!validate(document)) {
    throw invalidInput(`${subject}: not a valid Serverless Workflow ${workflowDslVersion} document: ${summarize(validate.errors ?? [])}`);
  }
}

/**
 * Each error as "pointer message", once (each branch of the task union that a task fails repeats
 * it), the `oneOf`/`anyOf` noise of that union dropped when something else is left, bounded.
 */
export function summarize(errors: readonly ErrorObject[]): string {
  const lines = [...new Set(errors.map((e) => `${e.instancePath === '' ? 'the document' : e.instancePath} ${e.message ?? 'is invalid'}`))];
  const useful = lines.filter((l) => !/must have required property|must match exactly one schema in oneOf|must match a schema in anyOf/.test(l));
  const kept = useful.length > 0 ? useful : lines;
  const shown = kept.slice(0, schemaErrorLinesMax);
  if (shown.length === 0) return 'invalid';
  const more = kept.length - shown.length;
  return shown.join('; ') + (more > 0 ? `; (${more} more)` : '');
}
