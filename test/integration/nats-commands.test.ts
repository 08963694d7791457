/**
 * The NATS command server's gates, on a real nats-server (core NATS, memory store, no peers
 * answering): a command whose principal token is no convoke id is refused without ever being
 * answered into an inbox the deployment's rule does not prove is its own, and is counted and told;
 * a bug is answered 500 in the words of the command's own subject matter; a principal holds at
 * most its bound of waits (operation and workflow instance commands share one bound) while another
 * principal still waits in full, and a command sent with no reply subject holds none; closing the
 * server answers every held wait at once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { MemoryEventStore } from '../../src/adapters/store/memory.js';
import { StaticDirectory } from '../../src/adapters/directory/static.js';
import { StaticPolicy } from '../../src/adapters/policy/static.js';
import { SubjectNamespaceVerifier } from '../../src/adapters/verification/subject.js';
import { NatsTransport } from '../../src/adapters/transport/nats.js';
import { inboxPrefixFor } from '../../src/adapters/transport/nats-names.js';
import { BundleRegistry, loadBundle } from '../../src/contract/bundle.js';
import { SystemClock } from '../../src/contract/clock.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { Coordinator } from '../../src/runtime/coordinator.js';
import { sendCommand, sendListCommand, startCommandServer, type CommandServerOptions } from '../../src/nats-api/commands.js';
import { sendWorkflowCommand, sendWorkflowList } from '../../src/nats-api/workflow-commands.js';
import type { WorkflowInstance, WorkflowInstanceService } from '../../src/runtime/workflow-service.js';
import { eventually } from '../support/nats-deployment-fixture.js';
import { startNatsServer, type NatsServer } from '../support/nats-server.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const encoder = new TextEncoder();
const bundleRef = { id: 'lab.review', version: '1.0.0', digest: `sha256:${'4'.repeat(64)}` };

/** A running workflow instance, as the stand-in instance service answers it. */
function runningInstance(instanceId: string): WorkflowInstance {
  return {
    instanceId,
    bundle: bundleRef,
    workflow: 'held',
    invocationKey: 'k',
    status: 'running',
    currentTask: null,
    stages: [],
    output: null,
    error: null,
    cancellation: 'none',
    startedAtMs: 1,
    endedAtMs: null,
    parent: null,
    childInstances: [],
  };
}

/**
 * An instance service whose instances never end: a wait lasts its granted waitMs or until its
 * signal aborts, and each wait is recorded with the waitMs it was granted.
 */
function heldInstances(): { workflows: WorkflowInstanceService; granted: { principalId: string; waitMs: number }[] } {
  const granted: { principalId: string; waitMs: number }[] = [];
  const workflows = {
    get: async (_principalId: string, instanceId: string) => runningInstance(instanceId),
    wait: async (principalId: string, instanceId: string, waitMs: number, signal?: AbortSignal) => {
      granted.push({ principalId, waitMs });
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
      return { instance: runningInstance(instanceId), finished: false };
    },
  } as unknown as WorkflowInstanceService;
  return { workflows, granted };
}

interface Commands {
  /** A connection with no command inbox (its replies go where the test says). */
  nc: NatsConnection;
  /** A command client of `principalId`, connected with its inbox prefix. */
  client(principalId: string): Promise<NatsTransport>;
  coordinator: Coordinator;
  /** The review contract the coordinator runs. */
  contract: ReturnType<typeof loadBundle>['ref'];
  /** Each wait the coordinator was asked for, with the waitMs it was granted (as the stand-in instance service records its own). */
  granted: { principalId: string; waitMs: number }[];
  /** An open operation of `principalId` (its peers never answer, so it stays undecided for the test). */
  open(principalId: string, invocationKey: string): Promise<string>;
  close(): Promise<void>;
  closeServer(): Promise<void>;
  told: { verb: string; principal: string; reason: string }[];
  internal: unknown[];
}

