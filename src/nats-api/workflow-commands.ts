/**
 * Workflow instances over NATS commands: `convoke.cmd.<principal>.workflow-start`,
 * `…workflow-get` and `…workflow-cancel`, beside the operation commands (commands.ts subscribes
 * them when the deployment hosts workflow instances) and with the same rules: the principal is the
 * subject's second token, proven by the broker's publish permission; bodies are strictly parsed and
 * validated without coercion; statuses are HTTP's (200 ended, 202 running, 404 for another
 * principal's instance or none, 409 a different input under the key, 422 unsupported cancel).
 *
 * Bodies: workflow-start is POST /workflow-instances' body; workflow-get `{instanceId, waitMs?}`;
 * workflow-cancel `{instanceId}`; workflow-list GET /workflow-instances' parameters as a JSON
 * object (`{status?, workflow?, since?, until?, limit?, cursor?, stuck?}`: the caller's own
 * instances, every principal's for an operator). Replies: `{"status": 200|202, "instance":
 * WorkflowInstance}`, for workflow-list `{"status": 200, "page": {instances, nextCursor}}`, or
 * `{"status": <HTTP status>, "error": AdapterError}`; an instance too large for the server's
 * max_payload is answered without its large members, named in `omitted` (omitted.ts).
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { invalidInput, type AdapterErrorBody } from '../contract/errors.js';
import { parseStrictBody } from '../contract/ijson.js';
import { limits } from '../contract/limits.js';
import { adapterErrorSchema } from '../contract/schemas.js';
import { describeErrors } from '../contract/validation.js';
import type { Transport } from '../adapters/transport/types.js';
import { parseWorkflowListParameters, type WorkflowListPage } from '../runtime/workflow-list.js';
import { requestCommand } from './request.js';
import { outputResultLevels } from '../projections/views.js';
import {
  workflowInstanceSchema,
  workflowStartRequestLevels,
  workflowStartRequestSchema,
  type WorkflowInstance,
  type WorkflowInstanceService,
  type WorkflowStartRequest,
} from '../runtime/workflow-service.js';
import type { WaitSlots } from '../runtime/wait-slots.js';
import { reducedWorkflowInstanceSchema, replyOmissionSchema, type ReducedWorkflowInstance, type ReplyOmission } from './omitted.js';

export const workflowCommandVerbs = ['workflow-start', 'workflow-get', 'workflow-cancel', 'workflow-list'] as const;
export type WorkflowCommandVerb = (typeof workflowCommandVerbs)[number];

export type WorkflowReply =
  | { status: 200 | 202; instance: WorkflowInstance }
  /** A reply past the server's max_payload, without the members `omitted` names (omitted.ts). */
  | { status: 200 | 202; instance: ReducedWorkflowInstance; omitted: ReplyOmission }
  | { status: number; error: AdapterErrorBody };
/** The `workflow-list` command's reply: a page of the workflow instances index (as GET /workflow-instances answers). */
export type WorkflowListReply = { status: 200; page: WorkflowListPage } | { status: number; error: AdapterErrorBody };

export interface WorkflowGetCommand {
  instanceId: string;
  waitMs?: number;
}

const ajv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true, coerceTypes: false, removeAdditional: false, useDefaults: false });
const instanceIdSchema = { type: 'string', minLength: 1, maxLength: 100 } as const;
const { $id: _errorId, ...errorShape } = adapterErrorSchema;

export const workflowGetCommandSchema = {
  type: 'object',
  required: ['instanceId'],
  additionalProperties: false,
  properties: { instanceId: instanceIdSchema, waitMs: { type: 'integer', minimum: 0, maximum: limits.waitMsMax } },
} as const;

export const workflowCancelCommandSchema = {
  type: 'object',
  required: ['instanceId'],
  additionalProperties: false,
  properties: { instanceId: instanceIdSchema },
} as const;

export const workflowReplySchema = {
  oneOf: [
    {
      type: 'object',
      required: ['status', 'instance'],
      additionalProperties: false,
      properties: { status: { enum: [200, 202] }, instance: workflowInstanceSchema },
    },
    {
      type: 'object',
      required: ['status', 'error'],
      additionalProperties: false,
      properties: { status: { type: 'integer', minimum: 400, maximum: 599 }, error: errorShape },
    },
    {
      type: 'object',
      required: ['status', 'instance', 'omitted'],
      additionalProperties: false,
      properties: { status: { enum: [200, 202] }, instance: reducedWorkflowInstanceSchema, omitted: replyOmissionSchema },
    },
  ],
} as const;

/**
 * The levels a workflow reply holds a value below its root: an instance's output, at
 * `instance.output` (2), which the executor holds to the levels of a contract call's answer (its
 * outputLevels: the contract's output one level down, a peer's result outputResultLevels further),
 * a fork's or a listen's list of outputs included. Every output an instance completes with is read.
 */
export const workflowReplyLevels = 2 + 1 + outputResultLevels;

