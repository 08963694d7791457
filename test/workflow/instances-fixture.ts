/**
 * A deployment hosting workflow instances, written to a temp dir: the review-then-publish bundle
 * (test/workflow/fixtures) plus three workflows the caller may cancel — `slow` (a long wait),
 * `held` (a contract call nobody answers) and `delegating` (runs `slow` as its child instance) — with in-process example peers (three reviewers approve, one publisher
 * publishes), and two bearer principals (alice, bob).
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadBundle } from '../../src/contract/bundle.js';
import { SystemClock } from '../../src/contract/clock.js';
import type { JsonObject } from '../../src/contract/json.js';
import type { ContractRef } from '../../src/contract/types.js';
import { buildDeployment, readDeploymentConfig } from '../../src/deployment/config.js';
import type { RunningDeployment } from '../../src/deployment/types.js';
import { startHttpServer, type RunningServer } from '../../src/http/server.js';
import { createWorkflowHost, type WorkflowHost } from '../../src/cli/workflow-host.js';
import { repoRoot } from '../support/assertions.js';

export const sha256Hex = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

export function workflowBundle(): JsonObject {
  const bundle = JSON.parse(readFileSync(join(repoRoot(), 'test', 'workflow', 'fixtures', 'review-publish.bundle.json'), 'utf8')) as JsonObject;
  (bundle.workflows as JsonObject).slow = {
    document: { dsl: '1.0.3', namespace: 'lab', name: 'slow', version: '1.0.0' },
    do: [{ pause: { wait: { seconds: 60 } } }, { done: { set: { done: true } } }],
  };
  // `held`: one reviewer who never answers (zulu runs no peer), so the operation stays open until cancelled.
  const interactions = bundle.interactions as JsonObject;
  interactions.held = { ...(interactions.review as JsonObject), audience: { group: 'silent' }, completion: { mode: 'all-successful' }, cancellation: 'caller' };
  delete (interactions.held as JsonObject).waitFor;
  (bundle.workflows as JsonObject).held = {
    document: { dsl: '1.0.3', namespace: 'lab', name: 'held', version: '1.0.0' },
    do: [
      {
        ask: { call: 'invoke-contract', with: { contract: { id: 'lab.review', version: '1.0.0' }, interaction: 'held', input: '${ {document: .document} }' } },
      },
    ],
  };
  // `delegating`: runs `slow` as its child instance (run: workflow, the same bundle).
  (bundle.workflows as JsonObject).delegating = {
    document: { dsl: '1.0.3', namespace: 'lab', name: 'delegating', version: '1.0.0' },
    do: [{ delegate: { run: { workflow: { namespace: 'lab', name: 'slow', version: '1.0.0' } } } }],
  };
  bundle.workflowCancellation = { slow: 'caller', held: 'caller', delegating: 'caller' };
  return bundle;
}

export interface WorkflowFixture {
  dir: string;
  configPath: string;
  bundle: ContractRef;
  /** ops is an operator principal (it lists and inspects every principal's instances). */
  tokens: { alice: string; bob: string; ops: string };
  dispose(): Promise<void>;
}

export async function writeWorkflowFixture(
  options: { store?: string; http?: JsonObject; workflows?: JsonObject; bundleWorkflows?: JsonObject; policy?: JsonObject[] } = {},
): Promise<WorkflowFixture> {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-wf-'));
  const bundle = workflowBundle();
  Object.assign(bundle.workflows as JsonObject, options.bundleWorkflows ?? {});
  await writeFile(join(dir, 'bundle.json'), JSON.stringify(bundle, null, 2));
  const tokens = {
    alice: `alice-${randomBytes(16).toString('hex')}`,
    bob: `bob-${randomBytes(16).toString('hex')}`,
    ops: `ops-${randomBytes(16).toString('hex')}`,
  };
  const reviewer = { delayMs: 20, review: { verdict: 'approve' } };
  const config: JsonObject = {
    store: options.store ?? 'memory:',
    transport: {
      kind: 'memory',
      examplePeers: {
        alfa: reviewer,
        bravo: reviewer,
        charlie: reviewer,
        delta: { delayMs: 20, publish: { status: 'published', url: 'https://lab.example/p/1' } },
      },
    },
    bundles: ['bundle.json'],
    directory: { groups: { reviewers: ['alfa', 'bravo', 'charlie'], publishers: ['delta'], silent: ['zulu'] } },
    policy: { rules: options.policy ?? [{ effect: 'allow' }], ttlMs: 60_000 },
    attestations: [{ namespace: 'demo.v1.lab', exclusivePeerPublishers: true }],
    deployment: { account: 'test', system: 'convoke', domain: 'workflow-tests' },
    operators: ['ops'],
    ...(options.workflows ? { workflows: options.workflows } : {}),
    http: {
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 64 * 1024,
      waitMsMax: 10_000,
      principals: [
        { principalId: 'alice', tokenSha256: sha256Hex(tokens.alice) },
        { principalId: 'bob', tokenSha256: sha256Hex(tokens.bob) },
        { principalId: 'ops', tokenSha256: sha256Hex(tokens.ops) },
      ],
      ...options.http,
    },
  };
  const configPath = join(dir, 'convoke.json');
  await writeFile(configPath, JSON.stringify(config, null, 2));
  return { dir, configPath, bundle: loadBundle(bundle).ref, tokens, dispose: () => rm(dir, { recursive: true, force: true }) };
}

export interface HostedWorkflows {
  deployment: RunningDeployment;
  host: WorkflowHost;
  server: RunningServer;
  close(): Promise<void>;
}

/** The fixture's deployment with workflow instances, its HTTP facade listening on a loopback port. */
export async function serveWorkflowFixture(fixture: WorkflowFixture): Promise<HostedWorkflows> {
  let host: WorkflowHost | undefined;
  const deployment = await buildDeployment(await readDeploymentConfig(fixture.configPath), {
    clock: new SystemClock(),
    workflows: async (parts) => (host = await createWorkflowHost({ ...parts, seed: 7 })),
  });
  if (!host) throw new Error('the deployment did not host workflows');
  const server = await startHttpServer(deployment, { onInternalError: (e) => console.error('internal error', e) });
  return { deployment, host, server, close: () => server.close() };
}
