/**
 * The contract function: how a workflow calls a contract.
 *
 *   - review:
 *       call: invoke-contract
 *       with:
 *         contract: { id, version, digest }
 *         interaction: review
 *         input: ${ .document }
 *         waitFor: settled            # optional: at least the interaction's boundary
 *         invocationKey: ...          # optional: by default the executor derives it
 *
 * convoke's executor runs the call itself (embedded through the facade code, distributed over
 * HTTP with bounded polling). So that every document convoke validates or prints is also valid
 * standalone Serverless Workflow 1.0.3, the document declares the function in
 * `use.functions.invoke-contract` as the standard call another engine would make: an HTTP POST of
 * an InvocationRequest to `<endpoint>/contract-invocations`, the endpoint and the bearer
 * credential taken from the secret `convoke` (a reference, never a value in the bundle). Its
 * output is the InvocationResult; HTTP 200/202 is progress, never business success, which is why
 * lowered pipelines check `decision.outcome` (and the settlement) after each call.
 */
import { invalidInput } from '../../contract/errors.js';
import type { JsonObject, JsonValue } from '../../contract/json.js';
import { contractRefSchema } from '../../contract/schemas.js';
import { limits } from '../../contract/limits.js';
import { invocationKeySchema, tokenSchema } from '../../contract/ids.js';
import { compileChecker } from '../../contract/validation.js';
import type { WaitFor } from '../../contract/types.js';

/** The name a workflow calls (`call: invoke-contract`). */
export const contractFunctionName = 'invoke-contract';

/** The secret holding `{endpoint, token}` for standalone engines: `use.secrets` names it. */
export const contractFunctionSecret = 'convoke';

/**
 * The request body another engine sends. Without an `invocationKey` it falls back to the
 * instance id and the calling task's reference: deterministic per instance for an engine whose
 * instance id survives recovery. convoke's executor never evaluates this: it derives the key from
 * the instance's invocation key and the task's JSON Pointer (plus loop indexes).
 */
const requestBody =
  '${ {contract: .contract, interaction: .interaction, invocationKey: (.invocationKey // "\\($workflow.id)\\($task.reference)"), input: .input, waitMs: ' +
  String(limits.waitMsMax) +
  '} + (if .waitFor == null then {} else {waitFor: .waitFor} end) }';

/** The declaration every document carries in `use.functions.invoke-contract`. */
export const contractFunctionDefinition: JsonObject = {
  input: {
    schema: {
      format: 'json',
      document: {
        type: 'object',
        required: ['contract', 'interaction', 'input'],
        properties: {
          contract: {
            type: 'object',
            required: ['id', 'version', 'digest'],
            properties: { id: { type: 'string' }, version: { type: 'string' }, digest: { type: 'string' } },
          },
          interaction: { type: 'string' },
          input: {},
          waitFor: { enum: ['decision', 'settled'] },
          invocationKey: { type: 'string' },
        },
      },
    },
  },
  call: 'http',
  with: {
    method: 'post',
    endpoint: {
      uri: '${ $secrets.' + contractFunctionSecret + '.endpoint + "/contract-invocations" }',
      authentication: { bearer: { use: contractFunctionSecret } },
    },
    headers: { 'content-type': 'application/json' },
    body: requestBody,
    output: 'content',
  },
};

/** A contract as a call names it. Inside a bundle, `digest` may be omitted for the bundle's own contract. */
export interface ContractCallRef {
  id: string;
  version: string;
  digest?: string;
}

/** The `with` object of `call: invoke-contract`. */
export interface ContractCallWith {
  contract: ContractCallRef;
  interaction: string;
  input: JsonValue;
  waitFor?: WaitFor;
  invocationKey?: string;
}

const runtimeExpression = { type: 'string', pattern: '^\\s*\\$\\{[\\s\\S]+\\}\\s*$' } as const;

/**
 * The `with` object's schema. Identity fields are literals: which contract and interaction a task
 * calls is fixed by the document, so the bundle can check it resolves; `input`, `waitFor` and
 * `invocationKey` may be runtime expressions.
 */
export const contractCallWithSchema = {
  type: 'object',
  required: ['contract', 'interaction', 'input'],
  additionalProperties: false,
  properties: {
    contract: {
      type: 'object',
      required: ['id', 'version'],
      additionalProperties: false,
      properties: { ...contractRefSchema.properties },
    },
    interaction: tokenSchema,
    input: {},
    waitFor: { anyOf: [{ enum: ['decision', 'settled'] }, runtimeExpression] },
    invocationKey: invocationKeySchema,
  },
} as const;

const checkWithShape = compileChecker<ContractCallWith>(contractCallWithSchema, 'invoke-contract');

/** Checks the `with` of a contract call at `where` (a JSON Pointer); throws invalid-input naming it. */
export function checkContractCallWith(value: unknown, where: string): ContractCallWith {
  try {
    return checkWithShape(value);
  } catch (error) {
    const description = (error as { description?: string }).description ?? String(error);
    throw invalidInput(`${where}/with: ${description}`, error);
  }
}
