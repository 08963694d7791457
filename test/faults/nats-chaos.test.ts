/**
 * Seeded chaos on a real NATS deployment in durable mode: two `convoke serve` processes (one
 * jetstream store, one command queue group, shared result consumers) and five `convoke peer`
 * processes with one shared SQLite effect sink, while a caller keeps invoking. During the run, at
 * seeded instants, one fault at a time:
 *
 *   - a peer is SIGKILLed and restarted (its unacknowledged requests are redelivered);
 *   - one coordinator is SIGKILLed and restarted (the other carries on; the restarted one
 *     recovers from the log: outbox, held results, timers);
 *   - nats-server is stopped and restarted on the same port and store dir (SIGTERM), or SIGKILLed;
 *   - all at once: both coordinators and a peer SIGKILLed while nats-server restarts.
 *
 * Every kind happens at least once (a seeded shuffle, then seeded draws). The caller retries each
 * invocation under its key until it is admitted (idempotent by key).
 *
 * A SIGKILLed nats-server 2.9 can come back having lost stream writes it had acknowledged: the
 * coordinators' durability check then finds a consumer ahead of its stream (or a stream's last
 * sequence gone back), recreates the consumer and closes the operations then open as
 * `indeterminate` (durability-lost), never `failed` (docs/operations.md, "Broker restarts"). Such
 * an operation is accepted only when a coordinator logged that loss; it still settles as its log
 * says, with at most one effect per branch. Every other operation decides success.
 *
 * Throughout the run a hostile principal is at work (test/support/hostile-peer.ts): `mallory`, a
 * peer with its own NATS user and exactly a peer's permissions, a real audience member of `first`
 * (whose attempt budget is 2, so a claim release gets its branch reassigned at the next fence) and
 * of an interaction in a second namespace, `e2e.v1.other`, deployed on the same coordinators.
 * It computes the run's operation ids from the caller's predictable keys and learns more from its
 * requests, and it floods its own subjects with junk, malformed and huge payloads, replays what it
 * published, squats the Nats-Msg-Ids the honest peers' results will carry, publishes results,
 * claim releases and cancel replies that name honest peers, uses stale fences and attempts for its
 * own branch, sends its current assignment's vote on the other namespace's and the other
 * interaction's subjects, and tries an honest peer's subject (the broker refuses). Its count and
 * rate are bounded, so it stops by itself; the seed drives it too. Then, for every operation:
 *
 *   - it decides success: `allok` (all-successful) with all five votes, `first` (first-success,
 *     siblings cancelled) with at least one, and reaches the settled boundary;
 *   - the decision a caller reads equals the one folded from the stored log, and folding with
 *     xstate's own transition() equals the table fold;
 *   - the fenced effect sink holds at most one effect per operation/branch (exactly one for each
 *     `allok` branch), and every accepted success of an honest peer is backed by its effect;
 *   - every counted vote is a real peer's current-fence result: each result the log accepted
 *     was, when accepted, the current attempt and fence of its branch, from the branch's assigned
 *     peer, on the operation's own subject — and on mallory's branch, a result mallory really
 *     published there for that assignment (its one vote may count, nothing it forged does).
 *
 * And mallory provably ran: it stored at least a few messages of every kind, the honest results
 * whose Msg-Ids it squatted were still accepted, its refused traffic shows in the logs' recorded
 * rejections (wrong peer, stale fence) and in the coordinators' rejections metric (malformed,
 * wrong subject), and the broker stored nothing it sent on an honest peer's subject. Its tallies,
 * the recorded rejections and the metric are printed.
 *
 * The seed is printed; CONVOKE_CHAOS_SEED=N replays the fault schedule (where in the runtime a
 * kill lands still depends on the OS). CONVOKE_CHAOS_FAULTS=N sets how many faults (default 8).
 * CONVOKE_CHAOS_LOGS=DIR keeps the evidence of the run in DIR: what every coordinator and peer
 * process printed (killed ones included) and a copy of the deployment's directory (the JetStream
 * store, the effect sink, the configs) as it was when the run ended.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { cp, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { after, test } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import type { StoredTransition } from '../../src/events/types.js';
import { fold, machineSteps } from '../../src/projections/record.js';
import { SqliteEffectSink } from '../../src/peer/sqlite-effect-sink.js';
import { seededRandom, type Random } from '../../src/runtime/random.js';
import type { InvocationResult } from '../../src/projections/views.js';
import type { ServeProcess } from '../support/http-server.js';
import { HostilePeer, hostileKinds, type HostileKind } from '../support/hostile-peer.js';
import { NatsDeploymentFixture, approve, e2eBundle, e2eNamespace, resultOf, type CommandClient, type PeerSpec } from '../support/nats-deployment-fixture.js';

const seed = Number(process.env.CONVOKE_CHAOS_SEED ?? randomInt(1, 1_000_000));
const faultCount = Number(process.env.CONVOKE_CHAOS_FAULTS ?? 8);
const logsDir = process.env.CONVOKE_CHAOS_LOGS;
/**
 * 600 s for the default 8 faults, 50 s more per fault beyond: a generous bound, not a rule. The
 * run waits for events (each restarted process ready, each operation admitted and decided), and
 * on a loaded 2-core machine a restart with recovery has taken a minute.
 */
