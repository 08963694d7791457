/**
 * What a policy decision permits at a trusted instant (spec: "An unavailable, expired or denied
 * decision fails closed"). A decision is valid up to, not including, its expiresAtMs — the same
 * exclusive upper bound as a store time guard. Every protected boundary reads a decision through
 * this one function, so "allowed" never means an allow whose validity has already ended.
 */
import { AdapterError } from './errors.js';

/** The shape of a policy answer (adapters/policy/types.ts AuthorizationDecision). */
export interface DecisionLike {
  allowed: boolean;
  revision: string;
  expiresAtMs: number;
  reason?: string;
}

/**
 * A decision as it stands at the instant it was checked: `allowed` is true only for a valid
 * allow; a refusal says whether the policy denied or the decision had expired, and why.
 */
export type CheckedDecision = DecisionLike & ({ allowed: true; refusal?: undefined } | { allowed: false; refusal: 'denied' | 'expired'; reason: string });

export function decisionAt(decision: DecisionLike, nowMs: number): CheckedDecision {
  const { revision, expiresAtMs } = decision;
  if (!decision.allowed) return { allowed: false, revision, expiresAtMs, refusal: 'denied', reason: decision.reason ?? `denied by policy ${revision}` };
  if (!Number.isSafeInteger(expiresAtMs) || expiresAtMs <= nowMs) {
    return {
      allowed: false,
      revision,
      expiresAtMs,
      refusal: 'expired',
      reason: `the authorization decision of policy ${revision} expired at ${expiresAtMs} (checked at ${nowMs})`,
    };
  }
  return decision.reason === undefined ? { allowed: true, revision, expiresAtMs } : { allowed: true, revision, expiresAtMs, reason: decision.reason };
}

/**
 * An allow whose validity ended before the transition it guards could be taken: not a denial and
 * not a store failure. The command is decided again with a fresh decision (a peer message waits
 * for redelivery), and it is counted as such (intake: reason authorization-expired).
 */
export class AuthorizationExpired extends AdapterError {
  constructor(description: string) {
    super('expired', description);
  }
}

/**
 * The policy could not answer (spec: "An unavailable ... decision fails closed"): a failure of the
 * policy, not of the store and not a denial. The kind is the policy's own when it gave one
 * (normally unavailable), so a caller is answered as before; the class tells the failure's
 * source to those that count failures by layer.
 */
export class PolicyFailure extends AdapterError {
  constructor(kind: AdapterError['kind'], description: string | undefined, options?: { cause?: unknown }) {
    super(kind, description, options);
  }
}

/** The AdapterError a refused decision answers a caller with: expired or denied, with its reason. */
export function refusalError(decision: CheckedDecision & { allowed: false }): AdapterError {
  return decision.refusal === 'expired' ? new AuthorizationExpired(decision.reason) : new AdapterError(decision.refusal, decision.reason);
}