/** A command server on its own connection, a coordinator behind it (review example, peers never answering) and a client on another connection. */
async function commandsOn(server: NatsServer, options: Partial<CommandServerOptions> = {}): Promise<Commands> {
  const serverNc = await connect({ servers: server.url });
  const transport = new NatsTransport(serverNc, { identity: 'coordinator' });
  const nc = await connect({ servers: server.url });
  const clients: { nc: NatsConnection; transport: NatsTransport }[] = [];
  const client = async (principalId: string) => {
    const clientNc = await connect({ servers: server.url, inboxPrefix: inboxPrefixFor('cmd', principalId) });
    const transport = new NatsTransport(clientNc, { identity: principalId });
    clients.push({ nc: clientNc, transport });
    return transport;
  };
  const clock = new SystemClock();
  const bundle = loadBundle(reviewBundle({ completion: { mode: 'all-terminal' }, timeoutMs: 60_000, leaseMs: 60_000 }));
  const bundles = new BundleRegistry();
  bundles.add(bundle);
  const coordinator = new Coordinator({
    store: new MemoryEventStore({ clock }),
    transport,
    directory: new StaticDirectory({ groups: { reviewers: ['alfa', 'bravo'] } }),
    policy: new StaticPolicy({ rules: [{ effect: 'allow' }], ttlMs: 60_000 }, clock),
    verifier: new SubjectNamespaceVerifier([{ namespace: bundle.bundle.subjectNamespace, exclusivePeerPublishers: true }]),
    clock,
    bundles,
    deployment: { account: 'local', system: 'convoke', domain: 'commands' },
    effectFencing: () => false,
    resultBatchMs: 0,
  });
  const granted: Commands['granted'] = [];
  const wait = coordinator.wait.bind(coordinator);
  coordinator.wait = async (principalId, operationId, boundary, waitMs, signal) => {
    granted.push({ principalId, waitMs });
    return wait(principalId, operationId, boundary, waitMs, signal);
  };
  const told: Commands['told'] = [];
  const internal: unknown[] = [];
  const commands = await startCommandServer({
    transport,
    coordinator,
    bundles,
    waitMsMax: 10_000,
    bodyLimitBytes: 4096,
    replyInbox: (principalId) => inboxPrefixFor('cmd', principalId),
    onMisaddressed: (verb, principal, reason) => told.push({ verb, principal, reason }),
    onInternalError: (error) => internal.push(error),
    ...options,
  });
  let serverClosed = false;
  const closeServer = async () => {
    serverClosed = true;
    await commands.close();
  };
  const open = async (principalId: string, invocationKey: string) =>
    (await coordinator.invoke({ principalId, senderPeerId: null }, { contract: bundle.ref, interaction: 'review', invocationKey, input: { document: 'd' } }))
      .result.operationId;
  const close = async () => {
    if (!serverClosed) await commands.close();
    await coordinator.close();
    for (const opened of clients) await opened.transport.close().then(() => opened.nc.close());
    await transport.close();
    await nc.close();
    await serverNc.close();
  };
  return { nc, client, coordinator, contract: bundle.ref, granted, open, close, closeServer, told, internal };
}

/** convoke_nats_command_replies_total as `verb status` → count. */
async function replies(coordinator: Coordinator): Promise<Record<string, number>> {
  const values = (await coordinator.metrics.registry.getSingleMetric('convoke_nats_command_replies_total')?.get())?.values ?? [];
  return Object.fromEntries(values.map((v) => [`${String(v.labels.verb)} ${String(v.labels.status)}`, v.value]));
}

/** Publishes `body` on `subject` with `reply` as its reply subject and collects what arrives there. */
async function publishWithReply(nc: NatsConnection, subject: string, reply: string, body: unknown): Promise<string[]> {
  const delivered: string[] = [];
  nc.subscribe(reply, { callback: (_error, msg) => void delivered.push(msg.string()) });
  await nc.flush();
  nc.publish(subject, encoder.encode(JSON.stringify(body)), { reply });
  await nc.flush();
  return delivered;
}

/** Inside a `describe`: a core nats-server, started before its tests and disposed after them. */
function serverForSuite(): { readonly server: NatsServer } {
  const made: { server?: NatsServer } = {};
  before(async () => {
    made.server = await startNatsServer({ jetstream: false });
  });
  after(() => made.server?.dispose());
  return {
    get server() {
      assert.ok(made.server, "the suite's nats-server is started before its tests run");
      return made.server;
    },
  };
}

const instanceId = `wf${'5'.repeat(64)}`;

