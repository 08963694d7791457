/**
 * A workflow's `call: http` reads at most limits.httpContentBytesMax of an answer: the answer is
 * recorded in the instance's log, so a service (or anyone who can answer for it) cannot make an
 * instance hold, or try to write, more than a transition can carry. Past the bound the task
 * faults with a communication error (502) that `try` can catch; up to it the content is taken.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { limits } from '../../src/contract/limits.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { harness, runToEnd, yaml } from './support.js';

const callDocument = (name: string, url: string, size: number) =>
  yaml(`document: { dsl: '1.0.3', namespace: test, name: ${name}, version: '1.0.0' }
do:
  - fetch:
      call: http
      with: { method: get, endpoint: '${url}/?size=${size}' }
      output: { as: '\${ length }' }
`);

test('http call: content up to the bound is taken; past it the task faults with a communication error and nothing of it is recorded', async () => {
  // A JSON string of `size` characters: its content is size + 2 bytes.
  const big = await sizedServer();
  const h = harness();
  try {
    const within = await runToEnd(h, callDocument('within', big.url, limits.httpContentBytesMax - 2), {}, 'within');
    assert.equal(within.status, 'completed', JSON.stringify(within.error));
    assert.equal(within.output, limits.httpContentBytesMax - 2);
    const past = await runToEnd(h, callDocument('past', big.url, limits.httpContentBytesMax - 1), {}, 'past');
    assert.equal(past.status, 'faulted');
    assert.equal(past.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/communication');
    assert.equal(past.error?.status, 502);
    assert.ok(JSON.stringify(await h.executor.get(past.instanceId)).length < 64 * 1024, 'the content is not in the record');
  } finally {
    await h.close();
    await big.close();
  }
});

/** Answers `?size=N` with a JSON string of N characters (N + 2 bytes), sent in chunks without a content-length. */
async function sizedServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    const size = Number(new URL(request.url ?? '/', 'http://x').searchParams.get('size'));
    response.setHeader('content-type', 'application/json');
    response.write('"');
    for (let sent = 0; sent < size; sent += 16 * 1024) response.write('x'.repeat(Math.min(16 * 1024, size - sent)));
    response.end('"');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
