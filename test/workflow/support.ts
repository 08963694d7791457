/**
 * Workflow test support: an executor on a real store (memory or SQLite), jq in its worker, HTTP
 * through the real fetch; and the replay check every workflow test makes — the instance rebuilt
 * from its stored log equals the live one.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { SystemClock, type Clock } from '../../src/contract/clock.js';
import type { CloudEventSink } from '../../src/contract/cloudevents.js';
import { isAdapterError, type AdapterErrorKind } from '../../src/contract/errors.js';
import type { JsonValue } from '../../src/contract/json.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { seededRandom } from '../../src/runtime/random.js';
import { isWorkflowNamed } from '../../src/workflow/exec/document.js';
import type { ContractCalls } from '../../src/workflow/exec/http-contracts.js';
import { WorkflowExecutor, type WorkflowExecutorOptions } from '../../src/workflow/exec/executor.js';
import { JqWorkerEvaluator, type ExpressionEvaluator, type JqWorkerOptions } from '../../src/workflow/exec/jq.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import type { WorkflowEvent } from '../../src/workflow/exec/events.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';

export interface Harness {
  executor: WorkflowExecutor;
  store: EventStore;
  evaluator: JqWorkerEvaluator;
  close(): Promise<void>;
}

export interface HarnessOptions {
  store?: EventStore;
  clock?: Clock;
  fetch?: typeof fetch;
  invocations?: ContractCalls;
  seed?: number;
  events?: CloudEventSink;
  worker?: string;
  leaseMs?: number;
  /** Wraps the harness's jq evaluator (a test that holds an evaluation's answer). */
  evaluator?: (jq: ExpressionEvaluator) => ExpressionEvaluator;
  /** The jq evaluator's bounds beside its 5 s deadline (small ones, to reach them quickly). */
  jq?: JqWorkerOptions;
  listenUntilWaitMs?: number;
  eventMatchesMax?: number;
  /** The documents `run: workflow` may name beside an instance's own. */
  workflows?: WorkflowExecutorOptions['workflows'];
  secrets?: WorkflowExecutorOptions['secrets'];
  secretOrigins?: WorkflowExecutorOptions['secretOrigins'];
  openApiDocumentKeepMs?: number;
  /** How long one HTTP request may take (the executor's default: 30 s). */
  httpTimeoutMs?: number;
  /** The egress policy of HTTP calls (exclusive with fetch). */
  egress?: WorkflowExecutorOptions['egress'];
  /** An instance's task executions, running transitions and running log bytes (below the limits, to reach them quickly). */
  tasksMax?: number;
  transitionsMax?: number;
  logBytesMax?: number;
  onFailure?: WorkflowExecutorOptions['onFailure'];
  /** Each principal's bound of running instances. */
  runningPerPrincipal?: number;
  /** Each principal's rate of caller starts. */
  startRate?: WorkflowExecutorOptions['startRate'];
  onStartRefused?: WorkflowExecutorOptions['onStartRefused'];
}

export function harness(options: HarnessOptions = {}): Harness {
  const clock = options.clock ?? new SystemClock();
  const store = options.store ?? new MemoryEventStore({ clock });
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000, ...options.jq });
  const executor = new WorkflowExecutor({
    store: workflowStreams(store),
    clock,
    random: seededRandom(options.seed ?? 7),
    evaluator: options.evaluator ? options.evaluator(evaluator) : evaluator,
    fetch: options.fetch,
    invocations: options.invocations,
    events: options.events,
    worker: options.worker,
    leaseMs: options.leaseMs,
    listenUntilWaitMs: options.listenUntilWaitMs,
    eventMatchesMax: options.eventMatchesMax,
    workflows: options.workflows,
    secrets: options.secrets,
    secretOrigins: options.secretOrigins,
    openApiDocumentKeepMs: options.openApiDocumentKeepMs,
    httpTimeoutMs: options.httpTimeoutMs,
    egress: options.egress,
    tasksMax: options.tasksMax,
    transitionsMax: options.transitionsMax,
    logBytesMax: options.logBytesMax,
    onFailure: options.onFailure,
    runningPerPrincipal: options.runningPerPrincipal,
    startRate: options.startRate,
    onStartRefused: options.onStartRefused,
  });
  return {
    executor,
    store,
    evaluator,
    close: async () => {
      await executor.close();
      await evaluator.close();
    },
  };
}

export const yaml = (text: string): JsonValue => parseYaml(text) as JsonValue;

/** A workflow `t/quick` that sets `{done: true}` and ends: no expression, no timer, nothing outside. */
export const quickDocument: JsonValue = yaml(`
document: { dsl: '1.0.3', namespace: t, name: quick, version: '1.0.0' }
do:
  - done:
      set: { done: true }
`);

/** A workflow `t/stays` that runs `t/quick` (quickDocument) to its end, then waits `minutes`: a parent that outlives the child it ran. */
export const staysDocument = (minutes: number): JsonValue =>
  yaml(`
document: { dsl: '1.0.3', namespace: t, name: stays, version: '1.0.0' }
do:
  - child:
      run:
        workflow: { namespace: t, name: quick, version: '1.0.0' }
  - pause:
      wait: { minutes: ${minutes} }
`);

