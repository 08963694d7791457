/**
 * A workflow index row for tests that write or read the index directly: instance `n`'s ids
 * (`wf` and n in hex, key `k<n>`), principal alice, a running instance of no task, lease, error or
 * child, revision 1 — each field overridable.
 */
import type { WorkflowIndexRow } from '../../src/events/workflow-index.js';

export function workflowRowOf(n: number, fields: Partial<WorkflowIndexRow> = {}): WorkflowIndexRow {
  return {
    instanceId: `wf${n.toString(16).padStart(64, '0')}`,
    principalId: 'alice',
    workflowName: 'w',
    bundleDigest: 'sha256:' + '0'.repeat(64),
    invocationKey: `k${n}`,
    status: 'running',
    startedAtMs: 0,
    endedAtMs: null,
    deadlineMs: null,
    currentTask: null,
    nextDueMs: null,
    lease: null,
    lastError: null,
    childOperationIds: [],
    childOperations: 0,
    parent: null,
    revision: '1',
    ...fields,
  };
}
