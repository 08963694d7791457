/**
 * An emitted event the NATS intake could not deliver within emittedRedelivery.windowMs is dropped
 * and counted as `window` in convoke_workflow_emitted_events_dropped_total. Driven for real: a
 * workflow host (createWorkflowHost, as `convoke serve` wires it) on a virtual clock, a real
 * nats-server; its workflow emits an event on NATS, the host's intake takes it and finds its
 * store's running listing unavailable on every attempt, until the window ends on the host's clock.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { connect } from '@nats-io/transport-node';
import { emittedRedelivery } from '../../src/adapters/transport/nats-cloudevents.js';
import { BundleRegistry } from '../../src/contract/bundle.js';
import { unavailable } from '../../src/contract/errors.js';
import { createWorkflowHost } from '../../src/cli/workflow-host.js';
import { emittedDroppedName } from '../../src/runtime/workflow-emitted-metrics.js';
import { scenario } from '../support/scenario.js';
import { startNatsServer } from '../support/nats-server.js';
import { eventually } from '../support/nats-deployment-fixture.js';
import { yaml } from './support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const announce = yaml(`document: { dsl: '1.0.3', namespace: test, name: announce, version: '1.0.0' }
do:
  - tell:
      emit:
        event:
          with:
            source: https://convoke.dev/test
            type: com.example.tick
            data: { n: 1 }
`);

const dropped = async (registry: Registry) =>
  Object.fromEntries(((await registry.getSingleMetric(emittedDroppedName)?.get())?.values ?? []).map((v) => [v.labels.reason, v.value]));

test('an emitted event not delivered within its window, on the host clock, is dropped and counted as window', async () => {
  const server = await startNatsServer({ jetstream: false });
  const nc = await connect({ servers: server.url });
  const s = await scenario({ peers: 1 });
  const registry = new Registry();
  const failures: string[] = [];
  const drops: string[] = [];
  let droppedAtMs = 0;
  const host = await createWorkflowHost({
    coordinator: s.coordinator,
    bundles: new BundleRegistry(),
    store: s.store,
    clock: s.clock,
    seed: 7,
    nats: nc,
    metrics: registry,
    settings: { events: { emit: 'nats', listen: {} } },
    onFailure: (error) => failures.push(String(error)),
    onEmittedDropped: (subject, reason, detail) => {
      drops.push(`${subject} ${reason}: ${detail}`);
      droppedAtMs = s.clock.nowMs();
    },
  });
  try {
    // No instance listens, so each attempt looks for instances other workers started: the store's
    // listing of running instances is down, so each attempt is unavailable and the event is kept.
    let looks = 0;
    s.store.runningWorkflowIds = async function* () {
      looks++;
      yield* [];
      throw unavailable('the store is down');
    };
    const { instanceId } = await host.executor.start({ principalId: 'alice', invocationKey: 'announce-1', document: announce, input: {} });
    await eventually(async () => (await host.executor.get(instanceId))?.status === 'completed', 'the emitting instance completed', 10_000);
    await eventually(() => looks === 1, 'the first attempt', 10_000);
    const startMs = s.clock.nowMs();
    // Time moves on by the first backoff at a time; each attempt runs as the clock fires it.
    for (let moved = 0; moved <= emittedRedelivery.windowMs + emittedRedelivery.delayMaxMs && drops.length === 0; moved += emittedRedelivery.firstDelayMs)
      await s.clock.advance(emittedRedelivery.firstDelayMs);
    await eventually(() => drops.length === 1, 'the event dropped once its window ended', 10_000);
    assert.match(drops[0] ?? '', /^convoke\.emitted\.alice\.com\.example\.tick window: unavailable: the store is down; not delivered within 60000 ms$/);
    assert.ok(looks > 10, `tried again within its window (${looks} attempts)`);
    // Measured on the host's clock: dropped when its next attempt would come past the window.
    assert.ok(droppedAtMs - startMs > emittedRedelivery.windowMs - emittedRedelivery.delayMaxMs, `dropped ${droppedAtMs - startMs} ms in`);
    assert.deepEqual(await dropped(registry), { refused: 0, window: 1, 'backlog-full': 0, 'intake-closed': 0 });
  } finally {
    await host.close();
    await s.close();
    await nc.close();
    await server.dispose();
  }
});
