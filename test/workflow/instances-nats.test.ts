/**
 * The workflow commands (convoke.cmd.<principal>.workflow-start|workflow-get|workflow-cancel)
 * against `convoke serve` on a real nats-server (core mode, SQLite store, a `convoke peer`
 * process): a workflow calling a contract runs to the end, the same key and input find the same
 * instance, a different input is 409, another principal gets 404, cancel is 422 where the bundle
 * does not declare caller cancellation and ends the instance where it does; the instance rebuilt
 * from the stored log agrees with what the command answered; a start past the principal's bound of
 * running instances is answered 503 unavailable; a start the policy does not allow the principal
 * (start-workflow) is 403 denied, nothing recorded; a start takes an input as deep as admission does
 * (its body one level deeper), one level more refused naming the depth, and the instance whose
 * output it is is read back, its reply nesting it below the reply's own levels; `convoke workflow
 * start` and `convoke invoke` send an --input that deep and refuse one deeper themselves.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import { limits } from '../../src/contract/limits.js';
import type { Stored } from '../../src/kernel/types.js';
import { sendWorkflowCommand, sendWorkflowList, type WorkflowCommandVerb, type WorkflowReply } from '../../src/nats-api/workflow-commands.js';
import type { WorkflowInstance } from '../../src/runtime/workflow-service.js';
import type { WorkflowTransition } from '../../src/workflow/exec/events.js';
import { foldWorkflow } from '../../src/workflow/exec/record.js';
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { passwordVariableOf } from '../../src/deployment/nats/permissions.js';
import { deploymentForSuite, e2eBundle, spawnCli, type CommandClient } from '../support/nats-deployment-fixture.js';
import { levelsOf, nested } from './depth-support.js';

process.env.PATH = `${process.env.PATH ?? ''}:/usr/sbin`;

const clients: Record<string, CommandClient> = {};

function bundle(): JsonObject {
  const b = e2eBundle();
  b.workflows = {
    checked: {
      document: { dsl: '1.0.3', namespace: 'e2e', name: 'checked', version: '1.0.0' },
      do: [
        {
          review: {
            call: 'invoke-contract',
            with: { contract: { id: 'e2e.review', version: '1.0.0' }, interaction: 'allok', input: '${ {document: .document} }' },
          },
        },
        { done: { set: { approved: '${ .decision.outcome == "success" }', operation: '${ .operationId }' } } },
      ],
    },
    slow: { document: { dsl: '1.0.3', namespace: 'e2e', name: 'slow', version: '1.0.0' }, do: [{ pause: { wait: { seconds: 60 } } }] },
    echo: { document: { dsl: '1.0.3', namespace: 'e2e', name: 'echo', version: '1.0.0' }, do: [{ same: { set: '${ . }' } }] },
  };
  b.workflowCancellation = { slow: 'caller' };
  // `deep`: takes any document, as deep as an input may be.
  const interactions = b.interactions as JsonObject;
  const allok = interactions.allok as JsonObject;
  interactions.deep = { ...allok, input: { ...(allok.input as JsonObject), properties: { document: {} } } };
  // `deeper`: collects each peer's result, whatever it holds beside its verdict.
  interactions.deeper = { ...allok, result: { type: 'object', required: ['verdict'] }, aggregate: { kind: 'collect' } };
  (b.workflows as JsonObject).forks4 = forkedCalls('forks4', 4);
  (b.workflows as JsonObject).forks5 = forkedCalls('forks5', 5);
  return b;
}

/** The peers' result of the `deeper` interaction: 60 levels, as deep as the peer's config holds it below `/interactions/deeper/result`. */
const deeperResult = { verdict: 'approve', note: nested(59) };

/** A workflow whose output is `forks` forks, one inside the other, around a `deeper` contract call (its answer 64 levels deep). */
function forkedCalls(name: string, forks: number): JsonObject {
  let task: JsonObject = {
    call: 'invoke-contract',
    with: { contract: { id: 'e2e.review', version: '1.0.0' }, interaction: 'deeper', input: { document: 'd' } },
  };
  for (let level = forks; level > 1; level--) task = { fork: { branches: [{ [`level${level}`]: task }] } };
  return { document: { dsl: '1.0.3', namespace: 'e2e', name, version: '1.0.0' }, do: [{ fanout: { fork: { branches: [{ level1: task }] } } }] };
}

