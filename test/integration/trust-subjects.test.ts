/**
 * docs/design.md §10 on a real nats-server with real permissions: a peer message is evidence only for the
 * subject it arrived on. Two bundles in two namespaces share one coordinator; namespace A is
 * attested peer-exclusive, namespace B has an operator (`ops-b`, allowed to publish anywhere in B)
 * that is an unattested exception there. Whatever that operator publishes on B's subjects must not
 * count for an operation of A, even when it names A's operation id; and a peer's message on
 * another interaction's subjects of its own namespace must not count for this interaction's
 * operation. Both are `wrong-subject`, counted in the rejections metric.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadBundle } from '../../src/contract/bundle.js';
import type { JsonObject } from '../../src/contract/json.js';
import { connectNats, type NatsConnection } from '../../src/adapters/transport/nats.js';
import { inboxPrefixFor } from '../../src/adapters/transport/nats-names.js';
import { subjectFor, type SubjectKind } from '../../src/adapters/transport/subjects.js';
import { SystemClock } from '../../src/contract/clock.js';
import { buildDeployment, parseDeploymentConfig } from '../../src/deployment/config.js';
import type { RunningDeployment } from '../../src/deployment/types.js';
import { natsPrincipalPlan, passwordVariableOf } from '../../src/deployment/nats/permissions.js';
import { branchList } from '../../src/projections/record.js';
import { startNatsServer, type NatsServer, type NatsUser } from '../support/nats-server.js';
import { approve, e2eBundle, e2eNamespace, eventually } from '../support/nats-deployment-fixture.js';

const namespaceB = 'trust.v1.b';
const reviewers = ['alfa', 'bravo', 'charlie'];
/** The e2e bundle's `manual` interaction names these peers itself; each has its own durable streams, so each needs a user. */
const manualPeers = ['delta', 'echo', 'foxtrot'];
const caller = { principalId: 'billing', senderPeerId: null };

/** Namespace B: one interaction served by kilo. */
function bundleB(): JsonObject {
  const base = e2eBundle();
  const allok = (base.interactions as Record<string, JsonObject>).allok!;
  return {
    ...base,
    contract: { id: 'trust.b', version: '1.0.0' },
    subjectNamespace: namespaceB,
    interactions: { solo: { ...allok, audience: { peers: ['kilo'] } } },
  };
}

function users(passwords: Map<string, string>): NatsUser[] {
  const plan = natsPrincipalPlan({
    namespaces: [e2eNamespace, namespaceB],
    coordinator: { user: 'coordinator', coordinatorId: 'coordinator', manageStreams: true },
    peers: { ...Object.fromEntries([...reviewers, ...manualPeers].map((p) => [p, [e2eNamespace]])), kilo: [namespaceB] },
    commandClients: [],
  });
  const convoke = plan.map((p) => ({ user: p.user, password: passwords.get(p.user)!, publish: p.permissions.publish, subscribe: p.permissions.subscribe }));
  // Namespace B's operator: may publish anything in B, nothing in A.
  return [...convoke, { user: 'ops-b', password: passwords.get('ops-b')!, publish: [`${namespaceB}.>`], subscribe: ['_INBOX.ops-b.>'] }];
}

