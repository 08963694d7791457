/**
 * A competing fork's release of its losing branches' contract calls (losers.ts) asks the runtime
 * for each child's state and then cancels it. Over HTTP (http-contracts.ts) an uncertain answer is
 * sent again with a growing delay; a timeout that fires meanwhile (the fork task's, an enclosing
 * task's, the workflow's) stops the release there and then: it is acted on when it fires, and no
 * request of the stopped release is sent after it. The child is not left running for that: the
 * release is asked again after the timeout's fault (executor.ts settle, losers.ts owedReleases),
 * and its disposition recorded, the instance ended or not. The clock is injected: the retry budget
 * (30 s) never runs out in the test.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VirtualClock } from '../../src/contract/clock.js';
import type { JsonValue } from '../../src/contract/json.js';
import { cancelledAnswer, pastTheTimeout, pendingAnswer, stubCall, stubContracts, unavailableAnswer } from './stub-runtime.js';
import { assertReplayEqual, eventually, harness, slowDocument, workflowsAmong, yaml } from './support.js';

const timeoutMs = 3000;
const timeout = `timeout: { after: { milliseconds: ${timeoutMs} } }`;

type Placement = 'fork' | 'enclosing' | 'workflow';

/**
 * A compete fork won after 600 ms by a pause against a contract call that stays pending and, when
 * `child`, a branch awaiting a child workflow that waits ten minutes; the timeout where `placement` says.
 */
function race(placement: Placement, child = false): JsonValue {
  return yaml(`
document: { dsl: '1.0.3', namespace: t, name: loser-release, version: '1.0.0' }
${placement === 'workflow' ? timeout : ''}
do:
  - outer:
      ${placement === 'enclosing' ? timeout : ''}
      do:
        - race:
            ${placement === 'fork' ? timeout : ''}
            fork:
              compete: true
              branches:
                - quick:
                    do:
                      - pause: { wait: { milliseconds: 600 } }
                      - answer: { set: { winner: quick } }
                - review:
${stubCall('                    ')}
${
  child
    ? `                - delegate:
                    run:
                      workflow: { namespace: t, name: slow, version: '1.0.0' }
`
    : ''
}`);
}

/** What the timeout faults: the task that carries it, or the instance. */
const faultedAt: Record<Placement, string> = { fork: '/do/0/outer/do/0/race', enclosing: '/do/0/outer', workflow: '/' };

type Request = { kind: 'invoke' | 'poll' | 'look' | 'cancel'; atMs: number };

/**
 * A runtime that admits the call (202, pending) and holds each poll for its wait (or until it is
 * stopped). Before `healthyFromMs`, the release's look (GET without a wait) answers 503 when
 * `uncertain` is 'look', else pending, and its cancel answers 503; from then on the look answers
 * pending and the cancel the operation cancelled. The requests it took, with the clock's instant.
 */
function runtime(clock: VirtualClock, uncertain: 'look' | 'cancel', healthyFromMs: number): { fetch: typeof fetch; sent: Request[] } {
  const sent: Request[] = [];
  let invocationKey = '';
  const fetchStub = (async (url: string | URL | Request, init?: RequestInit) => {
    const target = new URL(String(url));
    const method = init?.method ?? 'GET';
    const kind = method === 'POST' ? (target.pathname.endsWith('/cancel') ? 'cancel' : 'invoke') : target.searchParams.has('waitMs') ? 'poll' : 'look';
    sent.push({ kind, atMs: clock.nowMs() });
    if (kind === 'invoke') invocationKey = (JSON.parse(String(init?.body)) as { invocationKey: string }).invocationKey;
    if (kind === 'poll') await held(clock, Number(target.searchParams.get('waitMs')), init?.signal ?? undefined);
    if (clock.nowMs() >= healthyFromMs) return kind === 'cancel' ? cancelledAnswer(invocationKey, clock.nowMs()) : pendingAnswer(invocationKey);
    return kind === 'cancel' || (kind === 'look' && uncertain === 'look') ? unavailableAnswer() : pendingAnswer(invocationKey);
  }) as typeof fetch;
  return { fetch: fetchStub, sent };
}

/** Resolves after `waitMs` on the clock; rejects when `signal` aborts first. */
function held(clock: VirtualClock, waitMs: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = clock.at(clock.nowMs() + waitMs, resolve);
    signal?.addEventListener('abort', () => (timer.cancel(), reject(new Error('aborted'))), { once: true });
  });
}

