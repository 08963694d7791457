// node bench/tools/recovery.mjs <checkout root> <sqlite|jetstream> <settled> <open>
// The start-up recovery of a coordinator over a store holding <settled> settled operations and
// <open> open ones (the operations index conformance fixtures, written through the store, so each
// has its index row as in a deployment): prints what recover() read and how long it took. Run it
// against two builds' dist/ to compare them; JetStream runs on its own nats-server on free ports.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';

const [root, backend, settledArg, openArg] = process.argv.slice(2);
const settled = Number(settledArg ?? 2000);
const open = Number(openArg ?? 10);
const mod = (p) => import(`${root}/dist/${p}`);
const { SystemClock } = await mod('src/contract/clock.js');
const { createEmbedded } = await mod('src/deployment/embedded.js');
const { peerIds, reviewBundle } = await mod('src/deployment/examples.js');
const { admission, lifecycle } = await mod('test/conformance/index.js');

const clock = new SystemClock();
const guard = { notBeforeMs: 0, notAfterMs: Number.MAX_SAFE_INTEGER };
const sha = (text) => createHash('sha256').update(text).digest('hex');
const idOf = (kind, i) => 'op' + sha(`recovery-${kind}-${i}`);
/** The fixture's admission with publication ids of the stored schema's shape, so the coordinator folds it. */
let bundle;
function admitted(id) {
  const transition = admission(id, guard);
  const [event] = transition.events;
  event.contract = bundle.ref;
  event.outbox = event.outbox.map((o) => ({ ...o, publicationId: sha(`${id}-${o.branchId}`) }));
  return transition;
}

let store;
let dispose;
if (backend === 'sqlite') {
  const { SqliteEventStore } = await mod('src/adapters/store/sqlite.js');
  const dir = mkdtempSync(join(tmpdir(), 'convoke-recovery-'));
  store = new SqliteEventStore({ path: join(dir, 'ops.db'), clock, synchronous: 'normal' });
  dispose = async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  };
} else {
  const { JetStreamEventStore } = await mod('src/adapters/store/jetstream.js');
  const { startJetStreamServer } = await import(new URL('../../dist/test/support/jetstream-server.js', import.meta.url).href);
  const server = await startJetStreamServer();
  store = await JetStreamEventStore.open({ servers: server.url });
  dispose = async () => {
    await store.close();
    await server.dispose();
  };
}

// Written through the store, not the coordinator: its cache stays empty, as after a restart.
const embedded = await createEmbedded({ clock, store, bundle: reviewBundle({}), groups: { reviewers: peerIds(3) } });
bundle = embedded.bundle;
const filling = performance.now();
for (let i = 0; i < settled; i++) {
  const id = idOf('settled', i);
  let outcome = await store.create(id, admitted(id));
  for (const next of lifecycle(guard)) {
    if (outcome.kind !== 'ok') throw new Error(`${outcome.kind}: ${outcome.description}`);
    outcome = await store.append(id, outcome.revision, next);
  }
}
for (let i = 0; i < open; i++) {
  const id = idOf('open', i);
  const outcome = await store.create(id, admitted(id));
  if (outcome.kind !== 'ok') throw new Error(`${outcome.kind}: ${outcome.description}`);
}
process.stderr.write(`${backend}: ${settled} settled and ${open} open operations written in ${((performance.now() - filling) / 1000).toFixed(1)} s\n`);

const started = performance.now();
const counts = await embedded.coordinator.recover();
const ms = performance.now() - started;
process.stdout.write(`${root} ${backend} ${settled} settled + ${open} open: recover() ${ms.toFixed(0)} ms, ${JSON.stringify(counts)}\n`);
await embedded.close();
await dispose();
process.exit(0);
