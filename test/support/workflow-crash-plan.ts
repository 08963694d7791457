/**
 * What the workflow crash test's worker child runs, shared by the child
 * (test/support/workflow-crash-child.ts) and the test that checks the store afterwards
 * (test/faults/workflow-crash.test.ts): the contract bundle, the pipeline document (three contract
 * stages with a wait between the first two) and the fixed list of instance keys.
 */
import { parse as parseYaml } from 'yaml';
import { canonicalJson, sha256Hex } from '../../src/contract/canonical.js';
import type { JsonObject, JsonValue } from '../../src/contract/json.js';
import type { ContractRef } from '../../src/contract/types.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';

export const wfCrashPrincipal = 'wf-crash-test';
export const wfCrashPeers = peerIds(3);
export const wfCrashInstances = 6;
/** The worker lease: how long a restarted worker waits before it takes over its predecessor's instances. */
export const wfCrashLeaseMs = 700;
export const wfCrashWaitMs = 400;
export const stagePointers = ['/do/0/review', '/do/2/publish', '/do/3/notify'] as const;

/**
 * The peers answer in the worker's own process, so each kill also ends the attempts they hold
 * (one per kill and open branch), and on a loaded machine a renewal may come late: the lease
 * tolerates 2.5 s without one (renewed every 500 ms), a branch has the most attempts a bundle may
 * give (16, three of which kills can take), and the deadline is far past the test's own bounds —
 * the operations' budget is not what the test measures. A stage that still decides otherwise
 * faults its instance, which the test accepts as such (workflow-crash.test.ts stagesRun).
 */
export function wfCrashBundle(): JsonObject {
  return reviewBundle({ completion: { mode: 'quorum', count: 2 }, timeoutMs: 120_000, leaseMs: 3000, renewIntervalMs: 500, attempts: 16, retryBackoffMs: 100 });
}

const stage = (name: string, ref: ContractRef, document: string) => `  - ${name}:
      call: invoke-contract
      with:
        contract: { id: ${ref.id}, version: '${ref.version}', digest: '${ref.digest}' }
        interaction: review
        input: { document: '${document}' }`;

/** Review, a wait, publish, notify: three contract stages, each one operation. */
export function wfCrashDocument(ref: ContractRef): JsonValue {
  const yaml = `document: { dsl: '1.0.3', namespace: crash, name: pipeline, version: '1.0.0' }
do:
${stage('review', ref, '${ .doc }')}
  - pause:
      wait: { milliseconds: ${wfCrashWaitMs} }
${stage('publish', ref, '${ .operationId }')}
${stage('notify', ref, '${ .operationId }')}
`;
  return parseYaml(yaml) as JsonValue;
}

export const wfCrashKeys = (): string[] => Array.from({ length: wfCrashInstances }, (_, i) => `wf-crash-${i}`);

/** The instance id of a key (the bundle digest is the document's own: the child runs it from a document). */
export function wfCrashInstanceId(document: JsonValue, key: string): string {
  const name = ((document as JsonObject).document as JsonObject).name as string;
  return workflowInstanceId(wfCrashPrincipal, `sha256:${sha256Hex(canonicalJson(document))}`, name, key);
}
