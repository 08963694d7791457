/**
 * A task's output, and so an instance's, is held to 64 levels plus those of a contract call's
 * answer (4: a peer's result at output.outcomes[i].result): the most every reader of an instance's
 * output reads (a NATS client's workflow reply, a parent reading its child's output). A task that
 * makes a value records it within them; a fork's list of its branches' outputs and a listen's list
 * of its iterations' outputs add a level above outputs that may be that deep, and are held to them
 * too: one deeper faults the task (a runtime error, `Value not recordable`, naming it), catchable,
 * and replays equal on the memory and SQLite stores. A child workflow whose fork is refused so
 * faults, and its parent's `run` task with the child's error.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { CloudEvent } from '../../src/contract/cloudevents.js';
import type { JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { outputLevels } from '../../src/workflow/exec/calls.js';
import { Interpreter } from '../../src/workflow/exec/interpreter.js';
import { workflowReplyLevels } from '../../src/nats-api/workflow-commands.js';
import { deepReviewDeployment, levelsOf } from './depth-support.js';
import { assertReplayEqual, delegatingParent, harness, runToEnd, workflowsAmong, yaml } from './support.js';

const head = (name: string) => `document: { dsl: '1.0.3', namespace: t, name: ${name}, version: '1.0.0' }\n`;
const review = (digest: string, indent: string, levels = '${ .levels }') =>
  [
    `${indent}call: invoke-contract`,
    `${indent}with:`,
    `${indent}  contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }`,
    `${indent}  interaction: review`,
    `${indent}  input: { document: x, levels: '${levels}' }`,
  ].join('\n');

/** A fork (`fanout`) around a contract call, inside a try that catches a runtime error into `{caught, detail, at}`. */
const caughtFork = (digest: string) =>
  yaml(`${head('caught-fork')}do:
  - guarded:
      try:
        - fanout:
            fork:
              branches:
                - review:
${review(digest, '                    ')}
      catch:
        errors: { with: { type: https://serverlessworkflow.io/spec/1.0.0/errors/runtime } }
        as: failure
        do:
          - note: { set: { caught: '\${ $failure.title }', detail: '\${ $failure.detail }', at: '\${ $failure.instance }' } }
`);

test("the executor's bound on an output is what a NATS client reads below a workflow reply's own two levels", () => {
  assert.equal(workflowReplyLevels, 2 + outputLevels);
});

