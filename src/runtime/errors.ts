import { AdapterError } from '../contract/errors.js';

/**
 * A missing or hidden operation. The body is an AdapterError like every other, but the status is
 * 404 for both cases, so another principal's operation is indistinguishable from none at all.
 */
export class OperationNotFound extends AdapterError {
  readonly notFound = true;
  constructor(operationId: string) {
    super('invalid-input', `no operation ${operationId} is visible to this principal`);
  }
}

export function isNotFound(error: unknown): error is OperationNotFound {
  return error instanceof OperationNotFound;
}
