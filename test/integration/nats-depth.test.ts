/**
 * Values at the depth limit cross every envelope that carries them over a real nats-server: a
 * contract input as deep as admission takes (limits.jsonDepthMax levels) reaches its peer inside
 * the request message, and one level more is refused at admission, naming the depth; a peer's
 * result as deep is read by the coordinator inside the result message, and one level more is
 * refused by the peer that would send it (onUndeliverable, naming the depth), never sent to be
 * dropped unread; an invoke reply nesting such a result deepest (a collected output's outcome, five
 * levels below the reply's root) is read by the command client; an invoke command's body takes an
 * input as deep as admission does, one level below its root, and one level more is refused naming
 * the value and the depth an input is held to.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { StaticDirectory } from '../../src/adapters/directory/static.js';
import { StaticPolicy } from '../../src/adapters/policy/static.js';
import { SubjectNamespaceVerifier } from '../../src/adapters/verification/subject.js';
import { NatsTransport } from '../../src/adapters/transport/nats.js';
import { BundleRegistry, loadBundle } from '../../src/contract/bundle.js';
import { SystemClock } from '../../src/contract/clock.js';
import { AdapterError } from '../../src/contract/errors.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import type { Handler } from '../../src/peer/peer.js';
import { createNatsPeer } from '../../src/peer/nats-peer.js';
import { Coordinator } from '../../src/runtime/coordinator.js';
import { sendCommand, startCommandServer } from '../../src/nats-api/commands.js';
import { eventually } from '../support/nats-deployment-fixture.js';
import { natsTransportForSuite, type NatsServer } from '../support/nats-server.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

/** A value nested `levels` deep: arrays in arrays, the innermost empty (`[]` is 1 level). */
export function nestedLevels(levels: number): JsonValue {
  let value: JsonValue = [];
  for (let level = 1; level < levels; level++) value = [value];
  return value;
}

/** An input `levels` deep: `{document: …}` holds `levels - 1` of them. */
const inputOf = (levels: number): JsonValue => ({ document: nestedLevels(levels - 1) });

/** A coordinator for one peer, alfa, running `handler`, on the suite's server (core NATS, memory store). */
async function deploymentOn(server: NatsServer, handler: Handler, onUndeliverable?: (error: AdapterError) => void, review: JsonObject = {}) {
  const clock = new SystemClock();
  const bundle = loadBundle(
    reviewBundle({
      input: { type: 'object', required: ['document'], properties: { document: {} } },
      result: { type: 'object', required: ['verdict'], properties: { verdict: { enum: ['approve', 'reject', 'retry'] }, echo: {} } },
      completion: { mode: 'all-successful' },
      timeoutMs: 4000,
      leaseMs: 4000,
      ...review,
    }),
  );
  const bundles = new BundleRegistry();
  bundles.add(bundle);
  const namespace = bundle.bundle.subjectNamespace;
  const nc = await connect({ servers: server.url });
  const transport = new NatsTransport(nc, { identity: 'coordinator' });
  const coordinator = new Coordinator({
    store: new MemoryEventStore({ clock }),
    transport,
    directory: new StaticDirectory({ groups: { reviewers: ['alfa'] } }),
    policy: new StaticPolicy({ rules: [{ effect: 'allow' }], ttlMs: 60_000 }, clock),
    verifier: new SubjectNamespaceVerifier([{ namespace, exclusivePeerPublishers: true }]),
    clock,
    bundles,
    deployment: { account: 'local', system: 'convoke', domain: 'depth' },
    effectFencing: () => false,
    resultBatchMs: 0,
  });
  const peerNc = await connect({ servers: server.url });
  const peer = await createNatsPeer({
    nc: peerNc,
    namespace,
    peerId: 'alfa',
    renew: false,
    handlers: { review: handler },
    ...(onUndeliverable ? { onUndeliverable: (_request: unknown, error: AdapterError) => onUndeliverable(error) } : {}),
  });
  const invoke = (invocationKey: string, input: JsonValue) =>
    coordinator.invoke({ principalId: 'svc-a', senderPeerId: null }, { contract: bundle.ref, interaction: 'review', invocationKey, input });
  const close = async () => {
    await peer.close();
    await coordinator.close();
    await transport.close();
    await peerNc.close();
    await nc.close();
  };
  return { coordinator, peer, invoke, close, bundle, bundles, transport };
}

describe('values at the depth limit over NATS', { timeout: 60_000 }, () => {
  const nats = natsTransportForSuite({ jetstream: false });

  it('an input as deep as admission takes reaches its peer inside the request; one level more is refused at admission', async () => {
    const seen: JsonValue[] = [];
    const { coordinator, peer, invoke, close } = await deploymentOn(nats.server, (input) => (seen.push(input), { verdict: 'approve' }));
    try {
      const deepest = inputOf(limits.jsonDepthMax);
      const { result } = await invoke('deepest-input', deepest);
      await eventually(async () => (await coordinator.get('svc-a', result.operationId)).decision !== null, 'the decision closed', 15_000);
      const decided = await coordinator.get('svc-a', result.operationId);
      assert.deepEqual([decided.decision?.outcome, peer.stats.refused.malformed], ['success', 0], JSON.stringify(decided.decision));
      assert.deepEqual(seen, [deepest]);
      await assert.rejects(invoke('too-deep-input', inputOf(limits.jsonDepthMax + 1)), (error: unknown) => {
        assert.ok(error instanceof AdapterError && error.kind === 'invalid-input', String(error));
        assert.match(error.message, /nesting deeper than 64/);
        return true;
      });
    } finally {
      await close();
    }
  });
});

