/**
 * The workflow worker process the workflow crash test kills (test/faults/workflow-crash.test.ts):
 * an embedded runtime (three in-process peers that approve) and a workflow executor on one durable
 * store (a SQLite file or JetStream), a system clock. Each incarnation recovers the operations,
 * starts the fixed instances (an instance an earlier incarnation started is found under its key),
 * loads each — taking it over once its dead predecessor's lease has ended — and prints `done`
 * when every instance has finished.
 *
 * stdout is one JSON object per line: started, instance, progress (finished, waiting), done, error.
 *
 *   workflow-crash-child --store URL
 */
import { parseArgs } from 'node:util';
import { openStore } from '../../src/adapters/store/open.js';
import { SystemClock } from '../../src/contract/clock.js';
import { createEmbedded } from '../../src/deployment/embedded.js';
import { seededRandom } from '../../src/runtime/random.js';
import { WorkflowExecutor } from '../../src/workflow/exec/executor.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import { workflowStreams } from '../../src/workflow/exec/streams.js';
import { wfCrashBundle, wfCrashDocument, wfCrashKeys, wfCrashLeaseMs, wfCrashPeers, wfCrashPrincipal } from './workflow-crash-plan.js';

const startedAtMs = Date.now();

function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ...event, t: Date.now() - startedAtMs })}\n`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Progress every 100 ms (instances finished, instances in their wait) until every instance has finished. */
async function report(executor: WorkflowExecutor, ids: string[]): Promise<void> {
  for (;;) {
    const records = await Promise.all(ids.map((id) => executor.get(id)));
    const finished = records.filter((r) => r && r.status !== 'running').length;
    const waiting = records.filter((r) => r && Object.values(r.timers).some((t) => t.purpose === 'wait' && t.state === 'armed')).length;
    emit({ event: 'progress', finished, waiting, total: wfCrashKeys().length });
    if (finished === wfCrashKeys().length) return;
    await sleep(100);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { store: { type: 'string' } } });
  if (!values.store) throw new Error('usage: workflow-crash-child --store URL');
  emit({ event: 'started', pid: process.pid });
  const clock = new SystemClock();
  const store = await openStore(values.store, { clock });
  const embedded = await createEmbedded({ clock, bundle: wfCrashBundle(), groups: { reviewers: wfCrashPeers }, store });
  for (const peerId of wfCrashPeers) await embedded.addPeer(peerId, { review: async () => (await sleep(30), { verdict: 'approve' }) });
  await embedded.coordinator.recover();
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const executor = new WorkflowExecutor({
    store: workflowStreams(store),
    clock,
    random: seededRandom(process.pid),
    evaluator,
    invocations: embedded.coordinator,
    worker: `pid:${process.pid}`,
    leaseMs: wfCrashLeaseMs,
  });
  const document = wfCrashDocument(embedded.bundle.ref);
  const ids: string[] = [];
  const reporting = report(executor, ids);
  for (const [i, key] of wfCrashKeys().entries()) {
    const { instanceId, created } = await executor.start({ principalId: wfCrashPrincipal, invocationKey: key, document, input: { doc: `doc-${i}` } });
    await executor.load(instanceId);
    emit({ event: 'instance', key, instanceId, created });
    ids.push(instanceId);
    if (created) await sleep(120);
  }
  await reporting;
  emit({ event: 'done' });
  await executor.close();
  await evaluator.close();
  await Promise.race([embedded.close(), sleep(3000)]);
  process.exit(0);
}

main().catch((error: unknown) => {
  emit({ event: 'error', stage: 'main', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
});
