/**
 * jq evaluation for runtime expressions: jq-wasm (pinned to 3.0.0-jq-1.8.2) in worker threads,
 * with a deadline per evaluation. A program that runs past its deadline (a recursive one, a huge
 * range) costs its worker: it is terminated and the next evaluation on it starts a fresh one;
 * the runtime's event loop is never blocked, and no other evaluation fails with it.
 *
 * The deadline is CPU time: what the worker thread spent on the evaluation (read from /proc,
 * thread-cpu.ts), not the wall time since it was sent. Every result, a failure too, is recorded
 * in the instance's log, so an evaluation must not fail only because a loaded machine did not
 * schedule its worker. A worker is still stopped after jqWallCapFactor × the deadline of wall time
 * (stuck, or starved of CPU), and where /proc cannot be read (not Linux) the deadline is wall time.
 *
 * Each evaluation is bounded in memory too (JqWorkerOptions): jq's WebAssembly memory
 * (jq-bounded.ts), the worker's V8 heap (resourceLimits) and the size of its result; one that
 * reaches a bound fails with ExpressionLimitExceeded naming it, and a worker it spent is replaced
 * as after its deadline.
 *
 * Evaluations are queued per principal (the instance's) and served in rotation: when a worker is
 * free, the principal with queued work and the fewest evaluations running goes next, among those
 * the one whose turn is longest past (a principal goes to the back of the rotation when one of
 * its evaluations starts and again when it ends); within a principal, in arrival order. So a
 * principal with a long queue delays another's evaluation by the evaluations already running and
 * at most one per other principal with work, never by its queue.
 *
 * The executor records every result in the instance's log (expression-evaluated), so a
 * recovered or replayed instance never evaluates an expression twice.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { JsonValue } from '../../contract/json.js';
import { AssertionFailure, invalidInput } from '../../contract/errors.js';
import { limits } from '../../contract/limits.js';
import type { JqWorkerAnswer, JqWorkerData, JqWorkerReady } from './jq-worker.js';
import { threadCpu, type ThreadCpu } from './thread-cpu.js';

export interface ExpressionEvaluator {
  /**
   * The first output of `query` on `input` with `vars` bound as `$name`; null when it outputs
   * nothing. `principal` is whose work it is (the instance's principal id): the evaluator shares
   * its time between principals by it.
   */
  evaluate(query: string, input: JsonValue, vars: Readonly<Record<string, JsonValue>>, principal: string): Promise<JsonValue>;
  close(): Promise<void>;
}

/** What an evaluation that failed (compile error, runtime error, a bound of the evaluator) throws. */
export class ExpressionFailure extends Error {
  override readonly name: string = 'ExpressionFailure';
}

/** The evaluator's bounds (JqWorkerOptions) an evaluation may run into. */
export type JqLimit = 'deadlineMs' | 'heapMb' | 'memoryMb' | 'resultBytesMax';

/** An evaluation stopped by one of the evaluator's bounds, named in `limit` and in the message. */
export class ExpressionLimitExceeded extends ExpressionFailure {
  override readonly name: string = 'ExpressionLimitExceeded';
  constructor(
    readonly limit: JqLimit,
    message: string,
  ) {
    super(message);
  }
}

/**
 * An evaluation its worker did not answer within the wall-time cap (jqWallCapFactor × the
 * deadline) while it had spent less than its CPU-time deadline: stuck, or not scheduled on a
 * loaded machine. It fails as any evaluation past its deadline (the interpreter records it so),
 * but it says nothing of the program's input: where nothing is recorded — an event filter matched
 * where the event arrives — the evaluation is not an answer, and is asked again later.
 */