const runTimeoutMs = Math.max(600_000, 200_000 + 50_000 * faultCount);
/** How long the caller keeps asking for one admission or one settled read across faults before reporting it. */
const retryForMs = 180_000;
/**
 * The caller keeps at most this many operations open (admitted, not yet seen decided): its load
 * follows what the deployment gets through. A caller invoking at a fixed rate piles up work
 * without bound on a slow machine, and every restart then recovers more open operations.
 */
const openMax = 32;
const reviewers = ['alfa', 'bravo', 'charlie', 'delta', 'echo'];
const interactionsUsed = ['allok', 'first'] as const;
type Interaction = (typeof interactionsUsed)[number];
/** The hostile principal, the second namespace it also belongs to, and that namespace's interaction. */
const mallory = 'mallory';
const otherNamespace = 'e2e.v1.other';
const otherInteraction = 'solo';
const firstAttemptsMax = 2;
/** Each kind mallory must have got stored at least this many of (its budgets are far larger). */
const hostileStoredMin: Record<Exclude<HostileKind, 'denied'>, number> = {
  legit: 5,
  'flood-junk': 5,
  'flood-malformed': 5,
  'flood-huge': 1,
  replay: 5,
  squat: 10,
  impersonate: 5,
  stale: 5,
  'cross-namespace': 5,
  'cross-interaction': 5,
};
type FaultKind = 'peer' | 'coordinator' | 'server-restart' | 'server-kill' | 'all-at-once';
const faultKinds: readonly FaultKind[] = ['peer', 'coordinator', 'server-restart', 'server-kill', 'all-at-once'];

/** The caller's i-th invocation: what it sends, and what an observer can predict. */
function invocation(i: number): { key: string; interaction: Interaction } {
  return { key: `chaos-${seed}-${i}`, interaction: interactionsUsed[i % interactionsUsed.length]! };
}

/**
 * Deadlines and leases beyond the run, so every operation must close by its rule, never by time:
 * a request can wait in its stream through restarts and a starved consumer's repair (tens of
 * seconds on a loaded machine) before its peer takes it, and no lease runs until then.
 */
const lasting = { timeoutMs: runTimeoutMs, leaseMs: runTimeoutMs, renewIntervalMs: 5_000, settlementGraceMs: 10_000, cancelTimeoutMs: 5_000 };

/**
 * Mallory is in `first`'s audience (first-success: its vote may close it, its silence cannot stop it),
 * with a second attempt after a quick backoff, so its claim release reassigns its branch.
 */
function chaosBundle(): JsonObject {
  const bundle = e2eBundle();
  const interactions = bundle.interactions as Record<string, JsonObject>;
  const first = { ...interactions.first!, audience: { peers: [...reviewers, mallory] }, attempts: firstAttemptsMax, retryBackoffMs: 100 };
  return { ...bundle, interactions: { allok: { ...interactions.allok!, ...lasting }, first: { ...first, ...lasting } } };
}

/** A second namespace on the same coordinators whose audience also names mallory: it may publish there. */
function otherBundle(): JsonObject {
  const bundle = e2eBundle();
  const allok = (bundle.interactions as Record<string, JsonObject>).allok!;
  return {
    ...bundle,
    contract: { id: 'e2e.other', version: '1.0.0' },
    subjectNamespace: otherNamespace,
    interactions: { [otherInteraction]: { ...allok, ...lasting, audience: { peers: [mallory] } } },
  };
}

