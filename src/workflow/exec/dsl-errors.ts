/**
 * The DSL's standard errors (RFC 7807 problem details, dsl-reference.md "Standard Error Types"),
 * the error a task raises, and error filters (`catch.errors.with`).
 */
import type { JsonValue } from '../../contract/json.js';
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

/** A DSL error raised by a task: it unwinds to the nearest matching `catch`, or faults the instance. */
export class WorkflowRaise extends Error {
  override readonly name = 'WorkflowRaise';
  constructor(readonly error: WorkflowError) {
    super(`${error.title ?? error.type} (${error.status})${error.detail ? `: ${error.detail}` : ''}`);
  }
}

export function raise(kind: keyof typeof errorTypes, status: number, title: string, instance: string, detail?: string): WorkflowRaise {
  return new WorkflowRaise({ type: errorTypes[kind], status, title, instance, ...(detail === undefined ? {} : { detail: detail.slice(0, 16000) }) });
}

/**
 * The standard types under both spellings in use: the reference's `/spec/1.0.0/errors/<kind>` and
 * the conformance kit's `/dsl/errors/types/<kind>`. A filter naming either matches the same errors.
 */
function canonicalType(type: string): string {
  const match = /^https:\/\/serverlessworkflow\.io\/(?:spec\/1\.0\.0\/errors|dsl\/errors\/types)\/([a-z]+)$/.exec(type);
  return match ? `${base}${match[1]}` : type;
}

/** Whether an error matches a filter's `with` (every given property equal). */
export function errorMatches(error: WorkflowError, filter: Readonly<Record<string, JsonValue>> | undefined): boolean {
  if (!filter) return true;
  for (const [key, expected] of Object.entries(filter)) {
    const actual = (error as unknown as Record<string, unknown>)[key];
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

/** A raised error value from a `raise` definition, checked for its required fields. */
export function errorFrom(value: JsonValue, instance: string): WorkflowError {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw raise('validation', 400, 'Invalid error definition', instance, 'raise.error must be an object');
  const { type, status, title, detail } = value;
  if (typeof type !== 'string' || typeof status !== 'number' || !Number.isInteger(status)) {
    throw raise('validation', 400, 'Invalid error definition', instance, 'raise.error needs a string type and an integer status');
  }
  return { type, status, ...(typeof title === 'string' ? { title } : {}), ...(typeof detail === 'string' ? { detail } : {}), instance };
}
