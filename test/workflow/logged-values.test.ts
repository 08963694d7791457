/**
 * What a step computed is what its log records, so the live instance, its replay and a worker
 * that resumes it see one value. JSON.parse reads an HTTP answer's `1e400` as Infinity and `-0`
 * as -0, and the `yaml` package reads `-0` as -0; JSON.stringify writes them as null and 0. An
 * answer holding a number JSON cannot write is the call's communication error (502), recorded
 * as its answer and catchable; a -0 is taken as the 0 the log holds; an expression result nested
 * deeper than the strict parser reads is the step’s expression error. A member named `__proto__`
 * (an own member to the strict parser, the yaml package and JSON.parse) stays an own member of a
 * value built from the document's expressions, where an assignment would have made it the value's
 * prototype instead.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { digestOf } from '../../src/contract/canonical.js';
import { isAdapterError } from '../../src/contract/errors.js';
import { parseStrict } from '../../src/contract/ijson.js';
import type { JsonObject } from '../../src/contract/json.js';
import { workflowInstanceId } from '../../src/workflow/ids.js';
import { parseDocumentText } from '../../src/workflow/dsl/text.js';
import { harness, runToEnd, yaml } from './support.js';

/** Answers every request with `body` as application/json. */
async function answering(body: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((_request, response) => {
    response.setHeader('content-type', 'application/json');
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const fetching = (name: string, url: string, caught = false) =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }
do:
  - fetch:
${
  caught
    ? `      try:
        - get:
            call: http
            with: { method: get, endpoint: '${url}/' }
      catch:
        errors: { with: { type: https://serverlessworkflow.io/spec/1.0.0/errors/communication } }
        as: failure
        do:
          - note:
              set: { caught: '\${ $failure.status }' }`
    : `      call: http
      with: { method: get, endpoint: '${url}/' }`
}
`);

test('an HTTP answer holding a number JSON cannot write (1e400) faults its call with a communication error naming where, recorded as the answer', async () => {
  const service = await answering('{"ok": 1, "n": [2, 1e400], "m": -1e400}');
  const h = harness();
  try {
    const faulted = await runToEnd(h, fetching('unwritable', service.url), {}, 'unwritable');
    assert.equal(faulted.status, 'faulted');
    assert.equal(faulted.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/communication');
    assert.equal(faulted.error?.status, 502);
    assert.equal(faulted.error?.instance, '/do/0/fetch');
    assert.match(faulted.error?.detail ?? '', /the number Infinity at \/n\/1 has no JSON form/);
    const answer = Object.values(faulted.steps).find((step) => 'error' in step);
    assert.ok(answer && 'error' in answer && answer.error.status === 502, 'the fault is the recorded answer of the call');

    const caught = await runToEnd(h, fetching('caught', service.url, true), {}, 'caught');
    assert.equal(caught.status, 'completed', JSON.stringify(caught.error));
    assert.deepEqual(caught.output, { caught: 502 });
  } finally {
    await h.close();
    await service.close();
  }
});

test('an HTTP answer holding -0 is taken as the 0 its log records', async () => {
  const service = await answering('{"n": -0, "m": [-0.0, 1], "k": -0e5}');
  const h = harness();
  try {
    const done = await runToEnd(h, fetching('negative-zero', service.url), {}, 'negative-zero');
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    const output = done.output as JsonObject;
    assert.ok(Object.is(output.n, 0) && Object.is((output.m as number[])[0], 0) && Object.is(output.k, 0), JSON.stringify(output));
  } finally {
    await h.close();
    await service.close();
  }
});

test('a YAML document says -0 as the 0 its digest and its log hold', async () => {
  const document = parseDocumentText(
    `document: { dsl: '1.0.3', namespace: test, name: zero, version: '1.0.0' }
do:
  - keep:
      set: { n: -0, m: [-0.0] }
`,
    'workflow',
  );
  const h = harness();
  try {
    const done = await runToEnd(h, document, {}, 'zero');
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    const output = done.output as JsonObject;
    assert.ok(Object.is(output.n, 0) && Object.is((output.m as number[])[0], 0), JSON.stringify(output));
  } finally {
    await h.close();
  }
});

test('a member named __proto__ whose value is computed, or that sits beside one, is an own member of the value, as the log holds it', async () => {
  const document = parseDocumentText(
    `document: { dsl: '1.0.3', namespace: test, name: proto, version: '1.0.0' }
do:
  - computed:
      set:
        __proto__: '\${ {x: 1} }'
        y: 2
  - beside:
      set:
        kept: '\${ . }'
        other: { __proto__: { x: 2 }, z: '\${ 3 }' }
  - read:
      set:
        x: '\${ .kept.x }'
        keys: '\${ .kept | keys }'
        computed: '\${ .kept.__proto__ }'
        beside: '\${ .other.__proto__ }'
`,
    'workflow',
  );
  const h = harness();
  try {
    const done = await runToEnd(h, document, {}, 'proto');
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.deepEqual(done.output, { x: null, keys: ['__proto__', 'y'], computed: { x: 1 }, beside: { x: 2 } });
  } finally {
    await h.close();
  }
});

test('a start handed in-process a value no parser makes: -0 is started as 0, an undefined member or Infinity is invalid-input and starts nothing', async () => {
  const h = harness();
  const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: echo, version: '1.0.0' }
do:
  - keep:
      set: '\${ . }'
`);
  try {
    const done = await runToEnd(h, document, { n: -0, m: [-0] }, 'zero-input');
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.ok(Object.is(done.started.input && (done.started.input as JsonObject).n, 0), 'the recorded input holds 0');
    assert.ok(Object.is((done.output as JsonObject).n, 0) && Object.is(((done.output as JsonObject).m as number[])[0], 0), JSON.stringify(done.output));
    for (const [key, input] of [
      ['undefined-member', { a: undefined } as unknown as JsonObject],
      ['infinite', { a: Number.POSITIVE_INFINITY }],
    ] as const) {
      await assert.rejects(
        h.executor.start({ principalId: 'alice', invocationKey: key, document, input }),
        (error: unknown) => isAdapterError(error) && error.kind === 'invalid-input' && /the workflow input/.test(error.message),
      );
      assert.deepEqual(await h.executor.get(workflowInstanceId('alice', digestOf(document), 'echo', key)), undefined, 'nothing started');
    }
  } finally {
    await h.close();
  }
});

