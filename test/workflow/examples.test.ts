/**
 * The official Serverless Workflow 1.0.3 examples (test/workflow/examples, Apache-2.0, copied from
 * the DSL release): every one either passes convoke's checks (the language's and the executor's)
 * and the SDK's validation (its every jq expression compiling), or is
 * refused with `unsupported` naming the task (or the top-level feature) and its JSON Pointer. The
 * lists below are the categories; a file that changes category, or a new file in neither list,
 * fails the test.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isAdapterError } from '../../src/contract/errors.js';
import type { JsonObject } from '../../src/contract/json.js';
import { checkWorkflowDocument } from '../../src/workflow/dsl/document.js';
import { checkDocument } from '../../src/workflow/exec/document.js';
import { JqWorkerEvaluator } from '../../src/workflow/exec/jq.js';
import { checkExpressionsCompile } from '../../src/workflow/exec/jq-compile.js';
import { validateDslDocument } from '../../src/workflow/dsl/dsl-schema.js';
import { parseDocumentText } from '../../src/workflow/dsl/text.js';
import { repoRoot } from '../support/assertions.js';

const examples = join(repoRoot(), 'test', 'workflow', 'examples');

/** Checked by convoke and validated by the SDK. */
const valid = [
  'accumulate-room-readings.yaml',
  'authentication-bearer-uri-format.yaml',
  'authentication-bearer.yaml',
  'call-http-endpoint-interpolation-shorthand.yaml',
  'call-http-endpoint-interpolation.yaml',
  'call-http-query-headers-expressions.yaml',
  'call-http-query-parameters.yaml',
  'call-http-redirect.yaml',
  'call-openapi-redirect.yaml',
  'call-openapi.yaml',
  'conditional-task.yaml',
  'do-multiple.yaml',
  'do-single.yaml',
  'emit.yaml',
  'for.yaml',
  'fork.yaml',
  'listen-to-all read-envelope.yaml',
  'listen-to-all.yaml',
  'listen-to-any-filter.yaml',
  'listen-to-any-forever-foreach.yaml',
  'listen-to-any-until-condition.yaml',
  'listen-to-any-until-consumed.yaml',
  'listen-to-any.yaml',
  'listen-to-one.yaml',
  'raise-inline.yaml',
  'raise-reusable.yaml',
  'star-wars-homeworld.yaml',
  'switch-then-string.yaml',
  'try-catch-retry-inline.yaml',
  'try-catch-retry-reusable.yaml',
  'try-catch-then.yaml',
  'try-catch.yaml',
  'wait-duration-inline.yaml',
  'wait-duration-iso8601.yaml',
];

