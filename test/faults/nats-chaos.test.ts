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
 * invocation under its key until it is admitted (idempotent by key). Then, for every operation:
 *
 *   - it decides success: `allok` (all-successful) with all five votes, `first` (first-success,
 *     siblings cancelled) with at least one, and reaches the settled boundary;
 *   - the decision a caller reads equals the one folded from the stored log, and folding with
 *     xstate's own transition() equals the table fold;
 *   - the fenced effect sink holds at most one effect per operation/branch (exactly one for each
 *     `allok` branch), and every accepted success is backed by its effect.
 *
 * The seed is printed; CONVOKE_CHAOS_SEED=N replays the fault schedule (where in the runtime a
 * kill lands still depends on the OS). CONVOKE_CHAOS_FAULTS=N sets how many faults (default 8).
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { test } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import type { StoredTransition } from '../../src/events/types.js';
import { fold, machineSteps } from '../../src/projections/record.js';
import { SqliteEffectSink } from '../../src/peer/sqlite-effect-sink.js';
import { seededRandom, type Random } from '../../src/runtime/random.js';
import type { InvocationResult } from '../../src/projections/views.js';
import type { ServeProcess } from '../support/http-server.js';
import { NatsDeploymentFixture, approve, e2eBundle, e2eNamespace, resultOf, type CommandClient, type PeerSpec } from '../support/nats-deployment-fixture.js';

const seed = Number(process.env.CONVOKE_CHAOS_SEED ?? randomInt(1, 1_000_000));
const faultCount = Number(process.env.CONVOKE_CHAOS_FAULTS ?? 8);
const reviewers = ['alfa', 'bravo', 'charlie', 'delta', 'echo'];
const interactionsUsed = ['allok', 'first'] as const;
type Interaction = (typeof interactionsUsed)[number];
type FaultKind = 'peer' | 'coordinator' | 'server-restart' | 'server-kill' | 'all-at-once';
const faultKinds: readonly FaultKind[] = ['peer', 'coordinator', 'server-restart', 'server-kill', 'all-at-once'];

/** Deadlines far beyond the run, so every operation must close by its rule, never by time. */
function chaosBundle(): JsonObject {
  const bundle = e2eBundle();
  const interactions = bundle.interactions as Record<string, JsonObject>;
  const lasting = { timeoutMs: 120_000, leaseMs: 30_000, renewIntervalMs: 5_000, settlementGraceMs: 10_000, cancelTimeoutMs: 5_000 };
  return { ...bundle, interactions: Object.fromEntries(interactionsUsed.map((i) => [i, { ...interactions[i]!, ...lasting }])) };
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
        return [type, branchId, cause, reason, status, outcome, attempt === undefined ? undefined : `a${String(attempt)}f${String(fence)}`].filter((x) => x !== undefined && x !== null).join(' ');
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

/** The two coordinators: the fixture's own serve process and a second one on the same config. */
class Coordinators {
  second: ServeProcess | undefined;

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
        await pause();
      });
      await Promise.all([coordinators.start(0), coordinators.start(1), f.startPeer(p)]);
      return `both coordinators and peer ${p} SIGKILLed while nats-server restarted`;
    }
  }
}

/** Invokes until admitted: across a fault the command or its reply can be lost, and the key makes a retry safe. */
async function admit(client: CommandClient, interaction: Interaction, key: string): Promise<string> {
  const deadlineMs = Date.now() + 90_000;
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

/** Reads the operation until it is settled (bounded), retrying lost commands. */
async function settled(client: CommandClient, operationId: string): Promise<InvocationResult | undefined> {
  const deadlineMs = Date.now() + 90_000;
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

test(`NATS chaos: peers, coordinators and nats-server killed and restarted under load decide every operation, with no duplicate effect (seed ${seed})`, { timeout: 300_000 }, async (t) => {
  t.diagnostic(`seed ${seed} (CONVOKE_CHAOS_SEED=${seed} replays the fault schedule), ${faultCount} faults`);
  const random = seededRandom(seed);
  const f = await NatsDeploymentFixture.start({
    mode: 'durable',
    store: 'jetstream',
    bundle: chaosBundle(),
    groups: { reviewers },
    peers: chaosPeers(),
    commandClients: ['billing'],
    durable: { ackWaitMs: 2_500, maxDeliver: 100 },
    durabilityCheckIntervalMs: 500,
  });
  const coordinators = new Coordinators(f);
  try {
    await Promise.all([coordinators.start(0), coordinators.start(1), f.startPeers()]);
    const client = await f.client('billing');

    // The caller: a new invocation every 30–90 ms, alternating the two interactions, each retried until admitted.
    const admitted: Promise<{ key: string; interaction: Interaction; operationId: string }>[] = [];
    let calling = true;
    const caller = (async () => {
      for (let i = 0; calling; i++) {
        const interaction = interactionsUsed[i % interactionsUsed.length]!;
        const key = `chaos-${seed}-${i}`;
        admitted.push(admit(client, interaction, key).then((operationId) => (interactionOf.set(operationId, interaction), { key, interaction, operationId })));
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
    const operations = await Promise.all(admitted);
    t.diagnostic(`${operations.length} operations admitted`);

    const results = new Map<string, InvocationResult | undefined>();
    await Promise.all(operations.map(async (o) => results.set(o.operationId, await settled(client, o.operationId))));
    const sink = new SqliteEffectSink({ path: f.effectsPath });
    const effects = new Map<string, number>();
    try {
      for (const e of sink.applied()) effects.set(`${e.operationId}/${e.branchId}`, (effects.get(`${e.operationId}/${e.branchId}`) ?? 0) + 1);
    } finally {
      sink.close();
    }

    for (const { key, interaction, operationId } of operations) {
      const result = results.get(operationId);
      const where = `${key} (${interaction}, ${operationId})`;
      if (result?.decision?.outcome !== 'success') {
        const stored = await storedMessages(f, operationId);
        assert.fail(`${where} decides success: ${JSON.stringify(result?.decision)}; its log: ${summary(await f.log(operationId))}; stored messages: ${stored}; effects: ${JSON.stringify(reviewers.map((p) => [p, effects.get(`${operationId}/${p}`) ?? 0]))}`);
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
        if (branch.accepted?.status === 'success') assert.equal(applied, 1, `${where}/${branch.branchId}: an accepted success is backed by its effect`);
      }
    }
  } finally {
    await f.dispose();
  }
});