export class ExpressionNotAnswered extends ExpressionLimitExceeded {
  override readonly name: string = 'ExpressionNotAnswered';
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

/** A program as error messages quote it: its first 120 characters. */
const quoted = (query: string): string => JSON.stringify(query.slice(0, 120));

/** One evaluation, queued or running. */
interface Job {
  query: string;
  input: JsonValue;
  vars: Readonly<Record<string, JsonValue>>;
  principal: string;
  resolve: (value: JsonValue) => void;
  reject: (error: Error) => void;
}

/** One worker thread and what runs on it (one evaluation at a time). */
interface Slot {
  worker: Worker | undefined;
  /** Resolves when the worker has loaded jq (the deadline counts evaluation, not start-up). */
  ready: Promise<Worker> | undefined;
  loaded: boolean;
  /** The worker thread's CPU time (thread-cpu.ts), its stat file open until the worker stops; undefined until it has loaded, or where /proc does not give it. */
  cpu: ThreadCpu | undefined;
  /** The evaluation on the worker (id 0 while the worker starts: nothing was sent yet). */
  running: { id: number; job: Job } | undefined;
}

/** A principal's queued evaluations, in arrival order, and how many of its evaluations run now. */
interface Share {
  queued: Job[];
  /** Index of the first queued evaluation in `queued` (taken from the front without shifting the array each time). */
  head: number;
  running: number;
}

/**
 * Worker threads when none are asked for: one per core beside the runtime's own event loop, at
 * least one, at most 4 (each holds its own jq-wasm, about 35 MB, and costs its start-up, so a
 * few suffice: the rotation, not the count, is what keeps one principal from delaying another).
 */
export const defaultJqWorkers = (): number => Math.max(1, Math.min(4, availableParallelism() - 1));

/**
 * The wall time one evaluation may take, as a multiple of its CPU-time deadline: a worker the
 * system gives less than a tenth of a core for that long, or one stuck without using CPU, is
 * stopped as at its deadline.
 */
export const jqWallCapFactor = 10;

/** The least wait (ms) before the worker's CPU time is read again: one clock tick at 100 per second, its step. */
const cpuRecheckMs = 10;

/** How an evaluation's deadline timer ends it; see deadlineCheck. */
type Overrun = 'cpu' | 'wall-cap' | 'wall';

/**
 * What the deadline's timer does when it fires, `wallMs` after the evaluation was sent: look again
 * after `waitMs`, or stop the worker. `cpuMs` is the CPU time the worker has spent on it since,
 * undefined where it cannot be read (then the deadline is wall time: the first timer, at the
 * deadline, stops it). Otherwise the evaluation runs until its CPU time reaches the deadline or
 * its wall time the cap; the next look is when the first of them could be reached, since a thread
 * spends at most as much CPU time as passes.
 */
export function deadlineCheck(deadlineMs: number, cpuMs: number | undefined, wallMs: number): { waitMs: number } | { stop: Overrun } {
  if (cpuMs === undefined) return { stop: 'wall' };
  if (cpuMs >= deadlineMs) return { stop: 'cpu' };
  const capMs = jqWallCapFactor * deadlineMs;
  if (wallMs >= capMs) return { stop: 'wall-cap' };
  return { waitMs: Math.max(cpuRecheckMs, Math.min(deadlineMs - cpuMs, capMs - wallMs)) };
}

/**
 * Tests only: the key of an option holding an Int32Array over a SharedArrayBuffer. Each worker
 * waits (Atomics.wait, using no CPU) before each evaluation while the array's element 0 is 1,
 * standing in for a worker thread the system does not schedule. A symbol, so no configuration
 * (a file, a flag, JSON) can set it.
 */
export const stallForTests: unique symbol = Symbol('jq stallForTests');

export interface JqWorkerOptions {
  /**
   * The CPU time (ms) one evaluation may use on its worker thread, start-up not counted; default
   * 2000. Wall time is capped at jqWallCapFactor times as much. Where the thread's CPU time cannot
   * be read (/proc, Linux only), it is the wall time one evaluation may take. A whole number from 1
   * to what a timer keeps as the wall cap ((2^31 - 1) / jqWallCapFactor, about 2.5 days).
   */
  deadlineMs?: number;
  /** Worker threads, each started when an evaluation finds no other free (1..limits.jqWorkersMax); default defaultJqWorkers(). */
  workers?: number;
  /**
   * The V8 heap of each worker (MiB, its resourceLimits.maxOldGenerationSizeMb): what holds an
   * evaluation's input, variables and result as JavaScript values. A worker that runs out of it
   * dies alone; its evaluation fails. limits.jqHeapMbMin..jqHeapMbMax, default jqHeapMbDefault.
   */
  heapMb?: number;
  /**
   * The WebAssembly memory of each worker's jq (MiB): where jq parses the input and builds every
   * value. An evaluation that needs more fails and spends its worker (jq-bounded.ts).
   * limits.jqMemoryMbMin..jqMemoryMbMax, default jqMemoryMbDefault.
   */
  memoryMb?: number;
  /** The JSON bytes of one result (1..limits.expressionResultBytesMax, the default): a larger one fails the evaluation. */
  resultBytesMax?: number;
  [stallForTests]?: Int32Array;
}

/** `value` when it is a whole number in min..max; otherwise an invalid-input error naming the option. */
function bounded(option: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) throw invalidInput(`jq ${option}: ${value} is not a whole number from ${min} to ${max}`);
  return value;
}

