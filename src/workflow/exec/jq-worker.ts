/**
 * The jq worker thread (jq.ts): loads jq-wasm once (bounded, jq-bounded.ts) and answers one
 * evaluation per message, one at a time: each is answered synchronously, in the message's
 * handler, and jq.ts sends the next only once it has the answer, so the thread's CPU time from
 * an evaluation's sending to its answer is that evaluation's (its deadline). It runs apart from
 * the runtime's event loop, so a program that never ends is stopped by terminating this thread,
 * never by waiting for it. A first output larger than the evaluator's resultBytesMax is answered
 * as an error: the runtime never parses or holds it.
 * A failure that is not jq's own (a WebAssembly trap, jq out of its memory bound) is answered as
 * spending the worker: jq.ts stops it, and the next evaluation starts a fresh one.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { limits } from '../../contract/limits.js';
import { loadBoundedJq } from './jq-bounded.js';
import { ownThreadId } from './thread-cpu.js';

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
  /** Tests only (jq.ts stallForTests): before each evaluation the worker waits while its element 0 is 1. */
  stall?: Int32Array;
}

/**
 * Sent once jq is loaded, with the worker's thread id where /proc gives it: jq.ts reads the
 * thread's CPU time by it (thread-cpu.ts) to hold each evaluation to its deadline.
 */
export interface JqWorkerReady {
  ready: true;
  thread?: number;
}

/** The answer to one request; `limit` names the bound an evaluation ran into (jq.ts words it). */
export type JqWorkerAnswer = { id: number } & ({ ok: string } | { error: string; spent?: boolean; limit?: 'memoryMb' | 'resultBytesMax' });

const port = parentPort;
if (port) {
  const { memoryMb, resultBytesMax, stall } = workerData as JqWorkerData;
  const jq = await loadBoundedJq({ memoryBytesMax: memoryMb * 1024 * 1024, resultBytesMax, errorBytesMax: limits.expressionErrorBytesMax });
  const answer = (request: Request): JqWorkerAnswer => {
    // Blocked in a futex wait, the thread uses no CPU: as if the system did not schedule it.
    if (stall !== undefined) Atomics.wait(stall, 0, 1);
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
  const thread = ownThreadId();
  const ready: JqWorkerReady = thread === undefined ? { ready: true } : { ready: true, thread };
  port.postMessage(ready);
  port.on('message', (request: Request) => port.postMessage(answer(request)));
}
