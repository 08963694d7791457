/**
 * The jq worker thread (jq.ts): loads jq-wasm once and answers one evaluation per message. It
 * runs apart from the runtime's event loop, so a program that never ends is stopped by
 * terminating this thread, never by waiting for it. A result larger than
 * limits.expressionResultBytesMax is answered as an error: the runtime never parses or holds it.
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
      port.postMessage({ id: request.id, error: typeof detail === 'string' && detail.length > 0 ? detail : String(error) });
    }
  });
}