export class JqWorkerEvaluator implements ExpressionEvaluator {
  private readonly deadlineMs: number;
  private readonly heapMb: number;
  private readonly memoryMb: number;
  private readonly resultBytesMax: number;
  private readonly stall: Int32Array | undefined;
  private readonly slots: Slot[];
  private readonly shares = new Map<string, Share>();
  /** The principals with queued evaluations: the rotation, front first (a Map keeps insertion order). */
  private readonly rotation = new Map<string, Share>();
  private queued = 0;
  private running = 0;
  private nextId = 1;
  private idle: (() => void)[] = [];

  constructor(options: JqWorkerOptions = {}) {
    // A whole number of ms a timer can keep as the wall cap too (setTimeout fires at once past 2^31 - 1 ms).
    this.deadlineMs = bounded('deadlineMs', options.deadlineMs ?? 2000, 1, Math.floor((2 ** 31 - 1) / jqWallCapFactor));
    const workers = bounded('workers', options.workers ?? defaultJqWorkers(), 1, limits.jqWorkersMax);
    this.heapMb = bounded('heapMb', options.heapMb ?? limits.jqHeapMbDefault, limits.jqHeapMbMin, limits.jqHeapMbMax);
    this.memoryMb = bounded('memoryMb', options.memoryMb ?? limits.jqMemoryMbDefault, limits.jqMemoryMbMin, limits.jqMemoryMbMax);
    this.resultBytesMax = bounded('resultBytesMax', options.resultBytesMax ?? limits.expressionResultBytesMax, 1, limits.expressionResultBytesMax);
    this.stall = options[stallForTests];
    this.slots = Array.from({ length: workers }, () => ({ worker: undefined, ready: undefined, loaded: false, cpu: undefined, running: undefined }));
  }

  evaluate(query: string, input: JsonValue, vars: Readonly<Record<string, JsonValue>>, principal: string): Promise<JsonValue> {
    const direct = pathValue(query, input, () => vars);
    if (direct !== undefined) return Promise.resolve(direct);
    return new Promise<JsonValue>((resolve, reject) => {
      let share = this.shares.get(principal);
      if (share === undefined) this.shares.set(principal, (share = { queued: [], head: 0, running: 0 }));
      share.queued.push({ query, input, vars, principal, resolve, reject });
      this.queued++;
      if (!this.rotation.has(principal)) this.rotation.set(principal, share);
      this.dispatch();
    });
  }

  /** Starts queued evaluations on free workers, each time the principal whose turn it is. */
  private dispatch(): void {
    while (this.queued > 0) {
      const slot = this.freeSlot();
      if (slot === undefined) return;
      const job = this.nextJob();
      this.queued--;
      this.running++;
      // The slot is taken from now, while its worker starts too: no other evaluation is sent to it meanwhile.
      slot.running = { id: 0, job };
      void this.run(slot, job);
    }
  }

  /** A free worker, one that has loaded jq first (a fresh one costs jq-wasm's start-up). */
  private freeSlot(): Slot | undefined {
    let fallback: Slot | undefined;
    for (const slot of this.slots) {
      if (slot.running !== undefined) continue;
      if (slot.loaded) return slot;
      fallback ??= slot;
    }
    return fallback;
  }

