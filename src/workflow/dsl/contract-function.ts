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
 * credential taken from the secret `convoke` (a reference, never a value in the bundle), polled
 * until the boundary, and checked as the executor checks it: HTTP 200/202 is progress, never
 * business success.
 */
import { invalidInput } from '../../contract/errors.js';
import type { JsonObject, JsonValue } from '../../contract/json.js';
import { contractRefSchema } from '../../contract/schemas.js';
import { limits } from '../../contract/limits.js';
import { invocationKeySchema, tokenSchema } from '../../contract/ids.js';
import { compileChecker } from '../../contract/validation.js';
import type { WaitFor } from '../../contract/types.js';
import { contractDecisionErrorType, contractOutputErrorType, contractSettlementErrorType } from '../contract-errors.js';

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

/** The function's input, as its declaration states it. */
const functionInput: JsonObject = {
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
};

const endpoint = (uri: string): JsonObject => ({ uri, authentication: { bearer: { use: contractFunctionSecret } } });

/** The POST of the InvocationRequest, answering the HTTP call's `output` form. */
const postInvocation = (output: 'response' | 'content'): JsonObject => ({
  method: 'post',
  endpoint: endpoint('${ $secrets.' + contractFunctionSecret + '.endpoint + "/contract-invocations" }'),
  headers: { 'content-type': 'application/json' },
  body: requestBody,
  output,
});

/** The boundary the answer speaks of: the facade names it (`convoke-wait-for`); else the one asked. */
const boundary = '(.response.headers["convoke-wait-for"] // .with.waitFor // "decision")';
const answered = (what: string) => `\\(.response.content.operationId) ${what}`;

/**
 * The declaration every document carries in `use.functions.invoke-contract`: what another engine
 * runs, meaning what convoke's executor does (calls.ts). POST the InvocationRequest; while the
 * facade answers 202 (the boundary not reached within its wait), GET the operation with the
 * longest wait again (bounded long-polling: the task's or the workflow's timeout ends it); then
 * success only when the decision is success, the settlement complete where the boundary is
 * `settled`, and the typed output projected — otherwise the DSL error convoke's executor raises.
 * The output is the executor's: `{operationId, decision, settlement, output}`.
 */
export const contractFunctionDefinition: JsonObject = {
  input: functionInput,
  do: [
    {
      invoke: {
        call: 'http',
        with: postInvocation('response'),
        output: { as: '${ {with: $input, response: .} }' },
      },
    },
    { poll: { switch: [{ pending: { when: '${ .response.statusCode == 202 }', then: 'again' } }, { reached: { then: 'decided' } }] } },
    {
      again: {
        call: 'http',
        with: {
          method: 'get',
          endpoint: endpoint(
            '${ $secrets.' +
              contractFunctionSecret +
              '.endpoint + "/contract-invocations/" + .response.content.operationId + "?waitMs=' +
              String(limits.waitMsMax) +
              '" + (if .with.waitFor == null then "" else "&waitFor=\\(.with.waitFor)" end) }',
          ),
          output: 'response',
        },
        output: { as: '${ {with: $input.with, response: .} }' },
        then: 'poll',
      },
    },
    {
      decided: {
        if: '${ .response.content.decision.outcome != "success" }',
        raise: {
          error: {
            type: contractDecisionErrorType,
            status: 422,
            title: 'Contract decision not success',
            detail: `\${ "operation ${answered('decided \\(.response.content.decision.outcome // "nothing") (\\(.response.content.decision.reason // "no reason"))')}" }`,
          },
        },
      },
    },
    {
      settled: {
        if: `\${ ${boundary} == "settled" and .response.content.settlement.status != "complete" }`,
        raise: {
          error: {
            type: contractSettlementErrorType,
            status: 422,
            title: 'Contract settlement not complete',
            detail: `\${ "operation ${answered('settled \\(.response.content.settlement.status)')}" }`,
          },
        },
      },
    },
    {
      projected: {
        if: '${ .response.content.outputError != null }',
        raise: {
          error: {
            type: contractOutputErrorType,
            status: 422,
            title: 'Contract output not projected',
            detail: `\${ "operation ${answered('decided success, and its output could not be projected (\\(.response.content.outputError.kind))')}" }`,
          },
        },
      },
    },
    { answer: { set: '${ .response.content | {operationId, decision, settlement, output} }' } },
  ],
};

/**
 * The declaration documents carried before the function polled and checked the decision itself
 * (a single POST whose output was the InvocationResult): still accepted as written in a document,
 * which then declares that older function for other engines. convoke's executor runs neither.
 */
export const contractFunctionDefinitionV1: JsonObject = {
  input: functionInput,
  call: 'http',
  with: postInvocation('content'),
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
