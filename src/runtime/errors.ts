import { AdapterError, httpStatusOf, isAdapterError, type AdapterErrorBody } from '../contract/errors.js';

/**
 * A missing or hidden operation. The body is an AdapterError like every other, but the status is
 * 404 for both cases, so another principal's operation is indistinguishable from none at all.
 */
export class OperationNotFound extends AdapterError {
  readonly notFound = true;
  constructor(operationId: string, description = `no operation ${operationId} is visible to this principal`) {
    super('invalid-input', description);
  }
}

/** A missing or hidden workflow instance: 404 exactly as an operation (another principal's looks like none). */
export class WorkflowInstanceNotFound extends OperationNotFound {
  constructor(instanceId: string) {
    super(instanceId, `no workflow instance ${instanceId} is visible to this principal`);
  }
}

export function isNotFound(error: unknown): error is OperationNotFound {
  return error instanceof OperationNotFound;
}

/**
 * The status of an operating failure, shared by every facade (HTTP and NATS commands): a missing or
 * hidden operation is 404, any other AdapterError takes its kind's status. Undefined for anything
 * that is not an AdapterError — a bug, answered with `internalErrorBody`.
 */
export function adapterErrorStatus(error: unknown): { status: number; body: AdapterErrorBody } | undefined {
  if (isNotFound(error)) return { status: 404, body: error.toJSON() };
  if (isAdapterError(error)) return { status: httpStatusOf(error.kind), body: error.toJSON() };
  return undefined;
}

/** A bug, not an operating failure: no internals leak; the outcome is uncertain, so clients look it up by key. */
export const internalErrorBody: AdapterErrorBody = {
  kind: 'unavailable',
  description: 'internal error; the invocation outcome is unknown, retry with the same invocationKey or look the operation up',
};
