/**
 * A competing fork's release of its losing branches' contract calls (losers.ts) asks the runtime
 * for each child's state and then cancels it. Over HTTP (http-contracts.ts) an uncertain answer is
 * sent again with a growing delay; a timeout that fires meanwhile (the fork task's, an enclosing
 * task's, the workflow's) stops the release there and then: it is acted on when it fires, no
 * request is sent after it, and nothing is recorded for the child whose release was stopped (a
 * recovered worker, or the instance's cancel, asks again). The clock is injected: the retry budget
 * (30 s) never runs out in the test.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VirtualClock } from '../../src/contract/clock.js';
import type { JsonValue } from '../../src/contract/json.js';
import { pastTheTimeout, pendingAnswer, stubContracts, stubDigest, unavailableAnswer } from './stub-runtime.js';
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
                    call: invoke-contract
                    with:
                      contract: { id: lab.review, version: '1.0.0', digest: '${stubDigest}' }
                      interaction: review
                      input: {}
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
 * stopped). The release's look (GET without a wait) answers 503 for ever when `uncertain` is
 * 'look', else pending; its cancel answers 503 for ever. The requests it took, with the clock's instant.
 */
function runtime(clock: VirtualClock, uncertain: 'look' | 'cancel'): { fetch: typeof fetch; sent: Request[] } {
  const sent: Request[] = [];
  let invocationKey = '';
  const fetchStub = (async (url: string | URL | Request, init?: RequestInit) => {
    const target = new URL(String(url));
    const method = init?.method ?? 'GET';
    const kind = method === 'POST' ? (target.pathname.endsWith('/cancel') ? 'cancel' : 'invoke') : target.searchParams.has('waitMs') ? 'poll' : 'look';
    sent.push({ kind, atMs: clock.nowMs() });
    if (kind === 'invoke') invocationKey = (JSON.parse(String(init?.body)) as { invocationKey: string }).invocationKey;
    if (kind === 'poll') await held(clock, Number(target.searchParams.get('waitMs')), init?.signal ?? undefined);
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
    test(`compete: the ${placement === 'workflow' ? "workflow's" : `${placement} task's`} timeout that fires while the loser's ${uncertain} is retried is acted on when it fires: nothing sent after it, nothing recorded for the child`, async () => {
      const clock = new VirtualClock();
      const contracts = runtime(clock, uncertain);
      const h = harness({ clock, invocations: stubContracts(clock, contracts.fetch) });
      try {
        const startedAtMs = clock.nowMs();
        const { instanceId } = await h.executor.start({
          principalId: 'alice',
          invocationKey: `${placement}-${uncertain}`,
          document: race(placement),
          input: {},
        });
        // The timeout fires with most of the retry budget (30 s) left; ended, the instance sends nothing more.
        await pastTheTimeout(clock, h.executor, instanceId, startedAtMs, timeoutMs);
        const record = await h.executor.get(instanceId);
        assert.equal(record?.status, 'faulted');
        assert.equal(record?.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/timeout');
        assert.equal(record?.error?.instance, faultedAt[placement]);
        assert.equal(record?.winners['/do/0/outer/do/0/race'], 0, 'the pause won the fork');
        const kinds = contracts.sent.map((request) => request.kind);
        assert.ok(kinds.includes(uncertain), `the release sent its ${uncertain}: ${JSON.stringify(kinds)}`);
        assert.ok(
          contracts.sent.every((request) => request.atMs <= startedAtMs + timeoutMs),
          `no request after the timeout: ${JSON.stringify(contracts.sent.map((request) => [request.kind, request.atMs - startedAtMs]))}`,
        );
        const children = Object.values(record?.children ?? {});
        assert.equal(children.length, 1, 'the losing branch bound its call');
        assert.equal(children[0]?.disposition, undefined, 'a stopped release records nothing for the child');
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
  const contracts = runtime(clock, 'look');
  const h = harness({ clock, invocations: stubContracts(clock, contracts.fetch), workflows: workflowsAmong([slowDocument]) });
  try {
    const startedAtMs = clock.nowMs();
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'with-child', document: race('fork', true), input: {} });
    while (clock.nowMs() < startedAtMs + timeoutMs) await clock.advance(100);
    await eventually(async () => (await h.executor.get(instanceId))?.status !== 'running', 'the timeout to end the instance');
    const record = await h.executor.get(instanceId);
    assert.equal(record?.status, 'faulted');
    assert.equal(record?.error?.instance, faultedAt.fork);
    assert.equal(Object.values(record?.children ?? {})[0]?.disposition, undefined, 'a stopped release records nothing for the child operation');
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
