/**
 * The peer SDK's own memory of a branch (spec: "Workers must retain/return the existing result for
 * the same logical work"; "Peers reject stale fences"): a redelivered request is answered from the
 * stored result without running the handler again, a request or cancel with an older fence is
 * dropped, and a cancel for the attempt that already finished answers already-completed — for that
 * attempt and fence only.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryBus } from '../../src/adapters/transport/memory.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import type { JsonValue } from '../../src/contract/json.js';
import { encodeWire, type CancelRequest, type CancelResult, type RequestMessage, type ResultMessage } from '../../src/events/wire.js';
import type { InboundMessage, Transport } from '../../src/adapters/transport/types.js';
import { createPeer, type Peer } from '../../src/peer/peer.js';
import { flushMicrotasks, VirtualClock } from '../../src/contract/clock.js';
import { peerBusPermissions } from '../../src/deployment/embedded.js';

const namespace = 'demo.v1.lab';
const operationId = `op${'a'.repeat(64)}`;
const decode = (data: Uint8Array) => JSON.parse(new TextDecoder().decode(data)) as unknown;

/** The review request of attempt `attempt` under `fence` to peer alfa. */
const reviewRequest = (attempt = 1, fence = 1): RequestMessage => ({
  kind: 'request',
  operationId,
  contract: { id: 'lab.review', version: '1.0.0', digest: `sha256:${'b'.repeat(64)}` },
  interaction: 'review',
  branchId: 'alfa',
  peerId: 'alfa',
  attempt,
  fence,
  deadlineMs: Date.now() + 60_000,
  leaseUntilMs: Date.now() + 60_000,
  renewIntervalMs: 10_000,
  publicationId: `${attempt}`.padStart(64, '0'),
  input: { document: 'd' },
});

/** The cancel of that attempt after the decision closed. */
const decisionCancel = (attempt = 1, fence = 1): CancelRequest => ({
  kind: 'cancel',
  operationId,
  branchId: 'alfa',
  peerId: 'alfa',
  attempt,
  fence,
  reason: 'decision-closed',
});

/**
 * Delivers `message` on `subject` to the handler a peer subscribed for `kind` (through a transport
 * that handed the test its handlers) and answers how the message was settled (ack or nak).
 */
async function deliverTo(
  handlers: ReadonlyMap<string, (m: InboundMessage) => void | Promise<void>>,
  kind: 'request' | 'cancel',
  subject: string,
  message: RequestMessage | CancelRequest,
): Promise<string[]> {
  const answered: string[] = [];
  const inbound: InboundMessage = {
    subject,
    data: encodeWire(message),
    headers: {},
    redelivered: false,
    ack: async () => void answered.push('ack'),
    nak: async () => void answered.push('nak'),
  };
  await handlers.get(subjectFor(namespace, 'review', '*', kind, 'alfa'))!(inbound);
  return answered;
}

/** `gate`, when given, holds every handler run until it resolves. */
async function harness(gate?: Promise<void>) {
  const bus = new MemoryBus();
  const runs: { attempt: number; fence: number }[] = [];
  const peer: Peer = await createPeer({
    transport: bus.connect('alfa', peerBusPermissions(namespace, 'alfa')),
    namespace,
    peerId: 'alfa',
    renew: false,
    handlers: {
      // Taken apart on purpose: handlers may destructure their context.
      review: async (_input, { request, effect }) => {
        runs.push({ attempt: request.attempt, fence: request.fence });
        await gate;
        return effect(() => ({ verdict: 'approve', attempt: request.attempt }));
      },
    },
  });
  const coordinator = bus.connect('coordinator');
  const results: ResultMessage[] = [];
  const cancelResults: CancelResult[] = [];
  await coordinator.subscribe(`${namespace}.review.*.result.*`, (m) => void results.push(decode(m.data) as ResultMessage));
  await coordinator.subscribe(`${namespace}.review.*.cancel-result.*`, (m) => void cancelResults.push(decode(m.data) as CancelResult));
  const request = async (attempt: number, fence: number) => {
    await coordinator.publish(subjectFor(namespace, 'review', operationId, 'request', 'alfa'), encodeWire(reviewRequest(attempt, fence)));
    await flushMicrotasks();
  };
  const cancel = async (attempt: number, fence: number) => {
    await coordinator.publish(subjectFor(namespace, 'review', operationId, 'cancel', 'alfa'), encodeWire(decisionCancel(attempt, fence)));
    await flushMicrotasks();
  };
  return { peer, runs, results, cancelResults, request, cancel };
}

const resultOf = (r: ResultMessage): JsonValue => r.result;

