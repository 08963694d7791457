/**
 * The NATS deployment of `convoke serve`, in process against a real nats-server: the transport
 * config is checked (schema, duplicate window against every deployed interaction, password from
 * the environment), durable mode provisions its consumers and gates admissions on the broker's
 * durability, an exhausted request is recorded as a failed attempt, and the committed examples
 * stay what the code renders.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { loadBundle } from '../../src/contract/bundle.js';
import { AdapterError, isAdapterError } from '../../src/contract/errors.js';
import { parseStrictBytes } from '../../src/contract/ijson.js';
import type { JsonObject } from '../../src/contract/json.js';
import { msToNanos } from '../../src/adapters/transport/nats-codec.js';
import { connectNats, NatsTransport } from '../../src/adapters/transport/nats.js';
import { coordinatorConsumerName, durableStreamNames, inboxPrefixFor, peerConsumerFilter, peerConsumerName } from '../../src/adapters/transport/nats-names.js';
import { SystemClock } from '../../src/contract/clock.js';
import { fold } from '../../src/projections/record.js';
import { buildDeployment, parseDeploymentConfig, readDeploymentConfig } from '../../src/deployment/config.js';
import type { RunningDeployment } from '../../src/deployment/types.js';
import { natsPlanFor, passwordVariableOf, renderNatsServerConfig } from '../../src/deployment/nats/permissions.js';
import { readPeerConfig } from '../../src/cli/commands/peer.js';
import { repoRoot } from '../support/http-server.js';
import { createNatsPeer } from '../../src/peer/nats-peer.js';
import { startNatsServer, type NatsServer, type NatsUser } from '../support/nats-server.js';
import { e2eBundle, e2eNamespace } from '../support/nats-deployment-fixture.js';

const groups = { reviewers: ['alfa', 'bravo', 'charlie'] };
const caller = { principalId: 'billing', senderPeerId: null };

/** A second namespace: one interaction whose only peer is kilo, driven by hand. */
const soloNamespace = 'solo.v1';
function soloBundle(): JsonObject {
  const base = e2eBundle();
  const allok = (base.interactions as Record<string, JsonObject>).allok!;
  return {
    ...base,
    contract: { id: 'e2e.solo', version: '1.0.0' },
    subjectNamespace: soloNamespace,
    interactions: { solo: { ...allok, audience: { peers: ['kilo'] } } },
  };
}

function configJson(transport: JsonObject, store = 'sqlite:ops.db'): JsonObject {
  return {
    store,
    transport,
    bundles: ['bundle.json', 'solo.bundle.json'],
    directory: { groups },
    policy: { rules: [{ effect: 'allow' }] },
    attestations: [
      { namespace: e2eNamespace, exclusivePeerPublishers: true },
      { namespace: soloNamespace, exclusivePeerPublishers: true },
    ],
    deployment: { account: 'test', system: 'convoke', domain: 'nats-deployment' },
    http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 65536, waitMsMax: 10_000, principals: [{ principalId: 'web', tokenSha256: 'a'.repeat(64) }] },
  };
}

const rejectsAs = (kind: AdapterError['kind'], pattern: RegExp) => (e: unknown) => isAdapterError(e) && e.kind === kind && pattern.test(e.description ?? '');

