/**
 * The DSL's data flow and core tasks as its text says them (dsl.md "Data Flow", dsl-reference.md
 * Input, Output, Export, Switch, Catch and the error filter): each test runs a small document to
 * its end and checks what the text says it outputs. Every finished instance is checked against
 * its replay (runToEnd).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AdapterError } from '../../src/contract/errors.js';
import { harness, runToEnd, yaml } from './support.js';

const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;

test('input.from, output.as and export.as written as objects (dsl-reference Input, Output, Export: string or object) are evaluated, the workflow’s and a task’s', async () => {
  const h = harness();
  try {
    const record = await runToEnd(
      h,
      yaml(`${head('object-transforms')}
input:
  from:
    order: \${ .order }
    fixed: 1
output:
  as:
    result: \${ . }
    context: \${ $context }
do:
  - pick:
      input:
        from:
          pet: \${ .order.pet }
          raw: \${ $task.input.fixed }
      set:
        id: \${ .pet.id }
        raw: \${ .raw }
      output:
        as:
          petId: \${ .id }
          seen: \${ $input.raw }
      export:
        as:
          last: \${ .petId }
          out: \${ $output.seen }
`),
      { order: { pet: { id: 'p7' } }, dropped: true },
    );
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { result: { petId: 'p7', seen: 1 }, context: { last: 'p7', out: 1 } });
  } finally {
    await h.close();
  }
});

test('switch: the case without `when` is matched only when no other case matches (dsl-reference Switch Case), wherever it is listed; otherwise the first matching case', async () => {
  const h = harness();
  try {
    const document = yaml(`${head('switch-default')}
do:
  - route:
      switch:
        - fallback:
            then: other
        - small:
            when: .n < 10
            then: low
        - smaller:
            when: .n < 5
            then: end
  - other:
      set: { went: other }
      then: end
  - low:
      set: { went: low }
`);
    const low = await runToEnd(h, document, { n: 3 }, 'low');
    assert.deepEqual(low.output, { went: 'low' }, 'the first case whose when matches, not the default listed before it');
    const other = await runToEnd(h, document, { n: 30 }, 'other');
    assert.deepEqual(other.output, { went: 'other' }, 'no case matches: the default');
  } finally {
    await h.close();
  }
});

test("catch.errors.with filters on `details`, the error filter's name for the error's `detail` (the DSL's errorFilter): equal catches, different does not", async () => {
  const h = harness();
  try {
    const document = (details: string) =>
      yaml(`${head('catch-details')}
do:
  - guard:
      try:
        - fail:
            raise:
              error: { type: https://example.com/errors/quota, status: 429, detail: over quota }
      catch:
        errors:
          with:
            status: 429
            details: ${details}
        do:
          - handled:
              set: { caught: '\${ $error.detail }' }
`);
    const caught = await runToEnd(h, document('over quota'), {}, 'caught');
    assert.equal(caught.status, 'completed', JSON.stringify(caught.error));
    assert.deepEqual(caught.output, { caught: 'over quota' });
    const passed = await runToEnd(h, document('under quota'), {}, 'passed');
    assert.equal(passed.status, 'faulted');
    assert.equal(passed.error?.detail, 'over quota');
  } finally {
    await h.close();
  }
});

test('switch: a second case without `when` is refused before anything runs, naming its pointer (dsl-reference Switch Case: "there can be only one default case")', async () => {
  const h = harness();
  try {
    const document = yaml(`${head('two-defaults')}
do:
  - route:
      switch:
        - first:
            then: end
        - small:
            when: .n < 10
            then: end
        - second:
            then: continue
`);
    await assert.rejects(h.executor.start({ principalId: 'alice', invocationKey: 'two', document, input: { n: 1 } }), (error: AdapterError) => {
      assert.equal(error.kind, 'invalid-input');
      assert.match(error.message, /\/do\/0\/route\/switch\/2\/second: a second case without when/);
      return true;
    });
  } finally {
    await h.close();
  }
});

test('a duration written as a runtime expression (dsl-reference Duration) outside a wait is refused as unsupported, naming its pointer, not as "not a duration"; a wait evaluates one', async () => {
  const h = harness();
  try {
    const refused = async (body: string, pointer: string) => {
      const document = yaml(`${head('expression-durations')}${body}`);
      await assert.rejects(h.executor.start({ principalId: 'alice', invocationKey: pointer, document, input: { t: 'PT1S' } }), (error: AdapterError) => {
        assert.equal(error.kind, 'unsupported', error.message);
        assert.ok(error.message.includes(`${pointer}: a duration written as a runtime expression`), error.message);
        return true;
      });
    };
    const wait = 'do:\n  - pause:\n      wait: PT0.01S\n';
    await refused(`${wait}      timeout:\n        after: '\${ .t }'\n`, '/do/0/pause/timeout/after');
    await refused(`timeout:\n  after: '\${ .t }'\n${wait}`, '/timeout/after');
    await refused(`use:\n  timeouts:\n    short:\n      after: '\${ .t }'\n${wait}`, '/use/timeouts/short/after');
    await refused(
      `do:\n  - guard:\n      try:\n        - pause: { wait: PT0.01S }\n      catch:\n        retry:\n          delay: '\${ .t }'\n`,
      '/do/0/guard/catch/retry/delay',
    );
    const waited = await runToEnd(h, yaml(`${head('expression-wait')}do:\n  - pause:\n      wait: '\${ .t }'\n`), { t: 'PT0.01S' }, 'waited');
    assert.equal(waited.status, 'completed', JSON.stringify(waited.error));
  } finally {
    await h.close();
  }
});

test('a wait is an expression exactly when its string is one, as everywhere else (wholly in `${ }`, spaces around it allowed): one with a space before is evaluated, one never closed is refused before anything runs', async () => {
  const h = harness();
  try {
    const spaced = await runToEnd(h, yaml(`${head('spaced-wait')}do:\n  - pause:\n      wait: ' \${ .d } '\n`), { d: 'PT0.01S' }, 'spaced');
    assert.equal(spaced.status, 'completed', JSON.stringify(spaced.error));
    const unclosed = yaml(`${head('unclosed-wait')}do:\n  - pause:\n      wait: '\${ .d'\n`);
    await assert.rejects(
      h.executor.start({ principalId: 'alice', invocationKey: 'unclosed', document: unclosed, input: { d: 'PT0.01S' } }),
      (error: AdapterError) => {
        assert.equal(error.kind, 'invalid-input', error.message);
        assert.ok(error.message.includes('/do/0/pause/wait: not a duration'), error.message);
        return true;
      },
    );
  } finally {
    await h.close();
  }
});
