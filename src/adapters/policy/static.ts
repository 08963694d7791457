/**
 * A static policy: ordered allow/deny rules from deployment config, deny wins, default deny.
 * Decisions carry the policy revision and expire after ttlMs; `revoke` adds a deny rule and
 * advances the revision (used by operators and by revocation tests).
 */
import { invalidInput } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import type { Clock } from '../../contract/clock.js';
import type { AuthorizationDecision, AuthorizationInput, Policy, ProtectedAction } from './types.js';

/**
 * A rule names what it applies to; an absent list matches anything, `*` in one matches any value.
 * A rule naming `contracts`, `interactions` or `peers` applies to contract actions only, one naming
 * `workflows` to workflow starts only (`start-workflow`); one naming none of them applies to both.
 */
export interface PolicyRule {
  effect: 'allow' | 'deny';
  principals?: string[];
  contracts?: string[];
  interactions?: string[];
  peers?: string[];
  /** Pipeline or workflow names, in any deployed bundle. */
  workflows?: string[];
  actions?: ProtectedAction[];
}

export interface StaticPolicyConfig {
  rules: PolicyRule[];
  ttlMs?: number;
  revision?: string;
}

const matches = (list: string[] | undefined, value: string | null) => list === undefined || list.includes('*') || (value !== null && list.includes(value));

/** How long a decision is valid when the config names no `policy.ttlMs`. */
export const policyTtlMsDefault = 60_000;

export class StaticPolicy implements Policy {
  private rules: PolicyRule[];
  private readonly ttlMs: number;
  private revisionSeq = 1;
  private readonly baseRevision: string;

  constructor(
    config: StaticPolicyConfig,
    private readonly clock: Clock,
  ) {
    this.rules = [...config.rules];
    this.ttlMs = config.ttlMs ?? policyTtlMsDefault;
    this.baseRevision = config.revision ?? 'static';
  }

  get revision(): string {
    return `${this.baseRevision}.${this.revisionSeq}`;
  }

  async authorize(input: AuthorizationInput): Promise<AuthorizationDecision> {
    if (
      input.action !== 'start-workflow' &&
      input.attempt !== null &&
      (!Number.isSafeInteger(input.attempt) || input.attempt < 1 || input.attempt > limits.attemptsMax)
    ) {
      throw invalidInput(`authorization attempt ${input.attempt} is outside 1..${limits.attemptsMax}`);
    }
    const expiresAtMs = this.clock.nowMs() + this.ttlMs;
    let allowed = false;
    for (const rule of this.rules) {
      if (!this.applies(rule, input)) continue;
      if (rule.effect === 'deny') return { allowed: false, revision: this.revision, expiresAtMs, reason: `denied by policy ${this.revision}` };
      allowed = true;
    }
    return allowed
      ? { allowed: true, revision: this.revision, expiresAtMs }
      : { allowed: false, revision: this.revision, expiresAtMs, reason: `no rule of policy ${this.revision} allows ${actionOf(input)}` };
  }

  /** Revokes a peer (or a principal) from now on; already-open branches of that peer are terminated at their next protected transition. */
  revoke(target: { peerId?: string; principalId?: string }): void {
    const rule: PolicyRule = { effect: 'deny' };
    if (target.peerId !== undefined) rule.peers = [target.peerId];
    if (target.principalId !== undefined) rule.principals = [target.principalId];
    this.rules.push(rule);
    this.revisionSeq++;
  }

  private applies(rule: PolicyRule, input: AuthorizationInput): boolean {
    if (!matches(rule.principals, input.context.principalId) || (rule.actions !== undefined && !rule.actions.includes(input.action))) return false;
    if (input.action === 'start-workflow')
      return rule.contracts === undefined && rule.interactions === undefined && rule.peers === undefined && matches(rule.workflows, input.workflow);
    const peerScoped = rule.peers !== undefined && input.peerId === null;
    return (
      rule.workflows === undefined &&
      !peerScoped &&
      matches(rule.contracts, input.contract.id) &&
      matches(rule.interactions, input.interaction) &&
      matches(rule.peers, input.peerId)
    );
  }
}

/** The action a refusal names: a workflow start names its workflow. */
const actionOf = (input: AuthorizationInput): string =>
  input.action === 'start-workflow' ? `start-workflow of workflow ${JSON.stringify(input.workflow)}` : input.action;
