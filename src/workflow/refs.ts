/**
 * What both checkers of a workflow document (the bundle's, workflow/dsl/document.ts, and the
 * executor's, workflow/exec/document.ts) say alike: the workflow a `run: workflow` task names,
 * whether a document is that workflow, and the call types convoke refuses.
 */
import { isObject, type JsonValue } from '../contract/json.js';

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