describe('results at the depth limit over NATS', { timeout: 60_000 }, () => {
  const nats = natsTransportForSuite({ jetstream: false });

  it('a result as deep as a value may be is read by the coordinator inside the result message; one level more is refused by its peer, naming the depth', async () => {
    const undeliverable: AdapterError[] = [];
    const deepest = { verdict: 'approve', echo: nestedLevels(limits.jsonDepthMax - 1) };
    const tooDeep = { verdict: 'approve', echo: nestedLevels(limits.jsonDepthMax) };
    const { coordinator, peer, invoke, close } = await deploymentOn(
      nats.server,
      (input) => ((input as { document: string }).document === 'deepest' ? deepest : tooDeep),
      (error) => undeliverable.push(error),
    );
    try {
      const { result } = await invoke('deepest-result', { document: 'deepest' });
      await eventually(async () => (await coordinator.get('svc-a', result.operationId)).decision !== null, 'the decision closed', 15_000);
      const decided = await coordinator.get('svc-a', result.operationId);
      assert.equal(decided.decision?.outcome, 'success', JSON.stringify(decided.decision));
      assert.deepEqual(decided.branches[0]?.result, deepest);

      await invoke('too-deep-result', { document: 'too deep' });
      await eventually(() => undeliverable.length > 0, 'the peer told its result cannot be sent', 15_000);
      assert.equal(undeliverable[0]?.kind, 'invalid-input');
      assert.match(undeliverable[0]?.message ?? '', /result: nesting deeper than 64/);
      assert.equal(peer.stats.undeliverable, 1);
    } finally {
      await close();
    }
  });
});

describe('command replies at the depth limit over NATS', { timeout: 60_000 }, () => {
  const nats = natsTransportForSuite({ jetstream: false });

  it('an invoke reply holding the deepest result in its collected output is read by the command client', async () => {
    const deepest = { verdict: 'approve', echo: nestedLevels(limits.jsonDepthMax - 1) };
    const { coordinator, bundle, bundles, transport, close } = await deploymentOn(nats.server, () => deepest, undefined, {
      aggregate: { kind: 'collect' },
      output: {},
    });
    const commands = await startCommandServer({ transport, coordinator, bundles, waitMsMax: 10_000, bodyLimitBytes: 64 * 1024 });
    const clientNc = await connect({ servers: nats.server.url });
    const client = new NatsTransport(clientNc, { identity: 'client' });
    try {
      const body = {
        contract: bundle.ref,
        interaction: 'review',
        invocationKey: 'deepest-reply',
        input: { document: 'd' },
        waitFor: 'decision',
        waitMs: 10_000,
      };
      const reply = await sendCommand(client, 'svc-a', 'invoke', body, 15_000);
      assert.ok('result' in reply && !('omitted' in reply), JSON.stringify(reply).slice(0, 400));
      assert.deepEqual(reply.result.branches[0]?.result, deepest);
      assert.deepEqual(reply.result.output, { outcomes: [{ branchId: 'alfa', peerId: 'alfa', status: 'success', result: deepest }] });
    } finally {
      await commands.close();
      await client.close();
      await clientNc.close();
      await close();
    }
  });
});

describe('command bodies at the depth limit over NATS', { timeout: 60_000 }, () => {
  const nats = natsTransportForSuite({ jetstream: false });

  it('an invoke command takes an input as deep as admission does, its body one level deeper; one level more is refused naming the depth an input is held to', async () => {
    const seen: JsonValue[] = [];
    const { coordinator, bundle, bundles, transport, close } = await deploymentOn(nats.server, (input) => (seen.push(input), { verdict: 'approve' }));
    const commands = await startCommandServer({ transport, coordinator, bundles, waitMsMax: 10_000, bodyLimitBytes: 64 * 1024 });
    const clientNc = await connect({ servers: nats.server.url });
    const client = new NatsTransport(clientNc, { identity: 'client' });
    const invoke = (invocationKey: string, input: JsonValue) =>
      sendCommand(
        client,
        'svc-a',
        'invoke',
        { contract: bundle.ref, interaction: 'review', invocationKey, input, waitFor: 'decision', waitMs: 10_000 },
        15_000,
      );
    try {
      const deepest = inputOf(limits.jsonDepthMax);
      const reply = await invoke('deepest-command-input', deepest);
      assert.ok('result' in reply, JSON.stringify(reply).slice(0, 400));
      assert.equal(reply.result.decision?.outcome, 'success', JSON.stringify(reply.result.decision));
      assert.deepEqual(seen, [deepest]);
      const refused = await invoke('too-deep-command-input', inputOf(limits.jsonDepthMax + 1));
      assert.ok('error' in refused, JSON.stringify(refused).slice(0, 400));
      assert.deepEqual([refused.status, refused.error.kind], [400, 'invalid-input']);
      assert.match(refused.error.description ?? '', /the value at \/input nests deeper than 64 at \/input\/document\/0/);
      // A member the body carries beside its input is no value: as deep, it is refused, never taken.
      const beside = await sendCommand(
        client,
        'svc-a',
        'invoke',
        { contract: bundle.ref, interaction: 'review', invocationKey: 'deep-manifest', input: {}, manifest: nestedLevels(limits.jsonDepthMax) },
        15_000,
      );
      assert.ok('error' in beside, JSON.stringify(beside).slice(0, 400));
      assert.deepEqual([beside.status, beside.error.kind], [403, 'denied'], JSON.stringify(beside).slice(0, 400));
      assert.deepEqual(seen, [deepest], 'nothing else reached the peer');
    } finally {
      await commands.close();
      await client.close();
      await clientNc.close();
      await close();
    }
  });
});
