/**
 * fork with `compete: true` and contract calls in the losing branches: once the winner's
 * `fork-won` commits, a losing branch's open child operation is cancelled through the
 * coordinator's caller-cancellation path where its interaction declares it, detached where it
 * does not, and the disposition is recorded (child-disposed) before the fork task completes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { SystemClock, VirtualClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import { operationId } from '../../src/contract/ids.js';
import type { JsonObject } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import type { InvocationResult } from '../../src/projections/views.js';
import type { ContractCalls } from '../../src/workflow/exec/http-contracts.js';
import { createEmbedded, type Embedded } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import type { WorkflowEvent } from '../../src/workflow/exec/events.js';
import { storeWith } from '../support/scenario.js';
import type { WorkflowRecord } from '../../src/workflow/exec/record.js';
import { assertReplayEqual, harness, runToEnd, yaml, type Harness } from './support.js';

/**
 * On a memory store of its own: one contract, two interactions: `review` declares caller
 * cancellation, `hold` does not. Peers answer only when cancelled (or after holdMs).
 */
async function deployment(holdMs: number): Promise<{ clock: SystemClock; store: MemoryEventStore; embedded: Embedded }> {
  const clock = new SystemClock();
  const store = new MemoryEventStore({ clock });
  const bundle = reviewBundle({ completion: { mode: 'quorum', count: 2 }, timeoutMs: 8000, cancellation: 'caller' });
  const interactions = bundle.interactions as JsonObject;
  interactions.hold = { ...(interactions.review as JsonObject), cancellation: 'none' };
  const peers = peerIds(3);
  const embedded = await createEmbedded({ clock, store, bundle, groups: { reviewers: peers } });
  const slow = (_input: unknown, context: { signal: AbortSignal }) =>
    new Promise<{ verdict: 'approve' }>((resolve) => {
      const timer = setTimeout(() => resolve({ verdict: 'approve' }), holdMs);
      context.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve({ verdict: 'approve' });
      });
    });
  for (const peerId of peers) await embedded.addPeer(peerId, { review: slow, hold: slow });
  return { clock, store, embedded };
}

/**
 * A fork won by a branch that waits `pauseMs`, against a call of the caller-cancellable `review`
 * and, unless `holdBranch` is false, one of `hold` (no caller cancellation).
 */
const race = (digest: string, { pauseMs = 600, holdBranch = true } = {}) => `document: { dsl: '1.0.3', namespace: test, name: race, version: '1.0.0' }
do:
  - race:
      fork:
        compete: true
        branches:
          - quick:
              do:
                - pause: { wait: { milliseconds: ${pauseMs} } }
                - answer: { set: { winner: quick } }
          - cancellable:
              call: invoke-contract
              with:
                contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
                interaction: review
                input: { document: a }
${
  holdBranch
    ? `          - uncancellable:
              call: invoke-contract
              with:
                contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
                interaction: hold
                input: { document: b }
`
    : ''
}`;

/** The losing call of the caller-cancellable `review` in `race`. */
const cancellableAt = '/do/0/race/fork/branches/1/cancellable{1}';

/** Runs `race` on `h` to its end, which must be completed. */
async function runRace(h: Harness, digest: string, key: string, options?: { holdBranch?: boolean }): Promise<WorkflowRecord> {
  const record = await runToEnd(h, yaml(race(digest, options)), {}, key);
  assert.equal(record.status, 'completed', JSON.stringify(record.error));
  return record;
}