  /**
   * The next evaluation: the first principal in the rotation with the fewest evaluations running.
   * At most one principal per worker has any running, so the walk ends by the workers' count + 1.
   */
  private nextJob(): Job {
    let chosen: [string, Share] | undefined;
    for (const entry of this.rotation) {
      if (chosen === undefined || entry[1].running < chosen[1].running) chosen = entry;
      if (entry[1].running === 0) break;
    }
    if (chosen === undefined) throw new AssertionFailure('jq: an evaluation is counted as queued but no principal holds one');
    const [principal, share] = chosen;
    const job = share.queued[share.head++] as Job;
    // The taken front is dropped once the queue is empty, or once it is most of the array.
    if (share.head === share.queued.length || (share.head > 64 && share.head * 2 > share.queued.length)) {
      share.queued = share.queued.slice(share.head);
      share.head = 0;
    }
    share.running++;
    // Its turn taken, the principal goes to the back (or leaves the rotation with nothing queued).
    this.rotation.delete(principal);
    if (share.queued.length > 0) this.rotation.set(principal, share);
    return job;
  }

  private async run(slot: Slot, job: Job): Promise<void> {
    try {
      job.resolve(await this.once(slot, job));
    } catch (error) {
      job.reject(error instanceof Error ? error : new ExpressionFailure(String(error)));
    } finally {
      slot.running = undefined;
      this.finished(job.principal);
    }
  }

  private finished(principal: string): void {
    this.running--;
    const share = this.shares.get(principal);
    if (share !== undefined) {
      share.running--;
      // Its evaluation ended: the principal goes to the back again, behind any that queued meanwhile.
      if (this.rotation.delete(principal)) this.rotation.set(principal, share);
      else if (share.running === 0) this.shares.delete(principal);
    }
    this.dispatch();
    if (this.queued === 0 && this.running === 0) for (const done of this.idle.splice(0)) done();
  }

  private async once(slot: Slot, job: Job): Promise<JsonValue> {
    const worker = await this.started(slot);
    const id = this.nextId++;
    const { query, input, vars } = job;
    return new Promise<JsonValue>((resolve, reject) => {
      const sentMs = performance.now();
      // The worker runs one evaluation at a time: what its thread spends from here to the answer is this one's.
      const cpu = slot.cpu;
      const cpuAtStartMs = cpu?.readMs();
      const spentMs = (): number | undefined => {
        if (cpu === undefined || cpuAtStartMs === undefined) return undefined;
        const nowMs = cpu.readMs();
        return nowMs === undefined ? undefined : nowMs - cpuAtStartMs;
      };
      const look = (): void => {
        const check = deadlineCheck(this.deadlineMs, spentMs(), performance.now() - sentMs);
        if ('waitMs' in check) return void (timer = setTimeout(look, check.waitMs));
        // Only this evaluation fails: the worker is stopped, the next evaluation on this slot starts a fresh one.
        this.stop(slot);
        const message = `jq evaluation of ${quoted(query)} ${this.overran(check.stop)}`;
        reject(check.stop === 'wall-cap' ? new ExpressionNotAnswered('deadlineMs', message) : new ExpressionLimitExceeded('deadlineMs', message));
      };
      let timer = setTimeout(look, this.deadlineMs);
      slot.running = {
        id,
        job: { ...job, resolve: (value) => (clearTimeout(timer), resolve(value)), reject: (error) => (clearTimeout(timer), reject(error)) },
      };
      const encoded = Object.entries(vars).map(([name, value]): [string, string] => [name, JSON.stringify(value)]);
      worker.postMessage({ id, query, input: JSON.stringify(input), vars: encoded });
    });
  }

  /** How an evaluation stopped at its deadline overran it, as its error says. */
  private overran(how: Overrun): string {
    const deadline = `${this.deadlineMs} ms CPU-time deadline`;
    if (how === 'cpu') return `ran past its ${deadline} (deadlineMs)`;
    if (how === 'wall-cap') return `was not answered within ${jqWallCapFactor * this.deadlineMs} ms of wall time (${jqWallCapFactor} × its ${deadline})`;
    return `ran past its ${this.deadlineMs} ms deadline (deadlineMs), in wall time: its worker's CPU time cannot be read here`;
  }