const deployment = deploymentForSuite(
  {
    mode: 'core',
    store: 'sqlite',
    bundle: bundle(),
    groups: { reviewers: ['alfa'] },
    peers: {
      alfa: { interactions: { allok: { result: { verdict: 'approve' } }, deep: { result: { verdict: 'approve' } }, deeper: { result: deeperResult } } },
    },
    commandClients: ['billing', 'shipping', 'audit'],
    // Each principal's bound of running instances: billing never holds more than two at once here.
    workflows: { runningInstancesPerPrincipal: 3 },
    // audit may call contracts, and start the workflow echo only.
    policy: [
      { effect: 'allow', principals: ['billing', 'shipping', 'web'] },
      { effect: 'allow', principals: ['audit'], actions: ['invoke', 'deliver', 'admit-result', 'cancel', 'renew'] },
      { effect: 'allow', principals: ['audit'], workflows: ['echo'] },
    ],
  },
  {
    startUp: async (f) => {
      await Promise.all([f.startServe(), f.startPeer('alfa')]);
      for (const who of ['billing', 'shipping', 'audit']) clients[who] = await f.client(who);
    },
  },
);

const send = (who: string, verb: Exclude<WorkflowCommandVerb, 'workflow-list'>, body: JsonObject, waitMs = 0) =>
  sendWorkflowCommand(clients[who]!.transport, who, verb, body, waitMs + 10_000);
const start = (who: string, workflow: string, invocationKey: string, input: JsonObject, waitMs = 0) =>
  send(who, 'workflow-start', { bundle: { ...deployment.fixture.contract }, workflow, invocationKey, input, waitMs }, waitMs);
const instanceOf = (reply: WorkflowReply): WorkflowInstance => {
  if (!('instance' in reply)) throw new Error(`expected an instance, got ${reply.status}: ${JSON.stringify(reply.error)}`);
  if ('omitted' in reply) throw new Error(`expected the whole instance, got one without ${reply.omitted.members.join(', ')}`);
  return reply.instance;
};

test('workflow-start runs a workflow that calls a contract; the same key finds it; a different input is 409; the log agrees', async () => {
  const reply = await start('billing', 'checked', 'wf-1', { document: 'd1' }, 20_000);
  assert.equal(reply.status, 200, JSON.stringify(reply));
  const instance = instanceOf(reply);
  assert.equal(instance.status, 'completed', JSON.stringify(instance.error));
  assert.equal(instance.stages.length, 1);
  assert.equal(instance.stages[0]?.decision?.outcome, 'success');
  assert.deepEqual(instance.output, { approved: true, operation: instance.stages[0]?.operationId });

  const again = instanceOf(await start('billing', 'checked', 'wf-1', { document: 'd1' }));
  assert.equal(again.instanceId, instance.instanceId);
  const different = await start('billing', 'checked', 'wf-1', { document: 'd2' });
  assert.equal(different.status, 409);
  assert.equal('error' in different && different.error.kind, 'conflict');

  const replayed = foldWorkflow((await deployment.fixture.log(instance.instanceId)) as unknown as Stored<WorkflowTransition>[]);
  assert.ok(replayed);
  assert.deepEqual(
    [replayed.status, replayed.output, replayed.error, Object.values(replayed.children).map((c) => c.operationId)],
    [instance.status, instance.output, instance.error, instance.stages.map((s) => s.operationId)],
    'the instance rebuilt from its log agrees with the live one',
  );
});

test("workflow-get answers the original principal only: another principal's instance is 404, like an unknown one", async () => {
  const instance = instanceOf(await start('billing', 'checked', 'wf-2', { document: 'd3' }, 20_000));
  const own = await send('billing', 'workflow-get', { instanceId: instance.instanceId });
  assert.equal(own.status, 200);
  assert.deepEqual(instanceOf(own).instanceId, instance.instanceId);
  const other = await send('shipping', 'workflow-get', { instanceId: instance.instanceId });
  assert.equal(other.status, 404);
  const unknown = await send('shipping', 'workflow-get', { instanceId: `wf${'0'.repeat(64)}` });
  assert.equal(unknown.status, 404);
  const bad = await send('shipping', 'workflow-get', { instanceId: instance.instanceId, extra: 1 });
  assert.equal(bad.status, 400);
});