test('an expression result nested deeper than a strict reader takes (limits.jsonDepthMax) is the step’s expression error, catchable; one at the bound is recorded', async () => {
  const h = harness();
  try {
    const nesting = yaml(`document: { dsl: '1.0.3', namespace: test, name: nesting, version: '1.0.0' }
do:
  - nest: { set: '\${ reduce range(.n) as $i (0; [.]) }' }
`);
    const deep = await runToEnd(h, nesting, { n: 65 }, 'deep');
    assert.equal(deep.status, 'faulted');
    assert.equal(deep.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/expression');
    assert.equal(deep.error?.status, 400);
    assert.equal(deep.error?.instance, '/do/0/nest');
    assert.match(deep.error?.detail ?? '', /nesting deeper than 64/);
    const fits = await runToEnd(h, nesting, { n: 64 }, 'fits');
    assert.equal(fits.status, 'completed', JSON.stringify(fits.error));
    assert.deepEqual(parseStrict(JSON.stringify(fits.output)), fits.output, 'the recorded output reads back strictly');
  } finally {
    await h.close();
  }
});

test('an HTTP answer of 64 levels is the call’s `response` output’s content, one level down; one of 65 is the call’s communication error', async () => {
  let levels = 64;
  const server = createServer((_request, response) => {
    response.setHeader('content-type', 'application/json');
    response.end('{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: response, version: '1.0.0' }
do:
  - fetch:
      call: http
      with: { method: get, endpoint: '${url}/', output: response }
`);
  const h = harness();
  try {
    const done = await runToEnd(h, document, {}, 'response-64');
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.equal((done.output as JsonObject).statusCode, 200);
    levels = 65;
    const deep = await runToEnd(h, document, {}, 'response-65');
    assert.equal(deep.status, 'faulted');
    assert.equal(deep.error?.status, 502);
    assert.match(deep.error?.detail ?? '', /nesting deeper than 64 in a value held 1 level below the root/);
  } finally {
    await h.close();
    await new Promise((resolve) => server.close(resolve));
  }
});
