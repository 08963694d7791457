/**
 * What the facades may ask of the coordinator core: the one service interface the HTTP facade
 * (src/http) and the NATS command API (src/nats-api) are thin adapters over. The Coordinator
 * implements it; a facade depends on this interface, never on the Coordinator class.
 */
import type { Registry } from 'prom-client';
import type { InvocationRequest, WaitFor } from '../contract/types.js';
import type { InvocationResult } from '../projections/views.js';
import type { OperationInspection, OperationInspectionUpdate } from '../projections/inspection.js';
import type { LiveInspection } from './live-inspection.js';
import type { Caller } from './host.js';
import type { ListPage, ListRequest } from './operation-list.js';

export type { Caller } from './host.js';

/** What an invocation answers: the operation, whether this call admitted it, and the boundary the caller waits for. */
export interface Invoked {
  result: InvocationResult;
  created: boolean;
  boundary: WaitFor;
}

export interface InvocationService {
  /** The core's metrics registry; facades register their own metrics on it and serve it. */
  readonly metrics: { readonly registry: Registry };
  /**
   * Admits an operation (or finds the one its invocation key already names), answering the
   * boundary the caller waits for: its `waitFor`, or the interaction's when it names none (a
   * `waitFor` weaker than the interaction's is refused, invalid-input, before admission).
   */
  invoke(caller: Caller, request: InvocationRequest): Promise<Invoked>;
  /** The operation's current result, for its principal only. */
  get(principalId: string, operationId: string): Promise<InvocationResult>;
  /** Resolves when the operation reaches the boundary, or when waitMs or the signal ends the wait. */
  wait(
    principalId: string,
    operationId: string,
    boundary: WaitFor,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<{ result: InvocationResult; reached: boolean }>;
  /** Requests cancellation of the operation's open branches. */
  cancel(principalId: string, operationId: string): Promise<InvocationResult>;
  /**
   * The operation's result, branches and whole log as stored, for its original principal or an
   * operator principal; anything else is not found.
   */
  inspect(principalId: string, operationId: string): Promise<OperationInspection>;
  /**
   * The inspection, visible as for inspect, and then what changed since the last answer, read from
   * the transitions stored after the last one it saw (what GET /contract-invocations/{id}/events sends).
   */
  inspectLive(principalId: string, operationId: string): Promise<LiveInspection<OperationInspection, OperationInspectionUpdate>>;
  /** Calls `listener` after each append to the operation's stream (any coordinator's); no visibility check. */
  followOperation(operationId: string, listener: () => void): Promise<{ close(): Promise<void> }>;
  /** Calls `listener` after each append to any operation's stream; the listener must check what its caller may see. */
  followOperations(listener: () => void): Promise<{ close(): Promise<void> }>;
  /** A page of the operations index: the principal's own operations, or every one for an operator principal. */
  list(principalId: string, request: ListRequest): Promise<ListPage>;
}