test('compete: a losing child operation is cancelled where its interaction declares caller cancellation, detached where not, and recorded', async () => {
  const { clock, store, embedded } = await deployment(3000);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  try {
    const record = await runRace(h, embedded.bundle.ref.digest, 'race-1');
    assert.deepEqual(record.output, { winner: 'quick' });
    assert.equal(record.winners['/do/0/race'], 0);

    const cancellable = record.children[cancellableAt];
    const uncancellable = record.children['/do/0/race/fork/branches/2/uncancellable{2}'];
    assert.ok(cancellable && uncancellable, 'both losing branches bound their child operation');
    assert.equal(cancellable.disposition?.disposition, 'cancelled', cancellable.disposition?.detail);
    assert.equal(cancellable.disposition?.fork, '/do/0/race');
    assert.equal(uncancellable.disposition?.disposition, 'detached', uncancellable.disposition?.detail);

    const cancelled = await embedded.coordinator.get('alice', cancellable.operationId);
    assert.equal(cancelled.decision?.reason, 'cancelled', 'the coordinator closed the cancellable child as cancelled');
    const detached = await embedded.coordinator.get('alice', uncancellable.operationId);
    assert.notEqual(detached.decision?.reason, 'cancelled', 'the detached child was not cancelled');

    // The dispositions are in the log before (or with) the fork's completion.
    const log = await store.read(record.instanceId);
    assert.equal(log.kind, 'ok');
    const events = log.kind === 'ok' ? log.transitions.flatMap((t) => t.transition.events as unknown as WorkflowEvent[]) : [];
    const disposedAt = events.findIndex((e) => e.type === 'child-disposed');
    const forkDoneAt = events.findIndex((e) => e.type === 'task-completed' && e.at === '/do/0/race');
    assert.ok(disposedAt >= 0 && disposedAt < forkDoneAt, 'child-disposed precedes the fork task-completed');
    assert.equal(events.filter((e) => e.type === 'child-disposed').length, 2);
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('compete: a losing child already decided before the win is recorded already-closed, and nothing is cancelled', async () => {
  const { clock, store, embedded } = await deployment(50);
  const h = harness({ store, clock, invocations: embedded.coordinator });
  const digest = embedded.bundle.ref.digest;
  const document = `document: { dsl: '1.0.3', namespace: test, name: decided-loser, version: '1.0.0' }
do:
  - race:
      fork:
        compete: true
        branches:
          - quick:
              do:
                - pause: { wait: { milliseconds: 1500 } }
                - answer: { set: { winner: quick } }
          - slowAfterCall:
              do:
                - review:
                    call: invoke-contract
                    with:
                      contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
                      interaction: review
                      input: { document: c }
                - linger: { wait: { seconds: 20 } }
`;
  try {
    const record = await runToEnd(h, yaml(document), {}, 'race-2');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const child = record.children['/do/0/race/fork/branches/1/slowAfterCall/do/0/review{1}'];
    assert.equal(child?.disposition?.disposition, 'already-closed', child?.disposition?.detail);
    const operation = await embedded.coordinator.get('alice', child.operationId);
    assert.equal(operation.decision?.reason, 'threshold');
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('compete: a losing child decided by its own rule between the look and the cancel is recorded already-closed with that decision, not cancelled', async () => {
  // The peers answer 2 s after their request: the fork is won at 0.6 s, while the child is open.
  const { clock, store, embedded } = await deployment(2000);
  // The child's quorum closes its decision after the runtime was asked for it and before the cancel
  // is recorded: the cancel then finds it decided and answers that decision (coordinator.cancel).
  const invocations = storeWith(embedded.coordinator, (real) => ({
    cancel: async (principalId: string, operationId: string) => {
      await real.wait(principalId, operationId, 'decision', 10_000);
      return real.cancel(principalId, operationId);
    },
  }));
  const h = harness({ store, clock, invocations });
  try {
    const record = await runRace(h, embedded.bundle.ref.digest, 'race-5');
    const cancellable = record.children[cancellableAt];
    const operation = await embedded.coordinator.get('alice', cancellable!.operationId);
    assert.equal(operation.decision?.reason, 'threshold', 'the child was decided by its quorum, not by the cancel');
    assert.equal(cancellable?.disposition?.disposition, 'already-closed', cancellable?.disposition?.detail);
    assert.match(cancellable.disposition.detail, /success \(threshold\)/);
    await assertReplayEqual(h, record.instanceId);
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('compete: a losing child decided by its own rule after the win, before the release looked, is not recorded as decided before the win', async () => {
  // The peers answer 2 s after their request: the fork is won at 0.6 s, while the child is open.
  const { clock, store, embedded } = await deployment(2000);
  // The release's look at the child answers once its quorum has closed the decision: after the win.
  let looked = false;
  const invocations = storeWith(embedded.coordinator, (real) => ({
    get: async (principalId: string, operationId: string) => {
      looked = true;
      await real.wait(principalId, operationId, 'decision', 10_000);
      return real.get(principalId, operationId);
    },
  }));
  const h = harness({ store, clock, invocations });
  try {
    const record = await runRace(h, embedded.bundle.ref.digest, 'race-6', { holdBranch: false });
    assert.ok(looked);
    const cancellable = record.children[cancellableAt];
    const operation = await embedded.coordinator.get('alice', cancellable!.operationId);
    assert.equal(operation.decision?.reason, 'threshold');
    const log = await store.read(record.instanceId);
    const won =
      log.kind === 'ok' ? log.transitions.find((t) => (t.transition.events as unknown as WorkflowEvent[]).some((e) => e.type === 'fork-won')) : undefined;
    assert.ok(won && operation.decision && operation.decision.closedAtMs > won.committedAtMs, 'the child was decided after the fork was won');
    assert.equal(cancellable?.disposition?.disposition, 'already-closed', cancellable?.disposition?.detail);
    assert.doesNotMatch(cancellable.disposition.detail, /before the fork was won/, cancellable.disposition.detail);
    assert.equal(cancellable.disposition.detail, "decided success (threshold) before the fork's release came to it");
    await assertReplayEqual(h, record.instanceId);
  } finally {
    await h.close();
    await embedded.close();
  }
});

test('compete: a losing child whose cancel is refused for good (invalid-input) is recorded detached with the refusal, and the fork completes; a cancel that is unavailable is asked again', async () => {
  const { clock, store, embedded } = await deployment(3000);
  // The child's log is full at the store: its cancel is refused, and will be every time it is sent.
  const refusal = 'operation op-x holds 8192 transitions, the most this store accepts and reads back (8192)';
  const cancels = new Map<string, number>();
  let unavailableFirst = true;
  const invocations = storeWith(embedded.coordinator, () => ({
    cancel: async (_principalId: string, operationId: string) => {
      cancels.set(operationId, (cancels.get(operationId) ?? 0) + 1);
      if (unavailableFirst) {
        unavailableFirst = false;
        throw new AdapterError('unavailable', 'the store did not answer');
      }
      throw new AdapterError('invalid-input', refusal);
    },
  }));
  const h = harness({ store, clock, invocations });
  try {
    const record = await runRace(h, embedded.bundle.ref.digest, 'race-3');
    const cancellable = record.children[cancellableAt];
    assert.equal(cancellable?.disposition?.disposition, 'detached', cancellable?.disposition?.detail);
    assert.match(cancellable.disposition.detail, /^the cancel was refused: invalid-input: .*8192 transitions/);
    assert.equal(cancels.get(cancellable.operationId), 2, 'the unavailable cancel asked again once, the refused one not again');
    const child = await embedded.coordinator.get('alice', cancellable.operationId);
    assert.equal(child.decision?.reason === 'cancelled', false, 'nothing cancelled it: it runs on to its own decision');
  } finally {
    await h.close();
    await embedded.close();
  }
});

/**
 * A contract runtime whose every operation stays open (the store refuses its timeout: its log at
 * the store's count) and whose every cancel is refused `expired` (decided at or after the
 * operation's deadline, the time guard refuses it). Each operation's deadline is `timeoutMs` after
 * its admission, on `clock`.
 */
function neverClosing(clock: VirtualClock, timeoutMs: number) {
  const admitted = new Map<string, number>();
  const cancels = new Map<string, number>();
  const open = (id: string): InvocationResult => {
    const admittedAtMs = admitted.get(id) ?? clock.nowMs();
    return {
      operationId: id,
      contract: { id: 'lab.review', version: '1.0.0', digest: 'sha256:' + 'ab'.repeat(32) },
      interaction: 'review',
      invocationKey: 'k',
      phase: 'active',
      admittedAtMs,
      deadlineMs: admittedAtMs + timeoutMs,
      decision: null,
      settlement: { status: 'pending', siblings: [] },
      branches: [],
      output: null,
      outputError: null,
    };
  };
  const service: ContractCalls = {
    invoke: async (caller, request) => {
      const id = operationId(caller.principalId, request.contract.digest, request.invocationKey);
      if (!admitted.has(id)) admitted.set(id, clock.nowMs());
      return { result: open(id), created: true, boundary: request.waitFor ?? 'decision' };
    },
    wait: (_principalId, id, _boundary, waitMs, signal) =>
      new Promise((resolve) => {
        const answer = () => resolve({ result: open(id), reached: false });
        const timer = clock.at(clock.nowMs() + waitMs, answer);
        signal?.addEventListener('abort', () => (timer.cancel(), answer()), { once: true });
      }),
    get: async (_principalId, id) => open(id),
    cancel: async (_principalId, id) => {
      cancels.set(id, (cancels.get(id) ?? 0) + 1);
      throw new AdapterError('expired', `operation ${id}: the cancellation was decided outside its time guard`);
    },
  };
  return { service, cancels, deadlineOf: (id: string) => open(id).deadlineMs };
}

test('compete: a losing child whose cancel is refused expired past its own deadline (its timeout never recorded) is recorded detached once the deadline is a margin behind, not asked again for ever', async () => {
  const clock = new VirtualClock();
  const store = new MemoryEventStore({ clock });
  const timeoutMs = 30_000;
  const runtime = neverClosing(clock, timeoutMs);
  const h = harness({ store, clock, invocations: runtime.service });
  const digest = 'sha256:' + 'ab'.repeat(32);
  try {
    const { instanceId } = await h.executor.start({
      principalId: 'alice',
      invocationKey: 'race-4',
      document: yaml(race(digest, { pauseMs: 1000, holdBranch: false })),
      input: {},
    });
    const hour = 3_600_000;
    for (let elapsed = 0; elapsed < hour && (await h.executor.get(instanceId))?.status === 'running'; elapsed += 1000) await clock.advance(1000);
    const record = (await h.executor.get(instanceId))!;
    const child = record.children[cancellableAt];
    assert.ok(child, 'the losing branch bound its child operation');
    const asked = runtime.cancels.get(child.operationId) ?? 0;
    assert.equal(record.status, 'completed', `still ${record.status} after an hour, its loser's cancel asked ${asked} times`);
    assert.deepEqual(record.output, { winner: 'quick' });
    assert.equal(child.disposition?.disposition, 'detached', child.disposition?.detail);
    assert.match(child.disposition.detail, /^the cancel was refused expired \d+ ms past the operation's deadline: expired: /);
    // Asked again while the deadline was not a margin behind (an expired authorization passes), then no more.
    assert.ok(asked > 1 && asked <= 10, `the cancel asked ${asked} times`);
    assert.ok((record.endedAtMs ?? 0) >= runtime.deadlineOf(child.operationId) + limits.workflowLoserCancelExpiredAfterMs, 'not before the margin');
    await assertReplayEqual(h, instanceId);
  } finally {
    await h.close();
  }
});
