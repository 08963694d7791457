/**
 * Metrics by the Prometheus conventions (every registered metric's name and type) and the
 * operation lifecycle as log lines (fields present, no input or credential). The exposition of a
 * running `convoke serve` is checked by promtool in test/integration/observability.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { Metrics, namingProblems, observeOpenOperations, observeProcess, observeStampSources } from '../../src/runtime/metrics.js';
import type { Logger } from '../../src/runtime/operation-log.js';
import type { JsonObject } from '../../src/contract/json.js';
import { VirtualClock, flushMicrotasks } from '../../src/contract/clock.js';
import { limits } from '../../src/contract/limits.js';
import { createEmbedded, peerBusPermissions } from '../../src/deployment/embedded.js';
import { peerIds, reviewBundle } from '../../src/deployment/examples.js';
import { subjectFor } from '../../src/adapters/transport/subjects.js';
import { buildFixtureApp, requestBody, writeHttpFixture } from '../support/http-fixtures.js';

type Line = { level: string; message: string } & Record<string, unknown>;

/** A Logger that keeps what it is given, as pino would write it. */
function capture(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (fields: object, message: string) => void lines.push({ ...JSON.parse(JSON.stringify(fields)), level, message } as Line);
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}

const typeOf = async (registry: Registry, name: string) => String((await registry.getMetricsAsJSON()).find((m) => m.name === name)?.type ?? 'absent');

