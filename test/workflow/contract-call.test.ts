/**
 * `call: invoke-contract` against an embedded deployment (in-process coordinator, bus and peers):
 * the child operation's key and id are recorded before the call; the task succeeds only on a
 * success decision; a worker that dies mid-call is resumed under the same key and finds the same
 * operation; a DSL retry after a failed decision is a new logical invocation with its own key.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock } from '../../src/contract/clock.js';
import { operationId } from '../../src/contract/ids.js';
import type { JsonValue } from '../../src/contract/json.js';
import { createEmbedded, type Embedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import type { InvocationService } from '../../src/runtime/service.js';
import { stageInvocationKey } from '../../src/workflow/ids.js';
import { harness, runToEnd, yaml } from './support.js';

/** The coordinator's service with `invoke` replaced. */
function withInvoke(embedded: Embedded, invoke: InvocationService['invoke']): InvocationService {
  const coordinator = embedded.coordinator;
  return {
    metrics: coordinator.metrics,
    invoke,
    get: (...args) => coordinator.get(...args),
    wait: (...args) => coordinator.wait(...args),
    cancel: (...args) => coordinator.cancel(...args),
    list: (...args) => coordinator.list(...args),
    inspect: (...args) => coordinator.inspect(...args),
    inspectLive: (...args) => coordinator.inspectLive(...args),
    followOperation: (...args) => coordinator.followOperation(...args),
    followOperations: (...args) => coordinator.followOperations(...args),
  };
}

async function deployment(verdict: 'approve' | 'reject', clock: SystemClock, store: MemoryEventStore): Promise<Embedded> {
  const peers = peerIds(3);
  const embedded = await createEmbedded({
    clock,
    store,
    bundle: reviewBundle({ completion: { mode: 'quorum', count: 2 }, timeoutMs: 4000 }),
    groups: { reviewers: peers },
  });
  for (const peerId of peers) await embedded.addPeer(peerId, { review: async () => ({ verdict }) });
  return embedded;
}

const pipeline = (digest: string, body = '') => `document: { dsl: '1.0.3', namespace: test, name: review-then-publish, version: '1.0.0' }
do:
${
  body ||
  `  - review:
      call: invoke-contract
      with:
        contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
        interaction: review
        input:
          document: \${ .doc }
  - publish:
      set:
        published: \${ .decision.outcome }
        operation: \${ .operationId }`
}
`;

/** A review call retried once on a failed decision, then given up: under the document's key when it names one. */
const guardedReview = (digest: string, invocationKey?: string) => `  - guarded:
      try:
        - review:
            call: invoke-contract
            with:
              contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
              interaction: review
              input: { document: x }${invocationKey === undefined ? '' : `\n              invocationKey: ${invocationKey}`}
      catch:
        errors: { with: { type: https://convoke.dev/errors/workflow/decision } }
        retry: { delay: { milliseconds: 10 }, limit: { attempt: { count: 1 } } }
        do:
          - giveUp: { set: { gaveUp: true } }`;

test('a contract call: the child operation is bound before the call, the decision gates the task, the log replays', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment('approve', clock, store);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const digest = embedded.bundle.ref.digest;
    const record = await runToEnd(h, yaml(pipeline(digest)), { doc: 'RFC 9' }, 'order-1');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const key = stageInvocationKey('order-1', { pointer: '/do/0/review', iterations: [], attempt: 1 });
    const expected = operationId('alice', digest, key);
    assert.deepEqual(record.output, { published: 'success', operation: expected } as JsonValue);
    assert.equal(record.children['/do/0/review']?.operationId, expected);
    const read = await h.executor.replay(record.instanceId);
    assert.ok(read);
    const log = await store.read(record.instanceId);
    assert.equal(log.kind, 'ok');
    const kinds = log.kind === 'ok' ? log.transitions.flatMap((t) => (t.transition.events as unknown as { type: string }[]).map((e) => e.type)) : [];
    assert.ok(kinds.indexOf('child-bound') < kinds.indexOf('call-answered'), 'the key and id are recorded before the answer');
    const operation = await embedded.coordinator.get('alice', expected);
    assert.equal(operation.decision?.outcome, 'success');
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('a worker that dies mid-call: another executor calls again under the same key and finds the same operation', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment('approve', clock, store);
  let crash: () => void = () => undefined;
  const crashed = new Promise<void>((resolve) => (crash = resolve));
  // The first worker's call reaches the coordinator, then the worker "dies" before it records the answer.
  const dying = withInvoke(embedded, async (caller, request) => {
    await embedded.coordinator.invoke(caller, request);
    await crashed;
    throw new Error('worker killed');
  });
  const a = harness({ store, clock, invocations: dying });
  const document = yaml(pipeline(embedded.bundle.ref.digest));
  const { instanceId } = await a.executor.start({ principalId: 'alice', invocationKey: 'order-2', document, input: { doc: 'RFC 10' } });
  while (!(await a.executor.get(instanceId))?.children['/do/0/review']) await new Promise((r) => setTimeout(r, 10));
  const bound = (await a.executor.get(instanceId))!.children['/do/0/review']!;
  crash();
  await a.close();

  const created: boolean[] = [];
  const counting = withInvoke(embedded, async (caller, request) => {
    const answer = await embedded.coordinator.invoke(caller, request);
    created.push(answer.created);
    return answer;
  });
  const b = harness({ store, clock, invocations: counting });
  try {
    const record = await b.executor.wait(instanceId, 10_000);
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    assert.deepEqual(created, [false], 'the resumed call found the operation the first worker admitted');
    assert.equal(record.children['/do/0/review']?.operationId, bound.operationId);
    const operations: string[] = [];
    for await (const id of store.operationIds()) operations.push(id);
    assert.deepEqual(operations, [bound.operationId], 'one operation for the stage');
  } finally {
    await b.close();
    await embedded.close();
  }
});

