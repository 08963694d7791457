/**
 * One event of each type that binds or disposes of a child: a contract call's child operation at
 * `/do/1/c` (op-1) and a child workflow instance at `/do/2/s` (child-1), each disposal naming the
 * child bound there. Their refs, iterations and attempts are distinct, so a record copying the
 * wrong member shows.
 */
import type { WorkflowEvent } from '../../src/workflow/exec/events.js';

export const childBound: WorkflowEvent = {
  type: 'child-bound',
  v: 1,
  at: '/do/1/c',
  ref: '/do/1/c#ref',
  operationId: 'op-1',
  invocationKey: 'k1',
  iterations: [2],
  attempt: 3,
};
export const childDisposed: WorkflowEvent = {
  type: 'child-disposed',
  v: 1,
  at: '/do/1/c',
  fork: '/do/9/f',
  operationId: 'op-1',
  disposition: 'detached',
  detail: 'lost the race',
};
export const subworkflowBound: WorkflowEvent = {
  type: 'subworkflow-bound',
  v: 1,
  at: '/do/2/s',
  ref: '/do/2/s#ref',
  instanceId: 'child-1',
  invocationKey: 'k2',
  workflow: 'sub',
  iterations: [1],
  attempt: 2,
};
export const subworkflowDisposed: WorkflowEvent = {
  type: 'subworkflow-disposed',
  v: 1,
  at: '/do/2/s',
  instanceId: 'child-1',
  by: '/do/2/s@timeout',
  disposition: 'cancelled',
  detail: 'timed out',
};
