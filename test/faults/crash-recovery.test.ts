/**
 * Spec: "Outbox, durable delivery and recovery" and "Selection, claims and attempts" (fenced
 * effects). A coordinator child process over the sqlite store, and one over the JetStream store, is
 * killed with SIGKILL at seeded random points while operations are in flight, restarted, killed
 * again (3–4 times), then left to run until every operation is settled. Then, from the store alone:
 *
 *   - every planned invocation exists and its decision is the one a plain reference rule computes
 *     from the deterministic verdicts (the decision it would have reached without any crash);
 *   - every operation's log replays: folding with xstate's own transition() equals the table fold;
 *   - the fenced effect sink applied at most one effect per (operation, branch, fence), never one
 *     with a fence below one already applied for that key (zero duplicate business effects), and
 *     every accepted result is backed by the effect committed at its fence.
 *
 * The seed is printed; CONVOKE_CRASH_SEED=N reproduces the kill schedule (not the OS scheduling:
 * where in the runtime a kill lands still varies). CONVOKE_CRASH_KILLS=N overrides the number of
 * kills (0 is a no-crash control run of the same checks).
 *
 * Judgment: decisions are made independent of the clock by sizing, not by teaching the reference
 * rule about deadlines — `review` has a deadline far beyond the whole crash phase and an attempt
 * budget above the number of kills, so it must close by threshold or impossibility; a
 * `review-deadline` operation can only close at its (short) deadline, so it must close by timeout.
 * A decision that differs from the rule fails the test with the operation's log summarized.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadBundle } from '../../src/contract/bundle.js';
import { operationId } from '../../src/contract/ids.js';
import type { JsonValue } from '../../src/contract/json.js';
import type { StoredTransition } from '../../src/events/types.js';
import { openStore } from '../../src/adapters/store/open.js';
import { SqliteEffectSink, type AppliedEffect } from '../../src/peer/sqlite-effect-sink.js';
import { applyStored, fold, machineSteps, type OperationRecord } from '../../src/projections/record.js';
import { SystemClock } from '../../src/contract/clock.js';
import { seededRandom, type Random } from '../../src/runtime/random.js';
import { startJetStreamServer } from '../support/jetstream-server.js';
import { CrashChild } from '../support/crash-harness.js';
import { attemptsMax, crashBundle, crashCaller, crashPeers, crashPlan, quorumCount, verdictOf, type PlannedInvocation } from '../support/crash-plan.js';

const seed = process.env.CONVOKE_CRASH_SEED !== undefined ? Number(process.env.CONVOKE_CRASH_SEED) : randomInt(2 ** 31);
const killsOverride = process.env.CONVOKE_CRASH_KILLS !== undefined ? Number(process.env.CONVOKE_CRASH_KILLS) : undefined;
console.log(`crash-recovery seed ${seed} (CONVOKE_CRASH_SEED=${seed} reproduces the kill schedule)`);

/** A kill lands this long after the incarnation reports `started`: during recovery, admission or settling. */
const killDelayMinMs = 150;
const killDelaySpanMs = 2350;
const startTimeoutMs = 30_000;
/** The last incarnation must settle everything within this (deadline ops close 3 s after admission). */
const finalTimeoutMs = 45_000;
const admitGapMs = 100;
/** See crash-child: a slow dispatch-receipt append widens the "effect committed, request still pending" window. */
const slowDispatchMs = 150;

// ── the reference rule ─────────────────────────────────────────────────────

/**
 * The decision without crashes, from the verdicts alone. Quorum 3 of 5 distinct branches:
 * an approve is a success vote; reject and retry both end as failures (retry exhausts its attempt
 * budget); a hold stays open until the deadline. So: 3 approvals close by threshold; otherwise, if
 * approvals plus holds could still reach 3, nothing closes before the deadline (onTimeout partial);
 * otherwise the quorum becomes impossible and the operation fails early.
 */
function expectedDecision(item: PlannedInvocation): { outcome: string; reason: string } {
  const verdicts = crashPeers.map((peerId) => verdictOf(item.interaction, peerId, item.document));
  const approvals = verdicts.filter((v) => v === 'approve').length;
  const holds = verdicts.filter((v) => v === 'hold').length;
  if (approvals >= quorumCount) return { outcome: 'success', reason: 'threshold' };
  if (approvals + holds >= quorumCount) return { outcome: 'partial', reason: 'timeout' };
  return { outcome: 'failed', reason: 'impossible' };
}