test('a failed decision raises a typed error; a DSL retry is a new logical invocation under its own key', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment('reject', clock, store);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const digest = embedded.bundle.ref.digest;
    const plain = await runToEnd(h, yaml(pipeline(digest)), { doc: 'bad' }, 'order-3');
    assert.equal(plain.status, 'faulted');
    assert.equal(plain.error?.type, 'https://convoke.dev/errors/workflow/decision');
    assert.equal(plain.error?.instance, '/do/0/review');
    assert.equal(
      Object.values(plain.tasks).find((t) => t.name === 'publish'),
      undefined,
      'the pipeline stopped',
    );

    const retried = await runToEnd(h, yaml(pipeline(digest, guardedReview(digest))), {}, 'order-4');
    assert.deepEqual(retried.output, { gaveUp: true });
    const children = Object.values(retried.children).sort((x, y) => x.attempt - y.attempt);
    assert.deepEqual(
      children.map((c) => c.attempt),
      [1, 2],
    );
    for (const child of children) {
      assert.equal(child.invocationKey, stageInvocationKey('order-4', { pointer: '/do/0/guarded/try/0/review', iterations: [], attempt: child.attempt }));
      assert.equal(child.operationId, operationId('alice', digest, child.invocationKey));
    }
    assert.notEqual(children[0]!.operationId, children[1]!.operationId);
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('a success decision whose aggregate output fails its schema raises a typed error: the projection failure stops the pipeline', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const peers = peerIds(3);
  const embedded = await createEmbedded({
    clock,
    store,
    bundle: reviewBundle({
      completion: { mode: 'quorum', count: 2 },
      timeoutMs: 4000,
      aggregate: { kind: 'tally', pointer: '/verdict' },
      output: { type: 'object', required: ['impossible'] },
    }),
    groups: { reviewers: peers },
  });
  for (const peerId of peers) await embedded.addPeer(peerId, { review: async () => ({ verdict: 'approve' }) });
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const digest = embedded.bundle.ref.digest;
    const record = await runToEnd(h, yaml(pipeline(digest)), { doc: 'RFC 9' }, 'order-5');
    assert.equal(record.status, 'faulted', JSON.stringify(record.output));
    assert.equal(record.error?.type, 'https://convoke.dev/errors/workflow/output');
    assert.equal(record.error?.instance, '/do/0/review');
    assert.match(record.error?.detail ?? '', /decided success.*invalid-input.*output schema/);
    assert.equal(
      Object.values(record.tasks).find((t) => t.name === 'publish'),
      undefined,
      'the pipeline stopped',
    );
    const operation = await embedded.coordinator.get('alice', record.children['/do/0/review']!.operationId);
    assert.equal(operation.decision?.outcome, 'success', 'the votes stand: the decision is not erased');
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('a DSL retry of a call whose key the document gives is a new logical invocation too: its key derived from the given one', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment('reject', clock, store);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const digest = embedded.bundle.ref.digest;
    const retried = await runToEnd(h, yaml(pipeline(digest, guardedReview(digest, 'release-7'))), {}, 'order-6');
    assert.deepEqual(retried.output, { gaveUp: true });
    const children = Object.values(retried.children).sort((x, y) => x.attempt - y.attempt);
    assert.deepEqual(
      children.map((c) => c.invocationKey),
      ['release-7', stageInvocationKey('release-7', { pointer: '/do/0/guarded/try/0/review', iterations: [], attempt: 2 })],
      'the first invocation under the given key, the retry under one derived from it',
    );
    assert.notEqual(children[0]!.operationId, children[1]!.operationId, 'the retry is another operation');
    const operations: string[] = [];
    for await (const id of store.operationIds()) operations.push(id);
    assert.equal(operations.length, 2);
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('a contract call in a for loop: each iteration is bound under the key of its pointer and iteration index, before its call', async () => {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const embedded = await deployment('approve', clock, store);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const digest = embedded.bundle.ref.digest;
    const record = await runToEnd(
      h,
      yaml(
        pipeline(
          digest,
          `  - each:
      for: { each: doc, in: '\${ .docs }' }
      do:
        - review:
            call: invoke-contract
            with:
              contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
              interaction: review
              input: { document: '\${ $doc }' }`,
        ),
      ),
      { docs: ['a', 'b'] },
      'order-7',
    );
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const children = Object.values(record.children).sort((x, y) => (x.iterations[0] ?? 0) - (y.iterations[0] ?? 0));
    assert.deepEqual(
      children.map((c) => [c.iterations, c.attempt, c.invocationKey]),
      [0, 1].map((i) => [[i], 1, stageInvocationKey('order-7', { pointer: '/do/0/each/do/0/review', iterations: [i], attempt: 1 })]),
    );
    for (const child of children) assert.equal(child.operationId, operationId('alice', digest, child.invocationKey));
  } finally {
    await h.close();
    await embedded.close();
  }
});
