/**
 * Live runs, their logs and their resumptions agree, over generated workflows: small documents of
 * set (with `export`), switch, for, do, try/catch, raise and `call: http` to a loopback service
 * answering generated JSON bodies — numbers JSON.parse reads as -0 or Infinity or rounds, keys
 * such as `__proto__` and `constructor`, duplicate keys, lone surrogates, escapes. For each:
 *
 *   - run once without a stop, the instance rebuilt from its log equals the live one (runToEnd);
 *   - run again on another store, its worker closed while its k-th request waits for an answer, a
 *     second worker resuming it from the log reaches the same end (status, output, error), and the
 *     instance it leaves rebuilt from its log equals the live one too.
 *
 * fast-check prints the seed and path of a failing case; CONVOKE_REPLAY_SEED=N runs that seed.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock } from '../../src/contract/clock.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonValue } from '../../src/contract/json.js';
import { parseDocumentText } from '../../src/workflow/dsl/text.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { assertReplayEqual, harness, runToEnd, type Harness } from './support.js';

const numRuns = 25;
const seed = process.env.CONVOKE_REPLAY_SEED === undefined ? undefined : Number(process.env.CONVOKE_REPLAY_SEED);

// ── the loopback service ───────────────────────────────────────────────

interface Answer {
  status: number;
  body: string;
}

/**
 * Answers `GET /n` with answers[n] (JSON, no date: two runs see the same headers, one of them named
 * `__proto__`); holds the `holdAt`-th request of a run unanswered and says so (`held`).
 */
class Service {
  answers: Answer[] = [];
  private seen = 0;
  private holdAt = 0;
  private onHeld: () => void = () => undefined;
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      this.seen += 1;
      if (this.seen === this.holdAt) return this.onHeld();
      const answer = this.answers[Number((request.url ?? '/0').slice(1))] ?? { status: 404, body: '' };
      response.sendDate = false;
      response.statusCode = answer.status;
      response.setHeader('content-type', 'application/json');
      response.setHeader('__proto__', 'odd');
      response.setHeader('constructor', 'odd');
      response.end(answer.body);
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** A new run: its answers, and the request to hold (0: none); resolves `held` when that request arrives. */
  run(answers: Answer[], holdAt: number): Promise<void> {
    this.answers = answers;
    this.seen = 0;
    this.holdAt = holdAt;
    return new Promise<void>((resolve) => (this.onHeld = resolve));
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

// ── generated documents ────────────────────────────────────────────────

type Task =
  | { kind: 'set'; members: [string, string][]; exported: boolean }
  | { kind: 'http'; answer: number; output: 'content' | 'response' | 'raw' }
  | { kind: 'switch'; when: string; then: 'continue' | 'exit' | 'end' }
  | { kind: 'raise'; status: number; title: string }
  | { kind: 'for'; list: Task[] }
  | { kind: 'do'; list: Task[] }
  | { kind: 'try'; list: Task[]; handler: Task[] | undefined };

/** Keys JavaScript treats apart from others: the prototype's names, an index, the empty key, a pointer's escapes. */
const oddKeys = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', '', '0', '01', '-1', 'a', 'a~b/c'];
const keyText = fc.constantFrom(...oddKeys).map((key) => JSON.stringify(key));

/** Number texts JSON.parse reads as -0, ±Infinity, 0, a rounded integer, or as written. */
const numberText = fc.constantFrom('-0', '-0.0', '-0e5', '1e400', '-1e400', '1e-400', '12345678901234567890', '0.1', '1E21', '5e-324', '-1', '7');
/** String texts: lone surrogates, an escaped pair, a NUL, a key's name, plain text. */
const stringText = fc.constantFrom('"\\ud800"', '"x\\udc00"', '"\\ud83d\\ude00"', '"\\u0000"', '"__proto__"', '"é"', '"a"');

const { value: valueText } = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { maxDepth: 3, depthIdentifier: 'body' },
    numberText,
    stringText,
    fc.constantFrom('true', 'null'),
    fc.array(tie('value'), { maxLength: 3 }).map((items) => `[${items.join(',')}]`),
    // Duplicate keys too: JSON.parse keeps the last.
    fc.array(fc.tuple(keyText, tie('value')), { maxLength: 3 }).map((members) => `{${members.map(([key, value]) => `${key}:${value}`).join(',')}}`),
  ),
}));

const answer: fc.Arbitrary<Answer> = fc.record({ status: fc.constantFrom(200, 200, 200, 500), body: valueText });

/** Expressions over a task's input and the variables every task sees; some fail, which is an outcome too. */
const expression = fc.constantFrom(
  '${ . }',
  '${ .a }',
  '${ .__proto__ }',
  '${ .constructor }',
  '${ [.[]?] }',
  '${ keys? }',
  '${ tojson }',
  '${ -0 }',
  '${ 1e1000 }',
  '${ $context }',
  '${ $input }',
  '${ $workflow.input }',
  '${ {__proto__: .} }',
  '${ length }',
);
/** A member's value: an expression, or a constant written in the document. */
const memberValue = fc.oneof(
  expression.map((text) => JSON.stringify(text)),
  fc.constantFrom('-0', '{"__proto__": {"x": 1}}', '"\\u00e9"', '[1, -0.0]'),
);