test('workflow-get and workflow-cancel of an id that is not an instance id are 404, like an unknown one', async () => {
  for (const verb of ['workflow-get', 'workflow-cancel'] as const) {
    for (const instanceId of ['abc', `wf${'0'.repeat(63)}`, '__proto__']) {
      const answer = await send('billing', verb, { instanceId });
      assert.equal(answer.status, 404, `${verb} ${instanceId}: ${JSON.stringify(answer)}`);
    }
  }
});

test('workflow-list answers the caller its own instances from the workflow instances index; a wrong parameter is 400', async () => {
  const instance = instanceOf(await start('billing', 'checked', 'wf-list', { document: 'd9' }, 20_000));
  const own = await sendWorkflowList(clients.billing!.transport, 'billing', { status: 'completed', limit: 50 }, 10_000);
  assert.equal(own.status, 200, JSON.stringify(own));
  const rows = 'page' in own ? own.page.instances : [];
  assert.equal(rows[0]?.instanceId, instance.instanceId, 'newest start first');
  assert.ok(rows.every((row) => row.principalId === 'billing' && row.status === 'completed'));
  assert.deepEqual(rows[0]?.childOperationIds, [instance.stages[0]?.operationId]);
  const other = await sendWorkflowList(clients.shipping!.transport, 'shipping', {}, 10_000);
  assert.ok('page' in other && other.page.instances.every((row) => row.principalId === 'shipping'), "another principal's instances are not listed");
  const bad = await sendWorkflowList(clients.billing!.transport, 'billing', { status: 'done' }, 10_000);
  assert.equal(bad.status, 400);
});

test('workflow-cancel: 422 unsupported without caller cancellation; where declared the running instance ends cancelled', async () => {
  const checked = instanceOf(await start('billing', 'checked', 'wf-3', { document: 'd4' }, 20_000));
  const refused = await send('billing', 'workflow-cancel', { instanceId: checked.instanceId });
  assert.equal(refused.status, 422);
  assert.equal('error' in refused && refused.error.kind, 'unsupported');

  const slow = await start('billing', 'slow', 'wf-4', {});
  assert.equal(slow.status, 202);
  const id = instanceOf(slow).instanceId;
  const waited = await send('billing', 'workflow-get', { instanceId: id, waitMs: 200 }, 200);
  assert.equal(waited.status, 202);
  assert.deepEqual(instanceOf(waited).currentTask, { at: '/do/0/pause', name: 'pause' });
  assert.equal((await send('shipping', 'workflow-cancel', { instanceId: id })).status, 404);
  const cancelled = await send('billing', 'workflow-cancel', { instanceId: id });
  assert.equal(cancelled.status, 200);
  assert.equal(instanceOf(cancelled).status, 'cancelled');
  const replayed = foldWorkflow((await deployment.fixture.log(id)) as unknown as Stored<WorkflowTransition>[]);
  assert.equal(replayed?.status, 'cancelled');
});

test('convoke workflow start and get over the command API: exit 0 when completed, 10 while running, 9 for another principal', async () => {
  const as = (user: string) => ['--nats', deployment.fixture.url, '--user', user, '--password-env', passwordVariableOf(user)];
  const cli = async (args: string[]) => {
    const child = spawnCli(args, deployment.fixture.env());
    const { code } = await child.exited;
    return { code, output: child.output() };
  };
  const bundleFile = join(deployment.fixture.dir, 'bundle.json');
  const started = await cli([
    'workflow',
    'start',
    bundleFile,
    ...as('billing'),
    '--workflow',
    'checked',
    '--key',
    'cli-1',
    '--input',
    '{"document":"c1"}',
    '--wait-ms',
    '20000',
    '--json',
  ]);
  assert.equal(started.code, exitCodes.ok, started.output);
  const reply = JSON.parse(started.output.slice(started.output.indexOf('{'))) as { status: number; instance: WorkflowInstance };
  assert.equal(reply.instance.status, 'completed');
  const id = reply.instance.instanceId;
  const got = await cli(['workflow', 'get', id, ...as('billing')]);
  assert.equal(got.code, exitCodes.ok, got.output);
  assert.match(got.output, new RegExp(`instance +${id}`));
  assert.match(got.output, /stage +review: op[0-9a-deployment.fixture]{64} decision success/);
  const hidden = await cli(['workflow', 'get', id, ...as('shipping')]);
  assert.equal(hidden.code, exitCodes.notFound, hidden.output);
  const ref = `${deployment.fixture.contract.id}@${deployment.fixture.contract.version}@${deployment.fixture.contract.digest}`;
  const running = await cli(['workflow', 'start', ref, ...as('billing'), '--workflow', 'slow', '--key', 'cli-2']);
  assert.equal(running.code, exitCodes.pending, running.output);
  assert.match(running.output, /status +running/);
  // The start answers at once; the worker takes its lease before the first task starts, so the
  // current task shows on a later read (a bounded wait: the 60 s pause never completes in it).
  const later = await cli([
    'workflow',
    'get',
    running.output.match(/instance +(wf[0-9a-deployment.fixture]{64})/)?.[1] ?? 'missing',
    ...as('billing'),
    '--wait-ms',
    '1000',
  ]);
  assert.equal(later.code, exitCodes.pending, later.output);
  assert.match(later.output, /status +running \(running pause at \/do\/0\/pause\)/);
});

