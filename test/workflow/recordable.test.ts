/**
 * Whatever a document or a caller's input puts into what a task records fits the log's event
 * schemas (events.ts), so the task ends and the instance with it: a value the schema cannot hold
 * would make every drive of the instance decide the same invalid transition (an assertion), and
 * the instance would run for ever, retried once a second.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { delegatingParent, harness, headerEchoServer, runToEnd, workflowsAmong, yaml } from './support.js';

const validation = 'https://serverlessworkflow.io/spec/1.0.0/errors/validation';
const runtime = 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime';
const head = `document: { dsl: '1.0.3', namespace: test, name: rec, version: '1.0.0' }\n`;

/** `text` (YAML) with `spaces` more spaces before each of its lines. */
const indented = (text: string, spaces: number): string => text.replace(/^(?=.)/gm, ' '.repeat(spaces));

/** The task `review`, a list item of YAML: a fork of two branches, each setting a text of `chars` characters. */
const review = (chars: number): string => `- review:
    fork:
      branches:
        - left:
            set: { text: '\${ "l" * ${chars} }' }
        - right:
            set: { text: '\${ "r" * ${chars} }' }
`;

/**
 * `task` (a list item of YAML) inside a try that catches a runtime error (its output: where the
 * error was raised), then one more task.
 */
const guarded = (task: string): JsonValue =>
  yaml(`${head}do:
  - guarded:
      try:
${indented(task, 8)}      catch:
        errors: { with: { type: '${runtime}' } }
        as: problem
        do:
          - report:
              set: '\${ { caught: $problem.instance } }'
  - after:
      set: '\${ . + { done: true } }'
`);

/**
 * Case `key`: the instance faulted with a runtime error at `pointer` whose detail `says` so, the
 * task there recorded faulted with that error, and the task at `after` never ran.
 */
function assertFaultedAt(record: WorkflowRecord, key: string, pointer: string, says: RegExp, after: string): void {
  assert.equal(record.status, 'faulted', key);
  assert.equal(record.error?.instance, pointer, `${key}: ${JSON.stringify(record.error)}`);
  assert.equal(record.error?.type, runtime, key);
  assert.match(record.error?.detail ?? '', says, key);
  const made = Object.values(record.tasks).find((t) => t.ref === pointer);
  assert.equal(made?.state, 'faulted', `${key}: the task that made the value is recorded faulted, with the error`);
  assert.deepEqual(made?.error, record.error, key);
  assert.equal(
    Object.values(record.tasks).find((t) => t.ref === after),
    undefined,
    `${key}: nothing after it ran`,
  );
}

test('a raised error is recorded whatever its values: a status outside 100–999 or an overlong type is a validation error, a long title or detail is cut', async () => {
  const h = harness();
  try {
    for (const [key, status] of [
      ['low', 42],
      ['high', 1000],
    ] as const) {
      const record = await runToEnd(
        h,
        yaml(`${head}do:\n  - boom:\n      raise: { error: { type: 'https://example.com/boom', status: ${status} } }\n`),
        {},
        key,
      );
      assert.equal(record.status, 'faulted', key);
      assert.equal(record.error?.type, validation, key);
      assert.equal(record.error?.title, 'Invalid error definition', key);
      assert.match(record.error?.detail ?? '', new RegExp(`status is ${status}`), key);
    }
    // Values from the input: the caller chooses their length.
    const fromInput = yaml(
      `${head}do:\n  - boom:\n      raise: { error: { type: '\${ .type }', status: 500, title: '\${ .text }', detail: '\${ .text }' } }\n`,
    );
    const long = `${'x'.repeat(limits.workflowErrorDetailCharsMax + 4000)}`;
    const cut = await runToEnd(h, fromInput, { type: 'https://example.com/boom', text: long }, 'long');
    assert.equal(cut.status, 'faulted');
    assert.equal(cut.error?.type, 'https://example.com/boom', 'the raised error itself, its texts cut');
    assert.equal(cut.error?.title, long.slice(0, limits.workflowErrorTextCharsMax));
    assert.equal(cut.error?.detail, long.slice(0, limits.workflowErrorDetailCharsMax));
    // A cut never leaves half of a surrogate pair.
    const pairs = await runToEnd(h, fromInput, { type: 'https://example.com/boom', text: '😀'.repeat(limits.workflowErrorDetailCharsMax) }, 'pairs');
    assert.equal(pairs.error?.detail, '😀'.repeat(limits.workflowErrorDetailCharsMax / 2));
    assert.equal(pairs.error?.title, '😀'.repeat(limits.workflowErrorTextCharsMax / 2));
    const type = await runToEnd(h, fromInput, { type: `https://example.com/${long}`, text: 'boom' }, 'type');
    assert.equal(type.status, 'faulted');
    assert.equal(type.error?.type, validation);
    assert.match(type.error?.detail ?? '', /type is longer than 4096 characters/);
    assert.deepEqual(h.executor.failures, [], 'every fault was recorded');
  } finally {
    await h.close();
  }
});