describe('command server: a principal token that is no convoke id', { timeout: 60_000 }, () => {
  const nats = serverForSuite();

  it('is counted misaddressed and told, and nothing is answered, where the inbox rule cannot place its reply', async () => {
    const { workflows } = heldInstances();
    const commands = await commandsOn(nats.server, { workflows });
    try {
      // A hand-written broker user `bad@x` with its inbox `_INBOX.cmd.bad@x.>`: the rule (inboxPrefixFor) has no inbox for it.
      const own = await publishWithReply(commands.nc, 'convoke.cmd.bad@x.workflow-get', '_INBOX.cmd.bad@x.r1', { instanceId });
      const others = await publishWithReply(commands.nc, 'convoke.cmd.bad@x.get', `${inboxPrefixFor('cmd', 'svc-a')}.r2`, { operationId: 'x' });
      await eventually(async () => Object.keys(await replies(commands.coordinator)).length === 2, 'both commands counted');
      await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(await replies(commands.coordinator), { 'workflow-get misaddressed': 1, 'get misaddressed': 1 });
      assert.deepEqual([own, others], [[], []]);
      assert.deepEqual(
        commands.told.map(({ verb, principal }) => [verb, principal]),
        [
          ['workflow-get', 'bad@x'],
          ['get', 'bad@x'],
        ],
      );
      for (const { reason } of commands.told) assert.match(reason, /not a token-safe id/);
      // The server still answers everyone else.
      const reply = await sendWorkflowCommand(await commands.client('svc-a'), 'svc-a', 'workflow-get', { instanceId }, 5000);
      assert.equal(reply.status, 202, JSON.stringify(reply));
    } finally {
      await commands.close();
    }
  });

  it('is answered 400 invalid-input where the inbox rule places the reply in its own inbox', async () => {
    const { workflows } = heldInstances();
    // A rule that has an inbox for any token (as a deployment's own rule may): the reply is proven the sender's.
    const commands = await commandsOn(nats.server, { workflows, replyInbox: (principalId) => `_INBOX.cmd.${principalId}` });
    try {
      const own = await publishWithReply(commands.nc, 'convoke.cmd.bad@x.workflow-get', '_INBOX.cmd.bad@x.r1', { instanceId });
      const others = await publishWithReply(commands.nc, 'convoke.cmd.bad@x.get', '_INBOX.cmd.svc-a.r2', { operationId: 'x' });
      await eventually(() => own.length === 1, 'the 400 arrived');
      const reply = JSON.parse(own[0] ?? '') as { status: number; error: { kind: string; description: string } };
      assert.equal(reply.status, 400);
      assert.equal(reply.error.kind, 'invalid-input');
      assert.match(reply.error.description, /command principal "bad@x" is not a token-safe id/);
      await eventually(async () => (await replies(commands.coordinator))['get misaddressed'] === 1, 'the other counted misaddressed');
      assert.deepEqual(others, []);
      assert.deepEqual(await replies(commands.coordinator), { 'workflow-get 400': 1, 'get misaddressed': 1 });
    } finally {
      await commands.close();
    }
  });
});

describe('command server: a bug', { timeout: 60_000 }, () => {
  const nats = serverForSuite();

  it('is answered 500 naming what the command was about: a workflow instance, or an operation', async () => {
    const bug = new TypeError('a bug');
    const workflows = {
      start: async () => Promise.reject(bug),
      get: async () => Promise.reject(bug),
      cancel: async () => Promise.reject(bug),
      list: async () => Promise.reject(bug),
    } as unknown as WorkflowInstanceService;
    const commands = await commandsOn(nats.server, { workflows });
    const client = await commands.client('svc-a');
    // The coordinator's reads fail with the same bug.
    commands.coordinator.get = async () => Promise.reject(bug);
    commands.coordinator.list = async () => Promise.reject(bug);
    try {
      const start = { bundle: bundleRef, workflow: 'held', invocationKey: 'k', input: {} };
      const workflowReplies = [
        await sendWorkflowCommand(client, 'svc-a', 'workflow-start', start, 5000),
        await sendWorkflowCommand(client, 'svc-a', 'workflow-get', { instanceId }, 5000),
        await sendWorkflowCommand(client, 'svc-a', 'workflow-cancel', { instanceId }, 5000),
        await sendWorkflowList(client, 'svc-a', {}, 5000),
      ];
      for (const reply of workflowReplies) {
        assert.ok('error' in reply, JSON.stringify(reply));
        assert.equal(reply.status, 500);
        assert.equal(reply.error.kind, 'unavailable');
        assert.match(reply.error.description ?? '', /^internal error; .*workflow instance/);
        assert.doesNotMatch(reply.error.description ?? '', /\binvocation\b|operation|a bug/);
      }
      const operationReplies = [await sendCommand(client, 'svc-a', 'get', { operationId: 'x' }, 5000), await sendListCommand(client, 'svc-a', {}, 5000)];
      for (const reply of operationReplies) {
        assert.ok('error' in reply, JSON.stringify(reply));
        assert.equal(reply.status, 500);
        assert.match(reply.error.description ?? '', /^internal error; .*operation/);
        assert.doesNotMatch(reply.error.description ?? '', /workflow|a bug/);
      }
      assert.equal(commands.internal.length, 6);
    } finally {
      await commands.close();
    }
  });
});