test('convoke workflow start and get through a context: its servers, user and password variable, a flag winning over it', async () => {
  const cli = async (args: string[]) => {
    const child = spawnCli(args, { ...deployment.fixture.env(), CONVOKE_CONTEXTS: join(deployment.fixture.dir, 'contexts.json') });
    const { code } = await child.exited;
    return { code, output: child.output() };
  };
  const billing = { nats: deployment.fixture.url, user: 'billing', passwordEnv: passwordVariableOf('billing') };
  await writeFile(
    join(deployment.fixture.dir, 'contexts.json'),
    JSON.stringify({ selected: 'billing', contexts: { billing, nowhere: { ...billing, nats: 'nats://127.0.0.1:1' } } }),
    {
      mode: 0o600,
    },
  );
  const started = await cli([
    'workflow',
    'start',
    join(deployment.fixture.dir, 'bundle.json'),
    '--workflow',
    'checked',
    '--key',
    'ctx-1',
    '--input',
    '{"document":"c9"}',
    '--wait-ms',
    '20000',
    '--json',
  ]);
  assert.equal(started.code, exitCodes.ok, started.output);
  const id = (JSON.parse(started.output.slice(started.output.indexOf('{'))) as { instance: WorkflowInstance }).instance.instanceId;
  const got = await cli(['workflow', 'get', id]);
  assert.equal(got.code, exitCodes.ok, got.output);
  assert.match(got.output, /status +completed/);
  const nowhere = await cli(['workflow', 'get', id, '--context', 'nowhere']);
  assert.equal(nowhere.code, exitCodes.unavailable, nowhere.output);
  const flagged = await cli(['workflow', 'get', id, '--context', 'nowhere', '--nats', deployment.fixture.url]);
  assert.equal(flagged.code, exitCodes.ok, flagged.output);
  const other = await cli(['workflow', 'get', id, '--user', 'shipping', '--password-env', passwordVariableOf('shipping')]);
  assert.equal(other.code, exitCodes.notFound, other.output);
});