// ── the crash schedule ─────────────────────────────────────────────────────

interface KillPoint {
  incarnation: number;
  afterStartedMs: number;
  /** What the child had reported when it died. */
  stage: string;
  admitted: number;
  settled: number;
}

interface RunReport {
  kills: KillPoint[];
  incarnations: CrashChild[];
  elapsedMs: number;
}

/** A bound on a wait that must not keep the test process alive once the wait is over. */
const bound = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());

function childArgs(storeUrl: string, sinkPath: string): string[] {
  return ['--store', storeUrl, '--sink', sinkPath, '--admit-gap-ms', String(admitGapMs), '--slow-dispatch-ms', String(slowDispatchMs)];
}

function stageOf(child: CrashChild): string {
  if (child.last('done')) return 'done';
  if (child.last('admitted')?.key === crashPlan().at(-1)!.invocationKey) return 'settling';
  if (child.last('recovered')) return 'admitting';
  return 'recovering';
}

const inFlight = (k: KillPoint) => k.admitted > k.settled;

/** Kills each incarnation at a seeded random delay, then lets the last one settle everything. */
async function crashAndRecover(t: TestContext, storeUrl: string, sinkPath: string, random: Random): Promise<RunReport> {
  const startedAtMs = Date.now();
  const killCount = killsOverride ?? 3 + random.int(2);
  const report: RunReport = { kills: [], incarnations: [], elapsedMs: 0 };
  // Whatever fails, no incarnation outlives the test.
  t.after(() => Promise.all(report.incarnations.map((c) => c.kill())));
  for (let k = 0; k < killCount; k++) {
    const child = CrashChild.start(childArgs(storeUrl, sinkPath));
    report.incarnations.push(child);
    await child.waitFor('started', startTimeoutMs);
    const afterStartedMs = killDelayMinMs + random.int(killDelaySpanMs);
    await Promise.race([bound(afterStartedMs), child.exited]);
    // An incarnation that dies on its own (not by our SIGKILL) is a failure, not a crash point.
    assert.ok(child.running || child.last('done'), `incarnation ${k + 1} exited on its own\n${child.diagnostics()}`);
    const progress = child.last('progress');
    const point: KillPoint = {
      incarnation: k + 1,
      afterStartedMs,
      stage: stageOf(child),
      admitted: Number(progress?.admitted ?? 0),
      settled: Number(progress?.settled ?? 0),
    };
    await child.kill();
    report.kills.push(point);
    t.diagnostic(`kill ${k + 1}: SIGKILL ${afterStartedMs} ms after start, while ${point.stage} (${point.admitted} admitted, ${point.settled} settled)`);
  }
  if (killCount > 0 && !report.kills.some(inFlight)) {
    // On a loaded machine every seeded kill can land before the first admission: one more
    // incarnation is killed as soon as it has operations in flight, so the run tests what it says.
    const child = CrashChild.start(childArgs(storeUrl, sinkPath));
    report.incarnations.push(child);
    await child.waitFor('started', startTimeoutMs);
    const startedMs = Date.now();
    const progress = () => child.last('progress');
    while (child.running && !child.last('done') && !(Number(progress()?.admitted ?? 0) > Number(progress()?.settled ?? 0))) await bound(5);
    const point: KillPoint = {
      incarnation: report.kills.length + 1,
      afterStartedMs: Date.now() - startedMs,
      stage: stageOf(child),
      admitted: Number(progress()?.admitted ?? 0),
      settled: Number(progress()?.settled ?? 0),
    };
    await child.kill();
    report.kills.push(point);
    t.diagnostic(
      `kill ${point.incarnation}: SIGKILL ${point.afterStartedMs} ms after start, the first with operations in flight, while ${point.stage} (${point.admitted} admitted, ${point.settled} settled)`,
    );
  }
  const last = CrashChild.start(childArgs(storeUrl, sinkPath));
  report.incarnations.push(last);
  try {
    await last.waitFor('done', finalTimeoutMs);
  } finally {
    // After done it closes and exits by itself; otherwise (or if closing hangs) it is stopped.
    if (last.last('done')) await Promise.race([last.exited, bound(10_000)]);
    await last.kill();
  }
  const exit = await last.exited;
  assert.equal(exit.code, 0, `the last incarnation exits cleanly after done\n${last.diagnostics()}`);
  report.elapsedMs = Date.now() - startedAtMs;
  return report;
}