/** A `get` on `operationId` and a `workflow-get`, both with `waitMs`, sent together by `principalId`: their statuses and how long both took. */
async function bothWaits(client: NatsTransport, principalId: string, operationId: string, waitMs: number): Promise<{ statuses: number[]; tookMs: number }> {
  const started = Date.now();
  const replies = await Promise.all([
    sendCommand(client, principalId, 'get', { operationId, waitFor: 'decision', waitMs }, 10_000),
    sendWorkflowCommand(client, principalId, 'workflow-get', { instanceId, waitMs }, 10_000),
  ]);
  return { statuses: replies.map((reply) => reply.status), tookMs: Date.now() - started };
}

describe('command server: a principal holds at most its bound of waits', { timeout: 60_000 }, () => {
  const nats = serverForSuite();

  it('past the bound, operation and workflow instance commands are answered at once (202, granted 0) while another principal waits in full', async () => {
    const instances = heldInstances();
    const commands = await commandsOn(nats.server, { workflows: instances.workflows, waitsPerPrincipal: 2 });
    // The waitMs each wait was granted, the operation's beside the instance's.
    const grantedAt = (index: number) => [commands.granted.at(index), instances.granted.at(index)];
    const [a, b] = [await commands.client('svc-a'), await commands.client('svc-b')];
    try {
      const [a1, a2, b1] = await Promise.all([commands.open('svc-a', 'a1'), commands.open('svc-a', 'a2'), commands.open('svc-b', 'b1')]);
      // svc-a holds its two waits: one on an operation, one on a workflow instance (one bound for both).
      const held = [
        sendCommand(a, 'svc-a', 'get', { operationId: a1, waitFor: 'decision', waitMs: 4000 }, 10_000),
        sendWorkflowCommand(a, 'svc-a', 'workflow-get', { instanceId, waitMs: 4000 }, 10_000),
      ];
      await eventually(() => commands.granted.length === 1 && instances.granted.length === 1, 'both waits held');
      const svcA = (waitMs: number) => ({ principalId: 'svc-a', waitMs });
      assert.deepEqual(grantedAt(0), [svcA(4000), svcA(4000)]);

      // Past its bound: answered at once with the state as it is, granted no wait.
      const past = await bothWaits(a, 'svc-a', a2, 4000);
      assert.deepEqual(past.statuses, [202, 202]);
      assert.ok(past.tookMs < 1500, `answered after ${past.tookMs} ms`);
      assert.deepEqual(grantedAt(1), [svcA(0), svcA(0)]);

      // Another principal, meanwhile, gets its whole wait, on an operation and on an instance.
      const other = await bothWaits(b, 'svc-b', b1, 1200);
      assert.deepEqual(other.statuses, [202, 202]);
      assert.ok(other.tookMs >= 1100, `answered after ${other.tookMs} ms, before its wait`);
      assert.deepEqual(grantedAt(2), [
        { principalId: 'svc-b', waitMs: 1200 },
        { principalId: 'svc-b', waitMs: 1200 },
      ]);

      // Its held waits answered, svc-a waits in full again.
      assert.deepEqual(
        (await Promise.all(held)).map((reply) => reply.status),
        [202, 202],
      );
      assert.deepEqual((await bothWaits(a, 'svc-a', a2, 300)).statuses, [202, 202]);
      assert.deepEqual(grantedAt(3), [svcA(300), svcA(300)]);
    } finally {
      await commands.close();
    }
  });
});

