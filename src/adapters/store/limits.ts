/**
 * The store limits every adapter starts from, and the check that a configured override is sane.
 * Spec: record size and retention budgets are deployment capabilities with explicit limits.
 */
import { assert } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import type { StoreFailure, StoreLimits } from './types.js';
import { streamFamily } from './workflow-running.js';

/** Live plus tombstoned operations a store accepts before refusing new admissions. */
export const operationsMaxDefault = 1_000_000;

/** What a create of `streamId` would make, as a refusal names it: a workflow instance (`wf…`) or an operation. */
export function refusedCreates(streamId: string): 'new operations' | 'new workflow instances' {
  return streamFamily(streamId) === 'wf' ? 'new workflow instances' : 'new operations';
}

/** A create refused at the operation cap, naming what it would have made (refusedCreates): key history is never deleted to make room. */
export function capacityReached(operationsMax: number, streamId: string): StoreFailure {
  return {
    kind: 'unavailable',
    description: `store capacity of ${operationsMax} operations reached; ${refusedCreates(streamId)} are refused, key history is kept`,
  };
}

export function resolveStoreLimits(overrides: Partial<StoreLimits> | undefined): StoreLimits {
  const resolved: StoreLimits = {
    transitionBytesMax: limits.transitionBytesMax,
    operationsMax: operationsMaxDefault,
    transitionsMax: limits.transitionsStoredMax,
    ...overrides,
  };
  assert(Number.isSafeInteger(resolved.transitionBytesMax) && resolved.transitionBytesMax > 0, 'transitionBytesMax is a positive safe integer');
  assert(Number.isSafeInteger(resolved.operationsMax) && resolved.operationsMax > 0, 'operationsMax is a positive safe integer');
  assert(
    Number.isSafeInteger(resolved.transitionsMax) && resolved.transitionsMax > 0 && resolved.transitionsMax <= limits.transitionsStoredMax,
    `transitionsMax is a positive safe integer no larger than what a store reads back (${limits.transitionsStoredMax})`,
  );
  return resolved;
}
