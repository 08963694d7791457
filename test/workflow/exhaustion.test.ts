/**
 * What a caller's input can make one workflow instance spend is bounded, and each bound ends the
 * instance with a DSL error recorded in its log: task executions (limits.workflowTaskExecutionsMax,
 * whatever loops — `then`, `for`, `retry`), the transitions it appends while it runs
 * (limits.workflowTransitionsMax: the rest of what a store reads back is kept for its end), and
 * the size of a jq result (limits.expressionResultBytesMax, refused in the jq worker). The
 * harness sets the first two low, to reach them quickly.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SystemClock } from '../../src/contract/clock.js';
import { limits } from '../../src/contract/limits.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { durationMs } from '../../src/workflow/exec/duration.js';
import { harness, runToEnd, yaml } from './support.js';

const runtimeError = 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime';

test('a retry loop with no delay and no count faults on its log budget, its fault recorded within what the store accepts', async () => {
  const clock = new SystemClock();
  // The store accepts 60 transitions; the instance may append 24 while it runs.
  const store = new MemoryEventStore({ clock, limits: { transitionsMax: 60 } });
  const h = harness({ clock, store, transitionsMax: 24 });
  try {
    const record = await runToEnd(
      h,
      yaml(`document: { dsl: '1.0.3', namespace: test, name: spin, version: '1.0.0' }
do:
  - spin:
      try:
        - boom:
            raise: { error: { type: 'https://example.com/boom', status: 500 } }
      catch:
        retry: { delay: { milliseconds: 0 } }
`),
      {},
      'spin',
      20_000,
    );
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, runtimeError);
    assert.equal(record.error?.title, 'Log budget exhausted');
    const read = await store.read(record.instanceId);
    assert.ok(read.kind === 'ok' && read.transitions.length <= 24 + 4, `the log holds ${read.kind === 'ok' ? read.transitions.length : read.kind} transitions`);
    assert.deepEqual(h.executor.failures, [], 'no append was refused');
  } finally {
    await h.close();
  }
});

test('a then loop and a for over the input end on the task budget, as a runtime error', async () => {
  const h = harness({ tasksMax: 50 });
  try {
    const looping = await runToEnd(
      h,
      yaml(`document: { dsl: '1.0.3', namespace: test, name: loop, version: '1.0.0' }
do:
  - again:
      set: { n: 1 }
  - back:
      set: { n: 2 }
      then: again
`),
      {},
      'loop',
    );
    assert.equal(looping.status, 'faulted');
    assert.equal(looping.error?.type, runtimeError);
    assert.equal(looping.error?.title, 'Task budget exhausted');
    const iterating = await runToEnd(
      h,
      yaml(`document: { dsl: '1.0.3', namespace: test, name: each, version: '1.0.0' }
do:
  - each:
      for: { in: '\${ .items }' }
      do:
        - one:
            set: { seen: '\${ $item }' }
`),
      { items: Array.from({ length: 100 }, (_, index) => index) },
      'each',
    );
    assert.equal(iterating.status, 'faulted');
    assert.equal(iterating.error?.title, 'Task budget exhausted');
  } finally {
    await h.close();
  }
});

test('a jq result larger than a transition carries is an expression error, refused before the runtime holds it', async () => {
  const h = harness();
  try {
    const n = 200_000;
    assert.ok(JSON.stringify(Array.from({ length: n }, (_, index) => index)).length > limits.expressionResultBytesMax);
    const record = await runToEnd(
      h,
      yaml(`document: { dsl: '1.0.3', namespace: test, name: big, version: '1.0.0' }
do:
  - grow:
      set: '\${ [range(.n)] }'
`),
      { n },
      'big',
    );
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/expression');
    assert.equal(record.error?.status, 400);
    assert.match(record.error?.detail ?? '', new RegExp(`larger than ${limits.expressionResultBytesMax} bytes`));
    // Within the bound, a large result is taken as before.
    const small = await runToEnd(
      h,
      yaml(`document: { dsl: '1.0.3', namespace: test, name: ok, version: '1.0.0' }
do:
  - grow:
      set: '\${ [range(.n)] | length }'
`),
      { n: 50_000 },
      'ok',
    );
    assert.equal(small.status, 'completed');
    assert.equal(small.output, 50_000);
  } finally {
    await h.close();
  }
});

test('a wait whose duration from the input ends past what a timer records faults with a validation error', async () => {
  const h = harness();
  try {
    const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: nap, version: '1.0.0' }
do:
  - nap:
      wait: '\${ .d }'
`);
    // 10^12 days: past 2^53 ms as an ISO duration; just under it as milliseconds, then past it from the start's instant.
    for (const [key, d] of [
      ['iso', 'P999999999999D'],
      ['ms', { milliseconds: Number.MAX_SAFE_INTEGER - 1 }],
    ] as const) {
      const record = await runToEnd(h, document, { d }, key, 10_000);
      assert.equal(record.status, 'faulted', key);
      assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/validation', key);
      assert.equal(record.error?.title, 'Invalid duration', key);
    }
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test('a duration longer than a safe integer of milliseconds is no duration, in either form', () => {
  assert.equal(durationMs('P999999999999D'), undefined);
  assert.equal(durationMs({ days: 1e12 }), undefined);
  assert.equal(durationMs('P1D'), 86_400_000);
  assert.equal(durationMs('P99999999D'), 99_999_999 * 86_400_000);
});
