/**
 * `convoke demo --scenario pipeline` (embedded, one process): the bundle's pipeline
 * review-then-publish runs as a workflow instance — a quorum of the in-process reviewers decides,
 * the approval count is handed to one publisher, the result is announced — and the demo prints each
 * stage's operation, decision and settlement, then the instance's own log (its stream of
 * transitions). Contract calls go in-process through the coordinator, as under `convoke serve`.
 */
import { BundleRegistry } from '../../contract/bundle.js';
import { SystemClock } from '../../contract/clock.js';
import type { JsonObject } from '../../contract/json.js';
import { createEmbedded } from '../../deployment/embedded.js';
import { peerIds, reviewBundle } from '../../deployment/examples.js';
import { seededRandom } from '../../runtime/random.js';
import type { WorkflowInstance } from '../../runtime/workflow-service.js';
import type { CliIo } from '../io.js';
import { fitText, labelled, widthOf } from '../table.js';
import type { EventStore } from '../../adapters/store/types.js';
import { exitCodes } from '../exit-codes.js';
import { createWorkflowHost } from '../workflow-host.js';
import { renderInstance } from './workflow-facade.js';

export interface PipelineDemoOptions {
  peers: number;
  quorum: number;
  seed: number;
  approveRate: number;
  json: boolean;
}

const pipelineName = 'review-then-publish';
const publisher = 'publisher';

/** The review contract with a publish interaction and the pipeline that chains them. */
export function pipelineBundle(quorum: number): JsonObject {
  const bundle = reviewBundle({ completion: { mode: 'quorum', count: quorum }, timeoutMs: 5000 });
  const interactions = bundle.interactions as JsonObject;
  const published = { type: 'object', required: ['status', 'url'], properties: { status: { enum: ['published', 'failed'] }, url: { type: 'string' } } };
  interactions.publish = {
    description: 'One publisher publishes the approved document.',
    input: { type: 'object', required: ['approvals'], properties: { approvals: { type: 'integer', minimum: 0 } } },
    result: published,
    output: {
      type: 'object',
      required: ['branchId', 'peerId', 'result'],
      properties: { branchId: { type: 'string' }, peerId: { type: 'string' }, result: published },
    },
    audience: { group: 'publishers' },
    delivery: 'one-eligible',
    completion: { mode: 'first-success' },
    success: { pointer: '/status', equals: 'published' },
    timeoutMs: 5000,
    waitFor: 'settled',
    aggregate: { kind: 'first-success' },
  };
  bundle.pipelines = {
    [pipelineName]: {
      description: 'A quorum reviews the document; the approval count is handed to a publisher; the result is announced.',
      input: { type: 'object', required: ['document'], properties: { document: { type: 'string', maxLength: 100000 } }, additionalProperties: false },
      transforms: {
        approvals: {
          input: {
            type: 'object',
            required: ['counts', 'total'],
            properties: { counts: { type: 'object', additionalProperties: { type: 'integer' } }, total: { type: 'integer' } },
          },
          output: { type: 'object', required: ['approvals'], properties: { approvals: { type: 'integer', minimum: 0 } }, additionalProperties: false },
          expression: '{approvals: (.counts.approve // 0)}',
        },
      },
      stages: [
        { name: 'review', interaction: 'review', waitFor: 'settled' },
        { name: 'publish', interaction: 'publish', transform: 'approvals' },
        { name: 'announce', operation: { action: 'send', subject: 'lab.announcements', type: 'dev.convoke.lab.published', payload: '/result' } },
      ],
    },
  };
  return bundle;
}

/** `store`: the one --store names (closed with the demo); a memory store without it. */
export async function pipelineDemo(options: PipelineDemoOptions, io: CliIo, store?: EventStore): Promise<number> {
  const clock = new SystemClock();
  const random = seededRandom(options.seed);
  const reviewers = peerIds(options.peers);
  let embedded;
  try {
    embedded = await createEmbedded({
      clock,
      bundle: pipelineBundle(options.quorum),
      groups: { reviewers, publishers: [publisher] },
      ...(store ? { store } : {}),
    });
  } catch (error) {
    await store?.close();
    throw error;
  }
  const bundles = new BundleRegistry();
  bundles.add(embedded.bundle);
  const host = await createWorkflowHost({ coordinator: embedded.coordinator, bundles, store: embedded.store, clock, seed: options.seed });
  try {
    for (const peerId of reviewers) {
      const verdict = random.next() < options.approveRate ? 'approve' : 'reject';
      const delayMs = 5 + random.int(60);
      await embedded.addPeer(peerId, { review: async () => (await sleep(delayMs), { verdict, note: `${peerId} read it in ${delayMs} ms` }) });
    }
    await embedded.addPeer(publisher, {
      publish: async (input) => ({ status: 'published', url: `https://lab.example/published/${(input as JsonObject).approvals}` }),
    });
    const { instance } = await host.service.start('demo-user', {
      bundle: embedded.bundle.ref,
      workflow: pipelineName,
      invocationKey: `demo-pipeline-${options.seed}-${clock.nowMs()}`,
      input: { document: 'RFC: adopt convoke for N-of-M reviews' },
    });
    const ended = (await host.service.wait('demo-user', instance.instanceId, 30_000)).instance;
    const read = await embedded.store.read(instance.instanceId);
    const log = read.kind === 'ok' ? read.transitions : [];
    if (options.json) io.stdout.write(JSON.stringify({ instance: ended, log }, null, 2) + '\n');
    else io.stdout.write(renderPipelineDemo(ended, log, options, embedded.store.name, widthOf(io)));
    if (ended.status === 'running') return exitCodes.pending;
    return ended.status === 'completed' ? exitCodes.ok : exitCodes.outcomeNotSuccess;
  } finally {
    await host.close();
    await embedded.close();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface LoggedTransition {
  revision: string;
  committedAtMs: number;
  transition: { events: readonly unknown[] };
}

/** The demo's report, every line within `widthMax` (the terminal's width; unbounded for a pipe without $COLUMNS). */
function renderPipelineDemo(
  instance: WorkflowInstance,
  log: readonly LoggedTransition[],
  options: PipelineDemoOptions,
  storeName: string,
  widthMax: number,
): string {
  let out = fitText(
    `convoke demo pipeline — ${options.peers} reviewers (quorum ${options.quorum}), then one publisher, seed ${options.seed} (embedded: ${storeName} store, in-process bus)`,
    widthMax,
  );
  out += '\n' + renderInstance(instance, widthMax);
  // The instance is named on its line above: repeated here, its id wrapped the heading mid-phrase at 80 columns.
  out += '\n' + fitText(`the instance's log: ${log.length} transitions`, widthMax);
  const startedAt = log[0]?.committedAtMs ?? 0;
  log.forEach((stored, index) => {
    const events = stored.transition.events.map((event) => describe(event as { type: string; at?: string })).join(', ');
    out += labelled(`  #${String(index + 1).padStart(2)} +${String(stored.committedAtMs - startedAt).padStart(4)} ms  `, events, widthMax) + '\n';
  });
  return out;
}

function describe(event: { type: string; at?: string }): string {
  return event.at === undefined ? event.type : `${event.type} ${event.at}`;
}
