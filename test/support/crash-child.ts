/**
 * The coordinator process the crash test kills (test/faults/crash-recovery.test.ts): the embedded
 * runtime over a durable store (sqlite file or JetStream), a system clock, and five in-process
 * peers whose handlers are deterministic (test/support/crash-plan.ts) and commit their business
 * effect through a SqliteEffectSink file shared by every incarnation.
 *
 * Each incarnation: recover() first (unsettled operations rebuilt from the store, timers re-armed,
 * pending/uncertain requests republished with the same publication ids), then admits the fixed plan
 * — an invocation already admitted by an earlier incarnation returns the existing operation (same
 * key, same input) — paced so that operations are in flight whenever the test kills the process.
 * When every planned operation is settled it prints `done`, closes and exits 0.
 *
 * stdout is one JSON object per line: started, recovered, admitted, effect, progress, done, error.
 *
 *   crash-child --store URL --sink PATH [--admit-gap-ms N] [--slow-dispatch-ms N]
 *
 * --slow-dispatch-ms delays the store append that records a dispatch receipt (a slow store). It
 * widens the window in which a peer has already committed its effect while the request is still
 * `pending` in the log: a kill there makes the next incarnation republish the same publication id
 * at the same attempt and fence, and the fresh peer runs the handler again — the fenced sink's
 * idempotency key is what keeps the effect single.
 */
import { parseArgs } from 'node:util';
import type { JsonValue } from '../../src/contract/json.js';
import type { Transition } from '../../src/events/types.js';
import { openStore } from '../../src/adapters/store/open.js';
import type { EventStore } from '../../src/adapters/store/types.js';
import type { EffectKey, EffectSink } from '../../src/peer/effect-sink.js';
import type { Handler } from '../../src/peer/peer.js';
import { SqliteEffectSink } from '../../src/peer/sqlite-effect-sink.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded, type Embedded } from '../../src/deployment/embedded.js';
import { crashBundle, crashCaller, crashPeers, crashPlan, verdictOf, workMs, type PlannedInvocation, type Verdict } from './crash-plan.js';

const progressEveryMs = 100;
const closeWaitMs = 5000;

const startedAtMs = Date.now();

