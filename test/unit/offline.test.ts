/**
 * Spec: "The runtime derives the operation ID, resolves candidates, applies sender/offline rules
 * and authorizes every included peer. Record resolver/policy revisions ... A resolver observation
 * does not guarantee that a currently online peer remains connected." The directory reports what
 * it observed of each candidate's presence; the interaction declares what an offline candidate
 * means; the observation is recorded with its revision.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, type Scenario } from '../support/scenario.js';
import { AdapterError } from '../../src/contract/errors.js';
import type { OperationAdmitted } from '../../src/events/types.js';
import type { Directory } from '../../src/adapters/directory/types.js';

async function admitted(s: Scenario, operationId: string): Promise<OperationAdmitted> {
  const [first] = await s.events(operationId);
  assert.equal(first?.type, 'operation-admitted');
  return first as OperationAdmitted;
}

const deps = (s: Scenario) => s.coordinator.deps;

test('offline exclude: a candidate the directory observed offline is left out at admission, and the observation is recorded with its revision', async () => {
  const s = await scenario({ review: { offline: 'exclude', completion: { mode: 'quorum', count: 2 } } });
  s.directory.setPresence('alfa', 'online');
  s.directory.setPresence('charlie', 'offline');
  s.directory.setPresence('echo', 'offline');
  const { result } = await s.invoke('k');
  await s.settle();
  assert.deepEqual(
    result.branches.map((b) => b.peerId),
    ['alfa', 'bravo', 'delta'],
  );
  const event = await admitted(s, result.operationId);
  assert.deepEqual(event.presence, { revision: s.directory.presenceRevision, online: ['alfa'], offline: ['charlie', 'echo'] });
  assert.equal(s.bus.stats.published, 3, 'no request for an excluded peer');
  await s.assertReplayEquals(result.operationId);
});

test('offline deliver under durable delivery: an offline candidate is still admitted and sent its request', async () => {
  const s = await scenario({ review: { offline: 'deliver' } });
  Object.defineProperty(deps(s).transport, 'capabilities', { value: { durable: true, resultFencing: true } });
  s.directory.setPresence('charlie', 'offline');
  const { result } = await s.invoke('k');
  await s.settle();
  assert.deepEqual(
    result.branches.map((b) => b.peerId),
    ['alfa', 'bravo', 'charlie', 'delta', 'echo'],
  );
  assert.deepEqual((await admitted(s, result.operationId)).presence, { revision: s.directory.presenceRevision, online: [], offline: ['charlie'] });
  assert.equal(s.bus.stats.published, 5);
});

test('offline deliver without durable delivery is unsupported: nothing is created or sent', async () => {
  const s = await scenario();
  assert.equal(s.bundle.interactions.get('review')?.spec.offline, 'deliver', 'deliver is the default');
  s.directory.setPresence('charlie', 'offline');
  await assert.rejects(s.invoke('k'), (e) => e instanceof AdapterError && e.kind === 'unsupported' && /charlie were observed offline/.test(e.message));
  const ids = [];
  for await (const id of s.store.operationIds()) ids.push(id);
  assert.deepEqual(ids, []);
  assert.equal(s.bus.stats.published, 0);
  // Observed online, or not observed at all, the same interaction is admitted.
  s.directory.setPresence('charlie', 'online');
  assert.equal((await s.invoke('k')).created, true);
});

test('a presence revision change during the snapshot check restarts admission within its budget', async () => {
  const s = await scenario({ review: { offline: 'exclude', completion: { mode: 'first-success' } } });
  let calls = 0;
  const moving: Directory = {
    audience: async () => {
      calls++;
      const offline = calls <= 1 ? [] : ['bravo'];
      return { peers: ['alfa', 'bravo'], revision: 'r1', presence: { revision: calls <= 1 ? 'p1' : 'p2', online: [], offline } };
    },
  };
  deps(s).directory = moving;
  const { result } = await s.invoke('k');
  assert.deepEqual(
    result.branches.map((b) => b.peerId),
    ['alfa'],
  );
  assert.equal((await admitted(s, result.operationId)).presence?.revision, 'p2');
  assert.ok(calls >= 3);
});