function chaosPeers(): Record<string, PeerSpec> {
  // Each answer takes 200 ms, so faults land while peers work.
  const interactions = Object.fromEntries(interactionsUsed.map((i) => [i, { result: approve, delayMs: 200 }]));
  return Object.fromEntries(reviewers.map((p) => [p, { effectSink: 'sqlite' as const, interactions }]));
}

function schedule(random: Random): FaultKind[] {
  const kinds = [...faultKinds];
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = random.int(i + 1);
    [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
  }
  while (kinds.length < faultCount) kinds.push(faultKinds[random.int(faultKinds.length)]!);
  return kinds.slice(0, Math.max(faultCount, 0));
}

/** An operation's log in one line: each transition's instant, causation and events (type, branch, the fields that say why). */
function summary(log: readonly StoredTransition[]): string {
  return log
    .map((t) => {
      const events = t.transition.events.map((e) => {
        const { type, branchId, cause, reason, status, outcome, attempt, fence } = e as unknown as Record<string, unknown>;
        return [type, branchId, cause, reason, status, outcome, attempt === undefined ? undefined : `a${String(attempt)}f${String(fence)}`]
          .filter((x) => x !== undefined && x !== null)
          .join(' ');
      });
      return `@${t.committedAtMs} ${t.transition.causation.command}: ${events.join(', ')}`;
    })
    .join(' | ');
}

/** The operation's requests and results as the streams hold them (subject's last token, stream sequence, store time). */
async function storedMessages(f: NatsDeploymentFixture, operationId: string): Promise<string> {
  const jsm = await jetstreamManager(await f.adminConnection());
  const found: string[] = [];
  for (const kind of ['request', 'result'] as const) {
    for (const peer of reviewers) {
      const stream = kind === 'request' ? f.streams(peer).requests : f.streams(peer).results;
      const subject = `${e2eNamespace}.${interactionOf.get(operationId) ?? '*'}.${operationId}.${kind}.${peer}`;
      const message = await jsm.streams.getMessage(stream, { last_by_subj: subject }).catch(() => undefined);
      found.push(`${kind} ${peer}: ${message ? `seq ${message.seq} at ${message.time.toISOString()}` : 'none'}`);
    }
  }
  return found.join(', ');
}

/** Interaction of each admitted operation (for the failure report's subjects). */
const interactionOf = new Map<string, string>();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What each stopped peer process printed, by peer (a restarted peer's new process replaces it in the fixture). */
const stoppedPeerOutput = new Map<string, string[]>();

function keepPeerOutput(peerId: string, output: string): void {
  stoppedPeerOutput.set(peerId, [...(stoppedPeerOutput.get(peerId) ?? []), output]);
}

/** CONVOKE_CHAOS_LOGS: every process's output and a copy of the deployment's directory, for a post-mortem. */
async function keepEvidence(dir: string, f: NatsDeploymentFixture, coordinators: Coordinators): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'coordinators.log'), coordinators.output());
  for (const peerId of reviewers) {
    const printed = [...(stoppedPeerOutput.get(peerId) ?? []), f.peers.get(peerId)?.output() ?? ''];
    await writeFile(join(dir, `peer-${peerId}.log`), printed.join('\n--- restarted ---\n'));
  }
  await cp(f.dir, join(dir, 'deployment'), { recursive: true });
}

/** The two coordinators: the fixture's own serve process and a second one on the same config. */
class Coordinators {
  second: ServeProcess | undefined;
  /** What every stopped coordinator process printed (a SIGKILLed process takes its output along otherwise). */
  private readonly printed: string[] = [];

  constructor(private readonly f: NatsDeploymentFixture) {}

  async start(which: 0 | 1): Promise<void> {
    if (which === 0) await this.f.startServe();
    else this.second = await this.f.startAnotherServe();
  }

  get(which: 0 | 1): ServeProcess {
    return which === 0 ? this.f.serve! : this.second!;
  }

  async kill(which: 0 | 1): Promise<void> {
    const serve = this.get(which);
    serve.child.kill('SIGKILL');
    await serve.exited;
    this.printed.push(serve.stdout() + serve.stderr());
  }

  /** Everything the coordinators printed so far, stopped processes included. */
  output(): string {
    return [...this.printed, ...[this.f.serve, this.second].filter((p) => p !== undefined).map((p) => p.stdout() + p.stderr())].join('');
  }
}

