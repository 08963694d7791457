/**
 * A value is held to limits.jsonDepthMax (64) levels on its own, and what a workflow records
 * around it adds levels it is allowed: a contract call's answer holds a peer's result four levels
 * down (output.outcomes[i].result in a collected output), and a call's `with` is recorded as its
 * expressions' results, each one level down. A peer's result of 64 levels, which the contract
 * decided success on, is the call's answer and replays equal, on the memory and SQLite stores; a
 * `with.input` built by one expression to 64 levels is admitted. One level more is refused where
 * the value is made: by the peer, or as the expression's error.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { SystemClock } from '../../src/contract/clock.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { deepReviewDeployment, nested } from './depth-support.js';
import { delegatingParent, harness, runToEnd, workflowsAmong, yaml } from './support.js';

const head = `document: { dsl: '1.0.3', namespace: test, name: depth, version: '1.0.0' }\n`;
const contract = (digest: string) => `contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }`;

const deepResult = (digest: string) =>
  yaml(`${head}do:
  - review:
      call: invoke-contract
      with:
        ${contract(digest)}
        interaction: review
        input: { document: x, levels: '\${ .levels }' }
`);

for (const kind of ['memory', 'sqlite'] as const) {
  test(`a peer's result of 64 levels, decided success on, is the contract call's answer and replays equal (${kind} store)`, async () => {
    const clock = new SystemClock();
    const embedded = await deepReviewDeployment(clock);
    const dir = mkdtempSync(join(tmpdir(), 'answer-depth-'));
    const store = kind === 'memory' ? new MemoryEventStore({ clock }) : new SqliteEventStore({ path: join(dir, 'log.db'), clock });
    const h = harness({ store, clock, invocations: embedded.coordinator });
    try {
      const digest = embedded.bundle.ref.digest;
      const record = await runToEnd(h, deepResult(digest), { levels: limits.jsonDepthMax }, 'deepest-result');
      assert.equal(record.status, 'completed', JSON.stringify(record.error));
      const outcomes = ((record.output as JsonObject).output as { outcomes: JsonObject[] }).outcomes;
      assert.deepEqual(outcomes[0]?.result, { verdict: 'approve', note: nested(limits.jsonDepthMax - 1) });
      // Read back as the store holds it, in a fresh store over the same log.
      if (kind === 'sqlite') {
        const again = harness({ store: new SqliteEventStore({ path: join(dir, 'log.db'), clock }), clock, invocations: embedded.coordinator });
        try {
          assert.deepEqual(await again.executor.replay(record.instanceId), await h.executor.get(record.instanceId));
        } finally {
          await again.close();
        }
      }
      // Taken out of the answer, the result is a value on its own again.
      const taken = await runToEnd(
        h,
        yaml(`${head}do:
  - review:
      call: invoke-contract
      with:
        ${contract(digest)}
        interaction: review
        input: { document: x, levels: '\${ .levels }' }
      output: { as: '\${ .output.outcomes[0].result }' }
`),
        { levels: limits.jsonDepthMax },
        'taken-result',
      );
      assert.equal(taken.status, 'completed', JSON.stringify(taken.error));
      assert.deepEqual(parseStrict(JSON.stringify(taken.output)), { verdict: 'approve', note: nested(limits.jsonDepthMax - 1) });
    } finally {
      await h.close();
      await embedded.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('a peer never sends a result of 65 levels: the call’s decision fails, a contract error, not a value the workflow refuses', async () => {
  const clock = new SystemClock();
  const embedded = await deepReviewDeployment(clock);
  const h = harness({ clock, invocations: embedded.coordinator });
  try {
    const record = await runToEnd(h, deepResult(embedded.bundle.ref.digest), { levels: limits.jsonDepthMax + 1 }, 'too-deep-result');
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, 'https://convoke.dev/errors/workflow/decision', JSON.stringify(record.error));
  } finally {
    await h.close();
    await embedded.close();
  }
});

const builtInput = (digest: string) =>
  yaml(`${head}do:
  - review:
      try:
        - call:
            call: invoke-contract
            with:
              ${contract(digest)}
              interaction: review
              input: '\${ reduce range(.levels - 1) as $i ({document: "x"}; {document: "x", a: .}) }'
      catch:
        errors: { with: { type: https://serverlessworkflow.io/spec/1.0.0/errors/expression } }
        as: failure
        do:
          - note: { set: { caught: '\${ $failure.title }', detail: '\${ $failure.detail }' } }
`);

test('a with.input one expression builds to 64 levels is the contract’s input; one of 65 is the expression’s error, caught', async () => {
  const clock = new SystemClock();
  const embedded = await deepReviewDeployment(clock);
  const h = harness({ clock, invocations: embedded.coordinator });
  try {
    const digest = embedded.bundle.ref.digest;
    const record = await runToEnd(h, builtInput(digest), { levels: limits.jsonDepthMax }, 'deepest-input');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal((record.output as { decision?: { outcome: string } }).decision?.outcome, 'success', JSON.stringify(record.output));
    const refused = await runToEnd(h, builtInput(digest), { levels: limits.jsonDepthMax + 1 }, 'too-deep-input');
    assert.equal(refused.status, 'completed', JSON.stringify(refused.error));
    const caught = refused.output as { caught: string; detail: string };
    assert.equal(caught.caught, 'Value not recordable');
    assert.match(caught.detail, /nesting deeper than 64/);
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('a child workflow whose output is a contract call’s answer around a 64-level result is its parent’s run answer too', async () => {
  const clock = new SystemClock();
  const embedded = await deepReviewDeployment(clock);
  const child = yaml(`document: { dsl: '1.0.3', namespace: t, name: child, version: '1.0.0' }
do:
  - review:
      call: invoke-contract
      with:
        ${contract(embedded.bundle.ref.digest)}
        interaction: review
        input: { document: x, levels: '\${ .levels }' }
`);
  const h = harness({ clock, invocations: embedded.coordinator, workflows: workflowsAmong([child]) });
  try {
    const record = await runToEnd(h, delegatingParent('parent', 'child'), { levels: limits.jsonDepthMax }, 'deepest-child');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const outcomes = ((record.output as JsonObject).output as { outcomes: JsonObject[] }).outcomes;
    assert.deepEqual(outcomes[0]?.result, { verdict: 'approve', note: nested(limits.jsonDepthMax - 1) });
  } finally {
    await h.close();
    await embedded.close();
  }
});
