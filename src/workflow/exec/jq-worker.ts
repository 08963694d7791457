/**
 * The jq worker thread (jq.ts): loads jq-wasm once and answers one evaluation per message. It
 * runs apart from the runtime's event loop, so a program that never ends is stopped by
 * terminating this thread, never by waiting for it. A result larger than
 * limits.expressionResultBytesMax is answered as an error: the runtime never parses or holds it.
 * A failure that is not jq's own (a WebAssembly trap) is answered as spending the worker: jq.ts
 * stops it, and the next evaluation starts a fresh one.
 */
import { parentPort } from 'node:worker_threads';
import { loadJq } from 'jq-wasm';
import { limits } from '../../contract/limits.js';

interface Request {
  id: number;
  query: string;
  input: string;
  vars: [string, string][];
}

const port = parentPort;
if (port) {
  const jq = await loadJq();
  port.postMessage({ ready: true });
  port.on('message', (request: Request) => {
    try {
      const flags = request.vars.flatMap(([name, value]) => ['--argjson', name, value]);
      const outputs = jq.json(request.input, request.query, flags);
      const ok = JSON.stringify(outputs.length === 0 ? null : outputs[0]);
      // Recorded once answered: a result larger than a transition carries is refused here, before the runtime parses it.
      if (ok.length > limits.expressionResultBytesMax || Buffer.byteLength(ok) > limits.expressionResultBytesMax)
        port.postMessage({
          id: request.id,
          error: `the result is larger than ${limits.expressionResultBytesMax} bytes of JSON, the most one recorded value may be`,
        });
      else port.postMessage({ id: request.id, ok });
    } catch (error) {
      const detail = (error as { stderr?: unknown }).stderr;
      // jq's own failure (JqError: a compile or runtime error it reported) leaves jq-wasm as it
      // was; anything else is a trap in the WebAssembly (a stack overflow, an abort on memory)
      // after which every later call of this instance fails: the worker is spent, and says so.
      const spent = !(error instanceof Error && error.name === 'JqError');
      port.postMessage({ id: request.id, error: typeof detail === 'string' && detail.length > 0 ? detail : String(error), spent });
    }
  });
}