test('every metric of a serving deployment follows the naming rules: counters and only counters end in _total, base units, help text', async () => {
  const fixture = await writeHttpFixture({ peerDelayMs: 5 });
  const app = await buildFixtureApp(fixture);
  try {
    const registry = app.deployment.coordinator.metrics.registry;
    observeProcess(app.deployment.coordinator.metrics, { version: '9.9.9', nodeVersion: process.versions.node, commit: 'abcdef1' });
    observeStampSources(app.deployment.coordinator.metrics, { stampSources: { fed: 1, readBack: 0 } });
    const auth = { authorization: `Bearer ${fixture.tokens.alice}` };
    const invoked = await app.http.app.inject({ method: 'POST', url: '/contract-invocations', headers: auth, payload: requestBody(fixture, { waitMs: 5000 }) });
    assert.equal(invoked.statusCode, 200, invoked.body);
    await app.http.app.inject({ method: 'GET', url: '/nowhere?token=abc' });
    assert.deepEqual(await namingProblems(registry), []);

    assert.equal(await typeOf(registry, 'convoke_decision_duration_seconds'), 'histogram');
    assert.equal(await typeOf(registry, 'convoke_http_request_duration_seconds'), 'histogram');
    assert.equal(await typeOf(registry, 'convoke_store_stamps_total'), 'counter');
    assert.equal(await typeOf(registry, 'convoke_operations_open'), 'gauge');
    assert.equal(await typeOf(registry, 'convoke_build_info'), 'gauge');
    assert.equal(await typeOf(registry, 'process_cpu_seconds_total'), 'counter');
    assert.equal(await typeOf(registry, 'nodejs_eventloop_lag_seconds'), 'gauge');
    for (const old of ['convoke_decision_latency_ms', 'convoke_store_stamps', 'nodejs_active_handles_total'])
      assert.equal(await typeOf(registry, old), 'absent', `${old} is gone`);

    const text = await registry.metrics();
    assert.match(text, /^convoke_build_info\{version="9\.9\.9",node_version="[^"]+",commit="abcdef1"\} 1$/m);
    assert.match(text, /^convoke_decision_duration_seconds_count\{outcome="success"\} 1$/m);
    assert.match(text, /^convoke_http_request_duration_seconds_count\{method="POST",route="\/contract-invocations",status_class="2xx"\} 1$/m);
    // Routes are templates, never raw URLs (no query string, no ids).
    assert.match(text, /^convoke_http_request_duration_seconds_count\{method="GET",route="unmatched",status_class="4xx"\} 1$/m);
    assert.doesNotMatch(text, /nowhere|token=/);
  } finally {
    await app.close();
    await fixture.dispose();
  }
});

test('the naming check reports each kind of violation (it can fail)', async () => {
  const registry = new Registry();
  new Gauge({ name: 'bad_things_total', help: 'a gauge named like a counter', registers: [registry] });
  new Counter({ name: 'bad_events', help: 'a counter without _total', registers: [registry] });
  new Histogram({ name: 'bad_latency_ms', help: 'milliseconds', registers: [registry] });
  new Gauge({ name: 'badCamel', help: 'camel case', registers: [registry] });
  const problems = await namingProblems(registry);
  assert.ok(
    problems.some((p) => p.startsWith('bad_things_total: a gauge must not end in _total')),
    problems.join('\n'),
  );
  assert.ok(problems.some((p) => p.startsWith('bad_events: a counter must end in _total')));
  assert.ok(problems.some((p) => p.startsWith('bad_latency_ms: "ms" is not a base unit')));
  assert.ok(problems.some((p) => p.startsWith('badCamel: not snake case')));
});

test('convoke_store_stamps_total is a counter that follows the store running counts; convoke_operations_open counts by stage', async () => {
  const metrics = new Metrics();
  const store = { stampSources: { fed: 3, readBack: 1 } };
  observeStampSources(metrics, store);
  const open = [{ decided: false }, { decided: false }, { decided: true }];
  observeOpenOperations(metrics, () => open);
  const value = async (name: string, label: string, labelValue: string) =>
    (await metrics.registry.getSingleMetric(name)!.get()).values.find((v) => v.labels[label] === labelValue)?.value;
  assert.equal(await value('convoke_store_stamps_total', 'source', 'fed'), 3);
  assert.equal(await value('convoke_store_stamps_total', 'source', 'read-back'), 1);
  store.stampSources.fed = 7;
  assert.equal(await value('convoke_store_stamps_total', 'source', 'fed'), 7);
  assert.equal(await value('convoke_store_stamps_total', 'source', 'read-back'), 1);
  assert.equal(await value('convoke_operations_open', 'stage', 'deciding'), 2);
  assert.equal(await value('convoke_operations_open', 'stage', 'settling'), 1);
  open.length = 0;
  assert.equal(await value('convoke_operations_open', 'stage', 'deciding'), 0);
});

test('the operation lifecycle is logged (admitted, decided, settled, rejected) with operation, contract, interaction and principal, never the input', async () => {
  const clock = new VirtualClock();
  const { logger, lines } = capture();
  const base = reviewBundle({ completion: { mode: 'first-success' } });
  const review = (base.interactions as Record<string, JsonObject>).review!;
  const e = await createEmbedded({
    clock,
    bundle: { ...base, interactions: { review, audit: review } },
    groups: { reviewers: peerIds(3) },
    resultBatchMs: 0,
    logger,
  });
  try {
    const secret = 'INPUT-SECRET-4f1d2c';
    const caller = { principalId: 'svc-a', senderPeerId: null };
    const { result } = await e.coordinator.invoke(caller, { contract: e.bundle.ref, interaction: 'review', invocationKey: 'k-1', input: { document: secret } });
    const op = result.operationId;
    await e.coordinator.invoke(caller, { contract: e.bundle.ref, interaction: 'audit', invocationKey: 'k-2', input: { document: secret } });
    await flushMicrotasks();
    // A result for this operation published on another interaction's subject: rejected, wrong-subject.
    const alfa = e.bus.connect('raw:alfa', peerBusPermissions('demo.v1.lab', 'alfa'));
    const body = { kind: 'result', operationId: op, branchId: 'alfa', peerId: 'alfa', attempt: 1, fence: 1, result: { verdict: 'approve' } };
    await alfa.publish(subjectFor('demo.v1.lab', 'audit', op, 'result', 'alfa'), new TextEncoder().encode(JSON.stringify(body)));
    await flushMicrotasks();
    // Every branch times out: decided failed, settled.
    await clock.advance(60 * 60 * 1000);
    await flushMicrotasks();

    const about = (event: string) => lines.filter((l) => l.event === event && l.operationId === op);
    const [admitted] = about('operation-admitted');
    assert.ok(admitted, JSON.stringify(lines));
    assert.deepEqual([admitted.contract, admitted.interaction, admitted.principal, admitted.level], ['lab.review@1.0.0', 'review', 'svc-a', 'info']);
    const [decided] = about('operation-decided');
    assert.ok(decided, JSON.stringify(lines));
    assert.equal(decided.principal, 'svc-a');
    assert.equal(typeof decided.outcome, 'string');
    assert.equal(typeof decided.decisionMs, 'number');
    assert.ok(about('operation-settled').length === 1, JSON.stringify(lines));
    const [rejected] = about('message-rejected');
    assert.ok(rejected, JSON.stringify(lines));
    assert.deepEqual(
      [rejected.reason, rejected.peer, rejected.messageKind, rejected.interaction, rejected.level],
      ['wrong-subject', 'alfa', 'result', 'review', 'warn'],
    );
    assert.ok(!JSON.stringify(lines).includes(secret), 'no line carries the input');
  } finally {
    await e.close();
  }
});

test('a peer that floods its subjects is counted in full but logged at most rejectionLogLinesPerSecondMax lines a second; the next line says how many were left out', async () => {
  const clock = new VirtualClock();
  const { logger, lines } = capture();
  const e = await createEmbedded({
    clock,
    bundle: reviewBundle({ completion: { mode: 'first-success' } }),
    groups: { reviewers: peerIds(3) },
    resultBatchMs: 0,
    logger,
  });
  try {
    const { result } = await e.coordinator.invoke(
      { principalId: 'svc-a', senderPeerId: null },
      { contract: e.bundle.ref, interaction: 'review', invocationKey: 'k-flood', input: { document: 'd' } },
    );
    await flushMicrotasks();
    const alfa = e.bus.connect('raw:alfa', peerBusPermissions('demo.v1.lab', 'alfa'));
    const subject = subjectFor('demo.v1.lab', 'review', result.operationId, 'result', 'alfa');
    const flood = 50;
    for (let i = 0; i < flood; i++) await alfa.publish(subject, new TextEncoder().encode('{"not": "a result"'));
    await flushMicrotasks();
    const counted = (await e.coordinator.metrics.rejections.get()).values.find((v) => v.labels.reason === 'malformed')?.value;
    assert.equal(counted, flood, 'every rejection is counted');
    const logged = () => lines.filter((l) => l.event === 'message-rejected' && l.reason === 'malformed');
    assert.equal(logged().length, limits.rejectionLogLinesPerSecondMax);
    await clock.advance(1000);
    await alfa.publish(subject, new TextEncoder().encode('{}'));
    await flushMicrotasks();
    assert.equal(logged().length, limits.rejectionLogLinesPerSecondMax + 1);
    assert.equal(logged().at(-1)?.suppressedBefore, flood - limits.rejectionLogLinesPerSecondMax);
  } finally {
    await e.close();
  }
});
