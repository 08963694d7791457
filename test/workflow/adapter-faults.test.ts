/**
 * A contract call's AdapterError kinds stay distinct as DSL errors (spec: "AdapterError kinds
 * distinguish denial, expired input, unavailability and protocol conflict"): each kind the
 * runtime refuses with, in-process or as the facade's definite answer over HTTP, is its own error
 * type and status at the task, which a `try` can tell apart; none is taken as success.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SystemClock } from '../../src/contract/clock.js';
import { operationId } from '../../src/contract/ids.js';
import { AdapterError, adapterErrorKinds, type AdapterErrorKind } from '../../src/contract/errors.js';
import { HttpContracts, type ContractCalls } from '../../src/workflow/exec/http-contracts.js';
import { harness, runToEnd, yaml } from './support.js';

const sw = 'https://serverlessworkflow.io/spec/1.0.0/errors/';
const expected: Record<AdapterErrorKind, [string, number]> = {
  'invalid-input': [`${sw}validation`, 400],
  denied: [`${sw}authorization`, 403],
  expired: ['https://convoke.dev/errors/workflow/expired', 410],
  unavailable: [`${sw}communication`, 503],
  conflict: [`${sw}communication`, 409],
  'protocol-conflict': ['https://convoke.dev/errors/workflow/protocol-conflict', 409],
  unsupported: [`${sw}configuration`, 400],
};

const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: faults, version: '1.0.0' }
do:
  - review:
      call: invoke-contract
      with:
        contract: { id: lab.review, version: '1.0.0', digest: 'sha256:${'1'.repeat(64)}' }
        interaction: review
        input: { document: x }
`);

const refusing = (kind: AdapterErrorKind): ContractCalls => {
  const refuse = async (): Promise<never> => {
    throw new AdapterError(kind, `refused as ${kind}`);
  };
  return { invoke: refuse, wait: refuse, get: refuse, cancel: refuse };
};

test('each AdapterError kind of an in-process contract call is its own DSL error type and status', async () => {
  const clock = new SystemClock();
  const seen = new Set<string>();
  for (const kind of adapterErrorKinds) {
    const h = harness({ clock, invocations: refusing(kind) });
    try {
      const record = await runToEnd(h, document, {}, `fault-${kind}`);
      assert.equal(record.status, 'faulted', kind);
      assert.deepEqual([record.error?.type, record.error?.status], expected[kind], kind);
      assert.equal(record.error?.title, `Contract call ${kind}`);
      assert.match(record.error?.detail ?? '', new RegExp(`refused as ${kind}`));
      seen.add(`${record.error?.type} ${record.error?.status}`);
    } finally {
      await h.close();
    }
  }
  assert.equal(seen.size, adapterErrorKinds.length, 'no two kinds share an error');
});

test('the facade’s definite refusals over HTTP keep their kind: expired 410, protocol-conflict 409, conflict 409, invalid-input 400', async () => {
  const clock = new SystemClock();
  const answers: [number, AdapterErrorKind][] = [
    [410, 'expired'],
    [409, 'protocol-conflict'],
    [409, 'conflict'],
    [400, 'invalid-input'],
    [403, 'denied'],
    [422, 'unsupported'],
  ];
  for (const [status, kind] of answers) {
    const facade: typeof fetch = async () => Response.json({ kind, description: `refused as ${kind}` }, { status });
    const calls = new HttpContracts({
      endpoint: 'http://127.0.0.1:9',
      credential: { env: 'T' },
      env: { T: 'token' },
      clock,
      fetch: facade,
      retryBudgetMs: 500,
    });
    const h = harness({ clock, invocations: calls });
    try {
      const record = await runToEnd(h, document, {}, `http-fault-${kind}`);
      assert.deepEqual([record.error?.type, record.error?.status], expected[kind], kind);
    } finally {
      await h.close();
    }
  }
});

test('an unavailable facade (503, whatever its body says) is looked up again and then unavailable, never success', async () => {
  const clock = new SystemClock();
  let posts = 0;
  const facade: typeof fetch = async () => {
    posts += 1;
    return Response.json({ kind: 'conflict', description: 'not definite at 503' }, { status: 503 });
  };
  const calls = new HttpContracts({ endpoint: 'http://127.0.0.1:9', credential: { env: 'T' }, env: { T: 'token' }, clock, fetch: facade, retryBudgetMs: 400 });
  const h = harness({ clock, invocations: calls });
  try {
    const record = await runToEnd(h, document, {}, 'http-fault-503');
    assert.deepEqual([record.error?.type, record.error?.status], expected.unavailable);
    assert.ok(posts > 1, `the request was sent again (${posts})`);
  } finally {
    await h.close();
  }
});

test('a poll answered with another operation’s result (decided success) is a protocol conflict, never the call’s success', async () => {
  const clock = new SystemClock();
  const digest = `sha256:${'1'.repeat(64)}`;
  const result = (operationId: string, decided: boolean) => ({
    operationId,
    contract: { id: 'lab.review', version: '1.0.0', digest },
    interaction: 'review',
    invocationKey: 'k',
    phase: decided ? 'settled' : 'active',
    admittedAtMs: 1,
    deadlineMs: 5000,
    decision: decided ? { outcome: 'success', reason: 'threshold', closedAtMs: 2, successVotes: 1, failedUnits: 0, units: 1, threshold: 1 } : null,
    settlement: { status: decided ? 'complete' : 'pending', siblings: [] },
    branches: [],
    output: null,
    outputError: null,
  });
  const other = `op${'f'.repeat(64)}`;
  let asked: string | undefined;
  // The POST answers the call's own operation, pending; every poll answers another, decided.
  const facade: typeof fetch = async (input, init) => {
    if (init?.method === 'POST') {
      const body = JSON.parse(String(init.body)) as { invocationKey: string };
      asked = body.invocationKey;
      return Response.json(result(operationId('alice', digest, body.invocationKey), false), { status: 202, headers: { 'convoke-wait-for': 'decision' } });
    }
    return Response.json(result(other, true), { status: 200, headers: { 'convoke-wait-for': 'decision' } });
  };
  const calls = new HttpContracts({ endpoint: 'http://127.0.0.1:9', credential: { env: 'T' }, env: { T: 'token' }, clock, fetch: facade, retryBudgetMs: 500 });
  const h = harness({ clock, invocations: calls });
  try {
    const record = await runToEnd(h, document, {}, 'poll-other');
    assert.ok(asked, 'the call was made');
    assert.equal(record.status, 'faulted', JSON.stringify(record.output));
    assert.deepEqual([record.error?.type, record.error?.status], [`${sw}communication`, 409]);
    assert.match(record.error?.detail ?? '', new RegExp(other));
  } finally {
    await h.close();
  }
});
