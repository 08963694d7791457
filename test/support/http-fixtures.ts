/**
 * A deployment for HTTP tests, written to a temp dir: one bundle with four interactions, three
 * in-process example peers, two bearer principals (alice, bob), a policy that denies bob one
 * interaction. Tokens are random per fixture; the config holds only their SHA-256 hashes.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadBundle } from '../../src/contract/bundle.js';
import type { CloudEventIntake } from '../../src/contract/cloudevents.js';
import type { JsonObject } from '../../src/contract/json.js';
import type { ContractRef } from '../../src/contract/types.js';
import { reviewBundle } from '../../src/deployment/examples.js';
import { SystemClock, type Clock } from '../../src/contract/clock.js';
import { buildDeployment, readDeploymentConfig } from '../../src/deployment/config.js';
import type { RunningDeployment } from '../../src/deployment/types.js';
import { createHttpApp, type HttpApp } from '../../src/http/app.js';

export interface HttpFixture {
  dir: string;
  configPath: string;
  config: JsonObject;
  contract: ContractRef;
  tokens: { alice: string; bob: string };
  /** Removes the temp dir. */
  dispose(): Promise<void>;
}

export interface FixtureOptions {
  store?: string;
  peerDelayMs?: number;
  bodyLimitBytes?: number;
  waitMsMax?: number;
  drainMs?: number;
  /** Merged into the config's http section last. */
  http?: JsonObject;
}

/**
 * review: quorum 2 of alfa/bravo/charlie, siblings detach, waitFor decision.
 * careful: quorum 2 of alfa/bravo/zulu (zulu never answers), siblings cancel: decided, settlement stays pending.
 * sealed: like review, but the contract's boundary is settled (callers may not weaken it).
 * restricted: like review; bob is denied it.
 * stoppable: all three of alfa/bravo/zulu (never decides before its timeout), caller cancellation.
 */
export function fixtureBundle(): JsonObject {
  const bundle = reviewBundle({ completion: { mode: 'quorum', count: 2 }, timeoutMs: 20_000 });
  const review = (bundle.interactions as JsonObject).review as JsonObject;
  bundle.interactions = {
    review,
    careful: { ...review, audience: { group: 'careful' }, siblings: 'cancel', cancelTimeoutMs: 60_000, settlementGraceMs: 60_000 },
    sealed: { ...review, waitFor: 'settled' },
    restricted: { ...review },
    stoppable: { ...review, audience: { group: 'careful' }, completion: { mode: 'all-successful' }, cancellation: 'caller' },
  };
  return bundle;
}

export const sha256Hex = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

export async function writeHttpFixture(options: FixtureOptions = {}): Promise<HttpFixture> {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-http-'));
  const bundle = fixtureBundle();
  await writeFile(join(dir, 'review.bundle.json'), JSON.stringify(bundle, null, 2));
  const tokens = { alice: `alice-${randomBytes(16).toString('hex')}`, bob: `bob-${randomBytes(16).toString('hex')}` };
  const approve = { verdict: 'approve' };
  const peer = { delayMs: options.peerDelayMs ?? 150, review: approve, careful: approve, sealed: approve, restricted: approve, stoppable: approve };
  const config: JsonObject = {
    store: options.store ?? 'memory:',
    transport: { kind: 'memory', examplePeers: { alfa: peer, bravo: peer, charlie: peer } },
    bundles: ['review.bundle.json'],
    directory: { groups: { reviewers: ['alfa', 'bravo', 'charlie'], careful: ['alfa', 'bravo', 'zulu'] } },
    policy: { rules: [{ effect: 'allow' }, { effect: 'deny', principals: ['bob'], interactions: ['restricted'] }], ttlMs: 60_000 },
    attestations: [{ namespace: 'demo.v1.lab', exclusivePeerPublishers: true }],
    deployment: { account: 'test', system: 'convoke', domain: 'http-tests' },
    http: {
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: options.bodyLimitBytes ?? 64 * 1024,
      waitMsMax: options.waitMsMax ?? 10_000,
      ...(options.drainMs === undefined ? {} : { drainMs: options.drainMs }),
      principals: [
        { principalId: 'alice', tokenSha256: sha256Hex(tokens.alice) },
        { principalId: 'bob', tokenSha256: sha256Hex(tokens.bob) },
      ],
      ...options.http,
    },
  };
  const configPath = join(dir, 'convoke.json');
  await writeFile(configPath, JSON.stringify(config, null, 2));
  return { dir, configPath, config, contract: loadBundle(bundle).ref, tokens, dispose: () => rm(dir, { recursive: true, force: true }) };
}

/** A valid InvocationRequest body for the fixture's contract. */
export function requestBody(fixture: Pick<HttpFixture, 'contract'>, overrides: JsonObject = {}): JsonObject {
  return {
    contract: { ...fixture.contract },
    interaction: 'review',
    invocationKey: `key-${randomBytes(8).toString('hex')}`,
    input: { document: 'RFC: adopt convoke' },
    ...overrides,
  };
}

/** The fixture's deployment and facade in this process (for `app.inject` and in-process listening). */
export async function buildFixtureApp(
  fixture: HttpFixture,
  clock: Clock = new SystemClock(),
  extra: { workflowEvents?: CloudEventIntake } = {},
): Promise<{ deployment: RunningDeployment; http: HttpApp; close(): Promise<void> }> {
  const deployment = await buildDeployment(await readDeploymentConfig(fixture.configPath), { clock });
  const http = createHttpApp({
    coordinator: deployment.coordinator,
    bundles: deployment.bundles,
    clock,
    settings: deployment.http,
    onInternalError: (e) => console.error('internal error', e),
    workflowEvents: extra.workflowEvents,
  });
  // SystemClock timers are unref'd and inject opens no socket: without this the loop could go idle mid-wait.
  const keepAlive = setInterval(() => {}, 1000);
  return {
    deployment,
    http,
    close: async () => {
      clearInterval(keepAlive);
      http.beginShutdown();
      await http.app.close();
      await deployment.close();
    },
  };
}

/** Every operation id the store holds (live streams). */
export async function storedOperationIds(deployment: RunningDeployment): Promise<string[]> {
  const ids: string[] = [];
  for await (const id of deployment.store.operationIds()) ids.push(id);
  return ids;
}
