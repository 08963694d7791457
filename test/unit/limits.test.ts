/**
 * Every bound is a named constant of src/contract/limits.ts, read where it is enforced: a config,
 * a contexts file, a list request or a deployment at one past a bound is refused, and at the
 * bound accepted. A bound written out again where it is checked (a literal beside the schema)
 * drifts from limits.ts and fails here.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { limits } from '../../src/contract/limits.js';
import { parseDeploymentConfig } from '../../src/deployment/config.js';
import { checkContextsFile } from '../../src/cli/contexts.js';
import { parseListParameters } from '../../src/runtime/operation-list.js';
import { deploymentAttemptsMax } from '../../src/runtime/mode.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { MemoryBus } from '../../src/adapters/transport/memory.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { minimalServeConfig } from '../support/config-fixtures.js';

const refusedAt = (pointer: string) => (e: unknown) => isAdapterError(e) && e.kind === 'invalid-input' && (e.description ?? '').includes(pointer);
const times = <T>(n: number, make: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => make(i));

test('the deployment config reads its count bounds from limits.ts', () => {
  const parse = (overrides: Record<string, unknown>) => parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(minimalServeConfig(overrides))), '/tmp');
  const cases: [string, number, (n: number) => Record<string, unknown>][] = [
    ['/bundles', limits.configBundlesMax, (n) => ({ bundles: times(n, (i) => `b${i}.json`) })],
    ['/operators', limits.configOperatorsMax, (n) => ({ operators: times(n, (i) => `op${i}`) })],
    ['/attestations', limits.configAttestationsMax, (n) => ({ attestations: times(n, (i) => ({ namespace: `ns${i}`, exclusivePeerPublishers: true })) })],
    ['/policy/rules', limits.configPolicyRulesMax, (n) => ({ policy: { rules: times(n, () => ({ effect: 'allow' })) } })],
    ['/resultBatchMs', limits.resultBatchMsMax, (n) => ({ resultBatchMs: n })],
  ];
  for (const [pointer, max, make] of cases) {
    assert.doesNotThrow(() => parse(make(max)), `${pointer} at ${max}`);
    assert.throws(() => parse(make(max + 1)), refusedAt(pointer), `${pointer} past ${max}`);
  }
});

test('the contexts file, the list request and memory mode read their bounds from limits.ts', () => {
  const contexts = (n: number) => ({ contexts: Object.fromEntries(times(n, (i) => [`c${i}`, {}])) });
  assert.doesNotThrow(() => checkContextsFile(contexts(limits.cliContextsMax), 'contexts.json'));
  assert.throws(() => checkContextsFile(contexts(limits.cliContextsMax + 1), 'contexts.json'), refusedAt('/contexts'));
  assert.equal(parseListParameters({ limit: String(limits.listLimitMax) }).limit, limits.listLimitMax);
  assert.throws(() => parseListParameters({ limit: String(limits.listLimitMax + 1) }), refusedAt(`from 1 to ${limits.listLimitMax}`));
  const bus = new MemoryBus();
  assert.equal(deploymentAttemptsMax(new MemoryEventStore({ clock: new VirtualClock(0) }), bus.connect('c')), limits.memoryModeAttemptsMax);
  assert.equal(limits.memoryModeAttemptsMax, 1, 'memory mode has one attempt (docs/design.md §7)');
});
