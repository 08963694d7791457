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
import { operationId } from '../../src/contract/ids.js';
import { waitForHeader } from '../../src/runtime/boundary.js';
import { HttpContracts } from '../../src/workflow/exec/http-contracts.js';
import { assertReplayEqual, harness, yaml } from './support.js';

const digest = `sha256:${'ab'.repeat(32)}`;
const timeoutMs = 3000;

const timed = yaml(`
document: { dsl: '1.0.3', namespace: t, name: timed-call, version: '1.0.0' }
do:
  - review:
      timeout: { after: { milliseconds: ${timeoutMs} } }
      call: invoke-contract
      with:
        contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
        interaction: review
        input: {}
`);

/** The same call under the workflow's timeout: the instance faults when it fires, the call's run is stopped. */
const timedWorkflow = yaml(`
document: { dsl: '1.0.3', namespace: t, name: timed-workflow, version: '1.0.0' }
timeout: { after: { milliseconds: ${timeoutMs} } }
do:
  - review:
      call: invoke-contract
      with:
        contract: { id: lab.review, version: '1.0.0', digest: '${digest}' }
        interaction: review
        input: {}
`);

/** An operation admitted and not decided yet, as the facade answers it (202). */
function pending(invocationKey: string): string {
  return JSON.stringify({
    operationId: operationId('alice', digest, invocationKey),
    contract: { id: 'lab.review', version: '1.0.0', digest },
    interaction: 'review',
    invocationKey,
    phase: 'active',
    admittedAtMs: 0,
    deadlineMs: 60_000,
    decision: null,
    settlement: { status: 'pending', siblings: [] },
    branches: [],
    output: null,
    outputError: null,
  });
}

/** A runtime that answers the POST as `post` says (uncertain: 503) and every poll 503; the requests it took, with the clock's instant. */
function flakyRuntime(clock: VirtualClock, post: 'uncertain' | 'pending'): { fetch: typeof fetch; sent: { method: string; atMs: number }[] } {
  const sent: { method: string; atMs: number }[] = [];
  const unavailable = () => new Response(JSON.stringify({ kind: 'unavailable', description: 'down for the test' }), { status: 503 });
  const fetchStub = (async (_url: string | URL | Request, init?: RequestInit) => {
    const method = init?.method ?? 'GET';
    sent.push({ method, atMs: clock.nowMs() });
    if (method === 'GET' || post === 'uncertain') return unavailable();
    const { invocationKey } = JSON.parse(String(init?.body)) as { invocationKey: string };
    return new Response(pending(invocationKey), { status: 202, headers: { [waitForHeader]: 'decision' } });
  }) as typeof fetch;
  return { fetch: fetchStub, sent };
}

async function eventually(predicate: () => Promise<boolean>, what: string): Promise<void> {
  for (let tries = 0; tries < 400; tries++) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.fail(`timed out waiting for ${what}`);
}

for (const placement of ['task', 'workflow'] as const)
  for (const post of ['uncertain', 'pending'] as const) {
    const what = post === 'uncertain' ? "the POST's retries" : "the polls' retries";
    const whose = placement === 'task' ? "a task's timeout" : "the workflow's timeout";
    test(`${whose} that fires during ${what} is acted on when it fires: nothing sent after it, no answer recorded`, async () => {
      const clock = new VirtualClock();
      const runtime = flakyRuntime(clock, post);
      const invocations = new HttpContracts({ endpoint: 'http://runtime.test', credential: { env: 'T' }, env: { T: 'token' }, clock, fetch: runtime.fetch });
      const h = harness({ clock, invocations });
      try {
        const startedAtMs = clock.nowMs();
        const document = placement === 'task' ? timed : timedWorkflow;
        const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: post, document, input: {} });
        while (clock.nowMs() < startedAtMs + timeoutMs) await clock.advance(100);
        // The timeout fired; the retry budget has 27 s left.
        await eventually(async () => (await h.executor.get(instanceId))?.status !== 'running', 'the timeout to end the instance');
        // Ended, the instance sends nothing more, however long its retries would have gone on.
        for (let waitedMs = 0; waitedMs < 5000; waitedMs += 100) await clock.advance(100);
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
