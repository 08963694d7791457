/**
 * `convoke demo`: the embedded default, end to end in one process — a review interaction fanned
 * out to N in-process peers over the in-process bus, decided by the declared rule, settled, and
 * its event stream printed. No server needed.
 */
import { completionTitle } from '../../contract/completion.js';
import type { JsonObject, JsonValue } from '../../contract/json.js';
import { AdapterError } from '../../contract/errors.js';
import { SystemClock } from '../../contract/clock.js';
import { createEmbedded } from '../../deployment/embedded.js';
import { peerIds, reviewBundle } from '../../deployment/examples.js';
import { seededRandom } from '../../runtime/random.js';
import type { StoredTransition } from '../../events/types.js';
import type { InvocationResult } from '../../projections/views.js';
import type { CliIo } from '../io.js';
import { fitText, heading, idLine, renderTable, widthOf } from '../table.js';
import { exitCodes } from '../exit-codes.js';
import { describeEvent } from '../describe.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scenarios, type DemoScenario } from './scenarios.js';
import { openStore } from '../../adapters/store/open.js';
import { SqliteEventStore } from '../../adapters/store/sqlite.js';
import type { EventStore } from '../../adapters/store/types.js';
import type { Clock } from '../../contract/clock.js';
import { storeLogin, type StoreAuth } from '../connection.js';

