/**
 * Two `convoke serve` processes on one NATS deployment (durable mode, one jetstream store): the
 * command API's queue group spreads commands over both, and the shared result consumer spreads
 * results, so one operation is usually admitted by one coordinator and decided by the other.
 *
 *   - Every invoke that waits for the decision gets it (200) from whichever coordinator took the
 *     command, well inside its wait: a coordinator follows the other's appends to the operations
 *     it holds (EventStore.watch) instead of waiting for its own.
 *   - One coordinator SIGKILLed under load: the other carries on; commands lost with it are
 *     retried under their keys, and every operation decides, as its log says.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import { fold } from '../../src/projections/record.js';
import type { ServeProcess } from '../support/http-server.js';
import { approve, deploymentForSuite, e2eBundle, resultOf, type CommandClient, type PeerSpec } from '../support/nats-deployment-fixture.js';

const reviewers = ['alfa', 'bravo', 'charlie', 'delta', 'echo'];
const interactions = ['allok', 'first', 'quorum'] as const;
type Interaction = (typeof interactions)[number];

function bundle(): JsonObject {
  const base = e2eBundle();
  const all = base.interactions as Record<string, JsonObject>;
  const lasting = { timeoutMs: 60_000, leaseMs: 30_000, renewIntervalMs: 5_000, settlementGraceMs: 10_000 };
  return { ...base, interactions: Object.fromEntries(interactions.map((i) => [i, { ...all[i]!, ...lasting }])) };
}

function peers(): Record<string, PeerSpec> {
  return Object.fromEntries(reviewers.map((p) => [p, { interactions: Object.fromEntries(interactions.map((i) => [i, { result: approve, delayMs: 50 }])) }]));
}

/** Commands each serve process answered (its convoke_nats_command_replies_total). */
async function commandsAnswered(serve: ServeProcess): Promise<number> {
  const text = await (await fetch(`${serve.url}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('convoke_nats_command_replies_total'))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

/** How many callers invoke at once, and how many invocations each phase makes in all. */
const callers = 12;
const invocations = 48;
/**
 * How long an invoke waits for its decision: far beyond what deciding takes even on a loaded
 * machine (peers answer in 50 ms), so only a coordinator that misses the other's commit waits it out.
 */
const decisionWaitMs = 15_000;

/**
 * Closed-loop callers making `count` invocations in all: each invoke waits for the decision;
 * `onReply` sees each reply or failure. A fixed count, not a time: how fast a loaded machine gets
 * through them is no part of the rule (throughput is `npm run bench -- nats`).
 */
async function load(
  client: CommandClient,
  prefix: string,
  count: number,
  onReply: (key: string, outcome: { status: number; decided: boolean; elapsedMs: number } | Error) => void,
): Promise<Map<string, Interaction>> {
  const keys = new Map<string, Interaction>();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (keys.size < count) {
        const key = `${prefix}-${keys.size}`;
        const interaction = interactions[keys.size % interactions.length]!;
        keys.set(key, interaction);
        const startMs = Date.now();
        try {
          const reply = await client.invoke(interaction, { document: key }, { key, waitMs: decisionWaitMs });
          onReply(key, { status: reply.status, decided: 'result' in reply && reply.result.decision !== null, elapsedMs: Date.now() - startMs });
        } catch (error) {
          onReply(key, error as Error);
        }
      }
    }),
  );
  return keys;
}

describe('two coordinators on one deployment', { timeout: 120_000 }, () => {
  let second: ServeProcess;
  // Default durable settings: results a killed coordinator had taken but not acknowledged come
  // back after the default ack_wait, well inside the leases.
  const deployment = deploymentForSuite(
    { mode: 'durable', store: 'jetstream', bundle: bundle(), groups: { reviewers }, peers: peers(), commandClients: ['billing'] },
    {
      client: 'billing',
      startUp: async (f) => {
        await f.startServe();
        second = await f.startAnotherServe();
        await f.startPeers();
      },
    },
  );

  it('every invoke that waits for the decision gets it, whichever coordinator took the command and whichever decided', async () => {
    const before = [await commandsAnswered(deployment.fixture.serve!), await commandsAnswered(second)];
    const pending: string[] = [];
    let replies = 0;
    await load(deployment.client, 'both', invocations, (key, outcome) => {
      replies++;
      if (outcome instanceof Error) pending.push(`${key}: ${outcome.message}`);
      else if (outcome.status !== 200 || !outcome.decided) pending.push(`${key}: ${outcome.status} after ${outcome.elapsedMs} ms`);
    });
    assert.equal(replies, invocations, 'every invocation answered');
    assert.deepEqual(pending, [], 'no invoke left waiting out its waitMs');
    const answered = [(await commandsAnswered(deployment.fixture.serve!)) - before[0]!, (await commandsAnswered(second)) - before[1]!];
    assert.ok(
      answered.every((n) => n > 0),
      `both coordinators served commands: ${answered.join(' / ')}`,
    );
  });

  it('one coordinator SIGKILLed under load: the other carries on and every operation decides', async () => {
    const failed = new Set<string>();
    // Killed once a quarter of the invocations were answered: under load whatever the machine's speed.
    let answered = 0;
    let killed = false;
    const keys = await load(deployment.client, 'kill', invocations, (key, outcome) => {
      if (outcome instanceof Error || outcome.status !== 200) failed.add(key);
      if (++answered === invocations / 4) {
        second.child.kill('SIGKILL');
        killed = true;
      }
    });
    assert.ok(killed, 'the second coordinator was killed under load');
    // Commands the killed process had taken are lost with it: retried under their keys, they find their operations.
    for (const [key, interaction] of keys) {
      let reply;
      for (let tries = 0; tries < 20; tries++) {
        reply = await deployment.client.invoke(interaction, { document: key }, { key, waitMs: 10_000 }).catch(() => undefined);
        if (reply?.status === 200) break;
      }
      assert.equal(reply?.status, 200, `${key} (${failed.has(key) ? 'lost with the killed coordinator' : 'answered'}) decides: ${JSON.stringify(reply)}`);
      const result = resultOf(reply!);
      assert.equal(
        result.decision?.outcome,
        'success',
        `${key}: ${JSON.stringify(result.decision)} ${JSON.stringify(result.branches.map((b) => [b.branchId, b.status, b.attempt, b.result]))} ${JSON.stringify((await deployment.fixture.log(result.operationId)).flatMap((t) => t.transition.events.map((e) => e.type + ':' + JSON.stringify(e).slice(0, 300))))}`,
      );
      const record = fold(await deployment.fixture.log(result.operationId));
      assert.deepEqual(record?.decision?.closedAtMs, result.decision?.closedAtMs, `${key}: the reply is the log's decision`);
    }
  });
});
