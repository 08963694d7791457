/**
 * Task execution keys (src/workflow/exec/keys.ts): two executions of the same task never share a
 * key, whatever flow directives revisit it or its enclosing tasks; logs written under the first
 * key scheme still fold, replay and resume under it; documents without revisits keep the keys
 * they always had. Every finished instance is checked against its replay.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { harness, runToEnd, yaml } from './support.js';

const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;

/** A fetch that counts its requests and answers each with its number. */
function countingFetch(): { fetcher: typeof fetch; calls: string[] } {
  const calls: string[] = [];
  const fetcher = (async (input: string | URL | Request) => {
    calls.push(String(input));
    return new Response(JSON.stringify({ n: calls.length }), { status: 200, headers: { 'content-type': 'application/json' } });
  }) as typeof fetch;
  return { fetcher, calls };
}

/**
 * `outer` runs twice (a switch at the top sends the flow back to it); inside each of its
 * executions `ping` runs twice (a switch inside sends the flow back to it). Four executions of
 * `ping`, four requests: none may find another's recorded answer.
 */
export const revisitedTwiceDeep = yaml(`${head('revisits')}do:
  - outer:
      do:
        - ping:
            call: http
            with: { method: get, endpoint: 'http://counter.test/ping' }
            output:
              as: '\${ $input + { calls: ($input.calls + [.n]) } }'
        - bump:
            set:
              calls: '\${ .calls }'
              inner: '\${ .inner + 1 }'
        - innerAgain:
            switch:
              - again: { when: '\${ .inner == 1 }', then: ping }
  - reset:
      set:
        calls: '\${ .calls }'
        inner: 0
      export:
        as: '\${ { rounds: (($context.rounds // 0) + 1) } }'
  - outerAgain:
      switch:
        - again: { when: '\${ $context.rounds == 1 }', then: outer }
`);

test('a task revisited inside each execution of a revisited task: every execution runs, its call made (no key shared with another execution)', async () => {
  const counting = countingFetch();
  const h = harness({ fetch: counting.fetcher });
  try {
    const record = await runToEnd(h, revisitedTwiceDeep, { calls: [], inner: 0 }, 'revisits');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(counting.calls.length, 4, 'ping made its request in each of its four executions');
    assert.deepEqual(record.output, { calls: [1, 2, 3, 4], inner: 0 });
    const named = (name: string) => Object.values(record.tasks).filter((task) => task.name === name).length;
    assert.equal(named('outer'), 2, 'outer ran twice');
    assert.equal(named('ping'), 4, 'four executions of ping recorded, under four keys');
  } finally {
    await h.close();
  }
});