export interface DemoOptions {
  scenario: string;
  /** A store URL (default memory:); with sqlite:PATH the log outlives the demo for `inspect`/`replay`. */
  store?: string;
  /** How a jetstream: or esdb: store logs in (a context's, when its URL names no user). */
  storeAuth?: StoreAuth;
  peers: number;
  quorum: number;
  json: boolean;
  seed: number;
  approveRate: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function demoCommand(options: DemoOptions, io: CliIo): Promise<number> {
  if (!Number.isInteger(options.peers) || options.peers < 1 || options.peers > 16) throw new AdapterError('invalid-input', '--peers must be 1..16');
  if (!Number.isInteger(options.quorum) || options.quorum < 1 || options.quorum > options.peers)
    throw new AdapterError('invalid-input', `--quorum must be 1..${options.peers}`);
  if (options.scenario === 'pipeline') {
    const store = options.store === undefined ? undefined : await openGivenStore(options.store, options, new SystemClock());
    return (await import('./demo-pipeline.js')).pipelineDemo(options, io, store);
  }
  const scenario = scenarios[options.scenario];
  if (!scenario)
    throw new AdapterError('invalid-input', `unknown scenario "${options.scenario}"; choose one of: ${[...Object.keys(scenarios), 'pipeline'].join(', ')}`);
  const clock = new SystemClock();
  const random = seededRandom(options.seed);
  const peers = peerIds(options.peers);
  const { store, remove } = await demoStore(scenario, options, clock);
  let embedded;
  try {
    embedded = await createEmbedded({ clock, store, bundle: reviewBundle(scenario.review(options)), groups: { reviewers: peers } });
  } catch (error) {
    await store.close();
    await remove();
    throw error;
  }
  try {
    await scenario.peers(embedded, peers, random, options.approveRate);
    const input: JsonValue = { document: 'RFC: adopt convoke for N-of-M reviews' };
    const { result } = await embedded.coordinator.invoke(
      { principalId: 'demo-user', senderPeerId: null },
      { contract: embedded.bundle.ref, interaction: 'review', invocationKey: `demo-${options.scenario}-${options.seed}-${clock.nowMs()}`, input },
    );
    await scenario.during?.(embedded, peers);
    const waited = await embedded.coordinator.wait('demo-user', result.operationId, 'settled', 10_000);
    // Let the detached siblings' late answers arrive, so the stream shows how they are recorded.
    await sleep(80);
    const final = await embedded.coordinator.get('demo-user', result.operationId);
    const read = await embedded.store.read(result.operationId);
    const transitions = read.kind === 'ok' ? read.transitions : [];
    if (options.json) io.stdout.write(JSON.stringify({ result: final, transitions }, null, 2) + '\n');
    else io.stdout.write(renderDemo(final, transitions, options, describeStore(store, options), widthOf(io)));
    return waited.reached ? exitCodes.ok : exitCodes.pending;
  } finally {
    await embedded.close();
    await remove();
  }
}

/**
 * The demo's store: --store if given, else memory: — except for a scenario that shows a retry,
 * which memory mode (one attempt) cannot show: it gets a temporary SQLite file, removed after.
 */
async function demoStore(scenario: DemoScenario, options: DemoOptions, clock: Clock): Promise<{ store: EventStore; remove(): Promise<void> }> {
  if (options.store !== undefined) {
    const store = await openGivenStore(options.store, options, clock);
    // The demo's bus is in-process, so memory mode is the store's (src/runtime/mode.ts).
    if (scenario.retries && !store.capabilities.durable) {
      await store.close();
      throw new AdapterError(
        'invalid-input',
        `scenario "${options.scenario}" shows a retry, and memory mode has one attempt: use a durable store (e.g. --store sqlite:PATH) or none (a temporary SQLite file)`,
      );
    }
    return { store, remove: async () => {} };
  }
  if (!scenario.retries) return { store: await openStore('memory:', { clock }), remove: async () => {} };
  const dir = await mkdtemp(join(tmpdir(), 'convoke-demo-'));
  try {
    // The file goes with the demo: it needs to outlive a crash of the process (durable, so not
    // memory mode), not a power loss, so commits are not fsynced.
    const store = new SqliteEventStore({ path: join(dir, 'ops.db'), clock, synchronous: 'normal' });
    return { store, remove: () => rm(dir, { recursive: true, force: true }) };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/** The store --store (or the context) names, logged in with the context's login when it is a jetstream: or esdb: store. */
async function openGivenStore(url: string, options: DemoOptions, clock: Clock): Promise<EventStore> {
  const credentials = await storeLogin(url, options.storeAuth);
  return openStore(url, { clock, ...(credentials ? { credentials } : {}) });
}

function describeStore(store: EventStore, options: DemoOptions): string {
  if (store.name === 'memory') return 'memory store (memory mode: one attempt)';
  return options.store === undefined ? `temporary ${store.name} store` : `${store.name} store`;
}

/**
 * The rule the scenario's contract really declares, with the threshold the admission recorded:
 * a scenario may ignore --quorum (first success, all successful, a capped quorum).
 */
export function describeRule(review: JsonObject, transitions: readonly StoredTransition[]): string {
  const completion = review.completion as { mode?: string } | undefined;
  const admitted = transitions.flatMap((t) => t.transition.events).find((e) => e.type === 'operation-admitted');
  const of = admitted?.type === 'operation-admitted' ? ` (${admitted.manifest.threshold} of ${admitted.manifest.units})` : '';
  const delivery = review.delivery === 'one-eligible' ? ', one eligible peer at a time' : '';
  return `${completionTitle(completion?.mode ?? 'unknown')}${of}${delivery}`;
}

function renderDemo(result: InvocationResult, transitions: StoredTransition[], options: DemoOptions, storeDescription: string, widthMax: number): string {
  const d = result.decision;
  const t0 = result.admittedAtMs;
  const scenario = scenarios[options.scenario];
  if (scenario === undefined) throw new AdapterError('invalid-input', `unknown scenario "${options.scenario}"`);
  const rule = describeRule(scenario.review(options), transitions);
  let out = fitText(
    `convoke demo ${options.scenario} — ${options.peers} peers, rule: ${rule}, seed ${options.seed} (embedded: ${storeDescription}, in-process bus)`,
    widthMax,
  );
  out += fitText(scenario.description, widthMax);
  // Whole where the line holds it, else a prefix inspect resolves: never cut across two lines.
  out += `${idLine('operation ', result.operationId, widthMax)}\n`;
  out += heading('Decision');
  out += renderTable(
    ['outcome', 'reason', 'success votes', 'failed units', 'threshold', 'units', 'closed at'],
    [[d?.outcome, d?.reason, d?.successVotes, d?.failedUnits, d?.threshold, d?.units, d ? `+${d.closedAtMs - t0} ms` : null]],
    widthMax,
  );
  out += heading(`Settlement: ${result.settlement.status}`, widthMax);
  out += renderTable(
    ['branch', 'disposition', 'outcome'],
    result.settlement.siblings.map((s) => [s.branchId, s.disposition, s.outcome]),
    widthMax,
  );
  out += heading('Branches');
  out += renderTable(
    ['branch', 'peer', 'status', 'attempt', 'fence', 'result'],
    result.branches.map((b) => [b.branchId, b.peerId, b.status, b.attempt, b.fence, b.result === undefined ? null : JSON.stringify(b.result)]),
    widthMax,
  );
  out += heading(`Output: ${JSON.stringify(result.output)}`, widthMax);
  out += heading(`Event stream convoke-op-${result.operationId.slice(0, 14)}…`, widthMax);
  const rows = transitions.flatMap((t) =>
    t.transition.events.map((e, i) => [i === 0 ? t.revision : '', i === 0 ? `+${t.committedAtMs - t0} ms` : '', e.type, describeEvent(e, t0)]),
  );
  out += renderTable(['rev', 'committed', 'event', 'detail'], rows, widthMax, { proseLast: true });
  return out;
}
