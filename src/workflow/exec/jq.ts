/**
 * jq evaluation for runtime expressions: jq-wasm (pinned to 3.0.0-jq-1.8.2) in a worker thread,
 * with a deadline per evaluation. A program that runs past its deadline (a recursive one, a huge
 * range) costs the worker: it is terminated and the next evaluation starts a fresh one; the
 * runtime's event loop is never blocked. Evaluations are queued one at a time per worker.
 *
 * The executor records every result in the instance's log (expression-evaluated), so a
 * recovered or replayed instance never evaluates an expression twice.
 */
import { Worker } from 'node:worker_threads';
import type { JsonValue } from '../../contract/json.js';

export interface ExpressionEvaluator {
  /** The first output of `query` on `input` with `vars` bound as `$name`; null when it outputs nothing. */
  evaluate(query: string, input: JsonValue, vars: Readonly<Record<string, JsonValue>>): Promise<JsonValue>;
  close(): Promise<void>;
}

/** What an evaluation that failed (compile error, runtime error, deadline) throws. */
export class ExpressionFailure extends Error {
  override readonly name = 'ExpressionFailure';
}

/** `.a.b` on the input (group 1), `$name.a.b` on a variable (groups 2 and 3), `.` the input itself. */
const simplePath = /^\s*(?:((?:\.[A-Za-z_][A-Za-z0-9_]*)+)|(\$[A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)|\.)\s*$/;
const literals: ReadonlyMap<string, JsonValue> = new Map([
  ['null', null],
  ['true', true],
  ['false', false],
]);
/** Variables jq itself defines, whatever is bound under their names: always asked of jq. */
const jqVariables = new Set(['$__loc__', '$ENV']);

/**
 * A program answered without a round trip to the worker, exactly as jq answers it where that is
 * certain: `null`, `true`, `false`; the input itself (`.`); a path of identifiers from the input
 * (`.a`, `.a.b`) or from a bound variable (`$input.a`, `$context`): a member of an object (null
 * when absent), null on null. Anything else — another program, an unbound variable, a path
 * through an array, a string or a number (a jq error) — is undefined and goes to jq. `vars` is
 * read only for a program that names one.
 */
export function pathValue(query: string, input: JsonValue, vars?: () => Readonly<Record<string, JsonValue>>): JsonValue | undefined {
  const literal = literals.get(query.trim());
  if (literal !== undefined) return literal;
  const match = simplePath.exec(query);
  if (!match) return undefined;
  const [, inputPath, variable, variablePath] = match;
  let value: JsonValue | undefined = input;
  if (variable !== undefined) {
    if (vars === undefined || jqVariables.has(variable)) return undefined;
    const bound = vars();
    const name = variable.slice(1);
    value = Object.hasOwn(bound, name) ? bound[name] : undefined;
    if (value === undefined) return undefined;
  }
  const path = inputPath ?? variablePath ?? '';
  if (path === '') return value;
  for (const name of path.slice(1).split('.')) {
    if (value === null) continue;
    if (typeof value !== 'object' || Array.isArray(value)) return undefined;
    value = Object.hasOwn(value, name) ? (value[name] as JsonValue) : null;
  }
  return value;
}

interface Pending {
  resolve: (value: JsonValue) => void;
  reject: (error: Error) => void;
}

export class JqWorkerEvaluator implements ExpressionEvaluator {
  private worker: Worker | undefined;
  /** Resolves when the current worker has loaded jq (the deadline counts evaluation, not start-up). */
  private ready: Promise<Worker> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: { deadlineMs: number } = { deadlineMs: 2000 }) {}

  evaluate(query: string, input: JsonValue, vars: Readonly<Record<string, JsonValue>>): Promise<JsonValue> {
    const direct = pathValue(query, input, () => vars);
    if (direct !== undefined) return Promise.resolve(direct);
    const run = this.queue.then(() => this.once(query, input, vars));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async once(query: string, input: JsonValue, vars: Readonly<Record<string, JsonValue>>): Promise<JsonValue> {
    const worker = await this.started();
    const id = this.nextId++;
    return new Promise<JsonValue>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.stop();
        reject(new ExpressionFailure(`jq evaluation of ${JSON.stringify(query.slice(0, 120))} ran past its ${this.options.deadlineMs} ms deadline`));
      }, this.options.deadlineMs);
      this.pending.set(id, {
        resolve: (value) => (clearTimeout(timer), resolve(value)),
        reject: (error) => (clearTimeout(timer), reject(error)),
      });
      const encoded = Object.entries(vars).map(([name, value]): [string, string] => [name, JSON.stringify(value)]);
      worker.postMessage({ id, query, input: JSON.stringify(input), vars: encoded });
    });
  }

  private started(): Promise<Worker> {
    if (this.worker && this.ready) return this.ready;
    // No inherited execArgv: a flag meant for the main program (--input-type, --eval) must not stop the worker.
    const worker = new Worker(new URL('./jq-worker.js', import.meta.url), { execArgv: [] });
    worker.unref();
    let loaded: (worker: Worker) => void = () => undefined;
    let failed: (error: Error) => void = () => undefined;
    this.ready = new Promise<Worker>((resolve, reject) => ((loaded = resolve), (failed = reject)));
    worker.on('message', (message: { id: number; ready?: true; ok?: string; error?: string }) => {
      if (message.ready) return loaded(worker);
      const pending = this.pending.get(message.id);
      if (!pending) return;
      this.pending.delete(message.id);
      if (message.ok !== undefined) pending.resolve(JSON.parse(message.ok) as JsonValue);
      else pending.reject(new ExpressionFailure(message.error ?? 'jq failed'));
    });
    // A worker stopped at its deadline exits later: its one evaluation was already answered, and
    // what is pending now belongs to its successor.
    worker.on('error', (error) => {
      failed(new ExpressionFailure(`the jq worker failed: ${error.message}`));
      if (this.worker === worker) this.failAll(error);
    });
    worker.on('exit', () => {
      failed(new ExpressionFailure('the jq worker exited'));
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.failAll(new ExpressionFailure('the jq worker exited'));
    });
    this.worker = worker;
    return this.ready;
  }

  private failAll(error: Error): void {
    for (const [id, pending] of this.pending) {
      this.pending.delete(id);
      pending.reject(error instanceof ExpressionFailure ? error : new ExpressionFailure(error.message));
    }
  }

  private stop(): void {
    const worker = this.worker;
    this.worker = undefined;
    this.ready = undefined;
    void worker?.terminate();
  }

  async close(): Promise<void> {
    await this.queue;
    this.stop();
  }
}
