/**
 * A contract runtime over HTTP that never decides, for tests of what a stopped call sends and
 * records (contract-call-stop.test.ts, loser-release-stop.test.ts): its answers, the HttpContracts
 * that calls it through a test's own fetch on the test's clock, and the run of the clock past a
 * timeout.
 */
import type { VirtualClock } from '../../src/contract/clock.js';
import type { JsonValue } from '../../src/contract/json.js';
import type { WorkflowExecutor } from '../../src/workflow/exec/executor.js';
import { operationId } from '../../src/contract/ids.js';
import { waitForHeader } from '../../src/runtime/boundary.js';
import { HttpContracts } from '../../src/workflow/exec/http-contracts.js';
import { eventually } from './support.js';

/** The digest the documents' contract calls name. */
export const stubDigest = `sha256:${'ab'.repeat(32)}`;

/** A task's contract call of the stub's contract (review, empty input), as YAML lines each led by `indent`. */
export const stubCall = (indent: string): string =>
  ['call: invoke-contract', 'with:', `  contract: { id: lab.review, version: '1.0.0', digest: '${stubDigest}' }`, '  interaction: review', '  input: {}']
    .map((line) => `${indent}${line}`)
    .join('\n');

/** The facade's 202 for an operation admitted under `invocationKey` and not decided yet. */
export function pendingAnswer(invocationKey: string): Response {
  return new Response(resultBody(invocationKey, null), { status: 202, headers: { [waitForHeader]: 'decision' } });
}

/** The facade's answer to a caller's cancel of the operation admitted under `invocationKey`: decided, cancelled, at `closedAtMs`. */
export function cancelledAnswer(invocationKey: string, closedAtMs: number): Response {
  const decision = { outcome: 'failed', reason: 'cancelled', closedAtMs, successVotes: 0, failedUnits: 0, units: 1, threshold: 1 };
  return new Response(resultBody(invocationKey, decision), { status: 200 });
}

function resultBody(invocationKey: string, decision: JsonValue): string {
  return JSON.stringify({
    operationId: operationId('alice', stubDigest, invocationKey),
    contract: { id: 'lab.review', version: '1.0.0', digest: stubDigest },
    interaction: 'review',
    invocationKey,
    phase: 'active',
    admittedAtMs: 0,
    deadlineMs: 60_000,
    decision,
    settlement: { status: 'pending', siblings: [] },
    branches: [],
    output: null,
    outputError: null,
  });
}

/** An uncertain answer: the runtime unavailable (503). */
export const unavailableAnswer = (): Response => new Response(JSON.stringify({ kind: 'unavailable', description: 'down for the test' }), { status: 503 });

/** Contract calls over HTTP to the stub `fetch`, on the test's clock (the retry budget runs on it). */
export const stubContracts = (clock: VirtualClock, fetchStub: typeof fetch): HttpContracts =>
  new HttpContracts({ endpoint: 'http://runtime.test', credential: { env: 'T' }, env: { T: 'token' }, clock, fetch: fetchStub });

/**
 * Moves the clock to `timeoutMs` after `startedAtMs` in 100 ms steps, waits for the timeout to end
 * the instance, then moves it 5 s further: what a stopped call would still send, it sends by then.
 */
export async function pastTheTimeout(
  clock: VirtualClock,
  executor: WorkflowExecutor,
  instanceId: string,
  startedAtMs: number,
  timeoutMs: number,
): Promise<void> {
  while (clock.nowMs() < startedAtMs + timeoutMs) await clock.advance(100);
  await eventually(async () => (await executor.get(instanceId))?.status !== 'running', 'the timeout to end the instance');
  for (let waitedMs = 0; waitedMs < 5000; waitedMs += 100) await clock.advance(100);
}
