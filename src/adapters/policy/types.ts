import type { ContractRef, RuntimeContext } from '../../contract/types.js';

/**
 * The actions a policy decides. Reads are not among them: an operation is answered to the
 * principal that invoked it, and to nobody else (404), whatever a policy says.
 */
export type ProtectedAction = 'invoke' | 'deliver' | 'admit-result' | 'cancel' | 'renew';

/** The original invocation context plus action, peer, branch and attempt (spec: AuthorizationInput). */
export interface AuthorizationInput {
  context: RuntimeContext;
  action: ProtectedAction;
  contract: ContractRef;
  interaction: string;
  peerId: string | null;
  branchId: string | null;
  /** 1..16; candidate checks before admission use the prospective first attempt, 1. */
  attempt: number | null;
}

export interface AuthorizationDecision {
  allowed: boolean;
  revision: string;
  expiresAtMs: number;
  reason?: string;
}

export interface Policy {
  /** Throws AdapterError('unavailable') when no decision can be had; callers fail closed. */
  authorize(input: AuthorizationInput): Promise<AuthorizationDecision>;
}
