/**
 * `npm run bench -- listen`: events delivered one after another to a waiting `listen` (memory
 * store, jq in its worker), each awaited (taken and appended) before the next. Two forms,
 * instances interleaved so both see the same machine: `until` as a strategy (`one` filter on
 * `type`: no verdict to wait for, but the filter's string is a regular expression, so each event
 * costs one jq evaluation where it arrives — the baseline) and `until` as an expression
 * (`length >= N`, evaluated by the interpreter and recorded after each event; the next event is
 * taken only once that verdict is recorded, so a delivery following another waits for one jq
 * evaluation and one append). Prints p50/p95 of one delivery for each and the ratio of the p50s.
 */
import { parse as parseYaml } from 'yaml';
import { MemoryEventStore } from '../src/adapters/store/memory.js';
import { SystemClock } from '../src/contract/clock.js';
import type { CloudEvent } from '../src/contract/cloudevents.js';
import type { JsonValue } from '../src/contract/json.js';
import { seededRandom } from '../src/runtime/random.js';
import { WorkflowExecutor } from '../src/workflow/exec/executor.js';
import { JqWorkerEvaluator } from '../src/workflow/exec/jq.js';
import { workflowStreams } from '../src/workflow/exec/streams.js';
import { fixed, percentile, printRows } from './stats.js';

/** Events each instance takes before its listen ends. */
const eventsPerInstance = 20;
const at = '/do/0/wait';

const documents = {
  strategy: `document: { dsl: '1.0.3', namespace: bench, name: until-strategy, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          any: []
          until:
            one: { with: { type: bench.done } }
`,
  expression: `document: { dsl: '1.0.3', namespace: bench, name: until-expression, version: '1.0.0' }
do:
  - wait:
      listen:
        to:
          any: []
          until: ( . | length ) >= ${eventsPerInstance}
`,
} as const;
type Form = keyof typeof documents;

let sequence = 0;
const event = (type: string): CloudEvent => ({ specversion: '1.0', id: `b-${++sequence}`, source: 'https://convoke.dev/bench', type, data: { n: sequence } });

/** One instance of `form`: its deliveries' latencies (ms). */
async function instance(executor: WorkflowExecutor, form: Form, key: string): Promise<number[]> {
  const { instanceId } = await executor.start({ principalId: 'bench', invocationKey: key, document: parseYaml(documents[form]) as JsonValue, input: {} });
  while (!(await executor.get(instanceId))?.listens[at]) await new Promise((resolve) => setTimeout(resolve, 1));
  const latencies: number[] = [];
  const types = [...Array.from({ length: eventsPerInstance }, () => 'bench.reading'), ...(form === 'strategy' ? ['bench.done'] : [])];
  for (const type of types) {
    const began = performance.now();
    const { matched } = await executor.deliver(event(type), null);
    latencies.push(performance.now() - began);
    if (matched.length !== 1) throw new Error(`${form}: an event was not taken`);
  }
  const record = await executor.wait(instanceId, 30_000);
  if (record.status !== 'completed') throw new Error(`${form}: the instance is ${record.status}`);
  return latencies;
}

export async function listenBench(options: { json: boolean; seconds?: number }): Promise<void> {
  const clock = new SystemClock();
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const store = new MemoryEventStore({ clock });
  const executor = new WorkflowExecutor({ store: workflowStreams(store), clock, random: seededRandom(1), evaluator });
  const samples: Record<Form, number[]> = { strategy: [], expression: [] };
  try {
    for (let warm = 0; warm < 2; warm++) for (const form of ['strategy', 'expression'] as const) await instance(executor, form, `warm-${form}-${warm}`);
    const endMs = performance.now() + (options.seconds ?? 10) * 1000;
    for (let round = 0; performance.now() < endMs; round++) {
      const forms: Form[] = round % 2 === 0 ? ['strategy', 'expression'] : ['expression', 'strategy'];
      for (const form of forms) samples[form].push(...(await instance(executor, form, `${form}-${round}`)));
    }
  } finally {
    await executor.close();
    await evaluator.close();
  }
  const stats = (form: Form) => {
    const sorted = [...samples[form]].sort((a, b) => a - b);
    return { form, deliveries: sorted.length, p50Ms: percentile(sorted, 50), p95Ms: percentile(sorted, 95) };
  };
  const rows = [stats('strategy'), stats('expression')];
  const ratio = rows[1]!.p50Ms / rows[0]!.p50Ms;
  printRows(
    options.json,
    `listen: one delivery, awaited before the next (${eventsPerInstance} per instance); expression p50 / strategy p50 = ${fixed(ratio)}`,
    ['until', 'deliveries', 'p50 ms', 'p95 ms'],
    rows.map((r) => [r.form, String(r.deliveries), fixed(r.p50Ms), fixed(r.p95Ms)]),
    { rows, ratio },
  );
}
