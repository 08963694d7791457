/**
 * End to end over a real nats-server with an auth config: `convoke serve` (child process) on NATS,
 * separate `convoke peer` processes, and callers on the NATS command API — in durable mode
 * (JetStream streams and consumers, jetstream store) and core mode (sqlite store). Every completion
 * mode decides as its rule says; a forged result is not counted: a peer user publishing another
 * peer's result subject is refused by the server, and a result whose payload names another peer
 * is rejected and recorded in the operation's log.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { errors, type NatsConnection } from '@nats-io/transport-node';
import { encodeWire, type ResultMessage } from '../../src/events/wire.js';
import type { ResultRejected } from '../../src/events/types.js';
import { connectNats } from '../../src/adapters/transport/nats.js';
import { coordinatorConsumerName, inboxPrefixFor, peerConsumerName } from '../../src/adapters/transport/nats-names.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { passwordVariableOf } from '../../src/deployment/nats/permissions.js';
import { checkResultShape } from '../../src/http/schemas.js';
import {
  deploymentForSuite,
  e2eBundle,
  e2eNamespace,
  eventually,
  resultOf,
  reviewerPeers,
  reviewerSpec,
  spawnCli,
} from '../support/nats-deployment-fixture.js';

const reviewers = ['alfa', 'bravo', 'charlie'];
/** A generous bound on the whole file, not a rule: both deployments start and run their tests at once. */
const fileTimeoutMs = 150_000;

/**
 * In first-success, a slow sibling holds its approval far longer than any test runs, so only the
 * cancel ends its wait: with a short delay, a loaded machine could let it answer first or before
 * the cancel reached it. And the cancel has far longer to be answered than it takes.
 */
const untilCancelledMs = 120_000;
const cancelTimeoutMs = 30_000;

function peers() {
  const specs = reviewerPeers(reviewers);
  for (const peer of reviewers) specs[peer]!.interactions.first = reviewerSpec(peer, untilCancelledMs);
  return specs;
}

const modes = [
  { mode: 'durable', store: 'jetstream' },
  { mode: 'core', store: 'sqlite' },
] as const;