for (const placement of ['fork', 'enclosing', 'workflow'] as const)
  for (const uncertain of ['look', 'cancel'] as const) {
    test(`compete: the ${placement === 'workflow' ? "workflow's" : `${placement} task's`} timeout that fires while the loser's ${uncertain} is retried is acted on when it fires, and the loser's child is released after it`, async () => {
      const clock = new VirtualClock();
      const startedAtMs = clock.nowMs();
      const contracts = runtime(clock, uncertain, startedAtMs + timeoutMs);
      const h = harness({ clock, invocations: stubContracts(clock, contracts.fetch) });
      try {
        const { instanceId } = await h.executor.start({
          principalId: 'alice',
          invocationKey: `${placement}-${uncertain}`,
          document: race(placement),
          input: {},
        });
        // The timeout fires with most of the retry budget (30 s) left; the stopped release sends nothing more.
        await pastTheTimeout(clock, h.executor, instanceId, startedAtMs, timeoutMs);
        const record = await h.executor.get(instanceId);
        assert.equal(record?.status, 'faulted');
        assert.equal(record?.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/timeout');
        assert.equal(record?.error?.instance, faultedAt[placement]);
        assert.equal(record?.endedAtMs, startedAtMs + timeoutMs, 'the timeout was acted on when it fired');
        assert.equal(record?.winners['/do/0/outer/do/0/race'], 0, 'the pause won the fork');
        const kinds = contracts.sent.map((request) => request.kind);
        assert.ok(kinds.includes(uncertain), `the release sent its ${uncertain}: ${JSON.stringify(kinds)}`);
        assert.ok(
          contracts.sent.every((request) => request.atMs <= startedAtMs + timeoutMs),
          `no request after the timeout: ${JSON.stringify(contracts.sent.map((request) => [request.kind, request.atMs - startedAtMs]))}`,
        );
        assert.deepEqual(
          Object.entries(record?.tasks ?? {}).filter(([, task]) => task.state === 'running'),
          [],
          'no task left running',
        );
        // Asked again once the timeout had faulted the run, and recorded: the loser's child does not run on.
        const children = Object.values(record?.children ?? {});
        assert.equal(children.length, 1, 'the losing branch bound its call');
        assert.equal(children[0]?.disposition?.disposition, 'cancelled', JSON.stringify(children[0]?.disposition));
        assert.equal(children[0]?.disposition?.fork, '/do/0/outer/do/0/race');
        const after = contracts.sent.filter((request) => request.atMs === startedAtMs + timeoutMs && request.kind === 'cancel');
        assert.equal(after.length, 1, 'the release asked again cancels once, at the timeout');
        await assertReplayEqual(h, instanceId);
      } finally {
        // A release still retrying (a failure above) runs out its budget, so that the executor's close ends.
        await clock.advance(60_000);
        await h.close();
      }
    });
  }

test("compete: a child workflow a loser awaited is released with the timed-out fork when the loser's contract release was stopped", async () => {
  const clock = new VirtualClock();
  const startedAtMs = clock.nowMs();
  const contracts = runtime(clock, 'look', startedAtMs + timeoutMs);
  const h = harness({ clock, invocations: stubContracts(clock, contracts.fetch), workflows: workflowsAmong([slowDocument]) });
  try {
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'with-child', document: race('fork', true), input: {} });
    while (clock.nowMs() < startedAtMs + timeoutMs) await clock.advance(100);
    await eventually(async () => (await h.executor.get(instanceId))?.status !== 'running', 'the timeout to end the instance');
    const record = await h.executor.get(instanceId);
    assert.equal(record?.status, 'faulted');
    assert.equal(record?.error?.instance, faultedAt.fork);
    const released = async () => Object.values((await h.executor.get(instanceId))?.children ?? {})[0]?.disposition?.disposition === 'cancelled';
    await eventually(released, 'the child operation to be released after the timeout');
    const subworkflows = Object.values(record?.subworkflows ?? {});
    assert.equal(subworkflows.length, 1, 'the losing branch started its child workflow');
    assert.equal(subworkflows[0]?.disposition?.disposition, 'cancelled', JSON.stringify(subworkflows[0]?.disposition));
    assert.equal(subworkflows[0]?.disposition?.by, faultedAt.fork);
    assert.equal((await h.executor.get(subworkflows[0]?.instanceId ?? ''))?.status, 'cancelled');
    await assertReplayEqual(h, instanceId);
  } finally {
    await clock.advance(60_000);
    await h.close();
  }
});