test("a service's long reason phrase is cut in the communication error's title, which is recorded", async () => {
  const phrase = 'No'.repeat(4000);
  const server = createServer((_request, response) => {
    response.statusCode = 502;
    response.statusMessage = phrase;
    response.end('down');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const h = harness();
  try {
    const record = await runToEnd(h, yaml(`${head}do:\n  - ask:\n      call: http\n      with: { method: get, endpoint: 'http://127.0.0.1:${port}/' }\n`));
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.status, 502);
    assert.equal(record.error?.title, `HTTP 502 ${phrase}`.slice(0, limits.workflowErrorTextCharsMax));
    assert.deepEqual(h.executor.failures, [], 'the fault was recorded');
  } finally {
    await h.close();
    await new Promise((resolve) => server.close(resolve));
  }
});

test("a task's name, a task's pointer and a workflow's name past what an execution records are refused before anything is recorded; at the bounds the instance runs", async () => {
  const h = harness();
  const max = limits.workflowNameCharsMax;
  const start = (document: JsonValue, key: string) => h.executor.start({ principalId: 'alice', invocationKey: key, document, input: {} });
  const nested = (names: string[], inner: JsonValue): JsonValue => names.reduceRight<JsonValue>((task, name) => ({ do: [{ [name]: task }] }), inner);
  try {
    const named = (name: string): JsonValue => yaml(`${head}do:\n  - ${name}:\n      set: { x: 1 }\n`);
    await assert.rejects(start(named('n'.repeat(max + 1)), 'name'), { kind: 'invalid-input', message: /\/do\/0: a task's name is at most 256 characters/ });
    // Nine tasks under names of 250 characters: a pointer of 2 300, its keys past what the log records.
    const deep = {
      document: { dsl: '1.0.3', namespace: 'test', name: 'deep', version: '1.0.0' },
      do: [
        {
          top: nested(
            Array.from({ length: 9 }, (_, i) => `${'n'.repeat(249)}${i}`),
            { set: {} },
          ),
        },
      ],
    };
    await assert.rejects(start(deep, 'deep'), { kind: 'invalid-input', message: /a task's JSON Pointer is at most 1024 characters/ });
    const child = { document: { dsl: '1.0.3', namespace: 'test', name: 'c'.repeat(max + 1), version: '1.0.0' }, do: [{ x: { set: {} } }] };
    await assert.rejects(start(child, 'child'), { kind: 'invalid-input', message: /\/document\/name: longer than 256 characters/ });
    for await (const id of h.store.workflowInstanceIds()) assert.fail(`${id} was recorded`);
    // At the bounds, with a marker for each loop, branch, attempt and revisit: recorded, and run to its end.
    const names = Array.from({ length: 3 }, (_, i) => `${'m'.repeat(max - 1)}${i}`);
    // A fourth name takes the deepest task's pointer to the bound exactly.
    const deepest = `/do/0/top${names.map((name) => `/do/0/${name}`).join('')}/do/0/again/try/0/fan/fork/branches/1/b`;
    names.push('f'.repeat(limits.workflowTaskPointerCharsMax - deepest.length - '/do/0/'.length));
    const inner: JsonValue = {
      for: { in: '${ [1, 2] }' },
      do: [
        {
          again: {
            try: [
              {
                fan: {
                  fork: {
                    branches: [
                      { a: { set: { a: 1 } } },
                      { b: { raise: { error: { type: 'https://example.com/once', status: 500 } }, if: '${ $index == 0 }' } },
                    ],
                  },
                },
              },
            ],
            catch: { retry: { delay: { milliseconds: 1 }, limit: { attempt: { count: 1 } } } },
          },
        },
      ],
    };
    const document = { document: { dsl: '1.0.3', namespace: 'test', name: 'n'.repeat(max), version: '1.0.0' }, do: [{ top: nested(names, inner) }] };
    const record = await runToEnd(h, document, {}, 'bounds');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.equal(Math.max(...Object.values(record.tasks).map((task) => task.ref.length)), limits.workflowTaskPointerCharsMax);
    const longest = Object.keys(record.tasks).reduce((a, b) => (b.length > a.length ? b : a));
    assert.ok(longest.length > limits.workflowTaskPointerCharsMax, `the longest key, ${longest.length} characters, has markers: ${longest.slice(-60)}`);
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test("a task's timeout ending past what a timer records faults the task with a validation error", async () => {
  const h = harness();
  try {
    // Just under 2^53 ms: a duration, but not once added to the task's start.
    const document = yaml(`${head}do:
  - nap:
      timeout: { after: { milliseconds: ${Number.MAX_SAFE_INTEGER - 1} } }
      wait: { milliseconds: 1 }
`);
    const record = await runToEnd(h, document, {}, 'timeout', 10_000);
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, validation);
    assert.equal(record.error?.title, 'Invalid timeout');
    assert.equal(record.error?.instance, '/do/0/nap');
    assert.equal(record.tasks['/do/0/nap']?.state, 'faulted');
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test("a workflow's timeout ending past what a timer records is refused at its start, naming it; one within it is indexed and counted", async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const h = harness({ clock, store, runningPerPrincipal: 2 });
  try {
    const timed = (after: string, use = '') =>
      yaml(`${head}${use}timeout: ${after}
do:
  - nap:
      wait: { minutes: 5 }
`);
    // A duration (just under 2^53 ms), but not once added to the start's instant: inline and named.
    const past = `{ milliseconds: ${Number.MAX_SAFE_INTEGER - 1} }`;
    for (const [key, document, pointer] of [
      ['inline', timed(`{ after: ${past} }`), '/timeout/after'],
      ['named', timed('long', `use: { timeouts: { long: { after: ${past} } } }\n`), '/use/timeouts/long/after'],
    ] as const) {
      await assert.rejects(
        h.executor.start({ principalId: 'alice', document, input: {}, invocationKey: key }),
        (error: unknown) =>
          error instanceof Error &&
          (error as { kind?: string }).kind === 'invalid-input' &&
          error.message.includes(`${pointer}:`) &&
          /past the latest instant a timer records/.test(error.message),
        key,
      );
    }
    assert.deepEqual((await store.workflowIndex.list({ limit: 10 })).rows, [], 'nothing was started');
    // The longest timeout that fits: its instance is indexed with its deadline, and counts against the running bound.
    const fits = Number.MAX_SAFE_INTEGER - clock.nowMs() - 3_600_000;
    const { instanceId } = await h.executor.start({
      principalId: 'alice',
      document: timed(`{ after: { milliseconds: ${fits} } }`),
      input: {},
      invocationKey: 'fits',
    });
    const row = await store.workflowIndex.get(instanceId);
    assert.equal(row?.status, 'running', 'the instance is indexed');
    assert.ok(Number.isSafeInteger(row?.deadlineMs), `its deadline ${row?.deadlineMs} is an instant`);
    await h.executor.start({ principalId: 'alice', document: timed('{ after: { hours: 1 } }'), input: {}, invocationKey: 'other' });
    await assert.rejects(
      h.executor.start({ principalId: 'alice', document: timed('{ after: { hours: 1 } }'), input: {}, invocationKey: 'third' }),
      (error: unknown) => (error as { kind?: string }).kind === 'unavailable',
      'both running instances count against the bound',
    );
  } finally {
    await h.close();
  }
});

test("a child whose workflow's timeout ends past what a timer records faults its parent's task with a validation error, not the instance at /", async () => {
  const child = yaml(`document: { dsl: '1.0.3', namespace: t, name: endless, version: '1.0.0' }
timeout: { after: { milliseconds: ${Number.MAX_SAFE_INTEGER - 1} } }
do:
  - nap:
      wait: { seconds: 1 }
`);
  const h = harness({ workflows: workflowsAmong([child]) });
  try {
    const record = await runToEnd(h, delegatingParent('parent', 'endless'), {}, 'child', 10_000);
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, validation);
    assert.equal(record.error?.instance, '/do/0/delegate');
    assert.match(record.error?.detail ?? '', /\/timeout\/after: .*past the latest instant a timer records/);
    assert.equal(record.tasks['/do/0/delegate']?.state, 'faulted');
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test("a contract call's invocation key from the input that no operation takes is a validation error at the task, caught like any", async () => {
  const h = harness();
  try {
    const document = yaml(`${head}do:
  - guarded:
      try:
        - call:
            call: invoke-contract
            with:
              contract: { id: shop, version: '1.0.0', digest: 'sha256:${'0'.repeat(64)}' }
              interaction: order
              input: {}
              invocationKey: '\${ .key }'
      catch:
        errors: { with: { type: '${validation}' } }
        as: problem
        do:
          - report:
              set: '\${ { caught: $problem.detail } }'
`);
    for (const [name, key] of [
      ['empty', ''],
      ['long', 'k'.repeat(limits.invocationKeyBytesMax + 1)],
      ['multibyte', 'é'.repeat(limits.invocationKeyBytesMax / 2 + 1)],
    ] as const) {
      const record = await runToEnd(h, document, { key }, name);
      assert.equal(record.status, 'completed', `${name}: ${JSON.stringify(record.error)}`);
      assert.match(JSON.stringify(record.output), /invocationKey must be 1 to 256 bytes of UTF-8/, name);
      assert.deepEqual(record.children, {}, `${name}: nothing was bound`);
    }
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});

test("a fork whose combined output is past what one transition records faults at the fork's own pointer, recorded faulted there", async () => {
  const clock = new SystemClock();
  // Each branch's value fits a transition; the two together (the fork's output) do not.
  const store = new MemoryEventStore({ clock, limits: { transitionBytesMax: 64 * 1024 } });
  const h = harness({ store, clock });
  try {
    const record = await runToEnd(
      h,
      yaml(`${head}do:\n  - prepare:\n      set: { n: 1 }\n${indented(review(40000), 2)}  - after:\n      set: { done: true }\n`),
    );
    assertFaultedAt(record, 'fork', '/do/1/review', /the output of task review/, '/do/2/after');
    assert.equal(record.error?.status, 500);
    // The fork's own error: a try around it catches it, and what follows runs.
    const caught = await runToEnd(h, guarded(review(40000)), {}, 'caught');
    assert.equal(caught.status, 'completed', JSON.stringify(caught.error));
    assert.deepEqual(caught.output, { caught: '/do/0/guarded/try/0/review', done: true });
  } finally {
    await h.close();
  }
});

test('a value a task made that is past what one transition records faults that task at its pointer, not the instance at /: an expression’s result, a call’s answer, in a fork branch beside another', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock, limits: { transitionBytesMax: 64 * 1024 } });
  const h = harness({ store, clock });
  // An idempotent GET: its answer is held for the next transition like an expression's result.
  const server = await headerEchoServer(() => ({ text: 'h'.repeat(70_000) }));
  try {
    const cases: [string, string, string][] = [
      ['expression', `  - make:\n      set: { text: '\${ "a" * 70000 }' }\n`, '/do/0/make'],
      ['call', `  - fetch:\n      call: http\n      with: { method: get, endpoint: '${server.url}/big' }\n`, '/do/0/fetch'],
      [
        'branch',
        `  - both:
      fork:
        branches:
          - small:
              set: { text: '\${ "s" * 10 }' }
          - large:
              set: { text: '\${ "l" * 70000 }' }
`,
        '/do/0/both/fork/branches/1/large',
      ],
    ];
    for (const [key, task, pointer] of cases) {
      const record = await runToEnd(h, yaml(`${head}do:\n${task}  - after:\n      set: { done: true }\n`), {}, key);
      assertFaultedAt(record, key, pointer, /bytes of JSON, more than the log records in one transition/, '/do/1/after');
      assert.equal(record.error?.status, 500, key);
    }
    // The task's own error: a try around it catches it, and what follows runs.
    const caught = await runToEnd(h, guarded(`- make:\n    set: { text: '\${ "a" * 70000 }' }\n`), {}, 'caught');
    assert.equal(caught.status, 'completed', JSON.stringify(caught.error));
    assert.deepEqual(caught.output, { caught: '/do/0/guarded/try/0/make', done: true });
  } finally {
    await server.close();
    await h.close();
  }
});

test('a value under workflowHeldOutputBytesMax but past what the store records in one transition faults the task that made it, not the instance at /', async () => {
  const clock = new SystemClock();
  // A store recording at most 20 KiB a transition (JetStream under a small max_payload): a 24 KB value is under the 32 KiB held bound.
  const store = new MemoryEventStore({ clock, limits: { transitionBytesMax: 20 * 1024 } });
  const h = harness({ store, clock });
  try {
    const cases: [string, string, string, RegExp][] = [
      ['fork', indented(review(12000), 2), '/do/0/review', /the output of task review is \d+ bytes of JSON/],
      ['expression', `  - make:\n      set: { text: '\${ "a" * 24000 }' }\n`, '/do/0/make', /the value of step .* is \d+ bytes of JSON/],
    ];
    for (const [key, task, pointer, says] of cases) {
      const record = await runToEnd(h, yaml(`${head}do:\n${task}  - after:\n      set: { done: true }\n`), {}, key);
      assertFaultedAt(record, key, pointer, says, '/do/1/after');
    }
    // Its own error: a try around it catches it, and what follows runs.
    const caught = await runToEnd(h, guarded(review(12000)), {}, 'caught');
    assert.equal(caught.status, 'completed', JSON.stringify(caught.error));
    assert.deepEqual(caught.output, { caught: '/do/0/guarded/try/0/review', done: true });
    // A value that fits beside the rest is held as before, and the instance completes.
    const fits = await runToEnd(h, yaml(`${head}do:\n  - make:\n      set: { text: '\${ "a" * 8000 }' }\n`), {}, 'fits');
    assert.equal(fits.status, 'completed', JSON.stringify(fits.error));
    assert.deepEqual(h.executor.failures, []);
  } finally {
    await h.close();
  }
});
