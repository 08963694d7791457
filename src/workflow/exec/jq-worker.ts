/**
 * The jq worker thread (jq.ts): loads jq-wasm once (bounded, jq-bounded.ts) and answers one
 * evaluation per message. It runs apart from the runtime's event loop, so a program that never
 * ends is stopped by terminating this thread, never by waiting for it. A first output larger than
 * the evaluator's resultBytesMax is answered as an error: the runtime never parses or holds it.
 * A failure that is not jq's own (a WebAssembly trap, jq out of its memory bound) is answered as
 * spending the worker: jq.ts stops it, and the next evaluation starts a fresh one.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { limits } from '../../contract/limits.js';
import { loadBoundedJq } from './jq-bounded.js';

interface Request {
  id: number;
  query: string;
  input: string;
  vars: [string, string][];
}

/** What jq.ts passes in workerData. */
export interface JqWorkerData {
  memoryMb: number;
  resultBytesMax: number;
}

/** The answer to one request; `limit` names the bound an evaluation ran into (jq.ts words it). */
export type JqWorkerAnswer = { id: number } & ({ ok: string } | { error: string; spent?: boolean; limit?: 'memoryMb' | 'resultBytesMax' });

const port = parentPort;
if (port) {
  const { memoryMb, resultBytesMax } = workerData as JqWorkerData;
  const jq = await loadBoundedJq({ memoryBytesMax: memoryMb * 1024 * 1024, resultBytesMax, errorBytesMax: limits.expressionErrorBytesMax });
  const answer = (request: Request): JqWorkerAnswer => {
    try {
      const flags = request.vars.flatMap(([name, value]) => ['--argjson', name, value]);
      const outcome = jq.run(request.input, request.query, flags);
      if (outcome.kind === 'error') return { id: request.id, error: outcome.message };
      // Recorded once answered: a result larger than a transition carries is refused here, before the runtime parses it.
      if (outcome.kind === 'oversized') return { id: request.id, error: 'oversized', limit: 'resultBytesMax' };
      const ok = outcome.text === undefined ? 'null' : JSON.stringify(JSON.parse(outcome.text));
      if (ok.length > resultBytesMax || Buffer.byteLength(ok) > resultBytesMax) return { id: request.id, error: 'oversized', limit: 'resultBytesMax' };
      return { id: request.id, ok };
    } catch (error) {
      // Anything but jq's own reported error is a trap in the WebAssembly (a stack overflow, an
      // abort on memory) after which every later call of this instance fails: the worker is
      // spent, and says so.
      const message = String(error).slice(0, limits.expressionErrorBytesMax);
      return { id: request.id, error: message, spent: true, ...(jq.memoryExhausted ? { limit: 'memoryMb' as const } : {}) };
    }
  };
  port.postMessage({ ready: true });
  port.on('message', (request: Request) => port.postMessage(answer(request)));
}