// ── checks from the store and the sink alone ───────────────────────────────

interface AcceptedFact {
  branchId: string;
  attempt: number;
  fence: number;
  result: JsonValue;
}

/** Folds step by step, collecting every result the log accepted (void transitions change nothing). */
function acceptedResults(transitions: readonly StoredTransition[]): AcceptedFact[] {
  const facts: AcceptedFact[] = [];
  let record: OperationRecord | undefined;
  for (const stored of transitions) {
    const before = record;
    record = applyStored(record, stored);
    for (const branch of Object.values(record?.branches ?? {})) {
      const accepted = branch.accepted;
      if (accepted && accepted !== before?.branches[branch.branchId]?.accepted)
        facts.push({ branchId: branch.branchId, attempt: accepted.attempt, fence: accepted.fence, result: accepted.result });
    }
  }
  return facts;
}

function logSummary(transitions: readonly StoredTransition[]): string {
  return transitions
    .map((s) => `  r${s.revision} @${s.committedAtMs} ${s.transition.causation.command}: ${s.transition.events.map((e) => e.type).join(', ')}`)
    .join('\n');
}

interface OperationCheck {
  item: PlannedInvocation;
  operationId: string;
  record: OperationRecord;
  accepted: AcceptedFact[];
}

async function checkStore(storeUrl: string): Promise<OperationCheck[]> {
  const store = await openStore(storeUrl, { clock: new SystemClock() });
  const digest = loadBundle(crashBundle()).digest;
  const checks: OperationCheck[] = [];
  const problems: string[] = [];
  try {
    for (const item of crashPlan()) {
      const id = operationId(crashCaller.principalId, digest, item.invocationKey);
      const read = await store.read(id);
      if (read.kind !== 'ok') {
        problems.push(`${item.invocationKey}: not in the store (${read.kind})`);
        continue;
      }
      const record = fold(read.transitions);
      assert.ok(record, `${item.invocationKey}: the log folds to a record`);
      // Replay: xstate's own transition() and the derived tables agree on the whole log.
      assert.deepEqual(fold(read.transitions, machineSteps), record, `${item.invocationKey}: machine fold equals table fold`);
      const expected = expectedDecision(item);
      const actual = { outcome: record.decision?.outcome, reason: record.decision?.reason };
      const settledRight = record.phase === 'settled';
      const timedRight =
        expected.reason === 'timeout'
          ? record.decision!.closedAtMs >= record.deadlineMs
          : record.decision !== null && record.decision.closedAtMs < record.deadlineMs;
      if (actual.outcome !== expected.outcome || actual.reason !== expected.reason || !settledRight || !timedRight) {
        const verdicts = crashPeers.map((p) => `${p}=${verdictOf(item.interaction, p, item.document)}`).join(' ');
        problems.push(
          `${item.invocationKey} ${id}: expected ${expected.outcome}/${expected.reason}, got ${actual.outcome}/${actual.reason}, phase ${record.phase} (${verdicts})\n${logSummary(read.transitions)}`,
        );
      }
      checks.push({ item, operationId: id, record, accepted: acceptedResults(read.transitions) });
    }
  } finally {
    await store.close();
  }
  assert.deepEqual(problems, [], `decisions differ from the reference rule:\n${problems.join('\n')}`);
  return checks;
}

/** Zero duplicate business effects, and every accepted result backed by the effect at its fence. */
function checkEffects(sinkPath: string, checks: OperationCheck[]): { applied: AppliedEffect[] } {
  const sink = new SqliteEffectSink({ path: sinkPath });
  const applied = [...sink.applied()];
  sink.close();
  const highest = new Map<string, number>();
  const duplicates: string[] = [];
  for (const e of applied) {
    const key = `${e.operationId}/${e.branchId}`;
    const before = highest.get(key) ?? 0;
    // Strictly increasing per key covers both: no second effect at a fence, none below a newer one.
    if (e.fence <= before) duplicates.push(`${key}: fence ${e.fence} applied (seq ${e.seq}, ${e.writer}) after fence ${before}`);
    highest.set(key, Math.max(before, e.fence));
  }
  assert.deepEqual(duplicates, [], 'no duplicate or out-of-order business effects');
  const byOperation = new Map(checks.map((c) => [c.operationId, c]));
  const unbacked: string[] = [];
  for (const check of checks) {
    for (const fact of check.accepted) {
      const effect = applied.find((e) => e.operationId === check.operationId && e.branchId === fact.branchId && e.fence === fact.fence);
      const verdict = (effect?.value as { verdict?: string } | undefined)?.verdict;
      if (verdict !== (fact.result as { verdict: string }).verdict)
        unbacked.push(
          `${check.item.invocationKey}/${fact.branchId} fence ${fact.fence}: result ${JSON.stringify(fact.result)}, effect ${JSON.stringify(effect?.value)}`,
        );
    }
  }
  assert.deepEqual(unbacked, [], 'every accepted result is the committed effect of its fence');
  for (const e of applied) {
    const check = byOperation.get(e.operationId);
    assert.ok(check, `effect for an operation the plan never admitted: ${e.operationId}`);
    const branch = check.record.branches[e.branchId];
    assert.ok(branch && e.fence <= branch.fence, `effect ${e.operationId}/${e.branchId} fence ${e.fence} was assigned in the log`);
  }
  return { applied };
}