describe('NATS deployment', { timeout: 50_000 }, () => {
  let server: NatsServer;
  let dir: string;
  const password = randomBytes(8).toString('hex');
  const env = { [passwordVariableOf('coordinator')]: password };
  const bundle = e2eBundle();
  const contract = loadBundle(bundle).ref;
  const deployments: RunningDeployment[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'convoke-nats-deploy-'));
    await writeFile(join(dir, 'bundle.json'), JSON.stringify(bundle));
    await writeFile(join(dir, 'solo.bundle.json'), JSON.stringify(soloBundle()));
    const users: NatsUser[] = [
      { user: 'coordinator', password },
      { user: 'kilo', password },
    ];
    server = await startNatsServer({ users, jetstream: true });
  });
  after(async () => {
    for (const d of deployments) await d.close().catch(() => undefined);
    await server?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  const parse = (transport: JsonObject, store?: string) => parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(configJson(transport, store))), dir);
  const nats = (extra: JsonObject = {}): JsonObject => ({
    kind: 'nats',
    servers: server.url,
    user: 'coordinator',
    passwordEnv: passwordVariableOf('coordinator'),
    mode: 'durable',
    manageStreams: true,
    ...extra,
  });
  const build = async (transport: JsonObject, options: { log?: (line: string) => void; store?: string } = {}) => {
    const deployment = await buildDeployment(parse(transport, options.store), { clock: new SystemClock(), env, log: options.log ?? (() => {}) });
    deployments.push(deployment);
    return deployment;
  };

  it('the transport config is checked: required fields, mode, durable settings, the password variable', async () => {
    assert.throws(
      () => parse({ kind: 'nats', servers: server.url }),
      (e: unknown) => isAdapterError(e) && /user/.test(e.description ?? '') && /mode/.test(e.description ?? ''),
    );
    assert.throws(() => parse(nats({ password: 'inline-secret' })), rejectsAs('invalid-input', /password/));
    const core = { clock: new SystemClock(), env };
    await assert.rejects(
      buildDeployment(parse(nats({ mode: 'core', durable: { maxDeliver: 3 } })), core),
      rejectsAs('invalid-input', /only for mode "durable"/),
    );
    await assert.rejects(
      buildDeployment(parse(nats()), { clock: new SystemClock(), env: {} }),
      rejectsAs('invalid-input', /CONVOKE_NATS_PASSWORD_COORDINATOR.*not set/),
    );
    // No password variable is the CLI's to fill (serve --creds, a context's login); without one it is named.
    await assert.rejects(
      buildDeployment(parse(nats({ passwordEnv: undefined as unknown as string })), core),
      rejectsAs(
        'invalid-input',
        /transport\.passwordEnv or transport\.credsFile is needed \(or give convoke serve --creds, or a context with a password or credentials\)/,
      ),
    );
  });

  it('an unconsumed message is never evicted: a byte cap is refused (nats-server 2.9 evicts a stored message at the byte boundary, even under discard new)', async () => {
    await assert.rejects(build(nats({ durable: { maxBytes: 1_000_000 } })), rejectsAs('invalid-input', /maxBytes is not supported: nats-server 2\.9 evicts/));
  });

  it('durable mode refuses to start when the duplicate window does not cover deadline + settlement grace of every interaction', async () => {
    // e2eBundle: timeoutMs 15000 + max(settlementGraceMs 5000, cancelTimeoutMs 5000) = 20000.
    await assert.rejects(
      build(nats({ durable: { duplicateWindowMs: 19_999 } })),
      (e: unknown) =>
        isAdapterError(e) && e.kind === 'invalid-input' && /does not cover e2e\.review\/first/.test(e.description ?? '') && /= 20000/.test(e.description ?? ''),
    );
  });

  it("durable mode provisions every known peer's consumers and its own durable result paths", async () => {
    const deployment = await build(nats({ durable: { duplicateWindowMs: 20_000 } }));
    assert.deepEqual(deployment.nats?.peers.get(e2eNamespace), ['alfa', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot']);
    assert.deepEqual(deployment.nats?.peers.get(soloNamespace), ['kilo']);
    const nc = await connectNats({ servers: server.url, user: 'coordinator', pass: password, inboxPrefix: inboxPrefixFor('coord', 'coordinator') });
    try {
      const jsm = await jetstreamManager(nc, { checkAPI: false });
      for (const peer of ['alfa', 'foxtrot']) {
        const { requests, results } = durableStreamNames(e2eNamespace, peer);
        assert.equal((await jsm.streams.info(requests)).config.duplicate_window, msToNanos(20_000));
        const info = await jsm.consumers.info(requests, peerConsumerName(peer, 'request'));
        assert.equal(info.config.filter_subject, peerConsumerFilter(e2eNamespace, peer, 'request'));
        await jsm.consumers.info(requests, peerConsumerName(peer, 'cancel'));
        for (const kind of ['result', 'claim', 'cancel-result'] as const) {
          assert.equal(
            (await jsm.consumers.info(results, coordinatorConsumerName('coordinator', kind))).config.filter_subject,
            `${e2eNamespace}.*.*.${kind}.${peer}`,
          );
        }
      }
    } finally {
      await nc.close();
      await deployment.close();
    }
  });

  it('admissions are refused with unavailable while durability is not proven, and resume when it is; operations open when the guarantee broke close as indeterminate', async () => {
    const lines: string[] = [];
    const deployment = await build(nats({ durabilityCheckIntervalMs: 60_000 }), { log: (line) => lines.push(line), store: 'sqlite:gate.db' });
    const request = (key: string) => ({ contract, interaction: 'allok', invocationKey: key, input: { document: 'd' } });
    assert.equal(deployment.nats?.admissionProblem(), undefined);
    const admitted = await deployment.coordinator.invoke(caller, request('before'));
    const { requests } = durableStreamNames(e2eNamespace, 'alfa');
    const admin = await connectNats({ servers: server.url, user: 'coordinator', pass: password, inboxPrefix: inboxPrefixFor('coord', 'coordinator') });
    const jsm = await jetstreamManager(admin, { checkAPI: false });
    const config = (await jsm.streams.info(requests)).config;
    // Someone shrinks the requests stream's duplicate window: continuity can no longer be proven.
    await jsm.streams.update(requests, { ...config, duplicate_window: msToNanos(1_000) });
    await deployment.nats!.checkNow();
    assert.match(deployment.nats!.admissionProblem() ?? '', /duplicate window/);
    await assert.rejects(
      deployment.coordinator.invoke(caller, request('during')),
      rejectsAs('unavailable', /durable delivery is not proven.*duplicate window/),
    );
    // An admitted operation is still readable, and its retry is the same operation, not a new admission.
    assert.equal((await deployment.coordinator.invoke(caller, request('before'))).result.operationId, admitted.result.operationId);
    // It was open (no peer answers here) when the guarantee broke: its evidence can no longer be
    // proven complete, so it closed as indeterminate, its unfinished branches detached.
    const lost = await deployment.coordinator.get('billing', admitted.result.operationId);
    assert.deepEqual(
      [lost.decision?.outcome, lost.decision?.reason, lost.settlement.status, lost.phase],
      ['indeterminate', 'durability-lost', 'indeterminate', 'settled'],
      JSON.stringify(lost),
    );
    assert.ok(lost.settlement.siblings.length === 3 && lost.settlement.siblings.every((s) => s.disposition === 'detached'));
    const log = await deployment.store.read(admitted.result.operationId);
    assert.ok(log.kind === 'ok');
    assert.deepEqual(fold(log.transitions), await deployment.coordinator.record(admitted.result.operationId), 'replay equals the live record');
    await jsm.streams.update(requests, { ...config });
    await deployment.nats!.checkNow();
    assert.equal(deployment.nats!.admissionProblem(), undefined);
    await deployment.coordinator.invoke(caller, request('during'));
    assert.deepEqual((await deployment.coordinator.get('billing', admitted.result.operationId)).decision, lost.decision, 'a closed decision never changes');
    assert.ok(lines.some((l) => /durability NOT proven/.test(l)) && lines.some((l) => /durability proven again/.test(l)), lines.join('\n'));
    assert.ok(
      lines.some((l) => /1 open operation\(s\) closed as indeterminate/.test(l)),
      lines.join('\n'),
    );
    await admin.close();
    await deployment.close();
  });

  it('the peer SDK on a connection: createNatsPeer binds the provisioned durable consumers, commits its effect once and answers', async () => {
    const deployment = await build(nats(), { store: 'sqlite:sdk.db' });
    const kiloNc = await connectNats({ servers: server.url, user: 'kilo', pass: password });
    const waiting: string[] = [];
    let effects = 0;
    const peer = await createNatsPeer({
      nc: kiloNc,
      namespace: soloNamespace,
      peerId: 'kilo',
      durable: true,
      onWaiting: (message) => waiting.push(message),
      handlers: { solo: (_input, context) => context.effect(() => (++effects, { verdict: 'approve' })) },
    });
    try {
      const solo = loadBundle(soloBundle()).ref;
      const { result } = await deployment.coordinator.invoke(caller, { contract: solo, interaction: 'solo', invocationKey: 'sdk', input: { document: 'd' } });
      const waited = await deployment.coordinator.wait('billing', result.operationId, 'decision', 10_000);
      assert.equal(waited.result.decision?.outcome, 'success', JSON.stringify(waited.result));
      assert.deepEqual(
        waited.result.branches.map((b) => [b.peerId, b.status, b.result]),
        [['kilo', 'success', { verdict: 'approve' }]],
      );
      assert.equal(effects, 1);
      assert.equal(peer.stats.handled, 1);
      assert.deepEqual(waiting, [], 'the consumers were already provisioned');
    } finally {
      await peer.close();
      assert.ok(!kiloNc.isClosed(), "the connection stays the caller's");
      await kiloNc.close();
      await deployment.close();
    }
  });

  it('a request that exhausts its deliveries is recorded as a failed attempt of its branch', async () => {
    const deployment = await build(nats({ durable: { maxDeliver: 2, ackWaitMs: 1_000 } }), { store: 'sqlite:exhaust.db' });
    // kilo is a single-peer audience: its (hand-driven) consumer refuses every delivery.
    const kiloNc = await connectNats({ servers: server.url, user: 'kilo', pass: password });
    const kilo = new NatsTransport(kiloNc, {
      identity: 'kilo',
      durable: { namespace: soloNamespace, peers: ['kilo'], duplicateWindowMs: 1, maxDeliver: 2, ackWaitMs: 1_000 },
    });
    // Subjects, not a count: an earlier test's request whose ack was still in flight when its peer
    // closed is redelivered here (a lost ack costs one redelivery), and is not this operation's.
    const delivered: string[] = [];
    await kilo.subscribe(peerConsumerFilter(soloNamespace, 'kilo', 'request'), (m) => void (delivered.push(m.subject), m.nak()), {
      durable: peerConsumerName('kilo', 'request'),
    });
    try {
      const solo = loadBundle(soloBundle()).ref;
      const { result } = await deployment.coordinator.invoke(caller, {
        contract: solo,
        interaction: 'solo',
        invocationKey: 'exhaust',
        input: { document: 'd' },
      });
      const waited = await deployment.coordinator.wait('billing', result.operationId, 'decision', 10_000);
      assert.equal(waited.result.decision?.outcome, 'failed', JSON.stringify(waited.result));
      assert.equal(delivered.filter((subject) => subject.includes(`.${result.operationId}.`)).length, 2, delivered.join('\n'));
      assert.equal(waited.result.branches[0]?.status, 'failure');
      const read = await deployment.store.read(result.operationId);
      assert.equal(read.kind, 'ok');
      const events = read.kind === 'ok' ? read.transitions.flatMap((t) => t.transition.events) : [];
      assert.ok(
        events.some((e) => e.type === 'claim-ended' && e.cause === 'delivery-exhausted'),
        JSON.stringify(events.map((e) => e.type)),
      );
    } finally {
      await kilo.close();
      await kiloNc.close();
      await deployment.close();
    }
  });

  it('the committed examples are valid and nats-server.conf is what the code renders', async () => {
    const examples = join(repoRoot(), 'examples');
    const config = await readDeploymentConfig(join(examples, 'serve.nats-durable.json'));
    const compiled = await Promise.all(config.bundles.map(async (file) => loadBundle(parseStrictBytes(await readFile(file), file))));
    const rendered = renderNatsServerConfig(natsPlanFor(config, compiled, ['billing']), {
      host: '127.0.0.1',
      port: 14222,
      storeDir: '/tmp/convoke-example/jetstream',
    });
    assert.equal(await readFile(join(examples, 'nats-server.conf'), 'utf8'), rendered);
    for (const peer of ['alfa', 'bravo']) {
      const peerConfig = await readPeerConfig(join(examples, `peer.${peer}.json`));
      assert.equal(peerConfig.namespace, compiled[0]!.bundle.subjectNamespace);
      assert.equal(dirname(peerConfig.effectSink!.slice('sqlite:'.length)), '/tmp/convoke-example');
    }
    assert.ok(!/password\s*[:=]\s*"/.test(rendered), 'no literal password in the rendered config');
  });
});