describe('command server: a command sent with no reply subject', { timeout: 60_000 }, () => {
  const nats = serverForSuite();

  it('holds no wait, whatever its waitMs: nothing could receive what the wait would answer', async () => {
    const instances = heldInstances();
    const commands = await commandsOn(nats.server, { workflows: instances.workflows, waitsPerPrincipal: 2 });
    const a = await commands.client('svc-a');
    try {
      const a1 = await commands.open('svc-a', 'a1');
      // Four commands that ask to wait 8 s each, published with no reply subject: twice svc-a's bound of waits.
      for (let i = 0; i < 2; i++) {
        commands.nc.publish('convoke.cmd.svc-a.get', encoder.encode(JSON.stringify({ operationId: a1, waitFor: 'decision', waitMs: 8000 })));
        commands.nc.publish('convoke.cmd.svc-a.workflow-get', encoder.encode(JSON.stringify({ instanceId, waitMs: 8000 })));
      }
      await commands.nc.flush();
      // Each is carried out and counted at once, its state as it is, none waiting out its 8 s.
      await eventually(
        async () => {
          const counted = await replies(commands.coordinator);
          return counted['get 202'] === 2 && counted['workflow-get 202'] === 2;
        },
        'the four commands counted as answered 202',
        4000,
      );
      assert.deepEqual(commands.granted, [
        { principalId: 'svc-a', waitMs: 0 },
        { principalId: 'svc-a', waitMs: 0 },
      ]);
      assert.deepEqual(instances.granted, []);
      // svc-a's bound is untouched: a command it asks an answer of waits in full.
      const waited = await bothWaits(a, 'svc-a', a1, 600);
      assert.deepEqual(waited.statuses, [202, 202]);
      assert.ok(waited.tookMs >= 550, `answered after ${waited.tookMs} ms, before its wait`);
      assert.deepEqual(
        [commands.granted.at(-1), instances.granted.at(-1)],
        [
          { principalId: 'svc-a', waitMs: 600 },
          { principalId: 'svc-a', waitMs: 600 },
        ],
      );
    } finally {
      await commands.close();
    }
  });
});

describe('command server: close', { timeout: 60_000 }, () => {
  const nats = serverForSuite();

  it('answers every held wait at once, 202 with the state as it is', async () => {
    const { workflows, granted } = heldInstances();
    const commands = await commandsOn(nats.server, { workflows });
    const [a, b] = [await commands.client('svc-a'), await commands.client('svc-b')];
    try {
      const operationId = await commands.open('svc-a', 'held-1');
      const waits = [
        sendCommand(a, 'svc-a', 'get', { operationId, waitFor: 'decision', waitMs: 8000 }, 15_000),
        sendCommand(
          b,
          'svc-b',
          'invoke',
          { contract: commands.contract, interaction: 'review', invocationKey: 'held-2', input: { document: 'd' }, waitMs: 8000 },
          15_000,
        ),
        sendWorkflowCommand(a, 'svc-a', 'workflow-get', { instanceId, waitMs: 8000 }, 15_000),
      ];
      await eventually(() => commands.granted.length === 2 && granted.length === 1, 'every wait held');
      const started = Date.now();
      await commands.closeServer();
      const answered = await Promise.all(waits);
      const tookMs = Date.now() - started;
      assert.ok(tookMs < 2000, `answered ${tookMs} ms after close`);
      assert.deepEqual(
        answered.map((reply) => reply.status),
        [202, 202, 202],
        JSON.stringify(answered),
      );
      const [get, invoke, instance] = answered;
      assert.ok(get && 'result' in get && get.result.operationId === operationId && get.result.decision === null, JSON.stringify(get));
      assert.ok(invoke && 'result' in invoke && invoke.result.invocationKey === 'held-2' && invoke.result.decision === null, JSON.stringify(invoke));
      assert.ok(instance && 'instance' in instance && instance.instance.status === 'running', JSON.stringify(instance));
    } finally {
      await commands.close();
    }
  });
});
