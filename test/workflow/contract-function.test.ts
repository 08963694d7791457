/**
 * The contract function's declaration (`use.functions.invoke-contract`) is what another Serverless
 * Workflow engine runs for `call: invoke-contract`. Run here as a plain document through the
 * executor's own `call: http`, against `convoke serve`'s facade over a socket, it means what the
 * executor's native call means: a 202 is polled to the boundary, success only on a success
 * decision, and anything else the same DSL error the executor raises.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SystemClock } from '../../src/contract/clock.js';
import { operationId } from '../../src/contract/ids.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import { contractDecisionErrorType } from '../../src/workflow/contract-errors.js';
import { contractFunctionDefinition, contractFunctionDefinitionV1 } from '../../src/workflow/dsl/contract-function.js';
import { checkWorkflowDocument } from '../../src/workflow/dsl/document.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { harness, runToEnd } from './support.js';
import { serveWorkflowFixture, writeWorkflowFixture, type HostedWorkflows, type WorkflowFixture } from './instances-fixture.js';

let fixture: WorkflowFixture;
let hosted: HostedWorkflows;

before(async () => {
  fixture = await writeWorkflowFixture();
  hosted = await serveWorkflowFixture(fixture);
});

after(async () => {
  await hosted?.close();
  await fixture?.dispose();
});

/**
 * The declaration's tasks as a document of their own, its input the function's `with`. The
 * endpoint the secret would hold is written in (the executor reads `$secrets` in credentials
 * alone), and the first POST asks for no wait, as a facade that answers before the boundary does.
 */
function standalone(url: string): JsonValue {
  const tasks = JSON.stringify(contractFunctionDefinition.do)
    .replaceAll('$secrets.convoke.endpoint', JSON.stringify(JSON.stringify(url)).slice(1, -1))
    .replace(/waitMs: \d+\}/, 'waitMs: 0}');
  return {
    document: { dsl: '1.0.3', namespace: 'test', name: 'contract-function', version: '1.0.0' },
    use: { secrets: ['convoke'] },
    input: contractFunctionDefinition.input as JsonValue,
    do: JSON.parse(tasks) as JsonValue,
  };
}

const contractOf = (): JsonObject => ({ id: fixture.bundle.id, version: fixture.bundle.version, digest: fixture.bundle.digest });

const options = () => ({ clock: new SystemClock(), secrets: new Map<string, JsonValue>([['convoke', { token: fixture.tokens.alice }]]) });

test('the declared function polls a 202 to the boundary and answers what the executor answers', async () => {
  const h = harness(options());
  try {
    const contract = contractOf();
    const input = { contract, interaction: 'review', input: { document: 'RFC 12' }, invocationKey: 'standalone-1' };
    const record = await runToEnd(h, standalone(hosted.server.url), input, 'standalone-1');
    assert.equal(record.status, 'completed', JSON.stringify(record.error));
    const output = record.output as JsonObject;
    assert.deepEqual(Object.keys(output).sort(), ['decision', 'operationId', 'output', 'settlement']);
    assert.equal((output.decision as JsonObject).outcome, 'success');
    assert.equal(output.operationId, operationId('alice', fixture.bundle.digest, 'standalone-1'));
    assert.ok(
      Object.keys(record.steps).some((step) => step.startsWith('/do/2/again')),
      `the 202 was polled: ${Object.keys(record.steps).join(', ')}`,
    );
  } finally {
    await h.close();
  }
});

test('a decision other than success is the DSL error the executor raises, never the call’s success', async () => {
  const h = harness(options());
  try {
    const contract = contractOf();
    // `held`: a reviewer who never answers; the caller cancels the operation while the function polls it.
    const input = { contract, interaction: 'held', input: { document: 'RFC 13' }, invocationKey: 'standalone-2' };
    const { instanceId } = await h.executor.start({ principalId: 'alice', invocationKey: 'standalone-2', document: standalone(hosted.server.url), input });
    const opId = operationId('alice', fixture.bundle.digest, 'standalone-2');
    for (let i = 0; ; i++) {
      const found = await hosted.deployment.coordinator.get('alice', opId).catch(() => undefined);
      if (found !== undefined) break;
      assert.ok(i < 200, 'the function admitted the operation');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await hosted.deployment.coordinator.cancel('alice', opId);
    const record = await h.executor.wait(instanceId, 15_000);
    assert.equal(record.status, 'faulted', JSON.stringify(record));
    assert.equal(record.error?.type, contractDecisionErrorType, JSON.stringify(record.error));
    assert.equal(record.error?.status, 422);
    assert.match(record.error?.detail ?? '', new RegExp(`operation ${opId} decided `));
  } finally {
    await h.close();
  }
});

test('a document may declare the function as convoke does, or as it did before it polled; any other declaration is refused', () => {
  const declaring = (definition: JsonValue): JsonObject => ({
    document: { dsl: '1.0.3', namespace: 'test', name: 'declares', version: '1.0.0' },
    use: { functions: { 'invoke-contract': definition }, secrets: ['convoke'] },
    do: [{ done: { set: { ok: true } } }],
  });
  for (const definition of [contractFunctionDefinition, contractFunctionDefinitionV1]) checkWorkflowDocument(declaring(structuredClone(definition)));
  const altered = structuredClone(contractFunctionDefinition);
  (altered.do as JsonObject[]).splice(3, 1); // without the decision's check
  assert.throws(
    () => checkWorkflowDocument(declaring(altered)),
    (error: unknown) =>
      isAdapterError(error) && error.kind === 'invalid-input' && /\/use\/functions\/invoke-contract: .*convoke's contract function/.test(error.message),
  );
});
