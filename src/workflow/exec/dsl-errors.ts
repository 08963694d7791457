/**
 * The DSL's standard errors (RFC 7807 problem details, dsl-reference.md "Standard Error Types"),
 * the error a task raises, and error filters (`catch.errors.with`).
 */
import type { AdapterError, AdapterErrorKind } from '../../contract/errors.js';
import { cutText, type JsonValue } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';
import type { WorkflowError } from './events.js';

const base = 'https://serverlessworkflow.io/spec/1.0.0/errors/';

export const errorTypes = {
  configuration: `${base}configuration`,
  validation: `${base}validation`,
  expression: `${base}expression`,
  authentication: `${base}authentication`,
  authorization: `${base}authorization`,
  timeout: `${base}timeout`,
  communication: `${base}communication`,
  runtime: `${base}runtime`,
} as const;

/**
 * The DSL error type and status an AdapterError of each kind becomes where the executor raises it
 * at a task: a contract call's refusal (calls.ts), a child workflow's start refused (subworkflows.ts).
 * A configuration error carries the DSL's status for it, 400, as every other the executor raises
 * (an unknown workflow, an unsupported call or task): `unsupported` is no other status for being
 * a refusal.
 */
export const adapterErrorProblems: Readonly<Record<AdapterErrorKind, { type: string; status: number }>> = {
  'invalid-input': { type: errorTypes.validation, status: 400 },
  denied: { type: errorTypes.authorization, status: 403 },
  expired: { type: 'https://convoke.dev/errors/workflow/expired', status: 410 },
  unavailable: { type: errorTypes.communication, status: 503 },
  conflict: { type: errorTypes.communication, status: 409 },
  'protocol-conflict': { type: 'https://convoke.dev/errors/workflow/protocol-conflict', status: 409 },
  unsupported: { type: errorTypes.configuration, status: 400 },
};

/**
 * A DSL error raised by a task: it unwinds to the nearest matching `catch`, or faults the instance.
 * Its title, instance and detail are cut to what a recorded error holds (limits.workflowErrorTextCharsMax,
 * workflowErrorDetailCharsMax): a task's fault must always be recordable, or the instance could
 * never end — its every drive would decide the same invalid transition.
 */
export class WorkflowRaise extends Error {
  override readonly name = 'WorkflowRaise';
  readonly error: WorkflowError;
  constructor(error: WorkflowError) {
    const bounded = recordableError(error);
    super(`${bounded.title ?? bounded.type} (${bounded.status})${bounded.detail ? `: ${bounded.detail}` : ''}`);
    this.error = bounded;
  }
}

function recordableError(error: WorkflowError): WorkflowError {
  const { title, detail, instance } = error;
  const textMax = limits.workflowErrorTextCharsMax;
  if ((title?.length ?? 0) <= textMax && (instance?.length ?? 0) <= textMax && (detail?.length ?? 0) <= limits.workflowErrorDetailCharsMax) return error;
  return {
    ...error,
    ...(title === undefined ? {} : { title: cutText(title, textMax) }),
    ...(instance === undefined ? {} : { instance: cutText(instance, textMax) }),
    ...(detail === undefined ? {} : { detail: cutText(detail, limits.workflowErrorDetailCharsMax) }),
  };
}

/**
 * An AdapterError raised at a task as the DSL error of its kind (adapterErrorProblems): a contract
 * call's refusal, a child workflow's start refused or its look-up. `detail` is cut to 4 000
 * characters.
 */
export function raiseAdapterError(error: AdapterError, title: string, instance: string, detail: string): WorkflowRaise {
  const { type, status } = adapterErrorProblems[error.kind];
  return new WorkflowRaise({ type, status, title, detail: cutText(detail, 4000), instance });
}

export function raise(kind: keyof typeof errorTypes, status: number, title: string, instance: string, detail?: string): WorkflowRaise {
  return new WorkflowRaise({ type: errorTypes[kind], status, title, instance, ...(detail === undefined ? {} : { detail }) });
}

/**
 * The standard types under both spellings in use: the reference's `/spec/1.0.0/errors/<kind>` and
 * the conformance kit's `/dsl/errors/types/<kind>`. A filter naming either matches the same errors.
 */
function canonicalType(type: string): string {
  const match = /^https:\/\/serverlessworkflow\.io\/(?:spec\/1\.0\.0\/errors|dsl\/errors\/types)\/([a-z]+)$/.exec(type);
  return match ? `${base}${match[1]}` : type;
}

/**
 * Whether an error matches a filter's `with` (every given property equal). The DSL's error filter
 * names the error's `detail` `details` (schema errorFilter: type, status, instance, title, details).
 */
export function errorMatches(error: WorkflowError, filter: Readonly<Record<string, JsonValue>> | undefined): boolean {
  if (!filter) return true;
  for (const [key, expected] of Object.entries(filter)) {
    const actual = (error as unknown as Record<string, unknown>)[key === 'details' ? 'detail' : key];
    if (key === 'type') {
      if (typeof expected !== 'string' || typeof actual !== 'string' || canonicalType(expected) !== canonicalType(actual)) return false;
    } else if (actual !== expected) return false;
  }
  return true;
}

/** An error as a jq value ($error, a catch's `as`). */
export function errorValue(error: WorkflowError): JsonValue {
  return { ...error };
}

/**
 * A raised error value from a `raise` definition, checked for its required fields: its type no
 * longer than a recorded one, its status an HTTP status (100–999), as a recorded error's is — the
 * DSL's schema allows any integer, and the value may come from the input.
 */
export function errorFrom(value: JsonValue, instance: string): WorkflowError {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw raise('validation', 400, 'Invalid error definition', instance, 'raise.error must be an object');
  const { type, status, title, detail } = value;
  if (typeof type !== 'string' || typeof status !== 'number' || !Number.isInteger(status)) {
    throw raise('validation', 400, 'Invalid error definition', instance, 'raise.error needs a string type and an integer status');
  }
  if (status < 100 || status > 999)
    throw raise('validation', 400, 'Invalid error definition', instance, `raise.error.status is ${status}: an error's status is from 100 to 999`);
  if (type.length > limits.workflowErrorTextCharsMax)
    throw raise('validation', 400, 'Invalid error definition', instance, `raise.error.type is longer than ${limits.workflowErrorTextCharsMax} characters`);
  return { type, status, ...(typeof title === 'string' ? { title } : {}), ...(typeof detail === 'string' ? { detail } : {}), instance };
}
