import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { lengthPrefixed } from '../../src/contract/ids.js';
import { isWorkflowInstanceId, stageInvocationKey, workflowInstanceId } from '../../src/workflow/ids.js';
import { assertInvalid, repoRoot } from '../support/assertions.js';

interface InstanceVector {
  note: string;
  principalId: string;
  bundleDigest: string;
  workflowName: string;
  invocationKey: string;
  encodingHex: string;
  instanceId: string;
}

interface StageVector {
  note: string;
  instanceKey: string;
  pointer: string;
  iterations: number[];
  attempt: number;
  encodingHex: string;
  stageKey: string;
}

const vectors = JSON.parse(readFileSync(join(repoRoot(), 'test', 'vectors', 'workflow-ids.json'), 'utf8')) as {
  layout: string;
  instance: InstanceVector[];
  stage: StageVector[];
};

test('workflow instance ids match the independently computed vectors', () => {
  assert.ok(vectors.instance.length >= 5);
  for (const v of vectors.instance) {
    assert.equal(lengthPrefixed([v.principalId, v.bundleDigest, v.workflowName, v.invocationKey]).toString('hex'), v.encodingHex, v.note);
    const id = workflowInstanceId(v.principalId, v.bundleDigest, v.workflowName, v.invocationKey);
    assert.equal(id, v.instanceId, v.note);
    assert.equal(id.length, 66);
    assert.ok(isWorkflowInstanceId(id));
  }
  const shifted = vectors.instance.filter((v) => v.note.startsWith('boundary shift'));
  assert.equal(shifted.length, 2);
  assert.notEqual(shifted[0]?.instanceId, shifted[1]?.instanceId, 'moving a byte across a part boundary changes the id');
});

test('stage invocation keys match the vectors; a DSL retry and each iteration get their own key', () => {
  for (const v of vectors.stage) {
    const key = stageInvocationKey(v.instanceKey, { pointer: v.pointer, iterations: v.iterations, attempt: v.attempt });
    assert.equal(key, v.stageKey, v.note);
    assert.equal(key.length, 67);
  }
  const keys = new Set(vectors.stage.map((v) => v.stageKey));
  assert.equal(keys.size, vectors.stage.length);
  const base = { pointer: '/do/0/review', iterations: [], attempt: 1 };
  assert.equal(stageInvocationKey('k', base), stageInvocationKey('k', { ...base }), 'a pure function of the position');
  assert.notEqual(stageInvocationKey('k', { ...base, iterations: [1, 12] }), stageInvocationKey('k', { ...base, iterations: [11, 2] }));
});

test('stage positions that are not positions are invalid-input', () => {
  assertInvalid(() => stageInvocationKey('k', { pointer: 'do/0', iterations: [], attempt: 1 }), 'JSON Pointer');
  assertInvalid(() => stageInvocationKey('k', { pointer: '/do/0', iterations: [-1], attempt: 1 }), 'iteration');
  assertInvalid(() => stageInvocationKey('k', { pointer: '/do/0', iterations: [], attempt: 0 }), 'attempt');
  assertInvalid(() => workflowInstanceId('a\ud800', 'd', 'w', 'k'), 'lone surrogate');
});
