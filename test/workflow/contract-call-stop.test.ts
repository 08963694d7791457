/**
 * A contract call over HTTP (http-contracts.ts) whose runtime gives no definite answer is sent
 * again with a growing delay; the task's or the workflow's timeout firing meanwhile stops it there
 * and then: the POST's retries and the polls' alike, with no request sent after the stop and no
 * answer recorded for the stopped call. The clock is injected: the retry budget (30 s) never runs
 * out in the test.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VirtualClock } from '../../src/contract/clock.js';
import { pastTheTimeout, pendingAnswer, stubCall, stubContracts, unavailableAnswer } from './stub-runtime.js';
import { assertReplayEqual, harness, yaml } from './support.js';

const timeoutMs = 3000;

const timed = yaml(`
document: { dsl: '1.0.3', namespace: t, name: timed-call, version: '1.0.0' }
do:
  - review:
      timeout: { after: { milliseconds: ${timeoutMs} } }
${stubCall('      ')}
`);

/** The same call under the workflow's timeout: the instance faults when it fires, the call's run is stopped. */
const timedWorkflow = yaml(`
document: { dsl: '1.0.3', namespace: t, name: timed-workflow, version: '1.0.0' }
timeout: { after: { milliseconds: ${timeoutMs} } }
do:
  - review:
${stubCall('      ')}
`);

/** A runtime that answers the POST as `post` says (uncertain: 503) and every poll 503; the requests it took, with the clock's instant. */
function flakyRuntime(clock: VirtualClock, post: 'uncertain' | 'pending'): { fetch: typeof fetch; sent: { method: string; atMs: number }[] } {
  const sent: { method: string; atMs: number }[] = [];
  const fetchStub = (async (_url: string | URL | Request, init?: RequestInit) => {
    const method = init?.method ?? 'GET';
    sent.push({ method, atMs: clock.nowMs() });
    if (method === 'GET' || post === 'uncertain') return unavailableAnswer();
    return pendingAnswer((JSON.parse(String(init?.body)) as { invocationKey: string }).invocationKey);
  }) as typeof fetch;
  return { fetch: fetchStub, sent };
}

for (const placement of ['task', 'workflow'] as const)
  for (const post of ['uncertain', 'pending'] as const) {
    const what = post === 'uncertain' ? "the POST's retries" : "the polls' retries";
    const whose = placement === 'task' ? "a task's timeout" : "the workflow's timeout";
    test(`${whose} that fires during ${what} is acted on when it fires: nothing sent after it, no answer recorded`, async () => {
      const clock = new VirtualClock();
      const runtime = flakyRuntime(clock, post);
      const h = harness({ clock, invocations: stubContracts(clock, runtime.fetch) });
      try {
        const startedAtMs = clock.nowMs();
        const document = placement === 'task' ? timed : timedWorkflow;
        const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: post, document, input: {} });
        // The timeout fires with most of the retry budget (30 s) left; ended, the instance sends nothing more.
        await pastTheTimeout(clock, h.executor, instanceId, startedAtMs, timeoutMs);
        const record = await h.executor.get(instanceId);
        assert.equal(record?.status, 'faulted');
        assert.equal(record?.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/timeout');
        assert.equal(record?.error?.instance, placement === 'task' ? '/do/0/review' : '/');
        assert.ok(
          runtime.sent.some((request) => request.method === (post === 'uncertain' ? 'POST' : 'GET')),
          JSON.stringify(runtime.sent),
        );
        assert.ok(
          runtime.sent.every((request) => request.atMs <= startedAtMs + timeoutMs),
          `no request after the timeout: ${JSON.stringify(runtime.sent.map((request) => request.atMs - startedAtMs))}`,
        );
        assert.deepEqual(record?.steps['/do/0/review>invoke'], undefined, 'a stopped call has no answer');
        await assertReplayEqual(h, instanceId);
      } finally {
        // A call still retrying (a failure above) runs out its budget, so that the executor's close ends.
        await clock.advance(60_000);
        await h.close();
      }
    });
  }
