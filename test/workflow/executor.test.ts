/**
 * The workflow executor beyond the conformance kit: stores (SQLite), recovery from a stopped
 * worker, timers as data, retries with backoff, task and workflow timeouts, fork outputs, the jq
 * deadline, idempotent starts, and refusals before anything runs. Every finished instance is
 * checked against its replay.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SqliteEventStore } from '../../src/adapters/store/sqlite.js';
import { SystemClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import type { JsonValue } from '../../src/contract/json.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import { assertReplayEqual, harness, runToEnd, yaml } from './support.js';

const head = (name: string) => `document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }\n`;

function temporaryDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'convoke-wf-'));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

async function until(check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) assert.fail('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('an instance on SQLite: the same key and input find the same instance, a different input is a conflict', async () => {
  const dir = temporaryDir();
  const clock = new SystemClock();
  const store = new SqliteEventStore({ path: join(dir.path, 'wf.db'), clock });
  const h = harness({ store, clock });
  try {
    const document = yaml(`${head('sqlite')}do:\n  - double:\n      set:\n        n: \${ .n * 2 }\n`);
    const record = await runToEnd(h, document, { n: 21 }, 'same');
    assert.deepEqual(record.output, { n: 42 });
    const again = await h.executor.start({ principalId: 'alice', invocationKey: 'same', document, input: { n: 21 } });
    assert.equal(again.created, false);
    assert.equal(again.instanceId, record.instanceId);
    await assert.rejects(
      h.executor.start({ principalId: 'alice', invocationKey: 'same', document, input: { n: 1 } }),
      (error: AdapterError) => error.kind === 'conflict',
    );
    const operations: string[] = [];
    for await (const id of store.operationIds()) operations.push(id);
    assert.deepEqual(operations, [], 'workflow streams are not listed as operations');
  } finally {
    await h.close();
    await store.close();
    dir.remove();
  }
});

test('a stopped worker: another executor on the same store resumes the instance, its timer at the recorded instant, no step evaluated twice', async () => {
  const dir = temporaryDir();
  const clock = new SystemClock();
  const path = join(dir.path, 'wf.db');
  const document = yaml(
    `${head('resume')}do:\n  - first:\n      set:\n        a: \${ .x + 1 }\n  - pause:\n      wait: { milliseconds: 700 }\n  - second:\n      set:\n        b: \${ .a + 1 }\n`,
  );
  const storeA = new SqliteEventStore({ path, clock });
  const a = harness({ store: storeA, clock });
  const { instanceId } = await a.executor.start({ principalId: 'alice', invocationKey: 'resume', document, input: { x: 1 } });
  await until(async () => Object.values((await a.executor.get(instanceId))?.timers ?? {}).length > 0);
  const timer = Object.values((await a.executor.get(instanceId))!.timers)[0]!;
  await a.close();
  await storeA.close();

  const storeB = new SqliteEventStore({ path, clock });
  const b = harness({ store: storeB, clock });
  const programs: string[] = [];
  const evaluate = b.evaluator.evaluate.bind(b.evaluator);
  b.evaluator.evaluate = (program, input, vars, principal) => (programs.push(program), evaluate(program, input, vars, principal));
  try {
    const record = await b.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed');
    assert.deepEqual(record.output, { b: 3 });
    assert.deepEqual(programs, [' .a + 1 '], 'only the step after the crash point was evaluated');
    const pause = Object.values(record.tasks).find((t) => t.name === 'pause')!;
    const second = Object.values(record.tasks).find((t) => t.name === 'second')!;
    assert.equal(record.timers[Object.keys(record.timers)[0]!]!.dueAtMs, timer.dueAtMs, 'the timer kept its recorded instant');
    assert.ok(second.startedAtMs >= timer.dueAtMs, 'the wait ended no earlier than its instant');
    assert.equal(pause.state, 'completed');
    await assertReplayEqual(b, instanceId);
  } finally {
    await b.close();
    await storeB.close();
    dir.remove();
  }
});

/** An HTTP server answering 503 the first `failures` times, then 200 {ok: true}. */
async function flaky(failures: number) {
  let calls = 0;
  const server = createServer((_req, res) => {
    calls++;
    res.writeHead(calls <= failures ? 503 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(calls <= failures ? { error: 'busy' } : { ok: true, calls }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/work`,
    calls: () => calls,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const retrying = (url: string, count: number, backoff: string) => `${head('retry')}do:
  - attempt:
      try:
        - callIt:
            call: http
            with: { method: get, endpoint: '${url}' }
      catch:
        errors:
          with: { type: https://serverlessworkflow.io/spec/1.0.0/errors/communication, status: 503 }
        retry:
          delay: { milliseconds: 40 }
          backoff: { ${backoff}: {} }
          limit: { attempt: { count: ${count} } }
          jitter: { from: { milliseconds: 0 }, to: { milliseconds: 20 } }
`;

test('try/catch retry: exponential backoff between attempts recorded as timers, success on the third attempt', async () => {
  const server = await flaky(2);
  const h = harness();
  try {
    const record = await runToEnd(h, yaml(retrying(server.url, 3, 'exponential')));
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { ok: true, calls: 3 });
    assert.equal(server.calls(), 3);
    const timers = Object.entries(record.timers).filter(([, t]) => t.purpose === 'retry');
    assert.equal(timers.length, 2);
    const faulted = Object.values(record.tasks).filter((t) => t.name === 'callIt' && t.state === 'faulted');
    assert.equal(faulted.length, 2);
    // Exponential: the second delay is at least twice the base after the second failure.
    const [first, second] = timers.map(([, t]) => t.dueAtMs);
    const failedAt = faulted.map((t) => t.startedAtMs).sort((x, y) => x - y);
    assert.ok(first! - failedAt[0]! >= 40 && second! - failedAt[1]! >= 80, 'delays grow exponentially');
  } finally {
    await h.close();
    await server.close();
  }
});

test('try/catch retry: the limit reached, the caught error goes to catch.do', async () => {
  const server = await flaky(10);
  const h = harness();
  try {
    const handled = `${retrying(server.url, 2, 'constant')}        do:\n          - giveUp:\n              set: { gaveUp: '\${ $error.status }', at: '\${ $error.instance }' }\n`;
    const record = await runToEnd(h, yaml(handled));
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(record.output, { gaveUp: 503, at: '/do/0/attempt/try/0/callIt' });
    assert.equal(server.calls(), 3, 'the first attempt and two retries');
  } finally {
    await h.close();
    await server.close();
  }
});

test('a task timeout faults the task with a timeout error (408) that try/catch can catch; a workflow timeout faults the instance', async () => {
  const h = harness();
  try {
    const caught = await runToEnd(
      h,
      yaml(`${head('task-timeout')}do:
  - guarded:
      try:
        - slow:
            wait: { seconds: 30 }
            timeout: { after: { milliseconds: 150 } }
      catch:
        errors: { with: { type: https://serverlessworkflow.io/spec/1.0.0/errors/timeout } }
        do:
          - note:
              set: { timedOut: '\${ $error.status }' }
`),
      {},
      't1',
    );
    assert.equal(caught.status, 'completed', JSON.stringify(caught.error));
    assert.deepEqual(caught.output, { timedOut: 408 });
    const slow = Object.values(caught.tasks).find((t) => t.name === 'slow')!;
    assert.equal(slow.state, 'faulted');
    assert.equal(slow.error?.instance, '/do/0/guarded/try/0/slow');

    const whole = await runToEnd(
      h,
      yaml(`${head('workflow-timeout')}timeout: { after: { milliseconds: 150 } }\ndo:\n  - slow:\n      wait: { seconds: 30 }\n`),
      {},
      't2',
    );
    assert.equal(whole.status, 'faulted');
    assert.equal(whole.error?.status, 408);
    // The deadline counts from the start's commit instant, the instance's startedAtMs.
    const deadlineMs = whole.started.deadlineMs!;
    assert.equal(deadlineMs - whole.startedAtMs, 150, `deadline ${deadlineMs}, started ${whole.startedAtMs}`);
    assert.ok(whole.endedAtMs! >= deadlineMs, `faulted at ${whole.endedAtMs}, before the deadline ${deadlineMs}`);
  } finally {
    await h.close();
  }
});

test('a workflow timeout of 0 ms times the instance out at its start: no task is recorded, not even with the start', async () => {
  const h = harness();
  try {
    // A document whose whole run is one transition (its end carried with the start), one that waits, and one that calls.
    const documents = {
      set: `${head('zero-set')}timeout: { after: PT0S }\ndo:\n  - quick:\n      set: { done: true }\n`,
      wait: `${head('zero-wait')}timeout: { after: { milliseconds: 0 } }\ndo:\n  - pause:\n      wait: { milliseconds: 50 }\n`,
      raise: `${head('zero-raise')}timeout: { after: PT0S }\ndo:\n  - fail:\n      raise: { error: { type: https://convoke.dev/errors/test/refused, status: 418 } }\n`,
    };
    for (const [name, text] of Object.entries(documents)) {
      const record = await runToEnd(h, yaml(text), { n: 1 }, `zero-${name}`);
      assert.equal(record.status, 'faulted', `${name}: ${JSON.stringify(record.output)}`);
      assert.deepEqual(
        record.error && { type: record.error.type, status: record.error.status, instance: record.error.instance },
        { type: 'https://serverlessworkflow.io/spec/1.0.0/errors/timeout', status: 408, instance: '/' },
        name,
      );
      assert.equal(record.started.deadlineMs, record.startedAtMs, `${name}: the deadline is the start's instant`);
      // Every step commits before the deadline: with none after the start, nothing of the first task is in the log.
      assert.deepEqual(Object.keys(record.tasks), [], `${name}: no task recorded`);
      assert.ok(record.endedAtMs! >= record.startedAtMs);
    }
  } finally {
    await h.close();
  }
});

test('the workflow timeout counts from the start commit instant (startedAtMs), even when the store clock is behind the worker', async () => {
  const system = new SystemClock();
  const lagMs = 1000;
  // The store's clock (its serialization instants) is a second behind the worker's.
  const storeClock = { nowMs: () => system.nowMs() - lagMs, at: (atMs: number, fn: () => void) => system.at(atMs + lagMs, fn) };
  const h = harness({ store: new MemoryEventStore({ clock: storeClock }), clock: system });
  try {
    const record = await runToEnd(
      h,
      yaml(`${head('lagging')}timeout: { after: { milliseconds: 150 } }\ndo:\n  - slow:\n      wait: { seconds: 30 }\n`),
      {},
      'lag',
    );
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.status, 408);
    assert.equal(record.started.deadlineMs, record.startedAtMs + 150, 'deadline = startedAtMs + timeout');
    assert.ok(record.endedAtMs! >= record.startedAtMs + 150, 'not before the deadline');
    assert.ok(
      record.endedAtMs! < record.startedAtMs + lagMs,
      `faulted ${record.endedAtMs! - record.startedAtMs} ms after the start: near its timeout, not after the clocks' lag`,
    );
  } finally {
    await h.close();
  }
});

test('fork: all branches output an array in declaration order; compete outputs the winner and cancels the others', async () => {
  const h = harness();
  try {
    const all = await runToEnd(
      h,
      yaml(`${head('fork-all')}do:
  - both:
      fork:
        branches:
          - slow: { wait: { milliseconds: 120 }, output: { as: '"slow"' } }
          - fast: { set: { v: fast } }
`),
      {},
      'f1',
    );
    assert.deepEqual(all.output, ['slow', { v: 'fast' }]);
    const race = await runToEnd(
      h,
      yaml(`${head('fork-compete')}do:
  - race:
      fork:
        compete: true
        branches:
          - slow: { wait: { seconds: 20 }, output: { as: '"slow"' } }
          - fast: { set: { v: fast } }
`),
      {},
      'f2',
    );
    assert.equal(race.status, 'completed');
    assert.deepEqual(race.output, { v: 'fast' });
    assert.equal(Object.values(race.winners)[0], 1);
    assert.equal(Object.values(race.tasks).find((t) => t.name === 'slow')?.state, 'cancelled');
  } finally {
    await h.close();
  }
});

test('compete: the tasks running inside a losing branch are recorded cancelled with it; what had completed there stays completed', async () => {
  const h = harness();
  try {
    const race = await runToEnd(
      h,
      yaml(`${head('fork-compete-nested')}do:
  - race:
      fork:
        compete: true
        branches:
          - slow:
              do:
                - first: { set: { a: 1 } }
                - deeper:
                    do:
                      - long: { wait: { seconds: 20 } }
          - fast:
              do:
                - soon: { wait: { milliseconds: 100 } }
                - done: { set: { v: fast } }
`),
      {},
      'f3',
    );
    assert.equal(race.status, 'completed', JSON.stringify(race.error));
    assert.deepEqual(race.output, { v: 'fast' });
    const states = Object.fromEntries(Object.values(race.tasks).map((task) => [task.name, task.state]));
    assert.deepEqual(states, {
      race: 'completed',
      slow: 'cancelled',
      first: 'completed',
      deeper: 'cancelled',
      long: 'cancelled',
      fast: 'completed',
      soon: 'completed',
      done: 'completed',
    });
  } finally {
    await h.close();
  }
});

test('a jq program past its deadline is an expression error (400); the runtime keeps answering', async () => {
  const h = harness();
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 2000 });
  try {
    // Runs for ever in constant memory (an allocating program would abort on memory first, on a fast machine before the deadline).
    await assert.rejects(evaluator.evaluate('last(range(1e15))', null, {}, 'alice'), /deadline/);
    assert.equal(await evaluator.evaluate('. + 1', 1, {}, 'alice'), 2, 'a fresh worker answers after the stuck one is terminated');
    const record = await runToEnd(h, yaml(`${head('bad-jq')}do:\n  - broken:\n      set: { v: '\${ .a | error("boom") }' }\n`), { a: 1 }, 'j1');
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.status, 400);
    assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/expression');
    assert.equal(record.error?.instance, '/do/0/broken');
  } finally {
    await evaluator.close();
    await h.close();
  }
});

test('refused before anything runs: unsupported tasks and calls name their JSON Pointer; non-deterministic jq is refused', async () => {
  const h = harness();
  const refuse = async (body: string, fragment: string, kind = 'unsupported') => {
    await assert.rejects(
      h.executor.start({ principalId: 'alice', invocationKey: 'x', document: yaml(`${head('refused')}${body}`), input: {} }),
      (error: AdapterError) => {
        assert.equal(error.kind, kind);
        assert.match(error.message, new RegExp(fragment));
        return true;
      },
    );
  };
  try {
    await refuse('do:\n  - ok: { set: { a: 1 } }\n  - sh:\n      run: { shell: { command: ls } }\n', '/do/1/sh: run \\(shell\\) is not supported');
    await refuse(
      'do:\n  - w:\n      run: { workflow: { namespace: t, name: elsewhere, version: 1.0.0 } }\n',
      '/do/0/w/run/workflow: the workflow t/elsewhere@1.0.0 is not pinned',
    );
    await refuse('do:\n  - g:\n      call: grpc\n      with: { proto: { endpoint: x }, service: { name: s, host: h }, method: m }\n', '/do/0/g: call grpc');
    await refuse('do:\n  - l:\n      listen: { to: { any: [] } }\n      foreach: { export: { as: . } }\n', '/do/0/l/foreach/export');
    await refuse(
      'do:\n  - l:\n      listen: { to: { any: [] }, foreach: { do: [] } }\n',
      '/do/0/l/listen/foreach: foreach sits beside listen',
      'invalid-input',
    );
    await refuse('do:\n  - t:\n      set: { at: "${ now }" }\n', 'uses "now"');
    await refuse('do:\n  - t:\n      set: { home: "${ $ENV.HOME }" }\n', 'ENV');
    await refuse('do:\n  - t:\n      call: myFunction\n', 'does not resolve');
    assert.equal(await h.executor.get('wf' + '0'.repeat(64)), undefined);
  } finally {
    await h.close();
  }
});

test('flow directives: a jump back to an earlier task runs it again under a new key, bounded by the task budget', async () => {
  const h = harness();
  try {
    const record = await runToEnd(
      h,
      yaml(`${head('loop')}do:
  - inc:
      set: { n: '\${ (.n // 0) + 1 }' }
  - check:
      switch:
        - again: { when: '.n < 3', then: inc }
        - done: { then: exit }
`),
    );
    assert.deepEqual(record.output, { n: 3 } as JsonValue);
    assert.equal(Object.values(record.tasks).filter((t) => t.name === 'inc').length, 3);
  } finally {
    await h.close();
  }
});