test('a redelivered request is answered from the stored result: the handler runs once', async () => {
  const h = await harness();
  await h.request(1, 1);
  await h.request(1, 1);
  assert.deepEqual(h.runs, [{ attempt: 1, fence: 1 }]);
  assert.equal(h.results.length, 2);
  assert.deepEqual(h.results.map(resultOf), [
    { verdict: 'approve', attempt: 1 },
    { verdict: 'approve', attempt: 1 },
  ]);
  assert.equal(h.peer.stats.replayed, 1);
  assert.equal(h.peer.sink.applied().length, 1);
  await h.peer.close();
});

test('a request delivered again while its attempt still runs starts no second run; the running one answers', async () => {
  let open!: () => void;
  const h = await harness(new Promise<void>((resolve) => (open = resolve)));
  await h.request(1, 1);
  await h.request(1, 1); // the broker's redelivery of a request whose handler has not returned
  assert.deepEqual(h.runs, [{ attempt: 1, fence: 1 }]);
  open();
  await flushMicrotasks();
  assert.deepEqual(h.runs, [{ attempt: 1, fence: 1 }], 'one run');
  assert.deepEqual(h.results.map(resultOf), [{ verdict: 'approve', attempt: 1 }], 'one answer, from the run');
  assert.equal(h.peer.sink.applied().length, 1);
  await h.peer.close();
});

test('a newer attempt runs; the older attempt, delivered again after it, is dropped without an answer', async () => {
  const h = await harness();
  await h.request(1, 1);
  await h.request(2, 2);
  await h.request(1, 1);
  assert.deepEqual(h.runs, [
    { attempt: 1, fence: 1 },
    { attempt: 2, fence: 2 },
  ]);
  assert.deepEqual(
    h.results.map((r) => [r.attempt, r.fence]),
    [
      [1, 1],
      [2, 2],
    ],
  );
  await h.request(2, 2);
  assert.equal(h.runs.length, 2, 'the newest attempt is replayed, not run again');
  assert.deepEqual(h.results.at(-1)?.result, { verdict: 'approve', attempt: 2 });
  await h.peer.close();
});

test('a cancel answers already-completed for the attempt that finished, unknown for one it never saw, nothing for an older fence', async () => {
  const h = await harness();
  await h.request(1, 1);
  await h.cancel(1, 1);
  await h.cancel(2, 2);
  // The request of the attempt cancelled before it came (it travels on another consumer) is not run.
  await h.request(2, 2);
  await h.cancel(1, 1);
  assert.deepEqual(
    h.cancelResults.map((c) => [c.attempt, c.fence, c.outcome]),
    [
      [1, 1, 'already-completed'],
      [2, 2, 'unknown'],
    ],
  );
  assert.deepEqual(h.runs, [{ attempt: 1, fence: 1 }], 'attempt 2 was cancelled before its request came: never run');
  assert.deepEqual(
    h.results.map((r) => r.attempt),
    [1],
  );
  assert.equal(h.peer.stats.refused.cancelled, 1);
  await h.cancel(2, 2);
  assert.deepEqual(h.cancelResults.at(-1) && [h.cancelResults.at(-1)!.attempt, h.cancelResults.at(-1)!.outcome], [2, 'unknown'], 'the same answer again');
  await h.peer.close();
});

test('a cancel whose answer could not be stored is handed back, and delivered again gets the same answer', async () => {
  // A transport that hands the test every subscription's handler and can fail the next publish.
  const handlers = new Map<string, (m: InboundMessage) => void | Promise<void>>();
  const published: { subject: string; message: unknown }[] = [];
  let failNext = false;
  const transport: Transport = {
    capabilities: { durable: true, resultFencing: true },
    identity: 'alfa',
    publish: async (subject, data) => {
      if (failNext) {
        failNext = false;
        return { receipt: 'unknown', detail: 'no stream answered' };
      }
      published.push({ subject, message: decode(data) });
      return { receipt: 'stored' };
    },
    subscribe: async (pattern, handler) => (handlers.set(pattern, handler), { close: async () => {} }),
    close: async () => {},
  };
  let stopped!: () => void;
  const peer = await createPeer({
    transport,
    namespace,
    peerId: 'alfa',
    renew: false,
    handlers: {
      review: (_input, { signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => (stopped(), reject(new Error('stopped'))))),
    },
  });
  const deliver = (kind: 'request' | 'cancel', message: RequestMessage | CancelRequest) =>
    deliverTo(handlers, kind, subjectFor(namespace, 'review', operationId, kind, 'alfa'), message);
  const running = deliver('request', reviewRequest());
  const whenStopped = new Promise<void>((resolve) => (stopped = resolve));
  await flushMicrotasks();
  const cancel = decisionCancel();
  failNext = true;
  assert.deepEqual(await deliver('cancel', cancel), ['nak'], 'the answer was not stored: the cancel is handed back');
  await whenStopped;
  assert.deepEqual(await running, ['ack'], 'the stopped request is acknowledged');
  assert.deepEqual(await deliver('cancel', cancel), ['ack']);
  const answers = published.filter((p) => p.subject.includes('.cancel-result.')).map((p) => (p.message as CancelResult).outcome);
  assert.deepEqual(answers, ['stopped'], 'delivered again, the cancel gets the answer it was given: stopped, not unknown');
  await peer.close();
});