test("workflow-start past the principal's bound of running instances (workflows.runningInstancesPerPrincipal) is 503 unavailable; the same start again is answered", async () => {
  const ids: string[] = [];
  for (const key of ['bound-1', 'bound-2', 'bound-3']) {
    const reply = await start('shipping', 'slow', key, {});
    assert.equal(reply.status, 202, JSON.stringify(reply));
    ids.push(instanceOf(reply).instanceId);
  }
  const refused = await start('shipping', 'slow', 'bound-4', {});
  assert.equal(refused.status, 503, JSON.stringify(refused));
  assert.equal('error' in refused && refused.error.kind, 'unavailable');
  assert.match(('error' in refused && refused.error.description) || '', /"shipping" holds 3 running workflow instances, its bound \(3,/);
  assert.equal(instanceOf(await start('shipping', 'slow', 'bound-2', {})).instanceId, ids[1]);
  assert.equal((await send('shipping', 'workflow-cancel', { instanceId: ids[0]! })).status, 200);
  assert.equal((await start('shipping', 'slow', 'bound-4', {})).status, 202, 'one ended: one more starts');
  for (const id of ids.slice(1)) await send('shipping', 'workflow-cancel', { instanceId: id });
});

test('workflow-start is decided by the policy: a principal allowed contract actions only is refused 403 denied naming the revision, nothing recorded; a rule naming the workflow allows it', async () => {
  const refused = await start('audit', 'checked', 'audit-1', { document: 'd1' }, 10_000);
  assert.equal(refused.status, 403, JSON.stringify(refused));
  assert.equal('error' in refused && refused.error.kind, 'denied');
  assert.match(('error' in refused && refused.error.description) || '', /no rule of policy static\.1 allows start-workflow of workflow "checked"/);
  const listed = await sendWorkflowList(clients.audit!.transport, 'audit', {}, 10_000);
  assert.ok('page' in listed, JSON.stringify(listed));
  assert.deepEqual(listed.page.instances, [], 'nothing was recorded');
  const echoed = await start('audit', 'echo', 'audit-2', { said: 'hi' }, 10_000);
  assert.equal(echoed.status, 200, JSON.stringify(echoed));
  assert.deepEqual(instanceOf(echoed).output, { said: 'hi' });
});

test('a start takes an input as deep as a contract invocation does (its body one level deeper), and the reply nesting it as output is read back; one level more is refused naming the depth', async () => {
  const input = nested(limits.jsonDepthMax);
  const reply = await start('billing', 'echo', 'deepest-input', input, 5_000);
  const instance = instanceOf(reply);
  assert.equal(instance.status, 'completed', JSON.stringify(instance.error));
  assert.deepEqual(instance.output, input);
  const again = instanceOf(await send('billing', 'workflow-get', { instanceId: instance.instanceId }));
  assert.deepEqual(again.output, input);
  const refused = await start('billing', 'echo', 'too-deep-input', nested(limits.jsonDepthMax + 1), 5_000);
  assert.ok('error' in refused, JSON.stringify(refused).slice(0, 400));
  assert.deepEqual([refused.status, refused.error.kind], [400, 'invalid-input']);
  assert.match(refused.error.description ?? '', /the value at \/input nests deeper than 64 at \/input\/a\//);
});

test("an instance's output is held to what a workflow reply reads: forks around a contract answer complete to 68 levels and are read back; one fork more faults the outer fork, and that is read back", async () => {
  const deepest = instanceOf(await start('billing', 'forks4', 'forks-68', { document: 'd' }, 20_000));
  assert.equal(deepest.status, 'completed', JSON.stringify(deepest.error));
  assert.equal(levelsOf(deepest.output), limits.jsonDepthMax + 4);
  const again = instanceOf(await send('billing', 'workflow-get', { instanceId: deepest.instanceId }));
  assert.deepEqual(again.output, deepest.output);
  const deeper = instanceOf(await start('billing', 'forks5', 'forks-69', { document: 'd' }, 20_000));
  assert.equal(deeper.status, 'faulted', JSON.stringify(deeper.output)?.slice(0, 200));
  assert.deepEqual([deeper.error?.title, deeper.error?.instance], ['Value not recordable', '/do/0/fanout'], JSON.stringify(deeper.error));
  assert.match(deeper.error?.detail ?? '', /the output of task fanout nests deeper than 68/);
  const read = instanceOf(await send('billing', 'workflow-get', { instanceId: deeper.instanceId }));
  assert.deepEqual([read.status, read.error], ['faulted', deeper.error]);
});

test('convoke workflow start and convoke invoke take an --input as deep as admission does; one level more is refused before anything is sent, naming the depth', async () => {
  const as = ['--nats', deployment.fixture.url, '--user', 'billing', '--password-env', passwordVariableOf('billing')];
  const cli = async (args: string[]) => {
    const child = spawnCli(args, deployment.fixture.env());
    const { code } = await child.exited;
    return { code, output: child.output() };
  };
  const bundleFile = join(deployment.fixture.dir, 'bundle.json');
  const input = nested(limits.jsonDepthMax);
  const startWith = (key: string, value: JsonObject) =>
    cli(['workflow', 'start', bundleFile, ...as, '--workflow', 'echo', '--key', key, '--input', JSON.stringify(value), '--wait-ms', '20000', '--json']);
  const started = await startWith('cli-deepest', input);
  assert.equal(started.code, exitCodes.ok, started.output);
  const instance = (JSON.parse(started.output.slice(started.output.indexOf('{'))) as { instance: WorkflowInstance }).instance;
  assert.deepEqual([instance.status, instance.output], ['completed', input]);
  const invokeWith = (key: string, document: JsonObject) =>
    cli([
      'invoke',
      ...as,
      '--contract',
      bundleFile,
      '--interaction',
      'deep',
      '--key',
      key,
      '--input',
      JSON.stringify({ document }),
      '--wait-ms',
      '20000',
      '--json',
    ]);
  // {document: …} is one level: the document is one less than the input.
  const invoked = await invokeWith('cli-deepest', nested(limits.jsonDepthMax - 1));
  assert.equal(invoked.code, exitCodes.ok, invoked.output);
  const result = (JSON.parse(invoked.output.slice(invoked.output.indexOf('{'))) as { result: { decision: { outcome: string } | null } }).result;
  assert.equal(result.decision?.outcome, 'success');
  const tooDeepStart = await startWith('cli-too-deep', nested(limits.jsonDepthMax + 1));
  assert.equal(tooDeepStart.code, exitCodes.invalidInput, tooDeepStart.output);
  assert.match(tooDeepStart.output, /--input: nesting deeper than 64/);
  const tooDeepInvoke = await invokeWith('cli-too-deep', nested(limits.jsonDepthMax));
  assert.equal(tooDeepInvoke.code, exitCodes.invalidInput, tooDeepInvoke.output);
  assert.match(tooDeepInvoke.output, /--input: nesting deeper than 64/);
});

test('convoke workflow start, workflow get and invoke refuse a --wait-ms past limits.waitMsMax before anything is sent, as convoke get does', async () => {
  const as = ['--nats', deployment.fixture.url, '--user', 'billing', '--password-env', passwordVariableOf('billing')];
  const cli = async (args: string[]) => {
    const child = spawnCli(args, deployment.fixture.env());
    const { code } = await child.exited;
    return { code, output: child.output() };
  };
  const bundleFile = join(deployment.fixture.dir, 'bundle.json');
  const known = instanceOf(await start('billing', 'slow', 'wait-known', {}));
  const refusal = new RegExp(`--wait-ms must be an integer in 0\\.\\.${limits.waitMsMax}`);
  // Past the bound the coordinator would refuse the body; past 2^31 - 1 ms the client's own timer would not hold the wait.
  for (const waitMs of [2 ** 31, Number.MAX_SAFE_INTEGER, limits.waitMsMax + 1]) {
    const started = await cli(['workflow', 'start', bundleFile, ...as, '--workflow', 'slow', '--key', `wait-over-${waitMs}`, '--wait-ms', String(waitMs)]);
    assert.equal(started.code, exitCodes.invalidInput, started.output);
    assert.match(started.output, refusal);
    const got = await cli(['workflow', 'get', known.instanceId, ...as, '--wait-ms', String(waitMs)]);
    assert.equal(got.code, exitCodes.invalidInput, got.output);
    assert.match(got.output, refusal);
    const invoked = await cli([
      'invoke',
      ...as,
      '--contract',
      bundleFile,
      '--interaction',
      'allok',
      '--key',
      `wait-over-${waitMs}`,
      '--input',
      '{"document":"w"}',
      '--wait-ms',
      String(waitMs),
    ]);
    assert.equal(invoked.code, exitCodes.invalidInput, invoked.output);
    assert.match(invoked.output, refusal);
  }
  const listed = await sendWorkflowList(clients.billing!.transport, 'billing', { workflow: 'slow', limit: 100 }, 10_000);
  assert.ok('page' in listed, JSON.stringify(listed));
  assert.deepEqual(
    listed.page.instances.map((row) => (row as { invocationKey: string }).invocationKey).filter((key) => key.startsWith('wait-over-')),
    [],
    'no start was sent',
  );
  await send('billing', 'workflow-cancel', { instanceId: known.instanceId });
  const ended = await cli(['workflow', 'get', known.instanceId, ...as, '--wait-ms', String(limits.waitMsMax)]);
  assert.equal(ended.code, exitCodes.outcomeNotSuccess, `the bound itself is a wait: ${ended.output}`);
});
