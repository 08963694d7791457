/**
 * `npm run bench -- http`: the HTTP facade end to end — POST /contract-invocations with
 * waitFor decision (5 in-process example peers, quorum 3, memory store) — beside a baseline
 * measured in the same run: a plain Fastify route returning a constant. Both are driven by
 * undici from a second process (this file, started with --load), so the client's work does not
 * share the server's event loop. Prints requests/s and p99 for both and their ratio.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Fastify from 'fastify';
import { Agent, request } from 'undici';
import type { ContractRef } from '../src/contract/types.js';
import { SystemClock } from '../src/contract/clock.js';
import { buildDeployment, readDeploymentConfig } from '../src/deployment/config.js';
import { peerIds, reviewBundle } from '../src/deployment/examples.js';
import { loadBundle } from '../src/contract/bundle.js';
import { startHttpServer } from '../src/http/server.js';
import { fixed, percentile, printRows } from './stats.js';

export interface HttpBenchOptions {
  json: boolean;
  seconds?: number;
  concurrency?: number;
}

/** What the load process is told (as JSON on its command line) and answers (as JSON on stdout). */
interface LoadSpec {
  target: 'facade' | 'baseline';
  url: string;
  seconds: number;
  concurrency: number;
  warmupRequests: number;
  token?: string;
  contract?: ContractRef;
}

interface LoadResult {
  requests: number;
  seconds: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  statuses: Record<string, number>;
}

const thisFile = fileURLToPath(import.meta.url);

export async function httpBench(options: HttpBenchOptions): Promise<void> {
  const seconds = options.seconds ?? 5;
  const concurrency = options.concurrency ?? 32;
  const baselineApp = Fastify({ logger: false });
  baselineApp.get('/constant', async () => ({ ok: true }));
  const baselineUrl = await baselineApp.listen({ host: '127.0.0.1', port: 0 });
  const facade = await startFacade();
  try {
    const common = { seconds, concurrency, warmupRequests: 500 };
    const baseline = await runLoad({ ...common, target: 'baseline', url: `${baselineUrl}/constant` });
    const convoke = await runLoad({ ...common, target: 'facade', url: `${facade.url}/contract-invocations`, token: facade.token, contract: facade.contract });
    report(options.json, { seconds, concurrency, baseline, convoke });
  } finally {
    await baselineApp.close();
    await facade.close();
  }
}

function report(json: boolean, r: { seconds: number; concurrency: number; baseline: LoadResult; convoke: LoadResult }): void {
  const ratio = { throughput: r.convoke.requestsPerSecond / r.baseline.requestsPerSecond, p99: r.convoke.p99Ms / r.baseline.p99Ms };
  const row = (name: string, m: LoadResult) => [name, fixed(m.requestsPerSecond, 0), fixed(m.p50Ms), fixed(m.p99Ms), m.requests, m.errors];
  printRows(
    json,
    `HTTP facade vs plain Fastify — ${r.seconds} s each, ${r.concurrency} concurrent requests from a second process (undici)`,
    ['target', 'requests/s', 'p50 ms', 'p99 ms', 'requests', 'errors'],
    [
      row('POST /contract-invocations (waitFor decision; 5 peers, quorum 3, memory)', r.convoke),
      row('plain Fastify GET returning a constant', r.baseline),
      ['ratio facade/baseline', `${fixed(ratio.throughput, 3)}x`, null, `${fixed(ratio.p99, 1)}x`, null, null],
    ],
    { ...r, ratio },
  );
}

