/**
 * The durability gate (src/deployment/nats/durability.ts DurabilityMonitor): a check proves the
 * connection it ran on. A check still running when the connection is lost or comes back is
 * neither joined nor heeded, a reconnect checks afresh at once, and nothing is checked while
 * disconnected. Checks are promises this test settles by hand: no timers, no broker.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DurabilityCheck } from '../../src/adapters/transport/types.js';
import { DurabilityMonitor } from '../../src/deployment/nats/durability.js';

/** A monitor whose checks wait until the test answers them, in the order they were asked. */
function monitored() {
  const pending: { answer: (check: DurabilityCheck) => void; fail: (error: Error) => void }[] = [];
  const lines: string[] = [];
  const monitor = new DurabilityMonitor(
    () =>
      new Promise<DurabilityCheck>((resolve, reject) => {
        pending.push({ answer: resolve, fail: reject });
      }),
    (line) => lines.push(line),
  );
  return { monitor, pending, lines };
}

const proven: DurabilityCheck = { ok: true };

test('a check that succeeds after the connection was lost does not open the gate', async () => {
  const { monitor, pending } = monitored();
  const first = monitor.run();
  assert.equal(pending.length, 1);
  monitor.disconnected();
  pending[0]!.answer(proven);
  await first;
  assert.match(monitor.problem() ?? '', /the NATS connection is lost/);
});

test('a reconnect checks afresh instead of joining a check from before it; the older one, failing later, changes nothing', async () => {
  const { monitor, pending } = monitored();
  void monitor.run();
  monitor.disconnected();
  const fresh = monitor.reconnected();
  assert.equal(pending.length, 2, 'the reconnect started a check of its own');
  pending[1]!.answer(proven);
  await fresh;
  assert.equal(monitor.problem(), undefined, 'proven by the check of the new connection');
  pending[0]!.fail(new Error('request timed out'));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(monitor.problem(), undefined, "the old connection's timeout proves nothing of the new one");
});

test('no check starts while disconnected; on one connection, a run joins the check under way', async () => {
  const { monitor, pending } = monitored();
  monitor.disconnected();
  const idle = monitor.run();
  assert.equal(pending.length, 0);
  await idle;
  const checked = monitor.reconnected();
  const joined = monitor.run();
  assert.equal(pending.length, 1, 'one check per connection at a time');
  pending[0]!.answer({ ok: false, description: 'stream CONVOKE_X is missing' });
  await Promise.all([checked, joined]);
  assert.match(monitor.problem() ?? '', /stream CONVOKE_X is missing/);
});

test('what a stale check repaired is still logged; only the gate ignores it', async () => {
  const { monitor, pending, lines } = monitored();
  const stale = monitor.run();
  monitor.disconnected();
  pending[0]!.answer({ ok: true, repaired: ['CONVOKE_X: consumer c was missing; it was created again'] });
  await stale;
  assert.ok(lines.some((line) => line.includes('durable consumer repaired: CONVOKE_X')));
  assert.match(monitor.problem() ?? '', /the NATS connection is lost/);
});