const { list: taskList } = fc.letrec<{ task: Task; list: Task[] }>((tie) => ({
  task: fc.oneof(
    { maxDepth: 2, depthIdentifier: 'nesting' },
    fc.record({
      kind: fc.constant('set' as const),
      members: fc.uniqueArray(fc.tuple(keyText, memberValue), { minLength: 1, maxLength: 3, selector: ([key]) => key }),
      exported: fc.boolean(),
    }),
    {
      arbitrary: fc.record({
        kind: fc.constant('http' as const),
        answer: fc.integer({ min: 0, max: 2 }),
        output: fc.constantFrom('content' as const, 'response' as const, 'raw' as const),
      }),
      weight: 3,
    },
    fc.record({ kind: fc.constant('switch' as const), when: expression, then: fc.constantFrom('continue' as const, 'exit' as const, 'end' as const) }),
    fc.record({ kind: fc.constant('raise' as const), status: fc.constantFrom(400, 503), title: expression }),
    fc.record({ kind: fc.constant('for' as const), list: tie('list') }),
    fc.record({ kind: fc.constant('do' as const), list: tie('list') }),
    fc.record({ kind: fc.constant('try' as const), list: tie('list'), handler: fc.option(tie('list'), { nil: undefined }) }),
  ),
  list: fc.array(tie('task'), { minLength: 1, maxLength: 3 }),
}));

/** The document's JSON text (parsed as a workflow file is: parseDocumentText), its tasks named by kind and place. */
function documentText(list: Task[], url: string): string {
  const listText = (tasks: Task[]): string => `[${tasks.map((task, index) => `{"${task.kind}${index}": ${taskText(task)}}`).join(',')}]`;
  const taskText = (task: Task): string => {
    switch (task.kind) {
      case 'set':
        return `{"set": {${task.members.map(([key, value]) => `${key}: ${value}`).join(',')}}${task.exported ? ', "export": {"as": "${ . }"}' : ''}}`;
      case 'http':
        return JSON.stringify({ call: 'http', with: { method: 'get', endpoint: `${url}/${task.answer}`, output: task.output } });
      case 'switch':
        return JSON.stringify({ switch: [{ chosen: { when: task.when, then: task.then } }] });
      case 'raise':
        return JSON.stringify({ raise: { error: { type: 'https://example.com/errors/generated', status: task.status, title: task.title } } });
      case 'for':
        return `{"for": {"in": "\${ [.[]?] | .[0:2] }", "each": "item"}, "do": ${listText(task.list)}}`;
      case 'do':
        return `{"do": ${listText(task.list)}}`;
      case 'try':
        return `{"try": ${listText(task.list)}, "catch": {"as": "failure"${task.handler ? `, "do": ${listText(task.handler)}` : ''}}}`;
    }
  };
  return `{"document": {"dsl": "1.0.3", "namespace": "test", "name": "generated", "version": "1.0.0"}, "do": ${listText(list)}}`;
}

// ── the property ───────────────────────────────────────────────────────

const service = new Service();
const clock = new SystemClock();
let jq: JqWorkerEvaluator;

before(async () => {
  await service.start();
  jq = new JqWorkerEvaluator({ deadlineMs: 5000 });
});
after(async () => {
  await jq.close();
  await service.close();
});

/** A worker on `store` evaluating with the one jq evaluator every worker here shares. */
const worker = (store: MemoryEventStore): Harness => harness({ store, clock, evaluator: () => jq });

const endOf = (record: WorkflowRecord) => ({ status: record.status, output: record.output, error: record.error });

test('generated workflows over odd HTTP answers: the live instance equals its log, and a worker resuming it mid-way reaches the same end', async () => {
  await fc.assert(
    fc.asyncProperty(
      taskList,
      taskList,
      fc.array(answer, { minLength: 3, maxLength: 3 }),
      fc.integer({ min: 1, max: 3 }),
      async (leading, trailing, answers, holdAt) => {
        // A call between two generated lists: most runs make a request or more, and most resumptions start from a log with facts in it.
        const list: Task[] = [...leading, { kind: 'http', answer: 0, output: 'content' }, ...trailing];
        const document = parseDocumentText(documentText(list, service.url), 'workflow');
        const input: JsonValue = parseStrict('{"a": [1, {"__proto__": 2}], "b": "x"}');

        void service.run(answers, 0);
        const whole = worker(new MemoryEventStore({ clock }));
        let uninterrupted: ReturnType<typeof endOf>;
        try {
          uninterrupted = endOf(await runToEnd(whole, document, input, 'generated'));
        } finally {
          await whole.close();
        }

        const held = service.run(answers, holdAt);
        const store = new MemoryEventStore({ clock });
        const first = worker(store);
        let instanceId: string;
        const waiting = new AbortController();
        try {
          ({ instanceId } = await first.executor.start({ principalId: 'alice', invocationKey: 'generated', document, input }));
          const instance = await first.executor.load(instanceId);
          assert.ok(instance);
          // Until the k-th request waits for its answer, or the instance ends before it.
          await Promise.race([held, first.executor.kernel.wait(instance, (record) => record.status !== 'running', 20_000, waiting.signal)]);
        } finally {
          waiting.abort();
          await first.close();
        }
        const second = worker(store);
        try {
          await second.executor.resume();
          const resumed = await second.executor.wait(instanceId, 20_000);
          assert.notEqual(resumed.status, 'running', 'the resumed instance ended');
          await assertReplayEqual(second, instanceId);
          assert.deepEqual(endOf(resumed), uninterrupted, 'the resumed instance ends as the uninterrupted one');
        } finally {
          await second.close();
        }
      },
    ),
    { numRuns, ...(seed === undefined ? {} : { seed }) },
  );
});
