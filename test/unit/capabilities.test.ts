/**
 * Spec: "Reject ... unavailable delivery/verification/ownership capabilities", "Unsupported
 * capabilities fail before dispatch" and "Providers advertise result-fencing and effect-fencing
 * separately" — admission checks what the interaction needs, and refuses as unsupported, with
 * the reason, before any state exists or anything is sent.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scenario, answers, type Scenario } from '../support/scenario.js';
import { AdapterError } from '../../src/contract/errors.js';
import { SubjectNamespaceVerifier, type NamespaceAttestation } from '../../src/adapters/verification/subject.js';
import { MemoryEffectSink } from '../../src/peer/effect-sink.js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildDeployment, parseDeploymentConfig } from '../../src/deployment/config.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { VirtualClock } from '../../src/contract/clock.js';
import { minimalServeConfig } from '../support/config-fixtures.js';

const unsupported = (pattern: RegExp) => (error: unknown) => error instanceof AdapterError && error.kind === 'unsupported' && pattern.test(error.message);

async function nothingCreated(s: Scenario): Promise<void> {
  const ids = [];
  for await (const id of s.store.operationIds()) ids.push(id);
  assert.deepEqual(ids, []);
  assert.equal(s.bus.stats.published, 0);
}

const deps = (s: Scenario) => s.coordinator.deps;

const unverifiable: [string, NamespaceAttestation, RegExp][] = [
  ['not attested as peer-exclusive', { namespace: 'demo.v1.lab', exclusivePeerPublishers: false }, /not attested as peer-exclusive/],
  [
    'with an unattested exception',
    { namespace: 'demo.v1.lab', exclusivePeerPublishers: true, exceptions: [{ principal: 'ops-admin', attested: false }] },
    /unattested publishers: ops-admin/,
  ],
];

for (const [what, attestation, reason] of unverifiable) {
  test(`a namespace whose result publishers cannot be verified (${what}) is refused as unsupported before anything is created or sent`, async () => {
    const s = await scenario();
    await s.addPeer('alfa', { review: answers('approve') });
    deps(s).verifier = new SubjectNamespaceVerifier([attestation]);
    await assert.rejects(s.invoke('k'), unsupported(new RegExp(`every result would be rejected|${reason.source}`)));
    await assert.rejects(s.invoke('k'), unsupported(reason));
    await s.settle();
    await nothingCreated(s);
  });
}

test('an operation admitted before its namespace lost verification is still returned for its key', async () => {
  const s = await scenario();
  const first = await s.invoke('k');
  deps(s).verifier = new SubjectNamespaceVerifier([{ namespace: 'demo.v1.lab', exclusivePeerPublishers: false }]);
  s.coordinator.kernel.clear();
  const again = await s.invoke('k');
  assert.deepEqual([again.created, again.result.operationId], [false, first.result.operationId]);
  await assert.rejects(s.invoke('other'), unsupported(/peer-exclusive/));
});

test('result fencing: more than one attempt is unsupported over a transport that does not advertise result fencing', async () => {
  const s = await scenario({ review: { attempts: 2 } });
  const transport = deps(s).transport;
  Object.defineProperty(transport, 'capabilities', { value: { durable: false, resultFencing: false } });
  await assert.rejects(s.invoke('k'), unsupported(/2 attempts need result fencing/));
  await nothingCreated(s);
  // One attempt has only fence 1: nothing to fence, and it is admitted.
  const single = await scenario({ review: { attempts: 1 } });
  Object.defineProperty(deps(single).transport, 'capabilities', { value: { durable: false, resultFencing: false } });
  assert.equal((await single.invoke('k')).created, true);
});

test('effect fencing is advertised by the effect sinks, separately from result fencing: fenced effects need every sink to fence', async () => {
  const fenced = await scenario({ review: { effects: 'fenced' } });
  await fenced.addPeer('alfa', { review: answers('approve') });
  assert.equal((await fenced.invoke('k')).created, true, 'the SDK sinks fence effects');

  const unfencedSink = Object.assign(new MemoryEffectSink(), { capabilities: { effectFencing: false } });
  const s = await scenario({ review: { effects: 'fenced' } });
  await s.addPeer('alfa', { review: answers('approve') }, { sink: unfencedSink });
  assert.equal(deps(s).transport.capabilities.resultFencing, true, 'results are still fenced');
  await assert.rejects(s.invoke('k'), unsupported(/fenced effects need effect sinks that advertise effect fencing/));
  await nothingCreated(s);

  // An interaction that declares no fenced effects does not need them.
  const plain = await scenario();
  await plain.addPeer('alfa', { review: answers('approve') }, { sink: unfencedSink });
  assert.equal((await plain.invoke('k')).created, true);

  // A deployment that advertises nothing about its sinks does not have effect fencing.
  const silentDeployment = await scenario({ review: { effects: 'fenced' } });
  delete deps(silentDeployment).effectFencing;
  await assert.rejects(silentDeployment.invoke('k'), unsupported(/effect fencing/));
});

test('convoke serve: fenced effects are refused unless the operator attests effect fencing for the namespace, and admitted with the attestation', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-fencing-'));
  try {
    await writeFile(join(dir, 'review.bundle.json'), JSON.stringify(reviewBundle({ effects: 'fenced', completion: { mode: 'first-success' } })));
    const config = (attestation: object) =>
      minimalServeConfig({
        transport: { kind: 'memory', examplePeers: { alfa: { review: { verdict: 'approve' } } } },
        bundles: ['review.bundle.json'],
        directory: { groups: { reviewers: ['alfa'] } },
        policy: { rules: [{ effect: 'allow' }] },
        attestations: [{ namespace: 'demo.v1.lab', exclusivePeerPublishers: true, ...attestation }],
      });
    const parse = (attestation: object) => parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(config(attestation))), dir);
    const invoke = async (attestation: object) => {
      const deployment = await buildDeployment(parse(attestation), { clock: new VirtualClock() });
      try {
        const bundle = [...deployment.bundles.all()][0]!;
        return await deployment.coordinator.invoke(
          { principalId: 'p', senderPeerId: null },
          { contract: bundle.ref, interaction: 'review', invocationKey: 'k', input: { document: 'd' } },
        );
      } finally {
        await deployment.close();
      }
    };
    await assert.rejects(invoke({}), unsupported(/fenced effects need effect sinks that advertise effect fencing.*demo\.v1\.lab/));
    await assert.rejects(invoke({ effectFencing: false }), unsupported(/fenced effects/));
    assert.equal((await invoke({ effectFencing: true })).created, true);
    // The attestation is part of the closed config schema: a boolean, and nothing else beside it.
    assert.throws(
      () => parse({ effectFencing: 'yes' }),
      (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input' && /effectFencing/.test(e.description ?? ''),
    );
    assert.throws(
      () => parse({ effectsFenced: true }),
      (e: unknown) => e instanceof AdapterError && e.kind === 'invalid-input',
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
