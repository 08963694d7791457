/**
 * Workflow identities (docs/workflows-executor.md), in the byte layout of operation ids
 * (src/contract/ids.ts): every part length-prefixed, never joined with a separator. Vectors,
 * computed independently of this code, are in test/vectors/workflow-ids.json.
 */
import { sha256Hex } from '../contract/canonical.js';
import { lengthPrefixed } from '../contract/ids.js';
import { invalidInput } from '../contract/errors.js';

/** `wf` + lowercase hex SHA-256 of lengthPrefixed([principalId, bundleDigest, workflowName, invocationKey]): 66 chars. */
export function workflowInstanceId(principalId: string, bundleDigest: string, workflowName: string, invocationKey: string): string {
  return 'wf' + sha256Hex(lengthPrefixed([principalId, bundleDigest, workflowName, invocationKey]));
}

export const workflowInstanceIdPattern = /^wf[0-9a-f]{64}$/;

export function isWorkflowInstanceId(value: string): boolean {
  return workflowInstanceIdPattern.test(value);
}

/** Where a stage's call sits: the task's JSON Pointer, the iteration index of each enclosing loop, and the DSL attempt. */
export interface StagePosition {
  /** The task's JSON Pointer reference in the workflow document (`/do/0/review`). */
  pointer: string;
  /** The index of each enclosing `for` iteration, outermost first; empty outside loops. */
  iterations: readonly number[];
  /**
   * 1 for the first logical invocation; a DSL `retry` after a failed business decision is a new
   * logical invocation (attempt 2, 3, …) with its own key. Transport retries keep the attempt.
   */
  attempt: number;
}

/**
 * A stage's invocation key: `wfs` + lowercase hex SHA-256 of lengthPrefixed([instanceKey, pointer,
 * iterations as decimals joined by '/', attempt in decimal]) (67 chars, within any key limit). A
 * pure function of where the call sits, so a recovered instance calls again under the same key
 * and finds the same operation.
 */
export function stageInvocationKey(instanceKey: string, position: StagePosition): string {
  const { pointer, iterations, attempt } = position;
  if (!pointer.startsWith('/')) throw invalidInput(`a stage's task reference must be a JSON Pointer, got ${JSON.stringify(pointer.slice(0, 80))}`);
  if (!iterations.every((index) => Number.isSafeInteger(index) && index >= 0)) throw invalidInput('iteration indexes must be non-negative integers');
  if (!Number.isSafeInteger(attempt) || attempt < 1) throw invalidInput(`a stage attempt must be a positive integer, got ${String(attempt)}`);
  return 'wfs' + sha256Hex(lengthPrefixed([instanceKey, pointer, iterations.join('/'), String(attempt)]));
}
