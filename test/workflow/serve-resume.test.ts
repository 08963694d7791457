/**
 * A restarted `convoke serve` resumes every running workflow instance at start-up, not when it
 * is next read: over a real nats-server (core mode), with the SQLite store and with the JetStream
 * store, an instance waiting on its timer is left by a serve process killed with SIGKILL; the
 * next process, which nobody asks about the instance, takes its lease over once the dead one's
 * has ended and completes it. Only the store is read to see it.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import type { StoredTransition } from '../../src/events/types.js';
import type { Stored } from '../../src/kernel/types.js';
import type { WorkflowTransition } from '../../src/workflow/exec/events.js';
import { foldWorkflow } from '../../src/workflow/exec/record.js';
import { NatsDeploymentFixture, e2eBundle, eventTypes, eventually, type StoreKind } from '../support/nats-deployment-fixture.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const waitSeconds = 3;
const leaseMs = 1000;

function bundle(): JsonObject {
  const b = e2eBundle();
  b.workflows = {
    timed: {
      document: { dsl: '1.0.3', namespace: 'e2e', name: 'timed', version: '1.0.0' },
      do: [{ pause: { wait: { seconds: waitSeconds } } }, { done: { set: { done: true } } }],
    },
  };
  return b;
}

const fixtures: NatsDeploymentFixture[] = [];
after(async () => {
  for (const f of fixtures) await f.dispose();
});

const eventsOf = (log: StoredTransition[], type: string) =>
  log.flatMap((s) => s.transition.events.filter((e) => (e.type as string) === type).map((e) => ({ at: s.committedAtMs, event: e as unknown as JsonObject })));

async function killedAndRestarted(store: StoreKind): Promise<void> {
  const f = await NatsDeploymentFixture.start({
    mode: 'core',
    store,
    bundle: bundle(),
    groups: { reviewers: ['alfa'] },
    peers: {},
    commandClients: ['billing'],
    workflows: { leaseMs },
  });
  fixtures.push(f);
  const first = await f.startServe();
  const client = await f.client('billing');
  const reply = await client.startWorkflow('timed', `resume-${store}`, {});
  assert.equal(reply.status, 202, JSON.stringify(reply));
  const id = 'instance' in reply ? reply.instance.instanceId : '';
  // The instance waits on its timer when its process dies.
  await eventually(async () => eventTypes(await f.log(id)).includes('timer-set'), 'the wait armed its timer', 20_000);
  first.child.kill('SIGKILL');
  await first.exited;
  const before = await f.log(id);
  assert.ok(!eventTypes(before).includes('workflow-completed'), 'the instance had not completed when its process died');

  await f.startServe();
  // Nobody reads the instance through the service: only the store is looked at.
  await eventually(async () => eventTypes(await f.log(id)).includes('workflow-completed'), 'the restarted serve completed the instance', 60_000);
  const log = await f.log(id);
  const leases = eventsOf(log, 'lease-acquired');
  assert.ok(leases.length >= 2, 'the restarted process took the lease over');
  const [firstLease, lastLease] = [leases[0]!, leases.at(-1)!];
  assert.notEqual(lastLease.event.worker, firstLease.event.worker, 'another worker completed it');
  const timer = eventsOf(log, 'timer-set')[0]!.event;
  const fired = eventsOf(log, 'timer-fired')[0]!;
  assert.ok(fired.at >= (timer.dueAtMs as number), 'the timer fired no earlier than its recorded instant');
  assert.equal(eventsOf(log, 'timer-set').length, 1, 'the timer was set once: the restarted interpreter took it from the log');
  // The output as the log gives it (the event may name where it was recorded rather than carry it).
  assert.deepEqual(foldWorkflow(log as unknown as Stored<WorkflowTransition>[])?.output, { done: true });
}

test('sqlite store: a serve process killed while an instance waits is restarted; the instance completes unread', { timeout: 180_000 }, () =>
  killedAndRestarted('sqlite'),
);

test('jetstream store: a serve process killed while an instance waits is restarted; the instance completes unread', { timeout: 180_000 }, () =>
  killedAndRestarted('jetstream'),
);
