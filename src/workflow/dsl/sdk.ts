/**
 * The Serverless Workflow SDK (@serverlessworkflow/sdk, pinned exactly to 1.0.3-alpha1: its
 * 1.0.1 release validates only `dsl: '1.0.0'`): the DSL's own JSON Schema check, and the Mermaid
 * flowchart. Loaded on first use, so a bundle without workflows never pays for it.
 *
 * Documents are handed to the SDK as plain objects. Its `Classes.Workflow.deserialize` rewrites
 * `listen.to.any: []` into `[[]]` (and then rejects the official example it came from), so convoke
 * parses the text itself (text.ts) and never goes through the SDK's classes.
 */
import { invalidInput } from '../../contract/errors.js';
import type { JsonObject } from '../../contract/json.js';

type Sdk = typeof import('@serverlessworkflow/sdk');
let loaded: Promise<Sdk> | undefined;
const sdk = (): Promise<Sdk> => (loaded ??= import('@serverlessworkflow/sdk'));

/** At most this many of the SDK's error lines are repeated in a description. */
const sdkErrorLinesMax = 12;

/** Throws invalid-input naming `where` when the document does not match the DSL's schema. */
export async function validateWithSdk(document: JsonObject, where: string): Promise<void> {
  const { validate } = await sdk();
  try {
    validate('Workflow', structuredClone(document));
  } catch (error) {
    throw invalidInput(`${where === '' ? 'workflow' : where}: not a valid Serverless Workflow 1.0.3 document: ${summarize(error)}`, error);
  }
}

/** The SDK's message, its per-pointer lines (the `oneOf` noise of the task union dropped), bounded. */
function summarize(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const lines = message
    .split('\n')
    .filter((l) => l.startsWith('- '))
    .map((l) =>
      l
        .slice(2)
        .split(' | ')
        .filter((_, i) => i !== 1 && i !== 3)
        .join(' '),
    );
  const useful = lines.filter((l) => !/must have required property|must match exactly one schema in oneOf|must match a schema in anyOf/.test(l));
  const shown = (useful.length > 0 ? useful : lines).slice(0, sdkErrorLinesMax);
  if (shown.length === 0) return message.split('\n')[0] ?? 'invalid';
  const more = (useful.length > 0 ? useful : lines).length - shown.length;
  return shown.join('; ') + (more > 0 ? `; (${more} more)` : '');
}

/** The document as a Mermaid flowchart (the SDK's converter). */
export async function mermaidOf(document: JsonObject): Promise<string> {
  const { convertToMermaidCode } = await sdk();
  return convertToMermaidCode(structuredClone(document) as Parameters<Sdk['convertToMermaidCode']>[0]);
}
