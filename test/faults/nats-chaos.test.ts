/**
 * Seeded chaos on a real NATS deployment in durable mode: `convoke serve` (jetstream store) and
 * five `convoke peer` processes with one shared SQLite effect sink, while a caller keeps invoking.
 * During the run, at seeded instants, one fault at a time:
 *
 *   - a peer is SIGKILLed and restarted (its unacknowledged requests are redelivered);
 *   - the coordinator is SIGKILLed and restarted (recovery from the log: outbox, held results,
 *     timers);
 *   - nats-server is stopped and restarted on the same port and store dir (SIGTERM), or SIGKILLed;
 *   - all at once: coordinator and a peer SIGKILLed while nats-server restarts.
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
import { test } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import { fold, machineSteps } from '../../src/projections/record.js';
import { SqliteEffectSink } from '../../src/peer/sqlite-effect-sink.js';
import { seededRandom, type Random } from '../../src/runtime/random.js';
import type { InvocationResult } from '../../src/projections/views.js';
import { NatsDeploymentFixture, approve, e2eBundle, resultOf, type CommandClient, type PeerSpec } from '../support/nats-deployment-fixture.js';

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function inject(f: NatsDeploymentFixture, kind: FaultKind, random: Random): Promise<string> {
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
      f.serve!.child.kill('SIGKILL');
      await f.serve!.exited;
      await pause();
      await f.startServe();
      return 'coordinator SIGKILLed and restarted';
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
      f.serve!.child.kill('SIGKILL');
      peer.child.kill('SIGKILL');
      await f.restartServer(async () => {
        await Promise.all([f.serve!.exited, peer.exited]);
        await pause();
      });
      await Promise.all([f.startServe(), f.startPeer(p)]);
      return `coordinator and peer ${p} SIGKILLed while nats-server restarted`;
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

test(`NATS chaos: peers, coordinator and nats-server killed and restarted under load decide every operation, with no duplicate effect (seed ${seed})`, { timeout: 300_000 }, async (t) => {
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
  try {
    await Promise.all([f.startServe(), f.startPeers()]);
    const client = await f.client('billing');

    // The caller: a new invocation every 30–90 ms, alternating the two interactions, each retried until admitted.
    const admitted: Promise<{ key: string; interaction: Interaction; operationId: string }>[] = [];
    let calling = true;
    const caller = (async () => {
      for (let i = 0; calling; i++) {
        const interaction = interactionsUsed[i % interactionsUsed.length]!;
        const key = `chaos-${seed}-${i}`;
        admitted.push(admit(client, interaction, key).then((operationId) => ({ key, interaction, operationId })));
        await sleep(30 + random.int(60));
      }
    })();
    for (const kind of schedule(random)) {
      await sleep(800 + random.int(1_500));
      t.diagnostic(await inject(f, kind, random));
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
      assert.equal(result?.decision?.outcome, 'success', `${where} decides success: ${JSON.stringify(result?.decision)}`);
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
