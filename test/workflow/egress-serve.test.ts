/**
 * The egress policy as `convoke serve` wires it (createWorkflowHost from the config's
 * workflows.http): a principal allowed to start a bundle's workflow cannot point its HTTP call at
 * the server's loopback by default — the instance faults with the authorization error (403) and
 * the service is never reached — while a deployment whose config allows that origin on private
 * networks calls it. Through POST /workflow-instances over a real socket; each instance replays.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { JsonObject } from '../../src/contract/json.js';
import type { WorkflowInstance } from '../../src/runtime/workflow-service.js';
import { serveWorkflowFixture, writeWorkflowFixture, type HostedWorkflows, type WorkflowFixture } from './instances-fixture.js';

/** A bundle workflow calling the endpoint its input names. */
const callbackWorkflow = {
  document: { dsl: '1.0.3', namespace: 'lab', name: 'callback', version: '1.0.0' },
  do: [{ notify: { call: 'http', with: { method: 'get', endpoint: '${ .callbackUrl }' } } }],
};

async function startCallback(fixture: WorkflowFixture, hosted: HostedWorkflows, callbackUrl: string): Promise<WorkflowInstance> {
  const response = await fetch(`${hosted.server.url}/workflow-instances`, {
    method: 'POST',
    headers: { authorization: `Bearer ${fixture.tokens.alice}`, 'content-type': 'application/json' },
    body: JSON.stringify({ bundle: { ...fixture.bundle }, workflow: 'callback', invocationKey: callbackUrl, input: { callbackUrl }, waitMs: 10_000 }),
  });
  const body = (await response.json()) as JsonObject;
  assert.equal(response.status, 200, JSON.stringify(body));
  const instance = body as unknown as WorkflowInstance;
  const replayed = await hosted.host.executor.replay(instance.instanceId);
  assert.ok(replayed);
  assert.deepEqual(
    await hosted.host.service.view(replayed),
    await hosted.host.service.get('alice', instance.instanceId),
    'the instance replays to the live view',
  );
  return instance;
}

async function withDeployment(workflows: JsonObject | undefined, use: (fixture: WorkflowFixture, hosted: HostedWorkflows) => Promise<void>): Promise<void> {
  const fixture = await writeWorkflowFixture({ bundleWorkflows: { callback: callbackWorkflow }, ...(workflows ? { workflows } : {}) });
  const hosted = await serveWorkflowFixture(fixture);
  try {
    await use(fixture, hosted);
  } finally {
    await hosted.close();
    await fixture.dispose();
  }
}

test('serve: by default a workflow cannot call loopback from its input; workflows.http allowing the origin on private networks can', async () => {
  let reached = 0;
  const service = createServer((_request, response) => {
    reached++;
    response.setHeader('content-type', 'application/json');
    response.end('{"secret":"instance metadata"}');
  });
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
  try {
    await withDeployment(undefined, async (fixture, hosted) => {
      for (const url of [`${origin}/latest/meta-data`, `${origin.replace('127.0.0.1', 'localhost')}/x`]) {
        const instance = await startCallback(fixture, hosted, url);
        assert.equal(instance.status, 'faulted', JSON.stringify(instance));
        assert.equal(instance.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/authorization');
        assert.equal(instance.error?.status, 403);
        assert.ok(!JSON.stringify(instance).includes('instance metadata'));
      }
    });
    assert.equal(reached, 0, 'the service was never reached');
    await withDeployment({ http: { allow: [origin], privateNetworks: true } }, async (fixture, hosted) => {
      const allowed = await startCallback(fixture, hosted, `${origin}/allowed`);
      assert.equal(allowed.status, 'completed', JSON.stringify(allowed.error));
      assert.deepEqual(allowed.output, { secret: 'instance metadata' });
      const unlisted = await startCallback(fixture, hosted, `${origin.replace('127.0.0.1', 'localhost')}/unlisted`);
      assert.equal(unlisted.error?.status, 403, JSON.stringify(unlisted));
      assert.match(unlisted.error?.detail ?? '', /allow list/);
    });
    assert.equal(reached, 1);
  } finally {
    await new Promise((resolve) => service.close(resolve));
  }
});
