/**
 * A real `convoke serve` child process over a real socket: its /metrics exposition passes
 * `promtool check metrics` (Debian's prometheus package, installed by scripts/ensure-promtool.sh
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

describe('convoke serve: metrics by convention, JSON logs without secrets', () => {
  let fixture: HttpFixture;
  let server: ServeProcess;
  const inputSecret = `input-secret-${randomBytes(8).toString('hex')}`;
  const querySecret = `query-secret-${randomBytes(8).toString('hex')}`;
  const wrongToken = `wrong-token-${randomBytes(8).toString('hex')}`;
  let operationId = '';
  let metricsText = '';
  let lines: Line[] = [];

  before(async () => {
    fixture = await writeHttpFixture({ peerDelayMs: 20 });
    server = await startServe(fixture.configPath, { args: ['--log-level', 'info'] });
    const post = (token: string, body: object) =>
      fetch(`${server.url}/contract-invocations?waitFor=settled&waitMs=5000`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const invoked = await post(fixture.tokens.alice, requestBody(fixture, { input: { document: inputSecret } }));
    assert.equal(invoked.status, 200, await invoked.clone().text());
    operationId = ((await invoked.json()) as { operationId: string }).operationId;
    assert.equal((await post(wrongToken, requestBody(fixture))).status, 401);
    assert.equal((await post(fixture.tokens.bob, requestBody(fixture, { interaction: 'restricted', input: { document: inputSecret } }))).status, 403);
    assert.equal((await fetch(`${server.url}/contract-invocations/${operationId}?password=${querySecret}`, { headers: { authorization: `Bearer ${fixture.tokens.alice}` } })).status, 200);
    assert.equal((await fetch(`${server.url}/no/such/route?token=${querySecret}`)).status, 404);
    const scraped = await fetch(`${server.url}/metrics`);
    assert.equal(scraped.status, 200);
    metricsText = await scraped.text();
    assert.equal(await server.stop(), 0, server.stderr());
    lines = server
      .stderr()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => {
        try {
          return JSON.parse(l) as Line;
        } catch {
          assert.fail(`a log line that is not JSON: ${l}`);
        }
      });
  });
  after(async () => {
    await server?.stop();
    await fixture?.dispose();
  });

  test('promtool check metrics passes on the exposition of the running server', () => {
    assert.ok(promtool, 'promtool is installed (scripts/ensure-promtool.sh installs Debian\'s prometheus package)');
    const checked = spawnSync(promtool, ['check', 'metrics'], { input: metricsText, encoding: 'utf8' });
    assert.equal(checked.status, 0, `promtool check metrics:\n${checked.stdout}${checked.stderr}`);
    assert.equal(`${checked.stdout}${checked.stderr}`.trim(), '', 'no lint finding');
  });

  test('promtool does fail on an exposition that breaks the conventions (the check can fail)', () => {
    assert.ok(promtool);
    const bad = '# HELP convoke_decision_latency_ms Admission to decision\n# TYPE convoke_decision_latency_ms gauge\nconvoke_decision_latency_ms 3\n';
    assert.notEqual(spawnSync(promtool, ['check', 'metrics'], { input: bad, encoding: 'utf8' }).status, 0);
  });

  test('the exposition has build info, process and runtime metrics, the histograms, the open-operations gauge, and none of the old names', () => {
    for (const name of [
      'convoke_build_info{version="0.1.0",node_version="',
      'process_cpu_seconds_total ',
      'process_resident_memory_bytes ',
      'nodejs_eventloop_lag_seconds ',
      'nodejs_heap_size_used_bytes ',
      'convoke_operations_open{stage="deciding"} 0',
      'convoke_decision_duration_seconds_bucket{le="',
      'convoke_http_request_duration_seconds_bucket{le="',
      'convoke_admissions_total 1',
    ]) {
      assert.ok(metricsText.includes(name), `${name} in\n${metricsText}`);
    }
    assert.match(metricsText, /^convoke_http_request_duration_seconds_count\{method="POST",route="\/contract-invocations",status_class="4xx"\} 2$/m);
    assert.match(metricsText, /^convoke_http_request_duration_seconds_count\{method="GET",route="\/contract-invocations\/:operationId",status_class="2xx"\} 1$/m);
    assert.ok(!metricsText.includes(querySecret) && !metricsText.includes(operationId), 'routes are templates, not URLs');
    for (const old of ['convoke_decision_latency_ms', 'convoke_store_stamps{']) assert.ok(!metricsText.includes(old), old);
  });

  test('logs are JSON lines: one per request with id, method, route template, status and duration', () => {
    const requests = lines.filter((l) => l.event === 'http-request');
    assert.equal(requests.length, 6, JSON.stringify(requests));
    for (const l of requests) {
      assert.equal(typeof l.reqId, 'string');
      assert.equal(typeof l.durationMs, 'number');
      assert.equal(typeof l.time, 'number');
      assert.equal(typeof l.level, 'number');
    }
    assert.deepEqual(
      requests.map((l) => `${String(l.method)} ${String(l.route)} ${String(l.status)}`),
      ['POST /contract-invocations 200', 'POST /contract-invocations 401', 'POST /contract-invocations 403', 'GET /contract-invocations/:operationId 200', 'GET unmatched 404', 'GET /metrics 200'],
    );
    assert.equal(new Set(requests.map((l) => l.reqId)).size, requests.length, 'request ids are distinct');
  });

  test('the operation lifecycle is logged with operation id, contract, interaction and principal', () => {
    const of = (event: string) => lines.filter((l) => l.event === event && l.operationId === operationId);
    for (const event of ['operation-admitted', 'operation-decided', 'operation-settled']) {
      const [line] = of(event);
      assert.ok(line, `${event} in ${JSON.stringify(lines)}`);
      assert.deepEqual([line.contract, line.interaction, line.principal], [`${fixture.contract.id}@${fixture.contract.version}`, 'review', 'alice']);
    }
    assert.equal(of('operation-decided')[0]?.outcome, 'success');
    assert.ok(lines.some((l) => l.event === 'serve-started') && lines.some((l) => l.event === 'serve-stopped'), 'start and stop are logged');
  });

  test('no log line carries a token, an input, a query string or a header', () => {
    const text = server.stderr();
    for (const secret of [fixture.tokens.alice, fixture.tokens.bob, wrongToken, inputSecret, querySecret, 'Bearer', 'authorization']) {
      assert.ok(!text.toLowerCase().includes(secret.toLowerCase()), `the logs contain ${secret}`);
    }
  });
});