// ── the two stores ─────────────────────────────────────────────────────────

function countEffects(report: RunReport): { commits: number; repeated: number; refused: number } {
  const effects = report.incarnations.flatMap((c) => c.events.filter((e) => e.event === 'effect'));
  return {
    commits: effects.length,
    repeated: effects.filter((e) => e.repeated === true).length,
    refused: effects.filter((e) => e.refused !== undefined).length,
  };
}

async function runCrashTest(t: TestContext, storeUrl: string, sinkPath: string, random: Random): Promise<void> {
  const report = await crashAndRecover(t, storeUrl, sinkPath, random);
  const checks = await checkStore(storeUrl);
  const { applied } = checkEffects(sinkPath, checks);
  const counts = countEffects(report);
  const outcomes = new Map<string, number>();
  for (const c of checks)
    outcomes.set(
      `${c.record.decision!.outcome}/${c.record.decision!.reason}`,
      (outcomes.get(`${c.record.decision!.outcome}/${c.record.decision!.reason}`) ?? 0) + 1,
    );
  const branches = checks.flatMap((c) => Object.values(c.record.branches));
  const retried = branches.filter((b) => b.attempt > 1).length;
  const successAttemptMax = Math.max(0, ...branches.filter((b) => b.accepted?.status === 'success').map((b) => b.attempt));
  const settlements = checks.map((c) => c.record.settlement.status);
  const voids = checks.reduce((n, c) => n + c.record.transitionsVoid, 0);
  t.diagnostic(
    `${checks.length} operations, decisions ${JSON.stringify(Object.fromEntries(outcomes))}; ${report.kills.length} kills, ${report.incarnations.length} incarnations, ${report.elapsedMs} ms`,
  );
  t.diagnostic(
    `effects: ${applied.length} applied, ${counts.commits} commits answered, ${counts.repeated} repeated (absorbed by the idempotency key), ${counts.refused} refused (older fence)`,
  );
  t.diagnostic(
    `${retried} branches ended past attempt 1; a success needed at most attempt ${successAttemptMax} of ${attemptsMax}; settlement ${settlements.filter((s) => s === 'complete').length} complete, ${settlements.filter((s) => s === 'indeterminate').length} indeterminate; ${voids} void transitions`,
  );
  if (killsOverride === undefined || killsOverride > 0) {
    assert.ok(report.kills.some(inFlight), 'at least one kill landed while operations were in flight');
  }
}

test(`sqlite store: SIGKILLed coordinator restarts reach the same decisions with zero duplicate effects (seed ${seed})`, { timeout: 180_000 }, async (t) => {
  t.diagnostic(`seed ${seed}`);
  const dir = await mkdtemp(join(tmpdir(), 'convoke-crash-sqlite-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await runCrashTest(t, `sqlite:${join(dir, 'store.db')}`, join(dir, 'effects.db'), seededRandom(seed));
});

test(`jetstream store: SIGKILLed coordinator restarts reach the same decisions with zero duplicate effects (seed ${seed})`, { timeout: 180_000 }, async (t) => {
  t.diagnostic(`seed ${seed}`);
  const server = await startJetStreamServer();
  const dir = await mkdtemp(join(tmpdir(), 'convoke-crash-jetstream-'));
  t.after(async () => {
    await server.dispose();
    await rm(dir, { recursive: true, force: true });
  });
  await runCrashTest(t, `jetstream:${server.url}`, join(dir, 'effects.db'), seededRandom(seed + 1));
});
