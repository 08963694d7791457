import type { ContractRef, RuntimeContext } from '../../contract/types.js';

/** The actions on a contract operation a policy decides. */
export type ContractAction = 'invoke' | 'deliver' | 'admit-result' | 'cancel' | 'renew';

/**
 * The actions a policy decides: a contract operation's, and the start of a deployed workflow
 * instance (`start-workflow`). Reads are not among them: an operation or an instance is answered
 * to the principal that started it, and to nobody else (404), whatever a policy says.
 */
export type ProtectedAction = ContractAction | 'start-workflow';

export type AuthorizationInput = ContractAuthorizationInput | WorkflowStartAuthorizationInput;

/** The original invocation context plus action, peer, branch and attempt (spec: AuthorizationInput). */
export interface ContractAuthorizationInput {
  context: RuntimeContext;
  action: ContractAction;
  contract: ContractRef;
  interaction: string;
  peerId: string | null;
  branchId: string | null;
  /** 1..16; candidate checks before admission use the prospective first attempt, 1. */
  attempt: number | null;
}

/**
 * A new workflow instance: by a caller (HTTP, the NATS command), or by a `run: workflow` task for
 * its instance's principal (the context's). `workflow` is the pipeline or workflow name, `bundle`
 * the deployed bundle that pins it.
 */
export interface WorkflowStartAuthorizationInput {
  context: RuntimeContext;
  action: 'start-workflow';
  bundle: ContractRef;
  workflow: string;
  /** A start has no peer, branch or attempt. */
  peerId: null;
  branchId: null;
  attempt: null;
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