test('a request or cancel whose subject is not its own (operation, namespace, interaction or peer differ from its payload) is refused unrun, acknowledged and counted', async () => {
  // A transport that hands the test every subscription's handler: it can deliver any subject to
  // them, as a misrouting consumer or a republishing stream could.
  const handlers = new Map<string, (m: InboundMessage) => void | Promise<void>>();
  const published: string[] = [];
  const transport: Transport = {
    capabilities: { durable: true, resultFencing: true },
    identity: 'alfa',
    publish: async (subject) => (published.push(subject), { receipt: 'stored' }),
    subscribe: async (pattern, handler) => (handlers.set(pattern, handler), { close: async () => {} }),
    close: async () => {},
  };
  const runs: string[] = [];
  const peer = await createPeer({
    transport,
    namespace,
    peerId: 'alfa',
    renew: false,
    handlers: { review: (_input, { request }) => (runs.push(request.operationId), { verdict: 'approve' }) },
  });
  const other = `op${'c'.repeat(64)}`;
  const request = reviewRequest();
  const cancel = decisionCancel();
  const deliver = (kind: 'request' | 'cancel', subject: string, message: RequestMessage | CancelRequest) => deliverTo(handlers, kind, subject, message);
  const misaddressed = [
    subjectFor(namespace, 'review', other, 'request', 'alfa'), // another operation's subject
    subjectFor('demo.v1.other', 'review', operationId, 'request', 'alfa'), // another namespace
    subjectFor(namespace, 'triage', operationId, 'request', 'alfa'), // another interaction
    subjectFor(namespace, 'review', operationId, 'request', 'bravo'), // another peer
  ];
  for (const subject of misaddressed) assert.deepEqual(await deliver('request', subject, request), ['ack'], `${subject}: acknowledged, never redelivered`);
  assert.deepEqual(await deliver('cancel', subjectFor(namespace, 'review', other, 'cancel', 'alfa'), cancel), ['ack']);
  await flushMicrotasks();
  assert.deepEqual(runs, [], 'no handler ran');
  assert.deepEqual(published, [], 'nothing was answered');
  assert.deepEqual(peer.stats.refused, { malformed: 0, 'wrong-subject': 5, cancelled: 0 });
  // Its own subject, the same payload runs.
  assert.deepEqual(await deliver('request', subjectFor(namespace, 'review', operationId, 'request', 'alfa'), request), ['ack']);
  assert.deepEqual(runs, [operationId]);
  await peer.close();
});

test('close() waits for the requests it stops to be handed back (nak), counts them handed back, not failed, and waits at most stopWaitMs', async () => {
  const handlers = new Map<string, (m: InboundMessage) => void | Promise<void>>();
  const transport: Transport = {
    capabilities: { durable: true, resultFencing: true },
    identity: 'alfa',
    publish: async () => ({ receipt: 'stored' }),
    subscribe: async (pattern, handler) => (handlers.set(pattern, handler), { close: async () => {} }),
    close: async () => {},
  };
  const clock = new VirtualClock();
  // Operation a's handler stops on its signal, but only once its clean-up (1 s) is done;
  // operation b's ignores its signal and never returns.
  const other = `op${'c'.repeat(64)}`;
  const peer = await createPeer({
    transport,
    namespace,
    peerId: 'alfa',
    renew: false,
    clock,
    stopWaitMs: 5000,
    handlers: {
      review: (_input, { request, signal }) =>
        request.operationId === operationId
          ? new Promise((_resolve, reject) => signal.addEventListener('abort', () => clock.at(clock.nowMs() + 1000, () => reject(new Error('stopped')))))
          : new Promise(() => {}),
    },
  });
  const stopping = deliverTo(handlers, 'request', subjectFor(namespace, 'review', operationId, 'request', 'alfa'), reviewRequest());
  const stuck = deliverTo(handlers, 'request', subjectFor(namespace, 'review', other, 'request', 'alfa'), { ...reviewRequest(), operationId: other });
  await flushMicrotasks();
  let closed = false;
  const closing = peer.close().then(() => (closed = true));
  await clock.advance(999);
  assert.equal(closed, false, 'close() waits while a stopping handler winds down');
  await clock.advance(1);
  assert.deepEqual(await stopping, ['nak'], 'the stopped request is handed back');
  assert.equal(closed, false, 'and still waits for the handler that ignores its signal');
  await clock.advance(3999);
  assert.equal(closed, false);
  await clock.advance(1);
  await closing;
  assert.equal(closed, true, 'but no longer than stopWaitMs');
  assert.equal(peer.stats.handedBack, 1);
  assert.equal(peer.stats.failed, 0, 'a request stopped by close() is no failure');
  void stuck;
});
