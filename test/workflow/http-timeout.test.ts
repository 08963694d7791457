/**
 * An HTTP request is bounded by the executor's `httpTimeoutMs` (30 s by default), whatever the
 * task's own `timeout`: a service that has not answered by then raises the DSL's timeout error
 * (408, "timeouts during interactions with external services"), not a communication error — it
 * was reached, and did not answer in time.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { harness, runToEnd, yaml } from './support.js';

test('an HTTP request unanswered within the executor’s httpTimeoutMs is a timeout error (408) at the call', async () => {
  const server = createServer((_request, response) => {
    setTimeout(() => response.end('{}'), 2_000).unref();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const h = harness({ httpTimeoutMs: 200 });
  try {
    const document = yaml(`document: { dsl: '1.0.3', namespace: test, name: slow, version: '1.0.0' }
do:
  - slow:
      call: http
      with: { method: get, endpoint: '${base}/slow' }
      timeout: { after: { minutes: 1 } }
`);
    const record = await runToEnd(h, document, {}, 'slow');
    assert.equal(record.status, 'faulted');
    assert.equal(record.error?.type, 'https://serverlessworkflow.io/spec/1.0.0/errors/timeout', JSON.stringify(record.error));
    assert.equal(record.error?.status, 408);
    assert.equal(record.error?.instance, '/do/0/slow');
    assert.match(record.error?.detail ?? '', /200 ms/);
  } finally {
    await h.close();
    await new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));
  }
});