const validators: Record<WorkflowCommandVerb, ValidateFunction> = {
  'workflow-start': ajv.compile(workflowStartRequestSchema),
  'workflow-get': ajv.compile(workflowGetCommandSchema),
  'workflow-cancel': ajv.compile(workflowCancelCommandSchema),
  // The parameters themselves are checked by the one parser every facade uses.
  'workflow-list': ajv.compile({ type: 'object' }),
};
const validateReply = ajv.compile(workflowReplySchema);
const validateListReply = ajv.compile({
  oneOf: [
    {
      type: 'object',
      required: ['status', 'page'],
      additionalProperties: false,
      properties: {
        status: { const: 200 },
        page: {
          type: 'object',
          required: ['instances', 'nextCursor'],
          additionalProperties: false,
          properties: { instances: { type: 'array', items: { type: 'object' } }, nextCursor: { type: ['string', 'null'] } },
        },
      },
    },
    workflowReplySchema.oneOf[1],
  ],
});

export const isWorkflowCommandVerb = (verb: string): verb is WorkflowCommandVerb => (workflowCommandVerbs as readonly string[]).includes(verb);

/** The levels each command's body adds above the value it carries (none but a start's input). */
const bodyLevels: Record<WorkflowCommandVerb, number> = {
  'workflow-start': workflowStartRequestLevels,
  'workflow-get': 0,
  'workflow-cancel': 0,
  'workflow-list': 0,
};

function checkBody<T>(verb: WorkflowCommandVerb, data: Uint8Array): T {
  const value = parseStrictBody(data, `${verb} command body`, bodyLevels[verb]);
  const validate = validators[verb];
  if (!validate(value)) throw invalidInput(`${verb} command body: ${describeErrors(validate.errors)}`);
  return value as T;
}

export interface WorkflowCommandContext {
  workflows: WorkflowInstanceService;
  /** The longest wait a command may ask for; longer waitMs values are clamped. */
  waitMsMax: number;
  /** The waits each principal holds at once (shared with the operation commands). */
  waits: WaitSlots;
  /** Aborts a wait in progress (shutdown): the instance is answered as it is then. */
  signal: AbortSignal;
}

/** One workflow command, from body bytes (already size-checked) to reply; throws what commandErrorReply maps. */
export async function handleWorkflowCommand(
  context: WorkflowCommandContext,
  verb: WorkflowCommandVerb,
  principalId: string,
  data: Uint8Array,
): Promise<WorkflowReply | WorkflowListReply> {
  const { workflows } = context;
  const waitFor = async (instance: WorkflowInstance, waitMs: number | undefined): Promise<WorkflowReply | WorkflowListReply> => {
    const bounded = Math.min(waitMs ?? 0, context.waitMsMax);
    const current =
      instance.status === 'running' && bounded > 0 && !context.signal.aborted
        ? (await context.waits.bounded(principalId, bounded, (granted) => workflows.wait(principalId, instance.instanceId, granted, context.signal))).instance
        : instance;
    return { status: current.status === 'running' ? 202 : 200, instance: current };
  };
  switch (verb) {
    case 'workflow-start': {
      const { waitMs, ...request } = checkBody<WorkflowStartRequest>(verb, data);
      return waitFor((await workflows.start(principalId, request)).instance, waitMs);
    }
    case 'workflow-get': {
      const body = checkBody<WorkflowGetCommand>(verb, data);
      return waitFor(await workflows.get(principalId, body.instanceId), body.waitMs);
    }
    case 'workflow-cancel': {
      const body = checkBody<{ instanceId: string }>(verb, data);
      // Ended when cancel returns (it asserts so): cancelled now, or as it ended before.
      return { status: 200, instance: await workflows.cancel(principalId, body.instanceId) };
    }
    case 'workflow-list': {
      // Visibility is the service's: its own instances, or every one for an operator principal.
      const body = checkBody<Record<string, unknown>>(verb, data);
      return { status: 200, page: await workflows.list(principalId, parseWorkflowListParameters(body)) };
    }
    default: {
      const unreachable: never = verb;
      return unreachable;
    }
  }
}

// ── the client side ─────────────────────────────────────────────────────────

/**
 * Sends one workflow command and checks the reply's shape. A transport failure is thrown as an
 * AdapterError ('unavailable'): a start's outcome is then unknown, and the caller sends it again
 * with the same invocationKey (it finds the same instance) or gets the instance.
 */
export async function sendWorkflowCommand(
  transport: Transport,
  principalId: string,
  verb: Exclude<WorkflowCommandVerb, 'workflow-list'>,
  body: unknown,
  timeoutMs: number,
): Promise<WorkflowReply> {
  return requestCommand<WorkflowReply>(transport, principalId, verb, body, timeoutMs, validateReply, 'workflow reply', workflowReplyLevels);
}

/** Sends `workflow-list` with list parameters (GET /workflow-instances' names) and checks the reply's shape. */
export async function sendWorkflowList(
  transport: Transport,
  principalId: string,
  parameters: Record<string, unknown>,
  timeoutMs: number,
): Promise<WorkflowListReply> {
  return requestCommand<WorkflowListReply>(transport, principalId, 'workflow-list', parameters, timeoutMs, validateListReply, 'workflow-list reply', 0);
}