describe('NATS end to end', { concurrency: true, timeout: fileTimeoutMs }, () => {
  for (const { mode, store } of modes) {
    describe(`${mode} mode, ${store} store`, () => {
      const deployment = deploymentForSuite(
        { mode, store, bundle: e2eBundle({ cancelTimeoutMs }), groups: { reviewers }, peers: peers(), commandClients: ['billing', 'mallory'] },
        {
          client: 'billing',
          // Durable peers wait for the coordinator to provision their consumers: start everything at once.
          startUp: (f) => Promise.all([f.startServe(), f.startPeers()]),
          beforeDispose: (f) => {
            const stderr = f.serve?.stderr() ?? '';
            // Nothing the server reported to the coordinator's connection (permission violations are
            // reported there, not to the call), and no internal error.
            assert.doesNotMatch(stderr, /NATS: |internal error/);
            // Its log is JSON lines, and no NATS password of the deployment (each principal's, the admin's) is in it.
            for (const line of stderr.split('\n').filter((l) => l !== '')) assert.doesNotThrow(() => JSON.parse(line), line);
            for (const secret of [...Object.values(f.env()), f.adminSecret()])
              if (secret !== '') assert.ok(!stderr.includes(secret), 'a password in the serve log');
          },
        },
      );

      it('first-success: the first approval decides; cancelled siblings answer stopped and settlement completes', async () => {
        const r = resultOf(await deployment.client.invoke('first', { document: 'd', slow: ['bravo', 'charlie'] }, { waitFor: 'settled', waitMs: 30_000 }));
        assert.ok(checkResultShape(r));
        assert.equal(r.decision?.outcome, 'success');
        assert.equal(r.decision?.reason, 'threshold');
        assert.deepEqual([r.decision?.successVotes, r.decision?.threshold], [1, 1]);
        assert.equal(r.branches.find((b) => b.peerId === 'alfa')?.status, 'success');
        assert.equal(r.settlement.status, 'complete');
        assert.deepEqual(r.settlement.siblings.map((s) => [s.branchId, s.disposition, s.outcome]).sort(), [
          ['bravo', 'cancel-requested', 'stopped'],
          ['charlie', 'cancel-requested', 'stopped'],
        ]);
      });

      it('quorum count 2 of 3: two approvals decide success, the rejection stays a failure', async () => {
        const reply = await deployment.client.invoke('quorum', { document: 'd', rejectBy: ['charlie'], slow: ['charlie'] });
        assert.equal(reply.status, 200);
        const r = resultOf(reply);
        assert.equal(r.decision?.outcome, 'success');
        assert.deepEqual([r.decision?.successVotes, r.decision?.threshold, r.decision?.units], [2, 2, 3]);
      });

      it('quorum fraction 2/3 of 3: two rejections make it impossible and it fails before the deadline', async () => {
        const r = resultOf(await deployment.client.invoke('fraction', { document: 'd', rejectBy: ['alfa', 'bravo'] }));
        assert.equal(r.decision?.outcome, 'failed');
        assert.equal(r.decision?.reason, 'impossible');
        assert.equal(r.decision?.threshold, 2);
        assert.ok(r.decision!.closedAtMs < r.deadlineMs);
      });

      it('all-successful: every unit approves, three votes', async () => {
        const r = resultOf(await deployment.client.invoke('allok', { document: 'd' }));
        assert.equal(r.decision?.outcome, 'success');
        assert.deepEqual([r.decision?.successVotes, r.decision?.failedUnits, r.decision?.units], [3, 0, 3]);
        assert.deepEqual(r.output, { counts: { approve: 3 }, total: 3 });
      });

      it('all-terminal: complete collection succeeds and keeps the business failure', async () => {
        const r = resultOf(await deployment.client.invoke('allterm', { document: 'd', rejectBy: ['bravo'] }));
        assert.equal(r.decision?.outcome, 'success');
        assert.equal(r.decision?.reason, 'complete');
        assert.deepEqual([r.decision?.successVotes, r.decision?.failedUnits], [2, 1]);
        assert.equal(r.branches.find((b) => b.peerId === 'bravo')?.status, 'failure');
        assert.deepEqual(r.output, { counts: { approve: 2, reject: 1 }, total: 3 });
      });

      it('the command API: idempotent retry, conflict on a different input, 404 to another principal, strict bodies', async () => {
        const key = `idem-${mode}`;
        const first = resultOf(await deployment.client.invoke('allok', { document: 'same' }, { key }));
        const again = resultOf(await deployment.client.invoke('allok', { document: 'same' }, { key }));
        assert.equal(again.operationId, first.operationId);
        const conflicting = await deployment.client.invoke('allok', { document: 'other' }, { key });
        assert.equal(conflicting.status, 409);
        const mallory = await deployment.fixture.client('mallory');
        assert.equal((await mallory.get(first.operationId, { waitMs: 0 })).status, 404);
        assert.equal((await deployment.client.get(first.operationId, { waitMs: 0 })).status, 200);
        const duplicateKeys = new TextEncoder().encode('{"operationId":"x","operationId":"y"}');
        const raw = await deployment.client.transport.request('convoke.cmd.billing.get', duplicateKeys, 5_000);
        assert.equal(JSON.parse(new TextDecoder().decode(raw)).status, 400);
        assert.equal((await deployment.client.send('get', { operationId: first.operationId, waitMs: '5' })).status, 400);
        assert.equal((await deployment.client.send('cancel', { operationId: first.operationId })).status, 422); // no caller cancellation declared
      });

      it('a command principal cannot speak for another: its user may publish only convoke.cmd.<itself>.>', async () => {
        const mallory = await deployment.fixture.client('mallory');
        await assert.rejects(
          mallory.transport.request('convoke.cmd.billing.get', new TextEncoder().encode('{"operationId":"x"}'), 2_000),
          (e: unknown) => (e as { kind?: string }).kind === 'denied',
        );
      });

      it("a command whose reply names another principal's inbox is neither run nor answered", async () => {
        const connect = (user: string) =>
          connectNats({
            servers: deployment.fixture.url,
            user,
            pass: deployment.fixture.env()[passwordVariableOf(user)],
            inboxPrefix: inboxPrefixFor('cmd', user),
          });
        const [billingConnection, malloryConnection] = await Promise.all([connect('billing'), connect('mallory')]);
        try {
          const trap = `${inboxPrefixFor('cmd', 'billing')}.trap`;
          const delivered: string[] = [];
          billingConnection.subscribe(trap, { callback: (_e, m) => void delivered.push(m.string()) });
          await billingConnection.flush();
          const key = `misaddressed-${mode}`;
          const body = { contract: deployment.fixture.contract, interaction: 'allok', invocationKey: key, input: { document: 'first' }, waitMs: 0 };
          malloryConnection.publish('convoke.cmd.mallory.invoke', JSON.stringify(body), { reply: trap });
          await malloryConnection.flush();
          await new Promise((r) => setTimeout(r, 300));
          assert.deepEqual(delivered, []);
          // Nothing was admitted under the key: a different input is a new operation, not a 409.
          const mallory = await deployment.fixture.client('mallory');
          const reply = await mallory.invoke('allok', { document: 'second' }, { key });
          assert.equal(resultOf(reply).decision?.outcome, 'success');
        } finally {
          await Promise.all([billingConnection.close(), malloryConnection.close()]);
        }
      });

      it('`convoke invoke` prints the InvocationResult (JSON) from a separate process', async () => {
        const args = [
          'invoke',
          '--nats',
          deployment.fixture.url,
          '--user',
          'billing',
          '--password-env',
          passwordVariableOf('billing'),
          '--contract',
          `${deployment.fixture.dir}/bundle.json`,
          '--interaction',
          'quorum',
          '--key',
          `cli-${mode}`,
          '--input',
          '{"document":"cli"}',
          '--wait-ms',
          '10000',
          '--json',
        ];
        const cli = spawnCli(args, deployment.fixture.env());
        const { code } = await cli.exited;
        assert.equal(code, 0, cli.output());
        const reply = JSON.parse(cli.output()) as { status: number; result: { decision: { outcome: string } } };
        assert.equal(reply.status, 200);
        assert.equal(reply.result.decision.outcome, 'success');
      });

      it(
        'durable resources: peers bound their provisioned consumers; every result is acknowledged after its append',
        { skip: mode !== 'durable' ? 'core mode keeps no durable resources' : false },
        async () => {
          const jsm = await jetstreamManager(await deployment.fixture.adminConnection());
          // The other tests of this suite run concurrently: wait until their traffic has gone through.
          await eventually(
            async () => {
              const peers = await Promise.all(
                reviewers.map((peer) => jsm.consumers.info(deployment.fixture.streams(peer).requests, peerConsumerName(peer, 'request'))),
              );
              const coordinator = await Promise.all(
                reviewers.map((peer) => jsm.consumers.info(deployment.fixture.streams(peer).results, coordinatorConsumerName('coordinator', 'result'))),
              );
              return (
                peers.every((p) => p.delivered.consumer_seq > 0) &&
                coordinator.every((c) => c.delivered.consumer_seq > 0 && c.num_pending === 0 && c.num_ack_pending === 0)
              );
            },
            'every peer pulling its requests, every result delivered to the coordinator and acknowledged',
            20_000,
          );
          // The JetStream store's appends learn their server stamps from its feed, and /metrics says so.
          const text = await (await fetch(`${deployment.fixture.serve!.url}/metrics`)).text();
          const fed = Number(/^convoke_store_stamps_total\{source="fed"\} (\d+)$/m.exec(text)?.[1]);
          assert.ok(
            fed > 0,
            `stamps from the feed: ${text
              .split('\n')
              .filter((l) => l.startsWith('convoke_store_stamps'))
              .join(' | ')}`,
          );
        },
      );

      it("a forged result is not counted: refused by the server on another peer's subject, rejected and recorded when the payload names another peer", async () => {
        // bravo (slowly) rejects; all-successful would succeed only if a forged approval for bravo counted.
        const pending = resultOf(await deployment.client.invoke('forge', { document: 'd', slowReject: ['bravo'] }, { waitMs: 0 }));
        const op = pending.operationId;
        const forged: ResultMessage = {
          kind: 'result',
          operationId: op,
          branchId: 'bravo',
          peerId: 'bravo',
          attempt: 1,
          fence: 1,
          result: { verdict: 'approve' },
        };
        // 1. alfa's user publishes on bravo's result subject: the server refuses it.
        const alfaNc = await connectNats({
          servers: deployment.fixture.url,
          user: 'alfa',
          pass: deployment.fixture.password('alfa'),
          inboxPrefix: inboxPrefixFor('peer', 'alfa'),
        });
        try {
          const violations = permissionViolations(alfaNc);
          const bravoSubject = subjectFor(e2eNamespace, 'forge', op, 'result', 'bravo');
          alfaNc.publish(bravoSubject, encodeWire(forged));
          await eventually(() => violations.includes(bravoSubject), 'the server refusing alfa on result.bravo');
        } finally {
          await alfaNc.close();
        }
        const alfa = await deployment.fixture.peerTransport('alfa');
        if (mode === 'durable') {
          const receipt = await alfa.publish(subjectFor(e2eNamespace, 'forge', op, 'result', 'bravo'), encodeWire(forged), { msgId: `forged-${op}` });
          assert.equal(receipt.receipt, 'rejected', receipt.detail);
        }
        // 2. alfa publishes on its own subject a payload claiming to be bravo: verification rejects it.
        const ownSubject = subjectFor(e2eNamespace, 'forge', op, 'result', 'alfa');
        assert.notEqual((await alfa.publish(ownSubject, encodeWire(forged), { msgId: `forged-own-${op}` })).receipt, 'rejected');
        const r = resultOf(await deployment.client.get(op, { waitMs: 15_000 }));
        assert.equal(r.decision?.outcome, 'failed');
        assert.deepEqual([r.decision?.successVotes, r.decision?.failedUnits], [2, 1]);
        assert.deepEqual(r.branches.find((b) => b.branchId === 'bravo')?.result, { verdict: 'reject' });
        const rejected = (await deployment.fixture.log(op))
          .flatMap((t) => t.transition.events)
          .filter((e): e is ResultRejected => e.type === 'result-rejected');
        assert.ok(
          rejected.some((e) => e.reason === 'wrong-peer' && e.subject === ownSubject && e.branchId === 'bravo'),
          `a wrong-peer rejection of ${ownSubject} is recorded: ${JSON.stringify(rejected)}`,
        );
      });
    });
  }
});

function permissionViolations(nc: NatsConnection): string[] {
  const subjects: string[] = [];
  void (async () => {
    for await (const s of nc.status())
      if (s.type === 'error' && s.error instanceof errors.PermissionViolationError && s.error.operation === 'publish') subjects.push(s.error.subject);
  })();
  return subjects;
}
