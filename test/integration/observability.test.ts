/**
 * A real `convoke serve` child process over a real socket: its /metrics exposition passes
 * `promtool check metrics` (Debian's prometheus package, installed by scripts/ensure-test-tools.sh
 * in `npm test`'s pretest), and its standard error is JSON lines that carry the request and
 * operation fields and no credential, input or query string.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { requestBody, writeHttpFixture, type HttpFixture } from '../support/http-fixtures.js';
import { startServe, type ServeProcess } from '../support/http-server.js';

const promtool = ['/usr/bin/promtool', 'promtool'].find((p) => spawnSync(p, ['--version']).status === 0);

type Line = Record<string, unknown>;

interface Secrets {
  input: string;
  query: string;
  wrongToken: string;
}

interface Run {
  operationId: string;
  metricsText: string;
  stderr: string;
  lines: Line[];
}

/**
 * The served traffic: an invocation whose input carries a marker (waited until settled), a wrong
 * token (401), a denied principal (403), a read, a read whose query string carries a marker (400),
 * an unknown route with one (404), and a scrape; then a graceful stop, and stderr as JSON lines.
 */
async function exercise(server: ServeProcess, fixture: HttpFixture, secrets: Secrets): Promise<Run> {
  const post = (token: string, body: object) =>
    fetch(`${server.url}/contract-invocations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const invoked = await post(fixture.tokens.alice, requestBody(fixture, { waitFor: 'settled', waitMs: 5000, input: { document: secrets.input } }));
  assert.equal(invoked.status, 200, `${invoked.status}: ${await invoked.clone().text()}`);
  const operationId = ((await invoked.json()) as { operationId: string }).operationId;
  assert.equal((await post(secrets.wrongToken, requestBody(fixture))).status, 401);
  assert.equal((await post(fixture.tokens.bob, requestBody(fixture, { interaction: 'restricted', input: { document: secrets.input } }))).status, 403);
  const get = (query: string) =>
    fetch(`${server.url}/contract-invocations/${operationId}${query}`, { headers: { authorization: `Bearer ${fixture.tokens.alice}` } });
  assert.equal((await get('')).status, 200);
  assert.equal((await get(`?password=${secrets.query}`)).status, 400);
  assert.equal((await fetch(`${server.url}/no/such/route?token=${secrets.query}`)).status, 404);
  const scraped = await fetch(`${server.url}/metrics`);
  assert.equal(scraped.status, 200);
  const metricsText = await scraped.text();
  assert.equal(await server.stop(), 0, server.stderr());
  const stderr = server.stderr();
  const lines = stderr
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      try {
        return JSON.parse(l) as Line;
      } catch {
        return assert.fail(`a log line that is not JSON: ${l}`);
      }
    });
  return { operationId, metricsText, stderr, lines };
}

test('promtool does fail on an exposition that breaks the conventions (the check can fail)', () => {
  assert.ok(promtool, 'promtool is installed');
  const bad = '# HELP convoke_decision_latency_ms Admission to decision\n# TYPE convoke_decision_latency_ms gauge\nconvoke_decision_latency_ms 3\n';
  assert.notEqual(spawnSync(promtool, ['check', 'metrics'], { input: bad, encoding: 'utf8' }).status, 0);
});

/** Samples the exposition must hold after the exercise (prefixes of lines). */
const expectedSamples = [
  'convoke_build_info{version="0.1.0",node_version="',
  'process_cpu_seconds_total ',
  'process_resident_memory_bytes ',
  'nodejs_eventloop_lag_seconds ',
  'nodejs_heap_size_used_bytes ',
  'convoke_operations_open{stage="deciding"} 0',
  'convoke_decision_duration_seconds_bucket{le="',
  'convoke_http_request_duration_seconds_bucket{le="',
  'convoke_admissions_total 1',
  'convoke_settlements_total{status="complete"} 1',
];

describe('convoke serve: metrics by convention, JSON logs without secrets', () => {
  let fixture: HttpFixture;
  let server: ServeProcess;
  const secrets: Secrets = {
    input: `input-secret-${randomBytes(8).toString('hex')}`,
    query: `query-secret-${randomBytes(8).toString('hex')}`,
    wrongToken: `wrong-token-${randomBytes(8).toString('hex')}`,
  };
  let run: Run;

  before(async () => {
    fixture = await writeHttpFixture({ peerDelayMs: 20 });
    server = await startServe(fixture.configPath, { args: ['--log-level', 'info'] });
    run = await exercise(server, fixture, secrets);
  });
  after(async () => {
    await server?.stop();
    await fixture?.dispose();
  });

  test('promtool check metrics passes on the exposition of the running server', () => {
    assert.ok(promtool, "promtool is installed (scripts/ensure-test-tools.sh installs Debian's prometheus package)");
    const checked = spawnSync(promtool, ['check', 'metrics'], { input: run.metricsText, encoding: 'utf8' });
    assert.equal(checked.status, 0, `promtool check metrics:\n${checked.stdout}${checked.stderr}`);
    assert.equal(`${checked.stdout}${checked.stderr}`.trim(), '', 'no lint finding');
  });

  test('the exposition has build info, process and runtime metrics, the histograms, the open-operations gauge, and none of the old names', () => {
    for (const sample of expectedSamples) assert.ok(run.metricsText.includes(sample), `${sample} in\n${run.metricsText}`);
    assert.match(run.metricsText, /^convoke_http_request_duration_seconds_count\{method="POST",route="\/contract-invocations",status_class="4xx"\} 2$/m);
    assert.match(
      run.metricsText,
      /^convoke_http_request_duration_seconds_count\{method="GET",route="\/contract-invocations\/:operationId",status_class="2xx"\} 1$/m,
    );
    assert.ok(!run.metricsText.includes(secrets.query) && !run.metricsText.includes(run.operationId), 'routes are templates, not URLs');
    for (const old of ['convoke_decision_latency_ms', 'convoke_store_stamps{']) assert.ok(!run.metricsText.includes(old), old);
  });

  test('logs are JSON lines: one per request with id, method, route template, status and duration', () => {
    const requests = run.lines.filter((l) => l.event === 'http-request');
    assert.equal(requests.length, 7, JSON.stringify(requests));
    for (const l of requests) {
      assert.equal(typeof l.reqId, 'string');
      assert.equal(typeof l.durationMs, 'number');
      assert.equal(typeof l.time, 'number');
      assert.equal(typeof l.level, 'number');
    }
    assert.deepEqual(
      requests.map((l) => `${String(l.method)} ${String(l.route)} ${String(l.status)}`),
      [
        'POST /contract-invocations 200',
        'POST /contract-invocations 401',
        'POST /contract-invocations 403',
        'GET /contract-invocations/:operationId 200',
        'GET /contract-invocations/:operationId 400',
        'GET unmatched 404',
        'GET /metrics 200',
      ],
    );
    assert.equal(new Set(requests.map((l) => l.reqId)).size, requests.length, 'request ids are distinct');
  });

  test('the operation lifecycle is logged with operation id, contract, interaction and principal', () => {
    const of = (event: string) => run.lines.filter((l) => l.event === event && l.operationId === run.operationId);
    for (const event of ['operation-admitted', 'operation-decided', 'operation-settled']) {
      const [line] = of(event);
      assert.ok(line, `${event} in ${JSON.stringify(run.lines)}`);
      assert.deepEqual([line.contract, line.interaction, line.principal], [`${fixture.contract.id}@${fixture.contract.version}`, 'review', 'alice']);
    }
    assert.equal(of('operation-decided')[0]?.outcome, 'success');
    assert.ok(run.lines.some((l) => l.event === 'serve-started') && run.lines.some((l) => l.event === 'serve-stopped'), 'start and stop are logged');
  });

  test('no log line carries a token, an input, a query string or a header', () => {
    const text = run.stderr;
    for (const secret of [fixture.tokens.alice, fixture.tokens.bob, secrets.wrongToken, secrets.input, secrets.query, 'Bearer', 'authorization']) {
      assert.ok(!text.toLowerCase().includes(secret.toLowerCase()), `the logs contain ${secret}`);
    }
  });
});