  private started(slot: Slot): Promise<Worker> {
    if (slot.worker && slot.ready) return slot.ready;
    // No inherited execArgv: a flag meant for the main program (--input-type, --eval) must not stop the worker.
    const workerData: JqWorkerData = {
      memoryMb: this.memoryMb,
      resultBytesMax: this.resultBytesMax,
      ...(this.stall === undefined ? {} : { stall: this.stall }),
    };
    const worker = new Worker(new URL('./jq-worker.js', import.meta.url), {
      execArgv: [],
      workerData,
      // The young generation is left to V8: it is sized from the old one.
      resourceLimits: { maxOldGenerationSizeMb: this.heapMb },
    });
    worker.unref();
    let loaded: (worker: Worker) => void = () => undefined;
    let failed: (error: Error) => void = () => undefined;
    slot.ready = new Promise<Worker>((resolve, reject) => ((loaded = resolve), (failed = reject)));
    slot.loaded = false;
    worker.on('message', (message: JqWorkerAnswer | JqWorkerReady) => {
      if (slot.worker !== worker) return;
      if ('ready' in message) {
        slot.loaded = true;
        slot.cpu?.close();
        slot.cpu = message.thread === undefined ? undefined : threadCpu(message.thread);
        return loaded(worker);
      }
      const running = slot.running;
      if (running === undefined || running.id !== message.id) return;
      if ('ok' in message) return running.job.resolve(JSON.parse(message.ok) as JsonValue);
      // A trap in jq-wasm leaves it unusable: the worker is stopped before the evaluation fails, so the next one starts a fresh worker.
      if (message.spent === true) this.stop(slot);
      running.job.reject(message.limit === undefined ? new ExpressionFailure(message.error) : this.exceeded(message.limit, running.job.query));
    });
    // A worker stopped at its deadline exits later: its one evaluation was already answered, and
    // what runs on its slot now belongs to its successor.
    worker.on('error', (error: Error & { code?: unknown }) => {
      // Out of its heap (resourceLimits), Node stops the worker alone: the runtime stays up.
      const outOfHeap = error.code === 'ERR_WORKER_OUT_OF_MEMORY';
      const failure = (): ExpressionFailure =>
        outOfHeap && slot.running !== undefined
          ? this.exceeded('heapMb', slot.running.job.query)
          : new ExpressionFailure(`the jq worker failed: ${error.message}`);
      failed(failure());
      if (slot.worker === worker) this.lost(slot, failure());
    });
    worker.on('exit', () => {
      failed(new ExpressionFailure('the jq worker exited'));
      if (slot.worker === worker) this.lost(slot, new ExpressionFailure('the jq worker exited'));
    });
    slot.worker = worker;
    return slot.ready;
  }

  /** The error of an evaluation of `query` stopped by `limit` (other than the deadline), naming it and its value. */
  private exceeded(limit: Exclude<JqLimit, 'deadlineMs'>, query: string): ExpressionLimitExceeded {
    const what = {
      heapMb: `needed more than its worker's ${this.heapMb} MiB heap (heapMb)`,
      memoryMb: `needed more than jq's ${this.memoryMb} MiB of memory (memoryMb)`,
      resultBytesMax: `has a result larger than ${this.resultBytesMax} bytes of JSON (resultBytesMax), the most one recorded value may be`,
    }[limit];
    return new ExpressionLimitExceeded(limit, `jq evaluation of ${quoted(query)} ${what}`);
  }

  /** The slot's worker failed or exited by itself: the evaluation running on it (only) fails; the next one starts a fresh worker. */
  private lost(slot: Slot, error: ExpressionFailure): void {
    const running = slot.running;
    this.stop(slot);
    if (running !== undefined && running.id !== 0) running.job.reject(error);
  }

  private stop(slot: Slot): void {
    const worker = slot.worker;
    slot.worker = undefined;
    slot.ready = undefined;
    slot.loaded = false;
    slot.cpu?.close();
    slot.cpu = undefined;
    void worker?.terminate();
  }

  /** Waits until every evaluation queued or running has answered, then stops the workers. */
  async close(): Promise<void> {
    if (this.queued > 0 || this.running > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    for (const slot of this.slots) this.stop(slot);
  }
}