for (const kind of ['memory', 'sqlite'] as const) {
  test(`a fork's list around a contract answer is held to 68 levels: 68 completes, 69 faults the fork, caught (${kind} store)`, async () => {
    const clock = new SystemClock();
    const embedded = await deepReviewDeployment(clock);
    const dir = mkdtempSync(join(tmpdir(), 'output-depth-'));
    const store = kind === 'memory' ? new MemoryEventStore({ clock }) : new SqliteEventStore({ path: join(dir, 'log.db'), clock });
    const h = harness({ store, clock, invocations: embedded.coordinator });
    try {
      const document = caughtFork(embedded.bundle.ref.digest);
      const deepest = await runToEnd(h, document, { levels: limits.jsonDepthMax - 1 }, 'fork-68');
      assert.equal(deepest.status, 'completed', JSON.stringify(deepest.error));
      assert.equal(levelsOf(deepest.output), limits.jsonDepthMax + outputLevels);
      const deeper = await runToEnd(h, document, { levels: limits.jsonDepthMax }, 'fork-69');
      assert.equal(deeper.status, 'completed', JSON.stringify(deeper.error));
      const caught = deeper.output as { caught?: string; detail?: string; at?: string };
      assert.deepEqual([caught.caught, caught.at], ['Value not recordable', '/do/0/guarded/try/0/fanout'], JSON.stringify(caught).slice(0, 300));
      assert.match(caught.detail ?? '', /^the output of task fanout nests deeper than 68 levels/);
      assert.equal(deeper.tasks['/do/0/guarded/try/0/fanout']?.state, 'faulted');
      if (kind === 'sqlite') {
        const again = harness({ store: new SqliteEventStore({ path: join(dir, 'log.db'), clock }), clock, invocations: embedded.coordinator });
        try {
          assert.deepEqual(await again.executor.replay(deeper.instanceId), await h.executor.get(deeper.instanceId));
        } finally {
          await again.close();
        }
      }
    } finally {
      await h.close();
      await embedded.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test("a listen's list of its iterations' outputs is held to 68 levels: iterating into a contract answer of 68 faults the listen, naming it", async () => {
  const clock = new SystemClock();
  const embedded = await deepReviewDeployment(clock);
  const h = harness({ clock, invocations: embedded.coordinator });
  try {
    const document = yaml(`${head('iterates')}do:
  - wait:
      listen:
        to: { one: { with: { type: com.example.deep } } }
      foreach:
        item: got
        do:
          - review:
${review(embedded.bundle.ref.digest, '              ', '${ $got.levels }')}
`);
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'listen-69', document, input: {} });
    while (!(await h.executor.get(instanceId))?.listens['/do/0/wait']) await new Promise((resolve) => setTimeout(resolve, 5));
    const event: CloudEvent = {
      specversion: '1.0',
      id: 'e-1',
      source: 'https://convoke.dev/test',
      type: 'com.example.deep',
      data: { levels: limits.jsonDepthMax },
    };
    assert.deepEqual(await h.executor.deliver(event, null), { matched: [instanceId] });
    const record = await h.executor.wait(instanceId, 20_000);
    assert.equal(record.status, 'faulted', JSON.stringify(record.output)?.slice(0, 200));
    assert.deepEqual([record.error?.title, record.error?.status, record.error?.instance], ['Value not recordable', 500, '/do/0/wait']);
    assert.match(record.error?.detail ?? '', /^the output of task wait nests deeper than 68 levels/);
    const iterated = Object.entries(record.tasks).filter(([at]) => at.includes('/foreach/do/0/review'));
    assert.deepEqual(
      iterated.map(([, task]) => task.state),
      ['completed'],
      'the iteration made its answer',
    );
    await assertReplayEqual(h, instanceId);
  } finally {
    await h.close();
    await embedded.close();
  }
});

test("a child whose fork's list would be 69 levels faults at its fork, and its parent's run with the child's error (not a value the parent refuses)", async () => {
  const clock = new SystemClock();
  const embedded = await deepReviewDeployment(clock);
  const child = yaml(`${head('child')}do:
  - fanout:
      fork:
        branches:
          - review:
${review(embedded.bundle.ref.digest, '              ')}
`);
  const h = harness({ clock, invocations: embedded.coordinator, workflows: workflowsAmong([child]) });
  try {
    const deepest = await runToEnd(h, delegatingParent('parent', 'child'), { levels: limits.jsonDepthMax - 1 }, 'child-68');
    assert.equal(deepest.status, 'completed', JSON.stringify(deepest.error));
    assert.equal(levelsOf(deepest.output), limits.jsonDepthMax + outputLevels);
    const record = await runToEnd(h, delegatingParent('parent', 'child'), { levels: limits.jsonDepthMax }, 'child-69');
    assert.equal(record.status, 'faulted');
    const error = record.error as JsonValue as { type: string; status: number; title: string; detail: string; instance: string };
    assert.deepEqual(
      [error.type, error.status, error.title, error.instance],
      ['https://serverlessworkflow.io/spec/1.0.0/errors/runtime', 500, 'Value not recordable', '/do/0/delegate'],
      JSON.stringify(error),
    );
    assert.match(error.detail, /faulted at \/do\/0\/fanout: the output of task fanout nests deeper than 68 levels/);
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('a log written before outputs were held so, its fork completed 69 levels deep, resumes as it was recorded and replays equal', async () => {
  const clock = new SystemClock();
  const embedded = await deepReviewDeployment(clock);
  const store = new MemoryEventStore({ clock });
  const document = yaml(`${head('old-fork')}do:
  - fanout:
      fork:
        branches:
          - review:
${review(embedded.bundle.ref.digest, '              ')}
  - wait:
      listen:
        to: { one: { with: { type: com.example.go } } }
`);
  // The executor before: a fork's list was its branches' outputs, however deep.
  const held = Interpreter.prototype.heldOutput;
  Interpreter.prototype.heldOutput = (_run, output) => output;
  const before = harness({ store, clock, invocations: embedded.coordinator });
  let instanceId: string;
  try {
    ({ instanceId } = await before.executor.start({ principalId: 'alice', invocationKey: 'old-fork', document, input: { levels: limits.jsonDepthMax } }));
    while (!(await before.executor.get(instanceId))?.listens['/do/1/wait']) await new Promise((resolve) => setTimeout(resolve, 5));
  } finally {
    Interpreter.prototype.heldOutput = held;
    await before.close();
  }
  const written = await before.executor.replay(instanceId);
  assert.equal(levelsOf(written?.tasks['/do/0/fanout']?.output), limits.jsonDepthMax + outputLevels + 1);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    await h.executor.resume();
    const go: CloudEvent = { specversion: '1.0', id: 'go-1', source: 'https://convoke.dev/test', type: 'com.example.go', data: { go: true } };
    assert.deepEqual(await h.executor.deliver(go, null), { matched: [instanceId] });
    const record = await h.executor.wait(instanceId, 20_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, [{ go: true }]);
    assert.deepEqual(record.tasks['/do/0/fanout']?.output, written?.tasks['/do/0/fanout']?.output);
    await assertReplayEqual(h, instanceId);
  } finally {
    await h.close();
    await embedded.close();
  }
});
