/**
 * A command reply too large for the NATS server's max_payload, carried without its large members.
 * The command behind it was carried out (an invoke admitted, a cancel recorded, an instance
 * started): answering an error instead would tell the caller it was refused. So the reply keeps its
 * status and what identifies and summarizes the operation or instance (id, phase or status,
 * decision, settlement status), leaves out the large members, and says so in `omitted`: which
 * members, the full reply's size, the server's max_payload, and where the whole is read (HTTP; the
 * NATS commands have no smaller projection). A client reads a member named in `omitted.members` as
 * unknown, never as absent or null.
 *
 * Each reply shape has its reductions, smallest last: first the payloads (an operation's output and
 * its peers' results; an instance's output), then the lists that grow with the work (branches,
 * siblings, stages, child instances) and the errors.
 */
import { adapterErrorSchema, invocationResultSchema } from '../contract/schemas.js';
import type { InvocationResult } from '../projections/views.js';
import { workflowInstanceSchema, type WorkflowInstance } from '../runtime/workflow-service.js';

/** What a reduced reply left out, and why. */
export interface ReplyOmission {
  /** The members left out, as paths in the reply's result or instance (`output`, `branches[].result`, …). */
  members: string[];
  /** The size of the full reply in bytes, past the server's max_payload. */
  replyBytes: number;
  /** The NATS server's max_payload in bytes. */
  maxPayload: number;
  /** Where the full record is read: `GET /contract-invocations/<operationId>` or `GET /workflow-instances/<instanceId>`. */
  read: string;
}

export const replyOmissionSchema = {
  type: 'object',
  required: ['members', 'replyBytes', 'maxPayload', 'read'],
  additionalProperties: false,
  properties: {
    members: { type: 'array', minItems: 1, items: { type: 'string' } },
    replyBytes: { type: 'integer', minimum: 0 },
    maxPayload: { type: 'integer', minimum: 0 },
    read: { type: 'string' },
  },
} as const;

/** An InvocationResult without its large members: the ones `omitted.members` names are left out. */
export type ReducedInvocationResult = Omit<InvocationResult, 'output' | 'outputError' | 'branches' | 'settlement'> & {
  outputError?: InvocationResult['outputError'];
  settlement: Pick<InvocationResult['settlement'], 'status'> & Partial<Pick<InvocationResult['settlement'], 'siblings'>>;
  branches?: InvocationResult['branches'];
};

/** A WorkflowInstance without its large members: the ones `omitted.members` names are left out. */
export type ReducedWorkflowInstance = Omit<WorkflowInstance, 'output' | 'error' | 'stages' | 'childInstances'> &
  Partial<Pick<WorkflowInstance, 'error' | 'stages' | 'childInstances'>>;

const { $id: _resultId, ...resultShape } = invocationResultSchema;
const { $id: _errorId, ...errorShape } = adapterErrorSchema;
const resultLeftOut: readonly string[] = ['output', 'outputError', 'branches'];

/**
 * The InvocationResult schema with the members a reduction may leave out no longer required (its
 * output error without the error schema's $id: a reply schema holding the full result too would
 * name that $id twice, which ajv refuses as ambiguous).
 */
export const reducedInvocationResultSchema = {
  ...resultShape,
  required: resultShape.required.filter((member) => !resultLeftOut.includes(member)),
  properties: {
    ...resultShape.properties,
    settlement: { ...resultShape.properties.settlement, required: ['status'] },
    outputError: { anyOf: [{ type: 'null' }, errorShape] },
  },
} as const;

const instanceLeftOut: readonly string[] = ['output', 'error', 'stages', 'childInstances'];

/** The WorkflowInstance schema with the members a reduction may leave out no longer required. */
export const reducedWorkflowInstanceSchema = {
  ...workflowInstanceSchema,
  required: workflowInstanceSchema.required.filter((member) => !instanceLeftOut.includes(member)),
} as const;

export interface Reduction<T> {
  members: string[];
  value: T;
}

/** The result without its payloads, then without its lists and output error too. */
export function invocationResultReductions(result: InvocationResult): Reduction<ReducedInvocationResult>[] {
  const { output: _output, outputError, branches, settlement, ...identity } = result;
  return [
    {
      members: ['output', 'branches[].result'],
      value: { ...identity, settlement, outputError, branches: branches.map(({ result: _result, ...branch }) => branch) },
    },
    {
      members: ['output', 'outputError', 'branches', 'settlement.siblings'],
      value: { ...identity, settlement: { status: settlement.status } },
    },
  ];
}

/** The instance without its output, then without its stages, child instances and error too. */
export function workflowInstanceReductions(instance: WorkflowInstance): Reduction<ReducedWorkflowInstance>[] {
  const { output: _output, error, stages, childInstances, ...identity } = instance;
  return [
    { members: ['output'], value: { ...identity, error, stages, childInstances } },
    { members: ['output', 'error', 'stages', 'childInstances'], value: identity },
  ];
}

/** Where the full record of an operation is read. */
export const operationReadPath = (operationId: string): string => `GET /contract-invocations/${operationId}`;
/** Where the full record of a workflow instance is read. */
export const instanceReadPath = (instanceId: string): string => `GET /workflow-instances/${instanceId}`;
