/**
 * What both checkers of a workflow document (the bundle's, workflow/dsl/document.ts, and the
 * executor's, workflow/exec/document.ts) say alike: the workflow a `run: workflow` task names,
 * whether a document is that workflow, the call types convoke refuses, and what a flow directive
 * may name.
 */
import { invalidInput } from '../contract/errors.js';
import { isObject, type JsonValue } from '../contract/json.js';

const flowKeywords: ReadonlySet<string> = new Set(['continue', 'exit', 'end']);

/**
 * `then`: continue, exit, end, or a task of the same list (the DSL forbids jumps to another depth);
 * a switch case's with the list that holds the switch. Anything else is invalid-input at `where`.
 */
export function checkFlowDirective(value: JsonValue | undefined, siblings: ReadonlySet<string>, where: string): void {
  if (value === undefined || (typeof value === 'string' && (flowKeywords.has(value) || siblings.has(value)))) return;
  throw invalidInput(`${where}: the flow directive ${JSON.stringify(value)} names no task of its own list (nor continue, exit or end)`);
}

/** The workflow a `run: workflow` task names (`version` undefined for `latest`). */
export interface WorkflowRef {
  namespace: string;
  name: string;
  version: string | undefined;
}

/** Whether a document's header is the workflow a reference names (`name`: its name in a bundle, when given in place of the header's). */
export function namesWorkflow(document: JsonValue, ref: WorkflowRef, name?: string): boolean {
  const head = isObject(document) && isObject(document.document) ? document.document : undefined;
  return !!head && head.namespace === ref.namespace && (name ?? head.name) === ref.name && (ref.version === undefined || head.version === ref.version);
}

/** Call types convoke does not run: refused with `unsupported` before anything runs. */
export const refusedCallTypes: ReadonlySet<string> = new Set(['grpc', 'asyncapi', 'a2a', 'mcp']);