/** The facade in this process: a temp config with 5 example peers that approve immediately. */
async function startFacade() {
  const dir = await mkdtemp(join(tmpdir(), 'convoke-bench-http-'));
  const peers = peerIds(5);
  const bundle = reviewBundle({ completion: { mode: 'quorum', count: 3 }, timeoutMs: 30_000, leaseMs: 30_000 });
  const token = randomBytes(24).toString('hex');
  const config = {
    store: 'memory:',
    transport: { kind: 'memory', examplePeers: Object.fromEntries(peers.map((p) => [p, { review: { verdict: 'approve' } }])) },
    bundles: ['bundle.json'],
    directory: { groups: { reviewers: peers } },
    policy: { rules: [{ effect: 'allow' }] },
    attestations: [{ namespace: bundle.subjectNamespace as string, exclusivePeerPublishers: true }],
    deployment: { account: 'bench', system: 'convoke', domain: 'bench' },
    http: {
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 65_536,
      waitMsMax: 30_000,
      principals: [{ principalId: 'bench', tokenSha256: createHash('sha256').update(token).digest('hex') }],
    },
  };
  await writeFile(join(dir, 'bundle.json'), JSON.stringify(bundle));
  await writeFile(join(dir, 'convoke.json'), JSON.stringify(config));
  const deployment = await buildDeployment(await readDeploymentConfig(join(dir, 'convoke.json')), { clock: new SystemClock() });
  const server = await startHttpServer(deployment);
  return {
    url: server.url,
    token,
    contract: loadBundle(bundle).ref,
    close: async () => {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Runs the load generator in a child process (tsx when this file runs from source). */
function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const args = thisFile.endsWith('.ts') ? ['--import', 'tsx', thisFile] : [thisFile];
  const child = spawn(process.execPath, [...args, '--load', JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`load generator for ${spec.target} exited with ${code}`));
      try {
        resolve(JSON.parse(out) as LoadResult);
      } catch (error) {
        reject(new Error(`load generator for ${spec.target} printed no result: ${out.slice(0, 200)}`, { cause: error }));
      }
    });
  });
}

// ── the load process ─────────────────────────────────────────────────────────

async function load(spec: LoadSpec): Promise<LoadResult> {
  const agent = new Agent({ connections: spec.concurrency, pipelining: 1, keepAliveTimeout: 30_000 });
  const send = sender(spec, agent);
  for (let i = 0; i < spec.warmupRequests; i++) await send(`warm-${i}`);
  const latenciesMs: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  let next = 0;
  const start = performance.now();
  const endAt = start + spec.seconds * 1000;
  const worker = async () => {
    while (performance.now() < endAt) {
      const t0 = performance.now();
      const status = await send(`k-${next++}`).catch(() => 0);
      latenciesMs.push(performance.now() - t0);
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status !== 200) errors++;
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, worker));
  const seconds = (performance.now() - start) / 1000;
  await agent.close();
  latenciesMs.sort((a, b) => a - b);
  return {
    requests: latenciesMs.length,
    seconds,
    requestsPerSecond: latenciesMs.length / seconds,
    p50Ms: percentile(latenciesMs, 50),
    p99Ms: percentile(latenciesMs, 99),
    errors,
    statuses,
  };
}

/** One request to the target; resolves with the status (the facade must answer 200 with a success decision). */
function sender(spec: LoadSpec, agent: Agent): (key: string) => Promise<number> {
  if (spec.target === 'baseline') {
    return async () => {
      const response = await request(spec.url, { dispatcher: agent });
      await response.body.dump();
      return response.statusCode;
    };
  }
  const headers = { authorization: `Bearer ${spec.token}`, 'content-type': 'application/json' };
  const prefix = `${process.pid}-${randomBytes(4).toString('hex')}`;
  return async (key) => {
    const body = JSON.stringify({
      contract: spec.contract,
      interaction: 'review',
      invocationKey: `${prefix}-${key}`,
      input: { document: 'bench' },
      waitFor: 'decision',
      waitMs: 10_000,
    });
    const response = await request(spec.url, { method: 'POST', headers, body, dispatcher: agent });
    const result = (await response.body.json()) as { decision?: { outcome?: string } | null };
    return response.statusCode === 200 && result.decision?.outcome !== 'success' ? -1 : response.statusCode;
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--load');
  if (at >= 0) {
    process.stdout.write(JSON.stringify(await load(JSON.parse(args[at + 1]!) as LoadSpec)) + '\n');
  } else {
    const secondsAt = args.indexOf('--seconds');
    await httpBench({ json: args.includes('--json'), ...(secondsAt >= 0 ? { seconds: Number(args[secondsAt + 1]) } : {}) });
  }
}
