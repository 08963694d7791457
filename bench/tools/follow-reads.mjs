// node bench/tools/follow-reads.mjs <checkout root> <tail|whole> <iterations>
// What following another worker's appends costs the worker that holds an instance: two workflow
// executors, each in its own process, on one SQLite file. Worker B loads the instance and watches
// the store (as `convoke serve` does for every running instance it resumes); worker A then runs
// it: a `for` loop of <iterations> `set` tasks, each its own append (an `output.as` commits what
// the instance holds before the task starts). B follows A's appends by its
// kernel's reloads: `tail` reads only what was stored after the record B holds (readAfter),
// `whole` hides readAfter from B's store so that each reload reads the whole log again (what
// every reload did before readAfter). Prints A's appends, B's reloads (store reads of each
// kind), the transitions they returned, and B's CPU time (user + system) from holding the
// instance to holding its end. Run from a built checkout (`npx tsc -p tsconfig.json`).
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';

const [root, mode, iterationsArg, role, path] = process.argv.slice(2);
if (!['tail', 'whole'].includes(mode) || !Number.isSafeInteger(Number(iterationsArg)))
  throw new Error('usage: follow-reads.mjs <checkout root> <tail|whole> <iterations>');
const iterations = Number(iterationsArg);
const mod = (p) => import(`${root}/dist/src/${p}`);
const { SystemClock } = await mod('contract/clock.js');
const { SqliteEventStore } = await mod('adapters/store/sqlite.js');
const { WorkflowExecutor } = await mod('workflow/exec/executor.js');
const { workflowStreams } = await mod('workflow/exec/streams.js');
const { JqWorkerEvaluator } = await mod('workflow/exec/jq.js');
const { seededRandom } = await mod('runtime/random.js');

const clock = new SystemClock();

function executorOn(store, worker) {
  const evaluator = new JqWorkerEvaluator({ deadlineMs: 5000 });
  const executor = new WorkflowExecutor({ store: workflowStreams(store), clock, random: seededRandom(1), evaluator, worker });
  return { executor, close: async () => (await executor.close(), await evaluator.close()) };
}

/** Worker B: holds the instance A names, follows it to its end, and reports. */
async function follower() {
  const store = new SqliteEventStore({ path, clock, synchronous: 'normal', followIntervalMs: 10 });
  const counts = { reads: 0, readTransitions: 0, tails: 0, tailTransitions: 0 };
  const view = Object.create(store);
  view.read = async (id) => {
    const read = await store.read(id);
    counts.reads++;
    if (read.kind === 'ok') counts.readTransitions += read.transitions.length;
    return read;
  };
  view.readAfter =
    mode === 'whole'
      ? undefined
      : async (id, revision) => {
          const read = await store.readAfter(id, revision);
          counts.tails++;
          if (read.kind === 'ok') counts.tailTransitions += read.transitions.length;
          return read;
        };
  const b = executorOn(view, 'b');
  await b.executor.watch();
  process.once('message', async ({ instanceId }) => {
    await b.executor.get(instanceId);
    const loaded = { ...counts };
    const cpu = process.cpuUsage();
    process.send({ held: true });
    const record = await b.executor.wait(instanceId, 600_000);
    const used = process.cpuUsage(cpu);
    process.send({
      status: record.status,
      cpuMs: Math.round((used.user + used.system) / 1000),
      reads: counts.reads - loaded.reads,
      readTransitions: counts.readTransitions - loaded.readTransitions,
      tails: counts.tails,
      tailTransitions: counts.tailTransitions,
    });
    await b.close();
    await store.close();
    process.exit(0);
  });
  process.send({ ready: true });
}

const document = parseYaml(`document: { dsl: '1.0.3', namespace: bench, name: follow, version: '1.0.0' }
do:
  - ready:
      listen:
        to:
          one:
            with: { type: com.example.ready }
  - loop:
      for: { in: '\${ [range($workflow.input.n)] }' }
      do:
        - step:
            set: { at: '\${ $index }' }
            output: { as: '\${ . }' }
`);

/** Worker A: starts the instance, lets B hold it, then runs it to its end. */
async function writer() {
  const dir = mkdtempSync(join(tmpdir(), 'convoke-follow-'));
  const file = join(dir, 'store.db');
  const store = new SqliteEventStore({ path: file, clock, synchronous: 'normal' });
  const a = executorOn(store, 'a');
  const child = fork(new URL(import.meta.url), [root, mode, iterationsArg, 'follower', file]);
  // Every message is kept from the start: B may report before A has seen the instance end.
  const messages = [];
  let waiting;
  child.on('message', (message) => (waiting ? (waiting(message), (waiting = undefined)) : messages.push(message)));
  const next = () => (messages.length > 0 ? Promise.resolve(messages.shift()) : new Promise((resolve) => (waiting = resolve)));
  try {
    await next(); // ready
    const { instanceId } = await a.executor.start({ principalId: 'bench', invocationKey: 'follow', document, input: { n: iterations } });
    child.send({ instanceId });
    await next(); // held
    const event = { specversion: '1.0', id: 'ready-1', source: 'https://convoke.dev/bench', type: 'com.example.ready', data: {} };
    await a.executor.deliver(event, null);
    const ended = await a.executor.wait(instanceId, 600_000);
    const report = await next();
    const log = await store.read(instanceId);
    const appends = log.kind === 'ok' ? log.transitions.length : NaN;
    console.log(JSON.stringify({ mode, iterations, status: ended.status, appends, follower: report }));
  } finally {
    await a.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await (role === 'follower' ? follower() : writer());
