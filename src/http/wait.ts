/**
 * Boundaries and waiting. The effective boundary is the stronger of the caller's waitFor and the
 * contract's: a caller may strengthen decision to settled, never weaken settled to decision
 * (spec: "Workflows and the execution boundary"). A wait ends at the boundary, at waitMs, or when
 * it is released (the client closed the connection, or the server is shutting down); releasing a
 * wait never touches the operation — only declared cancellation commands change work.
 */
import type { WaitFor } from '../contract/types.js';
import type { InvocationService } from '../runtime/service.js';
import type { InvocationResult } from '../projections/views.js';

export { contractBoundary, effectiveBoundary } from '../runtime/boundary.js';

export interface WaitRequest {
  principalId: string;
  operationId: string;
  boundary: WaitFor;
  waitMs: number;
  release: AbortSignal;
}

/**
 * Waits through the coordinator until the boundary, waitMs, or the release signal (a closed
 * connection or a shutdown). Release only stops waiting: the current state is returned (202 if
 * the boundary is not reached) and the operation carries on.
 */
export async function waitReleasable(coordinator: InvocationService, request: WaitRequest): Promise<{ result: InvocationResult; reached: boolean }> {
  const { principalId, operationId, boundary, waitMs, release } = request;
  return coordinator.wait(principalId, operationId, boundary, release.aborted ? 0 : waitMs, release);
}