async function inject(f: NatsDeploymentFixture, coordinators: Coordinators, kind: FaultKind, random: Random): Promise<string> {
  const pause = (): Promise<void> => sleep(300 + random.int(700)).then(() => undefined);
  switch (kind) {
    case 'peer': {
      const p = reviewers[random.int(reviewers.length)]!;
      const peer = f.peers.get(p)!;
      peer.child.kill('SIGKILL');
      await peer.exited;
      keepPeerOutput(p, peer.output());
      await pause();
      await f.startPeer(p);
      return `peer ${p} SIGKILLed and restarted`;
    }
    case 'coordinator': {
      const which = random.int(2) as 0 | 1;
      await coordinators.kill(which);
      await pause();
      await coordinators.start(which);
      return `coordinator ${which} SIGKILLed and restarted`;
    }
    case 'server-restart':
      await f.restartServer(pause);
      return 'nats-server stopped and restarted';
    case 'server-kill': {
      const port = f.server.port;
      const exited = new Promise((r) => f.server.process.once('exit', r));
      f.server.process.kill('SIGKILL');
      await exited;
      await pause();
      await f.startServer(port);
      return 'nats-server SIGKILLed and restarted';
    }
    case 'all-at-once': {
      const p = reviewers[random.int(reviewers.length)]!;
      const peer = f.peers.get(p)!;
      peer.child.kill('SIGKILL');
      await f.restartServer(async () => {
        await Promise.all([coordinators.kill(0), coordinators.kill(1), peer.exited]);
        keepPeerOutput(p, peer.output());
        await pause();
      });
      await Promise.all([coordinators.start(0), coordinators.start(1), f.startPeer(p)]);
      return `both coordinators and peer ${p} SIGKILLed while nats-server restarted`;
    }
  }
}

/**
 * The coordinators' rejections metric, scraped while they run: a SIGKILLed process takes its
 * counters along, so each process's last scrape is kept and the sum over processes reported.
 */