/** One JSON line; `t` is ms since this incarnation started. */
function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ...event, t: Date.now() - startedAtMs })}\n`);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Error('aborted'));
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), reject(new Error('aborted'))), { once: true });
  });
}

/** A slow store: only the append recording dispatch receipts waits. Everything else passes through. */
function slowDispatchStore(inner: EventStore, delayMs: number): EventStore {
  return {
    name: inner.name,
    capabilities: inner.capabilities,
    limits: inner.limits,
    index: inner.index,
    workflowIndex: inner.workflowIndex,
    create: (operationId, transition) => inner.create(operationId, transition),
    append: async (operationId: string, expectedRevision: string, transition: Transition) => {
      if (transition.causation.command === 'record-dispatch') await sleep(delayMs);
      return inner.append(operationId, expectedRevision, transition);
    },
    read: (operationId) => inner.read(operationId),
    operationIds: () => inner.operationIds(),
    runningWorkflowIds: () => inner.runningWorkflowIds(),
    workflowEnded: (instanceId) => inner.workflowEnded(instanceId),
    workflowInstanceIds: () => inner.workflowInstanceIds(),
    tombstone: (operationId) => inner.tombstone(operationId),
    follow: (listener) => inner.follow(listener),
    watch: (listener) => inner.watch(listener),
    close: () => inner.close(),
  };
}

/** Reports every commit's answer (repeated or refused) so the test can tell what the sink absorbed. */
function reportingSink(inner: SqliteEffectSink): EffectSink {
  return {
    capabilities: inner.capabilities,
    commit: async (key: EffectKey, fence: number, attempt: number, effect: () => JsonValue | Promise<JsonValue>) => {
      const at = { operationId: key.operationId, branchId: key.branchId, fence, attempt };
      try {
        const answer = await inner.commit(key, fence, attempt, effect);
        emit({ event: 'effect', ...at, repeated: answer.repeated });
        return answer;
      } catch (error) {
        emit({ event: 'effect', ...at, refused: String(error) });
        throw error;
      }
    },
    applied: () => inner.applied(),
  };
}

/**
 * The business handler: commit the effect first (its value carries the verdict), then work, then
 * answer with the committed verdict. A `hold` answers only after the deadline (a late result).
 * Cooperative: a cancelled attempt stops (the effect stays committed — stopped is not reversal).
 */
function handlerFor(interaction: PlannedInvocation['interaction'], peerId: string): Handler {
  return async (input, context): Promise<JsonValue> => {
    const document = (input as { document: string }).document;
    const committed = (await context.effect(() => ({ interaction, peerId, document, verdict: verdictOf(interaction, peerId, document) }))) as {
      verdict: Verdict;
    };
    if (committed.verdict === 'hold') {
      await sleep(Math.max(0, context.request.deadlineMs + 100 - Date.now()), context.signal);
      return { verdict: 'reject', note: 'late' };
    }
    await sleep(workMs(interaction, peerId, document), context.signal);
    return { verdict: committed.verdict };
  };
}

async function admitPlan(embedded: Embedded, plan: PlannedInvocation[], admitted: Map<string, string>, gapMs: number): Promise<void> {
  for (const item of plan) {
    for (;;) {
      try {
        const request = { contract: embedded.bundle.ref, interaction: item.interaction, invocationKey: item.invocationKey, input: { document: item.document } };
        const { result, created } = await embedded.coordinator.invoke(crashCaller, request);
        admitted.set(item.invocationKey, result.operationId);
        emit({ event: 'admitted', key: item.invocationKey, operationId: result.operationId, created });
        if (created) await sleep(gapMs);
        break;
      } catch (error) {
        // A store that is briefly unavailable is retried; the same key never makes a second operation.
        emit({ event: 'error', stage: 'admit', key: item.invocationKey, error: String(error) });
        await sleep(200);
      }
    }
  }
}

/** Polls (from the start, alongside admission) until every planned operation is admitted and settled, printing progress. */
async function awaitSettled(embedded: Embedded, plan: PlannedInvocation[], admitted: Map<string, string>): Promise<void> {
  for (;;) {
    let settled = 0;
    for (const operationId of admitted.values()) {
      const view = await embedded.coordinator.get(crashCaller.principalId, operationId).catch(() => undefined);
      if (view?.phase === 'settled') settled++;
    }
    emit({ event: 'progress', admitted: admitted.size, settled, total: plan.length });
    if (admitted.size === plan.length && settled === plan.length) return;
    await sleep(progressEveryMs);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { store: { type: 'string' }, sink: { type: 'string' }, 'admit-gap-ms': { type: 'string' }, 'slow-dispatch-ms': { type: 'string' } },
  });
  if (!values.store || !values.sink) throw new Error('usage: crash-child --store URL --sink PATH [--admit-gap-ms N] [--slow-dispatch-ms N]');
  emit({ event: 'started', pid: process.pid });
  const clock = new SystemClock();
  const durable = await openStore(values.store, { clock });
  const slowMs = Number(values['slow-dispatch-ms'] ?? 0);
  const store = slowMs > 0 ? slowDispatchStore(durable, slowMs) : durable;
  const embedded = await createEmbedded({ clock, bundle: crashBundle(), groups: { reviewers: crashPeers }, store });
  const sinkFile = new SqliteEffectSink({ path: values.sink, writer: `pid:${process.pid}` });
  const sink = reportingSink(sinkFile);
  // Peers first: requests republished by recovery must find someone listening.
  for (const peerId of crashPeers) {
    await embedded.addPeer(
      peerId,
      { review: handlerFor('review', peerId), 'review-deadline': handlerFor('review-deadline', peerId) },
      { sink, stopWaitMs: 500 },
    );
  }
  const recovered = await embedded.coordinator.recover();
  emit({ event: 'recovered', ...recovered });
  const plan = crashPlan();
  const admitted = new Map<string, string>();
  const settling = awaitSettled(embedded, plan, admitted);
  await admitPlan(embedded, plan, admitted, Number(values['admit-gap-ms'] ?? 100));
  await settling;
  emit({ event: 'done' });
  await Promise.race([embedded.close(), sleep(closeWaitMs)]);
  sinkFile.close();
  process.exit(0);
}

main().catch((error: unknown) => {
  emit({ event: 'error', stage: 'main', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
});
