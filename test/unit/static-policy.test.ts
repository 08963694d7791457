/**
 * The static policy's rules for contract actions and workflow starts (start-workflow): a rule
 * naming contracts, interactions or peers applies to contract actions only, one naming workflows
 * to workflow starts only, one naming none of them to both; deny wins; a revoked principal starts
 * nothing. The deployment config takes `workflows` and `start-workflow` and refuses a rule that
 * could match nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StaticPolicy, type PolicyRule } from '../../src/adapters/policy/static.js';
import type { AuthorizationInput, ContractAction } from '../../src/adapters/policy/types.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { minimalServeConfig } from '../support/config-fixtures.js';

const bundle = { id: 'lab.review', version: '1.0.0', digest: `sha256:${'a'.repeat(64)}` };
const context = (principalId: string) => ({ principalId, senderPeerId: null, account: 'a', system: 's', domain: 'd', nowMs: 0, deadlineMs: null });
const startOf = (principalId: string, workflow: string): AuthorizationInput => ({
  context: context(principalId),
  action: 'start-workflow',
  bundle,
  workflow,
  peerId: null,
  branchId: null,
  attempt: null,
});
const contractOf = (principalId: string, action: ContractAction, peerId: string | null = null): AuthorizationInput => ({
  context: context(principalId),
  action,
  contract: bundle,
  interaction: 'review',
  peerId,
  branchId: null,
  attempt: peerId === null ? null : 1,
});

const allowed = async (rules: PolicyRule[], input: AuthorizationInput) => (await new StaticPolicy({ rules }, new VirtualClock()).authorize(input)).allowed;

test('a rule naming neither contracts nor workflows applies to both: [{effect: allow}] allows every start and every contract action', async () => {
  assert.equal(await allowed([{ effect: 'allow' }], startOf('bob', 'any')), true);
  assert.equal(await allowed([{ effect: 'allow' }], contractOf('bob', 'invoke')), true);
  assert.equal(await allowed([{ effect: 'allow', principals: ['bob'] }], startOf('bob', 'any')), true);
  assert.equal(await allowed([{ effect: 'allow', principals: ['bob'] }], startOf('alice', 'any')), false);
  assert.equal(await allowed([], startOf('bob', 'any')), false, 'default deny');
});

test('a rule naming contracts, interactions or peers, or only contract actions, allows no start; one naming workflows allows no contract action', async () => {
  for (const rule of [
    { effect: 'allow', contracts: ['lab.review'] },
    { effect: 'allow', interactions: ['*'] },
    { effect: 'allow', peers: ['*'] },
    { effect: 'allow', actions: ['invoke', 'deliver', 'admit-result', 'cancel', 'renew'] },
  ] satisfies PolicyRule[])
    assert.equal(await allowed([rule], startOf('bob', 'flow')), false, JSON.stringify(rule));
  assert.equal(await allowed([{ effect: 'allow', contracts: ['lab.review'] }], contractOf('bob', 'invoke')), true, 'contract rules keep their meaning');
  assert.equal(await allowed([{ effect: 'allow', peers: ['alfa'] }], contractOf('bob', 'deliver', 'alfa')), true);
  const named: PolicyRule = { effect: 'allow', principals: ['bob'], workflows: ['flow'] };
  assert.equal(await allowed([named], startOf('bob', 'flow')), true);
  assert.equal(await allowed([named], startOf('bob', 'other')), false);
  assert.equal(await allowed([{ effect: 'allow', workflows: ['*'] }], startOf('bob', 'other')), true);
  assert.equal(await allowed([named], contractOf('bob', 'invoke')), false, 'a workflows rule is no contract permission');
  assert.equal(await allowed([{ effect: 'allow', actions: ['start-workflow'] }], startOf('bob', 'x')), true);
  assert.equal(await allowed([{ effect: 'allow', actions: ['start-workflow'] }], contractOf('bob', 'invoke')), false);
});

test('deny wins for starts, naming the revision; a principal revoked starts nothing; a refusal names the workflow', async () => {
  const policy = new StaticPolicy(
    {
      rules: [
        { effect: 'allow', principals: ['bob'] },
        { effect: 'deny', principals: ['bob'], workflows: ['held'] },
        // A contract-scoped deny leaves starts alone.
        { effect: 'deny', principals: ['bob'], contracts: ['lab.review'] },
      ],
      revision: 'r7',
    },
    new VirtualClock(),
  );
  const allow = await policy.authorize(startOf('bob', 'flow'));
  assert.deepEqual([allow.allowed, allow.revision], [true, 'r7.1']);
  assert.equal((await policy.authorize(contractOf('bob', 'invoke'))).allowed, false);
  const denied = await policy.authorize(startOf('bob', 'held'));
  assert.deepEqual([denied.allowed, denied.reason], [false, 'denied by policy r7.1']);
  assert.equal((await policy.authorize(startOf('alice', 'flow'))).reason, 'no rule of policy r7.1 allows start-workflow of workflow "flow"');
  policy.revoke({ principalId: 'bob' });
  assert.deepEqual([(await policy.authorize(startOf('bob', 'flow'))).reason], ['denied by policy r7.2']);
});

test('the config takes workflows and start-workflow in a rule, and refuses a rule that could match nothing', () => {
  const parse = (rules: unknown[]) =>
    parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(minimalServeConfig({ policy: { rules } }))), '/etc/convoke');
  const fails = (rules: unknown[], fragment: string) =>
    assert.throws(
      () => parse(rules),
      (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input' && (e.description ?? '').includes(fragment),
    );
  assert.deepEqual(parse([{ effect: 'allow', principals: ['p'], workflows: ['flow'], actions: ['start-workflow'] }]).policy.rules, [
    { effect: 'allow', principals: ['p'], workflows: ['flow'], actions: ['start-workflow'] },
  ]);
  fails([{ effect: 'allow', workflows: ['flow'], contracts: ['lab.review'] }], 'policy.rules[0] names workflows and contracts');
  fails([{ effect: 'allow', workflows: ['flow'], actions: ['invoke'] }], 'policy.rules[0] names workflows, but its actions leave out start-workflow');
  fails(
    [{ effect: 'allow' }, { effect: 'deny', peers: ['alfa'], actions: ['start-workflow'] }],
    'policy.rules[1] names peers, but its only action is start-workflow',
  );
  fails([{ effect: 'allow', actions: ['start'] }], '/policy/rules/0/actions/0');
});