/** A workflow `t/slow` that waits ten minutes: a child still running when its parent ends. */
export const slowDocument: JsonValue = yaml(`
document: { dsl: '1.0.3', namespace: t, name: slow, version: '1.0.0' }
do:
  - pause:
      wait: { minutes: 10 }
`);

/** A workflow `t/faults` that starts `t/slow` (slowDocument) without awaiting it, then faults: it owes the record of what became of its child. */
export const faultsDocument: JsonValue = yaml(`
document: { dsl: '1.0.3', namespace: t, name: faults, version: '1.0.0' }
do:
  - start:
      run:
        workflow: { namespace: t, name: slow, version: '1.0.0' }
        await: false
  - fail:
      raise:
        error: { type: 'https://example.com/boom', status: 500 }
`);

/** A workflow `t/<name>` whose one task, `delegate`, runs the workflow `t/<child>` 1.0.0 and awaits its end. */
export const delegatingParent = (name: string, child: string): JsonValue =>
  yaml(`
document: { dsl: '1.0.3', namespace: t, name: ${name}, version: '1.0.0' }
do:
  - delegate:
      run:
        workflow: { namespace: t, name: ${child}, version: '1.0.0' }
`);

/** A harness's `workflows`: the one of `documents` a `run: workflow` names. */
export function workflowsAmong(documents: readonly JsonValue[]): NonNullable<HarnessOptions['workflows']> {
  return (_digest, ref) => documents.find((document) => isWorkflowNamed(document, ref));
}

/** Starts and waits for the instance to finish; asserts the replayed record equals the live one. */
export async function runToEnd(h: Harness, document: JsonValue, input: JsonValue = {}, key = 'k1', waitMs = 20_000): Promise<WorkflowRecord> {
  const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: key, document, input });
  const record = await h.executor.wait(instanceId, waitMs);
  assert.notEqual(record.status, 'running', `instance ${instanceId} did not finish within ${waitMs} ms`);
  await assertReplayEqual(h, instanceId);
  return record;
}

export async function assertReplayEqual(h: Harness, instanceId: string): Promise<void> {
  const live = await h.executor.get(instanceId);
  const replayed = await h.executor.replay(instanceId);
  assert.ok(live && replayed);
  assert.deepEqual(replayed, live, 'the instance rebuilt from its log equals the live one');
}

/** Task names in the order they started. */
export function startOrder(record: WorkflowRecord): string[] {
  return Object.values(record.tasks)
    .sort((a, b) => a.startedSeq - b.startedSeq)
    .map((task) => task.name);
}

/** A loopback HTTP service that records the headers of every request and answers `answer(headers)` as JSON. */
export async function headerEchoServer(
  answer: (headers: IncomingHttpHeaders) => JsonValue,
): Promise<{ url: string; seen: IncomingHttpHeaders[]; close(): Promise<void> }> {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((request, response) => {
    seen.push(request.headers);
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify(answer(request.headers)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, seen, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** Runs `fn` with a loopback service answering `{}` to every request (the paths, as sent, kept in `paths`) and a harness; both closed after. */
export async function withPathService(fn: (base: string, paths: string[], h: Harness) => Promise<void>): Promise<void> {
  const paths: string[] = [];
  const server = createServer((request, response) => {
    paths.push(request.url ?? '');
    response.setHeader('content-type', 'application/json');
    response.end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const h = harness();
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, paths, h);
  } finally {
    await h.close();
    await new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));
  }
}

/**
 * Asserts that `run` throws an AdapterError of `kind` whose description names `pointer` first
 * (and matches `says`, when given); answers the description.
 */
export function refused(run: () => unknown, kind: AdapterErrorKind, pointer: string, says?: RegExp): string {
  try {
    run();
  } catch (error) {
    assert.ok(isAdapterError(error), String(error));
    assert.equal(error.kind, kind, error.message);
    assert.ok(error.description?.startsWith(`${pointer}:`), `names ${pointer}: ${error.message}`);
    if (says) assert.match(error.description ?? '', says);
    return error.description ?? '';
  }
  assert.fail('accepted');
}

/** The instance of the bare start below: alice's, of workflow `w` under key `k` in a bundle of digest zero. */
const bareInstanceId = workflowInstanceId('alice', `sha256:${'0'.repeat(64)}`, 'w', 'k');

/** A workflow-started event of bareInstanceId (an empty document, an empty input) with `extra` fields: its deadline or timeout, as the test needs. */
export function bareStarted(extra: Readonly<Record<string, JsonValue>>): WorkflowEvent {
  return {
    type: 'workflow-started',
    v: 1,
    instanceId: bareInstanceId,
    principalId: 'alice',
    invocationKey: 'k',
    workflowName: 'w',
    bundleDigest: `sha256:${'0'.repeat(64)}`,
    document: { do: [] },
    input: {},
    ...extra,
  } as WorkflowEvent;
}

/** Polls `predicate` every 5 ms of real time (the instance's work is asynchronous), for at most 2 s, without moving an injected clock. */
export async function eventually(predicate: () => Promise<boolean>, what: string): Promise<void> {
  for (let tries = 0; tries < 400; tries++) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.fail(`timed out waiting for ${what}`);
}
