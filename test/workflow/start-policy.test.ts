/**
 * The deployment's policy decides who starts which workflow (action start-workflow, rules naming
 * `workflows`), over a real socket: a policy allowing a principal contract actions only, or naming
 * contracts only, refuses its starts 403 denied naming the policy revision, nothing recorded, while
 * its contract invocations are allowed as before; a rule naming neither contracts nor workflows
 * allows starts as it always did; a rule naming the workflow allows its principal to start it and a
 * deny rule wins; a `run: workflow` child is decided as a start by its parent's principal, a refusal
 * faulting the parent's task with the DSL's authorization error; a refused start takes no token of
 * the start rate.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import type { WorkflowInstance } from '../../src/runtime/workflow-service.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';
import { serveWorkflowFixture, writeWorkflowFixture, type HostedWorkflows, type WorkflowFixture } from './instances-fixture.js';

const contractActions = ['invoke', 'deliver', 'admit-result', 'cancel', 'renew'];

/** The fixture served with these policy rules (and `workflows` settings) for the length of `body`. */
async function withPolicy(
  options: { policy: JsonObject[]; workflows?: JsonObject },
  body: (fixture: WorkflowFixture, call: Caller, start: Starter) => Promise<void>,
): Promise<void> {
  const fixture = await writeWorkflowFixture(options);
  let hosted: HostedWorkflows | undefined;
  try {
    hosted = await serveWorkflowFixture(fixture);
    const url = hosted.server.url;
    const call: Caller = async (method, path, token, payload) => {
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      if (payload !== undefined) headers['content-type'] = 'application/json';
      const response = await fetch(`${url}${path}`, { method, headers, ...(payload === undefined ? {} : { body: JSON.stringify(payload) }) });
      return { status: response.status, body: (await response.json()) as JsonObject };
    };
    const start: Starter = (token, workflow, invocationKey, input, waitMs = 10_000) =>
      call('POST', '/workflow-instances', token, { bundle: { ...fixture.bundle }, workflow, invocationKey, input, waitMs });
    await body(fixture, call, start);
  } finally {
    await hosted?.close();
    await fixture.dispose();
  }
}

type Caller = (method: string, path: string, token: string, payload?: JsonObject) => Promise<{ status: number; body: JsonObject }>;
type Starter = (token: string, workflow: string, invocationKey: string, input: JsonObject, waitMs?: number) => Promise<{ status: number; body: JsonObject }>;

test('a policy allowing contract actions only, or naming contracts only, starts no workflow: 403 denied naming the revision, nothing recorded; a rule naming neither allows it', async () => {
  await withPolicy(
    {
      policy: [
        { effect: 'allow', principals: ['bob'], actions: contractActions },
        { effect: 'allow', principals: ['alice'], contracts: ['lab.review'] },
        { effect: 'allow', principals: ['ops'] },
      ],
    },
    async (fixture, call, start) => {
      for (const who of ['bob', 'alice'] as const) {
        const token = fixture.tokens[who];
        const refused = await start(token, 'review-then-publish', 'release-1', { document: 'RFC 1' });
        assert.deepEqual([refused.status, refused.body.kind], [403, 'denied'], `${who}: ${JSON.stringify(refused.body)}`);
        assert.match(refused.body.description as string, /policy static\.1 allows start-workflow of workflow "review-then-publish"/);
        // Nothing recorded: the instance the start would have made is unknown, and the principal lists none.
        const id = workflowInstanceId(who, fixture.bundle.digest, 'review-then-publish', 'release-1');
        assert.equal((await call('GET', `/workflow-instances/${id}`, token)).status, 404);
        assert.deepEqual((await call('GET', '/workflow-instances', token)).body.instances, []);
        // Their contract invocations are decided as before.
        const invoked = await call('POST', '/contract-invocations', token, {
          contract: { ...fixture.bundle },
          interaction: 'publish',
          invocationKey: `publish-${who}`,
          input: { approvals: 2 },
          waitMs: 10_000,
        });
        assert.equal(invoked.status, 200, JSON.stringify(invoked.body));
      }
      const started = await start(fixture.tokens.ops, 'review-then-publish', 'release-1', { document: 'RFC 1' });
      assert.equal(started.status, 200, JSON.stringify(started.body));
      assert.equal((started.body as unknown as WorkflowInstance).status, 'completed');
    },
  );
});

test('a rule naming the workflow lets its principal start it; deny wins; a run: workflow child is decided for its parent’s principal; a refused start takes no token', async () => {
  await withPolicy(
    {
      policy: [
        { effect: 'allow', principals: ['alice'], actions: contractActions },
        { effect: 'allow', principals: ['alice'], workflows: ['review-then-publish', 'delegating', 'held'] },
        { effect: 'deny', principals: ['alice'], workflows: ['held'] },
      ],
      // Two new instances a minute: the refused starts below take none of them.
      workflows: { startRate: { perSecond: 1 / 60, burst: 2 } },
    },
    async (fixture, _call, start) => {
      const alice = fixture.tokens.alice;
      for (const key of ['held-1', 'held-2', 'held-3']) {
        const denied = await start(alice, 'held', key, { document: 'd' });
        assert.deepEqual([denied.status, denied.body.kind], [403, 'denied'], JSON.stringify(denied.body));
        assert.match(denied.body.description as string, /denied by policy static\.1/);
      }
      const slow = await start(alice, 'slow', 'slow-1', {});
      assert.deepEqual([slow.status, slow.body.kind], [403, 'denied'], 'a workflow no rule names');
      const other = await start(fixture.tokens.bob, 'review-then-publish', 'release-1', { document: 'RFC 1' });
      assert.deepEqual([other.status, other.body.kind], [403, 'denied'], 'a principal no rule names');

      const pipeline = await start(alice, 'review-then-publish', 'release-1', { document: 'RFC 1' });
      assert.equal(pipeline.status, 200, JSON.stringify(pipeline.body));
      assert.equal((pipeline.body as unknown as WorkflowInstance).status, 'completed');
      // The parent may start; its child `slow` is not named for alice: the task faults with the DSL's authorization error.
      const parent = await start(alice, 'delegating', 'delegating-1', {});
      assert.equal(parent.status, 200, JSON.stringify(parent.body));
      const faulted = parent.body as unknown as WorkflowInstance;
      assert.equal(faulted.status, 'faulted');
      assert.deepEqual(
        [faulted.error?.type, faulted.error?.status, faulted.error?.instance],
        ['https://serverlessworkflow.io/spec/1.0.0/errors/authorization', 403, '/do/0/delegate'],
      );
      assert.match(
        faulted.error?.detail ?? '',
        /the start of workflow slow was refused \(denied\): no rule of policy static\.1 allows start-workflow of workflow "slow"/,
      );
      assert.deepEqual(
        faulted.childInstances.map((child) => [child.workflow, child.status === 'running' || child.status === 'completed']),
        [['slow', false]],
        'the child never ran',
      );
      // Both tokens were taken by the two starts allowed: a third new one is past the rate.
      const third = await start(alice, 'review-then-publish', 'release-2', { document: 'RFC 2' });
      assert.deepEqual([third.status, third.body.kind], [503, 'unavailable'], JSON.stringify(third.body));
      // A start under a key that names an instance already is answered (as an invocation under its key is).
      const again = await start(alice, 'review-then-publish', 'release-1', { document: 'RFC 1' });
      assert.equal(again.status, 200);
      assert.equal(again.body.instanceId, pipeline.body.instanceId);
    },
  );
});