class RejectionsWatch {
  private readonly last = new Map<ServeProcess, Map<string, number>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly processes: () => (ServeProcess | undefined)[]) {}

  start(intervalMs: number): void {
    this.timer = setInterval(() => void this.scrape(), intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.scrape();
  }

  totals(): Map<string, number> {
    const totals = new Map<string, number>();
    for (const counts of this.last.values()) for (const [reason, n] of counts) totals.set(reason, (totals.get(reason) ?? 0) + n);
    return totals;
  }

  private async scrape(): Promise<void> {
    const alive = this.processes().filter((p): p is ServeProcess => p !== undefined && p.child.exitCode === null && p.child.signalCode === null);
    await Promise.all(
      alive.map(async (p) => {
        const text = await fetch(`${p.url}/metrics`, { signal: AbortSignal.timeout(1_000) })
          .then((r) => r.text())
          .catch(() => undefined);
        if (text === undefined) return;
        const counts = new Map<string, number>();
        for (const m of text.matchAll(/^convoke_result_rejections_total\{reason="([^"]+)"\} (\d+)/gm)) counts.set(m[1]!, Number(m[2]));
        this.last.set(p, counts);
      }),
    );
  }
}

/**
 * Every counted vote is a real peer's current-fence result: each result the log accepted was, at
 * the transition that accepted it, its branch's current attempt and fence, from the branch's
 * assigned peer, on the operation's own subject; on mallory's branch it is also a result mallory
 * really published on its own subject for that assignment. Answers how many of mallory's counted.
 */
function checkVotes(where: string, log: readonly StoredTransition[], hostile: HostilePeer): number {
  let malloryVotes = 0;
  for (let k = 0; k < log.length; k++) {
    for (const event of log[k]!.transition.events) {
      if (event.type !== 'result-accepted') continue;
      const before = fold(log.slice(0, k))!;
      const branch = before.branches[event.branchId]!;
      const at = `${where}/${event.branchId}: the result accepted at revision ${k}`;
      assert.equal(event.peerId, branch.peerId, `${at} is from the branch's assigned peer`);
      assert.deepEqual([event.attempt, event.fence], [branch.attempt, branch.fence], `${at} is the current assignment's`);
      assert.equal(
        event.subject,
        subjectFor(before.subjectNamespace, before.interaction, before.operationId, 'result', branch.peerId),
        `${at} arrived on the operation's own subject`,
      );
      if (branch.peerId !== mallory) continue;
      assert.ok(
        hostile.legitimate(before.operationId, event.attempt, event.fence, event.result),
        `${at} is one mallory really sent for that assignment: ${JSON.stringify(event)}`,
      );
      malloryVotes++;
    }
  }
  return malloryVotes;
}

/** The rejections a log recorded for messages on a peer's subjects, by reason. */
function recordedRejections(log: readonly StoredTransition[], peer: string, into: Map<string, number>): void {
  for (const t of log) {
    for (const e of t.transition.events) if (e.type === 'result-rejected' && e.subject.endsWith(`.${peer}`)) into.set(e.reason, (into.get(e.reason) ?? 0) + 1);
  }
}

const show = (m: Map<string, number>) =>
  [...m]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');

/** Invokes until admitted: across a fault the command or its reply can be lost, and the key makes a retry safe. */
async function admit(client: CommandClient, interaction: Interaction, key: string): Promise<string> {
  const deadlineMs = Date.now() + retryForMs;
  let last = '';
  while (Date.now() < deadlineMs) {
    try {
      const reply = await client.invoke(interaction, { document: key }, { key, waitMs: 0 });
      if (reply.status === 200 || reply.status === 202) return resultOf(reply).operationId;
      last = `status ${reply.status} ${JSON.stringify('error' in reply ? reply.error : undefined)}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await sleep(250);
  }
  throw new Error(`${key} was never admitted: ${last}`);
}

const settleReadsMax = 32;

/** Runs `work` over `items`, at most `limit` at a time. */
async function eachBounded<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Reads the operation until it is settled (bounded), retrying lost commands. */
async function settled(client: CommandClient, operationId: string): Promise<InvocationResult | undefined> {
  const deadlineMs = Date.now() + retryForMs;
  let last: InvocationResult | undefined;
  while (Date.now() < deadlineMs) {
    try {
      const reply = await client.get(operationId, { waitFor: 'settled', waitMs: 2_000 });
      last = resultOf(reply);
      if (reply.status === 200) return last;
    } catch {
      await sleep(200);
    }
  }
  return last;
}

/** Waits until the operation is decided, while `going()`, asking again across faults (the caller's bound on open operations). */
async function decided(client: CommandClient, operationId: string, going: () => boolean): Promise<void> {
  const deadlineMs = Date.now() + retryForMs;
  while (going() && Date.now() < deadlineMs) {
    try {
      if ((await client.get(operationId, { waitFor: 'decision', waitMs: 2_000 })).status === 200) return;
    } catch {
      await sleep(200);
    }
  }
}

/** Set when the run's assertions all passed. */
let passed = false;

// A failed run must not hold the suite: whatever still keeps this file's process alive a minute
// after the test ended (a child or a socket a failure left open) is abandoned, and the file exits
// with the run's verdict. The timer is unref'd, so a clean run exits at once as before.
after(() => {
  setTimeout(() => {
    // Its children go with it: a peer orphaned here would reconnect to a dead server for good.
    fixture?.killAll();
    process.exit(passed ? 0 : 1);
  }, 60_000).unref();
});

/** The run's deployment, for the exit above. */
let fixture: NatsDeploymentFixture | undefined;

test(
  `NATS chaos: peers, coordinators and nats-server killed and restarted under load decide every operation, with no duplicate effect (seed ${seed})`,
  { timeout: runTimeoutMs },
  async (t) => {
    t.diagnostic(`seed ${seed} (CONVOKE_CHAOS_SEED=${seed} replays the fault schedule), ${faultCount} faults`);
    const random = seededRandom(seed);
    const f = await NatsDeploymentFixture.start({
      mode: 'durable',
      store: 'jetstream',
      bundle: chaosBundle(),
      extraBundles: [otherBundle()],
      groups: { reviewers },
      peers: chaosPeers(),
      commandClients: ['billing'],
      durable: { ackWaitMs: 2_500, maxDeliver: 100 },
      durabilityCheckIntervalMs: 500,
    });
    fixture = f;
    const coordinators = new Coordinators(f);
    const watch = new RejectionsWatch(() => [f.serve, coordinators.second]);
    let hostile: HostilePeer | undefined;
    try {
      await Promise.all([coordinators.start(0), coordinators.start(1), f.startPeers()]);
      const client = await f.client('billing');
      watch.start(500);

      // The caller: a new invocation every 30–90 ms while fewer than openMax are open, alternating
      // the two interactions, each retried until admitted.
      const admitted: Promise<{ key: string; interaction: Interaction; operationId: string }>[] = [];
      let calling = true;
      let open = 0;
      // Mallory draws from its own stream of the seed, so the fault schedule stays what the seed made it.
      hostile = await HostilePeer.start({
        peerId: mallory,
        transport: await f.peerTransport(mallory),
        otherTransport: await f.peerTransport(mallory, otherNamespace),
        namespace: f.namespace,
        interactions: interactionsUsed,
        memberOf: { interaction: 'first', attemptsMax: firstAttemptsMax },
        otherNamespace,
        otherInteraction,
        honestPeers: reviewers,
        principalId: client.principal,
        contractDigest: f.contract.digest,
        invocation,
        progress: () => admitted.length,
        random: seededRandom(seed ^ 0x6d616c6c),
      });
      const caller = (async () => {
        for (let i = 0; calling; i++) {
          while (open >= openMax && calling) await sleep(50);
          if (!calling) break;
          const { key, interaction } = invocation(i);
          const admission = admit(client, interaction, key).then(
            (operationId) => (interactionOf.set(operationId, interaction), { key, interaction, operationId }),
          );
          // Awaited together after the faults: a failure then fails the run's assertions, not the process as an unhandled rejection.
          admission.catch(() => undefined);
          admitted.push(admission);
          open++;
          void admission
            .then((o) => decided(client, o.operationId, () => calling))
            .catch(() => undefined)
            .finally(() => open--);
          await sleep(30 + random.int(60));
        }
      })();
      for (const kind of schedule(random)) {
        await sleep(800 + random.int(1_500));
        const startedAtMs = Date.now();
        t.diagnostic(`${new Date(startedAtMs).toISOString()} ${await inject(f, coordinators, kind, random)} (${Date.now() - startedAtMs} ms)`);
      }
      calling = false;
      await caller;
      await hostile.stop();
      const operations = await Promise.all(admitted);
      t.diagnostic(`${operations.length} operations admitted`);

      const results = new Map<string, InvocationResult | undefined>();
      // A few dozen reads at a time: thousands of concurrent commands to coordinators still recovering
      // from the last fault made whole reads time out on a loaded machine (the log had decided).
      await eachBounded(operations, settleReadsMax, async (o) => void results.set(o.operationId, await settled(client, o.operationId)));
      // Mallory answered its cancels while operations settled; now it is silenced, and the metric read a last time.
      await hostile.close();
      await watch.stop();
      const sink = new SqliteEffectSink({ path: f.effectsPath });
      const effects = new Map<string, number>();
      try {
        for (const e of sink.applied()) effects.set(`${e.operationId}/${e.branchId}`, (effects.get(`${e.operationId}/${e.branchId}`) ?? 0) + 1);
      } finally {
        sink.close();
      }

      const metric = watch.totals();
      t.diagnostic(`mallory stored/published: ${hostile.summary()}; msg-ids squatted: ${hostile.squatted.length}`);
      t.diagnostic(`rejections metric (both coordinators, every process): ${show(metric)}`);
      const recorded = new Map<string, number>();
      const accepted = new Map<string, boolean>();
      let malloryVotes = 0;
      const printed = coordinators.output();
      const lossesLogged = [...printed.matchAll(/durability lost in [^\n]*the server lost acknowledged writes[^\n]*/g)].map((m) => m[0]);
      const repairs = [...printed.matchAll(/durable consumer repaired: [^\n]*/g)].map((m) => m[0]);
      t.diagnostic(`lost acknowledged writes logged by the coordinators: ${lossesLogged.length}; consumers repaired: ${repairs.length}`);
      for (const line of [...lossesLogged, ...repairs]) t.diagnostic(line.slice(0, 400));
      let closedByLoss = 0;
      for (const { key, interaction, operationId } of operations) {
        const result = results.get(operationId);
        const where = `${key} (${interaction}, ${operationId})`;
        if (result?.decision?.outcome === 'indeterminate' && result.decision.reason === 'durability-lost' && lossesLogged.length > 0) {
          // The broker lost what it had acknowledged while this operation was open: it closed as indeterminate, never failed.
          closedByLoss++;
          assert.equal(result.settlement?.status, 'indeterminate', `${where}: settles indeterminate`);
          const log = await f.log(operationId);
          assert.deepEqual(fold(log, machineSteps), fold(log), `${where}: machine fold equals table fold`);
          assert.equal(fold(log)?.decision?.reason, 'durability-lost', `${where}: the caller's decision is the log's`);
          for (const branch of reviewers) assert.ok((effects.get(`${operationId}/${branch}`) ?? 0) <= 1, `${where}/${branch}: at most one effect`);
          malloryVotes += checkVotes(where, log, hostile);
          recordedRejections(log, mallory, recorded);
          continue;
        }
        if (result?.decision?.outcome !== 'success') {
          const stored = await storedMessages(f, operationId);
          assert.fail(
            `${where} decides success: ${JSON.stringify(result?.decision)}; its log: ${summary(await f.log(operationId))}; stored messages: ${stored}; effects: ${JSON.stringify(reviewers.map((p) => [p, effects.get(`${operationId}/${p}`) ?? 0]))}`,
          );
        }
        if (interaction === 'allok') assert.equal(result.decision.successVotes, reviewers.length, `${where}: every vote`);
        else assert.ok(result.decision.successVotes >= 1, `${where}: a vote`);
        assert.notEqual(result.settlement?.status, 'pending', `${where} reached the settled boundary`);

        const log = await f.log(operationId);
        const record = fold(log);
        assert.deepEqual(fold(log, machineSteps), record, `${where}: machine fold equals table fold`);
        assert.equal(record?.decision?.outcome, result.decision.outcome, `${where}: the caller's decision is the log's`);
        assert.equal(record?.decision?.closedAtMs, result.decision.closedAtMs, `${where}: closed at the logged instant`);

        for (const branch of Object.values(record!.branches)) {
          const applied = effects.get(`${operationId}/${branch.branchId}`) ?? 0;
          assert.ok(applied <= 1, `${where}/${branch.branchId}: ${applied} effects`);
          if (interaction === 'allok') assert.equal(applied, 1, `${where}/${branch.branchId}: its one effect`);
          if (branch.accepted !== null) {
            assert.deepEqual(
              [branch.accepted.attempt, branch.accepted.fence],
              [branch.attempt, branch.fence],
              `${where}/${branch.branchId}: the accepted result is the current assignment's`,
            );
            accepted.set(`${operationId}/${branch.branchId}`, true);
          }
          if (branch.accepted?.status === 'success' && branch.peerId !== mallory)
            assert.equal(applied, 1, `${where}/${branch.branchId}: an accepted success is backed by its effect`);
        }
        malloryVotes += checkVotes(where, log, hostile);
        recordedRejections(log, mallory, recorded);
      }

      t.diagnostic(`operations closed indeterminate (durability-lost) after a logged loss of acknowledged writes: ${closedByLoss}`);
      // Mallory ran, and everything it did was seen and refused.
      t.diagnostic(`mallory's votes counted: ${malloryVotes}; rejections recorded for mallory's subjects: ${show(recorded)}`);
      for (const kind of hostileKinds) {
        if (kind === 'denied') continue;
        assert.ok(
          hostile.tallies[kind].stored >= hostileStoredMin[kind],
          `mallory got at least ${hostileStoredMin[kind]} ${kind} messages stored: ${hostile.summary()}`,
        );
      }
      assert.ok(hostile.tallies.denied.published >= 1, "mallory tried an honest peer's subject");
      assert.equal(hostile.tallies.denied.stored, 0, "the broker stored nothing mallory sent on an honest peer's subject");
      const squatsProven = hostile.squatted.filter((s) => accepted.has(`${s.operationId}/${s.branchId}`)).length;
      t.diagnostic(`honest results accepted although mallory had stored their Msg-Ids first: ${squatsProven} of ${hostile.squatted.length}`);
      assert.ok(squatsProven >= 5, `honest results whose Msg-Id mallory had taken first were still accepted (${squatsProven} of ${hostile.squatted.length})`);
      for (const reason of ['wrong-peer', 'stale-fence'])
        assert.ok((recorded.get(reason) ?? 0) >= 1, `a ${reason} rejection of mallory's traffic is recorded: ${show(recorded)}`);
      for (const reason of ['malformed', 'wrong-subject'])
        assert.ok((metric.get(reason) ?? 0) >= 1, `the rejections metric counts mallory's ${reason} traffic: ${show(metric)}`);
      passed = true;
    } finally {
      await hostile?.close();
      await watch.stop();
      if (logsDir !== undefined)
        await keepEvidence(logsDir, f, coordinators).catch((error: unknown) => t.diagnostic(`keeping the evidence in ${logsDir} failed: ${String(error)}`));
      await f.dispose();
    }
  },
);