/** Refused as unsupported: the pointer and the words the description must contain. */
const refused: Record<string, { pointer: string; says: string }> = {
  // A named policy's credential comes from $secrets; oauth2 and oidc make token requests convoke does not.
  'authentication-oauth2-secret.yaml': { pointer: '/do/0/getPet/with/endpoint/authentication/oauth2', says: 'oauth2 needs a token request' },
  'authentication-oauth2.yaml': { pointer: '/do/0/getPet/with/endpoint/authentication/oauth2', says: 'oauth2 needs a token request' },
  'authentication-oidc-secret.yaml': { pointer: '/do/0/getPet/with/endpoint/authentication/oidc', says: 'oidc needs a token request' },
  'authentication-oidc.yaml': { pointer: '/do/0/getPet/with/endpoint/authentication/oidc', says: 'oidc needs a token request' },
  'authentication-reusable.yaml': { pointer: '/use/authentications/petStoreAuth/bearer/token', says: "a named policy's credential must come from $secrets" },
  'call-asyncapi-publish.yaml': { pointer: '/do/0/findPet', says: 'task "findPet" is call asyncapi' },
  'call-asyncapi-subscribe-consume-amount.yaml': { pointer: '/do/0/getNotifications', says: 'task "getNotifications" is call asyncapi' },
  'call-asyncapi-subscribe-consume-forever-foreach.yaml': { pointer: '/do/0/getNotifications', says: 'task "getNotifications" is call asyncapi' },
  'call-asyncapi-subscribe-consume-until.yaml': { pointer: '/do/0/getNotifications', says: 'task "getNotifications" is call asyncapi' },
  'call-asyncapi-subscribe-consume-while.yaml': { pointer: '/do/0/getNotifications', says: 'task "getNotifications" is call asyncapi' },
  'call-custom-function-cataloged.yaml': { pointer: '/do/0/log', says: 'external catalogs are not supported' },
  // A function declared in use.functions: the DSL allows it, convoke's executor runs no declared function but its own.
  'call-custom-function-inline.yaml': { pointer: '/use/functions', says: 'functions are not supported by this executor' },
  'call-grpc.yaml': { pointer: '/do/0/greet', says: 'task "greet" is call grpc' },
  'call-mcp.yaml': { pointer: '/do/0/publishMessageToSlack', says: 'task "publishMessageToSlack" is call mcp' },
  'mock-service-extension.yaml': { pointer: '/use/extensions', says: 'extensions' },
  'run-container-cleanup-always.yaml': { pointer: '/do/0/runContainer', says: 'task "runContainer" is run (container)' },
  'run-container-cleanup-eventually.yaml': { pointer: '/do/0/runContainer', says: 'task "runContainer" is run (container)' },
  'run-container-stdin-and-arguments.yaml': { pointer: '/do/1/runContainer', says: 'task "runContainer" is run (container)' },
  'run-container-with-name.yaml': { pointer: '/do/0/runContainer', says: 'task "runContainer" is run (container)' },
  'run-container-with-pull-policy.yaml': { pointer: '/do/0/runContainer', says: 'task "runContainer" is run (container)' },
  'run-container.yaml': { pointer: '/do/0/runContainer', says: 'task "runContainer" is run (container)' },
  'run-return-all.yaml': { pointer: '/do/0/runContainer', says: 'task "runContainer" is run (container)' },
  'run-return-code.yaml': { pointer: '/do/0/runContainer', says: 'task "runContainer" is run (container)' },
  'run-return-none.yaml': { pointer: '/do/0/runContainer', says: 'task "runContainer" is run (container)' },
  'run-return-stderr.yaml': { pointer: '/do/0/runContainer', says: 'task "runContainer" is run (container)' },
  'run-script-with-stdin-and-arguments.yaml': { pointer: '/do/0/runScript', says: 'task "runScript" is run (script)' },
  'run-shell-stdin-and-arguments.yaml': { pointer: '/do/1/runShell', says: 'task "runShell" is run (shell)' },
  // A standalone document runs only itself: register-customer is not beside it.
  'run-subflow.yaml': { pointer: '/do/0/registerCustomer/run/workflow', says: 'the workflow test/register-customer@0.1.0 is not this document' },
  // Schedules: a convoke instance starts when a caller starts it.
  'schedule-cron.yaml': { pointer: '/schedule', says: 'schedules are not supported' },
  'schedule-event-driven.yaml': { pointer: '/schedule', says: 'schedules are not supported' },
  'set-expression.yaml': { pointer: '/schedule', says: 'schedules are not supported' },
  'set.yaml': { pointer: '/schedule', says: 'schedules are not supported' },
};

const evaluator = new JqWorkerEvaluator({ deadlineMs: 2000, workers: 1 });
after(() => evaluator.close());

async function check(file: string): Promise<void> {
  const document = parseDocumentText(readFileSync(join(examples, file), 'utf8'), file) as JsonObject;
  checkWorkflowDocument(document);
  await validateDslDocument(document, '');
  // What the executor itself refuses before an instance starts, then every expression compiled (as workflow run and a bundle's readers do).
  checkDocument(document);
  await checkExpressionsCompile(document, evaluator);
}

test('every official example is listed in exactly one category', () => {
  const files = readdirSync(examples)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
  assert.equal(files.length, 66, 'the 1.0.3 release has 66 examples');
  const listed = [...valid, ...Object.keys(refused)].sort();
  assert.deepEqual(listed, files);
  assert.equal(new Set(listed).size, listed.length, 'no example in both lists');
});

test('the supported examples pass convoke’s checks and the SDK’s validation', async () => {
  for (const file of valid) {
    await assert.doesNotReject(check(file), `${file} validates`);
  }
});

test('the other examples are refused as unsupported, naming the task or feature and its JSON Pointer', async () => {
  for (const [file, expected] of Object.entries(refused)) {
    await assert.rejects(check(file), (error: unknown) => {
      assert.ok(isAdapterError(error), `${file}: an AdapterError`);
      assert.equal(error.kind, 'unsupported', `${file}: ${error.description ?? ''}`);
      assert.ok(error.description?.startsWith(`${expected.pointer}: `), `${file}: names ${expected.pointer}: ${error.description ?? ''}`);
      assert.ok(error.description?.includes(expected.says), `${file}: says "${expected.says}": ${error.description ?? ''}`);
      return true;
    });
  }
});