describe('peer messages are evidence only for the subject they arrived on (real nats-server permissions)', { timeout: 90_000 }, () => {
  let server: NatsServer;
  let dir: string;
  const passwords = new Map<string, string>(['coordinator', ...reviewers, ...manualPeers, 'kilo', 'ops-b'].map((u) => [u, randomBytes(8).toString('hex')]));
  const env = Object.fromEntries([...passwords].map(([u, p]) => [passwordVariableOf(u), p]));
  const contractA = loadBundle(e2eBundle()).ref;
  const open: { close(): Promise<unknown> }[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'convoke-trust-subjects-'));
    await writeFile(join(dir, 'a.bundle.json'), JSON.stringify(e2eBundle()));
    await writeFile(join(dir, 'b.bundle.json'), JSON.stringify(bundleB()));
    server = await startNatsServer({ users: users(passwords), jetstream: true });
  });
  after(async () => {
    for (const c of open.reverse()) await c.close().catch(() => undefined);
    await server?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  async function deploy(mode: 'core' | 'durable'): Promise<RunningDeployment> {
    const config: JsonObject = {
      store: 'memory:',
      transport: {
        kind: 'nats',
        servers: server.url,
        user: 'coordinator',
        passwordEnv: passwordVariableOf('coordinator'),
        mode,
        manageStreams: true,
        ...(mode === 'durable' ? { durable: { duplicateWindowMs: 20_000 } } : {}),
      },
      bundles: ['a.bundle.json', 'b.bundle.json'],
      directory: { groups: { reviewers } },
      policy: { rules: [{ effect: 'allow' }] },
      attestations: [
        { namespace: e2eNamespace, exclusivePeerPublishers: true },
        { namespace: namespaceB, exclusivePeerPublishers: true, exceptions: [{ principal: 'ops-b', attested: false, note: 'publishes anywhere in B' }] },
      ],
      deployment: { account: 'test', system: 'convoke', domain: 'trust-subjects' },
      http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 65536, waitMsMax: 10_000, principals: [{ principalId: 'web', tokenSha256: 'a'.repeat(64) }] },
      resultBatchMs: 0,
    };
    return buildDeployment(parseDeploymentConfig(new TextEncoder().encode(JSON.stringify(config)), dir), { clock: new SystemClock(), env, log: () => {} });
  }

  async function as(user: string): Promise<NatsConnection> {
    const inboxPrefix = user === 'ops-b' ? '_INBOX.ops-b' : inboxPrefixFor('peer', user);
    const nc = await connectNats({ servers: server.url, user, pass: passwords.get(user)!, inboxPrefix });
    open.push(nc);
    return nc;
  }

  async function publish(nc: NatsConnection, subject: string, body: JsonObject): Promise<void> {
    nc.publish(subject, new TextEncoder().encode(JSON.stringify(body)));
    await nc.flush();
  }

  async function rejected(deployment: RunningDeployment, reason: string): Promise<number> {
    const metric = await deployment.coordinator.metrics.rejections.get();
    return metric.values.find((v) => v.labels.reason === reason)?.value ?? 0;
  }

  const message = (kind: SubjectKind, operationId: string, peerId: string, extra: JsonObject): JsonObject => ({
    kind,
    operationId,
    branchId: peerId,
    peerId,
    attempt: 1,
    fence: 1,
    ...extra,
  });

  for (const mode of ['core', 'durable'] as const) {
    it(`${mode}: results, claims and cancel results for an operation of namespace A published on namespace B's subjects are wrong-subject, whatever B's publisher names`, async () => {
      const deployment = await deploy(mode);
      try {
        const { result } = await deployment.coordinator.invoke(caller, {
          contract: contractA,
          interaction: 'first',
          invocationKey: `k-${mode}-a`,
          input: { document: 'd' },
        });
        const op = result.operationId;
        const opsB = await as('ops-b');
        // In durable mode B's streams capture only the subjects of B's own peers (kilo): a
        // message on `<B>.….alfa` is stored nowhere and reaches no coordinator, so the forgery
        // that can arrive is one on kilo's subjects naming A's peers in its payload.
        const via = (peerId: string): string => (mode === 'durable' ? 'kilo' : peerId);
        // B's operator names A's operation on B's own subjects: a vote that would close A's
        // first-success decision, and a release that would end bravo's claim.
        await publish(opsB, subjectFor(namespaceB, 'solo', op, 'result', via('alfa')), message('result', op, 'alfa', { result: approve }));
        await publish(opsB, subjectFor(namespaceB, 'solo', op, 'claim', via('bravo')), message('claim', op, 'bravo', { action: 'release' }));
        await eventually(async () => (await rejected(deployment, 'wrong-subject')) === 2, 'two wrong-subject rejections');
        let record = (await deployment.coordinator.record(op))!;
        assert.equal(record.decision, null, "a message on B's subjects closes nothing in A");
        assert.deepEqual(
          branchList(record).map((b) => [b.branchId, b.accepted, b.attempt, b.state === 'assigned' || b.state === 'dispatched']),
          reviewers.map((p) => [p, null, 1, true]),
        );
        // The genuine peer on A's own subject is admitted and closes the decision; bravo and charlie are cancelled.
        await publish(await as('alfa'), subjectFor(e2eNamespace, 'first', op, 'result', 'alfa'), message('result', op, 'alfa', { result: approve }));
        await eventually(async () => (await deployment.coordinator.record(op))?.decision?.outcome === 'success', "the decision from alfa's own result");
        await publish(opsB, subjectFor(namespaceB, 'solo', op, 'cancel-result', via('bravo')), message('cancel-result', op, 'bravo', { outcome: 'stopped' }));
        await eventually(async () => (await rejected(deployment, 'wrong-subject')) === 3, 'the third wrong-subject rejection');
        record = (await deployment.coordinator.record(op))!;
        assert.deepEqual(
          branchList(record).map((b) => [b.branchId, b.cancelOutcome]),
          [
            ['alfa', null],
            ['bravo', null],
            ['charlie', null],
          ],
        );
        assert.equal(await rejected(deployment, 'unverified-publisher'), 0);
      } finally {
        await deployment.close();
      }
    });
  }

  it("a peer's result on another interaction's subject of its own namespace is wrong-subject for this interaction's operation", async () => {
    const deployment = await deploy('core');
    try {
      const { result } = await deployment.coordinator.invoke(caller, {
        contract: contractA,
        interaction: 'allok',
        invocationKey: 'k-interaction',
        input: { document: 'd' },
      });
      const op = result.operationId;
      const alfa = await as('alfa');
      // alfa may publish `<A>.*.*.result.alfa`: the broker lets this through, the coordinator must not count it for allok.
      await publish(alfa, subjectFor(e2eNamespace, 'quorum', op, 'result', 'alfa'), message('result', op, 'alfa', { result: approve }));
      await eventually(async () => (await rejected(deployment, 'wrong-subject')) === 1, 'the wrong-subject rejection');
      assert.equal((await deployment.coordinator.record(op))!.branches.alfa!.accepted, null);
      await publish(alfa, subjectFor(e2eNamespace, 'allok', op, 'result', 'alfa'), message('result', op, 'alfa', { result: approve }));
      await eventually(async () => (await deployment.coordinator.record(op))!.branches.alfa!.accepted !== null, "alfa's result on its own subject");
      assert.equal(await rejected(deployment, 'wrong-subject'), 1);
    } finally {
      await deployment.close();
    }
  });
});
